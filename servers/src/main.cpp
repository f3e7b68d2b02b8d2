// cm-server -- starts one server of one model.
//
//   cm-server --model blocking --port 8080
//   cm-server --model asio_coro --port 0          # prints the port it picked
//   cm-server --list-models
//
// SIGINT and SIGTERM drain it: they are blocked in every thread and taken by sigwait() in main,
// which calls Server::drain() (stop accepting, close idle connections, answer what is in flight
// with Connection: close), waits up to --drain-ms for every connection to close, then stops.
// A second signal stops at once. Exit status 0, or 3 when requests were cut (one line says how
// many). With --trace FILE, what each request did, on which thread, is written to FILE then
// (Chrome trace-event JSON, cm/trace.hpp; harness/trace-scene draws it).

#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <system_error>

#include "cm/policy.hpp"
#include "cm/registry.hpp"
#include "cm/signals.hpp"
#include "cm/trace.hpp"

namespace {

/// Graceful drain (Server::drain), then stop: exit 0 once every connection is closed, or 3 with
/// the count of requests cut when the deadline or a second signal comes first.
int drain_then_stop(cm::Server& server, const cm::StopSignals& signals,
                    std::chrono::milliseconds limit) {
  server.drain();
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool second_signal = false;
  while (server.open_connections() > 0 && !second_signal &&
         std::chrono::steady_clock::now() < deadline) {
    second_signal = signals.wait_for(std::chrono::milliseconds(10)) != 0;
  }
  const std::size_t cut = server.requests_in_flight();
  server.stop();
  if (cut == 0) {
    std::fprintf(stderr, "cm-server: drained, stopped\n");
    return 0;
  }
  std::fprintf(stderr, "cm-server: stopped by %s with %zu request(s) unanswered\n",
               second_signal ? "a second signal" : "the drain deadline", cut);
  return 3;
}

/// Writes the trace to its file and says where, with what was dropped; false if it failed.
bool write_trace(const cm::Trace& trace, std::ofstream& out, const std::string& path,
                 const std::string& process) {
  trace.write_json(out, process);
  out.close();
  std::fprintf(stderr, "cm-server: trace of %zu events (%zu dropped) written to %s%s\n",
               trace.size(), trace.dropped(), path.c_str(), out ? "" : " -- FAILED");
  return static_cast<bool>(out);
}

/// Where an async model runs a request's step: how it waits, which timers, what it offloads.
void add_step_options(CLI::App& app, cm::ServerOptions& options) {
  static const std::map<std::string, cm::WaitMode> wait_modes{{"timer", cm::WaitMode::timer},
                                                              {"sleep", cm::WaitMode::sleep}};
  static const std::map<std::string, cm::Timers> timers{{"model", cm::Timers::model},
                                                        {"wheel", cm::Timers::wheel}};
  static const std::map<std::string, cm::Offload> offloads{{"standard", cm::Offload::standard},
                                                           {"inline", cm::Offload::inline_},
                                                           {"pool", cm::Offload::pool},
                                                           {"thread", cm::Offload::thread}};
  app.add_option_function<std::string>(
         "--wait-mode", [&options](const std::string& v) { options.wait_mode = wait_modes.at(v); },
         "timer (default) or sleep: the anti-pattern of sleeping on the event loop")
      ->check(CLI::IsMember(wait_modes))
      ->default_str("timer");
  app.add_option_function<std::string>(
         "--timers", [&options](const std::string& v) { options.timers = timers.at(v); },
         "where an async model keeps its waiting requests' timers: model (its own "
         "structure: Asio's timer queue, libuv's heap, an io_uring timeout each) or "
         "wheel (the shared timer wheel, one loop timer for its next tick)")
      ->check(CLI::IsMember(timers))
      ->default_str("model");
  app.add_option_function<std::string>(
         "--offload", [&options](const std::string& v) { options.offload = offloads.at(v); },
         "where an async model runs a step: standard (/block on the pool, the rest on "
         "the loop), inline (all on the loop), pool or thread (all but a /delay there)")
      ->check(CLI::IsMember(offloads))
      ->default_str("standard");
}

/// --db and what goes with it: the database the /db routes query, and how a model waits on it.
void add_database_options(CLI::App& app, cm::DbOptions& db) {
  static const std::map<std::string, cm::DbMode> modes{{"readiness", cm::DbMode::readiness},
                                                       {"blocking", cm::DbMode::blocking},
                                                       {"pool", cm::DbMode::pool}};
  app.add_option("--db", db.conninfo,
                 "the PostgreSQL database of the /db routes: libpq's conninfo or URI "
                 "(harness/db-cluster starts one); without it they answer 503");
  app.add_option("--db-pool", db.pool,
                 "database connections of each event loop (the blocking model: of the server)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1000u));
  app.add_option("--db-queue", db.queue, "requests that may wait for a connection before 503")
      ->capture_default_str();
  app.add_option_function<std::string>(
         "--db-mode", [&db](const std::string& v) { db.mode = modes.at(v); },
         "how an async model waits on the database: readiness (the loop waits for the "
         "socket, in the model's own idiom), blocking (the anti-pattern: the driver blocks "
         "the loop) or pool (the blocking driver on the offload pool)")
      ->check(CLI::IsMember(modes))
      ->default_str("readiness");
  app.add_option_function<unsigned>(
         "--db-timeout", [&db](unsigned ms) { db.timeout = std::chrono::milliseconds(ms); },
         "ms from a /db request to its result (waiting for a connection included); then 503")
      ->default_str(std::to_string(db.timeout.count()))
      ->check(CLI::Range(1u, 3600u * 1000));
}

/// What the command line asks for.
struct Command {
  cm::ServerOptions options;
  std::string model;
  bool list = false;
  std::string port_file;
  std::string trace_file;
  std::string teaching_bug = "none";
  unsigned drain_ms = 10'000;
  unsigned header_timeout_ms = static_cast<unsigned>(options.header_timeout.count());
  unsigned write_timeout_ms = static_cast<unsigned>(options.write_timeout.count());
};

const std::map<std::string, cm::TeachingBug> teaching_bugs{
    {"none", cm::TeachingBug::none}, {"shared-delay", cm::TeachingBug::shared_delay}};

/// The model, where it listens, its threads and queues, its deadlines, and what it writes.
void add_server_options(CLI::App& app, Command& c) {
  app.add_option("--model", c.model, "the model to run (see --list-models)");
  app.add_flag("--list-models", c.list, "list the models built into this binary");
  app.add_option("--host", c.options.host, "address to listen on")->capture_default_str();
  app.add_option("--port", c.options.port, "port (0 picks a free one and prints it)")
      ->capture_default_str();
  app.add_option("--threads", c.options.threads,
                 "event loops (async models; default: the CPUs available) or worker threads "
                 "(blocking; default 64)");
  app.add_option("--blocking-threads", c.options.blocking_threads,
                 "size of the pool /block is offloaded to (async models)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100000u));
  app.add_option("--blocking-queue", c.options.blocking_queue,
                 "requests that may wait for that pool before 503")
      ->capture_default_str();
  app.add_option("--teaching-bug", c.teaching_bug,
                 "A DELIBERATE BUG, for an exercise only (docs/exercises/): shared-delay keeps "
                 "the last /delay value in state shared by every connection, so overlapping "
                 "/delay requests answer each other's value. Default none: no bug")
      ->check(CLI::IsMember(teaching_bugs))
      ->capture_default_str();
  app.add_option("--header-timeout", c.header_timeout_ms,
                 "ms a connection may take to send a request head")
      ->capture_default_str();
  app.add_option("--write-timeout", c.write_timeout_ms,
                 "ms a reply's write may wait for a client that does not read (nginx's "
                 "send_timeout); then the connection is closed")
      ->capture_default_str()
      ->check(CLI::Range(1u, 24u * 3600 * 1000));
  app.add_option("--backlog", c.options.backlog,
                 "listen(2) backlog of each listening socket (the kernel caps it at "
                 "net.core.somaxconn)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--drain-ms", c.drain_ms,
                 "after SIGINT/SIGTERM, how long in-flight requests may take to be answered")
      ->capture_default_str();
  app.add_option("--port-file", c.port_file, "write the bound port to this file once listening");
  app.add_option("--trace", c.trace_file,
                 "record what each request does, on which thread, and write it to this file at "
                 "the stop (Chrome trace-event JSON: open it in Perfetto or chrome://tracing); "
                 "for small scenes, not for load");
}

int list_models() {
  for (const auto& m : cm::built_models()) {
    std::printf("%-18s %.*s\n", std::string(m.name).c_str(), static_cast<int>(m.description.size()),
                m.description.data());
  }
  return 0;
}

/// Starts the server, says where it listens, and serves until a signal drains and stops it.
int serve(Command& c, const cm::StopSignals& signals, cm::Trace* trace, std::ofstream& trace_out) {
  const unsigned long descriptors = cm::raise_descriptor_limit();  // soft up to hard, as Go
  auto server = cm::make_server(c.model, c.options);
  server->start();
  std::printf("cm-server: %s listening on http://%s:%u/ (pid %d, up to %lu descriptors)\n",
              c.model.c_str(), c.options.host.c_str(), server->port(), static_cast<int>(::getpid()),
              descriptors);
  if (c.options.teaching_bug != cm::TeachingBug::none) {
    std::fprintf(stderr,
                 "cm-server: TEACHING BUG %s is ON: some answers are wrong on purpose "
                 "(an exercise; never benchmark or deploy this)\n",
                 c.teaching_bug.c_str());
  }
  std::fflush(stdout);
  if (!c.port_file.empty()) std::ofstream(c.port_file) << server->port() << "\n";
  const int sig = signals.wait();
  std::fprintf(stderr, "cm-server: %s, draining (up to %u ms; a second signal stops at once)\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM", c.drain_ms);
  const int status = drain_then_stop(*server, signals, std::chrono::milliseconds(c.drain_ms));
  server.reset();  // every thread joined, every session gone: the trace is complete
  if (trace && !write_trace(*trace, trace_out, c.trace_file, "cm-server " + c.model)) return 1;
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  cm::StopSignals signals;  // first, before any server thread exists

  CLI::App app{
      "cm-server: one HTTP/1.1 server of the chosen concurrency model. It raises its "
      "soft descriptor limit to the hard one and says in its first line what it runs "
      "with; out of descriptors, it says so on stderr (a line a second at most) and "
      "leaves new clients in the listen backlog until one is free"};
  Command c;
  add_server_options(app, c);
  add_step_options(app, c.options);
  add_database_options(app, c.options.db);
  CLI11_PARSE(app, argc, argv);
  c.options.header_timeout = std::chrono::milliseconds(c.header_timeout_ms);
  c.options.write_timeout = std::chrono::milliseconds(c.write_timeout_ms);
  c.options.teaching_bug = teaching_bugs.at(c.teaching_bug);

  if (c.list) return list_models();
  if (c.model.empty()) {
    std::fprintf(stderr, "cm-server: --model is required (see --list-models)\n");
    return 2;
  }

  std::unique_ptr<cm::Trace> trace;
  std::ofstream trace_out;
  if (!c.trace_file.empty()) {  // opened now, so that a path it cannot write fails before serving
    trace_out.open(c.trace_file);
    if (!trace_out) {
      std::fprintf(stderr, "cm-server: cannot write the trace to %s\n", c.trace_file.c_str());
      return 2;
    }
    trace = std::make_unique<cm::Trace>();
    c.options.trace = trace.get();
  }

  try {
    return serve(c, signals, trace.get(), trace_out);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "cm-server: %s\n", e.what());
    return 2;
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "cm-server: %s\n", e.what());
    return 1;
  }
}
