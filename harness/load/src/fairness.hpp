#pragma once
/// \file fairness.hpp
/// Fairness of a run, from each connection's correct answers inside the measured window: how many
/// connections got none, Jain's index over the counts, and the longest any connection waited.
/// A worker keeps one SlotTally per connection (an increment and a timestamp per answer); the
/// figures are computed once, at the end, by the pure functions below.

#include <cstdint>
#include <span>
#include <vector>

namespace cm::load {

/// One connection slot's correct answers inside the window. A slot is one of the --connections:
/// when its connection is reopened (after a reset, a timeout or an announced close) the new one
/// carries on with the same tally, so a client that keeps losing its connection is judged by what
/// it got over the whole window, and the time spent reconnecting counts into its gap.
struct SlotTally {
  std::uint64_t answers = 0;        ///< correct answers completed inside the window
  std::int64_t last_answer_ns = 0;  ///< when the last of them completed (valid if answers > 0)
  /// The longest wait so far: from the window's start to the first answer, or between answers.
  std::int64_t max_gap_ns = 0;
  /// Its connection was open at some instant of the window; only such slots are judged (a slot
  /// that never connected is a connect failure, already reported as one).
  bool open_in_window = false;

  /// Counts an answer completed at `now_ns`, inside the window that began at `window_start_ns`.
  void record(std::int64_t now_ns, std::int64_t window_start_ns) noexcept {
    const std::int64_t since = answers ? last_answer_ns : window_start_ns;
    if (now_ns - since > max_gap_ns) max_gap_ns = now_ns - since;
    last_answer_ns = now_ns;
    ++answers;
    open_in_window = true;
  }
};

/// The fairness figures of a run (README.md, "Fairness").
struct Fairness {
  unsigned connections = 0;       ///< slots open at some instant of the window: the n of the rest
  unsigned starved = 0;           ///< of those, the slots without a single correct answer in it
  double jain = 0;                ///< jain_index() of their answer counts
  double max_gap_ms = 0;          ///< the longest any of them went without an answer in the window
  std::uint64_t answers_min = 0;  ///< answers per connection: the fewest,
  std::uint64_t answers_p50 = 0;  ///< the median (nearest rank: the lower middle for even n),
  std::uint64_t answers_max = 0;  ///< and the most
  /// Every judged slot's answers, in ascending order: what `cm-load merge` computes the figures of
  /// several runs from.
  std::vector<std::uint64_t> answers;
};

/// Jain's fairness index, (sum x)^2 / (n * sum x^2): 1 when every x is equal, k/n when k of the n
/// share evenly and the rest get nothing, 1/n at worst. 0 when `x` is empty or all zero (see
/// fairness.cpp for why not 1).
double jain_index(std::span<const std::uint64_t> x);

/// The figures over the slots open in the window [window_start_ns, window_end_ns). A slot's gap
/// runs from the window's start to its first answer, between answers, and from its last answer
/// to the window's end, so a starved slot's gap is the whole window.
Fairness fairness(std::span<const SlotTally> slots, std::int64_t window_start_ns,
                  std::int64_t window_end_ns);

/// The figures of the judged slots' answer counts and the longest gap among them: the second half
/// of fairness(), and all of `cm-load merge`'s (from the runs' counts and the longest of their
/// gaps).
Fairness fairness_of(std::vector<std::uint64_t> answers, double max_gap_ms);

}  // namespace cm::load
