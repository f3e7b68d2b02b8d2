// server_test.cpp -- what the conformance suite does not reach in the uring_coro model: the
// refusal path, the bounded pool's 503, the --offload and --wait-mode variants, and no frame left
// after a stop with requests in flight.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cm/server.hpp"
#include "cm/uring/task.hpp"
#include "http_client.hpp"

namespace cm::models {
std::unique_ptr<Server> make_uring_coro(const ServerOptions& options);
}

namespace cm::test {
namespace {

using Clock = std::chrono::steady_clock;

class UringServerTest : public ::testing::Test {
 protected:
  void start(ServerOptions options) {
    options.host = "127.0.0.1";
    options.port = 0;
    options.threads = options.threads ? options.threads : 2;
    server_ = models::make_uring_coro(options);
    try {
      server_->start();
    } catch (const ModelUnavailable& e) {
      server_.reset();
      GTEST_SKIP() << "io_uring is not available here: " << e.what();
    }
  }
  void TearDown() override {
    if (!server_) return;
    server_->stop();
    EXPECT_EQ(server_->open_connections(), 0u);
    EXPECT_EQ(uring::FrameCount::alive(), frames_before_) << "a coroutine frame outlived stop()";
  }
  Response get_ok(std::string_view path) {
    auto r = get(server_->port(), path);
    EXPECT_TRUE(r) << path;
    return r.value_or(Response{});
  }

  const std::size_t frames_before_ = uring::FrameCount::alive();
  std::unique_ptr<Server> server_;
};

TEST(UringUnavailable, StartThrowsModelUnavailable) {
  ::setenv("CM_URING_SIMULATE_ENOSYS", "1", 1);
  auto server = models::make_uring_coro(ServerOptions{.port = 0});
  try {
    server->start();
    ADD_FAILURE() << "start() succeeded with io_uring refused";
  } catch (const ModelUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("io_uring is not available"), std::string::npos)
        << e.what();
  }
  ::unsetenv("CM_URING_SIMULATE_ENOSYS");
  server->stop();  // stopping a server that never started is fine
}

TEST(UringUnavailable, CmServerSaysSoInOneLine) {
  const std::string command = std::string("CM_URING_SIMULATE_ENOSYS=1 ") + CM_SERVER_BINARY +
                              " --model uring_coro --port 0 2>&1";
  FILE* out = ::popen(command.c_str(), "r");
  ASSERT_NE(out, nullptr);
  std::string text;
  char chunk[256];
  while (std::fgets(chunk, sizeof chunk, out))
    text += chunk;
  const int status = ::pclose(out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_NE(text.find("io_uring"), std::string::npos) << text;
}

TEST_F(UringServerTest, WaitModeSleepStillAnswersNeverEarly) {
  start(ServerOptions{.threads = 1, .wait_mode = WaitMode::sleep});
  if (!server_) return;
  const auto sent = Clock::now();
  EXPECT_EQ(get_ok("/delay/40").body, "40");
  EXPECT_GE(Clock::now() - sent, 40ms);
}

TEST_F(UringServerTest, StopWithEveryKindOfWorkInFlightLeavesNoFrame) {
  start(ServerOptions{.blocking_threads = 2, .blocking_queue = 2});
  if (!server_) return;
  std::vector<Client> clients;
  for (const char* path : {"/delay/30000", "/block/30000", "/block/30000", "/block/30000"}) {
    clients.push_back(Client::connect(server_->port()));
    ASSERT_TRUE(clients.back().send(get_request(path)));
  }
  clients.push_back(Client::connect(server_->port()));  // idle
  clients.push_back(Client::connect(server_->port()));
  ASSERT_TRUE(clients.back().send("GET /plaintext HTTP/1.1\r\nHo"));  // partial head
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(server_->open_connections(), clients.size());
  server_->stop();
  for (auto& c : clients)
    EXPECT_TRUE(c.closed_by_peer(5s));
}

TEST_F(UringServerTest, ClosingReplyLingersUntilTheClientCloses) {
  start(ServerOptions{});
  if (!server_) return;
  Client c = Client::connect(server_->port());
  // The 400 closes the connection; the extra bytes after it must not turn the close into a reset
  // that would destroy the response before the client read it.
  ASSERT_TRUE(c.send("HELLO\r\n\r\n" + std::string(64 * 1024, 'x')));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(c.closed_by_peer());
}

}  // namespace
}  // namespace cm::test
