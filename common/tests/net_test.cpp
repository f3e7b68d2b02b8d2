// net_test.cpp -- the OS helpers of cm/net.hpp that read a socket's state.

#include "cm/net.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

namespace cm {
namespace {

TEST(BytesUnread, CountsWhatTheKernelHoldsAndNothingAfterItIsRead) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  Fd ours(pair[0]), theirs(pair[1]);
  EXPECT_EQ(bytes_unread(ours.get()), 0u);
  ASSERT_EQ(::write(theirs.get(), "GET / HTTP/1.1\r\n", 16), 16);
  EXPECT_EQ(bytes_unread(ours.get()), 16u);
  char buffer[16];
  ASSERT_EQ(::read(ours.get(), buffer, sizeof buffer), 16);
  EXPECT_EQ(bytes_unread(ours.get()), 0u);
}

TEST(BytesUnread, IsZeroForADescriptorThatIsNoSocket) {
  EXPECT_EQ(bytes_unread(-1), 0u);
}

}  // namespace
}  // namespace cm
