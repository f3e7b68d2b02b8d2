// connection.cpp -- the io_uring model's connection: one coroutine reads, executes the plan,
// writes; repeat.
//
// Every co_await below suspends this coroutine and hands the ring one SQE; the thread goes on
// with the other connections. A waiting request is this suspended frame and an IORING_OP_TIMEOUT
// in the kernel -- no thread, no timer of our own. A connection's error is a -errno value that
// ends this coroutine only.

#include "connection.hpp"

#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <memory>

#include "cm/net.hpp"
#include "cm/policy.hpp"

namespace cm::uring_coro {
namespace {

using Clock = std::chrono::steady_clock;
using uring::Task;

// [write-deadline-uring_coro]
/// Writes all of `bytes`, or gives up when the client takes none of them for `limit` (the write
/// deadline). The first send does not wait (MSG_DONTWAIT): a reply the socket's buffer takes at
/// once, almost every one, costs one SQE; only what is left waits, linked to a timeout.
Task<bool> send_all(uring::Ring& ring, int fd, std::string_view bytes,
                    std::chrono::milliseconds limit) {
  int n = co_await uring::Send(ring, fd, bytes, MSG_DONTWAIT);
  if (n == -EAGAIN) n = 0;  // the socket's buffer is full: wait below
  while (n >= 0) {
    bytes.remove_prefix(static_cast<std::size_t>(n));
    if (bytes.empty()) co_return true;
    n = co_await uring::SendFor(ring, fd, bytes, limit);
    if (n == 0) co_return false;
  }
  co_return false;  // the client is gone, the write deadline passed (-ETIME), or the ring stops
}
// [write-deadline-uring_coro]

/// Lingering close (cm::Linger): shut down the write side, then discard what the client still
/// sends until it closes or the deadline passes.
Task<void> linger(uring::Ring& ring, int fd) {
  ::shutdown(fd, SHUT_WR);
  Linger linger(Clock::now());
  std::array<char, 4096> buffer;  // in this frame, which outlives each RecvFor that fills it
  while (linger.more(co_await uring::RecvFor(ring, fd, buffer, linger.deadline() - Clock::now()))) {
  }
}

// [wait-wheel-uring_coro]
/// --timers wheel: a place in this loop's wheel, which the loop turns between its waits on the
/// ring (each wait's timeout is the wheel's next tick): no SQE, no hrtimer per request.
struct OnWheel {
  Context& context;
  Clock::time_point due;
  TimerWheel::Timer place = {};  // in the frame, as an Operation is
  bool await_ready() const noexcept { return context.ring.cancelled(); }
  void await_suspend(std::coroutine_handle<> waiter) {
    context.wheel.arm(place, due, [waiter] { waiter.resume(); });
  }
  Outcome await_resume() const noexcept {  // the loop's stop fires every timer of the wheel
    return context.ring.cancelled() ? Outcome::stopped : Outcome::done;
  }
};
// [wait-wheel-uring_coro]

/// An IORING_OP_TIMEOUT at an absolute deadline, its awaiter in this frame (or, with --timers
/// wheel, a place in the loop's wheel). The loop serves others.
Task<Outcome> timer(Context& context, std::chrono::milliseconds duration) {
  const auto until = Clock::now() + duration;
  if (context.state.options.timers == Timers::wheel) {
    OnWheel on_wheel{context, until};  // NOTE: named, so that it stays where the wheel links it
    co_return co_await on_wheel;
  }
  do {
    if (co_await uring::Timeout(context.ring, until) != -ETIME) co_return Outcome::stopped;
  } while (Clock::now() < until);  // a kernel timer does not fire early; this makes sure of it
  co_return Outcome::done;
}

/// The step's work on the ring's own thread.
Task<Outcome> here(Plan& plan, Sleeper& sleeper, Tag tag) {
  co_return perform(plan, sleeper, tag);
}

/// The step's work on a worker of the pool; the coroutine comes back on this ring (its eventfd).
Task<Outcome> on_pool(Context& context, Plan& plan, Tag tag) {
  const auto ticket = context.state.admission.enter();
  if (!ticket) co_return Outcome::refused;
  Outcome outcome = Outcome::stopped;
  co_await context.pool.run(context.ring,
                            [&] { outcome = perform(plan, context.state.sleeper, tag); });
  co_return outcome;
}

/// The awaiter of a step on a call thread (cm::CallThreads): the thread posts the coroutine back
/// onto the ring. If no thread can be had, await_suspend says so and the coroutine goes on: 503.
struct OnNewThread {
  Context& context;
  Plan& plan;
  Tag tag;
  Outcome outcome = Outcome::refused;  // NOTE: written by the thread before its post
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> waiter) {
    return context.state.call_threads.start(plan, context.state.sleeper, tag,
                                            [this, waiter](Outcome o) {
                                              outcome = o;
                                              context.ring.post(waiter);
                                            });
  }
  Outcome await_resume() const noexcept { return outcome; }
};
Task<Outcome> on_new_thread(Context& context, Plan& plan, Tag tag) {
  co_return co_await OnNewThread{context, plan, tag};
}

/// Executes a plan's step where cm::venue() says. Not a coroutine itself: it only picks which
/// coroutine to start. NOTE: `plan` lives in converse()'s frame, which awaits the task at once.
// [plan-visit-uring_coro]
Task<Outcome> execute(Context& context, Plan& plan, Tag tag) {
  const Venue where = context.state.venue(plan, tag);
  switch (where) {
    case Venue::timer: return timer(context, std::get<Wait>(plan).duration);  // a timeout SQE
    case Venue::loop: return here(plan, context.state.sleeper, tag);  // on this ring's thread
    case Venue::pool: return on_pool(context, plan, tag);             // the pool, posted back
    case Venue::thread: return on_new_thread(context, plan, tag);     // a thread, posted back
    case Venue::database: return run_query(context, std::get<Query>(plan));  // db.cpp
  }
  unhandled(where);
}
// [plan-visit-uring_coro]

/// The conversation: requests in, replies out, until one side ends it.
Task<void> converse(Context& context, int fd) {
  uring::Ring& ring = context.ring;
  Session session = context.state.session(Moment::now());
  std::string out;

  for (;;) {
    while (auto plan = session.next()) {
      const Outcome outcome = co_await execute(context, *plan, session.tag());
      if (outcome == Outcome::stopped) co_return;
      out.clear();
      session.write_reply(*plan, outcome, out, Moment::now());
      if (!co_await send_all(ring, fd, out, context.state.options.write_timeout)) co_return;
      if (!session.keep_alive()) co_return co_await linger(ring, fd);
    }

    // More bytes are needed: a recv linked to a timeout at the header deadline.
    // NOTE: the kernel writes into `buffer` until the recv's CQE, and this coroutine stays
    // suspended until then, so the buffer outlives the SQE. It is held only for this read: a
    // request that waits (a /delay) holds no read buffer, an idle connection holds one.
    const auto buffer = std::make_unique_for_overwrite<char[]>(lent_read_bytes);
    const auto limit = context.state.read_deadline(session) - Clock::now();
    context.awaiting_request.insert(fd);
    const int n = co_await uring::RecvFor(ring, fd, {buffer.get(), lent_read_bytes}, limit);
    context.awaiting_request.erase(fd);
    if (n == -ETIME) {
      out.clear();
      if (session.expire(out, Moment::now()) &&
          co_await send_all(ring, fd, out, context.state.options.write_timeout)) {
        co_await linger(ring, fd);
      }
      co_return;
    }
    if (n <= 0) co_return;  // closed by the client, an error, or -ECANCELED: the ring stops
    session.received({buffer.get(), static_cast<std::size_t>(n)});
  }
}

/// A fire-and-forget IORING_OP_ASYNC_CANCEL of every request on `fd` (Linux 5.19).
void cancel_on(uring::Ring& ring, int fd) {
  io_uring_sqe* sqe = ring.get_sqe();
  io_uring_prep_cancel_fd(sqe, fd, IORING_ASYNC_CANCEL_ALL);
  io_uring_sqe_set_data64(sqe, uring::Ring::ignored);
}

}  // namespace

void drain(Context& context, int listener) {
  cancel_on(context.ring, listener);  // the accept ends with -ECANCELED
  // A cancelled RecvFor gives -ETIME (the ring is not stopping): the header deadline came early.
  for (int fd : context.awaiting_request)
    cancel_on(context.ring, fd);
}

Task<void> serve_connection(Context& context, Fd fd) {
  set_nodelay(fd.get());
  try {
    co_await converse(context, fd.get());
  } catch (const std::exception& e) {
    // A failure of this connection (no memory, no SQE) ends this connection only.
    std::fprintf(stderr, "uring_coro: connection ended: %s\n", e.what());
  }
  co_await uring::Close(context.ring, fd.release());
  context.state.open.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace cm::uring_coro
