// session_test.cpp -- the per-connection protocol state every model drives.

#include "cm/session.hpp"

#include <gtest/gtest.h>

namespace cm {
namespace {

const auto now = std::chrono::system_clock::from_time_t(1'700'000'000);

TEST(Session, AnswersPipelinedRequestsOneAtATime) {
  Session s("cm-test");
  s.received("GET /delay/5 HTTP/1.1\r\n\r\nGET /plaintext HTTP/1.1\r\n\r\n");
  auto first = s.next();
  ASSERT_TRUE(first);
  EXPECT_TRUE(std::holds_alternative<Wait>(*first));
  std::string out;
  s.write_reply(reply_of(*first), out, now);
  EXPECT_TRUE(s.keep_alive());
  auto second = s.next();
  ASSERT_TRUE(second);
  EXPECT_EQ(reply_of(*second).body, "Hello, World!");
  EXPECT_FALSE(s.next());
  EXPECT_FALSE(s.has_partial_request());
}

TEST(Session, WaitsForMoreBytes) {
  Session s("cm-test");
  s.received("GET /plain");
  EXPECT_FALSE(s.next());
  EXPECT_TRUE(s.has_partial_request());
  s.received("text HTTP/1.1\r\n\r\n");
  auto p = s.next();
  ASSERT_TRUE(p);
  EXPECT_EQ(reply_of(*p).status, 200);
}

TEST(Session, ProtocolErrorClosesAfterItsReply) {
  Session s("cm-test");
  s.received("BOGUS\r\n\r\nGET /plaintext HTTP/1.1\r\n\r\n");
  auto p = s.next();
  ASSERT_TRUE(p);
  EXPECT_EQ(reply_of(*p).status, 400);
  std::string out;
  s.write_reply(reply_of(*p), out, now);
  EXPECT_FALSE(s.keep_alive());
  EXPECT_NE(out.find("Connection: close"), std::string::npos);
  EXPECT_FALSE(s.next()) << "nothing after a protocol error is parsed";
}

TEST(Session, Http10GetsCloseOrExplicitKeepAlive) {
  Session a("cm-test");
  a.received("GET /plaintext HTTP/1.0\r\n\r\n");
  std::string out;
  a.write_reply(reply_of(*a.next()), out, now);
  EXPECT_FALSE(a.keep_alive());
  EXPECT_NE(out.find("Connection: close"), std::string::npos);

  Session b("cm-test");
  b.received("GET /plaintext HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  out.clear();
  b.write_reply(reply_of(*b.next()), out, now);
  EXPECT_TRUE(b.keep_alive());
  EXPECT_NE(out.find("Connection: keep-alive"), std::string::npos);
}

TEST(Session, AReplyThatClosesEndsAKeepAliveConnection) {
  Session s("cm-test");
  s.received("GET /plaintext HTTP/1.1\r\n\r\nGET /plaintext HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(s.next());
  std::string out;
  s.write_reply(request_timeout(), out, now);
  EXPECT_FALSE(s.keep_alive());
  EXPECT_FALSE(s.next());
}

TEST(Session, ServerHeaderIsTheModels) {
  Session s("cm-blocking");
  s.received("GET /nope HTTP/1.1\r\n\r\n");
  std::string out;
  s.write_reply(reply_of(*s.next()), out, now);
  EXPECT_NE(out.find("\r\nServer: cm-blocking\r\n"), std::string::npos);
}

}  // namespace
}  // namespace cm
