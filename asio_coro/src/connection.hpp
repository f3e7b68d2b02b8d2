#pragma once
/// \file connection.hpp
/// One event loop of the Asio model, and one connection on it, served by one coroutine.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/intrusive/list.hpp>
#include <chrono>
#include <memory>

#include "cm/server_state.hpp"
#include "cm/timer_wheel.hpp"

namespace cm::asio_coro {

namespace asio = boost::asio;
namespace bi = boost::intrusive;
using asio::ip::tcp;

/// The loop's own executor type: Asio's default, any_io_executor, would cost ~380 B a request.
using Executor = asio::io_context::executor_type;
template <typename T>
using awaitable = asio::awaitable<T, Executor>;  ///< a coroutine that runs on a loop
using Socket = tcp::socket::rebind_executor<Executor>::other;
using Timer = asio::steady_timer::rebind_executor<Executor>::other;
using Clock = std::chrono::steady_clock;

/// Shared with the timer's handler, which may run late: it cancels the read numbered `read` only.
struct Deadline { Socket* socket = nullptr; unsigned read = 0; bool passed = false; };

/// The I/O objects of one connection, in its coroutine's frame; its hook lists it in its loop.
struct Connection : bi::list_base_hook<bi::link_mode<bi::auto_unlink>> {
  explicit Connection(Socket s) : socket(std::move(s)), timer(socket.get_executor()) {}
  void close() {  ///< cancels whatever the coroutine awaits: it sees an error and returns
    boost::system::error_code ignored;
    socket.close(ignored);
    timer.cancel();
  }
  Socket socket;                  ///< the client
  Timer timer;                    ///< header deadline, Wait, lingering close: one at a time
  std::shared_ptr<Deadline> deadline = std::make_shared<Deadline>();  ///< for receive()
  bool awaiting_request = false;  ///< in receive() for a request: drain() may cut it short
  /// While a reply is written: when sweep_writes() may close the connection (the write deadline,
  /// restarted by each write that makes progress).
  Clock::time_point write_deadline = Clock::time_point::max();
};

struct LoopDb;  // db.hpp: --db with --db-mode readiness

/// One event loop: an io_context run by one thread, its acceptor, the connections it owns.
/// Everything but `io`, `state` and `pool` is touched only on that thread.
struct Loop {
  Loop(ServerState& server_state, asio::thread_pool& offload_pool)
      : state(server_state), pool(offload_pool) {}
  ServerState& state;       ///< what every loop of the server shares
  asio::thread_pool& pool;  ///< where the pool venue runs, shared by every loop
  asio::io_context io{1};   ///< concurrency hint: one thread runs it
  tcp::acceptor::rebind_executor<Executor>::other acceptor{io};     ///< an open_listeners socket
  bi::list<Connection, bi::constant_time_size<false>> connections;  ///< held now, for stop()
  Timer sweep{io.get_executor()};  ///< sweep_writes()'s: the write deadlines of every connection
  TimerWheel wheel;                ///< --timers wheel: where the Waits are (turn_wheel())
  Timer tick{io.get_executor()};   ///< turn_wheel()'s: set for the wheel's next tick
  std::unique_ptr<LoopDb> db;  ///< --db, readiness: this loop's database connections (db.hpp)
  bool stopping = false;  ///< set by close_all(); a late connection closes at once
  ~Loop();
  void close_all();  ///< stops accepting, closes every connection (on the loop's thread)
  void drain();      ///< stops accepting, ends every wait for a request (on the loop's thread)
};

/// Serves one client until it closes, a reply ends the connection, the header timeout passes or
/// the server stops.
awaitable<void> serve_connection(Connection c, Loop& loop);

}  // namespace cm::asio_coro
