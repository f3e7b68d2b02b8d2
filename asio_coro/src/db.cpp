// db.cpp -- the Asio model's wait on the database: readiness of a libpq socket, in a coroutine.

#include "db.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/deferred.hpp>
#include <memory>

namespace cm::asio_coro {
namespace {
using boost::system::error_code;
constexpr auto as_value = asio::as_tuple(asio::deferred);
constexpr std::size_t none = DbPool<DbWaiter*>::none;

/// Shared with the deadline's handler, which may run after the query ended: it cuts the wait on
/// the socket only while `armed`.
struct Cut {
  Descriptor* socket;
  bool armed = true;
};

/// Waits in the pool's queue until a release hands this request a slot (it cancels the timer),
/// or the deadline passes, or the server stops (close() cancels the timer too).
awaitable<std::size_t> acquire(LoopDb& db, Connection& c, Clock::time_point deadline) {
  DbWaiter me{none, &c.timer};
  const auto grant = db.pool.acquire(&me);
  if (grant.result != DbPool<DbWaiter*>::Result::queued) co_return grant.slot;  // or refused
  c.timer.expires_at(deadline);
  co_await c.timer.async_wait(as_value);
  if (me.slot == none) db.pool.cancel(&me);
  co_return me.slot;
}

// [db-wait-asio_coro]
/// Sends the query, then suspends on the socket's readiness until the whole result is read. The
/// connection's timer, set for the deadline, cancels that wait (as it cancels a late read).
awaitable<void> query_on(std::size_t slot, Query& query, Connection& c, LoopDb& db,
                         Clock::time_point deadline) {
  Descriptor* socket = db.open(slot);
  DbConnection& connection = db.connections[slot];
  if (!socket || !connection.send(query.call)) co_return;  // the reply stays a 503
  auto cut = std::make_shared<Cut>(Cut{socket});
  c.timer.expires_at(deadline);
  c.timer.async_wait([cut](error_code ec) {
    if (!ec && cut->armed) cut->socket->cancel();
  });
  auto progress = DbConnection::Progress::waiting;
  while (progress == DbConnection::Progress::waiting) {
    const auto [ec] = co_await socket->async_wait(Descriptor::wait_read, as_value);
    if (ec) break;  // the deadline passed, or the server stops
    progress = connection.read();
  }
  // [db-wait-asio_coro]
  cut->armed = false;
  c.timer.cancel();
  if (progress == DbConnection::Progress::done) query.reply = connection.reply();
  if (progress == DbConnection::Progress::waiting) {  // late: the query is still running there
    db.forget(slot);
    connection.abandon();
  }
}
}  // namespace

LoopDb::LoopDb(asio::io_context& context, const DbOptions& options)
    : io(context), pool(options.pool, options.queue), sockets(options.pool) {
  for (unsigned i = 0; i < options.pool; ++i) connections.emplace_back(options.conninfo);
}

LoopDb::~LoopDb() {
  for (std::size_t slot = 0; slot < sockets.size(); ++slot)
    forget(slot);  // before each DbConnection closes its socket
}

Descriptor* LoopDb::open(std::size_t slot) {
  if (connections[slot].ok() && sockets[slot]) return &*sockets[slot];
  forget(slot);
  if (!connections[slot].connect()) return nullptr;
  sockets[slot].emplace(io.get_executor(), connections[slot].socket());
  return &*sockets[slot];
}

void LoopDb::forget(std::size_t slot) {
  if (sockets[slot]) sockets[slot]->release();
  sockets[slot].reset();
}

void LoopDb::release(std::size_t slot) {
  if (const auto next = pool.release(slot)) {
    next->waiter->slot = next->slot;
    next->waiter->timer->cancel();
  }
}

void LoopDb::close_all() {
  for (std::optional<Descriptor>& socket : sockets)
    if (socket) socket->cancel();
}

awaitable<Outcome> run_query(Query& query, Connection& c, Loop& loop) {
  LoopDb& db = *loop.db;
  const auto deadline = Clock::now() + loop.state.options.db.timeout;
  const std::size_t slot = co_await acquire(db, c, deadline);
  if (slot == none) co_return loop.stopping ? Outcome::stopped : Outcome::done;  // a 503
  if (!loop.stopping) co_await query_on(slot, query, c, db, deadline);
  db.release(slot);
  co_return loop.stopping ? Outcome::stopped : Outcome::done;
}

}  // namespace cm::asio_coro
