// blocking_bench.cpp -- where the blocking model keeps a waiting request: a worker thread asleep
// in cm::Sleeper (a condition variable's timed wait: a futex with a timeout, one hrtimer in the
// kernel per sleeping thread).
//
//  - BM_blocking_timers_expire (pending:N): N threads asleep an hour ahead in cm::Sleeper, as N
//    requests wait in /delay on N workers; then the benchmark's own thread sleeps 1 µs through a
//    Sleeper of its own, as one more worker would: the futex armed, expired, and the thread
//    woken and run again (timers.hpp). Its real time is mostly the sleep and the kernel's timer
//    slack (50 µs for an ordinary thread); its CPU time is what the wait costs.
//    N is 1,000 and 10,000 only: 100,000 threads are more than this machine lets one user start
//    (ulimit -u), which is the blocking model's lesson, not a benchmark's.
//
// Try: build/bin/cm-micro --benchmark_filter=BM_blocking_

#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "cm/work.hpp"
#include "timers.hpp"

namespace {

/// N threads asleep in one Sleeper until it is interrupted; small stacks, so 10,000 fit.
class SleepingThreads {
 public:
  explicit SleepingThreads(long n) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (long k = 0; k < n; ++k) {
      pthread_t t;
      const int rc = pthread_create(&t, &attr, &SleepingThreads::sleep, this);
      if (rc != 0) {
        error_ = "could not start thread " + std::to_string(k + 1) + ": " + std::strerror(rc);
        break;
      }
      threads_.push_back(t);
    }
    pthread_attr_destroy(&attr);
    // Measure only once every thread is about to sleep, not while the kernel still starts them.
    while (asleep_.load(std::memory_order_acquire) < static_cast<long>(threads_.size()))
      sched_yield();
  }
  ~SleepingThreads() {
    sleeper_.interrupt();
    for (pthread_t t : threads_)
      pthread_join(t, nullptr);
  }
  SleepingThreads(const SleepingThreads&) = delete;
  SleepingThreads& operator=(const SleepingThreads&) = delete;

  const std::string& error() const { return error_; }

 private:
  static void* sleep(void* arg) {
    auto* self = static_cast<SleepingThreads*>(arg);
    self->asleep_.fetch_add(1, std::memory_order_release);
    self->sleeper_.sleep_for(cm::micro::kFar);
    return nullptr;
  }

  cm::Sleeper sleeper_;
  std::atomic<long> asleep_{0};
  std::vector<pthread_t> threads_;
  std::string error_;
};

void BM_blocking_timers_expire(benchmark::State& state) {
  SleepingThreads pending(state.range(0));
  if (!pending.error().empty()) {
    state.SkipWithError(pending.error().c_str());
    return;
  }
  cm::Sleeper own;
  for (auto _ : state) {
    if (!own.sleep_for(std::chrono::microseconds(1))) state.SkipWithError("the sleep was interrupted");
  }
  state.SetLabel("a thread each: kernel hrtimer of a timed futex wait");
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

BENCHMARK(BM_blocking_timers_expire)->Arg(1'000)->Arg(10'000)->ArgName("pending");
