#pragma once
/// \file connection.hpp
/// One event loop of the libuv model, and one connection on it: an object that embeds every libuv
/// handle and request it uses, driven by callbacks from accept to close.

#include <uv.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "cm/fd.hpp"
#include "cm/policy.hpp"
#include "cm/server_state.hpp"
#include "cm/timer_wheel.hpp"
#include "db.hpp"

namespace cm::libuv_callbacks {

using Clock = std::chrono::steady_clock;

/// One uv_loop_t and its listening socket, touched by its own thread only (and by wake_up()).
struct Loop {
  explicit Loop(ServerState& state);  ///< uv_loop_init; throws std::system_error
  ~Loop();                            ///< a loop that never ran closes its handles here
  void listen(Fd socket);             ///< uv_tcp_open + uv_listen; throws std::system_error
  void run();                         ///< the loop's thread: uv_run, then uv_loop_close
  /// From any thread: drain, or stop (close everything, let uv_run return); stop comes last.
  void wake_up(bool stop) {
    if (stop) stopping = true;
    uv_async_send(&wake);
  }

  ServerState& state;
  uv_loop_t uv{};
  uv_tcp_t listener{};
  uv_async_t wake{};    ///< wake_up() wakes the loop through it
  TimerWheel wheel;     ///< --timers wheel: where the Waits are, turned by `tick`
  uv_timer_t tick{};    ///< set for the wheel's next tick, by set_tick()
  void set_tick();      ///< (re)starts `tick` for the wheel's next wake, if any
  /// The timeout of a uv_timer_t that ends at `deadline`, never before (libuv's clock is coarser).
  std::uint64_t timeout_until(Clock::time_point deadline) const;
  uv_timer_t retry{};   ///< out of descriptors: takes the connection libuv accepted, a while later
  void defer_accept();  ///< says so; libuv accepts no more until uv_accept takes the one it has
  std::unique_ptr<LoopDb> db;           ///< --db, readiness: this loop's database connections
  std::atomic<bool> stopping{false};    ///< set before the wake-up that stops the loop
  bool closed = false;                  ///< uv_loop_close() succeeded
  char read_buffer[read_buffer_bytes];  ///< NOTE: one is enough: on_read copies it out at once
};

/// One accepted connection. Lives from on_connection() to the close callback of its last handle.
class Connection {
 public:
  static void on_connection(uv_stream_t* listener, int status);  ///< the listener's callback
  void close();  ///< closes its handles now, or when its offloaded step comes back
  /// The server drains: a connection that waits for a request is ended as if its deadline came.
  void drain() {
    if (!serving_ && !linger_ && !closing_) on_deadline(&timer_);
  }

 private:
  explicit Connection(Loop& loop);
  ~Connection() { --loop_.state.open; }
  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&tcp_); }
  void read();
  void wait_for_request();
  void serve();
  // Each starts the request's step: its outcome if it is done now, none while it is away.
  std::optional<Outcome> execute();
  std::optional<Outcome> wait(std::chrono::milliseconds duration);
  std::optional<Outcome> queue_work();
  std::optional<Outcome> start_thread();
  friend struct DbQuery;  // the step of a Query (db.hpp)
  void resume(Outcome outcome);
  bool respond(Outcome outcome);
  bool write_now();
  /// A write that failed: the connection closes, and false (write_now()'s "not written").
  bool close_now() {
    close();
    return false;
  }
  void linger();
  static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void on_deadline(uv_timer_t* timer);
  static void on_written(uv_write_t* write, int status);
  static void on_write_deadline(uv_timer_t* timer);
  static void on_closed(uv_handle_t* handle);

  // [connection-members-libuv_callbacks]
  Loop& loop_;
  uv_tcp_t tcp_{};            ///< the socket
  uv_timer_t timer_{};        ///< header deadline, the Wait, the write and linger deadlines
  uv_write_t write_{};        ///< the response being written (one at a time)
  uv_shutdown_t shutdown_{};  ///< the half-close of a lingering close
  uv_work_t work_{};          ///< a step in libuv's thread pool
  uv_async_t back_{};         ///< a call thread's way back (made with the first one)
  Session session_;
  Plan plan_;                     ///< the request being answered, with its reply
  std::string out_;               ///< the response bytes; NOTE: unchanged until on_written
  std::size_t unsent_ = 0;        ///< what the write request still held at the last look
  std::optional<Linger> linger_;  ///< set once a closing reply was written
  Admission::Ticket ticket_;      ///< the pool slot of a step in the pool
  TimerWheel::Timer waiting_;  ///< --timers wheel: the Wait's place in the loop's wheel
  std::atomic<Outcome> outcome_{Outcome::done};  ///< set off the loop; uv_async_send orders nothing
  int handles_open_ = 2;  ///< tcp_, timer_ (and back_): freed when all are closed
  std::size_t db_slot_ = DbPool<Connection*>::none;  ///< the database connection of a Query
  enum class Away : char { no, pool, thread, database } away_ = Away::no;  ///< where the step runs
  bool serving_ = false;      ///< a request is being answered: new input waits in the Session
  bool reading_ = false;      ///< uv_read_start is in effect
  bool peer_closed_ = false;  ///< EOF came while serving: answer, then close
  bool closing_ = false;
  // [connection-members-libuv_callbacks]
};

}  // namespace cm::libuv_callbacks
