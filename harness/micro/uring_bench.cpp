// uring_bench.cpp -- io_uring's primitives, raw (liburing) and through the uring_coro model's own
// coroutine runtime (uring_coro/runtime/include/cm/uring/: the lazy Task, one awaitable per
// operation, Ring::run/spawn/post), on one ring run by one thread.
//
//  - BM_uring_nop_raw / BM_uring_timeout_zero_raw: liburing alone, one SQE submitted and its CQE
//    reaped per iteration (io_uring_submit_and_wait: one syscall), the floor under the runtime.
//  - BM_uring_timers_arm_cancel / _expire (pending:N): N IORING_OP_TIMEOUTs waiting an hour
//    ahead in the kernel (an hrtimer each, in the CPU's hrtimer tree), then one more submitted
//    among them with its IORING_OP_TIMEOUT_REMOVE (two CQEs reaped), or a zero-length one
//    submitted and reaped (timers.hpp). Raw liburing, as the model arms /delay.
//  - BM_uring_nop: `co_await Nop(ring)` in a Task run by Ring::run: the runtime's post-and-resume.
//  - BM_uring_timeout_zero: `co_await Timeout(ring, 0ns)`, a zero-length timer armed and fired;
//    BM_uring_timeout_deadline_now: the same as an absolute deadline (IORING_TIMEOUT_ABS) of
//    steady_clock::now(), the way the model arms /delay.
//  - BM_uring_spawn: Ring::spawn of a Task that finishes at once; BM_uring_await_child:
//    co_await of a child Task (a coroutine call, no suspension).
//  - BM_offload_uring_thread / _pool: the offload round trip, a new std::thread per call that
//    Ring::post()s the coroutine back (the ring's eventfd wakes it), joined on the loop, against a
//    pool whose workers Ring::post() their completions back onto the ring.
//
// Where io_uring is unavailable (old kernel, io_uring_disabled, seccomp) every benchmark here
// stops with SkipWithError("io_uring unavailable: ...") instead of failing; try it with
// CM_URING_SIMULATE_ENOSYS=1 build/bin/cm-micro --benchmark_filter=uring
//
// Try: build/bin/cm-micro --benchmark_filter='uring'

#include <benchmark/benchmark.h>
#include <liburing.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "timers.hpp"

#ifdef CM_MICRO_URING_RUNTIME
#include "cm/server.hpp"
#include "cm/uring/pool.hpp"
#include "cm/uring/ring.hpp"
#include "cm/uring/task.hpp"
#include "cm/work.hpp"
#endif

namespace {

/// A raw liburing ring, or the reason there is none.
class RawRing {
 public:
  /// With CM_URING_SIMULATE_ENOSYS=1 in the environment the kernel is not asked and the ring
  /// fails with ENOSYS, as on an old kernel (the runtime's Ring honours the same variable).
  explicit RawRing(unsigned entries = 64) {
    const char* simulate = std::getenv("CM_URING_SIMULATE_ENOSYS");
    error_ = simulate && std::string_view(simulate) == "1"
                 ? -ENOSYS
                 : io_uring_queue_init(entries, &ring_, 0);
  }
  ~RawRing() {
    if (error_ == 0) io_uring_queue_exit(&ring_);
  }
  RawRing(const RawRing&) = delete;
  RawRing& operator=(const RawRing&) = delete;

  /// False (and the benchmark skipped with the reason) if the kernel refused the ring.
  bool usable(benchmark::State& state) {
    if (error_ == 0) return true;
    skip_unavailable(state, -error_);
    return false;
  }
  io_uring* get() { return &ring_; }

  static void skip_unavailable(benchmark::State& state, int error) {
    const std::string why = "io_uring unavailable: " + std::string(std::strerror(error));
    state.SkipWithError(why.c_str());
  }

 private:
  io_uring ring_{};
  int error_ = 0;
};

/// Submits what is queued, waits for one CQE and returns its result.
int submit_and_reap(io_uring* ring) {
  io_uring_submit_and_wait(ring, 1);
  io_uring_cqe* cqe = nullptr;
  if (io_uring_peek_cqe(ring, &cqe) != 0 || cqe == nullptr) return -EIO;
  const int result = cqe->res;
  io_uring_cqe_seen(ring, cqe);
  return result;
}

void BM_uring_nop_raw(benchmark::State& state) {
  RawRing ring;
  if (!ring.usable(state)) return;
  for (auto _ : state) {
    io_uring_prep_nop(io_uring_get_sqe(ring.get()));
    if (submit_and_reap(ring.get()) != 0) {
      state.SkipWithError("IORING_OP_NOP failed");
      return;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_uring_timeout_zero_raw(benchmark::State& state) {
  RawRing ring;
  if (!ring.usable(state)) return;
  __kernel_timespec zero{};
  for (auto _ : state) {
    io_uring_prep_timeout(io_uring_get_sqe(ring.get()), &zero, 0, 0);
    if (submit_and_reap(ring.get()) != -ETIME) {
      state.SkipWithError("IORING_OP_TIMEOUT did not expire");
      return;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

constexpr const char* kUringTimers = "kernel: an hrtimer per IORING_OP_TIMEOUT";
constexpr std::uint64_t kMeasured = 1, kRemove = 2;

__kernel_timespec timespec_of(std::chrono::nanoseconds d) {
  return {static_cast<long long>(d.count() / 1'000'000'000),
          static_cast<long long>(d.count() % 1'000'000'000)};
}

/// N timeouts pending an hour ahead in `ring`, submitted in batches of its submission queue.
bool submit_pending(io_uring* ring, long n) {
  std::vector<__kernel_timespec> due(static_cast<std::size_t>(n));
  for (long k = 0; k < n; ++k) {
    io_uring_sqe* sqe = io_uring_get_sqe(ring);
    if (sqe == nullptr) {  // the queue is full: submit what it holds, then go on
      if (io_uring_submit(ring) < 0) return false;
      sqe = io_uring_get_sqe(ring);
    }
    due[k] = timespec_of(cm::micro::pending_due(k, n));
    io_uring_prep_timeout(sqe, &due[k], 0, 0);
    io_uring_sqe_set_data64(sqe, 0x1000 + static_cast<std::uint64_t>(k));
  }
  return io_uring_submit(ring) >= 0;  // the kernel has read every timespec once submitted
}

/// Reaps `count` CQEs; false if one of them is not what `expected(user_data, res)` accepts.
template <typename Expected>
bool reap(io_uring* ring, unsigned count, Expected expected) {
  for (unsigned k = 0; k < count; ++k) {
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(ring, &cqe) != 0 || cqe == nullptr) return false;
    const bool ok = expected(cqe->user_data, cqe->res);
    io_uring_cqe_seen(ring, cqe);
    if (!ok) return false;
  }
  return true;
}

void BM_uring_timers_arm_cancel(benchmark::State& state) {
  RawRing ring(4096);
  if (!ring.usable(state)) return;
  if (!submit_pending(ring.get(), state.range(0))) {
    state.SkipWithError("could not submit the pending timeouts");
    return;
  }
  std::uint64_t i = 0;
  for (auto _ : state) {
    __kernel_timespec due = timespec_of(cm::micro::probe_due(i++));
    io_uring_sqe* sqe = io_uring_get_sqe(ring.get());
    io_uring_prep_timeout(sqe, &due, 0, 0);
    io_uring_sqe_set_data64(sqe, kMeasured);
    sqe = io_uring_get_sqe(ring.get());
    io_uring_prep_timeout_remove(sqe, kMeasured, 0);
    io_uring_sqe_set_data64(sqe, kRemove);
    io_uring_submit_and_wait(ring.get(), 2);
    const bool ok = reap(ring.get(), 2, [](std::uint64_t data, int res) {
      return (data == kMeasured && res == -ECANCELED) || (data == kRemove && res == 0);
    });
    if (!ok) {
      state.SkipWithError("a timeout was not removed");
      return;
    }
  }
  state.SetLabel(kUringTimers);
  state.SetItemsProcessed(state.iterations());
}

void BM_uring_timers_expire(benchmark::State& state) {
  RawRing ring(4096);
  if (!ring.usable(state)) return;
  if (!submit_pending(ring.get(), state.range(0))) {
    state.SkipWithError("could not submit the pending timeouts");
    return;
  }
  __kernel_timespec zero{};
  for (auto _ : state) {
    io_uring_sqe* sqe = io_uring_get_sqe(ring.get());
    io_uring_prep_timeout(sqe, &zero, 0, 0);
    io_uring_sqe_set_data64(sqe, kMeasured);
    io_uring_submit_and_wait(ring.get(), 1);
    if (!reap(ring.get(), 1, [](std::uint64_t data, int res) {
          return data == kMeasured && res == -ETIME;
        })) {
      state.SkipWithError("a zero-length timeout did not expire");
      return;
    }
  }
  state.SetLabel(kUringTimers);
  state.SetItemsProcessed(state.iterations());
}

#ifdef CM_MICRO_URING_RUNTIME
namespace uring = cm::uring;

/// The model's ring (Ring's default size), or nothing and the benchmark skipped.
std::unique_ptr<uring::Ring> open_ring(benchmark::State& state) {
  try {
    return std::make_unique<uring::Ring>();
  } catch (const std::system_error& error) {
    if (uring::means_unavailable(error)) {
      RawRing::skip_unavailable(state, error.code().value());
    } else {
      state.SkipWithError(error.what());
    }
    return nullptr;
  }
}

/// Runs `body(ring, state)` as the ring's one task until it returns.
template <typename Body>
void run_on_ring(benchmark::State& state, Body body) {
  std::unique_ptr<uring::Ring> ring = open_ring(state);
  if (!ring) return;
  ring->run(body(*ring, state));
}

uring::Task<void> nops(uring::Ring& ring, benchmark::State& state) {
  for (auto _ : state) {
    if (co_await uring::Nop(ring) != 0) {
      state.SkipWithError("IORING_OP_NOP failed");
      co_return;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_uring_nop(benchmark::State& state) {
  run_on_ring(state, nops);
}

uring::Task<void> zero_timeouts(uring::Ring& ring, benchmark::State& state) {
  for (auto _ : state) {
    if (co_await uring::Timeout(ring, std::chrono::nanoseconds(0)) != -ETIME) {
      state.SkipWithError("a zero Timeout did not expire");
      co_return;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_uring_timeout_zero(benchmark::State& state) {
  run_on_ring(state, zero_timeouts);
}

/// As the model arms /delay since it moved to absolute deadlines: IORING_TIMEOUT_ABS at
/// steady_clock::now(), a deadline already due when the kernel sees it.
uring::Task<void> due_deadlines(uring::Ring& ring, benchmark::State& state) {
  for (auto _ : state) {
    if (co_await uring::Timeout(ring, std::chrono::steady_clock::now()) != -ETIME) {
      state.SkipWithError("a due Timeout deadline did not expire");
      co_return;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_uring_timeout_deadline_now(benchmark::State& state) {
  run_on_ring(state, due_deadlines);
}

uring::Task<void> finish_at_once(long& finished) {
  ++finished;
  co_return;
}

/// Ring::spawn starts the task at once on the calling thread (there is no post, unlike co_spawn);
/// a task that does not suspend has ended when spawn() returns.
void BM_uring_spawn(benchmark::State& state) {
  std::unique_ptr<uring::Ring> ring = open_ring(state);
  if (!ring) return;
  long finished = 0;
  for (auto _ : state)
    ring->spawn(finish_at_once(finished));
  if (finished != state.iterations() || ring->spawned() != 0) {
    state.SkipWithError("a spawned task did not finish");
  }
  state.SetItemsProcessed(state.iterations());
}

uring::Task<void> await_children(uring::Ring&, benchmark::State& state) {
  long finished = 0;
  for (auto _ : state)
    co_await finish_at_once(finished);
  if (finished != state.iterations()) state.SkipWithError("a child task did not finish");
  state.SetItemsProcessed(state.iterations());
}

void BM_uring_await_child(benchmark::State& state) {
  run_on_ring(state, await_children);
}

/// The model's --offload thread: cm::CallThreads, a std::thread per call whose resume hook
/// Ring::post()s the coroutine back (the ring's eventfd wakes run_once); a reaper joins it.
struct ViaCallThread {
  uring::Ring& ring;
  cm::CallThreads& threads;
  cm::Sleeper& sleeper;
  cm::Plan& plan;
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> waiter) {
    return threads.start(plan, sleeper, {}, [this, waiter](cm::Outcome) { ring.post(waiter); });
  }
  void await_resume() const noexcept {}
};

void BM_offload_uring_thread(benchmark::State& state) {
  cm::CallThreads threads;
  cm::Sleeper sleeper;
  cm::Plan plan = cm::Now{};
  run_on_ring(state, [&](uring::Ring& ring, benchmark::State& s) -> uring::Task<void> {
    for (auto _ : s)
      co_await ViaCallThread{ring, threads, sleeper, plan};
    s.SetItemsProcessed(s.iterations());
  });
  threads.join_all();
}

/// The model's pool: uring::Pool of ServerOptions::blocking_threads workers, each job posting its
/// coroutine back onto the ring it came from.
void BM_offload_uring_pool(benchmark::State& state) {
  const cm::ServerOptions options;
  uring::Pool pool(options.blocking_threads);
  run_on_ring(state, [&pool](uring::Ring& ring, benchmark::State& s) -> uring::Task<void> {
    std::atomic<long> ran{0};
    for (auto _ : s)
      co_await pool.run(ring, [&ran] { ran.fetch_add(1); });
    if (ran != s.iterations()) s.SkipWithError("an offloaded call did not run");
    s.SetItemsProcessed(s.iterations());
  });
  pool.stop();
}
#endif  // CM_MICRO_URING_RUNTIME

}  // namespace

BENCHMARK(BM_uring_nop_raw);
BENCHMARK(BM_uring_timeout_zero_raw);
BENCHMARK(BM_uring_timers_arm_cancel)->Apply(cm::micro::pending_sizes);
BENCHMARK(BM_uring_timers_expire)->Apply(cm::micro::pending_sizes);
#ifdef CM_MICRO_URING_RUNTIME
BENCHMARK(BM_uring_nop);
BENCHMARK(BM_uring_timeout_zero);
BENCHMARK(BM_uring_timeout_deadline_now);
BENCHMARK(BM_uring_spawn);
#if defined(__SANITIZE_ADDRESS__) || !defined(__OPTIMIZE__)
// NOTE: Task relies on symmetric transfer (final_suspend returns the awaiter's handle) being a
// tail call. g++ makes it one in an optimised build, but not at -O0 or under AddressSanitizer:
// there every child that completes without suspending leaves a frame on the stack until the
// loop's task ends, and millions of iterations overflow it. Those builds run a bounded count.
BENCHMARK(BM_uring_await_child)->Iterations(1000);
#else
BENCHMARK(BM_uring_await_child);
#endif
BENCHMARK(BM_offload_uring_thread)->UseRealTime();
BENCHMARK(BM_offload_uring_pool)->UseRealTime();
#endif
