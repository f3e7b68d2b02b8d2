// db.cpp -- the io_uring model's wait on the database: IORING_OP_POLL_ADD on a libpq socket.

#include "db.hpp"

#include <poll.h>

#include "connection.hpp"

namespace cm::uring_coro {
namespace {
using Clock = std::chrono::steady_clock;
constexpr std::size_t none = DbPool<DbWaiter*>::none;

/// co_await Queued{db}: a slot of the pool, at once or when a release hands one on; `none` when
/// the queue is full or the server stops.
struct Queued {
  LoopDb& db;
  DbWaiter waiter{none, {}};
  bool await_ready() const noexcept { return db.ring.cancelled(); }
  bool await_suspend(std::coroutine_handle<> handle) {
    waiter.handle = handle;
    const auto grant = db.pool.acquire(&waiter);
    waiter.slot = grant.slot;  // granted, or refused (none)
    return grant.result == DbPool<DbWaiter*>::Result::queued;
  }
  std::size_t await_resume() const noexcept { return waiter.slot; }
};
}  // namespace

LoopDb::LoopDb(uring::Ring& uring_ring, const DbOptions& options)
    : ring(uring_ring), pool(options.pool, options.queue) {
  for (unsigned i = 0; i < options.pool; ++i) connections.emplace_back(options.conninfo);
}

void LoopDb::release(std::size_t slot) {
  if (const auto next = pool.release(slot)) {
    next->waiter->slot = next->slot;
    ring.post(next->waiter->handle);
  }
}

void LoopDb::refuse_waiters() {
  for (DbWaiter* waiter : pool.refuse_waiters())
    ring.post(waiter->handle);  // its slot stays none
}

// [db-wait-uring_coro]
uring::Task<Outcome> run_query(Context& context, Query& query) {
  LoopDb& db = *context.db;
  const auto deadline = Clock::now() + context.state.options.db.timeout;
  const std::size_t slot = co_await Queued{db};
  if (slot == none) co_return context.ring.cancelled() ? Outcome::stopped : Outcome::done;
  DbConnection& connection = db.connections[slot];
  // A request handed a slot after its deadline passes it on at once: a 503.
  if (Clock::now() < deadline && connection.connect() && connection.send(query.call)) {
    auto progress = DbConnection::Progress::waiting;
    while (progress == DbConnection::Progress::waiting) {
      const int events = co_await uring::PollFor(context.ring, connection.socket(), POLLIN,
                                                 deadline - Clock::now());
      if (events < 0) break;  // -ETIME: the deadline passed; -ECANCELED: the server stops
      progress = connection.read();
    }
    if (progress == DbConnection::Progress::done) query.reply = connection.reply();
    if (progress == DbConnection::Progress::waiting) connection.abandon();  // no late result
  }
  db.release(slot);
  co_return context.ring.cancelled() ? Outcome::stopped : Outcome::done;
}
// [db-wait-uring_coro]

}  // namespace cm::uring_coro
