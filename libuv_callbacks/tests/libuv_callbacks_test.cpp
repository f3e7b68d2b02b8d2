// libuv_callbacks_test.cpp -- what the libuv model promises beyond the conformance suite and the
// async models' suite (servers/tests/async_models_test.cpp): a stop leaves every loop closed with
// no handle, whatever its requests were doing, in every --offload mode.
//
// libuv's thread pool is process-wide and sized once per process by the first server started
// (server.cpp: add_loop sets UV_THREADPOOL_SIZE once), so every server here asks for the same 2
// pool threads: then the pool has 2 threads whichever test runs first, and a third /block is
// queued, not running.
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

}  // namespace
}  // namespace cm::libuv_callbacks
