// cm-load -- a closed-loop HTTP/1.1 load generator that checks every answer.
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
//
// This file only reads the command line; the work is in load.cpp and worker.cpp.

#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>

#include "load.hpp"

int main(int argc, char** argv) {
  cm::load::Options options;
  std::string delay, json_file, source_addresses = "auto";
  unsigned timeout_ms = 10'000;
  long spin_us = options.spin.count();
  std::uint64_t min_latency_ms = 0;
  std::string expect_body;
  double stagger_ms = 0;
  bool quiet = false;

  CLI::App app{"cm-load: closed-loop HTTP/1.1 load that checks every answer"};
  app.add_option("url", options.url, "http://HOST:PORT/path; the path may hold {ms}")->required();
  app.add_option("-c,--connections", options.connections, "connections held for the whole run")
      ->capture_default_str();
  app.add_option("-t,--threads", options.threads, "client threads (event loops)")
      ->capture_default_str();
  app.add_option("--delay", delay, "ms for {ms}: MS, or MIN:MAX drawn uniformly per request");
  app.add_flag("--stagger", options.stagger,
               "spread the first requests over the mean --delay: connection i of N sends its "
               "first at i*delay/N after the connect phase, so they do not answer in waves");
  auto* stagger_opt = app.add_option(
      "--stagger-ms", stagger_ms,
      "the spread of --stagger in ms (implies --stagger; needed when the URL has no {ms})");
  app.add_option("-d,--duration", options.duration_s, "measured window, seconds")
      ->capture_default_str();
  app.add_option("--warmup", options.warmup_s, "warm-up before the window, seconds (not counted)")
      ->capture_default_str();
  app.add_option("--timeout", timeout_ms, "ms before an unanswered request is a timeout error")
      ->capture_default_str();
  app.add_option("--connect-phase", options.connect_phase_s,
                 "seconds the connect phase may take at most before the run starts with the "
                 "connections open (the rest keep trying)")
      ->capture_default_str();
  app.add_option("--spin-us", spin_us,
                 "after an event, poll without sleeping this long before sleeping in epoll_wait "
                 "(0: always sleep); idle polling is reported apart from the CPU time")
      ->capture_default_str();
  app.add_option("--expect-status", options.expect_status, "status of a correct answer")
      ->capture_default_str();
  auto* body_opt = app.add_option("--expect-body", expect_body,
                                  "body of a correct answer (default: from the URL)");
  auto* latency_opt = app.add_option("--min-latency-ms", min_latency_ms,
                                     "an answer faster than this is early (default: the delay)");
  app.add_option("--json", json_file, "write the result as JSON to FILE");
  app.add_flag("-q,--quiet", quiet, "no progress line each second");
  app.add_option("--source-addresses", source_addresses,
                 "auto, or N: spread connections over 127.0.0.1..127.0.0.N")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  try {
    options.timeout = std::chrono::milliseconds(timeout_ms);
    options.spin = std::chrono::microseconds(spin_us);
    if (!delay.empty()) options.delay = cm::load::DelayRange::parse(delay);
    if (*body_opt) options.expect_body = expect_body;
    if (*latency_opt) options.min_latency_ms = min_latency_ms;
    if (*stagger_opt) {
      options.stagger = true;
      options.stagger_ms = stagger_ms;
    }
    if (source_addresses != "auto") {
      std::size_t used = 0;
      int n = std::stoi(source_addresses, &used);
      if (used != source_addresses.size() || n < 1 || n > 254) throw std::invalid_argument("");
      options.source_addresses = static_cast<unsigned>(n);
    }
  } catch (const std::invalid_argument& e) {
    std::cerr << "cm-load: " << (*e.what() ? e.what() : "--source-addresses: auto or 1..254")
              << "\n";
    return 2;
  } catch (const std::out_of_range&) {
    std::cerr << "cm-load: --source-addresses: auto or 1..254\n";
    return 2;
  }
  options.log = &std::cerr;
  options.progress = !quiet;

  cm::load::Result result;
  try {
    result = cm::load::run(options);
  } catch (const std::invalid_argument& e) {
    std::cerr << "cm-load: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "cm-load: " << e.what() << "\n";
    return 1;
  }

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
  return 0;
}
