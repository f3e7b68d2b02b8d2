// fairness.cpp -- the fairness figures, computed once at the end of a run from the slots' tallies.

#include "fairness.hpp"

#include <algorithm>

namespace cm::load {

double jain_index(std::span<const std::uint64_t> x) {
  // NOTE: with nobody answered (or nobody to judge) the formula is 0/0. We report 0, not 1: a
  // server that served no connection is not "perfectly fair", and 1.0 beside zero requests would
  // read as a good figure in a table. starved_connections says what happened.
  long double sum = 0, sum_squares = 0;
  for (std::uint64_t v : x) {
    sum += static_cast<long double>(v);
    sum_squares += static_cast<long double>(v) * static_cast<long double>(v);
  }
  if (x.empty() || sum_squares == 0) return 0;
  return static_cast<double>(sum * sum / (static_cast<long double>(x.size()) * sum_squares));
}

Fairness fairness(std::span<const SlotTally> slots, std::int64_t window_start_ns,
                  std::int64_t window_end_ns) {
  Fairness f;
  std::vector<std::uint64_t> counts;
  std::int64_t max_gap_ns = 0;
  for (const SlotTally& s : slots) {
    if (!s.open_in_window) continue;
    counts.push_back(s.answers);
    if (s.answers == 0) ++f.starved;
    const std::int64_t tail = window_end_ns - (s.answers ? s.last_answer_ns : window_start_ns);
    max_gap_ns = std::max({max_gap_ns, s.max_gap_ns, tail});
  }
  f.connections = static_cast<unsigned>(counts.size());
  if (counts.empty()) return f;
  f.jain = jain_index(counts);
  f.max_gap_ms = static_cast<double>(max_gap_ns) / 1e6;
  std::sort(counts.begin(), counts.end());
  f.answers_min = counts.front();
  f.answers_p50 = counts[(counts.size() + 1) / 2 - 1];  // nearest rank: ceil(n / 2)-th
  f.answers_max = counts.back();
  return f;
}

}  // namespace cm::load
