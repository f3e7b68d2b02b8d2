// connection.cpp -- the Asio model's connection: one coroutine reads, executes the plan, writes.
//
// Every `co_await` below suspends this connection's coroutine and hands its thread back to the
// io_context, which goes on with the other connections of the loop. A waiting request is therefore
// nothing but suspended coroutine frames (serve_connection's holds the Session) and a timer queued
// in the io_context: no thread is held (the connection ceiling, connections / delay). Errors are
// values (`as_tuple`): a client that leaves ends its own coroutine, never the loop.

#include "connection.hpp"
#include "db.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <optional>
#include <tuple>

#include "cm/net.hpp"
#include "cm/policy.hpp"

namespace cm::asio_coro {
namespace {
using boost::system::error_code;
constexpr auto as_value = asio::as_tuple(asio::deferred);  // errors as values, not exceptions
constexpr asio::use_awaitable_t<Executor> use_awaitable;   // resumes a coroutine on its loop

/// Reads some bytes into `session` (if any), or gives up at the connection's timer (timed_out).
/// No parallel group races the timer: it made the loop answer late (docs/models/asio_coro.md).
awaitable<std::tuple<error_code, std::size_t>> receive(Connection& c, Session* session) {
  Deadline& armed = (*c.deadline = Deadline{&c.socket, c.deadline->read + 1, false});
  c.timer.async_wait([d = c.deadline, read = armed.read](error_code ec) {
    if (!ec && d->read == read) d->passed = true, d->socket->cancel(ec);
  });
  // [read-asio_coro]
#if defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
  // Completion (io_uring): the kernel fills the buffer when bytes come: lent for the whole wait.
  std::array<char, lent_read_bytes> buffer;
  auto [ec, n] = co_await c.socket.async_read_some(asio::buffer(buffer), as_value);
#else
  // Readiness (epoll): wait with no buffer, then read into the loop thread's one buffer.
  static thread_local std::array<char, read_buffer_bytes> buffer;  // copied before any co_await
  if (!c.socket.non_blocking()) c.socket.non_blocking(true);  // read_some: would_block, no wait
  error_code ec;
  std::size_t n = c.socket.read_some(asio::buffer(buffer), ec);
  while (ec == asio::error::would_block) {  // nothing yet, or a stale wake-up: wait for bytes
    std::tie(ec) = co_await c.socket.async_wait(tcp::socket::wait_read, as_value);
    if (!ec) n = c.socket.read_some(asio::buffer(buffer), ec);
  }
#endif
  // [read-asio_coro]
  ++armed.read;  // from here on an expiry cancels nothing; the timer's next use resets it
  if (ec == asio::error::operation_aborted && armed.passed) ec = asio::error::timed_out;
  if (!ec && session) session->received({buffer.data(), n});
  co_return std::tuple{ec, n};
}

/// Lingering close (cm::Linger): shut down our side, then discard what the client still sends.
awaitable<void> linger_close(Connection& c) {
  error_code ignored;
  c.socket.shutdown(tcp::socket::shutdown_send, ignored);
  Linger linger(std::chrono::steady_clock::now());
  c.timer.expires_at(linger.deadline());
  for (;;) {
    const auto [ec, n] = co_await receive(c, nullptr);
    if (!linger.more(ec ? -1 : static_cast<long>(n))) co_return;
  }
}

/// Writes the reply to the plan just executed; false if the connection ends with it (the client
/// left, or the reply closes it: after a lingering close). Its bytes live only while written.
awaitable<bool> respond(Connection& c, Loop& loop, Session& session, const Reply& reply) {
  std::string out;
  session.write_reply(reply, out, Moment::now());
  // The write deadline, which sweep_writes() checks while the reply is being written.
  c.write_deadline = std::chrono::steady_clock::now() + loop.state.options.write_timeout;
  const auto [ec, n] = co_await asio::async_write(c.socket, asio::buffer(out), as_value);
  c.write_deadline = std::chrono::steady_clock::time_point::max();
  if (!ec && !session.keep_alive()) co_await linger_close(c);
  co_return !ec && session.keep_alive();  // a client gone (ec) ends this connection only
}

/// The header deadline passed: a 408 if part of a request came (then a lingering close).
awaitable<void> expire(Connection& c, Loop& loop, Session& session) {
  std::string out;
  if (!session.expire(out, Moment::now())) co_return;
  c.write_deadline = std::chrono::steady_clock::now() + loop.state.options.write_timeout;
  const auto [ec, n] = co_await asio::async_write(c.socket, asio::buffer(out), as_value);
  c.write_deadline = std::chrono::steady_clock::time_point::max();
  if (!ec) co_await linger_close(c);
}

// [wait-asio_coro]
/// A steady_timer in this request's coroutine: the loop serves others meanwhile.
awaitable<Outcome> wait(const Wait& step, Connection& c) {
  c.timer.expires_after(step.duration);
  const auto [ec] = co_await c.timer.async_wait(as_value);
  co_return ec ? Outcome::stopped : Outcome::done;  // operation_aborted: the server is stopping
}
// [wait-asio_coro]

// [wait-wheel-asio_coro]
/// --timers wheel: a place in the loop's wheel; the connection's timer, set for the end of time,
/// is only the event the wheel's callback cancels. No timer per request in the io_context's queue
/// is due: the wheel's one `tick` is.
awaitable<Outcome> wait_on_wheel(const Wait& step, Connection& c, Loop& loop) {
  TimerWheel::Timer waiting;  // in this frame; if close() ends the wait, its end cancels it
  c.timer.expires_at(Timer::time_point::max());
  const auto due = std::chrono::steady_clock::now() + step.duration;
  if (loop.wheel.arm(waiting, due, [&c] { c.timer.cancel(); }))
    loop.tick.cancel();  // due before the tick is set for: turn_wheel() sets it again
  co_await c.timer.async_wait(as_value);
  co_return waiting.armed() ? Outcome::stopped : Outcome::done;  // armed: close() ended it
}
// [wait-wheel-asio_coro]

/// The Wait where --timers says: the io_context's timer queue (the default) or the wheel.
awaitable<Outcome> wait(const Wait& step, Connection& c, Loop& loop) {
  return loop.state.options.timers == Timers::wheel ? wait_on_wheel(step, c, loop) : wait(step, c);
}

/// The step's work on this loop's thread.
awaitable<Outcome> here(Plan& plan, Sleeper& s, Tag tag) { co_return perform(plan, s, tag); }

// [offload-asio_coro]
/// The step's work on the asio::thread_pool, its outcome posted to this loop when the call ends
/// (co_spawn would queue it on the pool first, behind later calls). A full pool is refused (503).
awaitable<Outcome> on_pool(Plan& plan, Loop& loop, Tag tag) {
  const auto ticket = loop.state.admission.enter();
  if (!ticket) co_return Outcome::refused;
  // NOTE: `plan` lives in serve_connection's frame, suspended here until `resume` runs; `back`
  // counts as work of the loop, so its run() goes on until the outcome is back.
  co_return co_await asio::async_initiate<decltype(use_awaitable), void(Outcome)>(
      [&](auto resume) {
        auto back = asio::prefer(loop.io.get_executor(), asio::execution::outstanding_work.tracked);
        asio::post(loop.pool, [&plan, &loop, tag, back, resume = std::move(resume)]() mutable {
          asio::post(back, [o = perform(plan, loop.state.sleeper, tag),
                            r = std::move(resume)]() mutable { std::move(r)(o); });
        });
      },
      use_awaitable);
}
// [offload-asio_coro]

/// The step's work on a new thread (cm::CallThreads), resumed on this io_context by a post. The
/// coroutine waits on a timer that never expires, used as a one-shot event: the posted handler
/// records the outcome and cancels it.
awaitable<Outcome> on_new_thread(Plan& plan, Loop& loop, Tag tag) {
  Timer finished(loop.io.get_executor(), Timer::time_point::max());
  std::optional<Outcome> outcome;
  // NOTE: the thread refers to this frame through the handler it posts, and the frame cannot end
  // before that handler ran: it waits for `outcome`. stop() does not cancel `finished` (close()
  // knows only c.timer), so the pending wait keeps the loop's run() going until the post.
  const bool started = loop.state.call_threads.start(plan, loop.state.sleeper, tag, [&](Outcome o) {
    asio::post(loop.io, [&, o] { outcome = o, finished.cancel(); });
  });
  if (!started) co_return Outcome::refused;
  while (!outcome)
    co_await finished.async_wait(as_value);
  co_return *outcome;
}

/// Executes a plan's step where cm::venue() says. Not a coroutine itself: it picks which coroutine
/// the caller awaits, and everything they reference lives in the caller's frame.
awaitable<Outcome> execute(Plan& plan, Connection& c, Loop& loop, Tag tag) {
  // [plan-visit-asio_coro]
  switch (loop.state.venue(plan, tag)) {
    case Venue::timer: return wait(std::get<Wait>(plan), c, loop);  // a timer (or the wheel)
    case Venue::loop: return here(plan, loop.state.sleeper, tag);  // on this loop's thread
    case Venue::pool: return on_pool(plan, loop, tag);             // asio::thread_pool, then back
    case Venue::thread: return on_new_thread(plan, loop, tag);     // a thread, posted back
    case Venue::database: return run_query(std::get<Query>(plan), c, loop);  // db.cpp
  }
  // [plan-visit-asio_coro]
  return here(plan, loop.state.sleeper, tag);
}

}  // namespace

Loop::~Loop() = default;  // here, where LoopDb is complete

void Loop::close_all() {
  stopping = true;
  error_code ignored;
  acceptor.close(ignored);
  sweep.cancel();
  tick.cancel();
  if (db) db->close_all();
  for (Connection& c : connections)
    c.close();
}

void Loop::drain() {
  error_code ignored;
  acceptor.close(ignored);
  for (Connection& c : connections)
    if (c.awaiting_request) c.socket.cancel(ignored);  // receive() ends: as at the deadline
}

// [write-deadline-asio_coro]
/// One timer per loop checks every connection's write deadline: nothing is armed per reply (a
/// steady_timer armed for each reply's write resets the reactor's timerfd at every request).
awaitable<void> sweep_writes(Loop& loop) {
  const auto limit = loop.state.options.write_timeout;
  const auto period = std::min<std::chrono::steady_clock::duration>(limit, std::chrono::seconds(1));
  while (!loop.stopping) {
    loop.sweep.expires_after(period);
    if (const auto [ec] = co_await loop.sweep.async_wait(as_value); ec) co_return;  // close_all()
    const auto now = std::chrono::steady_clock::now();
    for (Connection& c : loop.connections)
      if (c.write_deadline < now) c.close();  // its async_write ends with an error: so does it
  }
}
// [write-deadline-asio_coro]

// [turn-wheel-asio_coro]
awaitable<void> turn_wheel(Loop& loop) {
  while (!loop.stopping) {
    loop.tick.expires_at(loop.wheel.next_wake().value_or(Timer::time_point::max()));
    co_await loop.tick.async_wait(as_value);  // expired, or cancelled by an earlier arm
    loop.wheel.advance(std::chrono::steady_clock::now());
  }
}
// [turn-wheel-asio_coro]

awaitable<void> accept_loop(Loop& loop) {
  Timer backoff(loop.io.get_executor());
  error_code ignored;
  loop.acceptor.non_blocking(true, ignored);  // so that the draining accept() says would_block
  for (;;) {
    auto [ec, socket] = co_await loop.acceptor.async_accept(as_value);
    if (loop.stopping || !loop.acceptor.is_open()) co_return;
    if (ec) {  // one failed accept is not the server's end; out of fds, say so and pause
      loop.state.accept_failed(ec.value());
      backoff.expires_after(accept_backoff(ec.value()));
      co_await backoff.async_wait(as_value);
      continue;
    }
    asio::co_spawn(loop.io, serve_connection(Connection(std::move(socket)), loop), asio::detached);
    // Then what the backlog holds, up to cm::accepts_per_turn, without waiting for readiness.
    for (int i = 1; i < accepts_per_turn; ++i) {
      Socket more = loop.acceptor.accept(ec);
      if (ec) break;  // would_block: the backlog is empty (an error: the next async_accept)
      asio::co_spawn(loop.io, serve_connection(Connection(std::move(more)), loop), asio::detached);
    }
  }
}

awaitable<void> serve_connection(Connection c, Loop& loop) {
  // NOTE: the connection was moved into this frame (a coroutine copies its parameters); `loop` is a
  // reference, valid because stop() joins every loop before it is destroyed.
  loop.connections.push_back(c);  // for stop() and drain(); ~Connection unlinks it (auto_unlink)
  OpenConnection counted(loop.state.open);
  if (loop.stopping) co_return;  // accepted just before stop(): close at once
  set_nodelay(c.socket.native_handle());
  Session session = loop.state.session(Moment::now());
  for (;;) {
    while (auto plan = session.next()) {
      // stop() may have closed it while its bytes came in or its last reply went out: a wait
      // begun now would hold the loop's run(), and so stop(), until it ends.
      if (loop.stopping) co_return;
      const Outcome outcome = co_await execute(*plan, c, loop, session.tag());
      if (outcome == Outcome::stopped || loop.stopping) co_return;
      if (!co_await respond(c, loop, session, reply_for(*plan, outcome))) co_return;
    }

    // More bytes are needed; wait for them, but not past the header deadline, nor a drain.
    c.timer.expires_at(loop.state.draining() ? std::chrono::steady_clock::now()
                                             : session.deadline());
    c.awaiting_request = true;
    auto [ec, n] = co_await receive(c, &session);
    c.awaiting_request = false;
    if (ec == asio::error::operation_aborted && loop.state.draining() && !loop.stopping)
      ec = asio::error::timed_out;  // drain() cut the wait short: as if the deadline had passed
    if (ec == asio::error::timed_out) co_await expire(c, loop, session);
    if (ec) co_return;  // closed by the client, reset, or stopping
  }
}

}  // namespace cm::asio_coro
