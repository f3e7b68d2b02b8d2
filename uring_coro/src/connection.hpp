#pragma once
/// \file connection.hpp
/// One connection served by one coroutine on one ring, from accept to close.

#include <optional>
#include <unordered_set>

#include "cm/fd.hpp"
#include "cm/server_state.hpp"
#include "cm/timer_wheel.hpp"
#include "cm/uring/pool.hpp"
#include "cm/uring/ring.hpp"
#include "cm/uring/task.hpp"
#include "db.hpp"

namespace cm::uring_coro {

/// What a connection's coroutine uses of its loop and its server. All of it outlives the task
/// (the loop joins every task before its ring, pool and server go).
struct Context {
  uring::Ring& ring;   ///< the ring of this loop; every operation goes through it
  uring::Pool& pool;   ///< where the pool venue runs, shared by every ring
  ServerState& state;  ///< what every loop of the server shares
  std::unordered_set<int> awaiting_request = {};  ///< fds in a recv for a request (for drain)
  TimerWheel wheel{};  ///< --timers wheel: the Waits, fired by the loop between its waits
  std::optional<LoopDb> db = {};  ///< --db, readiness: this ring's database connections
};

/// db.cpp: runs the Query on a connection of the ring's pool; its reply is kept in `query` (a 503
/// when the pool's queue is full, the database is down or --db-timeout passes).
uring::Task<Outcome> run_query(Context& context, Query& query);

/// The server drains: cancels every recv for a request (it then ends as if its deadline passed)
/// and the accept on `listener` (whose coroutine then closes it). On the loop's thread.
void drain(Context& context, int listener);

/// Serves `fd` until the client closes it, a response ends it, the header timeout passes, or the
/// ring is cancelled (the server stops); then closes it through the ring.
uring::Task<void> serve_connection(Context& context, Fd fd);

}  // namespace cm::uring_coro
