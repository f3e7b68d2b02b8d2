// async_models_test.cpp -- what every async model (every cm::LoopServer) promises beyond the
// conformance suite: the offload pool's bound (503 + Retry-After), the teaching switches
// (--wait-mode sleep and --offload inline stall the loop; --offload thread does not), every
// --offload mode answering every route, and a stop that interrupts what waits and leaves no thread.
//
// One case, every async model: the behaviour is the same rule in common/, carried out in each
// model's idiom. Nothing here asserts a speed: only answers, statuses and the order they arrive.

#include <gtest/gtest.h>

#include <filesystem>
#include <iterator>
#include <thread>

#include "cm/loop_server.hpp"
#include "cm/registry.hpp"
#include "http_client.hpp"

namespace cm::test {
namespace {

/// The models whose server is a LoopServer: every model but those that block a thread per
/// connection.
std::vector<std::string> async_models() {
  // The smallest server of each model, never started: constructing one starts its offload pool,
  // and gtest asks in every test process (64 threads each would cost seconds under TSan).
  const ServerOptions smallest{.threads = 1, .blocking_threads = 1};
  std::vector<std::string> names;
  for (const auto& m : built_models()) {
    if (dynamic_cast<LoopServer*>(m.make(smallest).get())) names.emplace_back(m.name);
  }
  return names;
}

/// How many threads this process has now.
std::size_t threads_of_this_process() {
  const std::filesystem::directory_iterator tasks("/proc/self/task");
  return static_cast<std::size_t>(std::distance(begin(tasks), end(tasks)));
}

/// The count of this process's threads once it holds still (the same for 100 ms, or 2 s passed):
/// a thread joined a moment ago may still be listed in /proc while the kernel reaps it.
std::size_t settled_threads() {
  std::size_t count = threads_of_this_process();
  const auto give_up = std::chrono::steady_clock::now() + 2s;
  for (int same = 0; same < 5 && std::chrono::steady_clock::now() < give_up;) {
    std::this_thread::sleep_for(20ms);
    const std::size_t now = std::exchange(count, threads_of_this_process());
    same = now == count ? same + 1 : 0;
  }
  return count;
}

class AsyncModel : public ::testing::TestWithParam<std::string> {
 protected:
  void TearDown() override {
    if (server_) server_->stop();
  }
  /// Starts the model; false (the test is skipped) where the machine refuses it (io_uring).
  bool start(ServerOptions options) {
    options.host = "127.0.0.1";
    options.port = 0;
    options.threads = options.threads ? options.threads : 1;
    server_ = make_server(GetParam(), options);
    try {
      server_->start();
      return true;
    } catch (const ModelUnavailable&) {
      server_.reset();
      return false;
    }
  }
  Client connect() { return Client::connect(server_->port()); }
  std::unique_ptr<Server> server_;
};

#define START_OR_SKIP(options) \
  if (!start(options)) GTEST_SKIP() << GetParam() << " cannot run on this machine"

TEST_P(AsyncModel, AFullPoolAnswers503WithRetryAfterAndRecovers) {
  START_OR_SKIP((ServerOptions{.blocking_threads = 1, .blocking_queue = 1}));
  Client running = connect(), queued = connect();
  ASSERT_TRUE(running.send(get_request("/block/1500")));
  // The long call must reach the pool first: sent together, the two requests may be read in
  // either order (one recv can complete at its submission while the other waits for bytes).
  std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(queued.send(get_request("/block/10")));
  std::this_thread::sleep_for(300ms);  // both are parsed and admitted: 1 running + 1 queued
  Client refused = connect();
  ASSERT_TRUE(refused.send(get_request("/block/10")));
  auto r = refused.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->header("Retry-After"), "1");
  EXPECT_FALSE(running.readable_now()) << "the refusal came after the running call ended";
  ASSERT_TRUE(refused.send(get_request("/plaintext")));  // the loop is not held by the pool
  r = refused.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  auto first = running.read_response(), second = queued.read_response();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->body, "1500");
  EXPECT_EQ(second->body, "10");
  ASSERT_TRUE(refused.send(get_request("/block/5")));  // the slots were given back
  r = refused.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "5");
}

TEST_P(AsyncModel, AnOffloadedCallIsAnsweredWhenItEndsNotAfterTheCallsQueuedBehindIt) {
  // One pool thread: the short call runs, the long one queues behind it. The short call's answer
  // must leave when its call ends, while the long one runs -- not wait for a pool thread to come
  // free after the calls queued since (which made answers leave in bursts, late).
  START_OR_SKIP((ServerOptions{.blocking_threads = 1, .blocking_queue = 4}));
  Client short_call = connect(), long_call = connect();
  ASSERT_TRUE(short_call.send(get_request("/block/200")));
  std::this_thread::sleep_for(50ms);  // the short call is on the pool thread
  ASSERT_TRUE(long_call.send(get_request("/block/800")));
  auto s = short_call.read_response();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->body, "200");
  EXPECT_FALSE(long_call.readable_now()) << "the short call's answer waited for the long call";
  auto l = long_call.read_response();
  ASSERT_TRUE(l);
  EXPECT_EQ(l->body, "800");
}

TEST_P(AsyncModel, SleepWaitModeSerialisesTheLoop) {
  // The anti-pattern, as an ordering: with the one loop asleep in a /delay, a /delay/0 on another
  // connection cannot be answered before it (with a timer it is answered first: the conformance
  // suite checks that).
  START_OR_SKIP((ServerOptions{.wait_mode = WaitMode::sleep}));
  Client sleeping = connect(), zero = connect();
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
}

TEST_P(AsyncModel, InlineBlockStallsTheLoop) {
  START_OR_SKIP((ServerOptions{.offload = Offload::inline_}));
  Client blocking = connect(), plain = connect();
  ASSERT_TRUE(blocking.send(get_request("/block/400")));
  std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(plain.send(get_request("/plaintext")));
  auto p = plain.read_response();
  ASSERT_TRUE(p);
  EXPECT_TRUE(blocking.readable_now()) << "a blocking call on the loop holds everyone";
  auto b = blocking.read_response();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->body, "400");
}

TEST_P(AsyncModel, ThreadOffloadDoesNotStallTheLoop) {
  START_OR_SKIP((ServerOptions{.offload = Offload::thread}));  // each step on a new thread
  Client blocking = connect(), plain = connect();
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
}

TEST_P(AsyncModel, EveryOffloadModeAnswersEveryRoute) {
  for (Offload mode : {Offload::standard, Offload::inline_, Offload::pool, Offload::thread}) {
    if (server_) server_->stop();
    START_OR_SKIP((ServerOptions{.threads = 2, .blocking_threads = 2, .offload = mode}));
    Client c = connect();
    for (const char* path : {"/plaintext", "/block/20", "/cpu/500", "/delay/20", "/delay/0"}) {
      ASSERT_TRUE(c.send(get_request(path))) << to_string(mode) << " " << path;
      auto r = c.read_response();
      ASSERT_TRUE(r) << to_string(mode) << " " << path;
      EXPECT_EQ(r->status, 200) << to_string(mode) << " " << path;
    }
    // Pipelined across the offload: the answers come back in order.
    ASSERT_TRUE(c.send(get_request("/block/30") + get_request("/cpu/100") +
                       post_request("/echo", "offloaded")));
    for (const char* body : {"30", "100", "offloaded"}) {
      auto r = c.read_response();
      ASSERT_TRUE(r) << to_string(mode);
      EXPECT_EQ(r->body, body) << to_string(mode);
    }
  }
}

TEST_P(AsyncModel, StopInterruptsEveryWaitAndLeavesNoThread) {
  for (Offload mode : {Offload::standard, Offload::thread}) {
    if (server_) server_->stop();
    server_.reset();
    const std::size_t threads_before = settled_threads();
    const int fds_before = anon_inode_fds();
    START_OR_SKIP(
        (ServerOptions{.threads = 2, .blocking_threads = 2, .blocking_queue = 4, .offload = mode}));
    std::vector<Client> clients;
    for (int i = 0; i < 6; ++i) {  // running and queued in the pool, or on their own threads
      clients.push_back(connect());
      ASSERT_TRUE(clients.back().send(get_request("/block/30000")));
    }
    for (const char* bytes : {"GET /delay/30000 HTTP/1.1\r\nHost: x\r\n\r\n", "GET /delay/1 HT"}) {
      clients.push_back(connect());  // one on its timer, one in a partial head
      ASSERT_TRUE(clients.back().send(bytes));
    }
    clients.push_back(connect());  // idle
    std::this_thread::sleep_for(200ms);
    server_->stop();  // the 30 s calls are interrupted, not waited out (ctest's TIMEOUT would say)
    EXPECT_EQ(server_->open_connections(), 0u) << to_string(mode);
    for (auto& c : clients)
      EXPECT_TRUE(c.closed_by_peer(5s)) << to_string(mode);
    if (mode == Offload::thread) {  // libuv's own pool, made at its first use, stays: not here
      EXPECT_EQ(settled_threads(), threads_before) << "stop() joined every call thread";
    }
    EXPECT_EQ(anon_inode_fds(), fds_before) << "a loop's descriptors outlived stop()";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, AsyncModel, ::testing::ValuesIn(async_models()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace cm::test
