// load.cpp -- the run as a whole: check the options, set the process up (open-files limit,
// source addresses), start one Worker per thread, time the phases, gather the figures.
//
// Phases: connect (every connection's first attempt ends, in bounded batches; requests start as
// soon as each is open) -> warm-up (answers checked, not counted) -> measured window (an answer
// counts if it completes inside it) -> stop (answers in flight are dropped, neither counted nor
// errors). Errors are counted over every phase: an early answer in the warm-up is still a lie.

#include "load.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <exception>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>

#include "worker.hpp"

namespace cm::load {
namespace {

/// Connections one source address should carry to one server port. The kernel's ephemeral range
/// gives about 28,000 ports per (source, destination) pair, but connect() prefers even ports and
/// searches linearly once they run out: measured here, 16,000 connections opened in 2.9 s from
/// one source address and 0.8 s from four (README.md). So auto mode takes a new 127.0.0.x every
/// quarter range (about 7,000 connections).
unsigned connections_per_source() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  unsigned lo = 32768, hi = 60999;
  in >> lo >> hi;
  unsigned range = hi > lo ? hi - lo + 1 : 1;
  return std::max(range / 4, 1u);
}

/// Raises the soft open-files limit to the hard one; returns the new soft limit.
rlim_t raise_open_files_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
    ::getrlimit(RLIMIT_NOFILE, &rl);
  }
  return rl.rlim_cur;
}

sockaddr_in resolve(const UrlTemplate& url) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(url.host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || !found)
    throw std::invalid_argument("cannot resolve '" + url.host + "' (IPv4): " + gai_strerror(rc));
  sockaddr_in addr = *reinterpret_cast<const sockaddr_in*>(found->ai_addr);
  ::freeaddrinfo(found);
  addr.sin_port = htons(url.port);
  return addr;
}

double cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec / 1e6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

/// Sleeps until `deadline_ns` (monotonic), printing a progress line each second.
class Progress {
 public:
  Progress(std::ostream* out, const std::vector<std::unique_ptr<Worker>>& workers,
           unsigned connections)
      : out_(out), workers_(workers), connections_(connections), last_ns_(now_ns()) {}

  void sleep_until(std::int64_t deadline_ns, const char* phase, const Shared& shared) {
    for (;;) {
      std::int64_t now = now_ns();
      if (now >= deadline_ns) return;
      std::int64_t next_line = last_ns_ + 1'000'000'000;
      std::int64_t until = std::min(deadline_ns, next_line);
      std::this_thread::sleep_for(std::chrono::nanoseconds(until - now));
      if (now_ns() >= next_line) line(phase, shared);
    }
  }

  /// Total correct answers so far, over all workers.
  std::uint64_t completed() const {
    std::uint64_t n = 0;
    for (const auto& w : workers_)
      n += w->live_completed.load(std::memory_order_relaxed);
    return n;
  }
  unsigned open() const {
    unsigned n = 0;
    for (const auto& w : workers_)
      n += w->live_open.load(std::memory_order_relaxed);
    return n;
  }

 private:
  void line(const char* phase, const Shared& shared) {
    std::int64_t now = now_ns();
    std::uint64_t done = completed(), errors = 0;
    for (const auto& w : workers_)
      errors += w->live_errors.load(std::memory_order_relaxed);
    double rps = static_cast<double>(done - last_completed_) / ((now - last_ns_) / 1e9);
    last_completed_ = done;
    last_ns_ = now;
    ++seconds_;
    if (!out_) return;
    *out_ << "cm-load " << std::setw(3) << seconds_ << "s " << std::left << std::setw(8) << phase
          << std::right << " rps " << std::setw(9) << std::fixed << std::setprecision(0) << rps
          << "  open " << open() << "/" << connections_ << "  errors " << errors;
    if (std::string_view(phase) == "connect")
      *out_ << "  connected " << shared.resolved.load() << "/" << connections_;
    *out_ << std::endl;
  }

  std::ostream* out_;
  const std::vector<std::unique_ptr<Worker>>& workers_;
  unsigned connections_;
  std::int64_t last_ns_;
  std::uint64_t last_completed_ = 0;
  unsigned seconds_ = 0;
};

/// Throws std::invalid_argument for options that make no sense; returns the spread of the first
/// requests, ms (0 without --stagger).
double check_options(const Options& options, const UrlTemplate& url) {
  if (options.connections == 0) throw std::invalid_argument("--connections must be at least 1");
  if (options.threads == 0) throw std::invalid_argument("--threads must be at least 1");
  if (!(options.duration_s > 0)) throw std::invalid_argument("--duration must be above 0");
  if (!(options.warmup_s >= 0)) throw std::invalid_argument("--warmup must be 0 or more");
  if (options.timeout.count() <= 0) throw std::invalid_argument("--timeout must be above 0");
  if (options.spin.count() < 0 || options.spin > std::chrono::seconds(1))
    throw std::invalid_argument("--spin-us must be from 0 to 1000000");
  if (url.has_ms && !options.delay)
    throw std::invalid_argument("the URL holds {ms}: say which delay with --delay MS or MIN:MAX");
  if (!url.has_ms && options.delay)
    throw std::invalid_argument(
        "--delay needs a URL holding {ms}, e.g. http://127.0.0.1:8080/delay/{ms}");
  // --stagger spreads the first requests over one delay. A URL without {ms} has no --delay to
  // take it from: rather than guess (or silently not spread), ask for the spread.
  if (options.rate && !(*options.rate > 0 && *options.rate <= 10'000'000))
    throw std::invalid_argument("--rate must be above 0 and at most 10000000");
  if (options.poisson && !options.rate)
    throw std::invalid_argument("--arrival poisson is the arrivals of --rate: give both");
  if (options.rate && options.stagger)
    throw std::invalid_argument("--stagger is for the closed loop; --rate spreads the requests");
  if (options.stagger_ms && !options.stagger)
    throw std::invalid_argument("--stagger-ms is the spread of --stagger: give both");
  if (options.stagger && !options.stagger_ms && !options.delay)
    throw std::invalid_argument(
        "--stagger spreads the first requests over the mean --delay, and this URL has no {ms}: "
        "say over how long with --stagger-ms MS");
  const double stagger_ms = !options.stagger     ? 0
                            : options.stagger_ms ? *options.stagger_ms
                                                 : options.delay->mean();
  if (!(stagger_ms >= 0 && stagger_ms <= 60'000))
    throw std::invalid_argument("--stagger-ms must be from 0 to 60000");
  return stagger_ms;
}

/// What every worker sends and expects, from the checked options; resolves the host.
Target make_target(const Options& options, const UrlTemplate& url, double stagger_ms) {
  Target target;
  target.url = url;
  target.delay = options.delay;
  target.server = resolve(url);
  target.expect = default_expectation(url);
  if (options.body) {  // POST /echo answers what it was sent
    target.method = "POST";
    target.body = *options.body;
    target.expect.body = options.body;
    target.expect.body_is_delay = false;
  }
  if (options.expect_body) {
    target.expect.body = options.expect_body;
    target.expect.body_is_delay = false;
  }
  if (options.min_latency_ms) {
    target.expect.min_latency_ms = *options.min_latency_ms;
    target.expect.min_latency_is_delay = false;
  }
  target.expect_status = options.expect_status;
  target.timeout_ns = static_cast<std::int64_t>(options.timeout.count()) * 1'000'000;
  target.spin_ns = static_cast<std::int64_t>(options.spin.count()) * 1'000;
  // The closed loop holds every first request until the connect phase ends (released at once
  // without --stagger): a server that serves the connections already open while thousands more
  // arrive accepts them slowly, its accept queue overflows, and the dropped SYNs come back a
  // second or more later -- 16,000 connections took 2 to 12 s to open here instead of 0.4 to 0.6.
  target.stagger = !options.rate;
  target.stagger_ns = std::llround(stagger_ms * 1e6);
  target.connections = options.connections;
  target.rate = options.rate.value_or(0);
  target.poisson = options.poisson;
  return target;
}

/// Spreads the connections over 127.0.0.1 .. 127.0.0.N, so that connect() finds free ports fast:
/// fills target.sources (left empty for a single address) and returns N.
unsigned add_source_addresses(const Options& options, Target& target) {
  bool loopback = (ntohl(target.server.sin_addr.s_addr) >> 24) == 127;
  unsigned sources = options.source_addresses;
  if (sources == 0) {
    unsigned per = connections_per_source();
    sources = loopback ? std::min(254u, (options.connections + per - 1) / per) : 1;
  }
  sources = std::max(sources, 1u);
  const unsigned first = options.first_source;
  if (first < 1 || first + sources - 1 > 254)
    throw std::invalid_argument("--source-addresses must lie in 127.0.0.1..127.0.0.254");
  if ((sources > 1 || first > 1) && !loopback)
    throw std::invalid_argument("other source addresses are only for 127.0.0.x targets");
  if (sources > 1 || first > 1) {
    for (unsigned i = first; i < first + sources; ++i) {
      in_addr a{};
      a.s_addr = htonl((127u << 24) | i);
      target.sources.push_back(a);
    }
  }
  return sources;
}

/// The workers, one per thread, and their threads.
/// NOTE: the threads reference this object and the Target; the destructor stops and joins them,
/// so whatever leaves run() (a return or an exception) joins them before either goes away.
class Loops {
 public:
  /// Makes `threads` workers over `target` and splits the connections evenly over them.
  Loops(const Target& target, unsigned connections, unsigned threads) : failures_(threads) {
    shared.stop_event.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!shared.stop_event) throw std::system_error(errno, std::generic_category(), "eventfd");
    for (unsigned t = 0, first = 0; t < threads; ++t) {
      unsigned count = connections / threads + (t < connections % threads ? 1 : 0);
      workers.push_back(std::make_unique<Worker>(target, shared, first, count));
      first += count;
    }
  }
  ~Loops() { stop_and_join(); }
  Loops(const Loops&) = delete;
  Loops& operator=(const Loops&) = delete;

  /// Runs each worker on a thread of its own; what one throws is kept for stop().
  void start() {
    for (unsigned t = 0; t < workers.size(); ++t) {
      threads_.emplace_back([this, t] {
        try {
          workers[t]->run();
        } catch (...) {
          failures_[t] = std::current_exception();
          any_failure_.store(true);
        }
      });
    }
  }

  /// Stops the workers and joins their threads, then rethrows what the first failed one threw.
  void stop() {
    stop_and_join();
    for (auto& f : failures_)
      if (f) std::rethrow_exception(f);
  }

  /// If a worker has failed: stops them all and rethrows its exception.
  void stop_if_failed() {
    if (any_failure_.load()) stop();
  }

  Shared shared;
  std::vector<std::unique_ptr<Worker>> workers;

 private:
  void stop_and_join() {
    shared.stop.store(true);
    std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(shared.stop_event.get(), &one, sizeof one);
    for (auto& t : threads_)
      t.join();
    threads_.clear();
  }

  std::vector<std::exception_ptr> failures_;
  std::atomic<bool> any_failure_{false};  // set after failures_[t] is written
  std::vector<std::thread> threads_;
};

/// The connect phase: waits until every first attempt has ended, or none has for --timeout (a
/// server that stopped accepting), or --connect-phase seconds have passed (a server too busy
/// serving the connections it has to accept the rest quickly). The slots still trying go on in
/// the background. Returns how many first attempts had ended.
unsigned connect_phase(Loops& loops, Progress& progress, const Options& options,
                       std::int64_t timeout_ns, std::int64_t connect_start) {
  unsigned resolved = 0;
  std::int64_t last_progress = now_ns();
  const auto phase_end = connect_start + static_cast<std::int64_t>(options.connect_phase_s * 1e9);
  while ((resolved = loops.shared.resolved.load()) < options.connections) {
    progress.sleep_until(now_ns() + 10'000'000, "connect", loops.shared);
    loops.stop_if_failed();
    if (loops.shared.resolved.load() != resolved) last_progress = now_ns();
    if (now_ns() - last_progress > timeout_ns || now_ns() > phase_end) break;
  }
  return resolved;
}

/// Adds the workers' connect failures, by reason, to `failures`.
void add_connect_failures(const Loops& loops, std::map<std::string, std::uint64_t>& failures) {
  for (const auto& w : loops.workers)
    for (const auto& [reason, n] : w->connect_failures())
      failures[reason] += n;
}

/// The run as asked, and how long the connect phase took: the Result before anything is counted.
Result describe_run(const Options& options, unsigned threads, unsigned sources, double stagger_ms,
                    double connect_s) {
  Result result;
  result.url = options.url;
  result.threads = threads;
  result.connections_requested = options.connections;
  result.source_addresses = sources;
  result.first_source = options.first_source;
  result.delay = options.delay;
  result.stagger = options.stagger;
  result.stagger_ms = stagger_ms;
  result.rate = options.rate.value_or(0);
  result.poisson = options.poisson;
  result.warmup_s = options.warmup_s;
  result.duration_s = options.duration_s;
  result.connect_s = connect_s;
  return result;
}

/// When no connection opened: stops the workers and returns `result` with their failures and
/// errors and no window (duration 0), after printing the connect line.
Result without_connections(Loops& loops, Result result, std::ostream* log) {
  loops.stop();
  add_connect_failures(loops, result.connect_failures);
  for (const auto& w : loops.workers)
    result.errors.add(w->errors);
  result.duration_s = 0;
  if (log) *log << connection_line(result) << std::endl;
  return result;
}

/// The connect line printed once the connect phase is over and the run goes on: `line` (the
/// run as asked) with the connections open now, those still connecting, and the failures so far.
std::string connect_phase_line(Result line, const Loops& loops, unsigned opened,
                               unsigned resolved) {
  line.connections_open = opened;
  line.still_connecting =
      line.connections_requested - std::min(line.connections_requested, resolved);
  add_connect_failures(loops, line.connect_failures);
  return connection_line(line);
}

/// The measured window on the monotonic clock, and cm-load's CPU time at its two ends.
struct Window {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  double cpu_start_s = 0;
  double cpu_end_s = 0;
  double warmup_s = 0;  ///< from the end of the connect phase (and stagger) to the window
};

/// From the end of the connect phase: the stagger (with --stagger only), the warm-up, then the
/// measured window. Returns once the window is over; the workers still run.
Window stagger_warmup_and_window(Loops& loops, Progress& progress, const Target& target,
                                 const Options& options) {
  // With --stagger the first requests go out over the spread from here, and the warm-up only
  // begins once the spread is over: the window never sees the ramp, and the warm-up is whole.
  const std::int64_t origin = now_ns();
  const std::int64_t ramp_end = origin + target.stagger_ns;
  Window window;
  window.start_ns = ramp_end + static_cast<std::int64_t>(options.warmup_s * 1e9);
  if (options.window_at_ns) {  // one window shared with other cm-load processes
    if (*options.window_at_ns < ramp_end)
      throw std::invalid_argument(
          "--window-at: the window was due " +
          std::to_string((ramp_end - *options.window_at_ns) / 1'000'000) +
          " ms before the connections were open (and staggered): set it later");
    window.start_ns = *options.window_at_ns;
  }
  window.warmup_s = static_cast<double>(window.start_ns - ramp_end) / 1e9;
  window.end_ns = window.start_ns + static_cast<std::int64_t>(options.duration_s * 1e9);
  loops.shared.window_start_ns.store(window.start_ns);
  loops.shared.window_end_ns.store(window.end_ns);
  if (target.rate > 0) {  // the open loop's schedule starts now: the warm-up runs at the rate too
    loops.shared.pace_origin_ns.store(origin, std::memory_order_release);
    for (const auto& w : loops.workers)
      w->release_schedule();
  }
  if (target.stagger) {
    loops.shared.stagger_origin_ns.store(origin, std::memory_order_release);
    for (const auto& w : loops.workers)
      w->release_first_requests();
    progress.sleep_until(ramp_end, "stagger", loops.shared);
  }
  progress.sleep_until(window.start_ns, "warmup", loops.shared);
  window.cpu_start_s = cpu_seconds();
  progress.sleep_until(window.end_ns, "run", loops.shared);
  window.cpu_end_s = cpu_seconds();
  return window;
}

/// --drain: after the window, no worker sends a new request; waits until every worker has no
/// request in flight, or for `timeout_ns` at most (a request still unanswered then is counted in
/// unanswered_at_end). Returns how long it waited, seconds.
double drain(Loops& loops, Progress& progress, std::int64_t timeout_ns) {
  const std::int64_t start = now_ns();
  loops.shared.draining.store(true);
  auto all_drained = [&loops] {
    for (const auto& w : loops.workers)
      if (!w->drained.load()) return false;
    return true;
  };
  while (!all_drained() && now_ns() - start < timeout_ns) {
    progress.sleep_until(now_ns() + 5'000'000, "drain", loops.shared);
    loops.stop_if_failed();
  }
  return static_cast<double>(now_ns() - start) / 1e9;
}

/// Gathers into `result`, once the workers have stopped, what they counted: connect failures,
/// answers, errors, latencies, the fairness of the slots over the window, and the client's CPU.
void collect(Result& result, const Loops& loops, const Window& window, const Options& options) {
  add_connect_failures(loops, result.connect_failures);
  result.window_start_ns = window.start_ns;
  result.window_end_ns = window.end_ns;
  std::vector<SlotTally> tallies;
  tallies.reserve(options.connections);
  for (const auto& w : loops.workers) {
    std::vector<SlotTally> t = w->tallies();
    tallies.insert(tallies.end(), t.begin(), t.end());
    result.requests += w->requests_in_window;
    result.responses_total += w->live_completed.load();
    result.unanswered_at_end += w->unanswered_at_end;
    result.reconnects += w->reconnects;
    result.errors.add(w->errors);
    result.latency_us.merge(w->latency_us);
    result.overshoot_us.merge(w->overshoot_us);
    result.client_spin_s += static_cast<double>(w->spin_ns_in_window) / 1e9;
    result.offered += w->offered_in_window;
    result.late += w->late_in_window;
    result.backlog_max += w->backlog_max;  // a bound: the workers' peaks need not coincide
    result.unsent += w->unsent;
    result.pace_lag_us.merge(w->pace_lag_us);
  }
  result.fairness = fairness(tallies, window.start_ns, window.end_ns);
  result.spin_us = static_cast<double>(options.spin.count());
  result.client_cpu_s = window.cpu_end_s - window.cpu_start_s;
}

}  // namespace

Result run(const Options& options) {
  const UrlTemplate url = UrlTemplate::parse(options.url);
  const double stagger_ms = check_options(options, url);
  Target target = make_target(options, url, stagger_ms);
  const unsigned threads = std::min(options.threads, options.connections);
  raise_open_files_limit();
  const unsigned sources = add_source_addresses(options, target);

  // NOTE: declared after `target`, which the threads read: leaving this scope joins them first.
  Loops loops(target, options.connections, threads);
  const std::int64_t connect_start = now_ns();
  loops.start();
  Progress progress(options.progress ? options.log : nullptr, loops.workers, options.connections);
  const double cpu_at_start = cpu_seconds();
  const unsigned resolved =
      connect_phase(loops, progress, options, target.timeout_ns, connect_start);
  const double connect_s = static_cast<double>(now_ns() - connect_start) / 1e9;

  Result result = describe_run(options, threads, sources, stagger_ms, connect_s);
  const unsigned opened = progress.open();
  if (opened == 0) return without_connections(loops, std::move(result), options.log);
  if (options.log) *options.log << connect_phase_line(result, loops, opened, resolved) << std::endl;

  const Window window = stagger_warmup_and_window(loops, progress, target, options);
  result.warmup_s = window.warmup_s;
  result.connections_open = progress.open();
  if (options.drain) {
    result.drain = true;
    result.drain_s = drain(loops, progress, target.timeout_ns);
  }
  loops.stop();
  collect(result, loops, window, options);
  result.client_cpu_total_s = cpu_seconds() - cpu_at_start;
  return result;
}

namespace {

/// A histogram's figures, as the JSON shows them.
nlohmann::json percentiles(const Histogram& h) {
  return nlohmann::json{
      {"mean", h.mean()},          {"p50", h.percentile(0.50)},   {"p90", h.percentile(0.90)},
      {"p99", h.percentile(0.99)}, {"p999", h.percentile(0.999)}, {"max", h.max()}};
}

/// All of a histogram: what cm-load merge adds up.
nlohmann::json buckets(const Histogram& h) {
  return nlohmann::json{{"layout", Histogram::bucket_count()},
                        {"buckets", h.buckets()},
                        {"count", h.count()},
                        {"min", h.min()},
                        {"max", h.max()},
                        {"sum", static_cast<double>(h.sum())}};
}

/// --rate's figures; null for a closed loop.
nlohmann::json open_loop_json(const Result& r) {
  if (r.rate <= 0) return nullptr;
  return {{"rate", r.rate},
          {"arrival", r.poisson ? "poisson" : "constant"},
          {"offered", r.offered},
          {"late", r.late},
          {"backlog_max", r.backlog_max},
          {"unsent", r.unsent},
          {"rate_ratio", r.rate_ratio()},
          {"valid", r.valid()},
          {"latency_from", "intended send time"},
          {"pace_lag_us", percentiles(r.pace_lag_us)}};
}

}  // namespace

nlohmann::json to_json(const Result& r) {
  nlohmann::json failures = nlohmann::json::object();
  for (const auto& [reason, n] : r.connect_failures)
    failures[reason] = n;
  nlohmann::json delay = nullptr;
  if (r.delay)
    delay = {{"min", r.delay->min_ms}, {"max", r.delay->max_ms}, {"mean", r.delay->mean()}};
  return {
      {"tool", "cm-load"},
      {"url", r.url},
      {"threads", r.threads},
      {"connections_requested", r.connections_requested},
      {"connections_open", r.connections_open},
      {"connect_failures", failures},
      {"source_addresses", r.source_addresses},
      {"first_source", r.first_source},
      {"delay_ms", delay},
      {"stagger", r.stagger},
      {"stagger_ms", r.stagger_ms},
      {"connect_s", r.connect_s},
      {"warmup_s", r.warmup_s},
      {"duration_s", r.duration_s},
      {"requests", r.requests},
      {"responses_total", r.responses_total},
      {"unanswered_at_end", r.unanswered_at_end},
      {"drain", r.drain},
      {"drain_s", r.drain_s},
      {"rps", r.rps()},
      {"reconnects", r.reconnects},
      {"errors",
       {{"connect", r.errors.connect},
        {"reset", r.errors.reset},
        {"timeout", r.errors.timeout},
        {"status", r.errors.status},
        {"body", r.errors.body},
        {"early", r.errors.early}}},
      {"errors_total", r.errors.total()},
      {"connections_in_window", r.fairness.connections},
      {"starved_connections", r.fairness.starved},
      {"fairness_jain", r.fairness.jain},
      {"max_gap_ms", r.fairness.max_gap_ms},
      {"answers_per_connection",
       {{"min", r.fairness.answers_min},
        {"p50", r.fairness.answers_p50},
        {"max", r.fairness.answers_max}}},
      {"latency_us", percentiles(r.latency_us)},
      {"overshoot_us", percentiles(r.overshoot_us)},
      {"histograms",
       {{"latency_us", buckets(r.latency_us)},
        {"overshoot_us", buckets(r.overshoot_us)},
        {"pace_lag_us", buckets(r.pace_lag_us)}}},
      {"slot_answers", r.fairness.answers},
      {"window_ns", {{"start", r.window_start_ns}, {"end", r.window_end_ns}}},
      {"parts", r.parts},
      {"client_cpu_s", r.client_cpu_s},
      {"client_cpu_total_s", r.client_cpu_total_s},
      {"client_spin_s", r.client_spin_s},
      {"spin_us", r.spin_us},
      {"open_loop", open_loop_json(r)},
  };
}

std::string connection_line(const Result& r) {
  std::ostringstream s;
  s << "cm-load: opened " << r.connections_open << " of " << r.connections_requested
    << " connections in " << std::fixed << std::setprecision(2) << r.connect_s << " s";
  if (r.source_addresses > 1 || r.first_source > 1)
    s << " from 127.0.0." << r.first_source << "-" << r.first_source + r.source_addresses - 1;
  if (r.still_connecting) s << " (" << r.still_connecting << " still connecting)";
  if (r.connect_failures.empty()) {
    s << "; none failed";
  } else {
    s << "; failed:";
    for (const auto& [reason, n] : r.connect_failures)
      s << " " << reason << " x" << n;
  }
  return s.str();
}

std::string open_loop_line(const Result& r) {
  std::ostringstream s;
  s << "open loop  rate ratio " << std::fixed << std::setprecision(3) << r.rate_ratio()
    << " (achieved " << std::setprecision(1) << r.rps() << " of " << r.rate << " rps)   late "
    << r.late << " of " << r.offered << " (no idle connection when due)   unsent " << r.unsent
    << "   "
    << (r.valid() ? "valid" : "INVALID: the server did not keep up (rate ratio below 0.95)");
  return s.str();
}

void print_summary(std::ostream& out, const Result& r) {
  auto ms = [](std::uint64_t us) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(us < 10'000 ? 3 : 1) << us / 1000.0 << " ms";
    return s.str();
  };
  out << "cm-load " << r.url;
  if (r.delay) {
    out << "  delay " << r.delay->min_ms;
    if (r.delay->max_ms != r.delay->min_ms) out << ":" << r.delay->max_ms;
    out << " ms";
  }
  if (r.parts > 1) out << "  (" << r.parts << " runs merged)";
  out << "\n  " << r.connections_open << "/" << r.connections_requested << " connections, "
      << r.threads << " threads, ";
  if (r.rate > 0)
    out << "open loop at " << r.rate << " rps (" << (r.poisson ? "Poisson" : "even") << "), ";
  else if (r.stagger)
    out << "first requests staggered over " << r.stagger_ms << " ms, ";
  else
    out << "no stagger, ";
  out << r.warmup_s << " s warm-up, " << r.duration_s << " s measured\n";
  out << "  requests " << r.requests << "   rps " << std::fixed << std::setprecision(1) << r.rps()
      << "   client CPU " << std::setprecision(2) << r.client_cpu_s << " s (" << r.client_spin_s
      << " s of it polling idle)\n";
  out << "  " << std::left << std::setw(10) << "" << std::right;
  for (const char* h : {"mean", "p50", "p90", "p99", "p99.9", "max"})
    out << std::setw(12) << h;
  out << "\n";
  for (auto [name, h] :
       {std::pair{"latency", &r.latency_us}, std::pair{"overshoot", &r.overshoot_us},
        std::pair{"own lag", &r.pace_lag_us}}) {
    if (h == &r.pace_lag_us && r.rate <= 0) continue;  // --rate only: cm-load's lag at each due
    out << "  " << std::left << std::setw(10) << name << std::right;
    out << std::setw(12) << ms(static_cast<std::uint64_t>(std::llround(h->mean())));
    for (double q : {0.5, 0.9, 0.99, 0.999})
      out << std::setw(12) << ms(h->percentile(q));
    out << std::setw(12) << ms(h->max()) << "\n";
  }
  out << "  errors " << r.errors.total() << " (connect " << r.errors.connect << ", reset "
      << r.errors.reset << ", timeout " << r.errors.timeout << ", status " << r.errors.status
      << ", body " << r.errors.body << ", early " << r.errors.early << ")";
  if (r.reconnects) out << ", reconnects " << r.reconnects;
  out << "\n";
  const Fairness& f = r.fairness;
  out << "  fairness  starved " << f.starved << " of " << f.connections << "   Jain "
      << std::setprecision(3) << f.jain << "   max gap " << std::setprecision(1) << f.max_gap_ms
      << " ms   answers per connection min " << f.answers_min << " p50 " << f.answers_p50 << " max "
      << f.answers_max << "\n";
  if (r.rate > 0) out << "  " << open_loop_line(r) << "\n";
  if (!r.connect_failures.empty()) out << "  " << connection_line(r) << "\n";
  out.flush();
}

}  // namespace cm::load
