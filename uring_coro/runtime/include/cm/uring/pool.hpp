#pragma once
/// \file pool.hpp
/// Work that must not run on a ring's thread, and the way its completion comes back to it.
///
///     co_await pool.run(ring, [&] { blocking_call(); });
///
/// The awaiter holds the work, in the awaiting coroutine's frame; a worker runs it, then post()s
/// the coroutine back onto `ring` (its eventfd), to go on on its own ring's thread. The pool does
/// not bound its queue: the caller does that first (cm::Admission, a 503 past it).

#include <algorithm>
#include <condition_variable>
#include <coroutine>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

#include "cm/uring/ring.hpp"

namespace cm::uring {

/// A pool of worker threads whose jobs complete back onto the ring that sent them.
class Pool {
 public:
  /// `threads` workers (at least one).
  explicit Pool(unsigned threads) {
    for (unsigned i = 0; i < std::max(threads, 1u); ++i)
      workers_.emplace_back([this](std::stop_token stop) { work_loop(stop); });
  }

  /// Runs every job already queued, then joins the workers. Call it once every ring that may
  /// submit has stopped submitting. Idempotent; destroying the pool does it too (see workers_).
  void stop() { workers_.clear(); }

  /// co_await run(ring, work): `work()` on a worker, then back on `ring`. The awaiter holds
  /// `work` and what it throws (rethrown to the coroutine).
  template <typename Work>
  auto run(Ring& ring, Work work) {
    struct Offload {
      Pool& pool;
      Ring& ring;
      Work work;
      std::exception_ptr failure;
      bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<> waiter) {
        std::lock_guard lock(pool.mutex_);
        pool.queue_.push_back([this, waiter] {  // on a worker
          try {
            work();
          } catch (...) {
            failure = std::current_exception();
          }
          // NOTE: the coroutine may resume and free this awaiter at once: after post(), nothing
          // of `this` may be touched (`ring` is read before the call).
          ring.post(waiter);
        });
        pool.ready_.notify_one();
      }
      void await_resume() const {
        if (failure) std::rethrow_exception(failure);
      }
    };
    return Offload{*this, ring, std::move(work), nullptr};
  }

 private:
  void work_loop(std::stop_token stop) {
    std::unique_lock lock(mutex_);
    // Asked to stop, a worker still runs what is queued: every waiter is posted back.
    while (ready_.wait(lock, stop, [this] { return !queue_.empty(); })) {
      std::function<void()> job = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }

  std::mutex mutex_;  // guards queue_ (and makes a Pool neither copyable nor movable)
  std::condition_variable_any ready_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::jthread> workers_;  // last: the first to go (a jthread stops, then joins)
};

}  // namespace cm::uring
