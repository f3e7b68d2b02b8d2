// The timer wheel (cm/timer_wheel.hpp): never early, at most a tick late, at every slot boundary,
// over the wrap of a turn, and with a clock that jumps ahead and back.

#include "cm/timer_wheel.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <random>
#include <vector>

namespace {

using cm::TimerWheel;
using Clock = TimerWheel::Clock;
using std::chrono::nanoseconds;
constexpr nanoseconds ns{1};
constexpr auto tick = std::chrono::duration_cast<nanoseconds>(TimerWheel::tick);

/// A time on a tick boundary of the wheel (the epoch is one), far from the clock's start.
Clock::time_point boundary(std::int64_t k) { return Clock::time_point(1'000'000 * tick + k * tick); }

/// The first tick boundary at or after `t`: when a timer due at `t` must have fired.
Clock::time_point boundary_at_or_after(Clock::time_point t) {
  const auto since = t - boundary(0);
  const auto k = (since.count() + tick.count() - 1) / tick.count();
  return boundary(k);
}

/// A timer that records the clock of the advance() that fired it.
struct Recorded {
  TimerWheel::Timer timer;
  Clock::time_point due;
  std::optional<Clock::time_point> fired_at;
  int fired = 0;
};

void arm(TimerWheel& wheel, Recorded& r, Clock::time_point due, const Clock::time_point& clock) {
  r.due = due;
  wheel.arm(r.timer, due, [&r, &clock] {
    r.fired_at = clock;
    ++r.fired;
  });
}

TEST(TimerWheel, NeverEarlyAndAtMostATickLateAtEverySlotBoundary) {
  // Every boundary of two whole turns (the wrap included), each with three timers: due a
  // nanosecond before it, on it, and a nanosecond after it. The clock is read at each moment
  // that matters around them: before, at and after each due time, and at the next boundary.
  // Every other boundary per wheel, so that the clock never passes a due time before its arming.
  for (const std::int64_t first : {1, 2}) {
    TimerWheel wheel(boundary(0));
    for (std::int64_t k = first; k <= 2 * static_cast<std::int64_t>(TimerWheel::slots) + 1; k += 2) {
      Clock::time_point clock = boundary(k) - 2 * ns;
      Recorded timers[3];
      for (int i = 0; i < 3; ++i)
        arm(wheel, timers[i], boundary(k) + (i - 1) * ns, clock);
      for (const nanoseconds at : {-2 * ns, -ns, 0 * ns, ns, tick - ns, tick}) {
        clock = boundary(k) + at;
        wheel.advance(clock);
        for (const Recorded& r : timers) {
          const bool must = clock >= boundary_at_or_after(r.due);
          ASSERT_EQ(r.fired, must ? 1 : 0) << "boundary " << k << ", due "
                                            << (r.due - boundary(k)).count() << " ns after it";
          if (r.fired) {
            ASSERT_GE(*r.fired_at, r.due) << "early at boundary " << k;
          }
        }
      }
      ASSERT_EQ(wheel.size(), 0u);
    }
  }
}

TEST(TimerWheel, NeverEarlyWithAClockThatJumpsAheadAndBack) {
  std::mt19937_64 random(7);
  TimerWheel wheel(boundary(0));
  Clock::time_point clock = boundary(0);
  const auto span = 5 * static_cast<std::int64_t>(TimerWheel::slots) * tick;  // five turns
  std::vector<std::unique_ptr<Recorded>> timers;
  for (int i = 0; i < 20'000; ++i) {
    timers.push_back(std::make_unique<Recorded>());
    const auto due = clock + nanoseconds(std::uniform_int_distribution<std::int64_t>(0, span.count())(random));
    arm(wheel, *timers.back(), due, clock);
  }
  // Jumps: a tick's fraction, a few ticks, more than a whole turn, and back by up to a turn.
  std::uniform_int_distribution<int> kind(0, 3);
  for (int step = 0; step < 2'000 && wheel.size() > 0; ++step) {
    const int k = kind(random);
    const std::int64_t amount = k == 0   ? tick.count() / 3
                                : k == 1 ? 7 * tick.count()
                                : k == 2 ? (static_cast<std::int64_t>(TimerWheel::slots) + 13) * tick.count()
                                         : -static_cast<std::int64_t>(TimerWheel::slots) * tick.count();
    clock += nanoseconds(amount);
    if (k == 3) {  // armed while the clock is behind: due by that clock, and still never early
      timers.push_back(std::make_unique<Recorded>());
      arm(wheel, *timers.back(), clock + 3 * tick, clock);
    }
    wheel.advance(clock);
    for (const auto& r : timers) {
      if (r->fired) {
        ASSERT_GE(*r->fired_at, r->due) << "fired early at step " << step;
      } else {
        ASSERT_TRUE(r->timer.armed());
      }
    }
  }
  clock += span;  // then the clock passes every due time
  wheel.advance(clock);
  for (const auto& r : timers)
    ASSERT_EQ(r->fired, 1);
  EXPECT_EQ(wheel.size(), 0u);
}

TEST(TimerWheel, ALoopThatSleepsUntilNextWakeFiresEachTimerWithinATick) {
  // The loop of a model: set its one timer for next_wake(), wake then, advance(); repeat. Dues
  // within a turn, at the wrap, and many turns ahead (passed over until due).
  TimerWheel wheel(boundary(0));
  Clock::time_point clock = boundary(0);
  std::vector<std::unique_ptr<Recorded>> timers;
  for (const auto after : {tick / 3, tick, 10 * tick + ns, 4095 * tick, 4097 * tick - ns,
                           std::chrono::duration_cast<nanoseconds>(std::chrono::seconds(60))}) {
    timers.push_back(std::make_unique<Recorded>());
    arm(wheel, *timers.back(), clock + after, clock);
  }
  int wakes = 0;
  while (const auto wake = wheel.next_wake()) {
    ASSERT_GT(*wake, clock);
    clock = *wake;
    wheel.advance(clock);
    ASSERT_LT(++wakes, 1'000);
  }
  for (const auto& r : timers) {
    ASSERT_EQ(r->fired, 1);
    EXPECT_GE(*r->fired_at, r->due);
    EXPECT_LT(*r->fired_at - r->due, tick);
  }
  EXPECT_LT(wakes, 6 + 60);  // the 60 s one is passed over about once a turn (1.024 s)
}

TEST(TimerWheel, WaitsOfAMinuteDoNotWakeTheLoopEveryTickOfTheTurnsBefore) {
  // 4,096 requests wait a minute, one armed each tick (a turn's worth): each slot holds one.
  // Left in their slots they would wake the loop at every tick of the 58 turns before they are
  // due; in the far list the loop wakes once to move them, then about once or twice for each.
  TimerWheel wheel(boundary(0));
  Clock::time_point clock = boundary(0);
  std::vector<std::unique_ptr<Recorded>> timers;
  const auto minute = std::chrono::duration_cast<nanoseconds>(std::chrono::seconds(60));
  for (std::int64_t k = 0; k < static_cast<std::int64_t>(TimerWheel::slots); ++k) {
    timers.push_back(std::make_unique<Recorded>());
    arm(wheel, *timers.back(), boundary(k) + minute, clock);
  }
  const auto first_wake = wheel.next_wake();
  ASSERT_TRUE(first_wake);
  EXPECT_GT(*first_wake, clock + minute - 2 * TimerWheel::slots * tick)
      << "the loop is woken long before any of them can be due";
  int wakes = 0;
  while (const auto wake = wheel.next_wake()) {
    clock = *wake;
    wheel.advance(clock);
    ASSERT_LT(++wakes, 4 * static_cast<int>(TimerWheel::slots));
  }
  for (const auto& r : timers) {
    ASSERT_EQ(r->fired, 1);
    ASSERT_GE(*r->fired_at, r->due);
    ASSERT_LT(*r->fired_at - r->due, tick);
  }
  EXPECT_LE(wakes, 2 * static_cast<int>(TimerWheel::slots) + 2);  // not 58 turns x 4,096 ticks
}

TEST(TimerWheel, ArmSaysWhenTheLoopsTimerMustBeSetAgain) {
  TimerWheel wheel(boundary(0));
  TimerWheel::Timer a, b, c;
  EXPECT_FALSE(wheel.next_wake());
  EXPECT_TRUE(wheel.arm(a, boundary(100), [] {}));  // nothing was scheduled
  EXPECT_EQ(wheel.next_wake(), boundary(100));
  EXPECT_FALSE(wheel.arm(b, boundary(200), [] {}));  // later than the wake: nothing to do
  EXPECT_TRUE(wheel.arm(c, boundary(50), [] {}));    // earlier: set it again
  EXPECT_EQ(wheel.next_wake(), boundary(50));
  c.cancel();
  EXPECT_EQ(wheel.next_wake(), boundary(100));
  EXPECT_EQ(wheel.size(), 2u);
}

TEST(TimerWheel, CancelledOrDestroyedTimersNeverFire) {
  TimerWheel wheel(boundary(0));
  int fired = 0;
  TimerWheel::Timer kept, cancelled;
  wheel.arm(kept, boundary(3), [&] { ++fired; });
  wheel.arm(cancelled, boundary(3), [&] { fired += 100; });
  {
    TimerWheel::Timer gone;
    wheel.arm(gone, boundary(3), [&] { fired += 1000; });
  }
  cancelled.cancel();
  EXPECT_FALSE(cancelled.armed());
  EXPECT_EQ(wheel.size(), 1u);
  EXPECT_EQ(wheel.advance(boundary(3)), 1u);
  EXPECT_EQ(fired, 1);
}

TEST(TimerWheel, ACallbackMayCancelAnotherDueTimerOrArmItselfAgain) {
  TimerWheel wheel(boundary(0));
  TimerWheel::Timer first, second;
  int firsts = 0, seconds = 0;
  Clock::time_point clock = boundary(0);
  std::function<void()> again = [&] {
    ++firsts;
    second.cancel();  // due in the same advance(), not fired yet: it never is
    if (firsts < 3) wheel.arm(first, clock + tick, again);
  };
  wheel.arm(first, boundary(2), again);
  wheel.arm(second, boundary(2), [&] { ++seconds; });
  for (clock = boundary(2); wheel.size() > 0; clock += tick)
    wheel.advance(clock);
  EXPECT_EQ(firsts, 3);
  EXPECT_EQ(seconds, 0);
}

TEST(TimerWheel, ExpireAllFiresEveryTimerAtAStop) {
  TimerWheel wheel(boundary(0));
  int fired = 0;
  TimerWheel::Timer soon, late;
  wheel.arm(soon, boundary(1), [&] { ++fired; });
  wheel.arm(late, boundary(0) + std::chrono::hours(1), [&] { ++fired; });
  EXPECT_EQ(wheel.expire_all(), 2u);
  EXPECT_EQ(fired, 2);
  EXPECT_EQ(wheel.size(), 0u);
  EXPECT_FALSE(wheel.next_wake());
}

TEST(TimerWheel, ADueTimeAlreadyPastFiresAtTheNextAdvance) {
  TimerWheel wheel(boundary(10));
  wheel.advance(boundary(10) + tick / 2);
  int fired = 0;
  TimerWheel::Timer t;
  wheel.arm(t, boundary(5), [&] { ++fired; });  // before what the wheel has visited
  EXPECT_EQ(wheel.next_wake(), boundary(11));
  EXPECT_EQ(wheel.advance(boundary(10) + tick / 2 + ns), 0u);  // no boundary passed yet
  EXPECT_EQ(wheel.advance(boundary(11)), 1u);
  EXPECT_EQ(fired, 1);
}

}  // namespace
