#pragma once
/// \file db.hpp
/// The libuv model's wait on the database (--db, --db-mode readiness): a Query is sent on one of
/// the loop's connections and a uv_poll_t on its socket calls back when the result can be read.

#include <uv.h>

#include <optional>
#include <vector>

#include "cm/database.hpp"
#include "cm/work.hpp"

namespace cm::libuv_callbacks {

class Connection;

/// The --db-pool connections of one loop, who waits for one, and a poll handle on each socket.
struct LoopDb {
  LoopDb(uv_loop_t& loop, const DbOptions& options);
  /// The connection of `slot` for `user`, connected (again, if it broke), with a poll handle on
  /// its socket whose data is `user`; null if the database cannot be reached.
  uv_poll_t* open(std::size_t slot, Connection* user);
  /// Stops watching the socket of `slot` and closes its handle (libpq still owns the socket).
  void forget(std::size_t slot);
  /// Gives `slot` back: the next waiter gets it (DbQuery::handed).
  void release(std::size_t slot);
  /// The server stops: every waiter and every user is resumed as stopped, every handle closed.
  void close_all();

  uv_loop_t& uv;
  DbPool<Connection*> pool;
  std::vector<DbConnection> connections;
  std::vector<uv_poll_t*> polls;   ///< per slot: the handle watching its socket (freed when closed)
  std::vector<Connection*> users;  ///< per slot: who runs a query on it
};

/// The step of a Query, on the Connection it serves (a friend of it): from execute(), which
/// start() answers now or not, to the connection's resume().
struct DbQuery {
  static std::optional<Outcome> start(Connection& c);    ///< done now: stopping, or the Query's 503
  static void handed(Connection& c, std::size_t slot);  ///< by a release, while it waits
  static void stop(Connection& c);                       ///< the server stops during its Query

 private:
  static bool send(Connection& c, std::size_t slot);  ///< false: the slot is given back, a 503
  static void end(Connection& c);
  static void on_readable(uv_poll_t* poll, int status, int events);
  static void on_deadline(uv_timer_t* timer);
};

}  // namespace cm::libuv_callbacks
