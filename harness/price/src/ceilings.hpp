#pragma once
/// \file ceilings.hpp
/// The arithmetic of pricing (DESIGN.md, "The harness"): the ceilings a row cannot exceed while
/// honouring its delay, and the efficiency of a measured throughput against the lowest of them.

#include <optional>
#include <string>
#include <string_view>

namespace cm::price {

/// What limits a row, as known before it runs (plus the CPU ceiling measured earlier).
struct CeilingInputs {
  double connections = 0;         ///< connections actually open during the row
  double mean_delay_ms = 0;       ///< mean wait a request must honour (0: none)
  std::optional<double> threads;  ///< threads a waiting request holds, if it holds one
  std::optional<double> cpu_rps;  ///< the server's own /plaintext rps in the same run
  double compute_us = 0;          ///< CPU a request must burn (/cpu/N), 0 otherwise
  unsigned server_cpus = 1;       ///< CPUs the server may run on
};

/// The ceilings that apply to a row; an absent one does not apply.
struct Ceilings {
  std::optional<double> connection;  ///< connections / mean delay
  std::optional<double> thread;      ///< threads / mean delay
  std::optional<double> cpu;         ///< the CPU ceiling (see compute_ceilings)

  /// The lowest ceiling that applies, if any does.
  std::optional<double> lowest() const;
  /// Which one is lowest: "connections", "threads", "cpu", or "" when none applies.
  std::string bound() const;
};

/// connection = connections / delay and thread = threads / delay (when there is a delay);
/// cpu = the /plaintext rps, or for a request that burns `compute_us` on top of that,
/// 1 / (1 / cpu_rps + compute_us / (1e6 * server_cpus)); with no /plaintext rps measured, a
/// /cpu request's ceiling is server_cpus * 1e6 / compute_us.
Ceilings compute_ceilings(const CeilingInputs& in);

/// rps / the lowest ceiling, or nothing when no ceiling applies.
std::optional<double> efficiency(double rps, const Ceilings& ceilings);

/// Little's law: requests in flight = throughput x mean latency. For a closed-loop load with one
/// request per connection, that is how many connections were actually being served.
double served_connections(double rps, double mean_latency_us);

/// Which server-side resource a waiting request holds, by model kind and route.
enum class ServerKind { blocking, async, peer };

/// What the server was started with, as far as the ceilings care.
struct ServerShape {
  ServerKind kind = ServerKind::async;
  unsigned workers = 64;             ///< the blocking model's pool
  unsigned loops = 1;                ///< an async model's event loops
  unsigned pool = 64;                ///< an async model's offload pool (--blocking-threads)
  std::string offload = "standard";  ///< --offload of an async model
  std::string wait_mode = "timer";   ///< --wait-mode of an async model
};

/// The threads a request to `path` holds while it waits in a server of this shape, or nothing
/// when a waiting request holds no thread (an async timer, a thread per call).
std::optional<double> waiting_threads(const ServerShape& shape, std::string_view path);

}  // namespace cm::price
