#pragma once
/// \file policy.hpp
/// How a connection ends and what a failed accept waits for: decisions, sans I/O. A model does the
/// reads, the timer and the close as it is told here.

#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>

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

/// What a server says when accepting fails for want of descriptors (EMFILE, ENFILE) or kernel
/// memory (ENOBUFS, ENOMEM), as nginx logs `accept4() failed (24: Too many open files)`: a line at
/// the first failure, then at most one a second, each with the accepts that failed since the last
/// line and the connections open. The clients wait in the listen backlog meanwhile (the model waits
/// accept_backoff() before it accepts again). One for every loop of a server: thread-safe.
class AcceptTrouble {
 public:
  using Clock = std::chrono::steady_clock;
  /// A failed accept with `error` at `now`, `open` connections held, `limit` the descriptors the
  /// process may hold: the line to print, if one is due (never for one client's failure, such as
  /// ECONNABORTED).
  std::optional<std::string> failed(int error, std::size_t open, unsigned long limit,
                                    Clock::time_point now);
  /// failed() now, with the process's limit, printed to stderr when due.
  void report(int error, std::size_t open);

 private:
  std::mutex mutex_;
  std::optional<Clock::time_point> said_;  ///< when the last line was printed
  std::size_t failures_ = 0;               ///< failed accepts since that line
};

/// The descriptors this process may hold (RLIMIT_NOFILE's soft limit).
unsigned long descriptor_limit() noexcept;

/// Raises the soft descriptor limit to the hard one, as Go's runtime does at start: a login
/// shell's soft limit (1,024 on Debian) would leave half of 2,000 clients in the listen backlog.
/// Returns the limit the process runs with.
unsigned long raise_descriptor_limit() noexcept;

/// Whether the process can open one more descriptor now, with `open` connections held: true at
/// once while `open` is far below the limit, else asked of the kernel (a descriptor opened and
/// closed at once). libuv uses it before it takes a connection: out of descriptors,
/// its accept would close the clients waiting in the backlog (its "EMFILE trick").
bool descriptor_free(std::size_t open) noexcept;

}  // namespace cm
