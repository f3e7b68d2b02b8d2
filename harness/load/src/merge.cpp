// merge.cpp -- a Result read back from its JSON, and several runs' Results made into one: what
// `cm-load merge` does when one row needs more connections than one process may open.

#include <algorithm>
#include <stdexcept>

#include "load.hpp"

namespace cm::load {
namespace {

using nlohmann::json;

const json& need(const json& j, const char* key) {
  if (!j.contains(key))
    throw std::invalid_argument(std::string("no \"") + key + "\" in the cm-load JSON");
  return j.at(key);
}

Histogram histogram_from(const json& j, const char* key) {
  const json& h = need(need(j, "histograms"), key);
  if (need(h, "layout").get<std::size_t>() != Histogram::bucket_count())
    throw std::invalid_argument(std::string(key) + ": written with another histogram layout");
  return Histogram::from_buckets(
      need(h, "buckets").get<std::vector<std::pair<std::size_t, std::uint64_t>>>(),
      need(h, "min").get<std::uint64_t>(), need(h, "max").get<std::uint64_t>(),
      need(h, "sum").get<long double>());
}

ErrorCounts errors_from(const json& e) {
  return {need(e, "connect").get<std::uint64_t>(), need(e, "reset").get<std::uint64_t>(),
          need(e, "timeout").get<std::uint64_t>(), need(e, "status").get<std::uint64_t>(),
          need(e, "body").get<std::uint64_t>(),    need(e, "early").get<std::uint64_t>()};
}

void read_open_loop(const json& j, Result& r) {
  const json& o = need(j, "open_loop");
  if (o.is_null()) return;
  r.rate = need(o, "rate").get<double>();
  r.poisson = need(o, "arrival") == "poisson";
  r.offered = need(o, "offered").get<std::uint64_t>();
  r.late = need(o, "late").get<std::uint64_t>();
  r.backlog_max = need(o, "backlog_max").get<std::uint64_t>();
  r.unsent = need(o, "unsent").get<std::uint64_t>();
}

/// Whether two runs may be one: the same URL, delay and window length, run at the same time.
void check_mergeable(const Result& a, const Result& b) {
  if (a.url != b.url) throw std::invalid_argument("the runs loaded different URLs");
  const bool same_delay =
      a.delay.has_value() == b.delay.has_value() &&
      (!a.delay || (a.delay->min_ms == b.delay->min_ms && a.delay->max_ms == b.delay->max_ms));
  if (!same_delay) throw std::invalid_argument("the runs asked for different delays");
  if (a.duration_s != b.duration_s)
    throw std::invalid_argument("the runs' windows differ in length");
  if ((a.rate > 0) != (b.rate > 0)) throw std::invalid_argument("an open loop and a closed one");
  const std::int64_t overlap =
      std::min(a.window_end_ns, b.window_end_ns) - std::max(a.window_start_ns, b.window_start_ns);
  if (overlap < static_cast<std::int64_t>(0.9 * a.duration_s * 1e9))
    throw std::invalid_argument("the runs' windows overlap by less than 90%: not run together");
}

/// Adds `b`'s counts to `a` (the figures merge() recomputes afterwards are left alone).
void add_counts(Result& a, const Result& b) {
  a.threads += b.threads;
  a.connections_requested += b.connections_requested;
  a.connections_open += b.connections_open;
  // The addresses the runs used together, from the lowest to the highest (apart ranges abut).
  const unsigned last = std::max(a.first_source + a.source_addresses,
                                 b.first_source + b.source_addresses) - 1;
  a.first_source = std::min(a.first_source, b.first_source);
  a.source_addresses = last - a.first_source + 1;
  a.still_connecting += b.still_connecting;
  a.connect_s = std::max(a.connect_s, b.connect_s);
  for (const auto& [reason, n] : b.connect_failures)
    a.connect_failures[reason] += n;
  a.requests += b.requests;
  a.responses_total += b.responses_total;
  a.unanswered_at_end += b.unanswered_at_end;
  a.drain = a.drain && b.drain;
  a.drain_s = std::max(a.drain_s, b.drain_s);
  a.reconnects += b.reconnects;
  a.errors.add(b.errors);
  a.latency_us.merge(b.latency_us);
  a.overshoot_us.merge(b.overshoot_us);
  a.pace_lag_us.merge(b.pace_lag_us);
  a.client_cpu_s += b.client_cpu_s;
  a.client_cpu_total_s += b.client_cpu_total_s;
  a.client_spin_s += b.client_spin_s;
  a.rate += b.rate;
  a.offered += b.offered;
  a.late += b.late;
  a.backlog_max += b.backlog_max;
  a.unsent += b.unsent;
  a.window_start_ns = std::min(a.window_start_ns, b.window_start_ns);
  a.window_end_ns = std::max(a.window_end_ns, b.window_end_ns);
  a.parts += b.parts;
}

}  // namespace

Result from_json(const json& j) {
  if (!j.is_object() || j.value("tool", "") != "cm-load")
    throw std::invalid_argument("not a cm-load JSON (no \"tool\": \"cm-load\")");
  Result r;
  r.url = need(j, "url").get<std::string>();
  r.threads = need(j, "threads").get<unsigned>();
  r.connections_requested = need(j, "connections_requested").get<unsigned>();
  r.connections_open = need(j, "connections_open").get<unsigned>();
  r.source_addresses = need(j, "source_addresses").get<unsigned>();
  r.first_source = j.value("first_source", 1u);
  r.connect_s = need(j, "connect_s").get<double>();
  for (const auto& [reason, n] : need(j, "connect_failures").items())
    r.connect_failures[reason] = n.get<std::uint64_t>();
  if (const json& d = need(j, "delay_ms"); !d.is_null())
    r.delay = DelayRange{need(d, "min").get<std::uint32_t>(), need(d, "max").get<std::uint32_t>()};
  r.stagger = need(j, "stagger").get<bool>();
  r.stagger_ms = need(j, "stagger_ms").get<double>();
  r.warmup_s = need(j, "warmup_s").get<double>();
  r.duration_s = need(j, "duration_s").get<double>();
  r.requests = need(j, "requests").get<std::uint64_t>();
  r.responses_total = need(j, "responses_total").get<std::uint64_t>();
  r.unanswered_at_end = j.value("unanswered_at_end", std::uint64_t{0});  // absent before --drain
  r.drain = j.value("drain", false);
  r.drain_s = j.value("drain_s", 0.0);
  r.reconnects = need(j, "reconnects").get<std::uint64_t>();
  r.errors = errors_from(need(j, "errors"));
  r.latency_us = histogram_from(j, "latency_us");
  r.overshoot_us = histogram_from(j, "overshoot_us");
  r.pace_lag_us = histogram_from(j, "pace_lag_us");
  r.client_cpu_s = need(j, "client_cpu_s").get<double>();
  r.client_cpu_total_s = need(j, "client_cpu_total_s").get<double>();
  r.client_spin_s = need(j, "client_spin_s").get<double>();
  r.spin_us = need(j, "spin_us").get<double>();
  r.fairness = fairness_of(need(j, "slot_answers").get<std::vector<std::uint64_t>>(),
                           need(j, "max_gap_ms").get<double>());
  r.window_start_ns = need(need(j, "window_ns"), "start").get<std::int64_t>();
  r.window_end_ns = need(need(j, "window_ns"), "end").get<std::int64_t>();
  r.parts = need(j, "parts").get<unsigned>();
  read_open_loop(j, r);
  return r;
}

Result merge(const std::vector<Result>& runs) {
  if (runs.empty()) throw std::invalid_argument("nothing to merge");
  Result merged = runs.front();
  std::vector<std::uint64_t> answers = merged.fairness.answers;
  double max_gap_ms = merged.fairness.max_gap_ms;
  for (std::size_t i = 1; i < runs.size(); ++i) {
    check_mergeable(runs.front(), runs[i]);
    add_counts(merged, runs[i]);
    answers.insert(answers.end(), runs[i].fairness.answers.begin(), runs[i].fairness.answers.end());
    max_gap_ms = std::max(max_gap_ms, runs[i].fairness.max_gap_ms);
  }
  merged.fairness = fairness_of(std::move(answers), max_gap_ms);
  return merged;
}

}  // namespace cm::load
