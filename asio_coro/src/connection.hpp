#pragma once
/// \file connection.hpp
/// One connection, served by one coroutine on the io_context that accepted it.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "cm/server.hpp"
#include "cm/work.hpp"

namespace cm::asio_coro {

namespace asio = boost::asio;
using asio::ip::tcp;

/// The threads of --offload thread, one per call (aeronet's deferWork). A reaper thread joins
/// each one as it finishes, so no loop ever waits for a thread's end.
class CallThreads {
 public:
  CallThreads() = default;
  ~CallThreads() { join_all(); }
  CallThreads(const CallThreads&) = delete;
  CallThreads& operator=(const CallThreads&) = delete;
  /// Runs `work` on a new thread; throws std::system_error if the system refuses one.
  void start(std::function<void()> work);
  /// Returns once every thread started has finished and been joined, and the reaper too.
  void join_all();

 private:
  /// The reaper's loop: joins the threads that reported their end, until join_all().
  void reap();
  std::mutex mutex_;
  std::condition_variable changed_;               ///< a thread finished, or join_all() began
  std::map<std::thread::id, std::thread> running_;  ///< started, not yet joined
  std::vector<std::thread::id> finished_;         ///< returned from their work, to join
  bool stopping_ = false;
  std::thread reaper_;  ///< started with the first call thread
};

/// What every loop of one server shares: the options, the offload pool and its admission, the
/// sleeper that stop() interrupts, the per-call threads, and the count of connections held.
struct Shared {
  /// Starts the offload pool's `options.blocking_threads` threads.
  Shared(const ServerOptions& options, std::string model);
  ServerOptions options;    ///< as given (threads resolved)
  std::string server_name;  ///< the Server header, "cm-asio_coro"
  asio::thread_pool pool;   ///< where Block (and, with --offload pool, everything) runs
  Admission admission;      ///< blocking_threads + blocking_queue slots; beyond -> 503
  Sleeper sleeper;          ///< Block's blocking call, and the --wait-mode sleep anti-pattern
  CallThreads call_threads;  ///< --offload thread: a thread per call, joined off the loops
  std::atomic<std::size_t> open{0};  ///< connections held, over every loop
};

/// The I/O objects of one connection; it lives in its coroutine's frame.
struct Connection {
  explicit Connection(tcp::socket s) : socket(std::move(s)), timer(socket.get_executor()) {}
  /// Cancels whatever the coroutine awaits; it then sees an error and returns.
  void close() {
    boost::system::error_code ignored;
    socket.close(ignored);
    timer.cancel();
  }
  tcp::socket socket;        ///< the client
  asio::steady_timer timer;  ///< header timeout, Wait, lingering close: one at a time
};

/// One event loop: an io_context run by one thread, its acceptor, the connections it owns.
/// Everything but `io` is touched only on that thread.
struct Loop {
  asio::io_context io{1};      ///< concurrency hint: one thread runs it
  tcp::acceptor acceptor{io};  ///< adopts one SO_REUSEPORT socket of cm::open_listeners
  std::unordered_set<Connection*> connections;  ///< held now, so stop can close them
  bool stopping = false;  ///< set by close_all(); a late connection closes at once
  /// Stops accepting and closes every connection; runs on the loop's thread.
  void close_all();
};

/// Accepts on `loop` until its acceptor is closed, one serve_connection coroutine per client.
asio::awaitable<void> accept_loop(Loop& loop, Shared& shared);

/// Serves one client until it closes, a reply ends the connection, the header timeout passes or
/// the server stops.
asio::awaitable<void> serve_connection(tcp::socket socket, Loop& loop, Shared& shared);

}  // namespace cm::asio_coro
