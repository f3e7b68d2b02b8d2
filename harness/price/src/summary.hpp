#pragma once
/// \file summary.hpp
/// What the tables show of a row measured over several rounds: each figure's median and min-max,
/// ratios to a peer taken within a round, and the flags a reader must not miss (a spread above
/// 10%, starved connections, a staggered start that could not be had). Pure: reads RowResults.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rounds.hpp"
#include "runner.hpp"

namespace cm::price {

/// A row over its rounds. Figures are over the measured rounds; an absent one was measured in none
/// (or, for the fairness figures, this cm-load does not report them).
struct RowSummary {
  std::size_t rounds = 0;                   ///< asked for
  std::size_t measured = 0;                 ///< with figures
  std::optional<std::size_t> median_round;  ///< the measured round whose rps is the median
  std::optional<Spread> rps, efficiency, latency_p50_ms, latency_p99_ms, overshoot_p99_ms;
  std::optional<Spread> cpu_ms_per_1k;  ///< server CPU ms per 1,000 answers
  std::optional<Spread> served, server_busy, load_busy, connections_open;
  std::optional<Spread> peak_rss_mib, rss_per_connection_kib;
  std::optional<Spread> connection_ceiling, thread_ceiling, cpu_ceiling;
  std::optional<Spread> lowest_ceiling;             ///< the binding ceiling, round by round
  std::optional<Spread> starved, jain, max_gap_ms;  ///< cm-load's fairness figures
  std::string bound;                        ///< "connections", ...; "a/b" when rounds differ
  long long errors_total = 0;               ///< summed over the measured rounds
  std::map<std::string, long long> errors;  ///< by kind, summed
  std::string start;         ///< "staggered", "together", or "staggered in 1 of 3 rounds"
  std::string not_measured;  ///< why, when no round was measured (the first round's error)
};

/// The summary of a row's rounds.
RowSummary summarize(const RowRounds& row);

/// a's rps over b's (the same row of another server), taken within each round both measured.
std::vector<double> peer_ratios(const RowRounds& a, const RowRounds& b);

/// Whether the row's rps or efficiency varies by more than kSpreadLimit over its rounds.
bool spread_too_wide(const RowSummary& s);

/// The notes about the row as a whole: a spread above 10% (with the load average, steal time and
/// other processes' CPU seen in each round, so a reader knows when the machine was the variable),
/// starved connections (the server served some connections and not others), a staggered start
/// asked for that this cm-load could not give.
std::vector<std::string> row_flags(const RowRounds& row, const RowSummary& s);

/// The notes of the rounds, one line per kind of note: said once when every round said the same;
/// otherwise the median round's text (or the first round's that has it), naming the rounds.
std::vector<std::string> grouped_notes(const RowRounds& row, const RowSummary& s);

/// "1", "1, 3", "1-3": round numbers (from 1) for a reader, from rounds counted from 0.
std::string round_list(const std::vector<std::size_t>& rounds);

}  // namespace cm::price
