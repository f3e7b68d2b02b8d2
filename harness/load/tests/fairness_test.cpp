// fairness_test.cpp -- the fairness figures from known tallies: Jain's index, starved slots, the
// longest gap (window edges included), answers per connection, and the per-answer bookkeeping.

#include <gtest/gtest.h>

#include <vector>

#include "fairness.hpp"

namespace cm::load {
namespace {

constexpr std::int64_t kMs = 1'000'000;

double jain(std::vector<std::uint64_t> x) {
  return jain_index(x);
}

TEST(Fairness, JainIndexOfKnownCounts) {
  EXPECT_DOUBLE_EQ(jain({1, 1, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(jain({7, 7, 7}), 1.0);
  EXPECT_DOUBLE_EQ(jain({1, 0, 0, 0}), 0.25);  // one of four served: 1/n, the worst
  EXPECT_DOUBLE_EQ(jain({5, 5, 0, 0}), 0.5);   // k of n served evenly: k/n
  EXPECT_DOUBLE_EQ(jain({2, 1}), 0.9);         // 3^2 / (2 * 5)
  EXPECT_DOUBLE_EQ(jain({42}), 1.0);
}

TEST(Fairness, JainIndexIsZeroWhenNobodyAnswered) {
  EXPECT_EQ(jain({}), 0.0);
  EXPECT_EQ(jain({0, 0, 0}), 0.0);
}

TEST(Fairness, JainIndexDoesNotOverflowOnLargeCounts) {
  EXPECT_DOUBLE_EQ(jain({4'000'000'000ull, 4'000'000'000ull}), 1.0);
  EXPECT_NEAR(jain({4'000'000'000ull, 0}), 0.5, 1e-12);
}

TEST(Fairness, RecordTracksCountAndLongestGap) {
  SlotTally t;
  const std::int64_t start = 1000 * kMs;
  t.record(start + 30 * kMs, start);  // 30 ms from the window's start
  t.record(start + 40 * kMs, start);  // 10
  t.record(start + 95 * kMs, start);  // 55: the longest
  t.record(start + 100 * kMs, start);
  EXPECT_EQ(t.answers, 4u);
  EXPECT_EQ(t.max_gap_ns, 55 * kMs);
  EXPECT_EQ(t.last_answer_ns, start + 100 * kMs);
  EXPECT_TRUE(t.open_in_window);
}

TEST(Fairness, GapsIncludeBothEdgesOfTheWindow) {
  const std::int64_t start = 0, end = 1000 * kMs;
  SlotTally late;  // first answer 400 ms in: the start edge is its longest gap
  late.record(400 * kMs, start);
  late.record(500 * kMs, start);
  SlotTally early_stop;  // last answer 300 ms in: 700 ms to the end edge
  early_stop.record(100 * kMs, start);
  early_stop.record(300 * kMs, start);

  std::vector<SlotTally> slots{late};
  EXPECT_DOUBLE_EQ(fairness(slots, start, end).max_gap_ms, 500.0);  // 500 ms tail beats 400
  slots = {early_stop};
  EXPECT_DOUBLE_EQ(fairness(slots, start, end).max_gap_ms, 700.0);
  slots = {late, early_stop};
  EXPECT_DOUBLE_EQ(fairness(slots, start, end).max_gap_ms, 700.0);
}

TEST(Fairness, StarvedSlotsCountAndTheirGapIsTheWholeWindow) {
  const std::int64_t start = 5000 * kMs, end = start + 2000 * kMs;
  std::vector<SlotTally> slots(4);
  for (int i = 0; i < 3; ++i) {
    slots[i].open_in_window = true;
    for (int k = 1; k <= 20; ++k)
      slots[i].record(start + k * 99 * kMs, start);
  }
  slots[3].open_in_window = true;  // open, never answered
  Fairness f = fairness(slots, start, end);
  EXPECT_EQ(f.connections, 4u);
  EXPECT_EQ(f.starved, 1u);
  EXPECT_DOUBLE_EQ(f.jain, 0.75);
  EXPECT_DOUBLE_EQ(f.max_gap_ms, 2000.0);
  EXPECT_EQ(f.answers_min, 0u);
  EXPECT_EQ(f.answers_p50, 20u);
  EXPECT_EQ(f.answers_max, 20u);
}

TEST(Fairness, SlotsNeverOpenInTheWindowAreLeftOut) {
  std::vector<SlotTally> slots(3);
  slots[0].record(10 * kMs, 0);
  slots[1].record(20 * kMs, 0);
  // slots[2]: never connected (a connect failure, reported as such), not a starved connection.
  Fairness f = fairness(slots, 0, 30 * kMs);
  EXPECT_EQ(f.connections, 2u);
  EXPECT_EQ(f.starved, 0u);
  EXPECT_DOUBLE_EQ(f.jain, 1.0);
  EXPECT_DOUBLE_EQ(f.max_gap_ms, 20.0);  // slot 0: 10 ms in, then 20 ms to the end
}

TEST(Fairness, NobodyToJudgeOrNobodyAnswered) {
  std::vector<SlotTally> none(5);  // nobody connected
  Fairness f = fairness(none, 0, 1000 * kMs);
  EXPECT_EQ(f.connections, 0u);
  EXPECT_EQ(f.starved, 0u);
  EXPECT_EQ(f.jain, 0.0);
  EXPECT_EQ(f.max_gap_ms, 0.0);

  for (SlotTally& s : none)
    s.open_in_window = true;  // all connected, none answered
  f = fairness(none, 0, 1000 * kMs);
  EXPECT_EQ(f.connections, 5u);
  EXPECT_EQ(f.starved, 5u);
  EXPECT_EQ(f.jain, 0.0);
  EXPECT_DOUBLE_EQ(f.max_gap_ms, 1000.0);
  EXPECT_EQ(f.answers_max, 0u);
}

TEST(Fairness, MedianIsTheNearestRank) {
  std::vector<SlotTally> slots(5);
  std::uint64_t counts[] = {9, 1, 5, 3, 7};
  for (std::size_t i = 0; i < slots.size(); ++i)
    for (std::uint64_t k = 0; k < counts[i]; ++k)
      slots[i].record(static_cast<std::int64_t>(k + 1) * kMs, 0);
  Fairness f = fairness(slots, 0, 100 * kMs);
  EXPECT_EQ(f.answers_min, 1u);
  EXPECT_EQ(f.answers_p50, 5u);
  EXPECT_EQ(f.answers_max, 9u);
  slots.pop_back();  // {9, 1, 5, 3}: the 2nd of 1, 3, 5, 9
  EXPECT_EQ(fairness(slots, 0, 100 * kMs).answers_p50, 3u);
}

}  // namespace
}  // namespace cm::load
