// uring_coro/src/server.cpp -- the io_uring coroutine model.
//
// The idea it shows: one thread per CPU, each with its own io_uring, and one coroutine per
// connection. A coroutine asks for I/O by co_awaiting an operation; the awaiter puts its own
// address in the SQE's user_data and suspends. The thread submits, waits for completions, and
// resumes whichever coroutine each CQE names. A waiting request (`/delay/{ms}`) is a suspended
// coroutine frame plus an IORING_OP_TIMEOUT in the kernel: thousands of them cost kilobytes each,
// not threads, so the ceiling is connections / delay. `/block/{ms}` must not stall the ring: it
// goes to a bounded pool whose workers post the coroutine back onto this ring (an eventfd the ring
// polls), 503 when the pool's queue is full. The runtime (Task, Ring, Pool) is in
// include/cm/uring/ and src/runtime/, small enough to read first.
//
// What it needs: Linux with io_uring (5.19 or later, for IORING_ASYNC_CANCEL_ANY at stop) and
// liburing (Debian: liburing-dev). Where the kernel refuses io_uring (too old, or
// kernel.io_uring_disabled, or a seccomp filter), start() throws cm::ModelUnavailable and
// cm-server says so in one line.
//
// Try:
//   build/bin/cm-server --model uring_coro --port 8080 --threads 1
//   curl -v localhost:8080/delay/100
//   harness/burst --port 8080 --connections 2000 --path /delay/500   # all within ~0.5 s
//
// Shape: start() sets up one ring per thread (first, so a refusal leaves nothing behind), one
// SO_REUSEPORT listening socket per ring, the pool, then the threads. Each thread spawns an accept
// coroutine, which spawns serve_connection() (connection.cpp) per connection, and runs its ring.
// stop() interrupts the sleeps, wakes every ring; each ring cancels everything in flight, runs
// until every task it spawned has ended, and is torn down after its thread is joined.

#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cm/net.hpp"
#include "cm/server.hpp"
#include "cm/uring/pool.hpp"
#include "cm/uring/ring.hpp"
#include "cm/work.hpp"
#include "connection.hpp"

namespace cm::uring_coro {
namespace {

using namespace std::chrono_literals;

/// kernel.io_uring_disabled, for the message when io_uring is refused ("" if unreadable).
std::string io_uring_disabled_setting() {
  std::ifstream file("/proc/sys/kernel/io_uring_disabled");
  std::string value;
  if (file >> value) return "; kernel.io_uring_disabled = " + value;
  return "";
}

/// A ring of its own for this machine, or ModelUnavailable saying why not.
std::unique_ptr<uring::Ring> make_ring() {
  try {
    return std::make_unique<uring::Ring>();
  } catch (const std::system_error& e) {
    if (!uring::means_unavailable(e)) throw;
    // what() gains ": <the errno's text>" from system_error.
    throw ModelUnavailable(e.code(),
                           "uring_coro: io_uring is not available here "
                           "(io_uring_queue_init failed" +
                               io_uring_disabled_setting() + ")");
  }
}

class UringServer final : public Server {
 public:
  explicit UringServer(ServerOptions options) : options_(std::move(options)) {
    if (options_.threads == 0) options_.threads = default_loop_threads();
  }
  ~UringServer() override { stop(); }

  void start() override {
    std::vector<std::unique_ptr<Loop>> loops;
    for (unsigned i = 0; i < options_.threads; ++i)
      loops.push_back(std::make_unique<Loop>());
    for (auto& loop : loops)
      loop->ring = make_ring();
    Listeners listeners =
        open_listeners(options_.host, options_.port, options_.threads, options_.backlog);
    pool_ = std::make_unique<uring::Pool>(
        options_.blocking_threads,
        std::size_t{options_.blocking_threads} + options_.blocking_queue);
    for (std::size_t i = 0; i < loops.size(); ++i) {
      loops[i]->listener = std::move(listeners.sockets[i]);
    }
    port_ = listeners.port;
    loops_ = std::move(loops);
    started_ = true;
    for (auto& loop : loops_)
      loop->thread = std::thread([this, &loop = *loop] { run(loop); });
  }

  void stop() override {
    std::lock_guard lock(stop_mutex_);
    if (!started_ || stopped_) return;
    stopping_.store(true, std::memory_order_release);
    sleeper_.interrupt();  // a Block on a worker, or a sleep on a loop, ends now
    for (auto& loop : loops_)
      loop->ring->wake();
    for (auto& loop : loops_)
      loop->thread.join();
    pool_->stop();   // its queue is empty: every job's coroutine was joined with its ring
    loops_.clear();  // rings and listening sockets
    stopped_ = true;
  }

  std::uint16_t port() const override { return port_; }
  std::size_t open_connections() const override { return open_.load(); }
  std::string_view model() const override { return "uring_coro"; }

 private:
  /// One thread, its ring and its listening socket.
  struct Loop {
    std::unique_ptr<uring::Ring> ring;
    Fd listener;
    std::thread thread;
  };

  /// A loop's thread: serve until stop(), then cancel everything and join every task.
  void run(Loop& loop) {
    uring::Ring& ring = *loop.ring;
    Context context{ring, *pool_, sleeper_, options_, name_, open_};
    try {
      ring.spawn(accept_connections(context, loop.listener.get()));
      while (!stopping_.load(std::memory_order_acquire))
        ring.run_once();
      // Pending reads, sends, timeouts and the accept complete with -ECANCELED; new ones are
      // refused; a job on the pool comes back (the sleeper was interrupted) and finds the same.
      ring.cancel_all();
      while (ring.spawned() > 0)
        ring.run_once();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "uring_coro: a loop failed: %s\n", e.what());
    }
  }

  /// Accepts on this loop's own listening socket, and spawns a coroutine per connection.
  uring::Task<void> accept_connections(Context& context, int listener) {
    for (;;) {
      const int fd = co_await uring::Accept(context.ring, listener);
      if (fd == -ECANCELED || context.ring.cancelled()) {
        if (fd >= 0) ::close(fd);
        co_return;
      }
      if (fd < 0) {
        // Out of descriptors: the connection stays in the backlog; try again shortly. Other
        // errors (ECONNABORTED, ...) are one failed accept, not the end of the loop.
        if (fd == -EMFILE || fd == -ENFILE) co_await uring::Timeout(context.ring, 10ms);
        continue;
      }
      open_.fetch_add(1, std::memory_order_relaxed);
      // NOTE: `context` lives on this loop's thread stack (run()), which outlives every task:
      // run() returns only once spawned() is 0.
      context.ring.spawn(serve_connection(context, Fd(fd)));
    }
  }

  ServerOptions options_;
  const std::string name_ = server_header("uring_coro");
  std::uint16_t port_ = 0;
  std::vector<std::unique_ptr<Loop>> loops_;
  std::unique_ptr<uring::Pool> pool_;
  Sleeper sleeper_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> open_{0};

  std::mutex stop_mutex_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace
}  // namespace cm::uring_coro

namespace cm::models {
std::unique_ptr<Server> make_uring_coro(const ServerOptions& options) {
  return std::make_unique<uring_coro::UringServer>(options);
}
}  // namespace cm::models
