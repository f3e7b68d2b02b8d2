#pragma once
/// \file load.hpp
/// cm-load as a library: run() drives a closed-loop load against one URL and checks every
/// answer; main.cpp only turns the command line into Options and the Result into text and JSON.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fairness.hpp"
#include "histogram.hpp"
#include "types.hpp"

namespace cm::load {

/// What to run. Defaults are the command line's.
struct Options {
  std::string url;                            ///< http://HOST:PORT/path, may hold {ms}
  unsigned connections = 100;                 ///< held for the whole run
  unsigned threads = 1;                       ///< client event loops
  std::optional<DelayRange> delay;            ///< required when the URL has {ms}
  double duration_s = 10;                     ///< measured window
  double warmup_s = 2;                        ///< before the window, not counted
  std::chrono::milliseconds timeout{10'000};  ///< unanswered this long: a timeout error
  double connect_phase_s = 30;                ///< the connect phase ends after this at the latest
  /// Poll without sleeping for this long after the last event (0: always sleep; worker.cpp says
  /// why)
  std::chrono::microseconds spin{100};
  int expect_status = 200;
  std::optional<std::string> expect_body;       ///< nullopt: the URL's default (url_template.hpp)
  /// --body: POST this body (with its Content-Length) instead of a GET; the answer is then
  /// expected to carry it back (POST /echo) unless expect_body says otherwise.
  std::optional<std::string> body;
  std::optional<std::uint64_t> min_latency_ms;  ///< nullopt: the URL's default
  unsigned source_addresses = 0;                ///< 0 = auto: as many 127.0.0.x as the ports need
  unsigned first_source = 1;                    ///< the sources are 127.0.0.FIRST and on
  /// --window-at: the measured window starts at this CLOCK_MONOTONIC time (ns) instead of after
  /// the warm-up, so that several cm-load processes measure one window (cm-load merge); the
  /// warm-up is whatever time is left before it. nullopt: after the warm-up.
  std::optional<std::int64_t> window_at_ns;
  /// Spread the first requests: connection i of N sends its first at i * spread / N after the
  /// connect phase, instead of all together when it ends (README.md, "Stagger").
  bool stagger = false;
  /// The spread, ms; nullopt: the mean of `delay` (then the URL must hold {ms}).
  std::optional<double> stagger_ms;
  /// --rate: an open loop at this many requests per second (README.md, "Open loop"); nullopt:
  /// the closed loop. --arrival poisson: exponential gaps between the intended send times.
  std::optional<double> rate;
  bool poisson = false;
  /// --drain: after the window, send no new request, close each connection as it falls idle and
  /// wait (up to `timeout`) for the answers in flight, so that every request sent is answered or counted as an error: the work a server
  /// did (a query at its database) can then be counted against the answers exactly.
  bool drain = false;
  std::ostream* log = nullptr;  ///< the connect line goes here (nullptr: silent)
  bool progress = false;        ///< and a progress line each second
};

/// What a run measured.
struct Result {
  std::string url;
  unsigned threads = 0;
  unsigned connections_requested = 0;
  unsigned connections_open = 0;  ///< connected at the end of the measured window
  unsigned source_addresses = 1;  ///< 127.0.0.F .. 127.0.0.(F+N-1) used as source addresses
  unsigned first_source = 1;      ///< F
  unsigned still_connecting = 0;  ///< first attempts unresolved when the connect phase ended
  double connect_s = 0;           ///< how long the connect phase took
  std::map<std::string, std::uint64_t> connect_failures;  ///< "ECONNREFUSED", "timeout", ...
  std::optional<DelayRange> delay;
  bool stagger = false;   ///< the first requests were spread (--stagger)
  double stagger_ms = 0;  ///< over this long, after the connect phase (0 without --stagger)
  double warmup_s = 0;
  double duration_s = 0;              ///< the measured window
  std::uint64_t requests = 0;         ///< correct answers completed inside the window
  std::uint64_t responses_total = 0;  ///< correct answers over the whole run, warm-up included
  /// Requests sent whose answer had not come when the run ended: neither answers nor errors (0
  /// after a --drain that ended in time).
  std::uint64_t unanswered_at_end = 0;
  bool drain = false;      ///< --drain: the run waited for the answers in flight after the window
  double drain_s = 0;      ///< how long that took
  std::uint64_t reconnects = 0;       ///< connections reopened after a close, reset or timeout
  ErrorCounts errors;                 ///< over the whole run, warm-up included
  Histogram latency_us;               ///< correct answers inside the window
  Histogram overshoot_us;             ///< latency - the least latency allowed (the delay)
  double client_cpu_s = 0;            ///< cm-load's user+system CPU during the window
  double client_cpu_total_s = 0;      ///< ... during the whole run
  double client_spin_s = 0;           ///< of client_cpu_s, polling that found nothing (--spin-us)
  double spin_us = 0;                 ///< the --spin-us it ran with
  /// Per connection slot, its correct answers inside the window: starved slots, Jain's index,
  /// the longest gap (fairness.hpp). Over the slots open at some instant of the window.
  Fairness fairness;
  /// The measured window on the monotonic clock (CLOCK_MONOTONIC, ns); 0 when there was none.
  std::int64_t window_start_ns = 0;
  std::int64_t window_end_ns = 0;
  /// --rate (0: a closed loop): the rate offered, Poisson or even; the intended send times in the
  /// window; of them, those that found no idle connection when due (`late`); the most requests
  /// ever waiting for a connection; and those still waiting at the end.
  double rate = 0;
  bool poisson = false;
  std::uint64_t offered = 0;
  std::uint64_t late = 0;
  std::uint64_t backlog_max = 0;
  std::uint64_t unsent = 0;
  /// --rate: cm-load's own lag at each request due in the window (Worker::pace_lag_us): a latency
  /// percentile near these is the client's, not the server's.
  Histogram pace_lag_us;
  /// How many cm-load runs this Result is (1; more after `cm-load merge`).
  unsigned parts = 1;
  double rps() const { return duration_s > 0 ? static_cast<double>(requests) / duration_s : 0; }
  /// --rate: the rate achieved over the rate offered -- the answers in the window over the
  /// requests due in it (with Poisson arrivals that count, not rate x window, is what was offered).
  double rate_ratio() const {
    return rate > 0 && offered > 0 ? static_cast<double>(requests) / static_cast<double>(offered)
                                   : 0;
  }
  /// A closed loop is always valid; an open loop only when it achieved kValidRateRatio of its rate
  /// (HttpArena's gate): below it, the server could not keep up and its latencies describe an
  /// overload, not the rate asked for.
  bool valid() const { return rate <= 0 || rate_ratio() >= kValidRateRatio; }
  static constexpr double kValidRateRatio = 0.95;
};

/// Runs the load described by `options`: opens the connections (in bounded batches), runs the
/// warm-up, then the measured window, then closes everything. Throws std::invalid_argument for
/// options that make no sense, std::system_error when the client itself cannot be set up.
/// Failures to connect are not thrown: they are in Result (connections_open may be 0).
Result run(const Options& options);

/// The JSON of the contract (README.md): every key always present, numbers not strings.
nlohmann::json to_json(const Result& result);

/// The Result a to_json() document describes (what `cm-load merge` reads). Throws
/// std::invalid_argument naming what is missing or of another histogram layout.
Result from_json(const nlohmann::json& json);

/// One Result for several runs that ran at the same time against the same URL (one row spread over
/// several cm-load processes, each holding part of the connections): the counts added, the
/// histograms merged bucket by bucket -- so every percentile is exact, never an average of
/// percentiles --, fairness over every run's slots. Throws std::invalid_argument when the runs
/// differ in URL, delay or window length, or their windows do not overlap by 90%.
Result merge(const std::vector<Result>& runs);

/// The human summary printed at the end.
void print_summary(std::ostream& out, const Result& result);

/// --rate: "open loop  rate ratio 0.998 (achieved 4990.0 of 5000 rps)   late 3 of 50000 ... valid".
std::string open_loop_line(const Result& result);

/// One line for stderr: "opened 98 of 100 connections; failed: ECONNREFUSED x2".
std::string connection_line(const Result& result);

}  // namespace cm::load
