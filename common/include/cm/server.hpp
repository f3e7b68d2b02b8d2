#pragma once
/// \file server.hpp
/// The contract every model implements (DESIGN.md, "The server contract").

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "cm/database.hpp"

namespace cm {

class Trace;

/// How an async model waits for a `Wait` plan.
enum class WaitMode {
  timer,  ///< a real timer; the loop goes on serving others (the default)
  sleep,  ///< anti-pattern, for teaching: sleep on the event loop, stalling all its connections
};

/// Where an async model keeps the timers of its waiting requests (a `Wait` on the timer venue).
enum class Timers {
  model,  ///< the model's own structure: Asio's timer queue, libuv's heap, an io_uring timeout
  wheel,  ///< cm::TimerWheel, turned by one timer of the loop (docs/timers.md)
};

/// Where an async model runs `Block` and `Compute` plans (and, with pool/thread, `Now` ones too:
/// the aeronet seed's "offload a trivial handler" row).
enum class Offload {
  standard,  ///< Block -> the bounded pool; Compute and Now -> on the loop (the default)
  inline_,   ///< everything on the loop, Block included (a blocking call stalls the loop)
  pool,      ///< Block, Compute and Now -> the bounded pool, the reply comes back to the loop
  thread,    ///< Block, Compute and Now -> a new thread per call (aeronet's deferWork)
};

/// A bug put in on purpose, for one exercise (docs/exercises/); `none`, the default, is the server
/// as specified. Like --wait-mode sleep it is a teaching switch, but where that one is slow and
/// correct, these are fast and WRONG: never use one outside the exercise that asks for it.
enum class TeachingBug {
  none,          ///< no bug (the default)
  shared_delay,  ///< a /delay reply answers the last delay parsed by any connection, not its own
};

/// What `cm-server` was asked for. A model reads what applies to it.
struct ServerOptions {
  std::string host = "127.0.0.1";  ///< address to listen on
  std::uint16_t port = 8080;       ///< 0 picks a free port; see Server::port()
  unsigned threads = 0;            ///< event loops (async) or pool size (blocking); 0 = the default
  unsigned blocking_threads = 64;  ///< the pool `/block` is offloaded to in the async models
  unsigned blocking_queue = 1024;  ///< requests that may wait for that pool; beyond -> 503
  WaitMode wait_mode = WaitMode::timer;
  Timers timers = Timers::model;  ///< the blocking model has none: its waits are threads asleep
  Offload offload = Offload::standard;
  /// How long a connection may take to send a request head, counted from the previous response
  /// (or the accept). Idle connections are closed silently; a partial head gets a 408.
  std::chrono::milliseconds header_timeout{10'000};
  /// How long writing a reply may wait for a client that does not read it (its window is full):
  /// then the connection is closed, and what it held is released. 60 s, as nginx's send_timeout.
  /// Each model arms it in its own idiom (docs/reliability.md, "Each deadline beside nginx's").
  std::chrono::milliseconds write_timeout{60'000};
  int backlog = 4096;  ///< listen(2) backlog
  /// A deliberate bug for an exercise (off by default). It lives in the shared core (Session),
  /// so every model has it without a line of model code.
  TeachingBug teaching_bug = TeachingBug::none;
  /// --db, --db-pool, --db-queue, --db-mode, --db-timeout: the database the /db routes query.
  DbOptions db;
  /// --trace: where the core records what each request does, on which thread (cm/trace.hpp).
  /// Null, the default, records nothing. Owned by the caller; it must outlive the server.
  Trace* trace = nullptr;
};

/// The default for ServerOptions::threads in an async model: the CPUs this process may run on.
unsigned default_loop_threads();

/// One running server of some model.
///
/// start() binds and launches the model's threads, then returns; stop() may be called from any
/// thread (or after a signal) and returns when every thread is joined and every fd closed.
class Server {
 public:
  virtual ~Server() = default;

  /// Binds the listening socket(s) and starts serving. Throws std::system_error on setup failure
  /// (port in use, io_uring unavailable, ...), with a message that says what failed.
  virtual void start() = 0;
  /// Stops accepting, ends every connection, joins every thread. Idempotent, thread-safe.
  virtual void stop() = 0;
  /// Graceful drain; returns at once. Stops accepting (closes the listeners), closes every
  /// connection that waits for a request, and answers every request in flight -- a waiting
  /// /delay, a /block in a pool, pipelined requests already received -- with `Connection: close`.
  /// The server is drained when open_connections() is 0; stop() then (or at a deadline) ends it.
  virtual void drain() = 0;
  /// Requests parsed and not yet answered, over every connection.
  virtual std::size_t requests_in_flight() const = 0;
  /// The port bound by start() (the chosen one when asked for port 0).
  virtual std::uint16_t port() const = 0;
  /// Connections currently held open (accepted and not yet closed), for tests and stats.
  virtual std::size_t open_connections() const = 0;
  /// The model name, as `--model` spells it.
  virtual std::string_view model() const = 0;
};

/// "cm-<model>", the Server header of a model.
std::string server_header(std::string_view model);

std::string_view to_string(WaitMode mode);
std::string_view to_string(Offload offload);
std::string_view to_string(Timers timers);

}  // namespace cm

#include <system_error>

namespace cm {

/// Thrown by Server::start() when the model cannot run on this machine at all (io_uring disabled
/// or refused by the kernel, for instance): cm-server reports it in one line, tests skip.
class ModelUnavailable : public std::system_error {
 public:
  using std::system_error::system_error;
};

}  // namespace cm
