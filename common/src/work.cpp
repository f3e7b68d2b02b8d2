// work.cpp -- where a step runs, what it does on a thread, and the threads of --offload thread.

#include "cm/work.hpp"

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <system_error>

namespace cm {
namespace {
std::chrono::nanoseconds thread_cpu_time() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}
}  // namespace

void unhandled(Venue venue) noexcept {
  std::fprintf(stderr, "cm: a model has no case for Venue %d\n", static_cast<int>(venue));
  std::abort();
}

Venue venue(const Plan& plan, WaitMode wait_mode, Offload offload, DbMode db_mode) noexcept {
  if (std::holds_alternative<Wait>(plan)) {
    return wait_mode == WaitMode::sleep ? Venue::loop : Venue::timer;
  }
  if (std::holds_alternative<Query>(plan)) {
    switch (db_mode) {
      case DbMode::readiness: return Venue::database;
      case DbMode::blocking: return Venue::loop;
      case DbMode::pool: return Venue::pool;
    }
  }
  if (reply_of(plan).status < 200) return Venue::loop;  // 100 Continue: nothing to do
  switch (offload) {
    case Offload::standard: return std::holds_alternative<Block>(plan) ? Venue::pool : Venue::loop;
    case Offload::inline_: return Venue::loop;
    case Offload::pool: return Venue::pool;
    case Offload::thread: return Venue::thread;
  }
  return Venue::loop;
}

void trace_venue(Venue venue, Tag tag) {
  if (!tag) return;
  switch (venue) {
    case Venue::timer: return tag.trace->begin(tag.conn, "on a timer (no thread)");
    case Venue::pool: return tag.trace->begin(tag.conn, "on the pool");
    case Venue::thread: return tag.trace->begin(tag.conn, "on a new thread");
    case Venue::database: return tag.trace->begin(tag.conn, "on the database (no thread)");
    case Venue::loop: return;  // perform() marks the thread
  }
}

std::string step_name(const Plan& plan) {
  if (const auto* wait = std::get_if<Wait>(&plan))
    return "wait " + std::to_string(wait->duration.count()) + " ms";
  if (const auto* block = std::get_if<Block>(&plan))
    return "block " + std::to_string(block->duration.count()) + " ms";
  if (const auto* compute = std::get_if<Compute>(&plan))
    return "cpu " + std::to_string(compute->duration.count()) + " us";
  if (const auto* query = std::get_if<Query>(&plan))
    return "query " + std::string(query->call.kind == DbCall::Kind::sleep ? "sleep " : "row ") +
           std::to_string(query->call.value);
  return "reply " + std::to_string(reply_of(plan).status);
}

const Reply& reply_for(const Plan& plan, Outcome outcome) {
  static const Reply refused = service_unavailable();
  return outcome == Outcome::refused ? refused : reply_of(plan);
}

void burn_cpu(std::chrono::microseconds duration) noexcept {
  const auto end = thread_cpu_time() + duration;
  volatile std::uint64_t sink = 0;
  while (thread_cpu_time() < end) {
    for (int i = 0; i < 64; ++i)
      sink = sink * 6364136223846793005ULL + 1442695040888963407ULL;
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

Outcome perform(Plan& plan, Sleeper& sleeper, Tag tag) {
  if (tag && !std::holds_alternative<Now>(plan)) {
    const auto start = Trace::Clock::now();
    const Outcome outcome = perform(plan, sleeper);
    tag.trace->complete(tag.conn, step_name(plan), start);
    return outcome;
  }
  bool ok = true;
  if (const auto* wait = std::get_if<Wait>(&plan)) ok = sleeper.sleep_for(wait->duration);
  if (const auto* block = std::get_if<Block>(&plan)) ok = sleeper.sleep_for(block->duration);
  if (const auto* compute = std::get_if<Compute>(&plan)) burn_cpu(compute->duration);
  if (auto* query = std::get_if<Query>(&plan)) {
    query->reply = query->database ? query->database->run(query->call) : database_unavailable();
  }
  return ok ? Outcome::done : Outcome::stopped;
}

bool CallThreads::start(Plan& plan, Sleeper& sleeper, Tag tag,
                        std::function<void(Outcome)> resume) {
  std::lock_guard lock(mutex_);
  try {
    if (!reaper_.joinable()) reaper_ = std::thread([this] { reap(); });
    // NOTE: the new thread reports its end under mutex_, held here until it is in running_.
    std::thread thread([this, &plan, &sleeper, tag, resume = std::move(resume)] {
      resume(perform(plan, sleeper, tag));  // `plan` lives with the caller until resume() ran
      std::lock_guard done(mutex_);
      finished_.push_back(std::this_thread::get_id());
      changed_.notify_one();
    });
    running_.emplace(thread.get_id(), std::move(thread));
  } catch (const std::system_error&) {  // EAGAIN: the system has no thread to give
    return false;
  }
  return true;
}

void CallThreads::reap() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return !finished_.empty() || (stopping_ && running_.empty()); });
    if (finished_.empty()) return;  // stopping, and every thread was joined
    std::vector<std::thread> ended;
    for (std::thread::id id : finished_) {
      auto it = running_.find(id);
      ended.push_back(std::move(it->second));
      running_.erase(it);
    }
    finished_.clear();
    lock.unlock();
    for (std::thread& thread : ended)
      thread.join();  // it returned from its work: only its exit is left
    lock.lock();
  }
}

void CallThreads::join_all() {
  std::thread reaper;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    changed_.notify_one();
    reaper = std::move(reaper_);
  }
  if (reaper.joinable()) reaper.join();
}

std::size_t CallThreads::running() const {
  std::lock_guard lock(mutex_);
  return running_.size();
}

}  // namespace cm
