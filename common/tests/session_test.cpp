// session_test.cpp -- the per-connection protocol state every model drives: plans out, replies
// out, the header deadline and what its expiry means, and the HTTP rules every model gets from it.

#include "cm/session.hpp"

#include <gtest/gtest.h>

namespace cm {
namespace {

using namespace std::chrono_literals;

const Moment t0{std::chrono::steady_clock::time_point(100s),
                std::chrono::system_clock::from_time_t(1'700'000'000)};

Moment later(std::chrono::milliseconds by) {
  return {t0.steady + by, t0.wall + by};
}

Session session(std::string_view name = "cm-test") {
  return Session(name, 10s, t0);
}

/// Answers the next plan with its own reply; returns the bytes written.
std::string answer(Session& s) {
  auto plan = s.next();
  EXPECT_TRUE(plan);
  std::string out;
  if (plan) s.write_reply(reply_of(*plan), out, t0);
  return out;
}

TEST(Session, AnswersPipelinedRequestsOneAtATime) {
  Session s = session();
  s.received("GET /delay/5 HTTP/1.1\r\nHost: x\r\n\r\nGET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n");
  auto first = s.next();
  ASSERT_TRUE(first);
  EXPECT_TRUE(std::holds_alternative<Wait>(*first));
  std::string out;
  s.write_reply(reply_of(*first), out, t0);
  EXPECT_TRUE(s.keep_alive());
  auto second = s.next();
  ASSERT_TRUE(second);
  EXPECT_EQ(reply_of(*second).body, "Hello, World!");
  EXPECT_FALSE(s.next());
}

TEST(Session, WaitsForMoreBytes) {
  Session s = session();
  s.received("GET /plain");
  EXPECT_FALSE(s.next());
  s.received("text HTTP/1.1\r\nHost: x\r\n\r\n");
  auto p = s.next();
  ASSERT_TRUE(p);
  EXPECT_EQ(reply_of(*p).status, 200);
}

TEST(Session, ProtocolErrorClosesAfterItsReply) {
  Session s = session();
  s.received("BOGUS\r\n\r\nGET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n");
  auto p = s.next();
  ASSERT_TRUE(p);
  EXPECT_EQ(reply_of(*p).status, 400);
  std::string out;
  s.write_reply(reply_of(*p), out, t0);
  EXPECT_FALSE(s.keep_alive());
  EXPECT_NE(out.find("Connection: close"), std::string::npos);
  EXPECT_FALSE(s.next()) << "nothing after a protocol error is parsed";
}

TEST(Session, Http10GetsCloseOrExplicitKeepAlive) {
  Session a = session();
  a.received("GET /plaintext HTTP/1.0\r\n\r\n");
  std::string out = answer(a);
  EXPECT_FALSE(a.keep_alive());
  EXPECT_NE(out.find("Connection: close"), std::string::npos);

  Session b = session();
  b.received("GET /plaintext HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  out = answer(b);
  EXPECT_TRUE(b.keep_alive());
  EXPECT_NE(out.find("Connection: keep-alive"), std::string::npos);
}

TEST(Session, AReplyThatClosesEndsAKeepAliveConnection) {
  Session s = session();
  s.received(
      "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\nGET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(s.next());
  std::string out;
  s.write_reply(request_timeout(), out, t0);
  EXPECT_FALSE(s.keep_alive());
  EXPECT_FALSE(s.next());
}

TEST(Session, ServerHeaderIsTheModels) {
  Session s = session("cm-blocking");
  s.received("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(answer(s).find("\r\nServer: cm-blocking\r\n"), std::string::npos);
}

// --- the header deadline ------------------------------------------------------------------------

TEST(SessionDeadline, CountsFromTheAcceptThenFromEachReply) {
  Session s = session();
  EXPECT_EQ(s.deadline(), t0.steady + 10s);
  s.received("GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n");
  auto p = s.next();
  ASSERT_TRUE(p);
  std::string out;
  s.write_reply(reply_of(*p), out, later(3s));
  EXPECT_EQ(s.deadline(), t0.steady + 13s) << "the deadline restarts after each reply";
  s.received("GET /plain");  // bytes alone do not move it: a dribbling client cannot
  EXPECT_FALSE(s.next());
  EXPECT_EQ(s.deadline(), t0.steady + 13s);
}

TEST(SessionDeadline, AnIdleConnectionIsClosedWithoutAWord) {
  Session s = session();
  std::string out;
  EXPECT_FALSE(s.expire(out, later(10s)));
  EXPECT_TRUE(out.empty());
}

TEST(SessionDeadline, APartialRequestGets408ThenClose) {
  Session s = session();
  s.received("GET /plaintext HTTP/1.1\r\nHo");
  EXPECT_FALSE(s.next());
  std::string out;
  EXPECT_TRUE(s.expire(out, later(10s)));
  EXPECT_EQ(out.rfind("HTTP/1.1 408 Request Timeout\r\n", 0), 0u) << out;
  EXPECT_NE(out.find("Connection: close"), std::string::npos);
  EXPECT_FALSE(s.keep_alive());
}

TEST(SessionDeadline, AnIdleConnectionAfterARequestIsStillIdle) {
  Session s = session();
  s.received("GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n");
  answer(s);
  std::string out;
  EXPECT_FALSE(s.expire(out, later(20s))) << "a whole request answered leaves nothing partial";
}

// --- HTTP semantics every model gets from the core
// ------------------------------------------------

TEST(SessionHttp, HeadIsGetWithoutTheBody) {
  Session s = session();
  s.received("HEAD /plaintext HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string out = answer(s);
  EXPECT_EQ(out.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << out;
  EXPECT_NE(out.find("Content-Length: 13\r\n"), std::string::npos) << "the GET's length";
  EXPECT_EQ(out.substr(out.size() - 4), "\r\n\r\n") << "no body after the head";
  EXPECT_TRUE(s.keep_alive());
}

TEST(SessionHttp, AbsoluteFormRoutesLikeOriginForm) {
  Session s = session();
  s.received("GET http://example.com:8080/delay/7?q=1 HTTP/1.1\r\nHost: example.com\r\n\r\n");
  auto p = s.next();
  ASSERT_TRUE(p);
  ASSERT_TRUE(std::holds_alternative<Wait>(*p));
  EXPECT_EQ(std::get<Wait>(*p).duration, 7ms);
}

TEST(SessionHttp, HigherHttp1MinorVersionsAreAnsweredAsHttp11) {
  Session s = session();
  s.received("GET /plaintext HTTP/1.2\r\nHost: x\r\n\r\n");
  const std::string out = answer(s);
  EXPECT_EQ(out.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << out;
  EXPECT_TRUE(s.keep_alive());
}

TEST(SessionHttp, VersionsOtherThan1xAre505) {
  for (const char* version : {"HTTP/2.0", "HTTP/0.9", "HTTP/9.9"}) {
    Session s = session();
    s.received(std::string("GET /plaintext ") + version + "\r\nHost: x\r\n\r\n");
    auto p = s.next();
    ASSERT_TRUE(p) << version;
    EXPECT_EQ(reply_of(*p).status, 505) << version;
    EXPECT_TRUE(reply_of(*p).close) << version;
  }
}

TEST(SessionHttp, Http11NeedsExactlyOneHost) {
  for (const char* headers : {"", "Host: a\r\nHost: b\r\n"}) {
    Session s = session();
    s.received(std::string("GET /plaintext HTTP/1.1\r\n") + headers + "\r\n");
    auto p = s.next();
    ASSERT_TRUE(p);
    EXPECT_EQ(reply_of(*p).status, 400) << headers;
    EXPECT_TRUE(reply_of(*p).close);
  }
  Session http10 = session();
  http10.received("GET /plaintext HTTP/1.0\r\n\r\n");
  EXPECT_EQ(reply_of(*http10.next()).status, 200) << "HTTP/1.0 needs no Host";
}

TEST(SessionHttp, ExpectContinueAsksForTheBodyThenAnswers) {
  Session s = session();
  s.received("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  auto interim = s.next();
  ASSERT_TRUE(interim);
  EXPECT_EQ(reply_of(*interim).status, 100);
  std::string out;
  s.write_reply(reply_of(*interim), out, t0);
  EXPECT_EQ(out, "HTTP/1.1 100 Continue\r\n\r\n");
  EXPECT_TRUE(s.keep_alive());
  EXPECT_FALSE(s.next()) << "the body has not come yet";
  s.received("hello");
  auto p = s.next();
  ASSERT_TRUE(p);
  EXPECT_EQ(reply_of(*p).body, "hello");
}

TEST(SessionHttp, ExpectContinueForARefusedRequestIsAnsweredWithoutTheBody) {
  for (const char* head : {"POST /nope HTTP/1.1\r\n", "POST /plaintext HTTP/1.1\r\n"}) {
    Session s = session();
    s.received(std::string(head) + "Host: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    auto p = s.next();
    ASSERT_TRUE(p);
    EXPECT_GE(reply_of(*p).status, 400) << head;
    std::string out;
    s.write_reply(reply_of(*p), out, t0);
    EXPECT_FALSE(s.keep_alive()) << "the unread body must not be parsed as a request";
    s.received("hello");
    EXPECT_FALSE(s.next());
  }
}

TEST(SessionHttp, ExpectContinueWithTheBodyAlreadyThereGetsNoInterimAnswer) {
  // Http11Probe SMUG-EXPECT-100-CL: a 100 sent after the body was read would come before the
  // answer as if it were one.
  Session s = session();
  s.received(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello");
  auto p = s.next();
  ASSERT_TRUE(p);
  EXPECT_EQ(reply_of(*p).status, 200);
  EXPECT_EQ(reply_of(*p).body, "hello");
  Session partly = session();
  partly.received(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhe");
  EXPECT_FALSE(partly.next()) << "no 100 for a body on its way: the rest is read, then answered";
  partly.received("llo");
  auto q = partly.next();
  ASSERT_TRUE(q);
  EXPECT_EQ(reply_of(*q).body, "hello");
}

TEST(SessionHttp, ExpectContinueWithoutABodyIsJustARequest) {
  Session s = session();
  s.received("GET /plaintext HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n");
  auto p = s.next();
  ASSERT_TRUE(p);
  EXPECT_EQ(reply_of(*p).status, 200);
}

TEST(SessionHttp, OtherExpectationsAre417) {
  Session s = session();
  s.received("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nExpect: teapot\r\n\r\nx");
  auto p = s.next();
  ASSERT_TRUE(p);
  EXPECT_EQ(reply_of(*p).status, 417);
  EXPECT_TRUE(reply_of(*p).close);
}

// --- the teaching bug (--teaching-bug shared-delay): off by default, in the core for every model

/// The body of one serialised response.
std::string body_of(const std::string& response) {
  const auto end_of_head = response.find("\r\n\r\n");
  return end_of_head == std::string::npos ? std::string() : response.substr(end_of_head + 4);
}

/// Two connections of one server each get a /delay, and both are parsed before either is answered
/// (what 32 overlapping requests do). Returns the bodies of their replies, in the order answered.
std::pair<std::string, std::string> two_overlapping_delays(SessionShared& shared) {
  Session slow("cm-test", 10s, t0, &shared), fast("cm-test", 10s, t0, &shared);
  slow.received("GET /delay/250 HTTP/1.1\r\nHost: x\r\n\r\n");
  auto slow_plan = slow.next();
  fast.received("GET /delay/7 HTTP/1.1\r\nHost: x\r\n\r\n");
  auto fast_plan = fast.next();
  EXPECT_TRUE(slow_plan && fast_plan);
  if (!slow_plan || !fast_plan) return {};
  // Each still waits its own delay: the bug is in what the reply says, not in when it comes.
  EXPECT_EQ(std::get<Wait>(*slow_plan).duration, 250ms);
  EXPECT_EQ(std::get<Wait>(*fast_plan).duration, 7ms);
  std::string fast_out, slow_out;
  fast.write_reply(reply_of(*fast_plan), fast_out, later(7ms));
  slow.write_reply(reply_of(*slow_plan), slow_out, later(250ms));
  return {body_of(fast_out), body_of(slow_out)};
}

TEST(SessionTeachingBug, OffByDefaultEachDelayAnswersItsOwnValue) {
  SessionShared shared;
  EXPECT_FALSE(shared.shared_delay_bug);
  EXPECT_EQ(two_overlapping_delays(shared), std::make_pair(std::string("7"), std::string("250")));
}

TEST(SessionTeachingBug, SharedDelayAnswersTheLastDelayAnyConnectionParsed) {
  SessionShared shared{.shared_delay_bug = true};
  // The 250 ms request is answered with the 7 parsed after it on another connection: exactly
  // what HttpArena's 32 overlapping delays exist to catch.
  EXPECT_EQ(two_overlapping_delays(shared), std::make_pair(std::string("7"), std::string("7")));
  EXPECT_EQ(shared.last_delay_ms.load(), 7);
}

TEST(SessionTeachingBug, SharedDelayLooksRightOneRequestAtATimeAndLeavesOtherRoutesAlone) {
  SessionShared shared{.shared_delay_bug = true};
  Session s("cm-test", 10s, t0, &shared);
  const std::pair<const char*, const char*> cases[] = {
      {"/delay/42", "42"}, {"/plaintext", "Hello, World!"}, {"/block/5", "5"}, {"/cpu/3", "3"},
      {"/delay/0", "0"},   {"/delay/abc", nullptr}};
  for (const auto& [path, body] : cases) {
    s.received(std::string("GET ") + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
    auto p = s.next();
    ASSERT_TRUE(p) << path;
    std::string out;
    s.write_reply(reply_of(*p), out, t0);
    if (body) {
      EXPECT_EQ(body_of(out), body) << path;
    } else {
      EXPECT_TRUE(out.starts_with("HTTP/1.1 400")) << path << ": " << out;
    }
  }
}

}  // namespace
}  // namespace cm
