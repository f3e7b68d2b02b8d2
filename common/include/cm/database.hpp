#pragma once
/// \file database.hpp
/// A request that waits on PostgreSQL: the call a route needs, the pool of database connections a
/// loop or a server shares (sans I/O), one libpq connection, and the blocking driver.
///
/// The pool is the ceiling of every model here: with `pool` connections and a query that takes
/// `t`, at most `pool / t` queries a second are answered, however many clients wait (Little's law
/// with the pool as L). What differs is how a request waits for its result:
///   - the blocking driver (Database::run): the calling thread blocks in poll(2) on the
///     connection's socket -- a blocking model's worker, or an async loop with --db-mode blocking
///     (the anti-pattern), or the offload pool with --db-mode pool;
///   - readiness (each async model's db.cpp): send the query, wait for the socket to be readable
///     in the loop's own idiom, DbConnection::read() until the result is there.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cm/routes.hpp"

struct pg_conn;  // libpq's PGconn: kept out of every header but database.cpp

namespace cm {

/// The SQL of a call; `$1` is the call's number, sent as text.
std::string_view statement_of(DbCall::Kind kind);

/// The reply to a call from the row the database returned (its columns as text): /db/sleep
/// answers the number the database selected; /db/row answers the row as JSON,
/// {"id":42,"randomNumber":3199}. A row of the wrong shape is a 503.
Reply reply_from_row(const DbCall& call, const std::vector<std::string_view>& row);

/// Who holds the `slots` database connections of a pool, and who waits for one, in order: at most
/// `queue_limit` waiters, the next is refused. Sans I/O, not thread-safe: a loop owns one, and
/// Database guards its own with a mutex. `Waiter` names whoever waits (a connection, a frame).
template <typename Waiter>
class DbPool {
 public:
  static constexpr std::size_t none = static_cast<std::size_t>(-1);
  enum class Result { granted, queued, refused };
  struct Grant {
    Result result;
    std::size_t slot = none;  ///< the connection now held, when granted
  };
  /// A slot handed on by release(): to `waiter`, who now holds `slot`.
  struct Handoff {
    Waiter waiter;
    std::size_t slot;
  };

  DbPool(std::size_t slots, std::size_t queue_limit) : size_(slots), queue_limit_(queue_limit) {
    for (std::size_t i = slots; i > 0; --i) free_.push_back(i - 1);
  }

  /// A free slot (lowest first), or a place at the end of the queue, or a refusal when it is full.
  Grant acquire(Waiter waiter) {
    if (!free_.empty()) {
      const std::size_t slot = free_.back();
      free_.pop_back();
      return {Result::granted, slot};
    }
    if (waiting_.size() >= queue_limit_) {
      ++refused_;
      return {Result::refused};
    }
    waiting_.push_back(waiter);
    return {Result::queued};
  }
  /// `waiter` leaves the queue (its deadline passed, its client left). False if it was not queued.
  bool cancel(Waiter waiter) {
    for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
      if (*it == waiter) {
        waiting_.erase(it);
        return true;
      }
    }
    return false;
  }
  /// `slot` is given back: the first waiter gets it at once (returned), or it becomes free.
  std::optional<Handoff> release(std::size_t slot) {
    if (waiting_.empty()) {
      free_.push_back(slot);
      return std::nullopt;
    }
    const Waiter next = waiting_.front();
    waiting_.pop_front();
    return Handoff{next, slot};
  }
  /// Empties the queue (the server stops): every waiter in it, in order, to be told.
  std::vector<Waiter> refuse_waiters() {
    std::vector<Waiter> out(waiting_.begin(), waiting_.end());
    waiting_.clear();
    return out;
  }

  std::size_t size() const { return size_; }
  std::size_t in_use() const { return size_ - free_.size(); }
  std::size_t queued() const { return waiting_.size(); }
  std::size_t refused() const { return refused_; }  ///< refusals since the start

 private:
  std::size_t size_;
  std::size_t queue_limit_;
  std::vector<std::size_t> free_;  // a stack: the slot released last is used first
  std::deque<Waiter> waiting_;
  std::size_t refused_ = 0;
};

/// One libpq connection to the server's database, connected when first used and again after it
/// broke (a broken connection is replaced). Not thread-safe: one user at a time, as a pool hands
/// it out. The query is sent whole (libpq's blocking send: a few dozen bytes); the result is read
/// without blocking, as the socket becomes readable. Nothing here closes the socket but connect(),
/// abandon() and close(): a model that watches it stops watching first.
class DbConnection {
 public:
  explicit DbConnection(std::string conninfo) : conninfo_(std::move(conninfo)) {}
  ~DbConnection() { close(); }
  DbConnection(DbConnection&& other) noexcept;
  DbConnection& operator=(DbConnection&&) = delete;

  /// Whether the connection is up and can take a query.
  bool ok() const;
  /// ok(), or replaces the connection now (libpq's blocking connect, at most 2 s): false if the
  /// database cannot be reached.
  bool connect();
  /// The socket the result comes on (-1 when not connected); it changes with each connect.
  int socket() const;
  /// Sends the call's query; false if the connection is broken.
  bool send(const DbCall& call);
  enum class Progress { waiting, done, failed };
  /// The socket was readable: reads what came. `done` when the whole result is in (reply()),
  /// `failed` when the connection broke or the result is not one row.
  Progress read();
  /// The reply to the call whose result read() completed.
  const Reply& reply() const { return reply_; }
  /// Gives up on the query in flight (its deadline passed): asks the server to cancel it and
  /// closes the connection, so that no late result is taken for the next call's.
  void abandon();
  /// The blocking driver's whole call: send, then poll(2) the socket until the result or
  /// `deadline`. The reply, or a 503 when the database is down or late.
  Reply run(const DbCall& call, std::chrono::steady_clock::time_point deadline);
  void close();

 private:
  std::string conninfo_;
  pg_conn* conn_ = nullptr;
  DbCall call_{};
  Reply reply_;
};

/// How an async model waits on the database (cm-server --db-mode).
enum class DbMode {
  readiness,  ///< the loop waits for the socket to be readable, in its own idiom (the default)
  blocking,   ///< anti-pattern, for teaching: the driver blocks the loop for the whole query
  pool,       ///< the blocking driver on the offload pool (most integrations do this)
};
std::string_view to_string(DbMode mode);

/// What cm-server --db* asked for.
struct DbOptions {
  std::string conninfo;  ///< libpq's conninfo or URI; empty: no database (the routes answer 503)
  unsigned pool = 16;    ///< connections of each pool (per loop; the blocking model's, in all)
  unsigned queue = 1024;  ///< requests that may wait for a connection; beyond -> 503
  DbMode mode = DbMode::readiness;
  std::chrono::milliseconds timeout{5000};  ///< from the request to its result; then 503
};

/// The blocking driver: a pool of connections shared by threads, each call blocking its thread
/// (a blocking model's worker, a loop with --db-mode blocking, the offload pool with pool).
class Database {
 public:
  explicit Database(DbOptions options);
  const DbOptions& options() const { return options_; }
  bool configured() const { return !options_.conninfo.empty(); }
  /// Waits for a connection (in order, until the deadline) and runs the call on it; the reply, or
  /// a 503 when there is no database, the queue is full, or the deadline passed.
  Reply run(const DbCall& call);
  /// The server stops: every thread waiting for a connection is answered 503 now.
  void interrupt();

 private:
  DbOptions options_;
  std::mutex mutex_;
  std::condition_variable changed_;
  DbPool<std::uint64_t> pool_;
  std::vector<DbConnection> connections_;
  std::map<std::uint64_t, std::size_t> handed_;  // waiters given a slot by a release
  std::uint64_t next_waiter_ = 0;
  bool stopping_ = false;
};

}  // namespace cm
