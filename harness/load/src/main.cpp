// cm-load -- an HTTP/1.1 load generator that checks every answer: a closed loop, or with --rate
// an open one.
//
// Each connection holds one request in flight and is kept open for the whole run; connections
// are spread over --threads event loops (epoll). Every answer is checked: status, body (the
// delay asked for, for /delay/{ms}) and latency >= the delay -- an early answer is a violation,
// counted and reported, never a fast result.
//
// Try (with `cm-server --model blocking` running):
//   cm-load http://127.0.0.1:8080/delay/{ms} --delay 10:90 -c 200 -d 5
//   cm-load http://127.0.0.1:8080/plaintext -c 100 -t 2 --json out.json
//   cm-load http://127.0.0.1:8080/delay/{ms} --delay 100 -c 1000 --stagger
//   cm-load http://127.0.0.1:8080/plaintext -c 64 --rate 20000   # open loop: exit 3 if it lags
//   cm-load merge a.json b.json --json ab.json    # two runs of one row, at the same time: as one
//
// This file only reads the command line; the work is in load.cpp and worker.cpp.

#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <string_view>
#include <vector>

#include "load.hpp"

namespace {

/// What the command line says: the Options for run(), the options that need converting first,
/// and where the result goes.
struct CommandLine {
  cm::load::Options options;
  std::string delay;
  std::string json_file;
  std::string source_addresses = "auto";
  unsigned timeout_ms = 10'000;
  long spin_us = options.spin.count();
  std::uint64_t min_latency_ms = 0;
  std::string expect_body;
  std::string body;
  double stagger_ms = 0;
  double rate = 0;
  std::int64_t window_at_ns = 0;
  std::string arrival = "constant";
  bool quiet = false;
  // Whether these were given (their values have no "not given" of their own).
  CLI::Option* stagger_ms_option = nullptr;
  CLI::Option* expect_body_option = nullptr;
  CLI::Option* body_option = nullptr;
  CLI::Option* min_latency_option = nullptr;
  CLI::Option* rate_option = nullptr;
  CLI::Option* window_at_option = nullptr;
};

/// Declares cm-load's options on `app`, each stored into `cl`.
void add_options(CLI::App& app, CommandLine& cl) {
  cm::load::Options& options = cl.options;
  app.add_option("url", options.url, "http://HOST:PORT/path; the path may hold {ms}")->required();
  app.add_option("-c,--connections", options.connections, "connections held for the whole run")
      ->capture_default_str();
  app.add_option("-t,--threads", options.threads, "client threads (event loops)")
      ->capture_default_str();
  app.add_option("--delay", cl.delay, "ms for {ms}: MS, or MIN:MAX drawn uniformly per request");
  app.add_flag("--stagger", options.stagger,
               "spread the first requests over the mean --delay: connection i of N sends its "
               "first at i*delay/N after the connect phase, so they do not answer in waves");
  cl.stagger_ms_option = app.add_option(
      "--stagger-ms", cl.stagger_ms,
      "the spread of --stagger in ms (implies --stagger; needed when the URL has no {ms})");
  cl.rate_option = app.add_option(
      "--rate", cl.rate,
      "open loop: requests due at this many per second over the connections, whatever the "
      "server does; a request is sent when due on an idle connection (or waits for one), and its "
      "latency counts from when it was due. The run is invalid (exit 3) below 0.95 of the rate");
  app.add_option("--arrival", cl.arrival, "with --rate: constant (evenly spaced) or poisson")
      ->check(CLI::IsMember({"constant", "poisson"}))
      ->capture_default_str();
  app.add_option("-d,--duration", options.duration_s, "measured window, seconds")
      ->capture_default_str();
  app.add_option("--warmup", options.warmup_s, "warm-up before the window, seconds (not counted)")
      ->capture_default_str();
  app.add_option("--timeout", cl.timeout_ms, "ms before an unanswered request is a timeout error")
      ->capture_default_str();
  app.add_option("--connect-phase", options.connect_phase_s,
                 "seconds the connect phase may take at most before the run starts with the "
                 "connections open (the rest keep trying)")
      ->capture_default_str();
  app.add_option("--spin-us", cl.spin_us,
                 "after an event, poll without sleeping this long before sleeping in epoll_wait "
                 "(0: always sleep); idle polling is reported apart from the CPU time")
      ->capture_default_str();
  app.add_option("--expect-status", options.expect_status, "status of a correct answer")
      ->capture_default_str();
  cl.expect_body_option = app.add_option("--expect-body", cl.expect_body,
                                         "body of a correct answer (default: from the URL)");
  cl.body_option = app.add_option("--body", cl.body,
                                  "POST this body (with its Content-Length) instead of a GET; "
                                  "a correct answer carries it back, as POST /echo does");
  cl.min_latency_option =
      app.add_option("--min-latency-ms", cl.min_latency_ms,
                     "an answer faster than this is early (default: the delay)");
  app.add_option("--json", cl.json_file, "write the result as JSON to FILE");
  app.add_flag("--drain", options.drain,
               "after the window, send no new request, close each connection as it falls idle "
               "and wait (up to --timeout) for the answers in flight: every request sent is then an answer or an error, so a server's work "
               "(a query at its database) can be counted against the answers exactly");
  app.add_flag("-q,--quiet", cl.quiet, "no progress line each second");
  app.add_option("--source-addresses", cl.source_addresses,
                 "auto, or N: spread connections over 127.0.0.1..127.0.0.N, or A-B: over "
                 "127.0.0.A..127.0.0.B (cm-load processes run side by side take apart ranges)")
      ->capture_default_str();
  cl.window_at_option = app.add_option(
      "--window-at", cl.window_at_ns,
      "start the measured window at this CLOCK_MONOTONIC time, ns, instead of after --warmup: "
      "cm-load processes run side by side with the same value measure one window (cm-load "
      "merge); exit 2 if the connections were not open by then");
}

/// Converts the parsed options that Options holds in another form into `cl.options`. Throws
/// std::invalid_argument (an empty message: a bad --source-addresses) or std::out_of_range.
void convert_options(CommandLine& cl) {
  cm::load::Options& options = cl.options;
  options.timeout = std::chrono::milliseconds(cl.timeout_ms);
  options.spin = std::chrono::microseconds(cl.spin_us);
  if (!cl.delay.empty()) options.delay = cm::load::DelayRange::parse(cl.delay);
  if (*cl.expect_body_option) options.expect_body = cl.expect_body;
  if (*cl.body_option) options.body = cl.body;
  if (*cl.min_latency_option) options.min_latency_ms = cl.min_latency_ms;
  if (*cl.rate_option) options.rate = cl.rate;
  options.poisson = cl.arrival == "poisson";
  if (*cl.stagger_ms_option) {
    options.stagger = true;
    options.stagger_ms = cl.stagger_ms;
  }
  if (*cl.window_at_option) options.window_at_ns = cl.window_at_ns;
  if (cl.source_addresses != "auto") {
    const std::string& text = cl.source_addresses;
    const std::size_t dash = text.find('-');
    std::size_t used = 0;
    int first = 1;
    if (dash != std::string::npos) {
      first = std::stoi(text.substr(0, dash), &used);
      if (used != dash) throw std::invalid_argument("");
    }
    const std::string rest = dash == std::string::npos ? text : text.substr(dash + 1);
    int last = std::stoi(rest, &used);
    if (used != rest.size()) throw std::invalid_argument("");
    if (dash == std::string::npos) last += first - 1;  // N: 127.0.0.1..N
    if (first < 1 || last < first || last > 254) throw std::invalid_argument("");
    options.first_source = static_cast<unsigned>(first);
    options.source_addresses = static_cast<unsigned>(last - first + 1);
  }
}

/// Writes the result as JSON to `json_file` (if one was given), then the summary on stdout.
/// Returns the exit status: 1 when the file cannot be written or no connection opened, 3 when an
/// open loop fell below 0.95 of its rate (the run is invalid), else 0.
int report(const cm::load::Result& result, const std::string& json_file) {
  if (!json_file.empty()) {
    std::ofstream out(json_file);
    out << cm::load::to_json(result).dump(2) << "\n";
    if (!out) {
      std::cerr << "cm-load: cannot write " << json_file << "\n";
      return 1;
    }
  }
  if (result.connections_open == 0 && result.requests == 0 && result.duration_s == 0) {
    std::cerr << "cm-load: no connection could be opened\n";
    return 1;
  }
  cm::load::print_summary(std::cout, result);
  return result.valid() ? 0 : 3;
}

/// `cm-load merge A.json B.json ... [--json OUT]`: the runs as one (load.hpp, merge()).
int merge_command(int argc, char** argv) {
  CLI::App app{"cm-load merge: several runs of one row, run at the same time, as one result"};
  std::vector<std::string> files;
  std::string json_file;
  app.add_option("files", files, "the runs' --json files")->required()->expected(2, 1000);
  app.add_option("--json", json_file, "write the merged result as JSON to FILE");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  std::vector<cm::load::Result> runs;
  try {
    for (const std::string& file : files) {
      std::ifstream in(file);
      if (!in) throw std::invalid_argument("cannot read " + file);
      runs.push_back(cm::load::from_json(nlohmann::json::parse(in)));
    }
    return report(cm::load::merge(runs), json_file);
  } catch (const std::exception& e) {  // a file that is not a cm-load JSON, or runs that differ
    std::cerr << "cm-load merge: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "merge") return merge_command(argc - 1, argv + 1);
  CommandLine cl;
  CLI::App app{"cm-load: HTTP/1.1 load that checks every answer (closed loop; --rate: open)"};
  add_options(app, cl);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  try {
    convert_options(cl);
  } catch (const std::invalid_argument& e) {
    std::cerr << "cm-load: " << (*e.what() ? e.what() : "--source-addresses: auto, N (1..254) or A-B (1 <= A <= B <= 254)")
              << "\n";
    return 2;
  } catch (const std::out_of_range&) {
    std::cerr << "cm-load: --source-addresses: auto, N (1..254) or A-B (1 <= A <= B <= 254)\n";
    return 2;
  }
  cl.options.log = &std::cerr;
  cl.options.progress = !cl.quiet;

  cm::load::Result result;
  try {
    result = cm::load::run(cl.options);
  } catch (const std::invalid_argument& e) {
    std::cerr << "cm-load: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "cm-load: " << e.what() << "\n";
    return 1;
  }
  return report(result, cl.json_file);
}
