// connection.cpp -- the Asio model's connection: one coroutine reads, executes the plan, writes.
//
// Every `co_await` below suspends this connection's coroutine and hands its thread back to the
// io_context, which goes on with the other connections of the loop. A waiting request is therefore
// nothing but suspended coroutine frames (serve_connection's holds the Session) and a timer queued
// in the io_context: no thread is held (the connection ceiling, connections / delay).
//
// Errors are values: every operation completes with `as_tuple(use_awaitable)`, so a client that
// leaves shows up as an error_code that ends this coroutine only, never as an exception.

#include "connection.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/system_error.hpp>

#include <array>
#include <chrono>
#include <system_error>
#include <tuple>
#include <variant>

#include "cm/limits.hpp"
#include "cm/net.hpp"
#include "cm/session.hpp"

namespace cm::asio_coro {
namespace {

using asio::awaitable;
using asio::use_awaitable;
using asio::experimental::awaitable_operators::operator||;
using boost::system::error_code;
constexpr auto as_value = asio::as_tuple(use_awaitable);  // errors as values, not exceptions

/// Reads some bytes and hands them to `session` (if any), or gives up when the connection's
/// timer expires (error::timed_out). Returns the error and the count of bytes read.
awaitable<std::tuple<error_code, std::size_t>> receive(Connection& c, Session* session) {
  // NOTE: the buffer lives in this coroutine's frame, so only for as long as a read is pending:
  // a connection waiting on a timer does not hold it (docs/models/asio_coro.md, "What a waiting
  // request costs"). `||` completes only after the losing operation was cancelled and finished,
  // so no read into `buffer` outlives the frame.
  std::array<char, read_buffer_bytes> buffer;
  auto first = co_await (c.socket.async_read_some(asio::buffer(buffer), as_value) ||
                         c.timer.async_wait(as_value));
  if (first.index() == 1) {
    const auto [ec] = std::get<1>(first);  // operation_aborted: stop() cancelled the timer
    co_return std::tuple{ec ? ec : asio::error::timed_out, std::size_t{0}};
  }
  const auto [ec, n] = std::get<0>(first);
  if (!ec && session) session->received({buffer.data(), n});
  co_return std::tuple{ec, n};
}

/// Lingering close: shut down our side so the client reads the whole reply, then discard what it
/// still sends until it closes, linger_timeout passes or linger_max_bytes were read.
awaitable<void> linger_close(Connection& c) {
  error_code ignored;
  c.socket.shutdown(tcp::socket::shutdown_send, ignored);
  c.timer.expires_after(linger_timeout);
  for (std::size_t drained = 0; drained < linger_max_bytes;) {
    const auto [ec, n] = co_await receive(c, nullptr);
    if (ec) break;
    drained += n;
  }
}

/// Wait: a steady_timer in this request's coroutine -- or, with --wait-mode sleep, the
/// anti-pattern of sleeping on the loop thread, which stalls every connection of the loop.
// [wait-asio_coro]
awaitable<bool> wait(std::chrono::milliseconds duration, Connection& c, Shared& shared) {
  if (shared.options.wait_mode == WaitMode::sleep) co_return shared.sleeper.sleep_for(duration);
  c.timer.expires_after(duration);
  const auto [ec] = co_await c.timer.async_wait(as_value);
  co_return !ec;  // operation_aborted: the server is stopping
}
// [wait-asio_coro]

/// Runs the plan's work on whatever thread this coroutine is on.
awaitable<bool> perform_here(const Plan& plan, Sleeper& sleeper) {
  co_return perform(plan, sleeper);
}

/// --offload thread: runs the plan's work on a new thread (aeronet's deferWork), then resumes this
/// coroutine on its own io_context. The coroutine waits on a timer that never expires, used as a
/// one-shot event: the thread posts a handler to the loop that records the result and cancels it.
/// If the system refuses a thread, the reply is a 503.
awaitable<bool> on_new_thread(Plan& plan, Shared& shared) {
  const auto loop = co_await asio::this_coro::executor;
  asio::steady_timer finished(loop, asio::steady_timer::time_point::max());
  bool done = false;       // set on the loop, by the handler the thread posts
  bool completed = false;  // perform()'s result: false if stop() interrupted a Block
  // NOTE: the thread refers to this frame (plan lives in serve_connection's, suspended on us).
  // The frame stays alive because this coroutine cannot return before `done`, which only the
  // posted handler sets; after asio::post the thread touches nothing of ours. The pending wait
  // on `finished` keeps the loop's run() going (stop() does not cancel it: Connection::close()
  // knows only c.timer), so the io_context outlives the post. The thread is joined by
  // shared.call_threads' reaper, never by a loop; stop() joins whatever is left (server.cpp).
  try {
    shared.call_threads.start([&] {
      const bool ok = perform(plan, shared.sleeper);
      asio::post(loop, [&, ok] {
        completed = ok;
        done = true;
        finished.cancel();
      });
    });
  } catch (const std::system_error&) {  // the system refused another thread
    reply_of(plan) = service_unavailable();
    co_return true;
  }
  while (!done)
    co_await finished.async_wait(as_value);
  co_return completed;
}

/// Runs the plan's work off the loop, then resumes this coroutine back on its own io_context:
/// co_spawn runs perform_here() on the other executor and completes `use_awaitable` through the
/// awaiting coroutine's executor. A full pool answers 503 instead.
// [offload-asio_coro]
awaitable<bool> offload(Plan& plan, Shared& shared) {
  if (shared.options.offload == Offload::thread) co_return co_await on_new_thread(plan, shared);
  if (!shared.admission.try_acquire()) {
    reply_of(plan) = service_unavailable();
    co_return true;
  }
  struct Slot {
    Admission& admission;
    ~Slot() { admission.release(); }
  } slot{shared.admission};
  // NOTE: `plan` lives in serve_connection's frame, suspended here until the pool is done with it.
  co_return co_await asio::co_spawn(shared.pool, perform_here(plan, shared.sleeper), use_awaitable);
}
// [offload-asio_coro]

/// Whether this kind of step leaves the loop under the configured --offload mode.
template <typename Step>
bool offloaded(Offload mode) {
  if (mode == Offload::pool || mode == Offload::thread) return true;
  return mode == Offload::standard && std::is_same_v<Step, Block>;
}

/// Executes a plan; false if the server stopped meanwhile. Not a coroutine itself: it picks which
/// coroutine the caller awaits, and everything they reference lives in the caller's frame.
awaitable<bool> execute(Plan& plan, Connection& c, Shared& shared) {
  // [plan-visit-asio_coro]
  return std::visit(
      [&](const auto& step) -> awaitable<bool> {
        using Step = std::decay_t<decltype(step)>;
        if constexpr (std::is_same_v<Step, Wait>) {
          return wait(step.duration, c, shared);  // a timer: the loop serves others meanwhile
        } else {
          if (offloaded<Step>(shared.options.offload)) return offload(plan, shared);
          return perform_here(plan, shared.sleeper);  // Compute (and Now) on the loop itself
        }
      },
      plan);
  // [plan-visit-asio_coro]
}

/// Registers a connection with its loop (for stop) and counts it, for as long as it lives.
class Held {
 public:
  Held(Connection& c, Loop& loop, Shared& shared) : c_(c), loop_(loop), shared_(shared) {
    loop_.connections.insert(&c_);
    ++shared_.open;
  }
  ~Held() {
    loop_.connections.erase(&c_);
    --shared_.open;
  }
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;

 private:
  Connection& c_;
  Loop& loop_;
  Shared& shared_;
};

}  // namespace

void CallThreads::start(std::function<void()> work) {
  std::lock_guard lock(mutex_);
  if (!reaper_.joinable()) reaper_ = std::thread([this] { reap(); });
  // NOTE: the new thread reports its end under mutex_, held here until it is in running_.
  std::thread thread([this, work = std::move(work)] {
    work();
    std::lock_guard done(mutex_);
    finished_.push_back(std::this_thread::get_id());
    changed_.notify_one();
  });
  running_.emplace(thread.get_id(), std::move(thread));
}

void CallThreads::reap() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return !finished_.empty() || (stopping_ && running_.empty()); });
    if (finished_.empty()) return;  // stopping, and every thread was joined
    std::vector<std::thread> ended;
    for (std::thread::id id : finished_) {
      auto it = running_.find(id);
      ended.push_back(std::move(it->second));
      running_.erase(it);
    }
    finished_.clear();
    lock.unlock();
    for (std::thread& thread : ended)
      thread.join();  // it returned from its work: only its exit is left
    lock.lock();
  }
}

void CallThreads::join_all() {
  std::thread reaper;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    changed_.notify_one();
    reaper = std::move(reaper_);
  }
  if (reaper.joinable()) reaper.join();
}

void Loop::close_all() {
  stopping = true;
  error_code ignored;
  acceptor.close(ignored);
  for (Connection* c : connections)
    c->close();
}

awaitable<void> accept_loop(Loop& loop, Shared& shared) {
  asio::steady_timer backoff(loop.io);
  for (;;) {
    auto [ec, socket] = co_await loop.acceptor.async_accept(as_value);
    if (loop.stopping || !loop.acceptor.is_open()) co_return;
    if (ec) {
      // One failed accept is not the server's end. Out of descriptors: the client stays in the
      // backlog; try again shortly.
      if (ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space) {
        backoff.expires_after(std::chrono::milliseconds(10));
        co_await backoff.async_wait(as_value);
      }
      continue;
    }
    asio::co_spawn(loop.io, serve_connection(std::move(socket), loop, shared), asio::detached);
  }
}

awaitable<void> serve_connection(tcp::socket socket, Loop& loop, Shared& shared) {
  // NOTE: the socket was moved into this frame (a coroutine copies its parameters); `loop` and
  // `shared` are references, valid because stop() joins every loop before they are destroyed.
  Connection c(std::move(socket));
  Held held(c, loop, shared);
  if (loop.stopping) co_return;  // accepted just before stop(): close at once
  set_nodelay(c.socket.native_handle());

  Session session(shared.server_name);
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + shared.options.header_timeout;
  for (;;) {
    while (auto plan = session.next()) {
      if (!co_await execute(*plan, c, shared) || loop.stopping) co_return;
      out.clear();
      session.write_reply(reply_of(*plan), out, std::chrono::system_clock::now());
      if (auto [ec, n] = co_await asio::async_write(c.socket, asio::buffer(out), as_value); ec) {
        co_return;  // the client is gone: that ends this connection only
      }
      if (!session.keep_alive()) {
        co_await linger_close(c);
        co_return;
      }
      deadline = std::chrono::steady_clock::now() + shared.options.header_timeout;
    }

    // More bytes are needed; wait for them, but not past the header timeout.
    c.timer.expires_at(deadline);
    const auto [ec, n] = co_await receive(c, &session);
    if (ec == asio::error::timed_out && session.has_partial_request()) {
      out.clear();
      session.write_reply(request_timeout(), out, std::chrono::system_clock::now());
      if (auto [wec, wn] = co_await asio::async_write(c.socket, asio::buffer(out), as_value);
          !wec) {
        co_await linger_close(c);
      }
      co_return;
    }
    if (ec) co_return;  // closed by the client, reset, idle past the timeout, or stopping
  }
}

}  // namespace cm::asio_coro
