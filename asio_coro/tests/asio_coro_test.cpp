// asio_coro_test.cpp -- what the conformance suite does not see: the offload pool's bound, the
// --offload and --wait-mode switches, and stopping with blocking calls queued or on their threads.
//
// Nothing here asserts a speed: only answers, statuses and the order in which answers arrive.

#include <gtest/gtest.h>

#include <filesystem>
#include <iterator>
#include <memory>
#include <thread>
#include <vector>

#include "cm/server.hpp"
#include "http_client.hpp"

namespace cm::models {
std::unique_ptr<Server> make_asio_coro(const ServerOptions& options);
}

namespace cm::test {
namespace {

using Clock = std::chrono::steady_clock;

std::unique_ptr<Server> start(ServerOptions options) {
  options.host = "127.0.0.1";
  options.port = 0;
  auto server = models::make_asio_coro(options);
  server->start();
  return server;
}

TEST(AsioCoro, PoolFullAnswers503WithRetryAfter) {
  ServerOptions options;
  options.blocking_threads = 1;
  options.blocking_queue = 1;  // one running, one queued: the third is refused
  auto server = start(options);
  Client running = Client::connect(server->port());
  Client queued = Client::connect(server->port());
  ASSERT_TRUE(running.send(get_request("/block/1500")));
  ASSERT_TRUE(queued.send(get_request("/block/10")));
  std::this_thread::sleep_for(300ms);  // both are parsed and admitted

  Client refused = Client::connect(server->port());
  ASSERT_TRUE(refused.send(get_request("/block/10")));
  auto r = refused.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->header("Retry-After"), "1");
  EXPECT_FALSE(running.readable_now()) << "the refusal came after the running call ended";

  auto first = running.read_response(), second = queued.read_response();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->body, "1500");
  EXPECT_EQ(second->body, "10");
  EXPECT_GE(second->received_at, first->received_at) << "one pool thread: the queued call waits";

  // The slots came back: the same connection is admitted again.
  ASSERT_TRUE(refused.send(get_request("/block/5")));
  r = refused.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  server->stop();
}

TEST(AsioCoro, WaitModeSleepSerialisesTheLoop) {
  ServerOptions options;
  options.threads = 1;
  options.wait_mode = WaitMode::sleep;
  auto server = start(options);
  Client sleeping = Client::connect(server->port());
  Client zero = Client::connect(server->port());
  ASSERT_TRUE(sleeping.send(get_request("/delay/400")));
  std::this_thread::sleep_for(100ms);  // the loop is asleep in the first request now
  ASSERT_TRUE(zero.send(get_request("/delay/0")));
  auto z = zero.read_response();
  ASSERT_TRUE(z);
  EXPECT_EQ(z->body, "0");
  EXPECT_TRUE(sleeping.readable_now()) << "/delay/0 cannot pass a loop that sleeps";
  auto s = sleeping.read_response();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->body, "400");
  server->stop();
}

TEST(AsioCoro, InlineBlockStallsTheLoop) {
  ServerOptions options;
  options.threads = 1;
  options.offload = Offload::inline_;
  auto server = start(options);
  Client blocking = Client::connect(server->port());
  Client plain = Client::connect(server->port());
  ASSERT_TRUE(blocking.send(get_request("/block/400")));
  std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(plain.send(get_request("/plaintext")));
  auto p = plain.read_response();
  ASSERT_TRUE(p);
  EXPECT_TRUE(blocking.readable_now()) << "a blocking call on the loop holds everyone";
  auto b = blocking.read_response();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->body, "400");
  server->stop();
}

/// How many threads this process has now.
std::size_t threads_of_this_process() {
  const std::filesystem::directory_iterator tasks("/proc/self/task");
  return static_cast<std::size_t>(std::distance(begin(tasks), end(tasks)));
}

TEST(AsioCoro, ThreadOffloadDoesNotStallTheLoop) {
  ServerOptions options;
  options.threads = 1;
  options.offload = Offload::thread;  // /block and /plaintext each on a new thread
  auto server = start(options);
  Client blocking = Client::connect(server->port());
  Client plain = Client::connect(server->port());
  ASSERT_TRUE(blocking.send(get_request("/block/2000")));
  std::this_thread::sleep_for(100ms);  // the block is running on its thread
  for (int i = 0; i < 3; ++i) {        // each one starts, ends and is joined meanwhile
    ASSERT_TRUE(plain.send(get_request("/plaintext")));
    auto p = plain.read_response();
    ASSERT_TRUE(p);
    EXPECT_EQ(p->status, 200);
    EXPECT_FALSE(blocking.readable_now()) << "the plaintext waited for the block's thread";
  }
  auto b = blocking.read_response();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->body, "2000");
  server->stop();
}

TEST(AsioCoro, StopWithThreadOffloadedBlocksInFlightLeavesNoThread) {
  const std::size_t before = threads_of_this_process();
  ServerOptions options;
  options.threads = 2;
  options.offload = Offload::thread;
  auto server = start(options);
  std::vector<Client> clients;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(Client::connect(server->port()));
    ASSERT_TRUE(clients.back().send(get_request("/block/30000")));
  }
  std::this_thread::sleep_for(200ms);  // four call threads are asleep in their blocks
  EXPECT_GE(threads_of_this_process(), before + 2 + 4) << "two loops, four call threads";
  server->stop();  // interrupts them; ctest's TIMEOUT would say if it waited out 30 s
  EXPECT_EQ(server->open_connections(), 0u);
  EXPECT_EQ(threads_of_this_process(), before) << "stop() joined every thread it started";
  for (auto& c : clients)
    EXPECT_TRUE(c.closed_by_peer(5s));
}

TEST(AsioCoro, EveryOffloadModeAnswersEveryRoute) {
  for (Offload mode : {Offload::standard, Offload::inline_, Offload::pool, Offload::thread}) {
    ServerOptions options;
    options.threads = 2;
    options.blocking_threads = 2;
    options.offload = mode;
    auto server = start(options);
    Client c = Client::connect(server->port());
    for (const char* path : {"/plaintext", "/block/20", "/cpu/500", "/delay/20"}) {
      ASSERT_TRUE(c.send(get_request(path))) << to_string(mode) << " " << path;
      auto r = c.read_response();
      ASSERT_TRUE(r) << to_string(mode) << " " << path;
      EXPECT_EQ(r->status, 200) << to_string(mode) << " " << path;
    }
    ASSERT_TRUE(c.send(post_request("/echo", "offloaded")));
    auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "offloaded") << to_string(mode);
    server->stop();
    EXPECT_EQ(server->open_connections(), 0u);
  }
}

TEST(AsioCoro, StopWithBlockingCallsRunningAndQueued) {
  ServerOptions options;
  options.threads = 2;
  options.blocking_threads = 2;
  options.blocking_queue = 4;
  auto server = start(options);
  std::vector<Client> clients;
  for (int i = 0; i < 6; ++i) {
    clients.push_back(Client::connect(server->port()));
    ASSERT_TRUE(clients.back().send(get_request("/block/30000")));
  }
  for (int i = 0; i < 3; ++i) {
    clients.push_back(Client::connect(server->port()));
    // One waits on its timer, two are reading a request head that is not whole yet.
    ASSERT_TRUE(clients.back().send(i == 0 ? get_request("/delay/30000") : "GET /delay/1 HT"));
  }
  std::this_thread::sleep_for(200ms);
  server->stop();  // the 30 s calls are interrupted, not waited out (ctest's TIMEOUT would say)
  EXPECT_EQ(server->open_connections(), 0u);
  for (auto& c : clients)
    EXPECT_TRUE(c.closed_by_peer(5s));
}

}  // namespace
}  // namespace cm::test
