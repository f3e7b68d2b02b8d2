// Rounds: the order the runs go in, the median and its spread, ratios taken within a round.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "rounds.hpp"

namespace cm::price {
namespace {

using Order = std::vector<std::size_t>;

TEST(Rounds, EachRoundStartsFurtherAlongTheList) {
  EXPECT_EQ(round_order(3, 0, 3), (Order{0, 1, 2}));
  EXPECT_EQ(round_order(3, 1, 3), (Order{1, 2, 0}));
  EXPECT_EQ(round_order(3, 2, 3), (Order{2, 0, 1}));
  // Seven servers (five models, nginx, node) in three rounds start at 0, 2 and 4.
  EXPECT_EQ(round_order(7, 1, 3), (Order{2, 3, 4, 5, 6, 0, 1}));
  EXPECT_EQ(round_order(7, 2, 3), (Order{4, 5, 6, 0, 1, 2, 3}));
  // Two servers in two rounds: the second round swaps them, as harness/cross-check does.
  EXPECT_EQ(round_order(2, 1, 2), (Order{1, 0}));
  EXPECT_EQ(round_order(5, 0, 1), (Order{0, 1, 2, 3, 4}));
  EXPECT_TRUE(round_order(0, 0, 2).empty());
}

TEST(Rounds, WithAsManyRoundsAsServersEachRunsOnceInEveryPlace) {
  for (std::size_t n : {2u, 4u, 7u}) {
    std::vector<std::set<std::size_t>> places(n);  // the places each server ran in
    for (unsigned k = 0; k < n; ++k) {
      const auto order = round_order(n, k, static_cast<unsigned>(n));
      ASSERT_EQ(std::set<std::size_t>(order.begin(), order.end()).size(), n) << "a permutation";
      for (std::size_t place = 0; place < n; ++place)
        places[order[place]].insert(place);
    }
    for (std::size_t s = 0; s < n; ++s)
      EXPECT_EQ(places[s].size(), n) << "server " << s << " of " << n;
  }
}

TEST(Rounds, RefusesNoRoundsOrARoundPastTheLast) {
  EXPECT_THROW(round_order(3, 0, 0), std::invalid_argument);
  EXPECT_THROW(round_order(3, 3, 3), std::invalid_argument);
  EXPECT_THROW(schedule({{true}}, 0), std::invalid_argument);
  EXPECT_THROW(schedule({{true, true}, {true}}, 2), std::invalid_argument);
}

TEST(Rounds, ScheduleGoesRowByRowRoundByRoundServersInterleaved) {
  // Three targets; the third (a peer like nginx) runs only the first row.
  const std::vector<std::vector<bool>> runs{{true, true}, {true, true}, {true, false}};
  const std::vector<Step> expected{
      // row 0, round 0: every server's row 0; round 1: again, starting one place along
      {0, 0, 0},
      {0, 0, 1},
      {0, 0, 2},
      {0, 1, 1},
      {0, 1, 2},
      {0, 1, 0},
      // row 1: the peer is left out where it would have run
      {1, 0, 0},
      {1, 0, 1},
      {1, 1, 1},
      {1, 1, 0}};
  EXPECT_EQ(schedule(runs, 2), expected);
}

TEST(Rounds, ScheduleRunsEveryRowOfEveryTargetOncePerRound) {
  const std::vector<std::vector<bool>> runs{
      {true, true, true}, {true, false, true}, {true, true, false}, {true, true, true}};
  const unsigned rounds = 3;
  const auto steps = schedule(runs, rounds);
  std::map<std::tuple<std::size_t, unsigned, std::size_t>, int> seen;
  for (const auto& s : steps)
    ++seen[{s.target, s.round, s.row}];
  std::size_t expected = 0;
  for (std::size_t t = 0; t < runs.size(); ++t)
    for (std::size_t row = 0; row < runs[t].size(); ++row)
      for (unsigned k = 0; k < rounds; ++k) {
        const int want = runs[t][row] ? 1 : 0;
        expected += want;
        EXPECT_EQ((seen[{t, k, row}]), want) << "target " << t << " row " << row << " round " << k;
      }
  EXPECT_EQ(steps.size(), expected);
  // Rows never go back, and within a row the rounds never go back.
  for (std::size_t i = 1; i < steps.size(); ++i) {
    EXPECT_GE(steps[i].row, steps[i - 1].row);
    if (steps[i].row == steps[i - 1].row) {
      EXPECT_GE(steps[i].round, steps[i - 1].round);
    }
  }
}

TEST(Rounds, MedianIsTheMiddleOrTheMeanOfTheTwoMiddles) {
  EXPECT_DOUBLE_EQ(median({5}), 5);
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({10, 40, 20, 30}), 25);
  EXPECT_DOUBLE_EQ(median({7, 7, 1}), 7);
  EXPECT_THROW(median({}), std::invalid_argument);
}

TEST(Rounds, SpreadIsMaxMinusMinOverTheMedian) {
  const auto s = spread_of({110, 90, 100});
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(s->median, 100);
  EXPECT_DOUBLE_EQ(s->min, 90);
  EXPECT_DOUBLE_EQ(s->max, 110);
  EXPECT_EQ(s->n, 3u);
  EXPECT_DOUBLE_EQ(s->relative(), 0.2);
  EXPECT_DOUBLE_EQ(spread_of({19200})->relative(), 0);
  EXPECT_DOUBLE_EQ(spread_of({0, 0})->relative(), 0);
  EXPECT_TRUE(std::isinf(spread_of({0, 0, 5})->relative()));  // around a median of 0
  EXPECT_FALSE(spread_of({}));
  EXPECT_EQ(present({1.0, std::nullopt, 3.0}), (std::vector<double>{1, 3}));
}

TEST(Rounds, RatiosAreTakenWithinARoundNotBetweenMedians) {
  // The machine ran fast in round 2 and slow in round 3 for both servers alike.
  const std::vector<std::optional<double>> a{100, 200, 300}, b{100, 100, 600};
  const auto ratios = within_round_ratios(a, b);
  EXPECT_EQ(ratios, (std::vector<double>{1, 2, 0.5}));
  EXPECT_DOUBLE_EQ(median(ratios), 1.0);
  EXPECT_DOUBLE_EQ(median(present(a)) / median(present(b)), 2.0);  // what it is not
  // A round either server missed, or where the denominator is 0, gives no ratio.
  EXPECT_EQ(within_round_ratios({100, std::nullopt, 300, 50}, {50, 60, 0}),
            (std::vector<double>{2}));
}

}  // namespace
}  // namespace cm::price
