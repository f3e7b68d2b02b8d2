// connection.cpp -- the libuv model's connection: callbacks that read, execute the plan, write.
//
// A connection is one object holding every libuv handle it uses and its Session: a waiting request
// costs this object and nothing more. Each callback finds it through handle->data, does one step
// and returns to the loop. Reading goes on while a request is served (input waits in the Session).

#include "connection.hpp"

#include <algorithm>
#include <utility>

#include "cm/net.hpp"

namespace cm::libuv_callbacks {
namespace {

Connection* of(auto* handle) { return static_cast<Connection*>(handle->data); }

}  // namespace

Connection::Connection(Loop& loop) : loop_(loop), session_(loop.state.session(Moment::now())) {
  uv_tcp_init(&loop.uv, &tcp_);  // neither can fail: no socket exists yet
  uv_timer_init(&loop.uv, &timer_);
  tcp_.data = timer_.data = write_.data = shutdown_.data = work_.data = this;
  ++loop.state.open;
}

void Connection::on_connection(uv_stream_t* listener, int status) {
  Loop& loop = *static_cast<Loop*>(listener->data);
  if (status < 0) return loop.state.accept_failed(-status);  // libuv's own EMFILE trick failed
  if (!descriptor_free(loop.state.open)) return loop.defer_accept();  // this took the last fd
  auto* c = new Connection(loop);
  if (uv_accept(listener, c->stream()) != 0) return c->close();
  uv_tcp_nodelay(&c->tcp_, 1);
  c->wait_for_request();
}

void Connection::read() {
  auto alloc = [](uv_handle_t* handle, std::size_t, uv_buf_t* buf) {  // never a malloc per read
    *buf = uv_buf_init(of(handle)->loop_.read_buffer, sizeof Loop::read_buffer);
  };
  reading_ = uv_read_start(stream(), alloc, on_read) == 0;
  if (!reading_) close();
}

void Connection::wait_for_request() {
  uv_timer_start(&timer_, on_deadline, loop_.timeout_until(loop_.state.read_deadline(session_)), 0);
  if (!reading_) read();
}

void Connection::on_deadline(uv_timer_t* timer) {
  Connection* c = of(timer);
  // libuv runs due timers before it polls: after a turn that blocked, a request sent in time may
  // wait unread. That is the loop's lateness, not a slow client: let this turn's poll read it,
  // and look at the deadline again 1 ms on (a timer set for 0 ms from its own callback would run
  // again in the same pass over the timers, before any poll).
  uv_os_fd_t fd = -1;  // stays -1 if libuv has none: bytes_unread(-1) is 0
  uv_fileno(reinterpret_cast<uv_handle_t*>(c->stream()), &fd);
  if (!c->loop_.state.draining() && bytes_unread(fd) > 0) {
    uv_timer_start(timer, on_deadline, 1, 0);
    return;
  }
  c->out_.clear();
  if (!c->session_.expire(c->out_, Moment::now())) return c->close();  // idle: without a word
  c->serving_ = true;
  if (c->write_now()) c->linger();  // a partial request gets its 408, then a linger
}

void Connection::on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  Connection* c = of(stream);
  if (nread == 0) return;  // EAGAIN: nothing this time
  if (c->linger_) {        // after a closing reply: discard, within bounds
    if (!c->linger_->more(nread)) c->close();
  } else if (nread == UV_EOF && c->serving_) {  // a half-close after the request: answer first
    c->peer_closed_ = true;
    c->reading_ = false;  // libuv stopped reading at EOF
  } else if (nread < 0) {
    c->close();  // EOF or an error: this connection ends, silently
  } else {
    c->session_.received({buf->base, static_cast<std::size_t>(nread)});
    if (!c->serving_) return c->serve();  // no whole request yet: the header timer runs on
    if (!c->session_.backlogged()) return;
    uv_read_stop(stream);  // backpressure: more pipelined input waits in the socket
    c->reading_ = false;
  }
}

// Answers what the Session holds for as long as each request is done and written at once
// (pipelining): a loop, not a recursion. Returns when one has to wait.
void Connection::serve() {
  while (auto plan = session_.next()) {
    serving_ = true;
    uv_timer_stop(&timer_);
    plan_ = std::move(*plan);
    const std::optional<Outcome> now = execute();
    if (!now) return;            // the step is away: resume() comes back here
    if (!respond(*now)) return;  // the write is away (on_written), or the connection ends
  }
  serving_ = false;
  if (peer_closed_) return close();
  wait_for_request();
}

// Runs the step where cm::venue() says; nothing blocks the loop unless the options ask for it.
// [plan-visit-libuv_callbacks]
std::optional<Outcome> Connection::execute() {  // none: the step is away, resume() brings it
  const Venue where = loop_.state.venue(plan_, session_.tag());
  switch (where) {
    case Venue::timer: return wait(std::get<Wait>(plan_).duration);  // a uv_timer_t in here
    case Venue::loop: return perform(plan_, loop_.state.sleeper, session_.tag());
    case Venue::pool: return queue_work();       // uv_queue_work; back on the loop when done
    case Venue::thread: return start_thread();   // a call thread; back through back_
    case Venue::database: return DbQuery::start(*this);  // a uv_poll_t on its socket (db.cpp)
  }
  unhandled(where);
}
// [plan-visit-libuv_callbacks]

std::optional<Outcome> Connection::wait(std::chrono::milliseconds duration) {
  if (duration.count() == 0) return Outcome::done;
  const auto due = Clock::now() + duration;
  if (loop_.state.options.timers == Timers::wheel) {  // a place in the loop's wheel
    if (loop_.wheel.arm(waiting_, due, [this] { resume(Outcome::done); })) loop_.set_tick();
    return std::nullopt;
  }
  uv_timer_start(&timer_, [](uv_timer_t* t) { of(t)->resume(Outcome::done); },
                 loop_.timeout_until(due), 0);
  return std::nullopt;
}

std::optional<Outcome> Connection::queue_work() {
  ticket_ = loop_.state.admission.enter();
  if (!ticket_) return Outcome::refused;  // the pool is full: 503
  away_ = Away::pool;
  auto work = [](uv_work_t* w) {  // on a pool thread; the loop does not touch plan_ meanwhile
    of(w)->outcome_ = perform(of(w)->plan_, of(w)->loop_.state.sleeper, of(w)->session_.tag());
  };
  auto done = [](uv_work_t* w, int status) {  // back on the loop; UV_ECANCELED: stop() came
    of(w)->ticket_.reset();
    of(w)->resume(status == 0 ? of(w)->outcome_.load() : Outcome::stopped);
  };
  uv_queue_work(&loop_.uv, &work_, work, done);  // fails only for a null callback
  return std::nullopt;
}

std::optional<Outcome> Connection::start_thread() {
  if (!back_.loop) {  // the first call thread of this connection: its way back, kept till close
    uv_async_init(&loop_.uv, &back_, [](uv_async_t* a) { of(a)->resume(of(a)->outcome_); });
    back_.data = this;
    ++handles_open_;
  }
  // NOTE: the thread reads plan_, stores outcome_, uv_async_send()s; close() waits while away_
  // (set before the outcome can come back: back_'s callback runs on this loop's thread).
  auto post_back = [this](Outcome o) {
    outcome_ = o;
    uv_async_send(&back_);
  };
  if (!loop_.state.call_threads.start(plan_, loop_.state.sleeper, session_.tag(), post_back))
    return Outcome::refused;  // no thread to be had: 503
  away_ = Away::thread;
  return std::nullopt;
}

void Connection::resume(Outcome outcome) {  // the step came back; answer, and go on
  away_ = Away::no;
  if (respond(outcome)) serve();
}

bool Connection::respond(Outcome outcome) {  // true: written at once, and the connection goes on
  if (closing_ || outcome == Outcome::stopped) return close_now();  // close() may have come
  out_.clear();
  session_.write_reply(plan_, outcome, out_, Moment::now());
  if (!write_now()) return false;
  if (session_.keep_alive()) return true;
  linger();
  return false;
}

bool Connection::write_now() {  // out_, at once (true) or by a write request (on_written)
  // uv_try_write first: a reply written at once needs no write request, and libuv 1.44 then does
  // not touch the socket's epoll registration (after a uv_write, uv__drain does, once per reply).
  uv_buf_t buf = uv_buf_init(out_.data(), static_cast<unsigned>(out_.size()));
  const int n = uv_try_write(stream(), &buf, 1);
  if (n == static_cast<int>(buf.len)) return true;
  if (n < 0 && n != UV_EAGAIN) return close_now();
  const auto sent = static_cast<unsigned>(std::max(n, 0));
  buf.base += sent;  // NOTE: uv_write keeps this pointer (into out_, which stays)
  buf.len -= sent;
  if (uv_write(&write_, stream(), &buf, 1, on_written) != 0) return close_now();
  // The write deadline: the connection's timer, idle while a reply is written, looks every
  // write_timeout whether the client took a byte since; on_written's next step resets the timer.
  unsent_ = buf.len;
  const auto limit = static_cast<std::uint64_t>(loop_.state.options.write_timeout.count());
  uv_timer_start(&timer_, on_write_deadline, limit, limit);
  return false;
}

void Connection::on_write_deadline(uv_timer_t* timer) {  // closes a client that took no byte
  Connection* c = of(timer);
  const std::size_t unsent = uv_stream_get_write_queue_size(c->stream());
  if (unsent >= std::exchange(c->unsent_, unsent)) c->close();
}

void Connection::on_written(uv_write_t* write, int status) {  // < 0: gone, or closing
  Connection* c = of(write);
  if (status < 0) return c->close();
  if (c->session_.keep_alive()) return c->serve();  // the next request
  c->linger();
}

void Connection::linger() {
  // cm::Linger: half-close (the FIN follows the reply), then discard input till EOF or deadline.
  linger_.emplace(Clock::now());
  const bool half_closed = uv_shutdown(&shutdown_, stream(), [](uv_shutdown_t*, int) {}) == 0;
  if (peer_closed_ || !half_closed) return close();  // nothing more will come
  uv_timer_start(
      &timer_, [](uv_timer_t* t) { of(t)->close(); }, loop_.timeout_until(linger_->deadline()), 0);
  if (!reading_) read();
}

void Connection::close() {
  waiting_.cancel();  // a Wait in the wheel ends here: its resume() never comes
  if (away_ == Away::pool && !closing_) uv_cancel(reinterpret_cast<uv_req_t*>(&work_));  // queued
  closing_ = true;
  if (away_ != Away::no || uv_is_closing(reinterpret_cast<uv_handle_t*>(&tcp_))) return;
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), on_closed);  // a pending write: ECANCELED
  uv_close(reinterpret_cast<uv_handle_t*>(&timer_), on_closed);
  if (back_.loop) uv_close(reinterpret_cast<uv_handle_t*>(&back_), on_closed);
}

void Connection::on_closed(uv_handle_t* handle) {
  // NOTE: the only place a connection is freed: libuv uses its handles until their close callback.
  if (--of(handle)->handles_open_ == 0) delete of(handle);
}

}  // namespace cm::libuv_callbacks
