#pragma once
/// \file pool.hpp
/// Work that must not run on a ring's thread, and the way its completion comes back to it.
///
///     bool admitted = co_await pool.run(ring, [&] { blocking_call(); });
///
/// The awaiter is the job: it lives in the awaiting coroutine's frame, a worker thread runs it,
/// then post()s the coroutine back onto `ring` (through the ring's eventfd), so the coroutine goes
/// on on its own ring's thread. At most `capacity` jobs may be running or queued (cm::Admission);
/// beyond that run() does not suspend and gives false (the caller answers 503).
///
///     bool started = co_await on_new_thread(ring, [&] { blocking_call(); });
///
/// does the same with a new std::thread per call (aeronet's deferWork), for comparison.

#include <condition_variable>
#include <coroutine>
#include <deque>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "cm/uring/ring.hpp"
#include "cm/work.hpp"

namespace cm::uring {

/// One job of a Pool: what to run, and the coroutine to post back to its ring afterwards.
class PoolJob {
 public:
  PoolJob(const PoolJob&) = delete;
  PoolJob& operator=(const PoolJob&) = delete;

 protected:
  explicit PoolJob(Ring& ring) noexcept : ring_(ring) {}
  ~PoolJob() = default;
  virtual void work() = 0;
  std::exception_ptr failure_;
  std::coroutine_handle<> waiter_;

 private:
  friend class Pool;
  template <typename>
  friend class OnNewThread;
  /// On a worker: runs the job, keeping what it throws for the awaiter.
  void run() noexcept {
    try {
      work();
    } catch (...) {
      failure_ = std::current_exception();
    }
  }
  /// Hands the coroutine back to its ring.
  /// NOTE: the coroutine may then resume and free this job's frame at once: after post(),
  /// nothing of `this` may be touched.
  void post_back() noexcept { ring_.post(waiter_); }
  Ring& ring_;
};

/// A bounded pool of worker threads whose jobs complete back onto the ring that sent them.
class Pool {
 public:
  /// `threads` workers (at least one); at most `capacity` jobs running or queued.
  Pool(unsigned threads, std::size_t capacity);
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
    bool await_ready() noexcept {
      admitted_ = pool_.admission_.try_acquire();
      return !admitted_;  // refused: do not suspend, await_resume() says false
    }
    void await_suspend(std::coroutine_handle<> waiter) {
      waiter_ = waiter;
      pool_.enqueue(this);
    }
    /// Whether the job was admitted (and has run); rethrows what the job threw.
    bool await_resume() const {
      if (failure_) std::rethrow_exception(failure_);
      return admitted_;
    }

   private:
    void work() override { work_(); }
    Pool& pool_;
    Work work_;
    bool admitted_ = false;
  };

  /// co_await run(ring, work): `work()` on a worker, then back on `ring`. False: the pool is full.
  template <typename Work>
  Offload<Work> run(Ring& ring, Work work) {
    return Offload<Work>(*this, ring, std::move(work));
  }

  /// Jobs running or queued now.
  std::size_t in_use() const noexcept { return admission_.in_use(); }

 private:
  void enqueue(PoolJob* job);
  void work_loop();

  Admission admission_;
  std::mutex mutex_;  // guards queue_ and stopping_
  std::condition_variable ready_;
  std::deque<PoolJob*> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

/// The awaiter of on_new_thread(): a thread of its own for one job.
template <typename Work>
class OnNewThread final : public PoolJob {
 public:
  OnNewThread(Ring& ring, Work work) : PoolJob(ring), work_(std::move(work)) {}
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> waiter) {
    waiter_ = waiter;
    try {
      thread_ = std::thread([this] {
        run();
        post_back();
      });
    } catch (const std::system_error&) {
      return false;  // no thread to be had: go on at once, await_resume() says false
    }
    return true;
  }
  /// Whether a thread ran the job; rethrows what the job threw.
  bool await_resume() {
    if (!thread_.joinable()) return false;
    thread_.join();  // it has posted us back; it is only returning now
    if (failure_) std::rethrow_exception(failure_);
    return true;
  }

 private:
  void work() override { work_(); }
  Work work_;
  std::thread thread_;  // NOTE: lives in the frame, joined before the coroutine goes on
};

/// co_await on_new_thread(ring, work): `work()` on a new thread, then back on `ring`.
template <typename Work>
OnNewThread<Work> on_new_thread(Ring& ring, Work work) {
  return OnNewThread<Work>(ring, std::move(work));
}

}  // namespace cm::uring
