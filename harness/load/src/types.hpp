#pragma once
/// \file types.hpp
/// What load (the run) and worker (one event loop) both speak of: the delay a request asks for,
/// when a slot sends its first request with --stagger, and the errors an answer is counted under.
/// Here so that worker.hpp needs nothing of load.hpp, and load depends on worker, never the
/// reverse.

#include <cstdint>
#include <string_view>

namespace cm::load {

/// The delay substituted for `{ms}`: fixed (min == max) or uniform per request in [min, max].
struct DelayRange {
  std::uint32_t min_ms = 0;
  std::uint32_t max_ms = 0;
  /// Parses "10" or "10:90". Throws std::invalid_argument with a one-line reason.
  static DelayRange parse(std::string_view text);
  double mean() const { return (static_cast<double>(min_ms) + max_ms) / 2.0; }
};

/// Errors by kind. Each failed answer counts once, under the first check it fails, in the order
/// status, body, early. A response that is not HTTP counts as `status`.
struct ErrorCounts {
  std::uint64_t connect = 0;  ///< a connection could not be opened (or reopened)
  std::uint64_t reset = 0;    ///< the server closed or reset a connection it had not said it would
  std::uint64_t timeout = 0;  ///< no complete answer within --timeout
  std::uint64_t status = 0;   ///< a status other than the expected one, or not HTTP at all
  std::uint64_t body = 0;     ///< a body other than the expected one
  std::uint64_t early = 0;    ///< answered before its own delay: a violation, never a fast result
  std::uint64_t total() const { return connect + reset + timeout + status + body + early; }
  void add(const ErrorCounts& o);
};

/// When connection `slot` (0 .. connections - 1) sends its first request with --stagger, in ns
/// after the connect phase: slot * spread_ns / connections, rounded down (0 for the first, and
/// the last one a step short of the spread).
std::int64_t first_request_offset_ns(unsigned slot, unsigned connections,
                                     std::int64_t spread_ns) noexcept;

}  // namespace cm::load
