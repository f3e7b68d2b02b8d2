// work.cpp -- Block and Compute, as a thread performs them.

#include "cm/work.hpp"

#include <time.h>

namespace cm {
namespace {
std::chrono::nanoseconds thread_cpu_time() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}
}  // namespace

void burn_cpu(std::chrono::microseconds duration) noexcept {
  const auto end = thread_cpu_time() + duration;
  volatile std::uint64_t sink = 0;
  while (thread_cpu_time() < end) {
    for (int i = 0; i < 64; ++i) sink = sink * 6364136223846793005ULL + 1442695040888963407ULL;
  }
}

bool Sleeper::sleep_for(std::chrono::steady_clock::duration duration) {
  const auto deadline = std::chrono::steady_clock::now() + duration;
  std::unique_lock lock(mutex_);
  // wait_until with a predicate loops over spurious wake-ups: it never returns early unless
  // interrupted, so a sleeping request is never answered before its time.
  return !cv_.wait_until(lock, deadline, [this] { return interrupted(); });
}

void Sleeper::interrupt() {
  {
    std::lock_guard lock(mutex_);
    interrupted_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

bool perform(const Plan& plan, Sleeper& sleeper) {
  if (const auto* block = std::get_if<Block>(&plan)) return sleeper.sleep_for(block->duration);
  if (const auto* compute = std::get_if<Compute>(&plan)) burn_cpu(compute->duration);
  return true;
}

}  // namespace cm
