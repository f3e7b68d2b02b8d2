#include "ceilings.hpp"

#include <algorithm>

namespace cm::price {

std::optional<double> Ceilings::lowest() const {
  std::optional<double> low;
  for (const auto& c : {connection, thread, cpu}) {
    if (c && (!low || *c < *low)) low = c;
  }
  return low;
}

std::string Ceilings::bound() const {
  const auto low = lowest();
  if (!low) return "";
  if (connection && *connection == *low) return "connections";
  if (thread && *thread == *low) return "threads";
  return "cpu";
}

Ceilings compute_ceilings(const CeilingInputs& in) {
  Ceilings out;
  if (in.mean_delay_ms > 0) {
    const double delay_s = in.mean_delay_ms / 1000.0;
    out.connection = in.connections / delay_s;
    if (in.threads) out.thread = *in.threads / delay_s;
  }
  const double cpus = std::max(1u, in.server_cpus);
  if (in.compute_us > 0) {
    const double work_s = in.compute_us / 1e6 / cpus;  // CPU capacity each request takes
    out.cpu = in.cpu_rps && *in.cpu_rps > 0 ? 1.0 / (1.0 / *in.cpu_rps + work_s) : 1.0 / work_s;
  } else if (in.cpu_rps && *in.cpu_rps > 0) {
    out.cpu = in.cpu_rps;
  }
  return out;
}

std::optional<double> efficiency(double rps, const Ceilings& ceilings) {
  const auto low = ceilings.lowest();
  if (!low || *low <= 0) return std::nullopt;
  return rps / *low;
}

double served_connections(double rps, double mean_latency_us) {
  return rps * mean_latency_us / 1e6;
}

std::optional<double> waiting_threads(const ServerShape& shape, std::string_view path) {
  const bool is_delay = path.starts_with("/delay/");
  const bool is_block = path.starts_with("/block/");
  switch (shape.kind) {
    case ServerKind::blocking:
      // A worker sleeps through /delay and /block alike, and serves one connection at a time.
      if (is_delay || is_block) return shape.workers;
      return std::nullopt;
    case ServerKind::async:
      if (is_delay) {
        // The anti-pattern sleeps on the loop: each loop is then one waiting request.
        if (shape.wait_mode == "sleep") return shape.loops;
        return std::nullopt;
      }
      if (is_block) {
        if (shape.offload == "inline") return shape.loops;   // the blocking call stalls the loop
        if (shape.offload == "thread") return std::nullopt;  // a new thread per call
        return shape.pool;                                   // standard and pool
      }
      return std::nullopt;
    case ServerKind::peer:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace cm::price
