// database_test.cpp -- every model (and every --db-mode of an async one) against a real PostgreSQL:
// the /db routes' bytes, the pool as the bound (a full queue is a 503 at once), --db-timeout, a
// database that drops its connections (under one query, or every connection of a loaded pool) or
// is not there (503 + Retry-After, then served again), the other routes served while queries wait,
// and a stop in the middle of a query.
//
// The cluster is harness/db-cluster's, started by ctest's fixture `database` (CMakeLists.txt) in
// the folder CM_TEST_DB_DIR; run by hand, start one there first:
//   harness/db-cluster start --dir <CM_TEST_DB_DIR>   ...   harness/db-cluster stop --dir <...>
// Nothing asserts a speed: a time appears only as a generous bound an outage would miss.

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cm/registry.hpp"
#include "http_client.hpp"
#include "models.hpp"

namespace cm::test {
namespace {

using Clock = std::chrono::steady_clock;

/// The conninfo of the test cluster; empty when none was started.
std::string test_conninfo() {
  std::ifstream file(std::string(CM_TEST_DB_DIR) + "/conninfo");
  std::string line;
  std::getline(file, line);
  return line;
}

/// Runs one SQL statement on a connection of its own (what an operator would do from psql); its
/// first value, or "" on an error.
std::string sql(const std::string& conninfo, const std::string& statement) {
  PGconn* conn = PQconnectdb(conninfo.c_str());
  std::string value;
  if (PQstatus(conn) == CONNECTION_OK) {
    PGresult* result = PQexec(conn, statement.c_str());
    if (PQresultStatus(result) == PGRES_TUPLES_OK && PQntuples(result) > 0)
      value = PQgetvalue(result, 0, 0);
    PQclear(result);
  }
  PQfinish(conn);
  return value;
}

/// Every model, and each async one again with --db-mode blocking and pool: "MODEL" or "MODEL@mode".
std::vector<std::string> models_and_modes() {
  std::vector<std::string> params = model_names();
  for (const auto& m : built_models()) {
    if (m.name == "blocking") continue;
    params.push_back(std::string(m.name) + "@blocking");
    params.push_back(std::string(m.name) + "@pool");
  }
  return params;
}

class DatabaseRoutes : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    conninfo_ = test_conninfo();
    if (conninfo_.empty())
      GTEST_SKIP() << "no test cluster in " << CM_TEST_DB_DIR << " (ctest's fixture starts one)";
  }
  void TearDown() override {
    if (server_) server_->stop();
  }
  std::string model() const { return GetParam().substr(0, GetParam().find('@')); }
  DbMode mode() const {
    const auto at = GetParam().find('@');
    if (at == std::string::npos) return DbMode::readiness;
    return GetParam().substr(at + 1) == "pool" ? DbMode::pool : DbMode::blocking;
  }
  /// Starts the model on port 0 against the test cluster (or none: `conninfo` empty).
  void start(DbOptions db) {
    ServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.threads = model() == "blocking" ? 16 : 1;
    options.blocking_threads = 16;
    db.mode = mode();
    options.db = std::move(db);
    server_ = make_server(model(), options);
    try {
      server_->start();
    } catch (const ModelUnavailable& e) {
      server_.reset();
      GTEST_SKIP() << model() << " cannot run here: " << e.what();
    }
  }
  DbOptions pool_of(unsigned connections, unsigned queue = 1024) const {
    DbOptions db;
    db.conninfo = conninfo_ + " application_name=" + name_;  // ctest runs other cases beside it
    db.pool = connections;
    db.queue = queue;
    return db;
  }
  std::optional<Response> get(std::string_view path, std::chrono::milliseconds limit = 10s) {
    Client c = Client::connect(server_->port());
    if (!c.send(get_request(path))) return std::nullopt;
    return c.read_response(limit);
  }

  /// Ends every database connection of this case's server (what a database restart does to them).
  void end_every_backend() {
    const std::string ended = sql(conninfo_,
                                  "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                  "WHERE application_name = '" +
                                      name_ + "'");
    EXPECT_NE(ended, "0") << "no cm-server backend was found to end";
  }

  std::string conninfo_;
  /// The database connections of this case alone (pg_stat_activity.application_name).
  const std::string name_ = "cm-test-" + std::to_string(::getpid());
  std::unique_ptr<Server> server_;
};

TEST_P(DatabaseRoutes, AnswerWhatTheDatabaseReturned) {
  start(pool_of(4));
  if (!server_) return;
  auto slept = get("/db/sleep/20");
  ASSERT_TRUE(slept);
  EXPECT_EQ(slept->status, 200);
  EXPECT_EQ(slept->body, "20");
  EXPECT_EQ(slept->header("Content-Type"), "text/plain");
  for (int id : {1, 42, 10000}) {
    const std::string number =
        sql(conninfo_, "SELECT randomnumber FROM world WHERE id = " + std::to_string(id));
    ASSERT_FALSE(number.empty()) << "the test cluster has no row " << id;
    auto row = get("/db/row/" + std::to_string(id));
    ASSERT_TRUE(row);
    EXPECT_EQ(row->status, 200);
    EXPECT_EQ(row->header("Content-Type"), "application/json");
    EXPECT_EQ(row->body, R"({"id":)" + std::to_string(id) + R"(,"randomNumber":)" + number + "}");
  }
  auto bad = get("/db/row/0");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
}

TEST_P(DatabaseRoutes, NoDatabaseIsA503WithRetryAfterAndTheRestIsServed) {
  start(DbOptions{});
  if (!server_) return;
  auto r = get("/db/row/1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->header("Retry-After"), "1");
  auto plain = get("/plaintext");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->status, 200);
}

TEST_P(DatabaseRoutes, AQueryPastTheTimeoutIsA503AndTheNextIsAnswered) {
  DbOptions db = pool_of(1);
  db.timeout = 300ms;
  start(db);
  if (!server_) return;
  const auto sent = Clock::now();
  auto late = get("/db/sleep/5000");
  ASSERT_TRUE(late);
  EXPECT_EQ(late->status, 503);
  EXPECT_EQ(late->header("Retry-After"), "1");
  EXPECT_LT(late->received_at - sent, 3s) << "the 5 s query was not cut at the 300 ms timeout";
  auto next = get("/db/sleep/10");  // on the same slot: the abandoned connection was replaced
  ASSERT_TRUE(next);
  EXPECT_EQ(next->status, 200);
  EXPECT_EQ(next->body, "10");
}

TEST_P(DatabaseRoutes, AFullQueueIsA503AtOnceAndTheQueuedAreAnswered) {
  start(pool_of(1, /*queue=*/1));
  if (!server_) return;
  if (mode() == DbMode::blocking)
    GTEST_SKIP() << "--db-mode blocking holds the loop during a query: nothing queues behind it";
  Client held = Client::connect(server_->port());
  Client queued = Client::connect(server_->port());
  ASSERT_TRUE(held.send(get_request("/db/sleep/1500")));
  std::this_thread::sleep_for(200ms);  // it holds the one connection
  ASSERT_TRUE(queued.send(get_request("/db/sleep/10")));
  std::this_thread::sleep_for(200ms);  // it waits in the queue of one
  auto refused = get("/db/sleep/10", 1s);
  ASSERT_TRUE(refused) << "a full queue must answer at once";
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(refused->header("Retry-After"), "1");
  auto first = held.read_response(10s);
  auto second = queued.read_response(10s);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->body, "1500");
  EXPECT_EQ(second->body, "10");
  EXPECT_LE(first->received_at, second->received_at) << "the queued query ran after the first";
}

TEST_P(DatabaseRoutes, OtherRoutesAreServedWhileQueriesWait) {
  if (mode() == DbMode::blocking)
    GTEST_SKIP() << "--db-mode blocking stalls the loop on purpose (the anti-pattern)";
  start(pool_of(2));
  if (!server_) return;
  std::vector<Client> waiting;
  for (int i = 0; i < 4; ++i) {  // two run, two queue
    waiting.push_back(Client::connect(server_->port()));
    ASSERT_TRUE(waiting.back().send(get_request("/db/sleep/1500")));
  }
  std::this_thread::sleep_for(100ms);
  auto plain = get("/plaintext", 1s);
  ASSERT_TRUE(plain) << "/plaintext waited for the database";
  EXPECT_EQ(plain->status, 200);
  for (auto& c : waiting) {
    auto r = c.read_response(10s);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "1500");
  }
}

TEST_P(DatabaseRoutes, ADatabaseThatDropsItsConnectionsIsA503ThenServedAgain) {
  start(pool_of(2));
  if (!server_) return;
  ASSERT_EQ(get("/db/sleep/1")->status, 200);  // the pool's connections are up
  Client c = Client::connect(server_->port());
  ASSERT_TRUE(c.send(get_request("/db/sleep/3000")));
  std::this_thread::sleep_for(300ms);
  end_every_backend();
  auto cut = c.read_response(5s);
  ASSERT_TRUE(cut) << "a query whose connection broke must be answered, not left";
  EXPECT_EQ(cut->status, 503);
  EXPECT_EQ(cut->header("Retry-After"), "1");
  for (int i = 0; i < 3; ++i) {  // every broken connection is replaced on its next use
    auto again = get("/db/sleep/5");
    ASSERT_TRUE(again);
    EXPECT_EQ(again->status, 200) << i;
    EXPECT_EQ(again->body, "5");
  }
}

TEST_P(DatabaseRoutes, EveryPoolConnectionEndedUnderLoadAnswersEachRequestThenServesAgain) {
  start(pool_of(2));
  if (!server_) return;
  ASSERT_EQ(get("/db/sleep/1")->status, 200);  // the pool's connections are up
  std::vector<Client> waiting;
  for (int i = 0; i < 4; ++i) {  // two run and two queue (on the loop: one runs, three wait)
    waiting.push_back(Client::connect(server_->port()));
    ASSERT_TRUE(waiting.back().send(get_request("/db/sleep/1500")));
  }
  std::this_thread::sleep_for(300ms);
  end_every_backend();
  if (mode() != DbMode::blocking) {  // the driver on the loop holds /plaintext too, by design
    auto plain = get("/plaintext", 1s);
    ASSERT_TRUE(plain) << "/plaintext waited while the database dropped its connections";
    EXPECT_EQ(plain->status, 200);
  }
  int cut = 0;
  for (auto& c : waiting) {  // every request answered: a 503 where its query broke, else its value
    auto r = c.read_response(10s);
    ASSERT_TRUE(r) << "a request was left unanswered after the pool's connections ended";
    if (r->status == 503) {
      EXPECT_EQ(r->header("Retry-After"), "1");
      ++cut;
    } else {
      EXPECT_EQ(r->status, 200);
      EXPECT_EQ(r->body, "1500");
    }
  }
  EXPECT_GE(cut, 1) << "no query in flight was cut when its connection ended";
  for (int i = 0; i < 3; ++i) {  // the pool reconnects: new queries are answered
    auto again = get("/db/sleep/5");
    ASSERT_TRUE(again);
    EXPECT_EQ(again->status, 200) << i;
    EXPECT_EQ(again->body, "5");
  }
}

TEST_P(DatabaseRoutes, AStopInTheMiddleOfAQueryReturnsAtOnce) {
  start(pool_of(1, /*queue=*/8));
  if (!server_) return;
  std::vector<Client> waiting;
  for (int i = 0; i < 3; ++i) {  // one runs, two queue (or, blocking on the loop, wait to be read)
    waiting.push_back(Client::connect(server_->port()));
    ASSERT_TRUE(waiting.back().send(get_request("/db/sleep/20000")));
  }
  std::this_thread::sleep_for(300ms);
  const auto asked = Clock::now();
  server_->stop();
  EXPECT_LT(Clock::now() - asked, 5s) << "stop() waited for a 20 s query";
  server_.reset();
  for (auto& c : waiting)
    EXPECT_TRUE(c.closed_by_peer(2s) || c.read_response(1s)) << "left open after the stop";
}

INSTANTIATE_TEST_SUITE_P(Models, DatabaseRoutes, ::testing::ValuesIn(models_and_modes()),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '@', '_');
                           return name;
                         });

}  // namespace
}  // namespace cm::test
