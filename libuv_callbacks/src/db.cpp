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
  if (const auto next = pool.release(slot)) next->waiter->on_database_slot(next->slot);
}

void LoopDb::close_all() {
  for (Connection* waiter : pool.refuse_waiters())
    waiter->stop_query();
  for (std::size_t slot = 0; slot < users.size(); ++slot) {
    forget(slot);
    if (Connection* user = std::exchange(users[slot], nullptr)) {
      connections[slot].abandon();
      user->stop_query();
    }
  }
}

// [db-wait-libuv_callbacks]
bool Connection::start_query() {  // true: answered now (a 503), as execute() says
  if (loop_.stopping) {
    outcome_ = Outcome::stopped;
    return true;
  }
  outcome_ = Outcome::done;  // the reply is the database's, or the 503 the Query carries
  const auto grant = loop_.db->pool.acquire(this);
  if (grant.result == DbPool<Connection*>::Result::refused) return true;  // the queue is full
  if (grant.result == DbPool<Connection*>::Result::granted && !send_query(grant.slot)) return true;
  away_ = Away::database;  // until on_database_readable or the deadline
  const auto limit = static_cast<std::uint64_t>(loop_.state.options.db.timeout.count());
  uv_timer_start(&timer_, on_database_deadline, limit, 0);
  return false;
}

bool Connection::send_query(std::size_t slot) {  // false: the slot is given back, a 503
  LoopDb& db = *loop_.db;
  uv_poll_t* poll = db.open(slot, this);
  if (poll && db.connections[slot].send(std::get<Query>(plan_).call) &&
      uv_poll_start(poll, UV_READABLE, on_database_readable) == 0) {
    db_slot_ = slot;
    return true;
  }
  db.release(slot);
  return false;
}

void Connection::on_database_readable(uv_poll_t* poll, int status, int /*events*/) {
  Connection* c = of(poll);
  DbConnection& db = c->loop_.db->connections[c->db_slot_];
  const auto progress = status < 0 ? DbConnection::Progress::failed : db.read();
  if (progress == DbConnection::Progress::waiting) return;  // more of the result is to come
  if (progress == DbConnection::Progress::done) std::get<Query>(c->plan_).reply = db.reply();
  c->end_query();
}
// [db-wait-libuv_callbacks]

void Connection::on_database_slot(std::size_t slot) {  // handed on by a release, while away
  if (!send_query(slot)) end_query();
}

void Connection::on_database_deadline(uv_timer_t* timer) {
  Connection* c = of(timer);
  LoopDb& db = *c->loop_.db;
  if (c->db_slot_ == none) {
    db.pool.cancel(c);  // still in the queue
  } else {
    db.forget(c->db_slot_);  // the query runs on there: no late result for the next one
    db.connections[c->db_slot_].abandon();
  }
  c->end_query();
}

void Connection::end_query() {
  uv_timer_stop(&timer_);
  if (db_slot_ != none) loop_.db->release(std::exchange(db_slot_, none));
  resume(Outcome::done);
}

void Connection::stop_query() {
  uv_timer_stop(&timer_);
  db_slot_ = none;
  resume(Outcome::stopped);
}

}  // namespace cm::libuv_callbacks
