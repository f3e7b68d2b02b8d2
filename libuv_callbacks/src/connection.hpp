#pragma once
/// \file connection.hpp
/// One event loop of the libuv model, and one connection on it: an object that embeds every libuv
/// handle and request it uses, driven by callbacks from accept to close.

#include <uv.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cm/fd.hpp"
#include "cm/libuv_callbacks/server.hpp"
#include "cm/limits.hpp"
#include "cm/routes.hpp"
#include "cm/session.hpp"
#include "cm/work.hpp"

namespace cm::libuv_callbacks {

class Connection;

/// What every loop of one server shares: the options and the thread-safe parts.
struct Shared {
  explicit Shared(ServerOptions server_options)
      : options(std::move(server_options)),
        admission(std::size_t{options.blocking_threads} + options.blocking_queue) {}

  ServerOptions options;
  const std::string name = server_header("libuv_callbacks");  ///< outlives every Session
  Sleeper sleeper;                   ///< every Block, and the sleep anti-pattern, sleep here
  Admission admission;               ///< Block (and more with --offload pool) in the pool
  std::atomic<std::size_t> open{0};  ///< connections held, on every loop
};

/// One uv_loop_t with its listening socket, run by one thread. Everything here but what `mutex`
/// guards is touched by the loop thread only (or before that thread starts).
struct Loop {
  /// uv_loop_init; throws std::system_error if libuv cannot make a loop.
  explicit Loop(Shared& shared);
  /// A loop that never ran (start() failed half-way) closes its handles here.
  ~Loop();
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  /// Takes over a listening socket (uv_tcp_open) and starts listening; throws std::system_error.
  void listen(Fd socket);
  /// The loop thread: uv_run until every handle is closed, then uv_loop_close into `report`.
  void run();
  /// From an offload thread: `connection` finished its work; the loop picks it up in on_wake.
  void post_finished(Connection* connection);
  /// From any thread: close the listener and every connection, then let uv_run return.
  void request_stop();

  Shared& shared;
  uv_loop_t uv{};
  uv_tcp_t listener{};
  uv_async_t wake{};                  ///< stop(), and offload threads that finished
  std::mutex mutex;                   ///< guards the two below
  std::vector<Connection*> finished;  ///< written by offload threads, drained by on_wake
  bool stop_requested = false;        ///< written by stop(), read by on_wake
  unsigned threads_running = 0;       ///< offload threads not yet joined
  bool stopping = false;              ///< the listener and the connections are closing
  bool closed = false;                ///< uv_loop_close() was called
  LoopReport report;                  ///< how uv_loop_close() went, for tests
  std::thread thread;
  /// NOTE: one read buffer per loop is enough. libuv calls alloc and then read, one read at a
  /// time, on this thread, and on_read copies the bytes into the Session before it returns.
  char read_buffer[read_buffer_bytes];

 private:
  static void on_wake(uv_async_t* wake);
  void close_loop();
};

/// One accepted connection. Lives from on_connection() to the close callback of its last handle.
class Connection {
 public:
  /// The listener's callback: accepts one connection and starts reading its first request.
  static void on_connection(uv_stream_t* listener, int status);
  /// Ends the connection: closes its handles now, or when its offloaded work comes back.
  void close();
  /// On the loop, after an offload thread posted this connection: joins it and answers.
  void thread_done();

 private:
  explicit Connection(Loop& loop);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&tcp_); }
  const ServerOptions& options() const { return loop_.shared.options; }
  void await_request();
  bool start_next();
  void execute();
  void wait(std::chrono::milliseconds duration);
  void queue_work();
  void start_thread();
  void offload_done(bool ok);
  void answer(const Reply& reply);
  void linger();
  void close_handles();

  static void on_alloc(uv_handle_t* handle, std::size_t suggested, uv_buf_t* buf);
  static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void on_header_timeout(uv_timer_t* timer);
  static void on_wait_timer(uv_timer_t* timer);
  static void on_work(uv_work_t* work);
  static void on_work_done(uv_work_t* work, int status);
  static void on_written(uv_write_t* write, int status);
  static void on_shutdown(uv_shutdown_t* shutdown, int status);
  static void on_linger_timeout(uv_timer_t* timer);
  static void on_closed(uv_handle_t* handle);

  enum class Away : std::uint8_t { no, pool, thread };  ///< where the plan's work is running

  // [connection-members-libuv_callbacks]
  Loop& loop_;
  uv_tcp_t tcp_{};            ///< the socket
  uv_timer_t timer_{};        ///< header timeout, then the Wait, then the linger deadline
  uv_write_t write_{};        ///< the response being written (one at a time)
  uv_shutdown_t shutdown_{};  ///< the half-close of a lingering close
  uv_work_t work_{};          ///< a plan in libuv's thread pool
  std::thread thread_;        ///< a plan on its own thread (--offload thread)
  Session session_;
  Plan plan_;        ///< the request being answered, with its reply
  std::string out_;  ///< the response bytes; NOTE: unchanged until on_written
  std::chrono::steady_clock::time_point deadline_;  ///< when the Wait may be answered
  std::size_t lingered_ = 0;                        ///< bytes discarded while lingering
  int handles_open_ = 2;  ///< tcp_ and timer_: freed when both close callbacks ran
  Away away_ = Away::no;
  bool work_ok_ = false;  ///< written by the offloaded work, read on the loop after it
  bool lingering_ = false;
  bool closing_ = false;
  // [connection-members-libuv_callbacks]
};

}  // namespace cm::libuv_callbacks
