// libuv_callbacks_test.cpp -- what the libuv model promises beyond the conformance suite: a stop
// leaves every loop closed with no handle, whatever its requests were doing; a full pool answers
// 503; the sleep anti-pattern serialises a loop; every --offload mode answers the same.
//
// libuv's thread pool is process-wide and sized once per process by the first server started
// (server.cpp, size_thread_pool), so every server here asks for the same 2 pool threads: then the
// pool has 2 threads whichever test runs first, and a third /block is queued, not running.
//
// Nothing here asserts a speed: only orderings and the spec's lower bounds.

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "cm/server.hpp"
#include "http_client.hpp"

namespace cm::models {
std::unique_ptr<Server> make_libuv_callbacks(const ServerOptions& options);
}

namespace cm::libuv_callbacks {
namespace {

using namespace std::chrono_literals;
using test::Client;
using test::get_request;
using Clock = std::chrono::steady_clock;

constexpr unsigned pool_threads = 2;

int fds_before_start = 0;  ///< the event-loop descriptors this process had before the server

std::unique_ptr<Server> start_server(ServerOptions options) {
  options.host = "127.0.0.1";
  options.port = 0;
  options.blocking_threads = pool_threads;
  fds_before_start = test::anon_inode_fds();
  auto server = models::make_libuv_callbacks(options);
  server->start();
  return server;
}

/// Stops `server` and checks that it left nothing behind: every connection freed (a Connection
/// is freed only in its last handle's close callback) and every loop closed (uv_loop_close
/// closes the loop's epoll and eventfd descriptors, and fails while a handle is still open).
void expect_clean_stop(Server& server) {
  server.stop();
  EXPECT_EQ(server.open_connections(), 0u) << "a connection's handles were not all closed";
  EXPECT_EQ(test::anon_inode_fds(), fds_before_start) << "a loop did not close";
}

class StopWithWaitingRequests : public ::testing::TestWithParam<Offload> {};

// Every kind of pending thing at once: Waits on timers, Blocks running and queued (pool) or on
// their threads, a connection mid-head, an idle one, one lingering after a closing reply.
TEST_P(StopWithWaitingRequests, EveryLoopClosesWithNoHandleLeft) {
  ServerOptions options;
  options.threads = 2;
  options.offload = GetParam();
  auto server = start_server(options);
  // First (with --offload pool a Now queues behind the Blocks): a closing reply, then lingering.
  Client lingering = Client::connect(server->port());
  ASSERT_TRUE(lingering.send(get_request("/plaintext", "Connection: close\r\n")));
  ASSERT_TRUE(lingering.read_response());  // answered; the server now lingers on it
  std::vector<Client> clients;
  for (int i = 0; i < 10; ++i) {
    clients.push_back(Client::connect(server->port()));
    ASSERT_TRUE(clients.back().send(get_request("/delay/30000")));
  }
  for (unsigned i = 0; i < pool_threads + 3; ++i) {  // more than the pool: some are queued
    clients.push_back(Client::connect(server->port()));
    ASSERT_TRUE(clients.back().send(get_request("/block/30000")));
  }
  clients.push_back(Client::connect(server->port()));
  ASSERT_TRUE(clients.back().send("GET /delay/1 HTTP/1.1\r\nHo"));  // a partial head
  clients.push_back(Client::connect(server->port()));               // idle

  const auto held = clients.size() + 1;
  for (auto deadline = Clock::now() + 5s;
       server->open_connections() < held && Clock::now() < deadline;) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(server->open_connections(), held);
  std::this_thread::sleep_for(100ms);  // let every request reach its timer, pool or thread

  const auto stop_started = Clock::now();
  ASSERT_NO_FATAL_FAILURE(expect_clean_stop(*server));
  EXPECT_LT(Clock::now() - stop_started, 30s) << "stop waited for a 30 s request";
  for (auto& c : clients)
    EXPECT_TRUE(c.closed_by_peer(5s));
}

INSTANTIATE_TEST_SUITE_P(Offload, StopWithWaitingRequests,
                         ::testing::Values(Offload::standard, Offload::pool, Offload::thread),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(LibuvCallbacks, StopInterruptsASleepOnTheLoop) {
  ServerOptions options;
  options.threads = 1;
  options.wait_mode = WaitMode::sleep;
  auto server = start_server(options);
  Client c = Client::connect(server->port());
  ASSERT_TRUE(c.send(get_request("/delay/30000")));
  std::this_thread::sleep_for(100ms);  // the loop thread is asleep in the request now
  expect_clean_stop(*server);
  EXPECT_TRUE(c.closed_by_peer(5s));
}

TEST(LibuvCallbacks, FullPoolAnswers503WithRetryAfterAndRecovers) {
  ServerOptions options;
  options.threads = 1;
  options.blocking_queue = 1;  // capacity: 2 running + 1 queued
  auto server = start_server(options);
  std::vector<Client> admitted;
  for (unsigned i = 0; i < pool_threads + 1; ++i) {
    admitted.push_back(Client::connect(server->port()));
    ASSERT_TRUE(admitted.back().send(get_request("/block/1500")));
  }
  std::this_thread::sleep_for(200ms);  // all three are admitted (running or queued)

  Client refused = Client::connect(server->port());
  ASSERT_TRUE(refused.send(get_request("/block/10")));
  auto r = refused.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->header("Retry-After"), "1");
  for (auto& c : admitted)
    EXPECT_FALSE(c.readable_now()) << "a 1.5 s block answered already";

  // The loop is not blocked by the pool: a Now is answered while every pool thread sleeps.
  ASSERT_TRUE(refused.send(get_request("/plaintext")));
  r = refused.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);

  for (auto& c : admitted) {
    auto ok = c.read_response();
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200);
    EXPECT_EQ(ok->body, "1500");
  }
  ASSERT_TRUE(refused.send(get_request("/block/10")));  // the slots were given back
  r = refused.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "10");
  expect_clean_stop(*server);
}

TEST(LibuvCallbacks, SleepWaitModeSerialisesTheLoop) {
  // The anti-pattern, shown as an ordering: with one loop asleep in a /delay, a /delay/0 on
  // another connection cannot be answered before the long one (in timer mode it is answered
  // first: the conformance suite checks that).
  ServerOptions options;
  options.threads = 1;
  options.wait_mode = WaitMode::sleep;
  auto server = start_server(options);
  Client slow = Client::connect(server->port());
  Client quick = Client::connect(server->port());
  ASSERT_TRUE(slow.send(get_request("/delay/300")));
  std::this_thread::sleep_for(50ms);  // the loop is asleep in the first request now
  ASSERT_TRUE(quick.send(get_request("/delay/0")));
  auto q = quick.read_response();
  ASSERT_TRUE(q);
  EXPECT_EQ(q->body, "0");
  // The loop wrote the slow answer before the quick one: it is waiting on its socket already.
  EXPECT_TRUE(slow.readable_now()) << "/delay/0 was answered while the loop slept";
  auto s = slow.read_response();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->body, "300");
  expect_clean_stop(*server);
}

class EveryOffloadMode : public ::testing::TestWithParam<Offload> {};

TEST_P(EveryOffloadMode, AnswersEveryPlanKind) {
  ServerOptions options;
  options.threads = 1;
  options.offload = GetParam();
  auto server = start_server(options);
  Client c = Client::connect(server->port());
  for (const char* path : {"/plaintext", "/delay/5", "/block/20", "/cpu/200", "/delay/0"}) {
    const auto sent = Clock::now();
    ASSERT_TRUE(c.send(get_request(path)));
    auto r = c.read_response();
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
    if (std::string_view(path).starts_with("/block/")) {
      EXPECT_EQ(r->body, "20");
      EXPECT_GE(r->received_at - sent, 20ms);
    }
  }
  // Pipelined across the offload: the three answers come back in order.
  ASSERT_TRUE(c.send(get_request("/block/30") + get_request("/cpu/100") + get_request("/delay/1")));
  for (const char* body : {"30", "100", "1"}) {
    auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, body);
  }
  expect_clean_stop(*server);
}

INSTANTIATE_TEST_SUITE_P(Offload, EveryOffloadMode,
                         ::testing::Values(Offload::standard, Offload::inline_, Offload::pool,
                                           Offload::thread),
                         [](const auto& info) {
                           std::string name(to_string(info.param));
                           std::erase(name, '_');
                           return name;
                         });

}  // namespace
}  // namespace cm::libuv_callbacks
