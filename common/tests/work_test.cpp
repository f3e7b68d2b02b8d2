// work_test.cpp -- Sleeper, Admission and burn_cpu as behaviour (no speed is asserted).

#include "cm/work.hpp"

#include <gtest/gtest.h>
#include <time.h>

#include <condition_variable>
#include <mutex>
#include <optional>
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

TEST(Admission, RefusesBeyondCapacityAndTicketsGiveTheirSlotBack) {
  Admission a(2);
  auto first = a.enter();
  auto second = a.enter();
  EXPECT_TRUE(first);
  EXPECT_TRUE(second);
  EXPECT_FALSE(a.enter()) << "capacity 2 is taken";
  first.reset();
  EXPECT_EQ(a.in_use(), 1u);
  {
    auto third = a.enter();
    EXPECT_TRUE(third);
    Admission::Ticket moved = std::move(third);
    EXPECT_EQ(a.in_use(), 2u) << "a moved ticket holds one slot";
  }
  EXPECT_EQ(a.in_use(), 1u);
}

TEST(Venue, EachStepRunsWhereTheOptionsSay) {
  const Plan now = Now{}, wait = Wait{5ms, {}}, block = Block{5ms, {}}, compute = Compute{5us, {}};
  const Plan interim = Now{continue_reply()};
  using enum Venue;
  EXPECT_EQ(venue(wait, WaitMode::timer, Offload::standard), timer);
  EXPECT_EQ(venue(wait, WaitMode::sleep, Offload::standard), loop);
  EXPECT_EQ(venue(wait, WaitMode::timer, Offload::thread), timer) << "a Wait is never offloaded";
  EXPECT_EQ(venue(block, WaitMode::timer, Offload::standard), pool);
  EXPECT_EQ(venue(block, WaitMode::timer, Offload::inline_), loop);
  EXPECT_EQ(venue(block, WaitMode::timer, Offload::thread), thread);
  EXPECT_EQ(venue(compute, WaitMode::timer, Offload::standard), loop);
  EXPECT_EQ(venue(compute, WaitMode::timer, Offload::pool), pool);
  EXPECT_EQ(venue(now, WaitMode::timer, Offload::standard), loop);
  EXPECT_EQ(venue(now, WaitMode::timer, Offload::pool), pool);
  EXPECT_EQ(venue(now, WaitMode::timer, Offload::thread), thread);
  EXPECT_EQ(venue(interim, WaitMode::timer, Offload::pool), loop) << "100 Continue: nothing to do";
}

TEST(ReplyFor, ARefusedOffloadIs503WithRetryAfter) {
  Plan block = Block{5ms, Reply{}};
  reply_of(block).body = "5";
  EXPECT_EQ(reply_for(block, Outcome::done).body, "5");
  const Reply& refused = reply_for(block, Outcome::refused);
  EXPECT_EQ(refused.status, 503);
  ASSERT_EQ(refused.headers.size(), 1u);
  EXPECT_EQ(refused.headers[0].first, "Retry-After");
}

TEST(CallThreads, RunTheStepElsewhereThenResumeThroughTheHook) {
  CallThreads threads;
  Sleeper sleeper;
  Plan plan = Compute{1ms, {}};
  std::mutex m;
  std::condition_variable cv;
  std::optional<Outcome> outcome;
  std::thread::id ran_on;
  ASSERT_TRUE(threads.start(plan, sleeper, {}, [&](Outcome o) {
    std::lock_guard lock(m);
    outcome = o;
    ran_on = std::this_thread::get_id();
    cv.notify_one();
  }));
  {
    std::unique_lock lock(m);
    ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return outcome.has_value(); }));
  }
  EXPECT_EQ(*outcome, Outcome::done);
  EXPECT_NE(ran_on, std::this_thread::get_id());
  threads.join_all();
  EXPECT_EQ(threads.running(), 0u) << "the reaper joined it; no loop waited for it";
}

TEST(CallThreads, AStoppedSleepEndsStopped) {
  CallThreads threads;
  Sleeper sleeper;
  sleeper.interrupt();
  Plan plan = Block{1h, {}};
  std::atomic<int> outcome{-1};
  ASSERT_TRUE(threads.start(plan, sleeper, {}, [&](Outcome o) { outcome = static_cast<int>(o); }));
  threads.join_all();
  EXPECT_EQ(outcome.load(), static_cast<int>(Outcome::stopped));
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

TEST(Perform, WaitAndBlockSleepComputeBurnsNowReturns) {
  Sleeper s;
  EXPECT_EQ(perform(Now{}, s), Outcome::done);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(perform(Block{10ms, {}}, s), Outcome::done);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 10ms);
  start = std::chrono::steady_clock::now();
  EXPECT_EQ(perform(Wait{10ms, {}}, s), Outcome::done);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 10ms);
  s.interrupt();
  EXPECT_EQ(perform(Block{1h, {}}, s), Outcome::stopped);
  EXPECT_EQ(perform(Wait{1h, {}}, s), Outcome::stopped);
}

TEST(UnhandledDeathTest, AVenueNoCaseTookAbortsNamingIt) {
  EXPECT_DEATH(unhandled(static_cast<Venue>(99)), "no case for Venue 99");
}

}  // namespace
}  // namespace cm
