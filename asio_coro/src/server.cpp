// asio_coro/src/server.cpp -- the Boost.Asio C++20 coroutine model.
//
// The idea it shows: a connection is a coroutine, not a thread. Each `co_await` on a socket or a
// timer suspends the connection's coroutine and returns the thread to its io_context, which
// resumes whichever coroutine's operation completes next. A request waiting on /delay is a
// suspended frame plus a queued timer, so one thread carries thousands of waiting requests
// (ceiling: connections / delay). The catch is the other side of the same coin: anything that
// blocks the thread inside a coroutine -- a blocking call, a sleep, a long computation -- stalls
// every connection of that loop. So /block goes to a bounded asio::thread_pool and comes back;
// /cpu stays on the loop, on purpose, to show that cost.
//
// What it needs: Boost.Asio 1.81 (header-only; Debian's libboost1.81-dev) and C++20 coroutines.
// The asio_coro_uring variant compiles the same files for Asio's io_uring backend; only how a read
// waits differs (receive() in connection.cpp). Commands to try: docs/models/asio_coro.md.
//
// Shape: one io_context per thread (cm::LoopServer), each with its own acceptor on its own
// SO_REUSEPORT socket, so the kernel spreads connections over the loops and each loop owns its
// connections outright: no strand, no lock on the I/O path. Each loop runs accept_loop(), which
// co_spawns serve_connection() (connection.cpp) per client. Stopping posts close_all() to every
// loop (close the acceptor, close every socket, cancel every timer); a loop's run() returns only
// once every coroutine on it has finished.

#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>

#include <memory>
#include <system_error>
#include <vector>

#include "cm/loop_server.hpp"
#include "cm/policy.hpp"
#include "connection.hpp"
#include "db.hpp"

#if defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
#define CM_MAKE_MODEL make_asio_coro_uring
constexpr const char* model_name = "asio_coro_uring";
#else
#define CM_MAKE_MODEL make_asio_coro
constexpr const char* model_name = "asio_coro";
#endif

namespace cm::asio_coro {
namespace {
using boost::system::error_code;
constexpr auto as_value = asio::as_tuple(asio::deferred);  // errors as values, not exceptions
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
  for (Connection& c : connections) {
    if (!c.awaiting_request) continue;
    c.deadline->passed = true;  // receive() ends as at its deadline: drained, the deadline is now
    c.socket.cancel(ignored);
  }
}

namespace {

// [sweep-writes-asio_coro]
/// One timer per loop checks every connection's write deadline, about once a second, until
/// close_all() cancels it: nothing is armed per write (a steady_timer armed for each reply's write
/// resets the reactor's timerfd at every request).
awaitable<void> sweep_writes(Loop& loop) {
  const auto limit = loop.state.options.write_timeout;
  const auto period = std::min<Clock::duration>(limit, std::chrono::seconds(1));
  while (!loop.stopping) {
    loop.sweep.expires_after(period);
    if (const auto [ec] = co_await loop.sweep.async_wait(as_value); ec) co_return;  // close_all()
    const auto now = Clock::now();
    for (Connection& c : loop.connections)
      if (c.write_deadline < now) c.close();  // its async_write ends with an error: so does it
  }
}
// [sweep-writes-asio_coro]

// [turn-wheel-asio_coro]
/// --timers wheel: fires the wheel's due waits each time `loop.tick` expires, and sets it again for
/// the next tick that holds one, until close_all() cancels it.
awaitable<void> turn_wheel(Loop& loop) {
  while (!loop.stopping) {
    loop.tick.expires_at(loop.wheel.next_wake().value_or(Timer::time_point::max()));
    co_await loop.tick.async_wait(as_value);  // expired, or cancelled by an earlier arm
    loop.wheel.advance(Clock::now());
  }
}
// [turn-wheel-asio_coro]

/// Accepts on `loop` until its acceptor is closed, one serve_connection coroutine per client.
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

class AsioServer final : public LoopServer {
 public:
  explicit AsioServer(ServerOptions options)
      : LoopServer(std::move(options), model_name, /*nonblocking=*/true),
        pool_(state_.options.blocking_threads) {}
  ~AsioServer() override { stop(); }

 private:
  void add_loop(Fd listener) override {
    try {
      // With the io_uring backend the ring is set up here (by the acceptor's service), and the
      // kernel may refuse it: old kernel, io_uring_disabled, seccomp.
      loops_.push_back(std::make_unique<Loop>(state_, pool_));
    } catch (const boost::system::system_error& e) {
#if defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
      throw ModelUnavailable(e.code(), std::string(model()) + ": io_uring refused by the kernel");
#else
      throw std::system_error(e.code(), std::string(model()) + ": io_context");
#endif
    }
    Loop& loop = *loops_.back();
    if (state_.database_on_loops()) loop.db = std::make_unique<LoopDb>(loop.io, state_.options.db);
    int domain = AF_INET;
    socklen_t size = sizeof domain;
    ::getsockopt(listener.get(), SOL_SOCKET, SO_DOMAIN, &domain, &size);
    error_code ec;
    loop.acceptor.assign(domain == AF_INET6 ? tcp::v6() : tcp::v4(), listener.get(), ec);
    if (ec) throw std::system_error(ec, "asio acceptor assign");
    listener.release();  // the acceptor owns the fd now
    asio::co_spawn(loop.io, accept_loop(loop), asio::detached);
    asio::co_spawn(loop.io, sweep_writes(loop), asio::detached);
    if (state_.options.timers == Timers::wheel)
      asio::co_spawn(loop.io, turn_wheel(loop), asio::detached);
  }
  void run_loop(std::size_t i) override { loops_[i]->io.run(); }  // until no coroutine is left
  void drain_loop(std::size_t i) override {
    asio::post(loops_[i]->io, [&loop = *loops_[i]] { loop.drain(); });
  }
  void stop_loop(std::size_t i) override {
    asio::post(loops_[i]->io, [&loop = *loops_[i]] { loop.close_all(); });
  }
  // NOTE: the pool is joined before the loops go: its last completions resume coroutines on them.
  void stopped() override {
    pool_.join();
    loops_.clear();  // the io_contexts' own fds (epoll, its eventfd and timerfd; or the ring)
  }

  asio::thread_pool pool_;  ///< where the pool venue runs (Block, and more with --offload pool)
  std::vector<std::unique_ptr<Loop>> loops_;
};

}  // namespace
}  // namespace cm::asio_coro

// The one symbol the shared asio_coro_uring library exports (see CMakeLists.txt).
namespace cm::models {
__attribute__((visibility("default"))) std::unique_ptr<Server> CM_MAKE_MODEL(
    const ServerOptions& options) {
  return std::make_unique<asio_coro::AsioServer>(options);
}
}  // namespace cm::models
