#pragma once
/// \file policy.hpp
/// How a connection ends and what a failed accept waits for: decisions, sans I/O. A model does the
/// reads, the timer and the close as it is told here.

#include <chrono>
#include <cstddef>

#include "cm/limits.hpp"

namespace cm {

/// Lingering close. After a reply that ends the connection, shut down the write side (the FIN
/// follows the reply), then read and discard what the client still sends until it closes, until
/// deadline() or until linger_max_bytes were read; then close. Closing at once with unread input
/// would make the kernel send a reset, which can destroy the reply before the client reads it.
class Linger {
 public:
  explicit Linger(std::chrono::steady_clock::time_point now) : deadline_(now + linger_timeout) {}
  /// When to stop waiting for the client and close.
  std::chrono::steady_clock::time_point deadline() const { return deadline_; }
  /// After a read that gave `n` (bytes; 0 at the client's EOF; < 0 for an error or the deadline):
  /// whether to read again.
  bool more(long n) {
    if (n <= 0) return false;
    drained_ += static_cast<std::size_t>(n);
    return drained_ < linger_max_bytes;
  }

 private:
  std::chrono::steady_clock::time_point deadline_;
  std::size_t drained_ = 0;
};

/// Accepts a loop takes in one turn when its listener is readable: it drains what the backlog
/// holds (under saturation a loop that takes one connection per turn, while thousands of reads
/// compete for the same turn, leaves new clients in the backlog until they give up), but bounded,
/// so that a flood of connections does not starve the reads of the ones already held either.
/// 1024: under HttpArena's shape (12,000 connections x /delay/10 on one saturated loop) a turn
/// lasts tens of milliseconds, and 64 a turn left asio_coro with 8,165 of 12,000 connections open
/// after 4.7 s and 13,635 timeouts; with 1024 it held all 12,000 after 1.4 s and none timed out.
/// A thousand accepts cost a few milliseconds, a small part of such a turn.
inline constexpr int accepts_per_turn = 1024;

/// After a failed accept with this errno: how long to wait before accepting again. Out of
/// descriptors or kernel memory (EMFILE, ENFILE, ENOBUFS, ENOMEM), 10 ms: the client stays in the
/// backlog, and accepting again at once would spin. Anything else (ECONNABORTED, EINTR, ...) was
/// one client's failure: zero, go on.
std::chrono::milliseconds accept_backoff(int error) noexcept;

}  // namespace cm
