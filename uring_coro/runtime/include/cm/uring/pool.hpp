#pragma once
/// \file pool.hpp
/// Work that must not run on a ring's thread, and the way its completion comes back to it.
///
///     co_await pool.run(ring, [&] { blocking_call(); });
///
/// The awaiter is the job: it lives in the awaiting coroutine's frame; a worker thread runs it,
/// then post()s the coroutine back onto `ring` (through the ring's eventfd), so the coroutine goes
/// on on its own ring's thread. The pool does not bound its queue: the caller does that first
/// (cm::Admission, a 503 past it).

#include <condition_variable>
#include <coroutine>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "cm/uring/ring.hpp"

namespace cm::uring {

/// One job of a Pool: what to run, and the coroutine to post back to its ring afterwards.
class PoolJob {
 public:
  PoolJob(const PoolJob&) = delete;
  PoolJob& operator=(const PoolJob&) = delete;
  /// On a worker: runs the job, keeping what it throws for the awaiter, then posts the coroutine
  /// back. NOTE: the coroutine may then resume and free this job's frame at once: after post(),
  /// nothing of `this` may be touched.
  void run_and_post() noexcept {
    try {
      work();
    } catch (...) {
      failure_ = std::current_exception();
    }
    ring_.post(waiter_);
  }

 protected:
  explicit PoolJob(Ring& ring) noexcept : ring_(ring) {}
  ~PoolJob() = default;
  virtual void work() = 0;
  Ring& ring_;
  std::exception_ptr failure_;
  std::coroutine_handle<> waiter_;
};

/// A pool of worker threads whose jobs complete back onto the ring that sent them.
class Pool {
 public:
  /// `threads` workers (at least one).
  explicit Pool(unsigned threads);
  /// stop().
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  /// Runs every job already queued, then joins the workers. Call it once every ring that may
  /// submit has stopped submitting. Idempotent.
  void stop();

  /// The awaiter of run(): the job itself.
  template <typename Work>
  class Offload final : public PoolJob {
   public:
    Offload(Pool& pool, Ring& ring, Work work)
        : PoolJob(ring), pool_(pool), work_(std::move(work)) {}
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> waiter) {
      waiter_ = waiter;
      pool_.enqueue(this);
    }
    /// Rethrows what the job threw.
    void await_resume() const {
      if (failure_) std::rethrow_exception(failure_);
    }

   private:
    void work() override { work_(); }
    Pool& pool_;
    Work work_;
  };

  /// co_await run(ring, work): `work()` on a worker, then back on `ring`.
  template <typename Work>
  Offload<Work> run(Ring& ring, Work work) {
    return Offload<Work>(*this, ring, std::move(work));
  }

 private:
  void enqueue(PoolJob* job);
  void work_loop();

  std::mutex mutex_;  // guards queue_ and stopping_
  std::condition_variable ready_;
  std::deque<PoolJob*> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace cm::uring
