// routes_test.cpp -- the route spec: which plan, which reply, which 400.

#include "cm/routes.hpp"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

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
            (std::pair<std::string, std::string>{"Allow", "POST, OPTIONS"}));
  r.method = "POST";
  for (const char* target : {"/plaintext", "/delay/5", "/block/5", "/cpu/5", "/delay/abc"}) {
    r.target = target;
    EXPECT_EQ(reply_of(plan(r)).status, 405) << target;
    EXPECT_EQ(reply_of(plan(r)).headers.at(0).second, "GET, HEAD, OPTIONS");
  }
}

TEST(Routes, AnythingElseIs404) {
  for (const char* target : {"/", "/nope", "/plaintext/x", "/Delay/5", "/delayed"}) {
    EXPECT_EQ(reply_of(plan(get(target))).status, 404) << target;
  }
  EXPECT_EQ(reply_of(plan(get("/plaintext?q=1"))).status, 200);
}

// RFC 9110 9.3.7: OPTIONS answers what the target allows, from the same spec as the 405's Allow.
TEST(Routes, OptionsAnswersTheAllowOfItsTarget) {
  Request r = get("/plaintext");
  r.method = "OPTIONS";
  for (const auto& [target, allow] :
       {std::pair{"/plaintext", "GET, HEAD, OPTIONS"}, {"/echo", "POST, OPTIONS"},
        {"/delay/5", "GET, HEAD, OPTIONS"}, {"/block/abc", "GET, HEAD, OPTIONS"},
        {"/cpu", "GET, HEAD, OPTIONS"}, {"*", "GET, HEAD, POST, OPTIONS"}}) {
    r.target = target;
    const Plan p = plan(r);
    ASSERT_TRUE(std::holds_alternative<Now>(p)) << target;
    EXPECT_EQ(reply_of(p).status, 200) << target;
    EXPECT_EQ(reply_of(p).body, "") << target;
    ASSERT_EQ(reply_of(p).headers.size(), 1u) << target;
    EXPECT_EQ(reply_of(p).headers[0].second, allow) << target;
    if (std::string_view(target) != "*") EXPECT_EQ(allowed(target), allow);
  }
  r.target = "/nope";
  EXPECT_EQ(reply_of(plan(r)).status, 404);
  EXPECT_EQ(allowed("/delayed"), "");
}

TEST(Routes, HostIsAHostAndAnOptionalPort) {
  for (const char* good : {"x", "localhost:8080", "127.0.0.1", "example.com:80", "[::1]",
                           "[::1]:8080", "a-b.c_d~e", "xn--bcher-kva.example",
                           "host:"}) {
    EXPECT_TRUE(valid_host(good)) << good;
  }
  for (const char* bad : {"", "user@host", "user:pw@host", "host/path", "a, b", "a,b",
                          "host:80x", "host:123456", ":80", "[::1", "[]", "[::1]x", "ho st",
                          "host?q", "host#f"}) {
    EXPECT_FALSE(valid_host(bad)) << bad;
  }
}

/// The head of a request with these fields, for refuse_head().
Request head(std::string method, std::string target, int minor,
             std::vector<std::pair<std::string, std::string>> headers) {
  Request r = get(std::move(target));
  r.method = std::move(method);
  r.version_minor = minor;
  r.headers = std::move(headers);
  return r;
}

TEST(Routes, RefuseHeadKeepsEveryRuleOfTheHead) {
  const std::pair<std::string, std::string> host{"Host", "x"};
  struct Case {
    Request request;
    int status;  // 0: not refused
  };
  const std::vector<Case> cases{
      {head("GET", "/plaintext", 1, {host}), 0},
      {head("GET", "/plaintext", 0, {}), 0},  // HTTP/1.0: no Host needed
      {head("GET", "/plaintext", 1, {}), 400},
      {head("GET", "/plaintext", 1, {host, host}), 400},
      {head("GET", "/plaintext", 0, {{"Host", "a/b"}}), 400},  // a Host sent is a valid one
      {head("GET", "/plaintext", 1, {{"Host", "user@x"}}), 400},
      {head("GET", "/plaintext", 1, {{"Host", ""}}), 400},
      {head("GET", "/plaintext", 1, {{"Host", "a, b"}}), 400},
      {head("GET", "*", 1, {host}), 400},
      {head("OPTIONS", "*", 1, {host}), 0},
      {head("CONNECT", "x:443", 1, {host}), 501},
      {head("GET", "http://x:8080/plaintext", 1, {host}), 0},  // the same host, another port
      {head("GET", "HTTP://X/plaintext", 1, {host}), 0},
      {head("GET", "http://y/plaintext", 1, {host}), 400},
      {head("GET", "/plaintext", 2, {host}), 0},  // HTTP/1.2: served as HTTP/1.1
      {head("GET", "/plaintext", 2, {}), 400},    // ... so it needs a Host
      {head("GET", "/plaintext", 1, {host, {"Expect", "x"}}), 417},
  };
  for (const Case& c : cases) {
    const auto refusal = refuse_head(c.request);
    const std::string what = c.request.method + " " + c.request.target + " 1." +
                              std::to_string(c.request.version_minor);
    EXPECT_EQ(refusal ? refusal->status : 0, c.status) << what;
    if (refusal) EXPECT_TRUE(refusal->close) << what;
  }
  Request two = head("GET", "/plaintext", 0, {host});
  two.version_major = 2;
  ASSERT_TRUE(refuse_head(two));
  EXPECT_EQ(refuse_head(two)->status, 505);
}

TEST(Routes, DbRoutesAreQueriesOfTheParsedNumber) {
  for (auto [target, kind, value] : {std::tuple{"/db/sleep/10", DbCall::Kind::sleep, 10},
                                     {"/db/sleep/0", DbCall::Kind::sleep, 0},
                                     {"/db/sleep/60000", DbCall::Kind::sleep, 60000},
                                     {"/db/row/1", DbCall::Kind::row, 1},
                                     {"/db/row/10000", DbCall::Kind::row, 10000}}) {
    const Plan p = plan(get(target));
    ASSERT_TRUE(std::holds_alternative<Query>(p)) << target;
    EXPECT_EQ(std::get<Query>(p).call.kind, kind) << target;
    EXPECT_EQ(std::get<Query>(p).call.value, value) << target;
    EXPECT_EQ(reply_of(p).status, 503) << "until the database answers: " << target;
  }
  EXPECT_EQ(allowed("/db/sleep/10"), "GET, HEAD, OPTIONS");
  EXPECT_EQ(allowed("/db/row/1"), "GET, HEAD, OPTIONS");
}

TEST(Routes, DbRoutesRejectBadNumbersWith400) {
  for (const char* target : {"/db/sleep/x", "/db/sleep/-1", "/db/sleep/60001", "/db/sleep/",
                             "/db/sleep", "/db/row/0", "/db/row/10001", "/db/row/1.5", "/db/row"}) {
    const Plan p = plan(get(target));
    ASSERT_TRUE(std::holds_alternative<Now>(p)) << target;
    EXPECT_EQ(reply_of(p).status, 400) << target;
  }
}

TEST(Routes, DatabaseUnavailableCarriesRetryAfter) {
  const Reply r = database_unavailable();
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.headers, (std::vector<std::pair<std::string, std::string>>{{"Retry-After", "1"}}));
}

TEST(Routes, ServiceUnavailableCarriesRetryAfter) {
  const Reply r = service_unavailable();
  EXPECT_EQ(r.status, 503);
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].first, "Retry-After");
}

}  // namespace
}  // namespace cm
