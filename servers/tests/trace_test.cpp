// trace_test.cpp -- the trace of one small scene on every model (cm-server --trace, in process):
// where each request waited, and on which thread.
//
// The scene of harness/trace-scene: three connections on /delay/100, one /block/100, one
// /cpu/2000, one /plaintext, sent together. The blocking model serves each connection on a worker
// of its own, so its three waits hold three threads; an async model (one loop here) waits on
// timers that hold no thread, and its loop thread is the one that accepted every connection.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <sstream>

#include "cm/registry.hpp"
#include "cm/trace.hpp"
#include "http_client.hpp"
#include "models.hpp"

namespace cm::test {
namespace {

using nlohmann::json;

class TracedScene : public ::testing::TestWithParam<std::string> {
 protected:
  bool blocking() const { return GetParam() == "blocking"; }

  /// Runs the scene, stops the server, and gives the events of the trace (metadata apart).
  std::vector<json> run_scene() {
    ServerOptions options{.host = "127.0.0.1", .port = 0, .threads = blocking() ? 0u : 1u};
    options.trace = &trace_;
    auto server = make_server(GetParam(), options);
    try {
      server->start();
    } catch (const ModelUnavailable& e) {
      skipped_ = e.what();
      return {};
    }
    std::vector<Client> clients;
    for (const char* path :
         {"/delay/100", "/delay/100", "/delay/100", "/block/100", "/cpu/2000", "/plaintext"}) {
      clients.push_back(Client::connect(server->port()));
      EXPECT_TRUE(clients.back().send(get_request(path)));
    }
    for (Client& c : clients) {
      const auto r = c.read_response();
      EXPECT_TRUE(r && r->status == 200);
    }
    server->stop();
    server.reset();
    std::ostringstream out;
    trace_.write_json(out, GetParam());
    std::vector<json> events;
    const json file = json::parse(out.str());
    for (const json& e : file["traceEvents"])
      if (e["ph"] != "M") events.push_back(e);
    return events;
  }

  /// The threads on which events of this name and phase happened, one entry per event.
  static std::multiset<int> threads_of(const std::vector<json>& events, std::string_view name,
                                       std::string_view phase) {
    std::multiset<int> tids;
    for (const json& e : events)
      if (e["name"] == name && e["ph"] == phase) tids.insert(e["tid"].get<int>());
    return tids;
  }
  static std::size_t distinct(const std::multiset<int>& tids) {
    return std::set<int>(tids.begin(), tids.end()).size();
  }

  Trace trace_;
  std::string skipped_;
};

TEST_P(TracedScene, EveryRequestIsTracedFromAcceptToCloseWithItsThread) {
  const auto events = run_scene();
  if (!skipped_.empty()) GTEST_SKIP() << skipped_;
  EXPECT_EQ(threads_of(events, "accept", "i").size(), 6u);
  EXPECT_EQ(threads_of(events, "write", "i").size(), 6u);
  EXPECT_EQ(threads_of(events, "close", "i").size(), 6u);
  EXPECT_EQ(threads_of(events, "GET /delay/100", "b").size(), 3u);
  EXPECT_EQ(threads_of(events, "GET /delay/100", "e").size(), 3u);
  EXPECT_EQ(threads_of(events, "cpu 2000 us", "X").size(), 1u);
  EXPECT_EQ(threads_of(events, "block 100 ms", "X").size(), 1u);
  std::map<std::uint64_t, int> per_connection;
  for (const json& e : events)
    ++per_connection[e["args"]["conn"].get<std::uint64_t>()];
  EXPECT_EQ(per_connection.size(), 6u) << "each connection its own id";
}

TEST_P(TracedScene, WaitingRequestsHoldAThreadEachInTheBlockingModelAndNoneInAnAsyncOne) {
  const auto events = run_scene();
  if (!skipped_.empty()) GTEST_SKIP() << skipped_;
  const auto accepts = threads_of(events, "accept", "i");
  const auto slept = threads_of(events, "wait 100 ms", "X");  // a thread held for the wait
  const auto timers = threads_of(events, "on a timer (no thread)", "b");
  const auto pool = threads_of(events, "block 100 ms", "X");
  if (blocking()) {
    EXPECT_EQ(distinct(accepts), 6u) << "a worker per connection";
    EXPECT_EQ(slept.size(), 3u);
    EXPECT_EQ(distinct(slept), 3u) << "the three waits sit on three threads";
    EXPECT_TRUE(timers.empty());
  } else {
    ASSERT_EQ(distinct(accepts), 1u) << "one loop accepts every connection";
    const int loop = *accepts.begin();
    EXPECT_TRUE(slept.empty()) << "no thread sleeps through a wait";
    EXPECT_EQ(timers.size(), 3u);
    EXPECT_EQ(timers, (std::multiset<int>{loop, loop, loop})) << "the three waits on one thread";
    ASSERT_EQ(pool.size(), 1u);
    EXPECT_NE(*pool.begin(), loop) << "the blocking call left the loop";
    EXPECT_EQ(threads_of(events, "cpu 2000 us", "X"), std::multiset<int>{loop});
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TracedScene, ::testing::ValuesIn(model_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace cm::test
