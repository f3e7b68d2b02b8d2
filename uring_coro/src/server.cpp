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
// runtime/, small enough to read first, with tests of its own.
//
// What it needs: Linux with io_uring (5.19 or later, for IORING_ASYNC_CANCEL_ANY at stop, and
// multishot accept, which falls back to one accept per SQE where refused) and liburing (Debian:
// liburing-dev). Where the kernel refuses io_uring (too old, or kernel.io_uring_disabled, or a
// seccomp filter), start() throws cm::ModelUnavailable and cm-server says so in one line.
//
// Try:
//   build/bin/cm-server --model uring_coro --port 8080 --threads 1
//   curl -v localhost:8080/delay/100
//   harness/burst --port 8080 --connections 2000 --path /delay/500   # all within ~0.5 s
//
// Shape: one ring per thread (cm::LoopServer), each with its own SO_REUSEPORT listening socket.
// Each thread spawns an accept coroutine, which spawns serve_connection() (connection.cpp) per
// connection, and runs its ring. One multishot accept SQE gives a CQE per connection, so under
// load a whole backlog is taken in one turn of the ring, not one connection per turn. Stopping
// wakes every ring; each cancels everything in flight and runs until every task it spawned has
// ended.

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

#include "cm/loop_server.hpp"
#include "cm/policy.hpp"
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

class UringServer final : public LoopServer {
 public:
  explicit UringServer(ServerOptions options)
      : LoopServer(std::move(options), "uring_coro", /*nonblocking=*/false),
        pool_(state_.options.blocking_threads) {}
  ~UringServer() override { stop(); }

 private:
  /// One thread's ring and its listening socket.
  struct Loop {
    std::unique_ptr<uring::Ring> ring = make_ring();
    Fd listener;
    std::atomic<bool> drain{false};  ///< drain_loop() asked; the loop's thread carries it out
  };

  void add_loop(Fd listener) override {
    loops_.push_back(std::make_unique<Loop>());
    loops_.back()->listener = std::move(listener);
  }
  void drain_loop(std::size_t i) override {
    loops_[i]->drain.store(true);
    loops_[i]->ring->wake();
  }
  void stop_loop(std::size_t i) override {
    stopping_.store(true, std::memory_order_release);
    loops_[i]->ring->wake();
  }
  void stopped() override {
    pool_.stop();    // its queue is empty: every job came back
    loops_.clear();  // rings and listening sockets
  }

  /// A loop's thread: serve until stop(), then cancel everything and join every task.
  void run_loop(std::size_t i) override {
    uring::Ring& ring = *loops_[i]->ring;
    Context context{ring, pool_, state_};
    if (state_.database_on_loops()) context.db.emplace(ring, state_.options.db);
    try {
      ring.spawn(accept_connections(context, loops_[i]->listener));
      const bool wheel = state_.options.timers == Timers::wheel;
      while (!stopping_.load(std::memory_order_acquire)) {
        // [turn-wheel-uring_coro]
        ring.run_once(context.wheel.next_wake());  // with a wait in the wheel: until its tick
        if (wheel) context.wheel.advance(std::chrono::steady_clock::now());
        // [turn-wheel-uring_coro]
        if (loops_[i]->drain.exchange(false)) uring_coro::drain(context, loops_[i]->listener.get());
      }
      // Pending reads, sends, timeouts and the accept complete with -ECANCELED; new ones are
      // refused; a job on the pool comes back (the sleeper was interrupted) and finds the same;
      // so do the waits in the wheel, fired at once.
      ring.cancel_all();
      context.wheel.expire_all();
      if (context.db) context.db->refuse_waiters();
      while (ring.spawned() > 0)
        ring.run_once();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "uring_coro: a loop failed: %s\n", e.what());
    }
  }

  /// Accepts on this loop's own listening socket, and spawns a coroutine per connection.
  uring::Task<void> accept_connections(Context& context, Fd& listener) {
    // One multishot SQE: a CQE per connection, a whole backlog in one turn of the ring.
    // NOTE: while that SQE is armed, this coroutine awaits nothing but next() (the back-off below
    // follows a failed accept, which ends the SQE), and it ends only through -ECANCELED.
    uring::Acceptor acceptor(context.ring, listener.get());
    for (;;) {
      const int fd = co_await acceptor.next();
      if (fd == -ECANCELED) {  // stopping or draining (connections that came were closed)
        listener.reset();      // the kernel let go of it: the port refuses new connections now
        co_return;
      }
      if (fd >= 0 && state_.draining()) {
        ::close(fd);  // accepted before drain()'s cancel reached the kernel, which ends the SQE
        continue;
      }
      if (fd < 0) {
        // One failed accept is not the loop's end; out of fds, say so and pause before next()
        // arms the accept again.
        state_.accept_failed(-fd);
        co_await uring::Timeout(context.ring, accept_backoff(-fd));
        continue;
      }
      state_.open.fetch_add(1, std::memory_order_relaxed);
      // NOTE: `context` lives on this loop's thread stack (run()), which outlives every task:
      // run() returns only once spawned() is 0.
      context.ring.spawn(serve_connection(context, Fd(fd)));
    }
  }

  uring::Pool pool_;  ///< where the pool venue runs, shared by every ring
  std::vector<std::unique_ptr<Loop>> loops_;
  std::atomic<bool> stopping_{false};
};

}  // namespace
}  // namespace cm::uring_coro

namespace cm::models {
std::unique_ptr<Server> make_uring_coro(const ServerOptions& options) {
  return std::make_unique<uring_coro::UringServer>(options);
}
}  // namespace cm::models
