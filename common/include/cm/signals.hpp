#pragma once
/// \file signals.hpp
/// SIGINT/SIGTERM as a value one thread waits for, instead of an async handler.

#include <chrono>
#include <csignal>

namespace cm {

/// Blocks SIGINT and SIGTERM (and ignores SIGPIPE) in the calling thread and every thread it
/// starts afterwards. Call it first in main(), before any server thread exists.
class StopSignals {
 public:
  StopSignals();
  /// Waits until SIGINT or SIGTERM arrives; returns its number.
  int wait() const;
  /// The same, for at most `limit`; 0 if none came.
  int wait_for(std::chrono::milliseconds limit) const;

 private:
  sigset_t set_;
};

/// Ignores SIGPIPE for the process: a write to a closed connection is an EPIPE error value for
/// that connection, never a signal that kills the server.
void ignore_sigpipe() noexcept;

}  // namespace cm
