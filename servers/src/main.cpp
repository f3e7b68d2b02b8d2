// cm-server -- starts one server of one model.
//
//   cm-server --model blocking --port 8080
//   cm-server --model asio_coro --port 0          # prints the port it picked
//   cm-server --list-models
//
// SIGINT and SIGTERM stop it cleanly: they are blocked in every thread and taken by sigwait() in
// main, which then calls Server::stop().

#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <system_error>

#include "cm/registry.hpp"
#include "cm/signals.hpp"

int main(int argc, char** argv) {
  cm::StopSignals signals;  // first, before any server thread exists

  CLI::App app{"cm-server: one HTTP/1.1 server of the chosen concurrency model"};
  cm::ServerOptions options;
  std::string model;
  bool list = false;
  std::string port_file;
  unsigned header_timeout_ms = static_cast<unsigned>(options.header_timeout.count());
  const std::map<std::string, cm::WaitMode> wait_modes{{"timer", cm::WaitMode::timer},
                                                       {"sleep", cm::WaitMode::sleep}};
  const std::map<std::string, cm::Offload> offloads{{"standard", cm::Offload::standard},
                                                    {"inline", cm::Offload::inline_},
                                                    {"pool", cm::Offload::pool},
                                                    {"thread", cm::Offload::thread}};

  app.add_option("--model", model, "the model to run (see --list-models)");
  app.add_flag("--list-models", list, "list the models built into this binary");
  app.add_option("--host", options.host, "address to listen on")->capture_default_str();
  app.add_option("--port", options.port, "port (0 picks a free one and prints it)")
      ->capture_default_str();
  app.add_option("--threads", options.threads,
                 "event loops (async models; default: the CPUs available) or worker threads "
                 "(blocking; default 64)");
  app.add_option("--blocking-threads", options.blocking_threads,
                 "size of the pool /block is offloaded to (async models)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100000u));
  app.add_option("--blocking-queue", options.blocking_queue,
                 "requests that may wait for that pool before 503")
      ->capture_default_str();
  std::string wait_mode = "timer", offload = "standard";
  app.add_option("--wait-mode", wait_mode,
                 "timer (default) or sleep: the anti-pattern of sleeping on the event loop")
      ->check(CLI::IsMember(wait_modes))
      ->capture_default_str();
  app.add_option("--offload", offload,
                 "where an async model runs /block and /cpu: standard, inline, pool, thread")
      ->check(CLI::IsMember(offloads))
      ->capture_default_str();
  app.add_option("--header-timeout", header_timeout_ms,
                 "ms a connection may take to send a request head")
      ->capture_default_str();
  app.add_option("--backlog", options.backlog,
                 "listen(2) backlog of each listening socket (the kernel caps it at "
                 "net.core.somaxconn)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--port-file", port_file, "write the bound port to this file once listening");
  CLI11_PARSE(app, argc, argv);
  options.header_timeout = std::chrono::milliseconds(header_timeout_ms);
  options.wait_mode = wait_modes.at(wait_mode);
  options.offload = offloads.at(offload);

  if (list) {
    for (const auto& m : cm::built_models()) {
      std::printf("%-18s %.*s\n", std::string(m.name).c_str(),
                  static_cast<int>(m.description.size()), m.description.data());
    }
    return 0;
  }
  if (model.empty()) {
    std::fprintf(stderr, "cm-server: --model is required (see --list-models)\n");
    return 2;
  }

  try {
    auto server = cm::make_server(model, options);
    server->start();
    std::printf("cm-server: %s listening on http://%s:%u/ (pid %d)\n", model.c_str(),
                options.host.c_str(), server->port(), static_cast<int>(::getpid()));
    std::fflush(stdout);
    if (!port_file.empty()) {
      std::ofstream(port_file) << server->port() << "\n";
    }
    const int sig = signals.wait();
    std::fprintf(stderr, "cm-server: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    server->stop();
    return 0;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "cm-server: %s\n", e.what());
    return 2;
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "cm-server: %s\n", e.what());
    return 1;
  }
}
