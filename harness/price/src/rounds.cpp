#include "rounds.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace cm::price {

std::vector<std::size_t> round_order(std::size_t n, unsigned round, unsigned rounds) {
  if (rounds == 0) throw std::invalid_argument("round_order: at least one round");
  if (round >= rounds) throw std::invalid_argument("round_order: round past the last");
  std::vector<std::size_t> order(n);
  if (n == 0) return order;
  const std::size_t start = static_cast<std::size_t>(round) * n / rounds;
  for (std::size_t i = 0; i < n; ++i)
    order[i] = (start + i) % n;
  return order;
}

std::vector<Step> schedule(const std::vector<std::vector<bool>>& runs_row, unsigned rounds) {
  if (rounds == 0) throw std::invalid_argument("schedule: at least one round");
  const std::size_t rows = runs_row.empty() ? 0 : runs_row.front().size();
  for (const auto& t : runs_row)
    if (t.size() != rows)
      throw std::invalid_argument("schedule: every target needs a flag per row");
  std::vector<Step> steps;
  for (std::size_t row = 0; row < rows; ++row) {
    for (unsigned round = 0; round < rounds; ++round) {
      for (std::size_t target : round_order(runs_row.size(), round, rounds)) {
        if (runs_row[target][row]) steps.push_back({row, round, target});
      }
    }
  }
  return steps;
}

double median(std::vector<double> values) {
  if (values.empty()) throw std::invalid_argument("median: no values");
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

double Spread::relative() const {
  if (max == min) return 0;
  if (median == 0) return std::numeric_limits<double>::infinity();
  return (max - min) / std::abs(median);
}

std::optional<Spread> spread_of(const std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return Spread{median(values), *lo, *hi, values.size()};
}

std::vector<double> present(const std::vector<std::optional<double>>& values) {
  std::vector<double> out;
  for (const auto& v : values)
    if (v) out.push_back(*v);
  return out;
}

std::vector<double> within_round_ratios(const std::vector<std::optional<double>>& a,
                                        const std::vector<std::optional<double>>& b) {
  std::vector<double> out;
  for (std::size_t k = 0; k < std::min(a.size(), b.size()); ++k) {
    if (a[k] && b[k] && *b[k] > 0) out.push_back(*a[k] / *b[k]);
  }
  return out;
}

}  // namespace cm::price
