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

TEST(SessionHttp, VersionsOtherThan10And11Are505) {
  for (const char* version : {"HTTP/2.0", "HTTP/0.9"}) {  // llhttp refuses 1.2, 9.9 as malformed
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

}  // namespace
}  // namespace cm
