#pragma once
/// \file ring.hpp
/// One io_uring, the coroutines it resumes, and one awaitable per operation.
///
/// A coroutine that wants I/O co_awaits an operation (`co_await Send(ring, fd, bytes)`): an
/// Operation, which puts its own address in an SQE's user_data and suspends. Ring::run_once()
/// turns each CQE's user_data back into the Operation and resumes its coroutine. No table, no
/// callback: the awaiter lives in the suspended frame exactly as long as the SQE is in flight.
/// The one SQE that gives many CQEs, a multishot accept, has an Acceptor of its own.
///
/// A Ring belongs to one thread (the kernel sees to it: SINGLE_ISSUER); only post() and wake()
/// may be called from others.

#include <liburing.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <system_error>
#include <utility>
#include <vector>

#include "cm/fd.hpp"
#include "cm/uring/task.hpp"

namespace cm::uring {

/// One io_uring and the coroutines it resumes.
///
/// user_data encoding (every SQE this runtime submits carries one of these):
///   0            nobody waits: the CQE is dropped (OpFor's link timeout, cancel_all()'s cancel)
///   1            the ring's own wake-up poll on its eventfd (post() and wake() from other threads)
///   address | 1  an Acceptor, whose one SQE gives a CQE per connection (see Acceptor::arm())
///   address      an Operation: the awaiter in the suspended coroutine's frame (Operation::prepare)
/// Both kinds of object are aligned (their lowest bit is free) and not null (never 0 or 1).
class Ring {
 public:
  static constexpr std::uint64_t ignored = 0;    ///< user_data: drop the CQE
  static constexpr std::uint64_t wakeup = 1;     ///< user_data: the eventfd poll
  static constexpr std::uint64_t multishot = 1;  ///< user_data: the tag bit of an Acceptor

  /// A ring of `entries` SQEs (a CQ 16 times as big), or std::system_error if the kernel refuses
  /// (see means_unavailable(); with CM_URING_SIMULATE_ENOSYS=1, ENOSYS as an old kernel gives).
  explicit Ring(unsigned entries = 4096);
  /// NOTE: destroy a ring only when spawned() is 0 (every task joined): a task still suspended
  /// has an SQE whose buffers and Operation live in its frame.
  ~Ring();

  /// A free SQE, and `room` - 1 more after it (a linked pair is never split by a submit).
  io_uring_sqe* get_sqe(unsigned room = 1);

  /// A time to wait until, at most (steady_clock is CLOCK_MONOTONIC, as the kernel's waits).
  using Deadline = std::optional<std::chrono::steady_clock::time_point>;
  /// Submits what is queued, waits for at least one completion (or until `until`, if given), and
  /// resumes every waiter whose CQE arrived (and every coroutine post()ed by another thread);
  /// submits every submit_batch.
  void run_once(const Deadline& until = std::nullopt);
  static constexpr unsigned submit_batch = 16;

  /// Starts `task` now; the ring owns it until it ends (spawned() counts it until then). An
  /// exception escaping it is reported on stderr and ends that task only.
  void spawn(Task<void> task);
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
  bool cancelled() const noexcept { return cancelled_; }
  /// Whether completions wait for run_once() (IORING_SETUP_DEFER_TASKRUN; false before Linux 6.1).
  bool deferred() const noexcept { return deferred_; }

  /// Thread-safe: resumes `waiter` on this ring's thread, from its next run_once().
  void post(std::coroutine_handle<> waiter);
  /// Thread-safe: makes the current (or next) run_once() return.
  void wake() { post(std::noop_coroutine()); }

 private:
  void submit(unsigned wait_for, const Deadline& until = std::nullopt);  // enables the ring first
  void dispatch(const io_uring_cqe& cqe);
  void arm_wakeup();
  void on_wakeup();

  io_uring ring_{};
  Fd wakeup_fd_;  // eventfd: other threads write it, the ring polls it
  std::size_t spawned_ = 0;
  bool cancelled_ = false;
  bool deferred_ = false, disabled_ = false;  // DEFER_TASKRUN; R_DISABLED until the 1st submit()
  std::mutex posted_mutex_;  // guards posted_ (and makes the ring neither copyable nor movable)
  std::vector<std::coroutine_handle<>> posted_;
};

/// The state of one SQE in flight: the coroutine that waits, and (after the CQE) the result.
/// Not copyable or movable: the kernel holds its address.
class Operation {
 public:
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;

  /// Once Ring::cancel_all() ran, a cancellable operation does not start: it gives -ECANCELED.
  bool await_ready() noexcept {
    if (cancellable_ && ring_.cancelled()) result_ = -ECANCELED;
    return cancellable_ && ring_.cancelled();
  }
  /// The CQE's result: >= 0 on success, -errno on failure (a value, never an exception).
  int await_resume() const noexcept { return result_; }
  /// Called by the ring with the CQE's result; resumes the waiting coroutine.
  void complete(int result) noexcept {
    result_ = result;
    waiter_.resume();
  }

 protected:
  Operation(Ring& ring, bool cancellable) noexcept : ring_(ring), cancellable_(cancellable) {}
  /// An SQE (with `room` as in Ring::get_sqe) whose CQE will resume `waiter`.
  io_uring_sqe* prepare(std::coroutine_handle<> waiter, unsigned room = 1) {
    waiter_ = waiter;
    io_uring_sqe* sqe = ring_.get_sqe(room);
    io_uring_sqe_set_data(sqe, this);  // user_data: this awaiter, and through it the coroutine
    return sqe;
  }

  Ring& ring_;
  int result_ = 0;
  std::coroutine_handle<> waiter_;
  bool cancellable_;
};

/// An operation of one SQE, which `prep(sqe)` fills in: each operation below is one of these.
/// NOTE: `prep` lives in the awaiter: what it points the SQE at (a timespec, read by the kernel
/// at the submission, later) lives in the frame until the CQE.
template <typename Prep>
struct Op final : Operation {
  Op(Ring& ring, Prep prep, bool cancellable = true)
      : Operation(ring, cancellable), prep(std::move(prep)) {}
  void await_suspend(std::coroutine_handle<> waiter) { prep(prepare(waiter)); }
  Prep prep;
};

/// A duration for the kernel (a negative one counts as zero).
inline __kernel_timespec to_timespec(std::chrono::nanoseconds duration) noexcept {
  const std::int64_t ns = std::max<std::int64_t>(duration.count(), 0);
  return {.tv_sec = ns / 1'000'000'000, .tv_nsec = ns % 1'000'000'000};
}

// The operations: functions named like the awaiter they return (`co_await Nop(ring)`).

/// send(fd, bytes, MSG_NOSIGNAL | flags) -> bytes sent (maybe fewer than asked), or -errno; with
/// MSG_DONTWAIT, -EAGAIN at once when the socket's buffer is full (the kernel does not wait).
/// NOTE: `bytes` must live until the co_await returns.
inline auto Send(Ring& ring, int fd, std::span<const char> bytes, int flags = 0) {
  return Op(ring, [=](auto* sqe) {
    io_uring_prep_send(sqe, fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | flags);
  });
}

/// IORING_OP_TIMEOUT: -ETIME once `duration` has passed (never before), -ECANCELED if cancelled.
/// The kernel counts a duration from the submission; a steady_clock deadline (IORING_TIMEOUT_ABS,
/// CLOCK_MONOTONIC like steady_clock) fires at that point however late the SQE is submitted.
inline auto Timeout(Ring& ring, std::chrono::nanoseconds duration) {
  return Op(ring, [time = to_timespec(duration)](auto* sqe) mutable {
    io_uring_prep_timeout(sqe, &time, 0, 0);
  });
}
inline auto Timeout(Ring& ring, std::chrono::steady_clock::time_point deadline) {
  return Op(ring, [time = to_timespec(deadline.time_since_epoch())](auto* sqe) mutable {
    io_uring_prep_timeout(sqe, &time, 0, IORING_TIMEOUT_ABS);
  });
}

/// close(fd) through the ring -> 0 or -errno. Runs even after cancel_all(): stopping closes.
inline auto Close(Ring& ring, int fd) {
  return Op(
      ring, [=](auto* sqe) { io_uring_prep_close(sqe, fd); }, /*cancellable=*/false);
}

/// IORING_OP_NOP: a round trip through the ring that does nothing -> 0.
inline auto Nop(Ring& ring) {
  return Op(ring, [](auto* sqe) { io_uring_prep_nop(sqe); });
}

/// An operation bounded by `limit`: its SQE, which `prep(sqe)` fills in, linked to an
/// IORING_OP_LINK_TIMEOUT that cancels it when `limit` passes first. Gives what the operation
/// gives, or -ETIME when the limit came first (the kernel cancelled it: -ECANCELED, told apart from
/// a cancel_all() by the ring). RecvFor and SendFor are two of these.
template <typename Prep>
class OpFor final : public Operation {
 public:
  OpFor(Ring& ring, Prep prep, std::chrono::nanoseconds limit) noexcept
      : Operation(ring, true), prep_(std::move(prep)), limit_(to_timespec(limit)) {}
  void await_suspend(std::coroutine_handle<> waiter) {
    io_uring_sqe* op = prepare(waiter, 2);  // 2: the timeout goes in the same submission
    prep_(op);
    op->flags |= IOSQE_IO_LINK;
    io_uring_sqe* timer = ring_.get_sqe();
    io_uring_prep_link_timeout(timer, &limit_, 0);  // read by the kernel at the submission
    io_uring_sqe_set_data64(timer, Ring::ignored);  // its CQE says nothing the operation's won't
  }
  /// The link timeout cancels the operation when it fires (-ECANCELED); else only cancel_all().
  int await_resume() const noexcept {
    return result_ == -ECANCELED && !ring_.cancelled() ? -ETIME : result_;
  }

 private:
  Prep prep_;
  __kernel_timespec limit_;
};

/// recv(fd, buffer) bounded by `limit` (OpFor): the bytes read, 0 when the peer closed, -ETIME
/// when `limit` passed first, or -errno.
/// NOTE: `buffer` must live until the co_await returns (the kernel writes into it until then).
inline auto RecvFor(Ring& ring, int fd, std::span<char> buffer, std::chrono::nanoseconds limit) {
  return OpFor(
      ring, [=](auto* sqe) { io_uring_prep_recv(sqe, fd, buffer.data(), buffer.size(), 0); },
      limit);
}

/// send(fd, bytes, MSG_NOSIGNAL) bounded by `limit` (OpFor): the bytes sent (maybe fewer than
/// asked), -ETIME when the peer took none of them within `limit`, or -errno.
/// NOTE: `bytes` must live until the co_await returns.
inline auto SendFor(Ring& ring, int fd, std::span<const char> bytes,
                    std::chrono::nanoseconds limit) {
  return OpFor(
      ring,
      [=](auto* sqe) { io_uring_prep_send(sqe, fd, bytes.data(), bytes.size(), MSG_NOSIGNAL); },
      limit);
}

/// poll(fd, events) as an IORING_OP_POLL_ADD bounded by `limit` (OpFor): the events that came,
/// -ETIME when `limit` passed first, or -errno. For a socket someone else reads (libpq's).
inline auto PollFor(Ring& ring, int fd, unsigned events, std::chrono::nanoseconds limit) {
  return OpFor(ring, [=](auto* sqe) { io_uring_prep_poll_add(sqe, fd, events); }, limit);
}

/// The connections of `listener`, accepted through one multishot SQE (IORING_ACCEPT_MULTISHOT,
/// Linux 5.19): a CQE per connection, flagged IORING_CQE_F_MORE while the SQE stays armed, so a
/// whole backlog is taken in one loop turn. Where the kernel refuses multishot (-EINVAL), a
/// single-shot accept per connection.
///
/// NOTE: lifetime. The armed SQE holds this object's address: while armed, its owner awaits
/// nothing but next(), and it ends only after next() gave -ECANCELED (the last CQE came then).
/// The destructor terminates if the SQE is still armed: a later CQE would name freed memory.
class Acceptor {
 public:
  /// Arms nothing yet: next() does. CM_URING_SIMULATE_NO_MULTISHOT=1 adds an accept flag no kernel
  /// knows, refused with -EINVAL as before 5.19 (the test of the fallback).
  Acceptor(Ring& ring, int listener);
  ~Acceptor();
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;

  /// co_await next() -> an accepted fd (close-on-exec), or -errno of a failed accept (only the
  /// next call arms the SQE again: pause before it to back off), or -ECANCELED once cancel_all()
  /// ran and the SQE is done.
  auto next() noexcept {
    struct Next {
      Acceptor& self;
      bool await_ready() const noexcept { return self.ring_.cancelled() && !self.armed_; }
      void await_suspend(std::coroutine_handle<> waiter) {
        self.waiter_ = waiter;
        if (!self.armed_ && !self.ring_.cancelled()) self.arm();
      }
      int await_resume() noexcept { return self.ring_.cancelled() ? -ECANCELED : self.result_; }
    };
    return Next{*this};
  }
  /// Whether connections come through a multishot SQE (false once the kernel refused it).
  bool multishot() const noexcept { return multishot_; }
  /// Called by the ring with each CQE of this acceptor's SQE.
  void complete(int result, unsigned flags);

 private:
  void arm();

  Ring& ring_;
  int listener_;
  bool multishot_ = true;
  bool armed_ = false;  // an SQE of ours is in the kernel
  bool simulate_refusal_;
  int result_ = 0;
  std::coroutine_handle<> waiter_;
};

/// Whether a failure of io_uring_queue_init means "io_uring is not available here" (ENOSYS: no
/// io_uring in this kernel; EPERM: kernel.io_uring_disabled or a seccomp filter refused it).
inline bool means_unavailable(const std::system_error& error) noexcept {
  return error.code() == std::errc::function_not_supported ||
         error.code() == std::errc::operation_not_permitted;
}

}  // namespace cm::uring
