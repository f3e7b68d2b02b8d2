// db.cpp -- the libuv model's wait on the database: a uv_poll_t on a libpq socket, callbacks.

#include "db.hpp"

#include <utility>

#include "connection.hpp"

namespace cm::libuv_callbacks {
namespace {
constexpr std::size_t none = DbPool<Connection*>::none;
Connection* of(auto* handle) { return static_cast<Connection*>(handle->data); }
}  // namespace

LoopDb::LoopDb(uv_loop_t& loop, const DbOptions& options)
    : uv(loop), pool(options.pool, options.queue), polls(options.pool), users(options.pool) {
  for (unsigned i = 0; i < options.pool; ++i)
    connections.emplace_back(options.conninfo);
}

uv_poll_t* LoopDb::open(std::size_t slot, Connection* user) {
  if (!connections[slot].ok() || !polls[slot]) {
    forget(slot);
    if (!connections[slot].connect()) return nullptr;
    auto* poll = new uv_poll_t{};
    if (uv_poll_init(&uv, poll, connections[slot].socket()) != 0) {
      delete poll;
      return nullptr;
    }
    polls[slot] = poll;
  }
  users[slot] = user;
  polls[slot]->data = user;
  return polls[slot];
}

void LoopDb::forget(std::size_t slot) {
  if (!polls[slot]) return;  // uv_close stops the poll at once; the handle is freed afterwards
  uv_close(reinterpret_cast<uv_handle_t*>(std::exchange(polls[slot], nullptr)),
           [](uv_handle_t* handle) { delete reinterpret_cast<uv_poll_t*>(handle); });
}

void LoopDb::release(std::size_t slot) {
  users[slot] = nullptr;
  if (polls[slot]) uv_poll_stop(polls[slot]);
  if (const auto next = pool.release(slot)) DbQuery::handed(*next->waiter, next->slot);
}

void LoopDb::close_all() {
  for (Connection* waiter : pool.refuse_waiters())
    DbQuery::stop(*waiter);
  for (std::size_t slot = 0; slot < users.size(); ++slot) {
    forget(slot);
    if (Connection* user = std::exchange(users[slot], nullptr)) {
      connections[slot].abandon();
      DbQuery::stop(*user);
    }
  }
}

// [db-wait-libuv_callbacks]
std::optional<Outcome> DbQuery::start(Connection& c) {
  if (c.loop_.stopping) return Outcome::stopped;
  // From here the reply is the database's, or the 503 the Query carries: its outcome is `done`.
  const auto grant = c.loop_.db->pool.acquire(&c);
  if (grant.result == DbPool<Connection*>::Result::refused) return Outcome::done;  // queue full
  if (grant.result == DbPool<Connection*>::Result::granted && !send(c, grant.slot))
    return Outcome::done;
  c.away_ = Connection::Away::database;  // until on_readable or the deadline
  const auto limit = static_cast<std::uint64_t>(c.loop_.state.options.db.timeout.count());
  uv_timer_start(&c.timer_, on_deadline, limit, 0);
  return std::nullopt;
}

bool DbQuery::send(Connection& c, std::size_t slot) {
  LoopDb& db = *c.loop_.db;
  uv_poll_t* poll = db.open(slot, &c);
  if (poll && db.connections[slot].send(std::get<Query>(c.plan_).call) &&
      uv_poll_start(poll, UV_READABLE, on_readable) == 0) {
    c.db_slot_ = slot;
    return true;
  }
  db.release(slot);
  return false;
}

void DbQuery::on_readable(uv_poll_t* poll, int status, int /*events*/) {
  Connection& c = *of(poll);
  DbConnection& db = c.loop_.db->connections[c.db_slot_];
  const auto progress = status < 0 ? DbConnection::Progress::failed : db.read();
  if (progress == DbConnection::Progress::waiting) return;  // more of the result is to come
  if (progress == DbConnection::Progress::done) std::get<Query>(c.plan_).reply = db.reply();
  end(c);
}
// [db-wait-libuv_callbacks]

void DbQuery::handed(Connection& c, std::size_t slot) {
  if (!send(c, slot)) end(c);
}

void DbQuery::on_deadline(uv_timer_t* timer) {
  Connection& c = *of(timer);
  LoopDb& db = *c.loop_.db;
  if (c.db_slot_ == none) {
    db.pool.cancel(&c);  // still in the queue
  } else {
    db.forget(c.db_slot_);  // the query runs on there: no late result for the next one
    db.connections[c.db_slot_].abandon();
  }
  end(c);
}

void DbQuery::end(Connection& c) {
  uv_timer_stop(&c.timer_);
  if (c.db_slot_ != none) c.loop_.db->release(std::exchange(c.db_slot_, none));
  c.resume(Outcome::done);
}

void DbQuery::stop(Connection& c) {
  uv_timer_stop(&c.timer_);
  c.db_slot_ = none;
  c.resume(Outcome::stopped);
}

}  // namespace cm::libuv_callbacks
