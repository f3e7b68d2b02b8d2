#pragma once
/// \file db.hpp
/// The io_uring model's wait on the database (--db, --db-mode readiness): a Query is sent on one
/// of the loop's connections and its coroutine awaits an IORING_OP_POLL_ADD on the socket, linked
/// to a timeout. A readiness wait inside a completion ring: libpq reads its socket itself
/// (PQconsumeInput), so the ring cannot complete the read; it can say when there is one to do.

#include <coroutine>
#include <vector>

#include "cm/database.hpp"
#include "cm/uring/ring.hpp"

namespace cm::uring_coro {

/// A request waiting for a connection of the pool: the slot it is handed, and its coroutine,
/// which the hand-off resumes through the ring.
struct DbWaiter {
  std::size_t slot;
  std::coroutine_handle<> handle;
};

/// The --db-pool connections of one ring, and who waits for one.
struct LoopDb {
  LoopDb(uring::Ring& ring, const DbOptions& options);
  /// Gives `slot` back: the next waiter gets it, resumed by the ring's next turn.
  void release(std::size_t slot);
  /// The server stops: every waiter is resumed with no slot.
  void refuse_waiters();

  uring::Ring& ring;
  DbPool<DbWaiter*> pool;
  std::vector<DbConnection> connections;
};

}  // namespace cm::uring_coro
