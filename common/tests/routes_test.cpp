// routes_test.cpp -- the route spec: which plan, which reply, which 400.

#include "cm/routes.hpp"

#include <gtest/gtest.h>

namespace cm {
namespace {

Request get(std::string target) {
  Request r;
  r.method = "GET";
  r.target = std::move(target);
  return r;
}

TEST(Routes, Plaintext) {
  const Plan p = plan(get("/plaintext"));
  ASSERT_TRUE(std::holds_alternative<Now>(p));
  EXPECT_EQ(reply_of(p).status, 200);
  EXPECT_EQ(reply_of(p).body, "Hello, World!");
  EXPECT_EQ(reply_of(p).content_type, "text/plain");
}

TEST(Routes, DelayIsAWaitOfTheParsedValue) {
  for (auto [target, ms] : {std::pair{"/delay/10", 10},
                            {"/delay/007", 7},
                            {"/delay/0", 0},
                            {"/delay/60000", 60000},
                            {"/delay/00000000000000000042", 42}}) {
    const Plan p = plan(get(target));
    ASSERT_TRUE(std::holds_alternative<Wait>(p)) << target;
    EXPECT_EQ(std::get<Wait>(p).duration, std::chrono::milliseconds(ms)) << target;
    EXPECT_EQ(reply_of(p).body, std::to_string(ms)) << target;
    EXPECT_EQ(reply_of(p).status, 200);
  }
}

TEST(Routes, DelayRejectsEverythingElse) {
  for (const char* target : {"/delay/abc", "/delay/-5", "/delay/+5", "/delay/1.5", "/delay/",
                             "/delay/60001", "/delay/18446744073709551616", "/delay/ 5",
                             "/delay/5 ", "/delay/0x10", "/delay/5/", "/delay"}) {
    const Plan p = plan(get(target));
    ASSERT_TRUE(std::holds_alternative<Now>(p)) << target;
    EXPECT_EQ(reply_of(p).status, 400) << target;
    EXPECT_EQ(reply_of(p).body.back(), '\n');
    EXPECT_EQ(reply_of(p).body.find('\n'), reply_of(p).body.size() - 1) << "one line";
  }
}

TEST(Routes, BlockAndCompute) {
  Plan p = plan(get("/block/25"));
  ASSERT_TRUE(std::holds_alternative<Block>(p));
  EXPECT_EQ(std::get<Block>(p).duration, std::chrono::milliseconds(25));
  EXPECT_EQ(reply_of(p).body, "25");
  p = plan(get("/cpu/1000000"));
  ASSERT_TRUE(std::holds_alternative<Compute>(p));
  EXPECT_EQ(std::get<Compute>(p).duration, std::chrono::microseconds(1000000));
  EXPECT_EQ(reply_of(plan(get("/cpu/1000001"))).status, 400);
  EXPECT_EQ(reply_of(plan(get("/block/60001"))).status, 400);
}

TEST(Routes, EchoReturnsTheBody) {
  Request r;
  r.method = "POST";
  r.target = "/echo";
  r.body = std::string("a\0b", 3);
  const Plan p = plan(r);
  ASSERT_TRUE(std::holds_alternative<Now>(p));
  EXPECT_EQ(reply_of(p).body, r.body);
  EXPECT_EQ(reply_of(p).content_type, "application/octet-stream");
}

TEST(Routes, WrongMethodIs405WithAllow) {
  Request r = get("/echo");
  EXPECT_EQ(reply_of(plan(r)).status, 405);
  EXPECT_EQ(reply_of(plan(r)).headers.at(0),
            (std::pair<std::string, std::string>{"Allow", "POST"}));
  r.method = "POST";
  for (const char* target : {"/plaintext", "/delay/5", "/block/5", "/cpu/5", "/delay/abc"}) {
    r.target = target;
    EXPECT_EQ(reply_of(plan(r)).status, 405) << target;
    EXPECT_EQ(reply_of(plan(r)).headers.at(0).second, "GET, HEAD");
  }
}

TEST(Routes, AnythingElseIs404) {
  for (const char* target : {"/", "/nope", "/plaintext/x", "/Delay/5", "/delayed", "*"}) {
    EXPECT_EQ(reply_of(plan(get(target))).status, 404) << target;
  }
  EXPECT_EQ(reply_of(plan(get("/plaintext?q=1"))).status, 200);
}

TEST(Routes, ServiceUnavailableCarriesRetryAfter) {
  const Reply r = service_unavailable();
  EXPECT_EQ(r.status, 503);
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].first, "Retry-After");
}

}  // namespace
}  // namespace cm
