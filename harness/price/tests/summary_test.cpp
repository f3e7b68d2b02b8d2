// A row over its rounds: medians and min-max, the within-round ratio to a peer, and the flags
// (spread above 10%, starved connections, a staggered start that could not be had).
#include <gtest/gtest.h>

#include "summary.hpp"

namespace cm::price {
namespace {

using nlohmann::json;

/// cm-load's JSON for one round; `fairness` adds the keys of issue 12.
json load_json(double rps, double p99_us, long long timeouts, std::optional<int> starved,
               std::optional<bool> stagger = std::nullopt) {
  json j = json::parse(R"({"tool": "cm-load", "connections_requested": 2000,
    "connections_open": 2000, "connect_failures": {},
    "delay_ms": {"min": 100, "max": 100, "mean": 100}, "warmup_s": 1, "duration_s": 5,
    "errors": {"connect": 0, "reset": 0, "timeout": 0, "status": 0, "body": 0, "early": 0},
    "latency_us": {"mean": 101000, "p50": 100500, "p90": 102000, "p999": 110000, "max": 120000},
    "overshoot_us": {"mean": 1000, "p50": 500, "p90": 2000, "p999": 10000, "max": 20000},
    "client_cpu_s": 0.5})");
  j["rps"] = rps;
  j["requests"] = rps * 5;
  j["latency_us"]["p99"] = p99_us;
  j["overshoot_us"]["p99"] = p99_us - 100000;
  j["errors"]["timeout"] = timeouts;
  j["errors_total"] = timeouts;
  if (starved) {
    j["starved_connections"] = *starved;
    j["fairness_jain"] = *starved > 0 ? 0.9 : 1.0;
    j["max_gap_ms"] = 300;
    j["answers_per_connection"] = {{"min", 0}, {"p50", 10}, {"max", 12}};
  }
  if (stagger) j["stagger"] = *stagger;
  return j;
}

const Row delay_row{"delay", "/delay/{ms}", std::string("100"), 100, 0, 2000, false, true};

RowResult round_of(unsigned k, double rps, double p99_us, std::optional<int> starved,
                   double server_cpu_s = 1.0) {
  RowResult r;
  r.server = "asio_coro";
  r.variant = "standard";
  r.row = delay_row;
  r.round = k;
  r.rps = rps;
  r.load = load_json(rps, p99_us, k, starved, true);
  r.stagger_passed = true;
  r.connections_open = 2000;
  r.server_cpu_s = server_cpu_s;
  r.load_average_1m = 1.5 + k;
  r.machine = MachineShare{0.01 * k, 0.1 * k};
  r.ceilings = compute_ceilings({.connections = 2000, .mean_delay_ms = 100, .cpu_rps = 50000});
  r.efficiency = efficiency(rps, r.ceilings);
  return r;
}

RowRounds three_rounds(double a, double b, double c, std::optional<int> starved = 0) {
  RowRounds rr;
  rr.row = delay_row;
  rr.rounds = {round_of(0, a, 104000, starved), round_of(1, b, 108000, starved),
               round_of(2, c, 102000, starved)};
  return rr;
}

bool has(const std::vector<std::string>& lines, const std::string& fragment) {
  for (const auto& l : lines)
    if (l.find(fragment) != std::string::npos) return true;
  return false;
}

TEST(Summary, MediansAndMinMaxOfEachFigure) {
  const auto rr = three_rounds(19000, 19600, 19200);
  const auto s = summarize(rr);
  EXPECT_EQ(s.rounds, 3u);
  EXPECT_EQ(s.measured, 3u);
  ASSERT_TRUE(s.rps);
  EXPECT_DOUBLE_EQ(s.rps->median, 19200);
  EXPECT_DOUBLE_EQ(s.rps->min, 19000);
  EXPECT_DOUBLE_EQ(s.rps->max, 19600);
  EXPECT_EQ(s.median_round, 2u);  // round 3 had the median rps
  EXPECT_DOUBLE_EQ(s.efficiency->median, 0.96);
  EXPECT_DOUBLE_EQ(s.latency_p99_ms->median, 104);
  EXPECT_DOUBLE_EQ(s.latency_p99_ms->min, 102);
  EXPECT_DOUBLE_EQ(s.latency_p99_ms->max, 108);
  // 1 s of server CPU over rps x 5 s answers, per 1,000: 1e6 / (5 x rps) ms.
  EXPECT_DOUBLE_EQ(s.cpu_ms_per_1k->max, 1e6 / (5 * 19000));
  EXPECT_EQ(s.errors_total, 0 + 1 + 2);  // timeouts 0, 1, 2: summed
  EXPECT_EQ(s.errors.at("timeout"), 3);
  EXPECT_EQ(s.bound, "connections");
  EXPECT_EQ(s.start, "staggered");
  EXPECT_DOUBLE_EQ(s.lowest_ceiling->median, 20000);
  EXPECT_DOUBLE_EQ(s.jain->median, 1.0);
}

TEST(Summary, ARoundThatFailedIsLeftOutAndCounted) {
  auto rr = three_rounds(19000, 19600, 19200);
  rr.rounds[1].error = "cm-load exit 1: no connection";
  const auto s = summarize(rr);
  EXPECT_EQ(s.measured, 2u);
  EXPECT_DOUBLE_EQ(s.rps->median, 19100);  // the mean of the two middles
  EXPECT_EQ(s.rps->n, 2u);
  EXPECT_TRUE(s.not_measured.empty());
  for (auto& r : rr.rounds)
    r.error = "server would not start";
  const auto none = summarize(rr);
  EXPECT_EQ(none.measured, 0u);
  EXPECT_FALSE(none.rps);
  EXPECT_EQ(none.not_measured, "server would not start");
}

TEST(Summary, TheRatioToAPeerIsTakenWithinEachRound) {
  // The machine slowed in round 2 for both: the ratio holds where the medians' ratio would not.
  const auto server = three_rounds(20000, 10000, 15000);
  const auto node = three_rounds(10000, 5000, 15000);
  EXPECT_EQ(peer_ratios(server, node), (std::vector<double>{2, 2, 1}));
  EXPECT_DOUBLE_EQ(median(peer_ratios(server, node)), 2);
  auto missing = node;
  missing.rounds[0].error = "not run";
  EXPECT_EQ(peer_ratios(server, missing), (std::vector<double>{2, 1}));
}

TEST(Summary, ASpreadAboveTenPercentIsFlaggedWithTheMachineOfEachRound) {
  // 100, 100, 110.1: (110.1 - 100) / 100 = 10.1%, over the limit.
  const auto wide = three_rounds(110.1, 100, 100);
  const auto s = summarize(wide);
  ASSERT_TRUE(spread_too_wide(s));
  const auto flags = row_flags(wide, s);
  ASSERT_FALSE(flags.empty());
  EXPECT_TRUE(has(flags, "spread above 10% over 3 rounds")) << flags[0];
  EXPECT_TRUE(has(flags, "load average (1 min) 1.50, 2.50, 3.50")) << flags[0];
  EXPECT_TRUE(has(flags, "steal 0.0%, 1.0%, 2.0% of the CPUs' time")) << flags[0];
  EXPECT_TRUE(has(flags, "other processes 0.0%, 10%, 20%")) << flags[0];
  EXPECT_TRUE(has(flags, "The lowest rps was round 2")) << flags[0];
  // Exactly 10% is not above it; a single round has no spread.
  EXPECT_FALSE(spread_too_wide(summarize(three_rounds(110, 100, 100))));
  RowRounds one;
  one.row = delay_row;
  one.rounds = {round_of(0, 100, 104000, 0)};
  EXPECT_FALSE(spread_too_wide(summarize(one)));
}

TEST(Summary, StarvedConnectionsAreFlaggedWithWhatTheyMean) {
  auto rr = three_rounds(19000, 19600, 19200, 0);
  EXPECT_FALSE(has(row_flags(rr, summarize(rr)), "starved"));
  rr.rounds[1].load["starved_connections"] = 40;
  const auto s = summarize(rr);
  EXPECT_DOUBLE_EQ(s.starved->median, 0);
  EXPECT_DOUBLE_EQ(s.starved->max, 40);
  const auto flags = row_flags(rr, s);
  EXPECT_TRUE(has(flags,
                  "starved connections in 1 of 3 rounds (round 2; median 0, at most 40 of "
                  "2,000 connections"));
  EXPECT_TRUE(has(flags, "the server served some connections and not others"));
}

TEST(Summary, FairnessKeysAbsentFromAnOlderCmLoadAreAbsentHere) {
  const auto rr = three_rounds(19000, 19600, 19200, std::nullopt);
  const auto s = summarize(rr);
  EXPECT_FALSE(s.starved);
  EXPECT_FALSE(s.jain);
  EXPECT_FALSE(s.max_gap_ms);
  EXPECT_FALSE(has(row_flags(rr, s), "starved"));
}

TEST(Summary, AStaggeredStartThatCmLoadCouldNotGiveIsFlagged) {
  auto rr = three_rounds(19000, 19600, 19200);
  EXPECT_FALSE(has(row_flags(rr, summarize(rr)), "staggered start"));
  for (auto& r : rr.rounds) {
    r.stagger_passed = false;
    r.load.erase("stagger");
  }
  const auto s = summarize(rr);
  EXPECT_EQ(s.start, "together");
  EXPECT_TRUE(has(row_flags(rr, s), "every round ran without it"));
  EXPECT_TRUE(has(row_flags(rr, s), "the time to serve a wave"));
}

TEST(Summary, NotesAreGroupedByKindOverTheRounds) {
  auto rr = three_rounds(19000, 19600, 19200);
  for (auto& r : rr.rounds)
    r.notes.push_back({"pool-queue", "200 connections share 64 threads"});
  rr.rounds[0].notes.push_back({"short", "reached 95.0% of its connections ceiling"});
  rr.rounds[2].notes.push_back({"short", "reached 96.0% of its connections ceiling"});
  rr.rounds[1].notes.push_back({"server-exit", "the server exited during the row"});
  const auto notes = grouped_notes(rr, summarize(rr));
  ASSERT_EQ(notes.size(), 3u);
  EXPECT_EQ(notes[0], "every round: 200 connections share 64 threads");
  // Different figures: round 3's, the median round (19,200 rps).
  EXPECT_EQ(notes[1],
            "in rounds 1, 3 (the figures of round 3, the median; the others' are in "
            "results.json): reached 96.0% of its connections ceiling");
  EXPECT_EQ(notes[2], "in round 2: the server exited during the row");
  // With two rounds the median is the mean of both: neither round is called the median.
  rr.rounds.pop_back();
  rr.rounds[1].notes.push_back({"short", "reached 97.0% of its connections ceiling"});
  const auto two = grouped_notes(rr, summarize(rr));
  ASSERT_EQ(two.size(), 3u);
  EXPECT_EQ(two[1],
            "in rounds 1, 2 (the figures of round 1; the others' are in results.json): reached "
            "95.0% of its connections ceiling");
}

TEST(Summary, RoundListsReadAsRanges) {
  EXPECT_EQ(round_list({0, 1, 2}), "1-3");
  EXPECT_EQ(round_list({0, 2}), "1, 3");
  EXPECT_EQ(round_list({0, 1, 3}), "1, 2, 4");
  EXPECT_EQ(round_list({4}), "5");
  EXPECT_EQ(round_list({}), "");
}

}  // namespace
}  // namespace cm::price
