#pragma once
/// \file ring.hpp
/// One io_uring, the coroutines it resumes, and one awaitable per operation.
///
/// A coroutine that wants I/O co_awaits an operation (`co_await Recv(ring, fd, buffer)`). The
/// awaiter is an Operation: it gets an SQE, puts its own address in the SQE's user_data and
/// suspends. Ring::run_once() submits, waits, and for each CQE turns user_data back into the
/// Operation, stores the result and resumes the coroutine. No table, no callback: the awaiter
/// lives in the suspended coroutine's frame, and it stays there exactly as long as the SQE is in
/// flight, because the coroutine cannot go on (and so cannot free it) before the CQE arrives.
///
/// A Ring belongs to one thread; only post() and wake() may be called from others.

#include <liburing.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <span>
#include <system_error>
#include <vector>

#include "cm/fd.hpp"
#include "cm/uring/task.hpp"

namespace cm::uring {

class Ring;

/// The state of one SQE in flight: which coroutine waits, and (after the CQE) the result.
/// It is the awaiter of a co_await, so it lives in the waiting coroutine's frame; its address is
/// the SQE's user_data (see Ring). Not copyable or movable: the kernel holds its address.
class Operation {
 public:
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;

  /// Once Ring::cancel_all() ran, a cancellable operation does not start: it gives -ECANCELED.
  bool await_ready() noexcept;
  /// The CQE's result: >= 0 on success, -errno on failure (a value, never an exception).
  int await_resume() const noexcept { return result_; }

  /// Called by the ring with the CQE's result; resumes the waiting coroutine.
  void complete(int result) noexcept {
    result_ = result;
    waiter_.resume();
  }

 protected:
  Operation(Ring& ring, bool cancellable) noexcept : ring_(ring), cancellable_(cancellable) {}
  /// An SQE whose user_data is this operation, `waiter` being the coroutine to resume.
  io_uring_sqe* prepare(std::coroutine_handle<> waiter);

  Ring& ring_;
  int result_ = 0;

 private:
  std::coroutine_handle<> waiter_;
  bool cancellable_;
};

/// An operation of one SQE, which `prep(sqe)` fills in: each operation below is one of these.
/// NOTE: `prep` lives in the awaiter, so what it holds and points the SQE at (a timespec, read by
/// the kernel when the SQE is submitted, later) lives in the frame until the CQE.
template <typename Prep>
class Op final : public Operation {
 public:
  Op(Ring& ring, Prep prep, bool cancellable = true)
      : Operation(ring, cancellable), prep_(std::move(prep)) {}
  void await_suspend(std::coroutine_handle<> waiter) { prep_(prepare(waiter)); }

 private:
  Prep prep_;
};

/// A relative duration (negative counts as zero), or a point of steady_clock (CLOCK_MONOTONIC, the
/// clock of IORING_TIMEOUT_ABS; a point before its epoch counts as the epoch), for the kernel.
__kernel_timespec to_timespec(std::chrono::nanoseconds duration) noexcept;
__kernel_timespec to_timespec(std::chrono::steady_clock::time_point deadline) noexcept;

// The operations are functions named like the awaiter they return: `co_await Send(ring, fd, s)`.

/// recv(fd, buffer) -> bytes read (0: the peer closed), or -errno.
/// NOTE: `buffer` must live until the co_await returns (the kernel writes into it until then).
inline auto Recv(Ring& ring, int fd, std::span<char> buffer) {
  return Op(ring, [=](io_uring_sqe* sqe) {
    io_uring_prep_recv(sqe, fd, buffer.data(), buffer.size(), 0);
  });
}

/// send(fd, bytes, MSG_NOSIGNAL) -> bytes sent (maybe fewer than asked), or -errno.
/// NOTE: `bytes` must live until the co_await returns.
inline auto Send(Ring& ring, int fd, std::span<const char> bytes) {
  return Op(ring, [=](io_uring_sqe* sqe) {
    io_uring_prep_send(sqe, fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  });
}

/// IORING_OP_TIMEOUT: -ETIME once `duration` has passed (never before), -ECANCELED if cancelled.
/// Given a duration, the kernel counts it from the submission; given a steady_clock deadline
/// (IORING_TIMEOUT_ABS), it fires at that point however late the SQE is submitted.
inline auto Timeout(Ring& ring, std::chrono::nanoseconds duration) {
  return Op(ring, [time = to_timespec(duration)](io_uring_sqe* sqe) mutable {
    io_uring_prep_timeout(sqe, &time, 0, 0);
  });
}
inline auto Timeout(Ring& ring, std::chrono::steady_clock::time_point deadline) {
  return Op(ring, [time = to_timespec(deadline)](io_uring_sqe* sqe) mutable {
    io_uring_prep_timeout(sqe, &time, 0, IORING_TIMEOUT_ABS);
  });
}

/// close(fd) through the ring -> 0 or -errno. Runs even after cancel_all(): stopping closes.
inline auto Close(Ring& ring, int fd) {
  return Op(
      ring, [=](io_uring_sqe* sqe) { io_uring_prep_close(sqe, fd); }, /*cancellable=*/false);
}

/// IORING_OP_NOP: a round trip through the ring that does nothing -> 0.
inline auto Nop(Ring& ring) {
  return Op(ring, [](io_uring_sqe* sqe) { io_uring_prep_nop(sqe); });
}

/// recv(fd, buffer) bounded by `limit`: the recv SQE linked to an IORING_OP_LINK_TIMEOUT. Gives
/// the bytes read, 0 when the peer closed, -ETIME when `limit` passed first, or -errno.
class RecvFor final : public Operation {
 public:
  RecvFor(Ring& ring, int fd, std::span<char> buffer, std::chrono::nanoseconds limit) noexcept
      : Operation(ring, true), fd_(fd), buffer_(buffer), limit_(to_timespec(limit)) {}
  void await_suspend(std::coroutine_handle<> waiter);
  int await_resume() const noexcept;

 private:
  int fd_;
  std::span<char> buffer_;
  __kernel_timespec limit_;  // read by the kernel when the SQE is submitted
};

/// The connections of `listener`, accepted through one multishot SQE (IORING_ACCEPT_MULTISHOT,
/// Linux 5.19): the kernel posts a CQE per connection, flagged IORING_CQE_F_MORE while the SQE
/// stays armed, so a whole backlog is taken in one loop turn (a single-shot accept, armed again
/// after each CQE, takes one connection per turn). Where the kernel refuses multishot (-EINVAL),
/// it falls back to a single-shot accept per connection.
///
/// NOTE: lifetime. The armed SQE holds this object's address, and its CQEs come whether or not a
/// coroutine waits in next(): they queue here. End it only after next() gave -ECANCELED (then the
/// last CQE came); the destructor terminates otherwise, since a later CQE would name freed memory.
class Acceptor {
 public:
  /// Arms nothing yet: the first next() does. For testing the fallback: with
  /// CM_URING_SIMULATE_NO_MULTISHOT=1 in the environment, the multishot SQE also carries an accept
  /// flag no kernel knows, and the kernel refuses it with -EINVAL as one before 5.19 does.
  Acceptor(Ring& ring, int listener);
  ~Acceptor();
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;

  /// co_await next() -> an accepted fd (close-on-exec), or -errno of a failed accept (the SQE is
  /// armed again only by the next call: pause between them to back off), or -ECANCELED once
  /// cancel_all() ran and the SQE is done.
  auto next() noexcept {
    struct Next {
      Acceptor& self;
      bool await_ready() const noexcept { return self.ready(); }
      void await_suspend(std::coroutine_handle<> waiter) { self.wait(waiter); }
      int await_resume() noexcept { return self.take(); }
    };
    return Next{*this};
  }
  /// Whether connections come through a multishot SQE (false once the kernel refused it).
  bool multishot() const noexcept { return multishot_; }
  /// Called by the ring with each CQE of this acceptor's SQE.
  void complete(int result, unsigned flags);

 private:
  bool ready() const noexcept { return cancelled() ? !armed_ : !results_.empty(); }
  bool cancelled() const noexcept;
  void wait(std::coroutine_handle<> waiter);
  int take() noexcept;
  void arm();

  Ring& ring_;
  int listener_;
  bool multishot_ = true;
  bool armed_ = false;  // an SQE of ours is in the kernel
  bool simulate_refusal_;
  std::deque<int> results_;  // CQE results nobody took yet
  std::coroutine_handle<> waiter_;
};

/// Whether a failure of io_uring_queue_init means "io_uring is not available here" (ENOSYS: no
/// io_uring in this kernel; EPERM: kernel.io_uring_disabled or a seccomp filter refused it).
bool means_unavailable(const std::system_error& error) noexcept;

/// One io_uring and the coroutines it resumes.
///
/// user_data encoding (every SQE this runtime submits carries one of these):
///   0             nobody waits; the CQE is dropped (the link timeout of RecvFor, cancel_all()).
///   1             the ring's own wake-up poll on its eventfd (post() and wake() from other
///   threads). address | 1   an Acceptor, whose SQE may give many CQEs (packed in Acceptor::arm()).
///   address       an Operation, the awaiter in the suspended coroutine's frame.
/// Both are aligned, so their lowest bit is free, and not null, so neither is 0 or 1.
class Ring {
 public:
  static constexpr std::uint64_t ignored = 0;    ///< user_data: drop the CQE
  static constexpr std::uint64_t wakeup = 1;     ///< user_data: the eventfd poll
  static constexpr std::uint64_t multishot = 1;  ///< user_data: the tag bit of an Acceptor

  /// Sets up a ring of `entries` SQEs (the CQ holds 16 times as many). Throws std::system_error
  /// ("io_uring_queue_init: ...") if the kernel refuses; see means_unavailable().
  /// For testing the refusal: with CM_URING_SIMULATE_ENOSYS=1 in the environment, the kernel is
  /// not asked and the constructor fails with ENOSYS as an old kernel would.
  explicit Ring(unsigned entries = 4096);
  /// NOTE: destroy a ring only when spawned() is 0 (every task joined): a task still suspended
  /// has an SQE whose buffers and Operation live in its frame.
  ~Ring();
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  /// A free SQE. When the SQ is full it submits what is queued first.
  io_uring_sqe* get_sqe();
  /// Makes room for `count` SQEs in a row (a linked pair must not be split by a submit).
  void reserve(unsigned count);
  /// Hands the kernel what the SQ holds. Throws std::system_error if the ring failed.
  void submit();

  /// Submits what is queued, waits for at least one completion, and resumes every waiter whose
  /// CQE arrived (and every coroutine post()ed by another thread). What the resumed coroutines
  /// queue is submitted every submit_batch SQEs on the way, not only at the next run_once().
  void run_once();
  /// How many SQEs queued by resumed coroutines run_once() lets wait before submitting them.
  static constexpr unsigned submit_batch = 16;

  /// Starts `task` now; the ring owns it until it ends (spawned() counts it until then). An
  /// exception escaping it is reported on stderr and ends that task only.
  void spawn(Task<void> task);
  /// Spawned tasks that have not ended.
  std::size_t spawned() const noexcept { return spawned_; }
  /// Runs the ring until `task` ends, and gives its value or rethrows its exception.
  template <typename T>
  T run(Task<T> task) {
    task.frame_.resume();  // to its first suspension; at its end it transfers to nobody (noop)
    while (!task.frame_.done())
      run_once();
    return task.frame_.promise().take();
  }

  /// Cancels every operation in flight (IORING_ASYNC_CANCEL_ANY, Linux 5.19); from then on a
  /// cancellable operation completes at once with -ECANCELED. This is how a loop stops.
  void cancel_all();
  /// Whether cancel_all() ran.
  bool cancelled() const noexcept { return cancelled_; }

  /// Thread-safe: resumes `waiter` on this ring's thread, from its next run_once().
  void post(std::coroutine_handle<> waiter);
  /// Thread-safe: makes the current (or next) run_once() return.
  void wake();

 private:
  struct Detached;
  static Detached own(Ring& ring, Task<void> task);
  void dispatch(const io_uring_cqe& cqe);
  void arm_wakeup();
  void on_wakeup();
  void signal_locked() noexcept;

  io_uring ring_{};
  Fd wakeup_fd_;  // eventfd: other threads write it, the ring polls it
  std::size_t spawned_ = 0;
  bool cancelled_ = false;
  std::mutex posted_mutex_;  // guards posted_
  std::vector<std::coroutine_handle<>> posted_;
  std::vector<std::coroutine_handle<>> resuming_;  // the ring thread's copy of posted_
};

inline bool Acceptor::cancelled() const noexcept {
  return ring_.cancelled();
}

inline bool Operation::await_ready() noexcept {
  if (cancellable_ && ring_.cancelled()) {
    result_ = -ECANCELED;
    return true;
  }
  return false;
}

}  // namespace cm::uring
