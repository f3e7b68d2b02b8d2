// trace_test.cpp -- cm::Trace and the events the core records into it (Session, perform, venue).

#include "cm/trace.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cm/server_state.hpp"
#include "cm/session.hpp"
#include "cm/work.hpp"

namespace cm {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

json parsed(const Trace& trace) {
  std::ostringstream out;
  trace.write_json(out, "test");
  return json::parse(out.str());  // throws, failing the test, if it is not JSON
}

/// The events of `trace` that are not metadata, in the order recorded.
std::vector<json> events(const Trace& trace) {
  std::vector<json> out;
  const json file = parsed(trace);
  for (const json& e : file["traceEvents"])
    if (e["ph"] != "M") out.push_back(e);
  return out;
}

std::vector<std::string> names(const std::vector<json>& events) {
  std::vector<std::string> out;
  for (const json& e : events)
    out.push_back(e["name"].get<std::string>() + "/" + e["ph"].get<std::string>());
  return out;
}

TEST(Trace, WritesChromeTraceEventsEachWithPhaseTimeThreadAndConnection) {
  Trace trace;
  const Tag tag = trace.connection();
  EXPECT_EQ(tag.conn, 1u);
  EXPECT_EQ(trace.connection().conn, 2u);
  trace.instant(tag.conn, "read", "\"bytes\":5");
  const auto start = Trace::Clock::now();
  std::this_thread::sleep_for(2ms);
  trace.complete(tag.conn, "sleep", start);
  trace.begin(tag.conn, "GET /");
  trace.begin(tag.conn, "on a timer");
  trace.end_all(tag.conn);

  const json file = parsed(trace);
  EXPECT_EQ(file["otherData"]["events"], 6);
  const auto all = events(trace);
  ASSERT_EQ(all.size(), 6u);
  for (const json& e : all) {
    EXPECT_TRUE(e.contains("ts") && e.contains("tid") && e.contains("pid")) << e;
    EXPECT_EQ(e["args"]["conn"], 1) << e;
  }
  EXPECT_EQ(all[0]["args"]["bytes"], 5);
  EXPECT_EQ(all[1]["ph"], "X");
  EXPECT_GE(all[1]["dur"].get<double>(), 2000.0);  // microseconds
  // Spans end innermost first, matched by connection id.
  EXPECT_EQ(names(all), (std::vector<std::string>{"read/i", "sleep/X", "GET //b", "on a timer/b",
                                                  "on a timer/e", "GET //e"}));
  EXPECT_EQ(all[4]["id"], 1);
  EXPECT_EQ(all[4]["cat"], "conn");
}

TEST(Trace, NamesEachThreadInTheOrderItFirstRecorded) {
  Trace trace;
  trace.instant(1, "accept");
  std::thread([&] { trace.instant(1, "elsewhere"); }).join();
  trace.instant(1, "close");
  std::vector<std::string> threads;
  std::set<int> tids;
  const json file = parsed(trace);
  for (const json& e : file["traceEvents"]) {
    if (e["name"] == "thread_name") threads.push_back(e["args"]["name"]);
    if (e["ph"] != "M") tids.insert(e["tid"].get<int>());
  }
  EXPECT_EQ(threads, (std::vector<std::string>{"thread 1", "thread 2"}));
  EXPECT_EQ(tids.size(), 2u);
}

TEST(Trace, AClientsBytesInANameStayValidJson) {
  Trace trace;
  trace.begin(1, std::string("GET /\"\\\x01\xff\n", 10));
  const auto all = events(trace);  // parsing it is the assertion
  EXPECT_EQ(all[0]["name"], "GET /\"\\\x01\u00ff\n");
}

TEST(Trace, PastItsCapacityCountsWhatItDrops) {
  Trace trace(3);
  for (int i = 0; i < 5; ++i)
    trace.instant(1, "read");
  EXPECT_EQ(trace.size(), 3u);
  EXPECT_EQ(trace.dropped(), 2u);
  EXPECT_EQ(parsed(trace)["otherData"]["dropped"], 2);
}

TEST(Trace, ASessionRecordsItsRequestFromAcceptToClose) {
  Trace trace;
  SessionShared shared{.trace = &trace};
  {
    Session session("cm-test", 10s, Moment::now(), &shared);
    session.received("GET /delay/5 HTTP/1.1\r\nHost: x\r\n\r\n");
    auto plan = session.next();
    ASSERT_TRUE(plan);
    const Tag tag = session.tag();
    ASSERT_TRUE(tag);
    trace_venue(Venue::timer, tag);
    std::string out;
    session.write_reply(reply_of(*plan), out, Moment::now());
  }
  const auto all = events(trace);
  EXPECT_EQ(names(all),
            (std::vector<std::string>{"accept/i", "read/i", "parse/X", "GET /delay/5/b",
                                      "on a timer (no thread)/b", "on a timer (no thread)/e",
                                      "GET /delay/5/e", "write/i", "close/i"}));
  EXPECT_EQ(all[3]["args"]["plan"], "wait 5 ms");
  EXPECT_EQ(all[7]["args"]["status"], 200);
  EXPECT_GT(all[7]["args"]["bytes"].get<int>(), 0);
}

TEST(Trace, AConnectionCutBeforeItsReplyEndsItsSpansAtTheClose) {
  Trace trace;
  SessionShared shared{.trace = &trace};
  {
    Session session("cm-test", 10s, Moment::now(), &shared);
    session.received("GET /block/5 HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_TRUE(session.next());
    trace_venue(Venue::pool, session.tag());
  }
  EXPECT_EQ(
      names(events(trace)),
      (std::vector<std::string>{"accept/i", "read/i", "parse/X", "GET /block/5/b", "on the pool/b",
                                "on the pool/e", "GET /block/5/e", "close/i"}));
}

TEST(Trace, ARefusedRequestIsNamedByItsStatus) {
  Trace trace;
  SessionShared shared{.trace = &trace};
  Session session("cm-test", 10s, Moment::now(), &shared);
  session.received("BAD\r\n\r\n");
  ASSERT_TRUE(session.next());
  EXPECT_EQ(events(trace)[3]["name"], "refused, 400");
}

TEST(Trace, PerformMarksTheThreadThatDidTheWorkAndAReplyNothing) {
  Trace trace;
  Sleeper sleeper;
  const Tag tag = trace.connection();
  int worker = 0;
  std::thread([&] {
    perform(Block{3ms, {}}, sleeper, tag);
    worker = static_cast<int>(events(trace).at(0)["tid"].get<int>());
  }).join();
  perform(Compute{100us, {}}, sleeper, tag);
  perform(Now{}, sleeper, tag);
  const auto all = events(trace);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0]["name"], "block 3 ms");
  EXPECT_GE(all[0]["dur"].get<double>(), 3000.0);
  EXPECT_EQ(all[1]["name"], "cpu 100 us");
  EXPECT_NE(all[1]["tid"].get<int>(), worker);  // the pool thread, then this one
}

TEST(Trace, WithoutATraceASessionHasNoTagAndTheStepsRecordNothing) {
  SessionShared shared;
  Session session("cm-test", 10s, Moment::now(), &shared);
  EXPECT_FALSE(session.tag());
  Sleeper sleeper;
  EXPECT_EQ(perform(Wait{1ms, {}}, sleeper, session.tag()), Outcome::done);
}

TEST(Trace, ServerStateOpensASpanOnlyForAStepHandedAway) {
  Trace trace;
  ServerOptions options;
  options.trace = &trace;
  ServerState state(options, "test", 1);
  const Tag tag = trace.connection();
  EXPECT_EQ(state.venue(Wait{5ms, {}}, tag), Venue::timer);
  EXPECT_EQ(state.venue(Block{5ms, {}}, tag), Venue::pool);
  EXPECT_EQ(state.venue(Compute{5us, {}}, tag), Venue::loop);
  EXPECT_EQ(names(events(trace)),
            (std::vector<std::string>{"on a timer (no thread)/b", "on the pool/b"}));
}

}  // namespace
}  // namespace cm
