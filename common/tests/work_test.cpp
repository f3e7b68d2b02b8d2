// work_test.cpp -- Sleeper, Admission and burn_cpu as behaviour (no speed is asserted).

#include "cm/work.hpp"

#include <gtest/gtest.h>
#include <time.h>

#include <thread>

namespace cm {
namespace {

using namespace std::chrono_literals;

TEST(Sleeper, NeverWakesEarly) {
  Sleeper s;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(s.sleep_for(30ms));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 30ms);
}

TEST(Sleeper, InterruptWakesCurrentAndFutureSleepers) {
  Sleeper s;
  bool result = true;
  std::thread t([&] { result = s.sleep_for(1h); });
  std::this_thread::sleep_for(20ms);
  s.interrupt();
  t.join();  // would hang (and the test time out) if interrupt() did not wake it
  EXPECT_FALSE(result);
  EXPECT_FALSE(s.sleep_for(1h));
}

TEST(Admission, RefusesBeyondCapacity) {
  Admission a(2);
  EXPECT_TRUE(a.try_acquire());
  EXPECT_TRUE(a.try_acquire());
  EXPECT_FALSE(a.try_acquire());
  a.release();
  EXPECT_TRUE(a.try_acquire());
  EXPECT_EQ(a.in_use(), 2u);
}

TEST(BurnCpu, SpendsAtLeastThatMuchThreadCpuTime) {
  timespec before{}, after{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &before);
  burn_cpu(5ms);
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &after);
  const auto spent = std::chrono::seconds(after.tv_sec - before.tv_sec) +
                     std::chrono::nanoseconds(after.tv_nsec - before.tv_nsec);
  EXPECT_GE(spent, 5ms);
}

TEST(Perform, BlockSleepsComputeBurnsNowReturns) {
  Sleeper s;
  EXPECT_TRUE(perform(Now{}, s));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(perform(Block{10ms, {}}, s));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 10ms);
  s.interrupt();
  EXPECT_FALSE(perform(Block{1h, {}}, s));
}

}  // namespace
}  // namespace cm
