// The arithmetic of pricing: ceilings, efficiency, Little's law, and which threads a wait holds.
#include <gtest/gtest.h>

#include "ceilings.hpp"
#include "runner.hpp"

namespace cm::price {
namespace {

TEST(Ceilings, ConnectionCeilingIsConnectionsOverMeanDelay) {
  const auto c = compute_ceilings({.connections = 2000, .mean_delay_ms = 100});
  ASSERT_TRUE(c.connection);
  EXPECT_DOUBLE_EQ(*c.connection, 20000.0);
  EXPECT_FALSE(c.thread);
  EXPECT_FALSE(c.cpu);
  EXPECT_EQ(c.bound(), "connections");
}

TEST(Ceilings, ThreadCeilingIsThreadsOverMeanDelayAndBindsTheBlockingModel) {
  // HttpArena's example: 64 threads at 10 ms top out near 6,400 rps.
  const auto c = compute_ceilings(
      {.connections = 32000, .mean_delay_ms = 10, .threads = 64, .cpu_rps = 100000});
  ASSERT_TRUE(c.thread && c.connection && c.cpu);
  EXPECT_DOUBLE_EQ(*c.thread, 6400.0);
  EXPECT_DOUBLE_EQ(*c.connection, 3'200'000.0);
  EXPECT_DOUBLE_EQ(*c.lowest(), 6400.0);
  EXPECT_EQ(c.bound(), "threads");
}

TEST(Ceilings, CpuCeilingIsThePlaintextRpsAndCanBeTheLowest) {
  const auto c = compute_ceilings({.connections = 16000, .mean_delay_ms = 1000, .cpu_rps = 9000});
  EXPECT_DOUBLE_EQ(*c.connection, 16000.0);
  EXPECT_DOUBLE_EQ(*c.cpu, 9000.0);
  EXPECT_EQ(c.bound(), "cpu");
}

TEST(Ceilings, ComputeAddsItsCpuTimeToThePlaintextCost) {
  // 100,000 rps of /plaintext costs 10 us each on one CPU; 50 us more gives 1 / 60 us.
  const auto c =
      compute_ceilings({.connections = 64, .cpu_rps = 100000, .compute_us = 50, .server_cpus = 1});
  ASSERT_TRUE(c.cpu);
  EXPECT_NEAR(*c.cpu, 1e6 / 60.0, 1e-6);
  // Without a measured /plaintext, only the work itself: 2 CPUs x 20,000 per CPU.
  const auto w = compute_ceilings({.connections = 64, .compute_us = 50, .server_cpus = 2});
  EXPECT_NEAR(*w.cpu, 40000.0, 1e-6);
}

TEST(Ceilings, NoDelayNoCpuMeansNoCeiling) {
  const auto c = compute_ceilings({.connections = 100});
  EXPECT_FALSE(c.lowest());
  EXPECT_EQ(c.bound(), "");
  EXPECT_FALSE(efficiency(1234, c));
}

TEST(Ceilings, EfficiencyIsRpsOverTheLowestCeiling) {
  const auto c = compute_ceilings(
      {.connections = 2000, .mean_delay_ms = 100, .threads = 64, .cpu_rps = 50000});
  ASSERT_TRUE(efficiency(620, c));
  EXPECT_DOUBLE_EQ(*efficiency(620, c), 620.0 / 640.0);
  const auto async =
      compute_ceilings({.connections = 2000, .mean_delay_ms = 100, .cpu_rps = 50000});
  EXPECT_DOUBLE_EQ(*efficiency(19800, async), 19800.0 / 20000.0);
}

TEST(Ceilings, LittlesLawCountsTheConnectionsServed) {
  // 64 workers answering 100 ms requests: 640 rps x 0.1 s = 64 in flight.
  EXPECT_DOUBLE_EQ(served_connections(640, 100'000), 64.0);
}

TEST(WaitingThreads, BlockingModelHoldsAWorkerForDelayAndBlock) {
  ServerShape s{.kind = ServerKind::blocking, .workers = 64};
  EXPECT_EQ(waiting_threads(s, "/delay/{ms}"), 64.0);
  EXPECT_EQ(waiting_threads(s, "/block/{ms}"), 64.0);
  EXPECT_FALSE(waiting_threads(s, "/plaintext"));
}

TEST(WaitingThreads, AsyncModelHoldsNoThreadForATimerButThePoolForBlock) {
  ServerShape s{.kind = ServerKind::async, .loops = 2, .pool = 16};
  EXPECT_FALSE(waiting_threads(s, "/delay/{ms}"));
  EXPECT_EQ(waiting_threads(s, "/block/{ms}"), 16.0);
  s.offload = "pool";
  EXPECT_EQ(waiting_threads(s, "/block/1"), 16.0);
  s.offload = "inline";
  EXPECT_EQ(waiting_threads(s, "/block/1"), 2.0);  // the loops themselves block
  s.offload = "thread";
  EXPECT_FALSE(waiting_threads(s, "/block/1"));  // a new thread per call
  s.offload = "standard";
  s.wait_mode = "sleep";
  EXPECT_EQ(waiting_threads(s, "/delay/{ms}"), 2.0);  // the anti-pattern
  EXPECT_FALSE(waiting_threads({.kind = ServerKind::peer}, "/delay/{ms}"));
}

TEST(CpuBetween, InterpolatesBetweenSamples) {
  const std::vector<std::pair<double, double>> samples{{0.0, 1.0}, {1.0, 2.0}, {2.0, 4.0}};
  EXPECT_DOUBLE_EQ(cpu_between(samples, 0.5, 1.5), 1.5);  // 1.5 -> 3.0
  EXPECT_DOUBLE_EQ(cpu_between(samples, -1, 5), 3.0);     // clamped to the samples
  EXPECT_DOUBLE_EQ(cpu_between({}, 0, 1), 0.0);
}

}  // namespace
}  // namespace cm::price
