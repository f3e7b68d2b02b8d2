// database.cpp -- the statements, one libpq connection, and the blocking driver (database.hpp).

#include "cm/database.hpp"

#include <libpq-fe.h>
#include <poll.h>

#include <array>
#include <utility>

namespace cm {

std::string_view statement_of(DbCall::Kind kind) {
  switch (kind) {
    case DbCall::Kind::sleep: return "SELECT $1::int FROM pg_sleep($1::int / 1000.0)";
    case DbCall::Kind::row: return "SELECT id, randomnumber FROM world WHERE id = $1::int";
  }
  return {};
}

Reply reply_from_row(const DbCall& call, const std::vector<std::string_view>& row) {
  const std::size_t columns = call.kind == DbCall::Kind::sleep ? 1 : 2;
  if (row.size() != columns) return database_unavailable();
  Reply reply;
  if (call.kind == DbCall::Kind::sleep) {
    reply.body = std::string(row[0]);
    return reply;
  }
  reply.content_type = "application/json";
  reply.body = "{\"id\":" + std::string(row[0]) + ",\"randomNumber\":" + std::string(row[1]) + "}";
  return reply;
}

std::string_view to_string(DbMode mode) {
  switch (mode) {
    case DbMode::readiness: return "readiness";
    case DbMode::blocking: return "blocking";
    case DbMode::pool: return "pool";
  }
  return "?";
}

DbConnection::DbConnection(DbConnection&& other) noexcept
    : conninfo_(std::move(other.conninfo_)),
      conn_(std::exchange(other.conn_, nullptr)),
      call_(other.call_),
      reply_(std::move(other.reply_)) {}

bool DbConnection::ok() const { return conn_ && PQstatus(conn_) == CONNECTION_OK; }

bool DbConnection::connect() {
  if (ok()) return true;
  close();
  // The user's conninfo (or URI) is expanded first; the keywords after it override it, but for
  // fallback_application_name, which names the connection only where the user's does not.
  const std::array<const char*, 4> keys{"dbname", "connect_timeout", "fallback_application_name",
                                        nullptr};
  const std::array<const char*, 4> values{conninfo_.c_str(), "2", "cm-server", nullptr};
  conn_ = PQconnectdbParams(keys.data(), values.data(), /*expand_dbname=*/1);
  if (PQstatus(conn_) == CONNECTION_OK) return true;
  close();
  return false;
}

int DbConnection::socket() const { return conn_ ? PQsocket(conn_) : -1; }

void DbConnection::close() {
  if (conn_) PQfinish(std::exchange(conn_, nullptr));
}

bool DbConnection::send(const DbCall& call) {
  call_ = call;
  reply_ = database_unavailable();
  const std::string value = std::to_string(call.value);
  const char* params[] = {value.c_str()};
  const std::string sql(statement_of(call.kind));
  return ok() && PQsendQueryParams(conn_, sql.c_str(), 1, nullptr, params, nullptr, nullptr, 0);
}

DbConnection::Progress DbConnection::read() {
  if (!conn_ || !PQconsumeInput(conn_)) return Progress::failed;
  if (PQisBusy(conn_)) return Progress::waiting;
  // The call's one result, then the null that ends it.
  bool answered = false;
  while (PGresult* result = PQgetResult(conn_)) {
    if (PQresultStatus(result) == PGRES_TUPLES_OK && PQntuples(result) == 1 && !answered) {
      std::vector<std::string_view> row;
      for (int column = 0; column < PQnfields(result); ++column)
        row.emplace_back(PQgetvalue(result, 0, column));
      reply_ = reply_from_row(call_, row);
      answered = true;
    }
    PQclear(result);
  }
  if (!answered) return Progress::failed;  // an error, or the server ended it (a restart, a kill)
  return Progress::done;
}

void DbConnection::abandon() {
  if (!conn_) return;
  if (PGcancel* cancel = PQgetCancel(conn_)) {
    std::array<char, 256> error{};
    PQcancel(cancel, error.data(), static_cast<int>(error.size()));  // best effort
    PQfreeCancel(cancel);
  }
  close();
}

Reply DbConnection::run(const DbCall& call, std::chrono::steady_clock::time_point deadline) {
  if (!connect() || !send(call)) return database_unavailable();
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd readable{socket(), POLLIN, 0};
    const int ready = left.count() > 0 ? ::poll(&readable, 1, static_cast<int>(left.count())) : 0;
    if (ready == 0) {  // the deadline passed
      abandon();
      return database_unavailable();
    }
    if (ready < 0) continue;  // EINTR
    switch (read()) {
      case Progress::waiting: continue;
      case Progress::done: return reply_;
      case Progress::failed: return database_unavailable();  // connect() replaces it if broken
    }
  }
}

Database::Database(DbOptions options)
    : options_(std::move(options)), pool_(options_.pool, options_.queue) {
  for (unsigned i = 0; i < options_.pool; ++i) connections_.emplace_back(options_.conninfo);
}

Reply Database::run(const DbCall& call) {
  if (!configured()) return database_unavailable();
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  std::unique_lock lock(mutex_);
  if (stopping_) return database_unavailable();
  const std::uint64_t me = next_waiter_++;
  auto grant = pool_.acquire(me);
  if (grant.result == DbPool<std::uint64_t>::Result::refused) return database_unavailable();
  if (grant.result == DbPool<std::uint64_t>::Result::queued) {
    changed_.wait_until(lock, deadline, [&] { return handed_.contains(me) || stopping_; });
    if (!handed_.contains(me)) {  // the deadline passed, or the server stops
      pool_.cancel(me);
      return database_unavailable();
    }
    grant.slot = handed_.at(me);
    handed_.erase(me);
  }
  DbConnection& connection = connections_[grant.slot];
  lock.unlock();
  Reply reply = connection.run(call, deadline);  // this thread blocks here: the lesson
  lock.lock();
  if (const auto next = pool_.release(grant.slot)) {
    handed_[next->waiter] = next->slot;
    changed_.notify_all();
  }
  return reply;
}

void Database::interrupt() {
  std::lock_guard lock(mutex_);
  stopping_ = true;
  pool_.refuse_waiters();
  changed_.notify_all();
}

}  // namespace cm
