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
// The asio_coro_uring variant compiles the same files for Asio's io_uring backend.
//
// Try:
//   build/bin/cm-server --model asio_coro --port 8080 --threads 1
//   curl -v localhost:8080/delay/100
//   time (for i in $(seq 10); do curl -s -o /dev/null localhost:8080/delay/1000 & done; wait)
//       # ~1 s: the ten wait together on one thread. With --wait-mode sleep: ~10 s, in turn.
//
// Shape: one io_context per thread (`--threads`), each with its own acceptor on its own
// SO_REUSEPORT socket, so the kernel spreads connections over the loops and each loop owns its
// connections outright: no strand, no lock on the I/O path. Each loop runs accept_loop(), which
// co_spawns serve_connection() (connection.cpp) per client. stop() interrupts the blocking calls,
// posts close_all() to every loop (close the acceptor, close every socket, cancel every timer),
// and joins: a loop's run() returns only once every coroutine on it has finished. Then it
// destroys the io_contexts, which closes their own descriptors.

#include <sys/socket.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>

#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "cm/net.hpp"
#include "cm/server.hpp"
#include "connection.hpp"

// The same sources build `asio_coro` and, for the io_uring backend, `asio_coro_uring`.
#ifndef CM_ASIO_MODEL
#define CM_ASIO_MODEL asio_coro
#endif
#define CM_STR2(x) #x
#define CM_STR(x) CM_STR2(x)
#define CM_CAT2(a, b) a##b
#define CM_CAT(a, b) CM_CAT2(a, b)

namespace cm::asio_coro {

Shared::Shared(const ServerOptions& o, std::string model)
    : options(o),
      server_name(server_header(model)),
      pool(o.blocking_threads),
      admission(std::size_t{o.blocking_threads} + o.blocking_queue) {}

namespace {

class AsioServer final : public Server {
 public:
  explicit AsioServer(ServerOptions options) : options_(std::move(options)) {
    if (options_.threads == 0) options_.threads = default_loop_threads();
    if (options_.blocking_threads == 0) options_.blocking_threads = 1;
  }
  ~AsioServer() override { stop(); }

  void start() override {
    try {
      // With the io_uring backend the ring is set up here (by the acceptor's service), and the
      // kernel may refuse it: old kernel, io_uring_disabled, seccomp.
      for (unsigned i = 0; i < options_.threads; ++i)
        loops_.push_back(std::make_unique<Loop>());
    } catch (const boost::system::system_error& e) {
      loops_.clear();
#if defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
      throw ModelUnavailable(e.code(), std::string(model()) + ": io_uring refused by the kernel");
#else
      throw std::system_error(e.code(), std::string(model()) + ": io_context");
#endif
    }
    Listeners listeners = open_listeners(options_.host, options_.port, options_.threads,
                                         options_.backlog, /*nonblocking=*/true);
    port_ = listeners.port;
    shared_ = std::make_unique<Shared>(options_, std::string(model()));
    for (std::size_t i = 0; i < loops_.size(); ++i) {
      Loop& loop = *loops_[i];
      const int fd = listeners.sockets[i].get();
      int domain = AF_INET;
      socklen_t size = sizeof domain;
      ::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &size);
      boost::system::error_code ec;
      loop.acceptor.assign(domain == AF_INET6 ? tcp::v6() : tcp::v4(), fd, ec);
      if (ec) throw std::system_error(ec, "asio acceptor assign");
      listeners.sockets[i].release();  // the acceptor owns the fd now
      asio::co_spawn(loop.io, accept_loop(loop, *shared_), asio::detached);
    }
    std::lock_guard lock(stop_mutex_);
    started_ = true;  // first: if a thread cannot be made, stop() still joins those that run
    for (auto& loop : loops_)
      threads_.emplace_back([&io = loop->io] { io.run(); });
  }

  void stop() override {
    std::lock_guard lock(stop_mutex_);
    if (!started_ || stopped_) return;
    shared_->sleeper.interrupt();  // wakes every Block on the pool and every --wait-mode sleep
    for (auto& loop : loops_)
      asio::post(loop->io, [&l = *loop] { l.close_all(); });
    for (auto& thread : threads_)
      thread.join();  // run() returns: no coroutine is left
    shared_->pool.join();
    shared_->call_threads.join_all();  // --offload thread: their handlers ran, so they are ending
    loops_.clear();  // the io_contexts' own fds (epoll or the ring, eventfd, timerfd)
    stopped_ = true;
  }

  std::uint16_t port() const override {
    return port_;
  }
  std::size_t open_connections() const override {
    return shared_ ? shared_->open.load() : 0;
  }
  std::string_view model() const override {
    return CM_STR(CM_ASIO_MODEL);
  }

 private:
  ServerOptions options_;
  // NOTE: declared before shared_, so destroyed after it: the pool (in shared_) is joined while
  // the io_contexts it resumes coroutines on still exist.
  std::vector<std::unique_ptr<Loop>> loops_;
  std::unique_ptr<Shared> shared_;
  std::uint16_t port_ = 0;
  std::vector<std::thread> threads_;
  std::mutex stop_mutex_;
  bool started_ = false;
  bool stopped_ = false;
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
