// connection.cpp -- the Asio model's connection: one coroutine reads, executes the plan, writes.
//
// A waiting request is suspended coroutine frames (serve_connection's holds the Session) and a
// timer queued in the io_context: no thread is held. Errors are values (`as_tuple`): a client that
// leaves ends its own coroutine, never the loop.

#include "connection.hpp"
#include "db.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/socket.h>

#include <array>
#include <memory>
#include <string>
#include <tuple>

#include "cm/net.hpp"
#include "cm/policy.hpp"

namespace cm::asio_coro {
namespace {
using boost::system::error_code;
constexpr auto as_value = asio::as_tuple(asio::deferred);  // errors as values, not exceptions
constexpr asio::use_awaitable_t<Executor> use_awaitable;   // resumes a coroutine on its loop

/// The deadline passed while the client's bytes waited unread: it sent them in time, and the loop
/// came late (Asio takes in up to 128 readinesses per turn of its reactor, and a loop whose calls
/// block turns seldom). Reads them now, without waiting; with nothing there, the wait timed out.
std::size_t read_late(Socket& socket, asio::mutable_buffer buffer, error_code& ec) {
  const ssize_t n = ::recv(socket.native_handle(), buffer.data(), buffer.size(), MSG_DONTWAIT);
  ec = n > 0 ? error_code() : asio::error::timed_out;  // EOF or an error: closed as at the deadline
  return n > 0 ? static_cast<std::size_t>(n) : 0;
}

/// Reads some bytes into `session` (if any), or gives up at the connection's timer (timed_out).
/// No parallel group races the timer: it made the loop answer late (docs/models/asio_coro.md).
awaitable<std::tuple<error_code, std::size_t>> receive(Connection& c, Session* session) {
  Deadline& armed = (*c.deadline = Deadline{&c.socket, c.deadline->read + 1, false});
  c.timer.async_wait([d = c.deadline, read = armed.read](error_code ec) {
    if (ec || d->read != read) return;  // cancelled, or the read it was set for is over
    d->passed = true;
    d->socket->cancel(ec);
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
  if (ec == asio::error::operation_aborted && armed.passed)
    n = read_late(c.socket, asio::buffer(buffer), ec);
  if (!ec && session) session->received({buffer.data(), n});
  co_return std::tuple{ec, n};
}

/// Lingering close (cm::Linger): shut down our side, then discard what the client still sends.
awaitable<void> linger(Connection& c) {
  error_code ignored;
  c.socket.shutdown(tcp::socket::shutdown_send, ignored);
  Linger linger(Clock::now());
  c.timer.expires_at(linger.deadline());
  auto [ec, n] = co_await receive(c, nullptr);
  while (linger.more(ec ? -1 : static_cast<long>(n)))
    std::tie(ec, n) = co_await receive(c, nullptr);
}

// [write-deadline-asio_coro]
/// Writes `out`, then a lingering close if the session ends with it; false if the connection ends
/// (the client left, or the reply closes it). The write deadline restarts at each write that makes
/// progress: sweep_writes() (server.cpp) closes a client that takes no byte for write_timeout.
awaitable<bool> respond(Connection& c, Loop& loop, Session& session, std::string_view out) {
  error_code ec;
  while (!out.empty() && !ec) {
    c.write_deadline = Clock::now() + loop.state.options.write_timeout;
    std::size_t n = 0;
    std::tie(ec, n) = co_await c.socket.async_write_some(asio::buffer(out), as_value);
    out.remove_prefix(n);
  }
  c.write_deadline = Clock::time_point::max();
  if (!ec && !session.keep_alive()) co_await linger(c);
  co_return !ec && session.keep_alive();  // a client gone (ec) ends this connection only
}
// [write-deadline-asio_coro]

// [wait-wheel-asio_coro]
/// --timers wheel: a place in the loop's wheel; the connection's timer, set for the end of time,
/// is only the event the wheel's callback cancels. No timer per request in the io_context's queue
/// is due: the wheel's one `tick` is.
awaitable<Outcome> wait_on_wheel(const Wait& step, Connection& c, Loop& loop) {
  TimerWheel::Timer waiting;  // in this frame; if close() ends the wait, its end cancels it
  c.timer.expires_at(Timer::time_point::max());
  if (loop.wheel.arm(waiting, Clock::now() + step.duration, [&c] { c.timer.cancel(); }))
    loop.tick.cancel();  // due before the tick is set for: turn_wheel() sets it again
  co_await c.timer.async_wait(as_value);
  co_return waiting.armed() ? Outcome::stopped : Outcome::done;  // armed: close() ended it
}
// [wait-wheel-asio_coro]

// [wait-asio_coro]
/// A steady_timer in this request's coroutine (or, with --timers wheel, a place in the loop's
/// wheel): the loop serves others meanwhile.
awaitable<Outcome> wait(const Wait& step, Connection& c, Loop& loop) {
  if (loop.state.options.timers == Timers::wheel) co_return co_await wait_on_wheel(step, c, loop);
  c.timer.expires_after(step.duration);
  const auto [ec] = co_await c.timer.async_wait(as_value);
  co_return ec ? Outcome::stopped : Outcome::done;  // operation_aborted: the server is stopping
}
// [wait-asio_coro]

/// The step's work on this loop's thread.
awaitable<Outcome> here(Plan& plan, Sleeper& s, Tag tag) { co_return perform(plan, s, tag); }

// [offload-asio_coro]
/// The step's work on another thread, which `start(done)` sets going: `done(outcome)` posts the
/// outcome back to this loop, and the coroutine resumes there. `back` counts as the loop's work:
/// its run(), so stop(), waits for it.
awaitable<Outcome> away(Loop& loop, auto start) {
  co_return co_await asio::async_initiate<decltype(use_awaitable), void(Outcome)>(
      [&](auto resume) {
        auto back = asio::prefer(loop.io.get_executor(), asio::execution::outstanding_work.tracked);
        auto handler = std::make_shared<decltype(resume)>(std::move(resume));
        start([back, handler](Outcome o) { asio::post(back, [o, handler] { (*handler)(o); }); });
      },
      use_awaitable);
}

/// The step's work on the asio::thread_pool. A full pool is refused (503).
awaitable<Outcome> on_pool(Plan& plan, Loop& loop, Tag tag) {
  const auto ticket = loop.state.admission.enter();
  if (!ticket) co_return Outcome::refused;
  co_return co_await away(loop, [&](auto done) {
    asio::post(loop.pool, [&, done] { done(perform(plan, loop.state.sleeper, tag)); });
  });
}
// [offload-asio_coro]

/// The step's work on a new thread (cm::CallThreads); with none to be had, a 503.
awaitable<Outcome> on_new_thread(Plan& plan, Loop& loop, Tag tag) {
  co_return co_await away(loop, [&](auto done) {
    if (!loop.state.call_threads.start(plan, loop.state.sleeper, tag, done)) done(Outcome::refused);
  });
}

/// Executes a plan's step where cm::venue() says. Not a coroutine itself: it picks which coroutine
/// the caller awaits, and everything they reference lives in the caller's frame.
awaitable<Outcome> execute(Plan& plan, Connection& c, Loop& loop, Tag tag) {
  // [plan-visit-asio_coro]
  const Venue where = loop.state.venue(plan, tag);
  switch (where) {
    case Venue::timer: return wait(std::get<Wait>(plan), c, loop);  // a timer (or the wheel)
    case Venue::loop: return here(plan, loop.state.sleeper, tag);  // on this loop's thread
    case Venue::pool: return on_pool(plan, loop, tag);             // asio::thread_pool, then back
    case Venue::thread: return on_new_thread(plan, loop, tag);     // a thread, posted back
    case Venue::database: return run_query(std::get<Query>(plan), c, loop);  // db.cpp
  }
  // [plan-visit-asio_coro]
  unhandled(where);
}

}  // namespace

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
      std::string out;  // the reply's bytes, while they are written
      session.write_reply(*plan, outcome, out, Moment::now());
      if (!co_await respond(c, loop, session, out)) co_return;
    }

    // More bytes are needed; wait for them, but not past the header deadline (now, once draining).
    c.timer.expires_at(loop.state.read_deadline(session));
    c.awaiting_request = true;
    auto [ec, n] = co_await receive(c, &session);
    c.awaiting_request = false;
    std::string out;  // at the deadline, a 408 if part of a request came (then a lingering close)
    if (ec == asio::error::timed_out && session.expire(out, Moment::now()))
      co_await respond(c, loop, session, out);
    if (ec) co_return;  // closed by the client, reset, or stopping
  }
}

}  // namespace cm::asio_coro
