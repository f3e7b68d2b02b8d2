#pragma once
/// \file work.hpp
/// What the `Block` and `Compute` plans do on whatever thread a model runs them, and the bound on
/// how many may wait for an offload pool.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace cm {

/// Burns `duration` of this thread's CPU time (CLOCK_THREAD_CPUTIME_ID): real work, not a sleep,
/// so a thread that is preempted still does the whole amount.
void burn_cpu(std::chrono::microseconds duration) noexcept;

/// A blocking call that a server's stop can cut short: `/block/{ms}` and, in the blocking model,
/// `/delay/{ms}` sleep through it, so stopping a server never waits out a 60 s sleep.
class Sleeper {
 public:
  /// Blocks the calling thread for `duration` (never less) unless interrupt() is called.
  /// Returns false if interrupted.
  bool sleep_for(std::chrono::steady_clock::duration duration);
  /// Wakes every current and future sleeper at once.
  void interrupt();
  bool interrupted() const { return interrupted_.load(std::memory_order_acquire); }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::atomic<bool> interrupted_{false};
};

/// Admission to an offload pool: at most `capacity` jobs running or queued; the next one is
/// refused (and answered 503 with Retry-After). Thread-safe.
class Admission {
 public:
  explicit Admission(std::size_t capacity) : capacity_(capacity) {}
  /// Takes a slot, or returns false when all `capacity` are taken.
  bool try_acquire() noexcept {
    std::size_t n = in_use_.load(std::memory_order_relaxed);
    do {
      if (n >= capacity_) return false;
    } while (!in_use_.compare_exchange_weak(n, n + 1, std::memory_order_acq_rel));
    return true;
  }
  /// Gives a slot back.
  void release() noexcept { in_use_.fetch_sub(1, std::memory_order_acq_rel); }
  std::size_t in_use() const noexcept { return in_use_.load(std::memory_order_relaxed); }
  std::size_t capacity() const noexcept { return capacity_; }

 private:
  const std::size_t capacity_;
  std::atomic<std::size_t> in_use_{0};
};

}  // namespace cm

#include "cm/routes.hpp"

namespace cm {

/// Does, on the calling thread, the work a plan needs before its reply: a `Block` sleeps through
/// `sleeper`, a `Compute` burns CPU, a `Now` does nothing. (A `Wait` is a timer, never done here
/// unless a model runs the sleep anti-pattern.) Returns false if the sleep was interrupted.
bool perform(const Plan& plan, Sleeper& sleeper);

}  // namespace cm
