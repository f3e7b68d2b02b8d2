#pragma once
/// \file connection.hpp
/// One connection, served by one coroutine on the io_context that accepted it.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <string>
#include <unordered_set>

#include "cm/server.hpp"
#include "cm/work.hpp"

namespace cm::asio_coro {

namespace asio = boost::asio;
using asio::ip::tcp;

/// What every loop of one server shares: the options, the offload pool and its admission, the
/// sleeper that stop() interrupts, and the count of connections held.
struct Shared {
  /// Starts the offload pool's `options.blocking_threads` threads.
  Shared(const ServerOptions& options, std::string model);
  ServerOptions options;    ///< as given (threads resolved)
  std::string server_name;  ///< the Server header, "cm-asio_coro"
  asio::thread_pool pool;   ///< where Block (and, with --offload pool, everything) runs
  Admission admission;      ///< blocking_threads + blocking_queue slots; beyond -> 503
  Sleeper sleeper;          ///< Block's blocking call, and the --wait-mode sleep anti-pattern
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
