// policy_test.cpp -- the lingering close and the accept back-off, as decisions.

#include "cm/policy.hpp"

#include <gtest/gtest.h>

#include <sys/resource.h>

#include <cerrno>

namespace cm {
namespace {

using namespace std::chrono_literals;

TEST(Linger, EndsAtTheDeadline) {
  const auto now = std::chrono::steady_clock::time_point(50s);
  EXPECT_EQ(Linger(now).deadline(), now + linger_timeout);
}

TEST(Linger, ReadsOnUntilEofErrorOrTheByteBound) {
  Linger a(std::chrono::steady_clock::now());
  EXPECT_TRUE(a.more(100));
  EXPECT_FALSE(a.more(0)) << "EOF: the client closed";
  Linger b(std::chrono::steady_clock::now());
  EXPECT_FALSE(b.more(-1)) << "an error or the deadline";
  Linger c(std::chrono::steady_clock::now());
  EXPECT_TRUE(c.more(static_cast<long>(linger_max_bytes - 1)));
  EXPECT_FALSE(c.more(1)) << "a client that never stops sending is cut off";
}

TEST(AcceptBackoff, PausesOnlyWhenOutOfResources) {
  for (int e : {EMFILE, ENFILE, ENOBUFS, ENOMEM})
    EXPECT_GT(accept_backoff(e), 0ms) << e;
  for (int e : {ECONNABORTED, EINTR, EAGAIN, EPROTO})
    EXPECT_EQ(accept_backoff(e), 0ms) << e;
}

TEST(AcceptTrouble, SaysAtOnceThenAtMostOnceASecondWithTheFailuresBetween) {
  AcceptTrouble trouble;
  const auto t0 = AcceptTrouble::Clock::time_point(100s);
  auto first = trouble.failed(EMFILE, 90, 100, t0);
  ASSERT_TRUE(first);
  EXPECT_NE(first->find("out of descriptors: the process may hold 100 (RLIMIT_NOFILE"),
            std::string::npos)
      << *first;
  EXPECT_NE(first->find("1 accept(s) failed since the last line, 90 connection(s) open"),
            std::string::npos)
      << *first;
  for (int i = 1; i <= 40; ++i)
    EXPECT_FALSE(trouble.failed(EMFILE, 90, 100, t0 + i * 20ms)) << "within the second: quiet";
  auto next = trouble.failed(EMFILE, 91, 100, t0 + 1s);
  ASSERT_TRUE(next);
  EXPECT_NE(next->find("41 accept(s) failed since the last line, 91 connection(s) open"),
            std::string::npos)
      << *next;
}

TEST(AcceptTrouble, NamesTheSystemTableAndIgnoresOneClientsFailure) {
  AcceptTrouble trouble;
  const auto t0 = AcceptTrouble::Clock::time_point(5s);
  EXPECT_FALSE(trouble.failed(ECONNABORTED, 3, 100, t0))
      << "one client's failure, not the server's";
  auto line = trouble.failed(ENFILE, 3, 100, t0);
  ASSERT_TRUE(line);
  EXPECT_NE(line->find("fs.file-max"), std::string::npos) << *line;
  EXPECT_NE(line->find("1 accept(s) failed"), std::string::npos) << "ECONNABORTED was not counted";
}

TEST(DescriptorLimit, RaisedToTheHardLimitAndFreeFarBelowIt) {
  rlimit before{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &before), 0);
  EXPECT_EQ(raise_descriptor_limit(), before.rlim_max);
  EXPECT_EQ(descriptor_limit(), before.rlim_max);
  EXPECT_TRUE(descriptor_free(0));
}

}  // namespace
}  // namespace cm
