#include "runner.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "cm/fd.hpp"
#include "proc.hpp"
#include "rounds.hpp"

namespace cm::price {
namespace {

using nlohmann::json;
using clock_type = std::chrono::steady_clock;
namespace fs = std::filesystem;

double now_s() {
  return std::chrono::duration<double>(clock_type::now().time_since_epoch()).count();
}

std::string read_file(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The last non-empty lines of a log, joined with " | ", for an error message.
std::string tail(const fs::path& file, std::size_t lines = 3) {
  std::vector<std::string> all;
  std::istringstream in(read_file(file));
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) all.push_back(l);
  std::string out;
  for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i)
    out += (out.empty() ? "" : " | ") + all[i];
  return out.empty() ? "(no output)" : out;
}

/// An executable found in PATH or the sbin directories, or an empty path.
fs::path find_program(const std::string& name) {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  path += ":/usr/sbin:/sbin:/usr/local/sbin";
  std::istringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const fs::path candidate = fs::path(dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

/// A port that was free a moment ago (for nginx, which cannot report the one it picked).
std::uint16_t free_port() {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (!fd || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::system_error(errno, std::generic_category(), "pick a free port on 127.0.0.1");
  return ntohs(addr.sin_port);
}

bool accepts_connections(std::uint16_t port) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return fd && ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
}

std::string arg_value(const std::vector<std::string>& args, const std::string& flag,
                      const std::string& fallback) {
  for (std::size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == flag) return args[i + 1];
  for (const auto& a : args)
    if (a.starts_with(flag + "=")) return a.substr(flag.size() + 1);
  return fallback;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
  return s;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

/// A server process for one row: cm-server, nginx or node, on a port of its own.
class RunningServer {
 public:
  RunningServer(const Target& target, const Profile& profile, const Settings& settings,
                const std::string& tag)
      : tree_(target.kind == ServerKind::peer) {
    const fs::path log = settings.work_dir / (tag + ".log");
    std::error_code ignored;
    fs::remove(log, ignored);
    if (target.name == "nginx") {
      start_nginx(profile, settings, tag, log);
    } else {
      const fs::path port_file = settings.work_dir / (tag + ".port");
      fs::remove(port_file, ignored);
      std::vector<std::string> argv;
      if (target.name == "node") {
        argv = {find_program("node").string(),
                (settings.source_dir / "harness/peers/delay-server.js").string(),
                "--port",
                "0",
                "--port-file",
                port_file.string()};
      } else {
        argv = {(settings.bin_dir / "cm-server").string(),
                "--model",
                target.name,
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--port-file",
                port_file.string()};
        if (target.kind == ServerKind::blocking) {
          argv.insert(argv.end(), {"--threads", std::to_string(profile.blocking_workers)});
        } else {
          argv.insert(argv.end(), {"--threads", std::to_string(settings.loops),
                                   "--blocking-threads", std::to_string(profile.pool)});
        }
        argv.insert(argv.end(), target.variant.server_args.begin(),
                    target.variant.server_args.end());
      }
      command_ = argv;
      child_.emplace(argv, settings.server_cpus, log);
      const auto deadline = clock_type::now() + std::chrono::seconds(15);
      for (;;) {
        const std::string text = read_file(port_file);
        if (!text.empty() && text.back() == '\n') {
          port_ = static_cast<std::uint16_t>(std::stoul(text));
          break;
        }
        if (!child_->running())
          throw std::runtime_error(target.name + " exited at start: " + tail(log));
        if (clock_type::now() > deadline)
          throw std::runtime_error(target.name + " wrote no port within 15 s: " + tail(log));
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }

  std::uint16_t port() const { return port_; }
  pid_t pid() const { return child_->pid(); }
  const std::vector<std::string>& command() const { return command_; }
  /// CPU seconds of the server (its whole process tree for a peer).
  double cpu_seconds() const {
    return tree_ ? tree_cpu_seconds(pid()) : process_cpu_seconds(pid());
  }
  std::uint64_t status_kib(const std::string& key) const {
    return tree_ ? tree_status_kib(pid(), key) : process_status_kib(pid(), key);
  }
  bool running() { return child_->running(); }
  std::string stop() { return child_->stop(); }

 private:
  void start_nginx(const Profile&, const Settings& settings, const std::string& tag,
                   const fs::path& log) {
    const fs::path nginx = find_program("nginx");
    const fs::path prefix = settings.work_dir / ("nginx-" + tag);
    fs::create_directories(prefix);
    const std::string templ = read_file(settings.source_dir / "harness/peers/nginx.conf.in");
    if (templ.empty()) throw std::runtime_error("harness/peers/nginx.conf.in is missing");
    const unsigned workers = std::max<std::size_t>(1, settings.server_cpus.size());
    // The port is picked free, then handed to nginx: another process may take it meanwhile,
    // so a start that fails is tried again on a new port.
    for (int attempt = 0; attempt < 3; ++attempt) {
      port_ = free_port();
      std::string conf = replace_all(templ, "@PORT@", std::to_string(port_));
      conf = replace_all(conf, "@WORKERS@", std::to_string(workers));
      conf = replace_all(conf, "@PREFIX@", prefix.string());
      std::ofstream(prefix / "nginx.conf") << conf;
      command_ = {nginx.string(),        "-e", (prefix / "error.log").string(), "-p",
                  prefix.string() + "/", "-c", (prefix / "nginx.conf").string()};
      child_.emplace(command_, settings.server_cpus, log);
      const auto deadline = clock_type::now() + std::chrono::seconds(10);
      while (child_->running() && !accepts_connections(port_) && clock_type::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (child_->running() && accepts_connections(port_)) return;
      child_->stop();
    }
    throw std::runtime_error("nginx did not start: " + tail(prefix / "error.log") + " " +
                             tail(log));
  }

  bool tree_;
  std::optional<Child> child_;
  std::uint16_t port_ = 0;
  std::vector<std::string> command_;
};

std::vector<std::string> built_models(const fs::path& cm_server) {
  const std::string cmd = "'" + cm_server.string() + "' --list-models";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) throw std::system_error(errno, std::generic_category(), "run " + cmd);
  std::vector<std::string> names;
  char line[512];
  while (std::fgets(line, sizeof line, pipe)) {
    std::istringstream in(line);
    std::string name;
    if (in >> name) names.push_back(name);
  }
  const int status = ::pclose(pipe);
  if (status != 0 || names.empty())
    throw std::system_error(
        ECHILD, std::generic_category(),
        cmd + " failed (" + describe_wait_status(status) + "): is cm-server built?");
  return names;
}

std::vector<Target> plan_targets(const Profile& profile, const std::vector<std::string>& built,
                                 const std::vector<std::string>& only, bool peers,
                                 std::vector<std::string>& skipped) {
  for (const auto& name : only) {
    const bool known = std::find(built.begin(), built.end(), name) != built.end();
    const bool peer = name == "nginx" || name == "node";
    if (!known && !peer)
      throw std::invalid_argument("--models: \"" + name + "\" is not a built model (built: " + [&] {
        std::string s;
        for (const auto& b : built)
          s += (s.empty() ? "" : ", ") + b;
        return s;
      }() + ")");
  }
  auto wanted = [&](const std::string& name) {
    return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
  };
  std::vector<Target> targets;
  for (const auto& name : built) {
    if (!wanted(name)) continue;
    const ServerKind kind = name == "blocking" ? ServerKind::blocking : ServerKind::async;
    if (profile.models == "async" && kind == ServerKind::blocking) continue;
    for (const auto& v : profile.variants)
      targets.push_back({name, kind, v});
  }
  if (peers) {
    for (const auto& peer : profile.peers) {
      if (!only.empty() && !wanted(peer)) continue;
      if (find_program(peer).empty()) {
        skipped.push_back(peer + ": not installed (scripts/install-deps installs " +
                          (peer == "nginx" ? "nginx-light" : "nodejs") + ")");
        continue;
      }
      targets.push_back({peer, ServerKind::peer, {"-", {}}});
    }
  }
  return targets;
}

ServerShape shape_of(const Target& target, const Profile& profile, const Settings& settings) {
  ServerShape s;
  s.kind = target.kind;
  s.workers = profile.blocking_workers;
  s.loops = settings.loops;
  s.pool = profile.pool;
  s.offload = arg_value(target.variant.server_args, "--offload", "standard");
  s.wait_mode = arg_value(target.variant.server_args, "--wait-mode", "timer");
  return s;
}

std::vector<Row> rows_for(const Target& target, const std::vector<Row>& rows) {
  std::vector<Row> out;
  for (const auto& r : rows) {
    if (target.name == "nginx" && r.path != "/plaintext") continue;
    if (target.name == "node" && r.path != "/plaintext" && !r.path.starts_with("/delay/")) continue;
    out.push_back(r);
  }
  return out;
}

ValidationPlan validation_plan_for(const Target& target, const std::vector<Row>& rows) {
  ValidationPlan plan;
  // Every model implements the whole route spec: its /delay is always validated.
  plan.delay = target.kind != ServerKind::peer;
  for (const auto& r : rows) {
    if (r.path == "/plaintext") plan.plaintext = true;
    if (r.path.starts_with("/delay/")) plan.delay = true;
    if (r.path.starts_with("/block/")) plan.block = true;
    if (r.path.starts_with("/cpu/") && r.compute_us > 0)
      plan.cpu_us.push_back(static_cast<unsigned>(r.compute_us));
  }
  return plan;
}

double cpu_between(const std::vector<std::pair<double, double>>& samples, double t0, double t1) {
  if (samples.empty()) return 0;
  auto at = [&](double t) {
    if (t <= samples.front().first) return samples.front().second;
    if (t >= samples.back().first) return samples.back().second;
    const auto it = std::lower_bound(samples.begin(), samples.end(), std::make_pair(t, -1e300));
    const auto& [ta, ca] = *(it - 1);
    const auto& [tb, cb] = *it;
    return tb > ta ? ca + (cb - ca) * (t - ta) / (tb - ta) : cb;
  };
  return std::max(0.0, at(t1) - at(t0));
}

std::size_t load_cpu_count(const Settings& settings) {
  return std::max<std::size_t>(
      1, settings.load_cpus.empty() ? static_cast<std::size_t>(std::thread::hardware_concurrency())
                                    : settings.load_cpus.size());
}

namespace {

std::string threads_description(const Target& target, const ServerShape& shape,
                                const Settings& settings) {
  switch (target.kind) {
    case ServerKind::blocking:
      return std::to_string(shape.workers) + " workers";
    case ServerKind::async:
      return std::to_string(shape.loops) + (shape.loops == 1 ? " loop" : " loops") + ", pool " +
             std::to_string(shape.pool);
    case ServerKind::peer:
      if (target.name == "nginx") {
        const auto n = std::max<std::size_t>(1, settings.server_cpus.size());
        return std::to_string(n) + (n == 1 ? " worker process" : " worker processes");
      }
      return "1 event loop";
  }
  return "";
}

/// For a row bound by its connections whose connections were all served: a closed loop's rps is
/// connections / mean latency, so the shortfall is the answers' lateness (overshoot).
std::string overshoot_account(const RowResult& r, double offered, double mean_delay_ms) {
  if (mean_delay_ms <= 0 || r.served < 0.9 * offered || r.ceilings.bound() != "connections")
    return "";
  const double mean_latency_ms = r.load.at("latency_us").at("mean").get<double>() / 1000;
  return "; every connection was served, and answers came on average " +
         fmt("%.2f", mean_latency_ms - mean_delay_ms) + " ms after their delay (mean latency " +
         fmt("%.2f", mean_latency_ms) + " ms for " + fmt("%g", mean_delay_ms) +
         " ms): connections / mean latency = " + fmt("%.0f", offered / (mean_latency_ms / 1000)) +
         " rps, so the time went into that overshoot";
}

/// Runs cm-load against a fresh server for one round of one row: the figures, not yet priced.
RowResult measure_row(const Target& target, const Profile& profile, const Settings& settings,
                      const Row& row, unsigned round, std::size_t sequence) {
  const ServerShape shape = shape_of(target, profile, settings);
  RowResult r;
  r.server = target.name;
  r.variant = target.variant.name;
  r.threads = threads_description(target, shape, settings);
  r.row = row;
  r.round = round;
  r.sequence = sequence;
  const std::string tag = target.name + "-" + target.variant.name + "-" + std::to_string(sequence);

  RunningServer server(target, profile, settings, tag);
  // Let the server settle (threads started, first allocations done) before the baseline.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  r.idle_rss_kib = server.status_kib("VmRSS");

  const fs::path json_file = settings.work_dir / (tag + ".load.json");
  const fs::path load_log = settings.work_dir / (tag + ".load.log");
  std::error_code ignored;
  fs::remove(json_file, ignored);
  fs::remove(load_log, ignored);
  std::vector<std::string> argv{(settings.bin_dir / "cm-load").string(),
                                "http://127.0.0.1:" + std::to_string(server.port()) + row.path,
                                "--connections",
                                std::to_string(row.connections),
                                "--threads",
                                std::to_string(settings.load_threads),
                                "--duration",
                                fmt("%g", profile.duration_s),
                                "--warmup",
                                fmt("%g", profile.warmup_s),
                                "--timeout",
                                std::to_string(effective_timeout_ms(profile, row)),
                                "--json",
                                json_file.string(),
                                "--quiet"};
  if (row.delay) argv.insert(argv.end(), {"--delay", *row.delay});
  if (row.stagger && settings.load_has_stagger) {
    argv.push_back("--stagger");
    r.stagger_passed = true;
  }

  // The server's CPU time, sampled every 50 ms while the load runs.
  std::vector<std::pair<double, double>> samples;
  std::mutex samples_mutex;
  std::jthread sampler([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      try {
        const double cpu = server.cpu_seconds();
        std::lock_guard lock(samples_mutex);
        samples.emplace_back(now_s(), cpu);
      } catch (const std::exception&) {
        return;  // the server is gone; the row reports it below
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  // What the rest of the machine did while cm-load ran: /proc/stat around it, less the server's
  // CPU and cm-load's (the children this process reaps: only cm-load ends meanwhile).
  std::optional<MachineTicks> ticks_before;
  double server_cpu_before = 0;
  try {
    ticks_before = machine_ticks();
    server_cpu_before = server.cpu_seconds();
  } catch (const std::exception&) {
    ticks_before.reset();
  }
  const double children_before = reaped_children_cpu_seconds();
  Child load(argv, settings.load_cpus, load_log);
  const auto limit =
      std::chrono::seconds(static_cast<long>(profile.warmup_s + profile.duration_s) + 120);
  // cm-load says how many connections it opened as soon as it has, then warms up: the moment that
  // line appears places the measured window on the server's CPU samples.
  std::optional<double> connected;
  std::optional<int> status;
  const auto deadline = clock_type::now() + limit;
  while (!(status = load.wait_for(std::chrono::milliseconds(5))) && clock_type::now() < deadline) {
    if (!connected && read_file(load_log).find("opened") != std::string::npos) connected = now_s();
  }
  const double exited = now_s();
  if (status && ticks_before) {
    try {
      const double load_cpu = reaped_children_cpu_seconds() - children_before;
      r.machine =
          machine_share(*ticks_before, machine_ticks(), server.cpu_seconds() - server_cpu_before,
                        load_cpu, static_cast<double>(::sysconf(_SC_CLK_TCK)));
    } catch (const std::exception&) {
      r.machine.reset();  // the server is gone, or /proc/stat unreadable: not known
    }
  }
  try {
    r.load_average_1m = load_average_1m();
  } catch (const std::exception&) {
  }
  if (server.running()) {
    try {
      r.peak_rss_kib = server.status_kib("VmHWM");
    } catch (const std::exception&) {
    }
  }
  sampler.request_stop();
  sampler.join();
  const bool server_alive = server.running();
  const std::string stopped = server.stop();

  if (!status) {
    load.stop();
    r.error = "cm-load did not finish within " + std::to_string(limit.count()) + " s";
    return r;
  }
  if (!server_alive)
    r.notes.push_back({"server-exit", "the server exited during the row (" + stopped + ")"});
  else if (stopped != "exit 0")
    r.notes.push_back({"server-stop", "the server ended with " + stopped + " on SIGTERM"});
  if (*status != 0 && !fs::exists(json_file)) {
    r.error = "cm-load " + describe_wait_status(*status) + ": " + tail(load_log);
    return r;
  }
  try {
    std::ifstream in(json_file);
    r.load = json::parse(in);
    r.connections_open = r.load.at("connections_open").get<unsigned>();
    r.rps = r.load.at("rps").get<double>();
    r.served = served_connections(r.rps, r.load.at("latency_us").at("mean").get<double>());
    const double window = r.load.at("duration_s").get<double>();
    // The window starts `warmup_s` after cm-load reported its connections; without that line,
    // it is taken as the last `duration_s` before cm-load exited (it stops when the window ends).
    const double window_start =
        connected ? *connected + r.load.at("warmup_s").get<double>() : exited - window;
    if (!connected)
      r.notes.push_back({"no-opened-line",
                         "cm-load printed no \"opened\" line: the CPU window is the last "
                         "seconds before it exited"});
    std::lock_guard lock(samples_mutex);
    r.server_cpu_s = cpu_between(samples, window_start, window_start + window);
    const double cpus =
        std::max<std::size_t>(1, settings.server_cpus.empty()
                                     ? static_cast<std::size_t>(std::thread::hardware_concurrency())
                                     : settings.server_cpus.size());
    r.server_busy = window > 0 ? r.server_cpu_s / (window * cpus) : 0;
    const double load_cpus = static_cast<double>(load_cpu_count(settings));
    // cm-load's client_cpu_s covers its measured window; client_spin_s is the part of it spent
    // polling with nothing to do (its --spin-us), which is not load it generated.
    const double load_work_s =
        r.load.at("client_cpu_s").get<double>() - r.load.value("client_spin_s", 0.0);
    r.load_busy = window > 0 ? std::max(0.0, load_work_s) / (window * load_cpus) : 0;
    // Checked here, so that pricing and the report can read them without a second look.
    if (!r.load.at("connect_failures").is_object())
      throw std::runtime_error("connect_failures is not an object");
    if (!r.load.at("delay_ms").is_null() && !r.load.at("delay_ms").is_object())
      throw std::runtime_error("delay_ms is neither null nor an object");
    r.load.at("errors").at("timeout").get<long long>();
    r.load.at("errors_total").get<long long>();
    for (const char* key : {"mean", "p50", "p99"}) {
      r.load.at("latency_us").at(key).get<double>();
      r.load.at("overshoot_us").at(key).get<double>();
    }
  } catch (const std::exception& e) {
    r.error =
        "cm-load's JSON (" + json_file.string() + ") is not what the contract says: " + e.what();
    r.load = json();
    return r;
  }
  if (*status != 0)
    r.notes.push_back(
        {"load-status", "cm-load " + describe_wait_status(*status) + ": " + tail(load_log, 1)});
  return r;
}

}  // namespace

void price_round(RowResult& r, ServerKind kind, const ServerShape& shape,
                 std::optional<double> cpu_rps, unsigned server_cpus) {
  if (!r.error.empty() || !r.load.is_object()) return;
  const Row& row = r.row;
  const auto& delay = r.load.at("delay_ms");
  const double mean_delay = delay.is_object() ? delay.at("mean").get<double>() : row.mean_delay_ms;
  // The connections offered: all that were asked for unless some could not connect. (cm-load's
  // connections_open is a snapshot at the end, lower while timed-out ones reconnect.)
  const bool connect_failed = !r.load.at("connect_failures").empty();
  const double offered = connect_failed ? r.connections_open : row.connections;
  r.connections_offered = offered;
  CeilingInputs in;
  in.connections = offered;
  in.mean_delay_ms = mean_delay;
  in.threads = waiting_threads(shape, row.path);
  in.cpu_rps = row.cpu_ceiling ? std::optional<double>(r.rps) : cpu_rps;
  in.compute_us = row.compute_us;
  in.server_cpus = std::max(1u, server_cpus);
  r.ceilings = compute_ceilings(in);
  r.efficiency.reset();
  if (!row.cpu_ceiling) r.efficiency = efficiency(r.rps, r.ceilings);

  // Say what the numbers alone do not.
  if (connect_failed) {
    std::string why;
    for (const auto& [reason, count] : r.load.at("connect_failures").items())
      why += (why.empty() ? "" : ", ") + reason + " x" + std::to_string(count.get<long long>());
    r.notes.push_back({"connect-failed", "cm-load could not open every connection (" + why + "); " +
                                             std::to_string(r.connections_open) + " of " +
                                             std::to_string(row.connections) +
                                             " were open at the end, and the ceilings use that"});
  } else if (r.connections_open < row.connections) {
    r.notes.push_back(
        {"not-open", std::to_string(r.connections_open) + " of " + std::to_string(row.connections) +
                         " connections were open at the end of the run (the others were "
                         "reconnecting after a timeout or reset)"});
  }
  // In a closed loop every open connection always has a request in flight, so rps x mean latency
  // should be the connections open; well below, some connections were not being served.
  if (offered > 0 && r.served < 0.9 * offered) {
    const auto unserved = static_cast<long long>(std::llround(offered - r.served));
    const auto timeouts = r.load.at("errors").at("timeout").get<long long>();
    std::string note = "about " + fmt("%.0f", r.served) + " of " + fmt("%.0f", offered) +
                       " connections were served (rps x mean latency)";
    if (kind == ServerKind::blocking) {
      note +=
          "; the other ~" + std::to_string(unserved) +
          " got no answer during the run: with keep-alive a worker serves one connection until it "
          "closes, so connections beyond the " +
          std::to_string(shape.workers) +
          " workers wait in the accept queue (a property of the model, not a validation failure)";
    } else if (timeouts > 0) {
      note += "; the other ~" + std::to_string(unserved) + " waited past cm-load's timeout";
    } else {
      note +=
          "; no request timed out, so the rest of the time went between answers (cm-load CPU "
          "busy " +
          fmt("%.0f", r.load_busy * 100) + "%)";
    }
    note += "; cm-load counted " + std::to_string(timeouts) + " timeouts";
    if (r.load.contains("reconnects"))
      note +=
          " and reconnected " + std::to_string(r.load["reconnects"].get<long long>()) + " times";
    r.notes.push_back({"unserved", note});
  }
  // An async model's /block: more connections than pool threads queue for the pool.
  if (kind == ServerKind::async && in.threads && offered > *in.threads && mean_delay > 0) {
    r.notes.push_back(
        {"pool-queue", fmt("%.0f", offered) + " connections share " + fmt("%.0f", *in.threads) +
                           " threads for a " + fmt("%g", mean_delay) +
                           " ms blocking call, so a request queues about (" + fmt("%.0f", offered) +
                           " / " + fmt("%.0f", *in.threads) + " - 1) x " + fmt("%g", mean_delay) +
                           " = " + fmt("%.0f", (offered / *in.threads - 1) * mean_delay) +
                           " ms for one: that is its overshoot, not a late timer"});
  }
  if (r.efficiency && *r.efficiency < 0.97) {
    r.notes.push_back(
        {"short", "reached " + fmt("%.1f", *r.efficiency * 100) + "% of its " + r.ceilings.bound() +
                      " ceiling; server CPU busy " + fmt("%.0f", r.server_busy * 100) + "% of " +
                      std::to_string(in.server_cpus) + " CPU(s), cm-load CPU busy " +
                      fmt("%.0f", r.load_busy * 100) + "%, p99 overshoot " +
                      fmt("%.2f", r.load.at("overshoot_us").at("p99").get<double>() / 1000) +
                      " ms, " + std::to_string(r.load.at("errors_total").get<long long>()) +
                      " errors" + overshoot_account(r, offered, mean_delay)});
  }
}

void price_rounds(TargetResult& t, const ServerShape& shape, unsigned server_cpus,
                  const std::vector<std::optional<double>>* inherited) {
  std::size_t rounds = inherited ? inherited->size() : 0;
  for (const auto& rr : t.rows)
    rounds = std::max(rounds, rr.rounds.size());
  t.cpu_rps.assign(rounds, std::nullopt);
  for (std::size_t k = 0; k < rounds; ++k) {
    if (inherited) {
      if (k < inherited->size()) t.cpu_rps[k] = (*inherited)[k];
      continue;
    }
    for (const auto& rr : t.rows) {
      if (!rr.row.cpu_ceiling || k >= rr.rounds.size()) continue;
      const RowResult& c = rr.rounds[k];
      if (c.error.empty() && c.load.is_object()) {
        t.cpu_rps[k] = c.rps;
        break;
      }
    }
  }
  const bool has_ceiling =
      inherited || std::any_of(t.rows.begin(), t.rows.end(),
                               [](const RowRounds& rr) { return rr.row.cpu_ceiling; });
  for (auto& rr : t.rows) {
    for (std::size_t k = 0; k < rr.rounds.size(); ++k) {
      RowResult& r = rr.rounds[k];
      price_round(r, t.target.kind, shape, t.cpu_rps[k], server_cpus);
      if (!r.error.empty() || !r.load.is_object()) continue;
      if (has_ceiling && !rr.row.cpu_ceiling && !t.cpu_rps[k])
        r.notes.push_back({"no-cpu-ceiling",
                           "no CPU ceiling in this round: its CPU-ceiling row was not measured"});
      if (inherited && rr.row.path == "/plaintext" && t.cpu_rps[k])
        r.notes.push_back({"inherited", "priced against " + t.target.name + "'s CPU ceiling from " +
                                            t.cpu_ceiling_from + " in the same round (" +
                                            fmt("%.0f", *t.cpu_rps[k]) + " rps)"});
    }
  }
}

bool load_supports(const fs::path& program, const std::string& flag) {
  const std::string cmd = "'" + program.string() + "' --help 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return false;
  std::string out;
  char buf[1024];
  while (std::fgets(buf, sizeof buf, pipe))
    out += buf;
  ::pclose(pipe);
  // The flag as a word of its own: "--stagger" but not "--stagger-ms" alone.
  for (std::size_t pos = out.find(flag); pos != std::string::npos; pos = out.find(flag, pos + 1)) {
    const std::size_t end = pos + flag.size();
    if (end == out.size() ||
        !(std::isalnum(static_cast<unsigned char>(out[end])) || out[end] == '-' || out[end] == '_'))
      return true;
  }
  return false;
}

std::vector<std::size_t> ceiling_sources(const std::vector<Target>& targets) {
  std::vector<std::size_t> out(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    out[i] = i;
    for (std::size_t j = 0; j < i; ++j) {
      if (targets[j].name == targets[i].name) {
        out[i] = j;
        break;
      }
    }
  }
  return out;
}

std::vector<TargetResult> price_targets(const std::vector<Target>& targets, const Profile& profile,
                                        const Settings& settings) {
  const auto all_rows = expand_rows(profile);
  const auto sources = ceiling_sources(targets);
  std::vector<TargetResult> results(targets.size());
  auto label = [](const Target& t) {
    return t.name + (t.variant.name == "-" || t.variant.name == "standard"
                         ? ""
                         : " (" + t.variant.name + ")");
  };

  // Validate each target once, on a server of its own, so the rows start from a fresh one.
  std::vector<std::vector<bool>> runs_row(targets.size(), std::vector<bool>(all_rows.size()));
  for (std::size_t t = 0; t < targets.size(); ++t) {
    TargetResult& result = results[t];
    const Target& target = targets[t];
    result.target = target;
    auto rows = rows_for(target, all_rows);
    if (sources[t] != t) {
      result.cpu_ceiling_from = "variant " + targets[sources[t]].variant.name;
      for (auto& row : rows)
        row.cpu_ceiling = false;  // priced against the ceiling it inherits
    } else {
      for (const auto& row : rows)
        if (row.cpu_ceiling) {
          result.cpu_ceiling_from = "its " + row.path + " row";
          break;
        }
    }
    if (rows.empty()) {
      result.refused = "no row of this profile applies to it";
      continue;
    }
    try {
      if (settings.progress) std::cerr << "cm-price: " << label(target) << ": validating\n";
      RunningServer server(target, profile, settings,
                           target.name + "-" + target.variant.name + "-validate");
      result.validation = validate_server(server.port(), validation_plan_for(target, rows));
      server.stop();
    } catch (const std::exception& e) {
      result.refused = std::string("could not start: ") + e.what();
    }
    if (result.refused.empty() && !result.validation.ok)
      result.refused = "failed validation: " + result.validation.failure;
    if (!result.refused.empty()) {
      if (settings.progress)
        std::cerr << "cm-price: " << label(target) << " not priced: " << result.refused << "\n";
      continue;
    }
    result.priced = true;
    for (auto& row : rows) {
      for (std::size_t i = 0; i < all_rows.size(); ++i) {
        if (same_row(row, all_rows[i])) {
          runs_row[t][i] = true;
          RowRounds rr;
          rr.row = row;
          rr.rounds.resize(profile.rounds);
          result.rows.push_back(std::move(rr));
          break;
        }
      }
    }
  }

  // Every run, interleaved: row by row, round after round, the servers in each round's order.
  const auto steps = schedule(runs_row, profile.rounds);
  for (std::size_t n = 0; n < steps.size(); ++n) {
    const Step& step = steps[n];
    const Target& target = targets[step.target];
    TargetResult& result = results[step.target];
    auto rr = std::find_if(result.rows.begin(), result.rows.end(),
                           [&](const RowRounds& x) { return same_row(x.row, all_rows[step.row]); });
    const Row& row = rr->row;
    if (settings.progress) {
      std::cerr << "cm-price: [" << n + 1 << "/" << steps.size() << "] round " << step.round + 1
                << "/" << profile.rounds << ", " << label(target) << ": " << row.path
                << (row.delay ? " delay " + *row.delay + " ms" : "") << ", " << row.connections
                << " connections" << (row.stagger && settings.load_has_stagger ? ", staggered" : "")
                << ", " << profile.warmup_s << " + " << profile.duration_s << " s\n";
    }
    RowResult r;
    try {
      r = measure_row(target, profile, settings, row, step.round, n);
    } catch (const std::exception& e) {
      r.server = target.name;
      r.variant = target.variant.name;
      r.row = row;
      r.round = step.round;
      r.sequence = n;
      r.error = e.what();
    }
    rr->rounds[step.round] = std::move(r);
  }
  // A round that never ran (its server was not priced) still names its row.
  for (auto& result : results)
    for (auto& rr : result.rows)
      for (std::size_t k = 0; k < rr.rounds.size(); ++k)
        if (rr.rounds[k].server.empty()) {
          rr.rounds[k].server = result.target.name;
          rr.rounds[k].variant = result.target.variant.name;
          rr.rounds[k].row = rr.row;
          rr.rounds[k].round = static_cast<unsigned>(k);
          rr.rounds[k].error = "not run";
        }

  // Price each round against the CPU ceiling of the same round, the sources first.
  const unsigned server_cpus =
      static_cast<unsigned>(std::max<std::size_t>(1, settings.server_cpus.size()));
  for (std::size_t t = 0; t < results.size(); ++t) {
    if (!results[t].priced || sources[t] != t) continue;
    price_rounds(results[t], shape_of(targets[t], profile, settings), server_cpus);
  }
  for (std::size_t t = 0; t < results.size(); ++t) {
    if (!results[t].priced || sources[t] == t) continue;
    const auto& from = results[sources[t]].cpu_rps;
    price_rounds(results[t], shape_of(targets[t], profile, settings), server_cpus, &from);
  }
  return results;
}

}  // namespace cm::price
