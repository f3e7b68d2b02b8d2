#pragma once
/// \file rounds.hpp
/// Repeated, interleaved rounds (issue 14): the order the runs go in, and what a table shows of a
/// row measured several times -- the median and the min-max -- and ratios taken within a round.
/// Pure functions: no I/O, no clock.
///
/// Why rounds: on a shared VM the CPU's speed drifts from one minute to the next, so one run per
/// row cannot tell a model's difference from the machine's. Each row runs R times; within a round
/// every server runs that row back to back, so a ratio between two servers in one round compares
/// them under the same conditions, and the median of those ratios holds when single runs do not.

#include <cstddef>
#include <optional>
#include <vector>

namespace cm::price {

/// One run of a schedule: row `row` of target `target`, in round `round` (from 0).
struct Step {
  std::size_t row = 0;
  unsigned round = 0;
  std::size_t target = 0;
  friend bool operator==(const Step&, const Step&) = default;
};

/// The order of `n` servers in round `round` (from 0) of `rounds`: the listed order, started
/// floor(round x n / rounds) places along and wrapping round (a cyclic Latin square: with as many
/// rounds as servers, each server runs once in every position). The starting points spread evenly
/// over the rounds, so each server runs early in one round and late in another, and a machine that
/// slows for a minute does not always hit the same server. Throws std::invalid_argument when
/// `rounds` is 0 or `round` >= `rounds`.
std::vector<std::size_t> round_order(std::size_t n, unsigned round, unsigned rounds);

/// Every run of a profile, in the order they go: row by row; for each row, round after round; in
/// each round, every target that runs that row, in round_order over all the targets (a target
/// that does not run the row is left out where it would have been). `runs_row[t][i]` says whether
/// target t runs row i; every `runs_row[t]` has the same size (the number of rows).
/// Throws std::invalid_argument when `rounds` is 0 or the sizes differ.
std::vector<Step> schedule(const std::vector<std::vector<bool>>& runs_row, unsigned rounds);

/// The median of some values: the middle one, or the mean of the two middle ones.
/// Throws std::invalid_argument when there are none.
double median(std::vector<double> values);

/// A figure over its rounds: the median, the least and the greatest, and how many.
struct Spread {
  double median = 0, min = 0, max = 0;
  std::size_t n = 0;
  /// (max - min) / median: 0 when all agree; infinite when they differ around a median of 0.
  double relative() const;
};

/// The spread of the values, or nothing when there are none.
std::optional<Spread> spread_of(const std::vector<double>& values);

/// The values that are present (the rounds where a figure was measured).
std::vector<double> present(const std::vector<std::optional<double>>& values);

/// A row is flagged when its spread, (max - min) / median, is above this (10%).
inline constexpr double kSpreadLimit = 0.10;

/// a[k] / b[k] for each round k where both were measured and b[k] > 0: a ratio between two servers
/// taken within a round, under the same conditions. Rounds beyond the shorter list are left out.
std::vector<double> within_round_ratios(const std::vector<std::optional<double>>& a,
                                        const std::vector<std::optional<double>>& b);

}  // namespace cm::price
