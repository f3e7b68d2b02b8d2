// ring.cpp -- the ring, its run loop, and what each operation puts in its SQE.

#include "cm/uring/ring.hpp"

#include <poll.h>
#include <sys/eventfd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace cm::uring {

// --- operations ---------------------------------------------------------------------------------

io_uring_sqe* Operation::prepare(std::coroutine_handle<> waiter) {
  waiter_ = waiter;
  io_uring_sqe* sqe = ring_.get_sqe();
  io_uring_sqe_set_data(sqe, this);  // the CQE finds this awaiter, and through it the coroutine
  return sqe;
}

__kernel_timespec to_timespec(std::chrono::nanoseconds duration) noexcept {
  if (duration.count() < 0) duration = {};
  __kernel_timespec ts{};
  ts.tv_sec = duration.count() / 1'000'000'000;
  ts.tv_nsec = duration.count() % 1'000'000'000;
  return ts;
}

__kernel_timespec to_timespec(std::chrono::steady_clock::time_point deadline) noexcept {
  return to_timespec(std::chrono::nanoseconds(deadline.time_since_epoch()));
}

void RecvFor::await_suspend(std::coroutine_handle<> waiter) {
  // The recv and its link timeout must reach the kernel in the same submission, one after the
  // other: reserve both SQEs first, so that get_sqe() cannot submit between them.
  ring_.reserve(2);
  io_uring_sqe* recv = prepare(waiter);
  io_uring_prep_recv(recv, fd_, buffer_.data(), buffer_.size(), 0);
  recv->flags |= IOSQE_IO_LINK;
  io_uring_sqe* timer = ring_.get_sqe();
  io_uring_prep_link_timeout(timer, &limit_, 0);
  io_uring_sqe_set_data64(timer, Ring::ignored);  // its CQE tells nothing the recv's does not
}

int RecvFor::await_resume() const noexcept {
  // When the link timeout fires, the kernel cancels the recv: -ECANCELED. The only other cancel
  // of a recv is cancel_all(), after which the ring is stopping.
  if (result_ == -ECANCELED && !ring_.cancelled()) return -ETIME;
  return result_;
}

bool means_unavailable(const std::system_error& error) noexcept {
  return error.code() == std::error_code(ENOSYS, std::system_category()) ||
         error.code() == std::error_code(EPERM, std::system_category());
}

// --- the ring -----------------------------------------------------------------------------------

Ring::Ring(unsigned entries) {
  io_uring_params params{};
  // A big CQ: every connection has at most two completions pending, and a CQ that overflows
  // makes submission fail with EBUSY until it is reaped.
  params.flags = IORING_SETUP_CQSIZE;
  params.cq_entries = entries * 16;
  const char* simulate = std::getenv("CM_URING_SIMULATE_ENOSYS");
  const int ret = simulate && std::strcmp(simulate, "1") == 0
                      ? -ENOSYS
                      : io_uring_queue_init_params(entries, &ring_, &params);
  if (ret < 0) throw std::system_error(-ret, std::system_category(), "io_uring_queue_init");
  wakeup_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wakeup_fd_) {
    const int error = errno;
    io_uring_queue_exit(&ring_);
    throw std::system_error(error, std::system_category(), "eventfd");
  }
  arm_wakeup();
}

Ring::~Ring() {
  if (spawned_ != 0) {
    std::fprintf(stderr, "cm::uring::Ring destroyed with %zu tasks still running\n", spawned_);
  }
  // Only the wake-up poll is left in flight, and a poll holds no memory of ours.
  io_uring_queue_exit(&ring_);
}

io_uring_sqe* Ring::get_sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe) return sqe;
  // The SQ is full: hand what it holds to the kernel, which frees every slot.
  const int ret = io_uring_submit(&ring_);
  if (ret < 0) throw std::system_error(-ret, std::system_category(), "io_uring_submit");
  sqe = io_uring_get_sqe(&ring_);
  if (!sqe) throw std::system_error(EBUSY, std::system_category(), "io_uring_get_sqe");
  return sqe;
}

void Ring::reserve(unsigned count) {
  if (io_uring_sq_space_left(&ring_) >= count) return;
  const int ret = io_uring_submit(&ring_);
  if (ret < 0) throw std::system_error(-ret, std::system_category(), "io_uring_submit");
}

namespace {

/// Whether an io_uring_submit* result is a failure of the ring (not "try again").
bool failed(int ret) noexcept {
  return ret < 0 && ret != -EINTR && ret != -EBUSY && ret != -EAGAIN;
}

}  // namespace

void Ring::run_once() {
  const int ret = io_uring_submit_and_wait(&ring_, 1);
  if (failed(ret))
    throw std::system_error(-ret, std::system_category(), "io_uring_submit_and_wait");
  io_uring_cqe* cqe = nullptr;
  while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
    const std::uint64_t user_data = cqe->user_data;
    const int result = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);  // before resuming: the coroutine may submit and reap again
    dispatch(user_data, result);
    // NOTE: latency. What the resumed coroutines queued (a reply's send, the next recv) goes to
    // the kernel every submit_batch SQEs, not after the last CQE: with thousands of CQEs at once
    // (2,000 timers due together), holding them back made each reply wait for the whole batch,
    // and the waits grew into waves (docs/models/uring_coro.md, "Answering on time").
    if (io_uring_sq_ready(&ring_) >= submit_batch) {
      const int submitted = io_uring_submit(&ring_);
      if (failed(submitted))
        throw std::system_error(-submitted, std::system_category(), "io_uring_submit");
    }
  }
}

void Ring::dispatch(std::uint64_t user_data, int result) {
  switch (user_data) {
    case ignored: return;
    case wakeup: on_wakeup(); return;
    default:
      // NOTE: this Operation is alive: its coroutine is suspended on it until this resume.
      reinterpret_cast<Operation*>(user_data)->complete(result);
  }
}

void Ring::arm_wakeup() {
  // A poll, not a read: nothing of ours is in flight for it, so the ring may be torn down with
  // it pending (a read would need its 8-byte buffer to outlive the ring).
  io_uring_sqe* sqe = get_sqe();
  io_uring_prep_poll_add(sqe, wakeup_fd_.get(), POLLIN);
  io_uring_sqe_set_data64(sqe, wakeup);
}

void Ring::on_wakeup() {
  // Read the counter before taking the queue: a post() after this read either is in the batch
  // taken below or signals again.
  eventfd_t ignored_count;
  (void)::eventfd_read(wakeup_fd_.get(), &ignored_count);
  {
    std::lock_guard lock(posted_mutex_);
    resuming_.swap(posted_);
  }
  arm_wakeup();  // also after cancel_all() cancelled it: pool completions must still come in
  for (std::coroutine_handle<> waiter : resuming_)
    waiter.resume();
  resuming_.clear();
}

void Ring::signal_locked() noexcept {
  (void)::eventfd_write(wakeup_fd_.get(), 1);
}

void Ring::post(std::coroutine_handle<> waiter) {
  // NOTE: the eventfd is written under the lock. Once the ring thread has taken `waiter`, it may
  // finish every task and destroy the ring; a write after unlocking could hit a closed fd.
  std::lock_guard lock(posted_mutex_);
  posted_.push_back(waiter);
  if (posted_.size() == 1) signal_locked();  // the first one wakes the ring; others ride along
}

void Ring::wake() {
  std::lock_guard lock(posted_mutex_);
  signal_locked();
}

void Ring::cancel_all() {
  cancelled_ = true;
  io_uring_sqe* sqe = get_sqe();
  io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
  io_uring_sqe_set_data64(sqe, ignored);
}

// --- spawned tasks ------------------------------------------------------------------------------

/// The owner of a spawned task: starts at once, frees its own frame when the task ends.
struct Ring::Detached {
  struct promise_type : FrameCount {
    Detached get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }  // own() catches everything
  };
};

Ring::Detached Ring::own(Ring& ring, Task<void> task) {
  try {
    co_await std::move(task);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cm::uring: a spawned task failed: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "cm::uring: a spawned task failed\n");
  }
  --ring.spawned_;
}

void Ring::spawn(Task<void> task) {
  ++spawned_;  // before: the task may run to its end (and count itself out) inside own()
  try {
    own(*this, std::move(task));
  } catch (...) {  // only the owner's frame allocation can throw out of own()
    --spawned_;
    throw;
  }
}

}  // namespace cm::uring
