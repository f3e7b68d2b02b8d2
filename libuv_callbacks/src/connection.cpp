// connection.cpp -- the libuv model's connection: callbacks that read, execute the plan, write.
//
// A connection is one object that embeds every libuv handle and request it uses -- the socket
// (uv_tcp_t), one timer (uv_timer_t: header timeout, then the Wait, then the linger), the write
// and shutdown requests and the uv_work_t of a Block -- plus its cm::Session. So a waiting request
// costs this object and nothing more: no thread, no stack, no allocation per wait. Each callback
// finds its connection through handle->data (or req->data), does one step and returns to the loop.
//
// One request at a time, in order:
//   reading --a whole request--> uv_read_stop, execute the Plan --done--> uv_write
//   written --keep-alive--> the next pipelined request, or uv_read_start + header timer again
//           --closing reply--> lingering close: uv_shutdown, read and discard, then uv_close

#include "connection.hpp"

#include <system_error>
#include <type_traits>
#include <variant>

namespace cm::libuv_callbacks {
namespace {

using Clock = std::chrono::steady_clock;

uv_handle_t* as_handle(auto* handle) {
  return reinterpret_cast<uv_handle_t*>(handle);
}

}  // namespace

Connection::Connection(Loop& loop) : loop_(loop), session_(loop.shared.name) {
  uv_tcp_init(&loop.uv, &tcp_);  // neither can fail: no socket exists yet
  uv_timer_init(&loop.uv, &timer_);
  tcp_.data = timer_.data = write_.data = shutdown_.data = work_.data = this;
  ++loop.shared.open;
}

Connection::~Connection() {
  --loop_.shared.open;
}

void Connection::on_connection(uv_stream_t* listener, int status) {
  if (status < 0) return;  // EMFILE, ECONNABORTED, ...: one failed accept ends nothing else
  auto* c = new Connection(*static_cast<Loop*>(listener->data));
  if (uv_accept(listener, c->stream()) != 0) return c->close();
  uv_tcp_nodelay(&c->tcp_, 1);
  c->await_request();
}

void Connection::await_request() {
  // The head must arrive within header_timeout of the accept or of the previous response.
  uv_timer_start(&timer_, on_header_timeout, options().header_timeout.count(), 0);
  if (uv_read_start(stream(), on_alloc, on_read) != 0) close();
}

void Connection::on_alloc(uv_handle_t* handle, std::size_t, uv_buf_t* buf) {
  Loop& loop = static_cast<Connection*>(handle->data)->loop_;
  *buf = uv_buf_init(loop.read_buffer, sizeof loop.read_buffer);  // never a malloc per read
}

void Connection::on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto* c = static_cast<Connection*>(stream->data);
  if (nread == 0) return;            // EAGAIN: nothing this time
  if (nread < 0) return c->close();  // EOF or an error: this connection ends, silently
  if (c->lingering_) {               // after a closing reply: discard, within bounds
    c->lingered_ += static_cast<std::size_t>(nread);
    if (c->lingered_ >= linger_max_bytes) c->close();
    return;
  }
  c->session_.received({buf->base, static_cast<std::size_t>(nread)});
  c->start_next();  // if no request is whole yet, keep reading; the header timer runs on
}

bool Connection::start_next() {
  auto plan = session_.next();
  if (!plan) return false;
  // One request at a time: stop reading until it is answered, so a pipelined request waits in
  // the socket (and the Session) instead of in memory we would have to grow.
  uv_read_stop(stream());
  uv_timer_stop(&timer_);
  plan_ = std::move(*plan);
  execute();
  return true;
}

void Connection::on_header_timeout(uv_timer_t* timer) {
  auto* c = static_cast<Connection*>(timer->data);
  if (!c->session_.has_partial_request()) return c->close();  // idle: closed without a word
  uv_read_stop(c->stream());
  c->answer(request_timeout());  // a partial head gets its 408, then a lingering close
}

// Runs the plan of the request just parsed, in this model's idiom. Nothing here may block the
// loop unless the options ask for that anti-pattern (--wait-mode sleep, --offload inline).
// [plan-visit-libuv_callbacks]
void Connection::execute() {
  const Offload offload = options().offload;
  std::visit(
      [&](const auto& step) {
        using Step = std::decay_t<decltype(step)>;
        if constexpr (std::is_same_v<Step, Wait>) {
          if (options().wait_mode == WaitMode::timer) return wait(step.duration);
          // The anti-pattern: the loop thread sleeps, and every connection of this loop with it.
          if (!loop_.shared.sleeper.sleep_for(step.duration)) return close();  // stopping
          answer(step.reply);
        } else if (offload == Offload::pool ||
                   (offload == Offload::standard && std::is_same_v<Step, Block>)) {
          queue_work();  // libuv's thread pool; on_work_done brings it back to this loop
        } else if (offload == Offload::thread) {
          start_thread();  // a thread per call; it posts itself back through loop_.wake
        } else {           // Now and Compute (and, inline, a Block) on the loop
          if (!perform(plan_, loop_.shared.sleeper)) return close();  // stopping
          answer(step.reply);
        }
      },
      plan_);
}
// [plan-visit-libuv_callbacks]

void Connection::wait(std::chrono::milliseconds duration) {
  if (duration.count() == 0) return answer(reply_of(plan_));
  deadline_ = Clock::now() + duration;
  uv_timer_start(&timer_, on_wait_timer, static_cast<std::uint64_t>(duration.count()), 0);
}

void Connection::on_wait_timer(uv_timer_t* timer) {
  auto* c = static_cast<Connection*>(timer->data);
  // libuv's clock is whole milliseconds, read once per loop iteration, so a timer can fire up to
  // a few ms before its real deadline. A Wait is never answered early: check, and wait the rest.
  if (const auto left = c->deadline_ - Clock::now(); left > Clock::duration::zero()) {
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
    uv_timer_start(timer, on_wait_timer, static_cast<std::uint64_t>(ms), 0);
    return;
  }
  c->answer(reply_of(c->plan_));
}

void Connection::queue_work() {
  if (!loop_.shared.admission.try_acquire()) return answer(service_unavailable());  // 503
  away_ = Away::pool;
  uv_queue_work(&loop_.uv, &work_, on_work, on_work_done);  // fails only for a null callback
}

void Connection::on_work(uv_work_t* work) {  // on a pool thread: the loop does not touch plan_
  auto* c = static_cast<Connection*>(work->data);
  c->work_ok_ = perform(c->plan_, c->loop_.shared.sleeper);
}

void Connection::on_work_done(uv_work_t* work, int status) {  // back on the loop
  auto* c = static_cast<Connection*>(work->data);
  c->loop_.shared.admission.release();
  c->offload_done(status == 0 && c->work_ok_);  // UV_ECANCELED: stop() cancelled it, queued
}

void Connection::start_thread() {
  away_ = Away::thread;
  ++loop_.threads_running;
  try {
    // NOTE: the thread uses this connection and loop_; neither goes away before thread_done()
    // joined it (close() waits for away_, and the loop keeps `wake` open for threads_running).
    thread_ = std::thread([this] {
      work_ok_ = perform(plan_, loop_.shared.sleeper);
      loop_.post_finished(this);
    });
  } catch (const std::system_error&) {  // no thread to be had: answer as a full pool would
    away_ = Away::no;
    --loop_.threads_running;
    answer(service_unavailable());
  }
}

void Connection::thread_done() {
  thread_.join();
  --loop_.threads_running;
  offload_done(work_ok_);
}

void Connection::offload_done(bool ok) {
  away_ = Away::no;
  if (closing_) return close_handles();  // close() came while the work was away
  if (!ok) return close();               // the sleep was cut short: the server is stopping
  answer(reply_of(plan_));
}

void Connection::answer(const Reply& reply) {
  out_.clear();
  session_.write_reply(reply, out_, std::chrono::system_clock::now());
  // NOTE: uv_write keeps a pointer to these bytes, not a copy: out_ must not change (or go)
  // until on_written. It is a member, so it outlives the write; nothing touches it meanwhile.
  const uv_buf_t buf = uv_buf_init(out_.data(), static_cast<unsigned>(out_.size()));
  if (uv_write(&write_, stream(), &buf, 1, on_written) != 0) close();
}

void Connection::on_written(uv_write_t* write, int status) {
  auto* c = static_cast<Connection*>(write->data);
  if (status < 0) return c->close();  // the client is gone (or UV_ECANCELED: already closing)
  if (!c->session_.keep_alive()) return c->linger();
  if (!c->start_next()) c->await_request();  // a pipelined request first, else read again
}

void Connection::linger() {
  // A closing reply must reach the client: half-close (the FIN follows the response), then read
  // and discard what it still sends, so that closing does not reset the connection under it.
  lingering_ = true;
  if (uv_shutdown(&shutdown_, stream(), on_shutdown) != 0) return close();
  uv_timer_start(&timer_, on_linger_timeout, static_cast<std::uint64_t>(linger_timeout.count()), 0);
  if (uv_read_start(stream(), on_alloc, on_read) != 0) close();
}

void Connection::on_shutdown(uv_shutdown_t* shutdown, int status) {
  if (status < 0) static_cast<Connection*>(shutdown->data)->close();
}

void Connection::on_linger_timeout(uv_timer_t* timer) {
  static_cast<Connection*>(timer->data)->close();
}

void Connection::close() {
  if (closing_) return;
  closing_ = true;
  if (away_ == Away::no) return close_handles();
  // The pool or a thread still uses this object: its handles close when the work comes back.
  // Work still queued in the pool is cancelled (on_work_done then sees UV_ECANCELED); running
  // work ends early because stop() interrupted the Sleeper.
  if (away_ == Away::pool) uv_cancel(reinterpret_cast<uv_req_t*>(&work_));
}

void Connection::close_handles() {
  uv_close(as_handle(&tcp_), on_closed);  // a pending write or shutdown gets UV_ECANCELED first
  uv_close(as_handle(&timer_), on_closed);
}

void Connection::on_closed(uv_handle_t* handle) {
  auto* c = static_cast<Connection*>(handle->data);
  // NOTE: the only place a connection is freed. libuv may use a handle's memory until that
  // handle's close callback has run, and both handles live inside this object: it goes after
  // the second callback, never in close().
  if (--c->handles_open_ == 0) delete c;
}

}  // namespace cm::libuv_callbacks
