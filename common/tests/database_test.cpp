// database_test.cpp -- the database's pool as decisions (who holds a connection, who waits, who is
// refused), the SQL and the replies of the /db routes, and the blocking driver without a database.
// A real PostgreSQL is the servers' suite's (servers/tests/database_test.cpp).

#include "cm/database.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace cm {
namespace {

using Pool = DbPool<int>;

TEST(DbPool, GrantsFreeSlotsThenQueuesInOrderThenRefuses) {
  Pool pool(2, 2);
  EXPECT_EQ(pool.size(), 2u);
  const auto a = pool.acquire(1);
  const auto b = pool.acquire(2);
  ASSERT_EQ(a.result, Pool::Result::granted);
  ASSERT_EQ(b.result, Pool::Result::granted);
  EXPECT_EQ(a.slot, 0u) << "the lowest slot first";
  EXPECT_EQ(b.slot, 1u);
  EXPECT_EQ(pool.acquire(3).result, Pool::Result::queued);
  EXPECT_EQ(pool.acquire(4).result, Pool::Result::queued);
  const auto refused = pool.acquire(5);
  EXPECT_EQ(refused.result, Pool::Result::refused) << "the queue holds 2";
  EXPECT_EQ(refused.slot, Pool::none);
  EXPECT_EQ(pool.in_use(), 2u);
  EXPECT_EQ(pool.queued(), 2u);
  EXPECT_EQ(pool.refused(), 1u);
}

TEST(DbPool, AReleaseHandsTheSlotToTheFirstWaiter) {
  Pool pool(1, 8);
  const auto first = pool.acquire(1);
  pool.acquire(2);
  pool.acquire(3);
  auto next = pool.release(first.slot);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->waiter, 2) << "first come, first served";
  EXPECT_EQ(next->slot, first.slot);
  EXPECT_EQ(pool.in_use(), 1u) << "handed on, never free in between";
  next = pool.release(next->slot);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->waiter, 3);
  EXPECT_FALSE(pool.release(next->slot)) << "nobody waits: the slot is free";
  EXPECT_EQ(pool.in_use(), 0u);
  EXPECT_EQ(pool.acquire(4).result, Pool::Result::granted);
}

TEST(DbPool, ACancelledWaiterIsSkippedAndFreesItsPlace) {
  Pool pool(1, 2);
  const auto held = pool.acquire(1);
  pool.acquire(2);
  pool.acquire(3);
  EXPECT_TRUE(pool.cancel(2));
  EXPECT_FALSE(pool.cancel(2)) << "no longer queued";
  EXPECT_FALSE(pool.cancel(9)) << "never queued";
  EXPECT_EQ(pool.queued(), 1u);
  EXPECT_EQ(pool.acquire(4).result, Pool::Result::queued) << "its place was given back";
  auto next = pool.release(held.slot);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->waiter, 3);
}

TEST(DbPool, RefusingTheWaitersEmptiesTheQueueInOrder) {
  Pool pool(1, 4);
  const auto held = pool.acquire(1);
  for (int w : {2, 3, 4})
    pool.acquire(w);
  EXPECT_EQ(pool.refuse_waiters(), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(pool.queued(), 0u);
  EXPECT_FALSE(pool.release(held.slot)) << "nobody is left to hand it to";
}

TEST(DbPool, AQueueOfZeroRefusesAsSoonAsEverySlotIsHeld) {
  Pool pool(1, 0);
  EXPECT_EQ(pool.acquire(1).result, Pool::Result::granted);
  EXPECT_EQ(pool.acquire(2).result, Pool::Result::refused);
  EXPECT_EQ(pool.refused(), 1u);
}

TEST(Database, TheStatementsTakeTheNumberAsTheirOneParameter) {
  EXPECT_EQ(statement_of(DbCall::Kind::sleep), "SELECT $1::int FROM pg_sleep($1::int / 1000.0)");
  EXPECT_EQ(statement_of(DbCall::Kind::row),
            "SELECT id, randomnumber FROM world WHERE id = $1::int");
}

TEST(Database, RepliesComeFromTheRowTheDatabaseReturned) {
  const Reply slept = reply_from_row({DbCall::Kind::sleep, 10}, {"10"});
  EXPECT_EQ(slept.status, 200);
  EXPECT_EQ(slept.body, "10");
  const Reply row = reply_from_row({DbCall::Kind::row, 42}, {"42", "2599"});
  EXPECT_EQ(row.status, 200);
  EXPECT_EQ(row.content_type, "application/json");
  EXPECT_EQ(row.body, R"({"id":42,"randomNumber":2599})");
}

TEST(Database, ARowOfTheWrongShapeIsA503) {
  EXPECT_EQ(reply_from_row({DbCall::Kind::row, 42}, {"42"}).status, 503);
  EXPECT_EQ(reply_from_row({DbCall::Kind::sleep, 1}, {}).status, 503);
}

TEST(Database, WithoutADatabaseEveryCallIsA503WithRetryAfter) {
  Database none{DbOptions{}};
  EXPECT_FALSE(none.configured());
  const Reply r = none.run({DbCall::Kind::row, 1});
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.headers, database_unavailable().headers);
  EXPECT_EQ(r.headers, (std::vector<std::pair<std::string, std::string>>{{"Retry-After", "1"}}));
}

TEST(Database, ADatabaseThatCannotBeReachedIsA503NotAHang) {
  DbOptions options;
  options.conninfo = "host=/nonexistent-cm-socket-dir dbname=cm user=cm";
  options.pool = 2;
  Database unreachable(options);
  EXPECT_TRUE(unreachable.configured());
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(unreachable.run({DbCall::Kind::sleep, 1}).status, 503) << i;
}

TEST(DbMode, NamesItsModes) {
  EXPECT_EQ(to_string(DbMode::readiness), "readiness");
  EXPECT_EQ(to_string(DbMode::blocking), "blocking");
  EXPECT_EQ(to_string(DbMode::pool), "pool");
}

}  // namespace
}  // namespace cm
