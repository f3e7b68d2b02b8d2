#pragma once
/// \file db.hpp
/// The Asio model's wait on the database (--db, --db-mode readiness): a Query is sent on one of
/// the loop's connections and its coroutine is suspended until the connection's socket is
/// readable (posix::stream_descriptor::async_wait): the loop serves the others meanwhile.

#include <boost/asio/posix/stream_descriptor.hpp>
#include <optional>
#include <vector>

#include "connection.hpp"
#include "cm/database.hpp"

namespace cm::asio_coro {

using Descriptor = asio::posix::stream_descriptor::rebind_executor<Executor>::other;

/// A request waiting for a connection of the pool: the slot it is handed, and the timer (its
/// connection's) that the hand-off cancels to wake it.
struct DbWaiter {
  std::size_t slot;
  Timer* timer;
};

/// The --db-pool connections of one loop, who waits for one, and a descriptor on each socket.
struct LoopDb {
  LoopDb(asio::io_context& io, const DbOptions& options);
  ~LoopDb();
  /// The connection of `slot`, connected (again, if it broke), with the descriptor watching its
  /// socket; null if the database cannot be reached.
  Descriptor* open(std::size_t slot);
  /// Stops watching the socket of `slot` (Asio forgets it, libpq still owns it).
  void forget(std::size_t slot);
  /// Gives `slot` back: the next waiter gets it and is woken.
  void release(std::size_t slot);
  void close_all();  ///< the server stops: every wait on the database ends

  asio::io_context& io;
  DbPool<DbWaiter*> pool;
  std::vector<DbConnection> connections;
  std::vector<std::optional<Descriptor>> sockets;
};

/// Runs the Query on a connection of the loop's pool; its reply is kept in `query` (a 503 when
/// the pool's queue is full, the database is down or --db-timeout passes).
awaitable<Outcome> run_query(Query& query, Connection& c, Loop& loop);

}  // namespace cm::asio_coro
