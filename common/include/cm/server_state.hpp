#pragma once
/// \file server_state.hpp
/// What every loop (or worker) of one server shares: the options, the Server header, the sleeper
/// that stop() interrupts, the offload's admission and call threads, the count of connections.

#include <atomic>
#include <cstddef>
#include <string>
#include <string_view>

#include "cm/policy.hpp"
#include "cm/server.hpp"
#include "cm/session.hpp"
#include "cm/work.hpp"

namespace cm {

/// Counts one connection in a server's `open` for as long as it lives (a connection's frame or
/// object holds one).
class OpenConnection {
 public:
  explicit OpenConnection(std::atomic<std::size_t>& open) : open_(open) { ++open_; }
  ~OpenConnection() { --open_; }
  OpenConnection(const OpenConnection&) = delete;
  OpenConnection& operator=(const OpenConnection&) = delete;

 private:
  std::atomic<std::size_t>& open_;
};

/// Shared by the threads of one server; every member is thread-safe or read-only.
struct ServerState {
  /// `options.threads` 0 becomes `default_threads`; `model` names the Server header.
  ServerState(ServerOptions server_options, std::string_view model, unsigned default_threads)
      : options(resolve(std::move(server_options), default_threads)),
        name(server_header(model)),
        admission(std::size_t{options.blocking_threads} + options.blocking_queue),
        database(options.db) {}

  const ServerOptions options;       ///< as given, threads resolved
  const std::string name;            ///< the Server header; outlives every Session
  Sleeper sleeper;                   ///< every sleep a stop must cut short
  Admission admission;               ///< blocking_threads + blocking_queue slots; beyond -> 503
  CallThreads call_threads;          ///< --offload thread: a thread per call, joined off the loops
  std::atomic<std::size_t> open{0};  ///< connections held, over every loop
  AcceptTrouble accept_trouble;      ///< says when accepting fails for want of descriptors
  /// The blocking driver: the blocking model's, and an async model's with --db-mode blocking or
  /// pool (with readiness each loop has its own connections, in the model's db.cpp).
  Database database;
  /// Drain, the requests in flight, and the teaching bug (off unless --teaching-bug shared-delay).
  SessionShared sessions{.shared_delay_bug = options.teaching_bug == TeachingBug::shared_delay,
                         .trace = options.trace,
                         .database = &database};
  /// Whether each loop waits on the database in its own idiom (its db.cpp): --db, readiness.
  bool database_on_loops() const {
    return database.configured() && options.db.mode == DbMode::readiness;
  }
  /// Whether drain() began: a connection that waits for a request is closed, not kept.
  bool draining() const { return sessions.draining.load(std::memory_order_acquire); }
  /// Until when a connection waits for (the rest of) a request: its Session's header deadline,
  /// or now once drain() began. Every model sets its read's deadline from this.
  std::chrono::steady_clock::time_point read_deadline(const Session& session) const {
    return draining() ? std::chrono::steady_clock::now() : session.deadline();
  }

  /// Where this plan's step runs under the server's --wait-mode and --offload (with --trace, a
  /// step handed away opens a span of the connection `tag`: cm::trace_venue).
  Venue venue(const Plan& plan, Tag tag = {}) const {
    const DbMode db_mode = database.configured() ? options.db.mode : DbMode::blocking;
    const Venue where = cm::venue(plan, options.wait_mode, options.offload, db_mode);
    trace_venue(where, tag);
    return where;
  }
  /// After a failed accept with `error`: say so (at most a line a second, cm::AcceptTrouble).
  void accept_failed(int error) { accept_trouble.report(error, open.load()); }
  /// The Session of a connection accepted at `now`.
  Session session(Moment now) { return Session(name, options.header_timeout, now, &sessions); }

 private:
  static ServerOptions resolve(ServerOptions o, unsigned default_threads) {
    if (o.threads == 0) o.threads = default_threads;
    if (o.blocking_threads == 0) o.blocking_threads = 1;
    return o;
  }
};

}  // namespace cm
