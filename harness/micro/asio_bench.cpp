// asio_bench.cpp -- Boost.Asio's primitives as the asio_coro model uses them: C++20 coroutines
// (awaitable, co_spawn) on one io_context run by one thread.
//
//  - BM_asio_post_resume: `co_await post(executor, use_awaitable)`, the boost.async seed's
//    "posting to an executor" benchmark (a loop of posts inside one coroutine), on a loop that
//    holds a listener; BM_asio_post_resume_bare: the same on an io_context with no I/O object,
//    as the seed's benchmark runs it.
//  - BM_asio_timer_zero: arm a steady_timer that is already due and co_await it.
//  - BM_asio_timers_arm_cancel / _expire (pending:N): N steady_timers waiting an hour ahead in
//    the io_context's timer_queue (a binary heap of expiries), then one more armed among them and
//    cancelled, or armed already due and fired, each until its handler ran (run_one; timers.hpp).
//  - BM_asio_co_spawn: co_spawn a coroutine that returns at once, run the loop until it finished.
//  - BM_asio_await_child: co_await a child awaitable<void> (a coroutine call, no suspension).
//  - BM_offload_asio_thread / _thread_detached / _pool: the offload round trip from the loop to
//    a worker and back. A new thread per call as the model does it (a one-thread thread_pool,
//    joined), a detached std::thread exactly like aeronet's deferWork, and the model's
//    asio::thread_pool of ServerOptions::blocking_threads threads. All resume on the io_context.
//
// The same file is compiled a second time, on Asio's io_uring backend (BOOST_ASIO_HAS_IO_URING,
// BOOST_ASIO_DISABLE_EPOLL, as the asio_coro_uring model), into a shared library of its own whose
// benchmarks are named BM_asio_uring_* and BM_offload_asio_uring_*. It has to be a separate
// library: Asio is header-only, and its headers compiled twice with different macros in one
// program would break the one-definition rule (see asio_coro/CMakeLists.txt).
//
// Try: build/bin/cm-micro --benchmark_filter='asio'

#include <benchmark/benchmark.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/version.hpp>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "cm/server.hpp"
#include "timers.hpp"

namespace asio = boost::asio;

namespace {

#ifdef CM_MICRO_ASIO_URING
constexpr std::string_view group = "asio_uring";  ///< BM_asio_uring_*, BM_offload_asio_uring_*
[[maybe_unused]] const bool context_added = [] {
  benchmark::AddCustomContext("asio_uring_backend",
                              "BOOST_ASIO_HAS_IO_URING, BOOST_ASIO_DISABLE_EPOLL");
  return true;
}();
#else
constexpr std::string_view group = "asio";  ///< BM_asio_*, BM_offload_asio_*
[[maybe_unused]] const bool context_added = [] {
  benchmark::AddCustomContext("boost", BOOST_LIB_VERSION);
  return true;
}();
#endif

/// A model's loop: a single-threaded io_context (concurrency hint 1) holding a listening socket.
/// NOTE: the listener matters. An io_context without any I/O object has no reactor task, and
/// its thread then waits for work on a condition variable instead of in epoll_wait (or
/// io_uring_enter); with the listener registered, every round goes through the reactor as it
/// does in a server. It has no pending operation, so run() still returns once the work is done.
struct Loop {
  asio::io_context io{1};
  asio::ip::tcp::acceptor listener{io,
                                   asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
};

/// The boost.async seed's setup: an io_context holding no I/O object, so no reactor runs.
struct BareContext {
  asio::io_context io{1};
};

/// A new T (Loop or BareContext), or nothing and the benchmark skipped: on the io_uring backend
/// the kernel may refuse the ring. With CM_URING_SIMULATE_ENOSYS=1 that refusal is simulated, as
/// the io_uring runtime does.
template <typename T>
std::unique_ptr<T> open(benchmark::State& state) {
  try {
#ifdef CM_MICRO_ASIO_URING
    const char* simulate = std::getenv("CM_URING_SIMULATE_ENOSYS");
    if (simulate && std::string_view(simulate) == "1") {
      throw std::system_error(ENOSYS, std::generic_category(), "simulated");
    }
#endif
    return std::make_unique<T>();
  } catch (const std::system_error& error) {
    const std::string why =
        (group == "asio" ? "io_context: " : "io_uring unavailable: ") + error.code().message();
    state.SkipWithError(why.c_str());
    return nullptr;
  }
}

/// Runs `body(state)` as one coroutine on a fresh loop until it returns.
/// An exception in the coroutine comes out of io_context::run().
// NOTE: a lambda coroutine reads its captures through the lambda object; `body` lives in this
// frame until io.run() has returned, so the coroutine never outlives it.
template <typename Body>
void run_on_loop(benchmark::State& state, Body body) {
  std::unique_ptr<Loop> loop = open<Loop>(state);
  if (!loop) return;
  asio::co_spawn(loop->io, body(state), [](std::exception_ptr error) {
    if (error) std::rethrow_exception(error);
  });
  loop->io.run();
}

void BM_asio_post_resume(benchmark::State& state) {
  run_on_loop(state, [](benchmark::State& s) -> asio::awaitable<void> {
    auto executor = co_await asio::this_coro::executor;
    for (auto _ : s)
      co_await asio::post(executor, asio::use_awaitable);
    s.SetItemsProcessed(s.iterations());
  });
}

/// The same loop of posts on a BareContext, as the boost.async seed runs it: no reactor runs
/// between two posts (compare BM_asio_post_resume).
void BM_asio_post_resume_bare(benchmark::State& state) {
  std::unique_ptr<BareContext> bare = open<BareContext>(state);
  if (!bare) return;
  asio::co_spawn(
      bare->io,
      [&state]() -> asio::awaitable<void> {
        auto executor = co_await asio::this_coro::executor;
        for (auto _ : state)
          co_await asio::post(executor, asio::use_awaitable);
        state.SetItemsProcessed(state.iterations());
      },
      [](std::exception_ptr error) {
        if (error) std::rethrow_exception(error);
      });
  bare->io.run();
}

/// N steady_timers waiting far ahead on the loop, as N requests wait in /delay.
struct PendingTimers {
  std::vector<std::unique_ptr<asio::steady_timer>> timers;
  PendingTimers(asio::io_context& io, long n) {
    const auto now = asio::steady_timer::clock_type::now();
    timers.reserve(static_cast<std::size_t>(n));
    for (long k = 0; k < n; ++k) {
      auto& t = timers.emplace_back(std::make_unique<asio::steady_timer>(io));
      t->expires_at(now + cm::micro::pending_due(k, n));
      t->async_wait([](const boost::system::error_code&) {});
    }
  }
};

constexpr const char* kAsioTimers = "io_context timer_queue: a binary heap";

/// Runs the loop's handlers one at a time until `done()` (at most 1,000 tries): on Asio's io_uring
/// backend a timer's handler may take more than one turn of the scheduler to come out.
template <typename Done>
bool run_until(asio::io_context& io, Done done) {
  for (int tries = 0; tries < 1000 && !done(); ++tries)
    io.run_one();
  return done();
}

void BM_asio_timers_arm_cancel(benchmark::State& state) {
  auto loop = open<Loop>(state);
  if (!loop) return;
  PendingTimers pending(loop->io, state.range(0));
  asio::steady_timer timer(loop->io);
  const auto now = asio::steady_timer::clock_type::now();
  long aborted = 0;
  std::uint64_t i = 0;
  for (auto _ : state) {
    timer.expires_at(now + cm::micro::probe_due(i++));
    timer.async_wait([&aborted](const boost::system::error_code& e) {
      if (e == asio::error::operation_aborted) ++aborted;
    });
    timer.cancel();
    const long want = aborted + 1;  // its aborted handler run, so none piles up
    if (!run_until(loop->io, [&] { return aborted == want; })) {
      state.SkipWithError("a cancelled wait was not aborted");
      return;
    }
  }
  state.SetLabel(kAsioTimers);
  state.SetItemsProcessed(state.iterations());
}

void BM_asio_timers_expire(benchmark::State& state) {
  auto loop = open<Loop>(state);
  if (!loop) return;
  PendingTimers pending(loop->io, state.range(0));
  asio::steady_timer timer(loop->io);
  long fired = 0;
  for (auto _ : state) {
    timer.expires_at(asio::steady_timer::time_point{});  // long past: due now
    timer.async_wait([&fired](const boost::system::error_code& e) {
      if (!e) ++fired;
    });
    const long want = fired + 1;
    if (!run_until(loop->io, [&] { return fired == want; })) {
      state.SkipWithError("a due timer did not fire");
      return;
    }
  }
  state.SetLabel(kAsioTimers);
  state.SetItemsProcessed(state.iterations());
}

void BM_asio_timer_zero(benchmark::State& state) {
  run_on_loop(state, [](benchmark::State& s) -> asio::awaitable<void> {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    for (auto _ : s) {
      timer.expires_after(std::chrono::nanoseconds(0));
      co_await timer.async_wait(asio::use_awaitable);
    }
    s.SetItemsProcessed(s.iterations());
  });
}

asio::awaitable<void> finish_at_once(long& finished) {
  ++finished;
  co_return;
}

/// co_spawn a coroutine (as an accept loop spawns a connection) and run the loop until it is done.
void BM_asio_co_spawn(benchmark::State& state) {
  std::unique_ptr<Loop> loop = open<Loop>(state);
  if (!loop) return;
  long finished = 0;
  for (auto _ : state) {
    asio::co_spawn(loop->io, finish_at_once(finished), asio::detached);
    loop->io.run();
    loop->io.restart();
  }
  if (finished != state.iterations()) state.SkipWithError("a spawned coroutine did not finish");
  state.SetItemsProcessed(state.iterations());
}

void BM_asio_await_child(benchmark::State& state) {
  run_on_loop(state, [](benchmark::State& s) -> asio::awaitable<void> {
    long finished = 0;
    for (auto _ : s)
      co_await finish_at_once(finished);
    if (finished != s.iterations()) s.SkipWithError("a child coroutine did not finish");
    s.SetItemsProcessed(s.iterations());
  });
}

/// Runs `work` on a new detached std::thread and resumes the awaiting coroutine on its own
/// executor afterwards: aeronet's deferWork, written in Asio's idiom.
template <typename Work, typename Token>
auto offload_to_new_thread(Work work, Token&& token) {
  return asio::async_initiate<Token, void()>(
      [](auto handler, Work work) {
        // NOTE: the tracked executor keeps io_context::run() from returning while the thread
        // holds the handler.
        auto home = asio::prefer(asio::get_associated_executor(handler),
                                 asio::execution::outstanding_work.tracked);
        std::thread([work = std::move(work), handler = std::move(handler),
                     home = std::move(home)]() mutable {
          work();
          asio::post(home, std::move(handler));
        }).detach();
      },
      token, std::move(work));
}

/// The offloaded work of these benchmarks: nothing but proof that it ran.
asio::awaitable<bool> work_off_loop(long& ran) {
  ++ran;
  co_return true;
}

/// aeronet's deferWork: a detached std::thread per call, resuming the coroutine on the loop.
void BM_offload_asio_thread_detached(benchmark::State& state) {
  run_on_loop(state, [](benchmark::State& s) -> asio::awaitable<void> {
    long ran = 0;
    for (auto _ : s)
      co_await offload_to_new_thread([&ran] { ++ran; }, asio::use_awaitable);
    if (ran != s.iterations()) s.SkipWithError("an offloaded call did not run");
    s.SetItemsProcessed(s.iterations());
  });
}

/// The asio_coro model's --offload thread: a one-thread asio::thread_pool per call, co_spawn the
/// work onto it with use_awaitable (the coroutine resumes on its io_context), and ~thread_pool
/// joins that thread on the loop.
void BM_offload_asio_thread(benchmark::State& state) {
  run_on_loop(state, [](benchmark::State& s) -> asio::awaitable<void> {
    long ran = 0;
    for (auto _ : s) {
      asio::thread_pool one_thread(1);
      co_await asio::co_spawn(one_thread, work_off_loop(ran), asio::use_awaitable);
    }
    if (ran != s.iterations()) s.SkipWithError("an offloaded call did not run");
    s.SetItemsProcessed(s.iterations());
  });
}

/// The asio_coro model's pool: co_spawn the work onto an asio::thread_pool of
/// ServerOptions::blocking_threads threads with use_awaitable, which resumes on the io_context.
void BM_offload_asio_pool(benchmark::State& state) {
  asio::thread_pool pool(cm::ServerOptions{}.blocking_threads);
  run_on_loop(state, [&pool](benchmark::State& s) -> asio::awaitable<void> {
    long ran = 0;
    for (auto _ : s)
      co_await asio::co_spawn(pool, work_off_loop(ran), asio::use_awaitable);
    if (ran != s.iterations()) s.SkipWithError("an offloaded call did not run");
    s.SetItemsProcessed(s.iterations());
  });
  pool.join();
}

/// Registered by name, so that the same file compiled on Asio's io_uring backend (as the
/// asio_coro_uring model is) gives BM_asio_uring_* next to BM_asio_*.
[[maybe_unused]] const bool registered = [] {
  const std::string primitive = "BM_" + std::string(group) + "_";
  const std::string offload = "BM_offload_" + std::string(group) + "_";
  benchmark::RegisterBenchmark((primitive + "post_resume").c_str(), BM_asio_post_resume);
  benchmark::RegisterBenchmark((primitive + "post_resume_bare").c_str(), BM_asio_post_resume_bare);
  benchmark::RegisterBenchmark((primitive + "timer_zero").c_str(), BM_asio_timer_zero);
  benchmark::RegisterBenchmark((primitive + "timers_arm_cancel").c_str(), BM_asio_timers_arm_cancel)
      ->Apply(cm::micro::pending_sizes);
  benchmark::RegisterBenchmark((primitive + "timers_expire").c_str(), BM_asio_timers_expire)
      ->Apply(cm::micro::pending_sizes);
  benchmark::RegisterBenchmark((primitive + "co_spawn").c_str(), BM_asio_co_spawn);
  benchmark::RegisterBenchmark((primitive + "await_child").c_str(), BM_asio_await_child);
  benchmark::RegisterBenchmark((offload + "thread").c_str(), BM_offload_asio_thread)->UseRealTime();
  benchmark::RegisterBenchmark((offload + "thread_detached").c_str(),
                               BM_offload_asio_thread_detached)
      ->UseRealTime();
  benchmark::RegisterBenchmark((offload + "pool").c_str(), BM_offload_asio_pool)->UseRealTime();
  return true;
}();

}  // namespace

#ifdef CM_MICRO_ASIO_URING
/// The one symbol the io_uring variant's shared library exports: cm-micro refers to it, so the
/// library is loaded (and its benchmarks registered) whatever the linker's --as-needed says.
extern "C" __attribute__((visibility("default"))) int cm_micro_asio_uring_linked() {
  return 1;
}
#elif defined(CM_MICRO_LINK_ASIO_URING)
extern "C" int cm_micro_asio_uring_linked();
[[maybe_unused]] static const int asio_uring_linked = cm_micro_asio_uring_linked();
#endif
