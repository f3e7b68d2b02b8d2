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

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>

#include <memory>
#include <system_error>
#include <vector>

#include "cm/loop_server.hpp"
#include "connection.hpp"
#include "db.hpp"

// The same sources build `asio_coro` and, for the io_uring backend, `asio_coro_uring`.
#ifndef CM_ASIO_MODEL
#define CM_ASIO_MODEL asio_coro
#endif
#define CM_STR2(x) #x
#define CM_STR(x) CM_STR2(x)
#define CM_CAT2(a, b) a##b
#define CM_CAT(a, b) CM_CAT2(a, b)

namespace cm::asio_coro {
namespace {

class AsioServer final : public LoopServer {
 public:
  explicit AsioServer(ServerOptions options)
      : LoopServer(std::move(options), CM_STR(CM_ASIO_MODEL), /*nonblocking=*/true),
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
    boost::system::error_code ec;
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
__attribute__((visibility("default"))) std::unique_ptr<Server> CM_CAT(make_, CM_ASIO_MODEL)(
    const ServerOptions& options) {
  return std::make_unique<asio_coro::AsioServer>(options);
}
}  // namespace cm::models
