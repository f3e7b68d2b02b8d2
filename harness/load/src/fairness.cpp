// fairness.cpp -- the fairness figures, computed once at the end of a run from the slots' tallies.

#include "fairness.hpp"

#include <algorithm>
#include <utility>

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
  std::vector<std::uint64_t> counts;
  std::int64_t max_gap_ns = 0;
  for (const SlotTally& s : slots) {
    if (!s.open_in_window) continue;
    counts.push_back(s.answers);
    const std::int64_t tail = window_end_ns - (s.answers ? s.last_answer_ns : window_start_ns);
    max_gap_ns = std::max({max_gap_ns, s.max_gap_ns, tail});
  }
  return fairness_of(std::move(counts), static_cast<double>(max_gap_ns) / 1e6);
}

Fairness fairness_of(std::vector<std::uint64_t> answers, double max_gap_ms) {
  Fairness f;
  f.connections = static_cast<unsigned>(answers.size());
  if (answers.empty()) return f;
  f.starved = static_cast<unsigned>(std::count(answers.begin(), answers.end(), 0u));
  f.jain = jain_index(answers);
  f.max_gap_ms = max_gap_ms;
  std::sort(answers.begin(), answers.end());
  f.answers_min = answers.front();
  f.answers_p50 = answers[(answers.size() + 1) / 2 - 1];  // nearest rank: ceil(n / 2)-th
  f.answers_max = answers.back();
  f.answers = std::move(answers);
  return f;
}

}  // namespace cm::load
