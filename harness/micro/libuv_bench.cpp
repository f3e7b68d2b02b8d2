// libuv_bench.cpp -- libuv's primitives as the libuv_callbacks model uses them: one uv_loop_t run
// by one thread, callbacks only.
//
// Every loop here holds one uv_async_t besides the handle under test, as a model's loop holds its
// stop handle (and its listener): the loop then watches an fd, so a round goes through
// epoll_wait() as it does in a server, instead of libuv's shortcut for a loop without fds.
//
//  - BM_uv_async_send: uv_async_send() on the loop's own thread, then one uv_run(UV_RUN_ONCE)
//    that wakes on the eventfd and calls the async callback: libuv's "post and resume".
//  - BM_uv_idle_round: one loop round (uv_run(UV_RUN_NOWAIT)) calling one idle callback.
//  - BM_uv_timer_zero: arm a zero-length uv_timer_t and run the round that fires it.
//  - BM_uv_timers_arm_cancel / _expire (pending:N): N uv_timer_t waiting an hour ahead in the
//    loop's timer heap (a binary min-heap of nodes inside the handles), then one more started
//    among them and stopped, or started already due and fired by uv_run(UV_RUN_NOWAIT)
//    (timers.hpp). libuv's timers count in milliseconds.
//  - BM_uv_callback_chain/N: allocate a context with its own handle, run N callbacks one loop
//    round apart, close the handle and free the context in its close callback: libuv's
//    counterpart of spawning and finishing a coroutine.
//  - BM_offload_uv_thread / _pool: the offload round trip, a new std::thread per call that
//    uv_async_send()s back and is joined by the loop (the model's --offload thread), against
//    uv_queue_work on libuv's pool (the model's pool, sized like it).
//
// Try: build/bin/cm-micro --benchmark_filter='uv_'

#include <benchmark/benchmark.h>
#include <uv.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "cm/server.hpp"
#include "timers.hpp"

namespace {

void check(int rc, const char* what) {
  if (rc < 0) throw std::system_error(-rc, std::generic_category(), what);
}

/// A uv_loop_t with a stop handle, closed cleanly (every handle closed, then uv_loop_close).
// NOTE: ~Loop closes every handle still open on the loop, so a benchmark declares the handles it
// uses (and what their callbacks touch) before its Loop: they are destroyed after it.
class Loop {
 public:
  Loop() {
    check(uv_loop_init(&loop_), "uv_loop_init");
    check(uv_async_init(&loop_, &stop_, [](uv_async_t*) {}), "uv_async_init");
  }
  ~Loop() {
    // NOTE: a handle's memory may be released only after its close callback has run, which
    // uv_run() does; uv_loop_close() then fails with UV_EBUSY if anything is left open.
    uv_walk(
        &loop_,
        [](uv_handle_t* h, void*) {
          if (!uv_is_closing(h)) uv_close(h, nullptr);
        },
        nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    uv_loop_close(&loop_);
  }
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  uv_loop_t* get() { return &loop_; }

 private:
  uv_loop_t loop_{};
  uv_async_t stop_{};
};

[[maybe_unused]] const bool context_added = [] {
  benchmark::AddCustomContext("libuv", uv_version_string());
  return true;
}();

/// A counter reached through a handle's data pointer.
void count(uv_handle_t* handle) {
  ++*static_cast<long*>(handle->data);
}

void BM_uv_async_send(benchmark::State& state) {
  uv_async_t async{};
  long calls = 0;
  Loop loop;
  check(uv_async_init(loop.get(), &async,
                      [](uv_async_t* a) { count(reinterpret_cast<uv_handle_t*>(a)); }),
        "uv_async_init");
  async.data = &calls;
  for (auto _ : state) {
    uv_async_send(&async);
    uv_run(loop.get(), UV_RUN_ONCE);
  }
  if (calls != state.iterations()) state.SkipWithError("an async callback was missed");
  state.SetItemsProcessed(state.iterations());
}

void BM_uv_idle_round(benchmark::State& state) {
  uv_idle_t idle{};
  long calls = 0;
  Loop loop;
  check(uv_idle_init(loop.get(), &idle), "uv_idle_init");
  idle.data = &calls;
  check(uv_idle_start(&idle, [](uv_idle_t* i) { count(reinterpret_cast<uv_handle_t*>(i)); }),
        "uv_idle_start");
  for (auto _ : state)
    uv_run(loop.get(), UV_RUN_NOWAIT);
  if (calls != state.iterations()) state.SkipWithError("an idle callback was missed");
  state.SetItemsProcessed(state.iterations());
}

constexpr const char* kUvTimers = "uv_loop_t timer heap: a binary min-heap";

std::uint64_t ms(std::chrono::nanoseconds d) {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

/// N uv_timer_t waiting far ahead on `loop`, as N requests wait in /delay, and `measured`
/// initialised beside them.
void start_pending(uv_loop_t* loop, std::vector<uv_timer_t>& pending, uv_timer_t& measured) {
  const long n = static_cast<long>(pending.size());
  for (long k = 0; k < n; ++k) {
    check(uv_timer_init(loop, &pending[k]), "uv_timer_init");
    check(uv_timer_start(&pending[k], [](uv_timer_t*) {}, ms(cm::micro::pending_due(k, n)), 0),
          "uv_timer_start");
  }
  check(uv_timer_init(loop, &measured), "uv_timer_init");
}

void BM_uv_timers_arm_cancel(benchmark::State& state) {
  std::vector<uv_timer_t> pending(static_cast<std::size_t>(state.range(0)));
  uv_timer_t timer{};
  Loop loop;
  start_pending(loop.get(), pending, timer);
  std::uint64_t i = 0;
  for (auto _ : state) {
    uv_timer_start(&timer, [](uv_timer_t*) {}, ms(cm::micro::probe_due(i++)), 0);
    uv_timer_stop(&timer);
  }
  if (uv_is_active(reinterpret_cast<uv_handle_t*>(&timer)))
    state.SkipWithError("a stopped timer is still active");
  state.SetLabel(kUvTimers);
  state.SetItemsProcessed(state.iterations());
}

void BM_uv_timers_expire(benchmark::State& state) {
  std::vector<uv_timer_t> pending(static_cast<std::size_t>(state.range(0)));
  uv_timer_t timer{};
  long calls = 0;
  Loop loop;
  start_pending(loop.get(), pending, timer);
  timer.data = &calls;
  for (auto _ : state) {
    uv_timer_start(
        &timer, [](uv_timer_t* t) { count(reinterpret_cast<uv_handle_t*>(t)); }, 0, 0);
    uv_run(loop.get(), UV_RUN_NOWAIT);
  }
  if (calls != state.iterations()) state.SkipWithError("a due timer did not fire");
  state.SetLabel(kUvTimers);
  state.SetItemsProcessed(state.iterations());
}

void BM_uv_timer_zero(benchmark::State& state) {
  uv_timer_t timer{};
  long calls = 0;
  Loop loop;
  check(uv_timer_init(loop.get(), &timer), "uv_timer_init");
  timer.data = &calls;
  for (auto _ : state) {
    uv_timer_start(
        &timer, [](uv_timer_t* t) { count(reinterpret_cast<uv_handle_t*>(t)); }, 0, 0);
    uv_run(loop.get(), UV_RUN_NOWAIT);
  }
  if (calls != state.iterations()) state.SkipWithError("a zero timer did not fire in its round");
  state.SetItemsProcessed(state.iterations());
}

/// One callback chain: N steps one loop round apart, then the handle is closed and the context
/// freed in the close callback.
struct Chain {
  uv_idle_t idle{};
  long steps_left = 0;
  long* finished = nullptr;

  static void step(uv_idle_t* idle) {
    auto* chain = static_cast<Chain*>(idle->data);
    if (--chain->steps_left > 0) return;
    uv_idle_stop(idle);
    // NOTE: the context owns the handle, so it is deleted in the close callback, not here.
    uv_close(reinterpret_cast<uv_handle_t*>(idle), [](uv_handle_t* h) {
      auto* done = static_cast<Chain*>(h->data);
      ++*done->finished;
      delete done;
    });
  }
};

void BM_uv_callback_chain(benchmark::State& state) {
  long finished = 0;
  Loop loop;
  for (auto _ : state) {
    auto* chain = new Chain;
    chain->steps_left = state.range(0);
    chain->finished = &finished;
    chain->idle.data = chain;
    uv_idle_init(loop.get(), &chain->idle);
    uv_idle_start(&chain->idle, &Chain::step);
    const long before = finished;
    while (finished == before)
      uv_run(loop.get(), UV_RUN_NOWAIT);
  }
  if (finished != state.iterations()) state.SkipWithError("a chain did not finish");
  state.SetItemsProcessed(state.iterations());
}

/// What an offloaded call reports back to the loop.
struct Offload {
  uv_async_t back{};
  uv_work_t work{};
  std::mutex mutex;                    // guards finished
  std::vector<std::thread*> finished;  // threads whose work is done, for the loop to join
  std::atomic<long> ran{0};
  long resumed = 0;
};

/// A new std::thread per call, as the libuv_callbacks model's --offload thread does it: the
/// thread does the work, queues itself under a mutex and uv_async_send()s; the loop's async
/// callback joins it and resumes the request. (aeronet's deferWork detaches instead of joining.)
void BM_offload_uv_thread(benchmark::State& state) {
  Offload offload;
  Loop loop;
  check(uv_async_init(loop.get(), &offload.back,
                      [](uv_async_t* a) {
                        auto& o = *static_cast<Offload*>(a->data);
                        std::vector<std::thread*> done;
                        {
                          std::lock_guard lock(o.mutex);
                          done.swap(o.finished);
                        }
                        for (std::thread* t : done) {
                          t->join();
                          ++o.resumed;
                        }
                      }),
        "uv_async_init");
  offload.back.data = &offload;
  for (auto _ : state) {
    const long before = offload.resumed;
    std::thread thread;
    // NOTE: the thread object lives in this frame until the async callback has joined it.
    thread = std::thread([&offload, &thread] {
      offload.ran.fetch_add(1, std::memory_order_relaxed);
      {
        std::lock_guard lock(offload.mutex);
        offload.finished.push_back(&thread);
      }
      uv_async_send(&offload.back);
    });
    while (offload.resumed == before)
      uv_run(loop.get(), UV_RUN_ONCE);
  }
  if (offload.ran != state.iterations()) state.SkipWithError("an offloaded call did not run");
  state.SetItemsProcessed(state.iterations());
}

/// uv_queue_work on libuv's pool, sized as the libuv_callbacks model sizes it
/// (UV_THREADPOOL_SIZE = ServerOptions::blocking_threads, unless already set).
void BM_offload_uv_pool(benchmark::State& state) {
  ::setenv("UV_THREADPOOL_SIZE", std::to_string(cm::ServerOptions{}.blocking_threads).c_str(), 0);
  Offload offload;
  Loop loop;
  offload.work.data = &offload;
  for (auto _ : state) {
    const long before = offload.resumed;
    check(uv_queue_work(
              loop.get(), &offload.work,
              [](uv_work_t* w) {
                static_cast<Offload*>(w->data)->ran.fetch_add(1, std::memory_order_relaxed);
              },
              [](uv_work_t* w, int) { ++static_cast<Offload*>(w->data)->resumed; }),
          "uv_queue_work");
    while (offload.resumed == before)
      uv_run(loop.get(), UV_RUN_ONCE);
  }
  if (offload.ran != state.iterations()) state.SkipWithError("an offloaded call did not run");
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

BENCHMARK(BM_uv_async_send);
BENCHMARK(BM_uv_idle_round);
BENCHMARK(BM_uv_timer_zero);
BENCHMARK(BM_uv_timers_arm_cancel)->Apply(cm::micro::pending_sizes);
BENCHMARK(BM_uv_timers_expire)->Apply(cm::micro::pending_sizes);
BENCHMARK(BM_uv_callback_chain)->Arg(1)->Arg(8);
BENCHMARK(BM_offload_uv_thread)->UseRealTime();
BENCHMARK(BM_offload_uv_pool)->UseRealTime();
