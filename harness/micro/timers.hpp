// timers.hpp -- what every model's timer benchmarks share: how many timers wait while one is
// measured, and when they are due (issue 24: where a waiting request lives, and what it costs).
//
// Each BM_*_timers_* benchmark holds N timers pending -- as N requests waiting in /delay -- in the
// model's own structure, then measures one more timer against them:
//   arm_cancel: arm a timer due among the pending ones, then cancel it (a request that ends early);
//   expire:     arm a timer already due and run the loop until its handler ran (a wait that ends).
// N is 1,000, 10,000 and 100,000 (the benchmark's argument).
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>

namespace cm::micro {

/// Pending timers while a timer benchmark measures: as many requests waiting in /delay.
inline constexpr long kPendingSizes[] = {1'000, 10'000, 100'000};

/// How far ahead the pending timers are: none fires during a benchmark.
inline constexpr std::chrono::nanoseconds kFar = std::chrono::hours(1);

/// The k-th of n pending timers is due kFar + k/n of kFar from now: spread over an hour, so the
/// measured one lands among them, not at either end of the structure.
inline std::chrono::nanoseconds pending_due(long k, long n) {
  return kFar + kFar * k / n;
}

/// The due time of the measured timer at iteration i: it walks through the same hour by a
/// golden-ratio step, so it lands at every depth of the structure in turn.
inline std::chrono::nanoseconds probe_due(std::uint64_t i) {
  const double fraction = static_cast<double>((i * 0x9E3779B97F4A7C15ull) >> 11) * 0x1p-53;
  return kFar + std::chrono::nanoseconds(static_cast<std::int64_t>(fraction * kFar.count()));
}

/// The benchmark's sizes, and the unit its table shows.
inline void pending_sizes(benchmark::internal::Benchmark* b) {
  for (long n : kPendingSizes)
    b->Arg(n);
  b->ArgName("pending");
}

}  // namespace cm::micro
