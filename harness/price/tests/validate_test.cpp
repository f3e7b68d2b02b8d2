// The validation refuses a misbehaving server, and passes a correct one.
//
// TestServer is a small thread-per-connection server that can misbehave on purpose: answer
// early, keep the delay in shared state (so every overlapping request is answered with the delay
// of the last one parsed), send the wrong Content-Type, or refuse /delay/0.
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "cm/net.hpp"
#include "validate.hpp"

namespace cm::price {
namespace {

enum class Behaviour { correct, early, shared_state, wrong_type, no_zero };

class TestServer {
 public:
  explicit TestServer(Behaviour b) : behaviour_(b), listeners_(open_listeners("127.0.0.1", 0, 1)) {
    acceptor_ = std::thread([this] {
      for (;;) {
        const int fd = ::accept4(listeners_.sockets[0].get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) return;  // shut down
        std::lock_guard lock(mutex_);
        connections_.emplace_back([this, fd] { serve(Fd(fd)); });
      }
    });
  }
  ~TestServer() {
    ::shutdown(listeners_.sockets[0].get(), SHUT_RDWR);
    acceptor_.join();
    std::lock_guard lock(mutex_);
    for (auto& t : connections_)
      t.join();
  }
  std::uint16_t port() const { return listeners_.port; }

 private:
  void serve(Fd fd) {
    std::string in;
    char buf[1024];
    for (;;) {
      std::size_t end;
      while ((end = in.find("\r\n\r\n")) == std::string::npos) {
        const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
        if (n <= 0) return;
        in.append(buf, static_cast<std::size_t>(n));
      }
      const std::string target = in.substr(4, in.find(' ', 4) - 4);
      in.erase(0, end + 4);
      std::string body = "Hello, World!";
      int status = 200;
      if (target.starts_with("/delay/") || target.starts_with("/block/")) {
        const unsigned ms = static_cast<unsigned>(std::stoul(target.substr(7)));
        body = std::to_string(ms);
        if (behaviour_ == Behaviour::shared_state) last_delay_ = ms;  // the bug under test
        if (behaviour_ != Behaviour::early)
          std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        if (behaviour_ == Behaviour::shared_state) body = std::to_string(last_delay_.load());
        if (behaviour_ == Behaviour::no_zero && ms == 0) status = 400;
      }
      const std::string type =
          behaviour_ == Behaviour::wrong_type ? "application/json" : "text/plain";
      const std::string reply =
          "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: " + type +
          "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
      if (::send(fd.get(), reply.data(), reply.size(), MSG_NOSIGNAL) < 0) return;
    }
  }

  Behaviour behaviour_;
  Listeners listeners_;
  std::thread acceptor_;
  std::mutex mutex_;
  std::vector<std::thread> connections_;
  std::atomic<unsigned> last_delay_{0};
};

ValidationPlan full_plan() {
  ValidationPlan plan;
  plan.plaintext = true;
  plan.delay = true;
  plan.block = true;
  plan.min_ms = 10;
  plan.max_ms = 80;  // keeps the test short; still 32 different delays
  return plan;
}

TEST(Validate, PassesACorrectServer) {
  TestServer server(Behaviour::correct);
  const auto v = validate_server(server.port(), full_plan());
  EXPECT_TRUE(v.ok) << v.failure;
  EXPECT_EQ(v.passed.size(), 4u);
}

TEST(Validate, RefusesAnEarlyAnswer) {
  TestServer server(Behaviour::early);
  const auto v = validate_server(server.port(), full_plan());
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.failure.find("before its delay"), std::string::npos) << v.failure;
}

TEST(Validate, RefusesADelayKeptInSharedState) {
  TestServer server(Behaviour::shared_state);
  const auto v = validate_server(server.port(), full_plan());
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.failure.find("body"), std::string::npos) << v.failure;
  EXPECT_NE(v.failure.find("overlapping"), std::string::npos) << v.failure;
}

TEST(Validate, RefusesTheWrongContentType) {
  TestServer server(Behaviour::wrong_type);
  const auto v = validate_server(server.port(), full_plan());
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.failure.find("Content-Type \"application/json\""), std::string::npos) << v.failure;
}

TEST(Validate, RefusesAServerThatDoesNotAnswerDelayZero) {
  TestServer server(Behaviour::no_zero);
  const auto v = validate_server(server.port(), full_plan());
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.failure.find("/delay/0: status 400"), std::string::npos) << v.failure;
}

TEST(Validate, ReportsAPortWithNoServer) {
  std::uint16_t port;
  {
    TestServer gone(Behaviour::correct);
    port = gone.port();
  }
  const auto r = http_get(port, "/plaintext", std::chrono::seconds(5));
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.error.find("connect"), std::string::npos) << r.error;
  const auto v = validate_server(port, full_plan());
  EXPECT_FALSE(v.ok);
}

}  // namespace
}  // namespace cm::price
