#include "summary.hpp"

#include <algorithm>
#include <functional>
#include <set>

#include "format.hpp"

namespace cm::price {
namespace {

using nlohmann::json;

bool measured(const RowResult& r) {
  return r.error.empty() && r.load.is_object();
}

/// A number cm-load may or may not report (the fairness keys of issue 12).
std::optional<double> optional_number(const json& load, const char* key) {
  if (!load.is_object() || !load.contains(key) || !load[key].is_number()) return std::nullopt;
  return load[key].get<double>();
}

/// Whether a round ran with its connections' first requests spread out: what cm-load says it did
/// when it says so, else whether it was given --stagger.
bool staggered(const RowResult& r) {
  if (r.load.is_object() && r.load.contains("stagger") && r.load["stagger"].is_boolean())
    return r.load["stagger"].get<bool>();
  return r.stagger_passed;
}

std::optional<Spread> over_rounds(const RowRounds& row,
                                  const std::function<std::optional<double>(const RowResult&)>& f) {
  std::vector<double> values;
  for (const auto& r : row.rounds) {
    if (!measured(r)) continue;
    if (auto v = f(r)) values.push_back(*v);
  }
  return spread_of(values);
}

std::string percent_list(const std::vector<double>& shares) {
  std::string out;
  for (double v : shares)
    out += (out.empty() ? "" : ", ") + pct(v, v < 0.1 ? 1 : 0);
  return out;
}

}  // namespace

RowSummary summarize(const RowRounds& row) {
  RowSummary s;
  s.rounds = row.rounds.size();
  std::vector<std::pair<double, std::size_t>> by_rps;
  std::set<std::string> bounds;
  std::vector<std::string> bound_order;
  std::size_t staggered_rounds = 0;
  for (std::size_t k = 0; k < row.rounds.size(); ++k) {
    const RowResult& r = row.rounds[k];
    if (!measured(r)) {
      if (s.not_measured.empty()) s.not_measured = r.error.empty() ? "no figures" : r.error;
      continue;
    }
    ++s.measured;
    by_rps.emplace_back(r.rps, k);
    const std::string b = r.row.cpu_ceiling ? "" : r.ceilings.bound();
    if (!b.empty() && bounds.insert(b).second) bound_order.push_back(b);
    s.errors_total += r.load.at("errors_total").get<long long>();
    for (const auto& [kind, count] : r.load.at("errors").items())
      s.errors[kind] += count.get<long long>();
    if (staggered(r)) ++staggered_rounds;
  }
  if (s.measured > 0) {
    s.not_measured.clear();
    std::sort(by_rps.begin(), by_rps.end());
    s.median_round = by_rps[(by_rps.size() - 1) / 2].second;
  }
  for (const auto& b : bound_order)
    s.bound += (s.bound.empty() ? "" : "/") + b;
  s.start = staggered_rounds == 0            ? "together"
            : staggered_rounds == s.measured ? "staggered"
                                             : "staggered in " + std::to_string(staggered_rounds) +
                                                   " of " + std::to_string(s.measured) + " rounds";

  using R = const RowResult&;
  s.rps = over_rounds(row, [](R r) { return r.rps; });
  s.efficiency = over_rounds(row, [](R r) { return r.efficiency; });
  s.latency_p50_ms =
      over_rounds(row, [](R r) { return r.load.at("latency_us").at("p50").get<double>() / 1000; });
  s.latency_p99_ms =
      over_rounds(row, [](R r) { return r.load.at("latency_us").at("p99").get<double>() / 1000; });
  s.overshoot_p99_ms = over_rounds(
      row, [](R r) { return r.load.at("overshoot_us").at("p99").get<double>() / 1000; });
  s.cpu_ms_per_1k = over_rounds(row, [](R r) -> std::optional<double> {
    const double requests = r.load.value("requests", 0.0);
    if (requests <= 0) return std::nullopt;
    return r.server_cpu_s * 1e6 / requests;
  });
  s.served = over_rounds(row, [](R r) { return r.served; });
  s.server_busy = over_rounds(row, [](R r) { return r.server_busy; });
  s.load_busy = over_rounds(row, [](R r) { return r.load_busy; });
  s.connections_open =
      over_rounds(row, [](R r) { return static_cast<double>(r.connections_open); });
  s.peak_rss_mib = over_rounds(row, [](R r) { return static_cast<double>(r.peak_rss_kib) / 1024; });
  s.rss_per_connection_kib = over_rounds(row, [](R r) -> std::optional<double> {
    if (r.connections_offered <= 0 || r.peak_rss_kib < r.idle_rss_kib) return std::nullopt;
    return static_cast<double>(r.peak_rss_kib - r.idle_rss_kib) / r.connections_offered;
  });
  s.connection_ceiling = over_rounds(row, [](R r) { return r.ceilings.connection; });
  s.thread_ceiling = over_rounds(row, [](R r) { return r.ceilings.thread; });
  s.cpu_ceiling = over_rounds(row, [](R r) { return r.ceilings.cpu; });
  s.lowest_ceiling = over_rounds(row, [](R r) { return r.ceilings.lowest(); });
  s.starved = over_rounds(row, [](R r) { return optional_number(r.load, "starved_connections"); });
  s.jain = over_rounds(row, [](R r) { return optional_number(r.load, "fairness_jain"); });
  s.max_gap_ms = over_rounds(row, [](R r) { return optional_number(r.load, "max_gap_ms"); });
  return s;
}

std::vector<double> peer_ratios(const RowRounds& a, const RowRounds& b) {
  auto rps = [](const RowRounds& row) {
    std::vector<std::optional<double>> out;
    for (const auto& r : row.rounds)
      out.push_back(measured(r) ? std::optional<double>(r.rps) : std::nullopt);
    return out;
  };
  return within_round_ratios(rps(a), rps(b));
}

bool spread_too_wide(const RowSummary& s) {
  return (s.rps && s.rps->n > 1 && s.rps->relative() > kSpreadLimit) ||
         (s.efficiency && s.efficiency->n > 1 && s.efficiency->relative() > kSpreadLimit);
}

std::string round_list(const std::vector<std::size_t>& rounds) {
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "-" + std::to_string(...).
  std::string out;
  for (std::size_t i = 0; i < rounds.size();) {
    std::size_t j = i;
    while (j + 1 < rounds.size() && rounds[j + 1] == rounds[j] + 1)
      ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(rounds[i] + 1);
    if (j >= i + 2) {
      out += '-';
      out += std::to_string(rounds[j] + 1);
    } else if (j == i + 1) {
      out += ", ";
      out += std::to_string(rounds[j] + 1);
    }
    i = j + 1;
  }
  return out;
}

std::vector<std::string> row_flags(const RowRounds& row, const RowSummary& s) {
  std::vector<std::string> flags;
  if (spread_too_wide(s)) {
    std::string text = "spread above " + pct(kSpreadLimit, 0) + " over " +
                       std::to_string(s.measured) + " rounds: rps " + num(s.rps->min) + "–" +
                       num(s.rps->max) + " around a median of " + num(s.rps->median) + " (" +
                       pct(s.rps->relative()) + ")";
    if (s.efficiency)
      text += ", efficiency " + num(s.efficiency->min * 100, 1) + "–" + pct(s.efficiency->max) +
              " (" + pct(s.efficiency->relative()) + ")";
    // The machine in each measured round, in round order, and the round that fell lowest.
    std::vector<double> loads, steals, others;
    std::vector<std::size_t> rounds;
    std::optional<std::size_t> lowest;
    for (std::size_t k = 0; k < row.rounds.size(); ++k) {
      const RowResult& r = row.rounds[k];
      if (!measured(r)) continue;
      rounds.push_back(k);
      if (!lowest || r.rps < row.rounds[*lowest].rps) lowest = k;
      if (r.load_average_1m) loads.push_back(*r.load_average_1m);
      if (r.machine) {
        steals.push_back(r.machine->steal);
        others.push_back(r.machine->others);
      }
    }
    text += ". During rounds " + round_list(rounds) + ", in order:";
    if (loads.size() == rounds.size()) {
      std::string l;
      for (double v : loads)
        l += (l.empty() ? "" : ", ") + num(v, 2);
      text += " load average (1 min) " + l + ";";
    } else {
      text += " load average not read;";
    }
    if (steals.size() == rounds.size()) {
      text += " steal " + percent_list(steals) + " of the CPUs' time; other processes " +
              percent_list(others) + ".";
    } else {
      text += " steal time not read.";
    }
    text += " The lowest rps was round " + std::to_string(*lowest + 1) +
            ". Where the low rounds are those with steal or other processes, the machine was the "
            "variable: rerun on a quiet machine before reading a difference of this size";
    flags.push_back(text);
  }
  if (s.starved && s.starved->max > 0) {
    std::vector<std::size_t> rounds;
    for (std::size_t k = 0; k < row.rounds.size(); ++k) {
      const RowResult& r = row.rounds[k];
      if (!measured(r)) continue;
      if (auto v = optional_number(r.load, "starved_connections"); v && *v > 0) rounds.push_back(k);
    }
    std::string text = "starved connections in " + std::to_string(rounds.size()) + " of " +
                       std::to_string(s.measured) + " rounds (round" +
                       (rounds.size() == 1 ? " " : "s ") + round_list(rounds) + "; median " +
                       num(s.starved->median) + ", at most " + num(s.starved->max) + " of " +
                       num(row.row.connections) + " connections";
    if (s.jain) text += "; Jain's index " + num(s.jain->median, 3);
    text +=
        "): the server served some connections and not others -- cm-load counted connections "
        "that got no answer in the measured window while the rest were answered, so this rps "
        "is what the served connections got, not what every connection got";
    flags.push_back(text);
  }
  if (row.row.stagger) {
    std::size_t missing = 0;
    for (const auto& r : row.rounds)
      if (measured(r) && !staggered(r)) ++missing;
    if (missing > 0)
      flags.push_back(
          "the profile asks for a staggered start (cm-load --stagger), but " +
          std::string(missing == s.measured ? "every round" : std::to_string(missing) + " rounds") +
          " ran without it (this cm-load has no --stagger): the connections started together, "
          "so p99 overshoot is the time to serve a wave of answers, not a timer's lateness");
  }
  return flags;
}

std::vector<std::string> grouped_notes(const RowRounds& row, const RowSummary& s) {
  std::vector<std::string> kinds;
  for (const auto& r : row.rounds)
    for (const auto& n : r.notes)
      if (std::find(kinds.begin(), kinds.end(), n.kind) == kinds.end()) kinds.push_back(n.kind);
  std::vector<std::string> out;
  const bool several = row.rounds.size() > 1;
  for (const auto& kind : kinds) {
    std::vector<std::size_t> rounds;
    std::vector<const std::string*> texts;
    for (std::size_t k = 0; k < row.rounds.size(); ++k) {
      for (const auto& n : row.rounds[k].notes) {
        if (n.kind != kind) continue;
        rounds.push_back(k);
        texts.push_back(&n.text);
        break;
      }
    }
    const bool same = std::all_of(texts.begin(), texts.end(),
                                  [&](const std::string* t) { return *t == *texts[0]; });
    const std::string where =
        rounds.size() == 1 ? "round " + round_list(rounds) : "rounds " + round_list(rounds);
    if (!several) {
      out.push_back(*texts[0]);
    } else if (same) {
      out.push_back((rounds.size() == row.rounds.size() ? "every round" : "in " + where) + ": " +
                    *texts[0]);
    } else {
      // The median round's figures when it has this note, else the first round's that has it.
      std::size_t shown = 0;
      if (s.median_round) {
        for (std::size_t i = 0; i < rounds.size(); ++i)
          if (rounds[i] == *s.median_round) shown = i;
      }
      // With an even count the median is a mean of two rounds: none of them is "the median".
      const bool median = s.median_round && rounds[shown] == *s.median_round && s.measured % 2 == 1;
      out.push_back("in " + where + " (the figures of round " + std::to_string(rounds[shown] + 1) +
                    (median ? ", the median" : "") +
                    "; the others' are in results.json): " + *texts[shown]);
    }
  }
  return out;
}

}  // namespace cm::price
