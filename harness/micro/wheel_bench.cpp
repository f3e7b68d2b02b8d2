// wheel_bench.cpp -- the shared timer wheel (cm::TimerWheel, `--timers wheel`) in the same two
// benchmarks as each model's own timer structure (timers.hpp), with 1,000, 10,000 and 100,000
// timers pending an hour ahead:
//  - BM_wheel_timers_arm_cancel: arm a timer among them, cancel it (two list links: O(1)).
//  - BM_wheel_timers_expire: arm a timer due at the next tick, advance() the clock to it and fire
//    it. The clock is the benchmark's own, a tick further at each iteration (the wheel is sans
//    I/O): what is measured is the wheel, not a loop's wait. A tick's slot also holds the
//    pending timers that hash to it from later turns (N / 4,096 of them), passed over by a check
//    of their due time: the price of a hashed wheel with far timers.
//
// Try: build/bin/cm-micro --benchmark_filter=BM_wheel_

#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "cm/timer_wheel.hpp"
#include "timers.hpp"

namespace {

using cm::TimerWheel;
constexpr const char* kWheelTimers = "cm::TimerWheel (hashed, 4,096 slots of 250 us)";

/// The wheel's clock at the start: a tick boundary, so each iteration's tick is a whole one.
const TimerWheel::Clock::time_point kStart{std::chrono::hours(1000)};

/// `n` timers pending an hour ahead of kStart (timers.hpp), in `wheel`.
std::unique_ptr<TimerWheel::Timer[]> arm_pending(TimerWheel& wheel, long n) {
  auto pending = std::make_unique<TimerWheel::Timer[]>(static_cast<std::size_t>(n));
  for (long k = 0; k < n; ++k)
    wheel.arm(pending[static_cast<std::size_t>(k)], kStart + cm::micro::pending_due(k, n), [] {});
  return pending;
}

void BM_wheel_timers_arm_cancel(benchmark::State& state) {
  TimerWheel wheel(kStart);
  const auto pending = arm_pending(wheel, state.range(0));
  TimerWheel::Timer timer;
  std::uint64_t i = 0;
  for (auto _ : state) {
    wheel.arm(timer, kStart + cm::micro::probe_due(i++), [] {});
    timer.cancel();
  }
  if (wheel.size() != static_cast<std::size_t>(state.range(0)))
    state.SkipWithError("a cancelled timer is still in the wheel");
  state.SetLabel(kWheelTimers);
  state.SetItemsProcessed(state.iterations());
}

void BM_wheel_timers_expire(benchmark::State& state) {
  TimerWheel wheel(kStart);
  const auto pending = arm_pending(wheel, state.range(0));
  TimerWheel::Timer timer;
  long calls = 0;
  auto clock = kStart;
  for (auto _ : state) {
    clock += TimerWheel::tick;
    wheel.arm(timer, clock, [&calls] { ++calls; });
    wheel.advance(clock);
  }
  if (calls != state.iterations()) state.SkipWithError("a due timer did not fire");
  state.SetLabel(kWheelTimers);
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

BENCHMARK(BM_wheel_timers_arm_cancel)->Apply(cm::micro::pending_sizes);
BENCHMARK(BM_wheel_timers_expire)->Apply(cm::micro::pending_sizes);
