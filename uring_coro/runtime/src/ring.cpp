// ring.cpp -- the ring and its run loop, spawned tasks and their frames, the multishot Acceptor.

#include "cm/uring/ring.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <utility>

namespace cm::uring {
namespace {

/// Whether the environment asks for a refusal to be simulated (`name`=1), for the tests.
bool simulating(const char* name) {
  const char* value = std::getenv(name);
  return value && std::strcmp(value, "1") == 0;
}

/// Throws unless io_uring_submit* gave a success or a "try again" (-EBUSY, -EAGAIN, -EINTR).
void check(int ret, const char* what) {
  if (ret < 0 && ret != -EINTR && ret != -EBUSY && ret != -EAGAIN)
    throw std::system_error(-ret, std::system_category(), what);
}

/// The owner of a spawned task: starts at once, frees its own frame when the task ends.
struct Detached {
  struct promise_type : FrameCount {
    Detached get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }  // own() catches everything
  };
};

Detached own(Task<void> task, std::size_t& spawned) {
  ++spawned;  // in the frame: if it cannot be allocated, nothing started and nothing is counted
  try {
    co_await std::move(task);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cm::uring: a spawned task failed: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "cm::uring: a spawned task failed\n");
  }
  --spawned;
}

}  // namespace

[[gnu::noinline]] void* FrameCount::operator new(std::size_t size) {
  void* frame = ::operator new(size);
  alive_.fetch_add(1, std::memory_order_relaxed);
  bytes_.fetch_add(size, std::memory_order_relaxed);
  return frame;
}

[[gnu::noinline]] void FrameCount::operator delete(void* frame, std::size_t size) noexcept {
  alive_.fetch_sub(1, std::memory_order_relaxed);
  bytes_.fetch_sub(size, std::memory_order_relaxed);
  ::operator delete(frame);
}

Ring::Ring(unsigned entries) : wakeup_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (!wakeup_fd_) throw std::system_error(errno, std::system_category(), "eventfd");
  // A big CQ: a CQ that overflows makes submission fail with EBUSY until it is reaped.
  // Completions wait for run_once() (DEFER_TASKRUN, Linux 6.1), which needs one issuing thread
  // (SINGLE_ISSUER): the ring starts disabled, and the first thread to submit enables it. Older
  // kernels refuse (-EINVAL; CM_URING_SIMULATE_NO_DEFER=1 in tests): completions come as they do.
  io_uring_params params{.cq_entries = entries * 16,
                         .flags = IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER |
                                  IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED};
  int ret = simulating("CM_URING_SIMULATE_ENOSYS") ? -ENOSYS
            : simulating("CM_URING_SIMULATE_NO_DEFER")
                ? -EINVAL
                : io_uring_queue_init_params(entries, &ring_, &params);
  disabled_ = deferred_ = ret == 0;
  if (ret == -EINVAL) {
    params = {.cq_entries = entries * 16, .flags = IORING_SETUP_CQSIZE};
    ret = io_uring_queue_init_params(entries, &ring_, &params);
  }
  if (ret < 0) throw std::system_error(-ret, std::system_category(), "io_uring_queue_init");
  arm_wakeup();
}

Ring::~Ring() {
  if (spawned_ != 0)
    std::fprintf(stderr, "cm::uring::Ring destroyed with %zu tasks still running\n", spawned_);
  // Only the wake-up poll is left in flight, and a poll holds no memory of ours.
  io_uring_queue_exit(&ring_);
}

io_uring_sqe* Ring::get_sqe(unsigned room) {
  // Not enough room: the kernel takes what the SQ holds, and every slot is free again.
  if (io_uring_sq_space_left(&ring_) < room) submit(0);
  if (io_uring_sqe* sqe = io_uring_get_sqe(&ring_)) return sqe;
  throw std::system_error(EBUSY, std::system_category(), "io_uring_get_sqe");
}

void Ring::submit(unsigned wait_for, const Deadline& until) {
  if (disabled_) {  // the first submission: this thread becomes the ring's one issuer
    if (::syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0))
      check(-errno, "IORING_REGISTER_ENABLE_RINGS");
    disabled_ = false;
  }
  if (!until || wait_for == 0) return check(io_uring_submit_and_wait(&ring_, wait_for), "io_uring_submit");
  // A wait with its own timeout (IORING_ENTER_EXT_ARG: no SQE, no CQE); -ETIME when it passed.
  const auto wait = [this](unsigned events, std::chrono::nanoseconds at_most) {
    __kernel_timespec limit = to_timespec(at_most);
    io_uring_cqe* cqe = nullptr;
    const int ret = io_uring_submit_and_wait_timeout(&ring_, &cqe, events, &limit, nullptr);
    if (ret != -ETIME) check(ret, "io_uring_submit_and_wait_timeout");
  };
  // NOTE: fairness. The kernel runs a deferred completion (a recv that waited for its data) only
  // in a wait, and at most 20 of them a wait when it is asked for one event (6.x kernels). What
  // completes at submission (a send, a recv whose data was there) is not in that queue. A caller
  // with timers of its own (uring_coro's wheel, fired between turns) lets such connections go
  // round without ever joining it, while the queue of the others grows: Jain's index 0.45 at
  // 18,000 connections. So first take every completion the kernel holds (as many as the CQ can,
  // waiting for none), then wait if there was none.
  wait(ring_.cq.ring_entries, {});
  const auto left = *until - std::chrono::steady_clock::now();
  if (io_uring_cq_ready(&ring_) == 0 && left > left.zero()) wait(wait_for, left);
}

void Ring::run_once(const Deadline& until) {
  // NOTE: latency. Completions reach the CQ only here (DEFER_TASKRUN): a turn is what was ready
  // when it waited, as with epoll. Posted as they happened, a turn lasted while they kept coming:
  // 4,000 connections on /delay/100 in turns of 80 ms, due timers queued behind them, replies
  // 10-20 ms late (docs/models/uring_coro.md, "Pitfalls": a turn that never ends).
  submit(1, until);
  io_uring_cqe* cqe = nullptr;
  while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
    const io_uring_cqe copy = *cqe;
    io_uring_cqe_seen(&ring_, cqe);  // before resuming: the coroutine may submit and reap again
    dispatch(copy);
    // A reply's send goes every submit_batch SQEs: it does not wait for the whole turn.
    if (io_uring_sq_ready(&ring_) >= submit_batch) submit(0);
  }
}

void Ring::dispatch(const io_uring_cqe& cqe) {
  // NOTE: what user_data names is alive: an Operation's coroutine is suspended on it until this
  // very resume, and an Acceptor outlives its last CQE (see Acceptor).
  if (cqe.user_data == ignored) return;
  if (cqe.user_data == wakeup) return on_wakeup();
  if (cqe.user_data & multishot) {
    return reinterpret_cast<Acceptor*>(cqe.user_data & ~multishot)->complete(cqe.res, cqe.flags);
  }
  reinterpret_cast<Operation*>(cqe.user_data)->complete(cqe.res);
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
  const auto resuming = [this] {
    std::lock_guard lock(posted_mutex_);
    return std::exchange(posted_, {});
  }();
  arm_wakeup();  // also after cancel_all() cancelled it: pool completions must still come in
  for (std::coroutine_handle<> waiter : resuming)
    waiter.resume();
}

void Ring::post(std::coroutine_handle<> waiter) {
  // NOTE: the eventfd is written under the lock. Once the ring thread has taken `waiter`, it may
  // finish every task and destroy the ring; a write after unlocking could hit a closed fd.
  std::lock_guard lock(posted_mutex_);
  posted_.push_back(waiter);
  if (posted_.size() == 1) (void)::eventfd_write(wakeup_fd_.get(), 1);  // others ride along
}

void Ring::cancel_all() {
  cancelled_ = true;
  io_uring_sqe* sqe = get_sqe();
  io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
  io_uring_sqe_set_data64(sqe, ignored);
}

void Ring::spawn(Task<void> task) { own(std::move(task), spawned_); }

Acceptor::Acceptor(Ring& ring, int listener) : ring_(ring), listener_(listener) {
  simulate_refusal_ = simulating("CM_URING_SIMULATE_NO_MULTISHOT");
}

Acceptor::~Acceptor() {
  if (!armed_) return;
  std::fprintf(stderr, "cm::uring::Acceptor destroyed with its SQE armed\n");
  std::terminate();
}

void Acceptor::arm() {
  io_uring_sqe* sqe = ring_.get_sqe();
  if (multishot_) {
    io_uring_prep_multishot_accept(sqe, listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (simulate_refusal_) sqe->ioprio |= 1u << 15;  // an accept flag no kernel knows: -EINVAL
  } else {
    io_uring_prep_accept(sqe, listener_, nullptr, nullptr, SOCK_CLOEXEC);
  }
  // user_data: this Acceptor's address with its lowest bit set (free, as it is aligned): this SQE
  // gives many CQEs, each to complete(), and is armed until a CQE comes without F_MORE.
  static_assert(alignof(Acceptor) > 1);
  io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uintptr_t>(this) | Ring::multishot);
  armed_ = true;
}

void Acceptor::complete(int result, unsigned flags) {
  if (!(flags & IORING_CQE_F_MORE)) armed_ = false;  // the SQE is done: next() arms another
  if (result == -EINVAL && multishot_) {
    multishot_ = false;  // a kernel before 5.19: one single-shot accept per connection from now
    if (!ring_.cancelled()) return arm();  // the coroutine waits on
  }
  if (ring_.cancelled()) {  // stopping: a connection that comes now is closed, not served
    if (result >= 0) ::close(result);
    if (armed_) return;  // the coroutine waits on, for the last CQE
  }
  result_ = result;
  // NOTE: the coroutine resumed may end, and free this object: nothing of `this` after resume().
  std::exchange(waiter_, {}).resume();
}

}  // namespace cm::uring
