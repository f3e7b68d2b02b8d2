// response_test.cpp -- serialisation and the Date cache.

#include "cm/response.hpp"

#include <gtest/gtest.h>

namespace cm {
namespace {

using std::chrono::system_clock;

TEST(Response, SerialisesEveryHeader) {
  Reply r;
  r.body = "Hello, World!";
  r.headers.emplace_back("Allow", "GET");
  std::string out;
  const auto when = system_clock::from_time_t(784111777);  // Sun, 06 Nov 1994 08:49:37 GMT
  serialize(r, "cm-test", Persistence::keep_alive, when, out);
  EXPECT_EQ(out,
            "HTTP/1.1 200 OK\r\nServer: cm-test\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
            "Content-Type: text/plain\r\nContent-Length: 13\r\nAllow: GET\r\n\r\nHello, World!");
}

TEST(Response, ConnectionHeaderFollowsPersistence) {
  Reply r;
  r.status = 404;
  std::string out;
  serialize(r, "s", Persistence::close, system_clock::now(), out);
  EXPECT_NE(out.find("HTTP/1.1 404 Not Found\r\n"), std::string::npos);
  EXPECT_NE(out.find("\r\nConnection: close\r\n"), std::string::npos);
  out.clear();
  serialize(r, "s", Persistence::keep_alive_explicit, system_clock::now(), out);
  EXPECT_NE(out.find("\r\nConnection: keep-alive\r\n"), std::string::npos);
  EXPECT_NE(out.find("Content-Length: 0\r\n"), std::string::npos);
}

TEST(Response, DateChangesWithTheSecondOnly) {
  const auto t = system_clock::from_time_t(1'700'000'000);
  const std::string a(http_date(t));
  EXPECT_EQ(a, "Tue, 14 Nov 2023 22:13:20 GMT");
  EXPECT_EQ(std::string(http_date(t + std::chrono::milliseconds(999))), a);
  EXPECT_EQ(std::string(http_date(t + std::chrono::seconds(1))), "Tue, 14 Nov 2023 22:13:21 GMT");
}

}  // namespace
}  // namespace cm
