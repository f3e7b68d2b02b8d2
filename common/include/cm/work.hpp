#pragma once
/// \file work.hpp
/// Where the steps of a Plan run, what they do on a thread, and how an offload ends: the
/// decisions every model carries out in its own idiom (DESIGN.md, "What a model may own").

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cm/database.hpp"
#include "cm/routes.hpp"
#include "cm/server.hpp"
#include "cm/trace.hpp"

namespace cm {

/// Where a model runs a step of a Plan.
enum class Venue {
  timer,   ///< a Wait: a real timer; the loop serves others meanwhile
  loop,    ///< on the serving thread itself (with --wait-mode sleep, a Wait sleeps there too)
  pool,    ///< the bounded offload pool, the reply comes back to the loop (503 when full)
  thread,  ///< a new thread per call (aeronet's deferWork), the reply comes back to the loop
  database,  ///< a Query: sent on a connection of the loop's pool, the loop waits for its socket
};

/// The one rule for every async model: Wait -> timer (loop with --wait-mode sleep); Block -> the
/// pool (loop with --offload inline); Compute and Now -> the loop; --offload pool and thread send
/// Block, Compute and Now there. An interim reply (100 Continue) always stays on the loop. A Query
/// goes where `db_mode` says: readiness -> database, blocking -> the loop, pool -> the pool (a
/// server with no database passes blocking: perform() answers 503 at once).
Venue venue(const Plan& plan, WaitMode wait_mode, Offload offload,
            DbMode db_mode = DbMode::blocking) noexcept;

/// After a model's switch over every Venue: a value no case took is a bug (a Venue added and not
/// handled there), never a step to run on the loop by default. Aborts, naming the value.
[[noreturn]] void unhandled(Venue venue) noexcept;

/// With --trace, a step handed away from the serving thread opens a span of its connection: "on a
/// timer", "on the pool", "on a new thread"; the reply ends it. A step run where it is (the loop,
/// a blocking worker) opens none: perform() marks the thread it holds instead.
void trace_venue(Venue venue, Tag tag);

/// "wait 100 ms", "block 100 ms", "cpu 2000 us", "reply 200": a step as a trace names it.
std::string step_name(const Plan& plan);

/// How the work of a step ended.
enum class Outcome {
  done,     ///< answer with the plan's reply
  refused,  ///< the offload was refused (pool full, no thread to be had): answer 503
  stopped,  ///< the server stops and the work was cut short: answer nothing, close
};

/// The reply for a plan whose work ended so: the plan's own, or the 503 of a refused offload.
const Reply& reply_for(const Plan& plan, Outcome outcome);

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

/// Does, on the calling thread, the work a step needs before its reply: a Wait or a Block sleeps
/// through `sleeper`, a Compute burns CPU, a Query blocks in the database's driver and keeps its
/// reply in the plan, a Now does nothing. `done`, or `stopped` if a sleep was interrupted. With a
/// `tag` (--trace), the work is an event on the calling thread.
Outcome perform(Plan& plan, Sleeper& sleeper, Tag tag = {});
/// The same for a plan whose reply nobody reads afterwards (a test's, a benchmark's).
inline Outcome perform(Plan&& plan, Sleeper& sleeper, Tag tag = {}) {
  return perform(plan, sleeper, tag);
}

/// Admission to an offload pool: at most `capacity` jobs running or queued; the next one is
/// refused (and answered 503 with Retry-After). Thread-safe.
class Admission {
 public:
  /// A slot, given back when the ticket goes; an empty ticket is a refusal.
  class Ticket {
   public:
    Ticket() = default;
    explicit Ticket(Admission* admission) noexcept : admission_(admission) {}
    Ticket(Ticket&& other) noexcept : admission_(std::exchange(other.admission_, nullptr)) {}
    Ticket& operator=(Ticket&& other) noexcept {
      if (this != &other) {
        reset();
        admission_ = std::exchange(other.admission_, nullptr);
      }
      return *this;
    }
    ~Ticket() { reset(); }
    explicit operator bool() const noexcept { return admission_ != nullptr; }
    void reset() noexcept {
      if (admission_) std::exchange(admission_, nullptr)->release();
    }

   private:
    Admission* admission_ = nullptr;
  };

  explicit Admission(std::size_t capacity) : capacity_(capacity) {}
  /// A slot, or an empty ticket when all `capacity` are taken.
  Ticket enter() noexcept { return try_acquire() ? Ticket(this) : Ticket(); }
  std::size_t in_use() const noexcept { return in_use_.load(std::memory_order_relaxed); }
  std::size_t capacity() const noexcept { return capacity_; }

 private:
  bool try_acquire() noexcept {
    std::size_t n = in_use_.load(std::memory_order_relaxed);
    do {
      if (n >= capacity_) return false;
    } while (!in_use_.compare_exchange_weak(n, n + 1, std::memory_order_acq_rel));
    return true;
  }
  void release() noexcept { in_use_.fetch_sub(1, std::memory_order_acq_rel); }

  const std::size_t capacity_;
  std::atomic<std::size_t> in_use_{0};
};

/// The threads of --offload thread, one per call (aeronet's deferWork). A reaper thread joins each
/// one as it finishes, so no loop ever waits for a thread's end.
class CallThreads {
 public:
  CallThreads() = default;
  ~CallThreads() { join_all(); }
  CallThreads(const CallThreads&) = delete;
  CallThreads& operator=(const CallThreads&) = delete;

  /// Runs perform(plan) on a new thread, then `resume(outcome)` on that thread: the model's hook
  /// that hands the request back to its own loop (asio::post, uv_async_send, the ring's post).
  /// After `resume` the thread touches nothing of the caller's. Returns false, and calls nothing,
  /// if the system refuses a thread (the caller answers as a refused offload: 503).
  bool start(Plan& plan, Sleeper& sleeper, Tag tag, std::function<void(Outcome)> resume);
  /// Returns once every thread started has finished and been joined, and the reaper too.
  void join_all();
  /// Threads started and not yet joined.
  std::size_t running() const;

 private:
  void reap();
  mutable std::mutex mutex_;
  std::condition_variable changed_;                 ///< a thread finished, or join_all() began
  std::map<std::thread::id, std::thread> running_;  ///< started, not yet joined
  std::vector<std::thread::id> finished_;           ///< returned from their work, to join
  bool stopping_ = false;
  std::thread reaper_;  ///< started with the first call thread
};

}  // namespace cm
