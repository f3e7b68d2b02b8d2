// policy_test.cpp -- the lingering close and the accept back-off, as decisions.

#include "cm/policy.hpp"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace cm
