#include "report.hpp"

#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "format.hpp"
#include "proc.hpp"
#include "summary.hpp"

#ifndef CM_COMPILER
#define CM_COMPILER "unknown"
#endif
#ifndef CM_BUILD_TYPE
#define CM_BUILD_TYPE "unknown"
#endif
#ifndef CM_BOOST_VERSION
#define CM_BOOST_VERSION "not found"
#endif
#ifndef CM_LIBUV_VERSION
#define CM_LIBUV_VERSION "not found"
#endif
#ifndef CM_LIBURING_VERSION
#define CM_LIBURING_VERSION "not found"
#endif
#ifndef CM_LLHTTP_VERSION
#define CM_LLHTTP_VERSION "not found"
#endif

namespace cm::price {
namespace {

using nlohmann::json;

/// First line of a command's output (stdout and stderr), or "" when it cannot run.
std::string first_line(const std::string& command) {
  FILE* pipe = ::popen(("(" + command + ") 2>&1").c_str(), "r");
  if (!pipe) return "";
  char line[512] = {0};
  std::string out;
  if (std::fgets(line, sizeof line, pipe)) out = line;
  while (std::fgets(line, sizeof line, pipe)) {
  }
  const int status = ::pclose(pipe);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r'))
    out.pop_back();
  return status == 0 ? out : "";
}

std::string cpuinfo_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("model name")) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

std::string meminfo_total() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("MemTotal:")) {
      std::istringstream v(line.substr(9));
      double kib = 0;
      v >> kib;
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1f GiB", kib / 1024 / 1024);
      return buf;
    }
  }
  return "unknown";
}

/// A figure over its rounds: "v" when one round or all agree, else "median (min–max)", the unit
/// (`suffix`) after each: "96.0% (90.0–97.5%)".
std::string range_text(const std::optional<Spread>& s,
                       const std::function<std::string(double)>& show,
                       const std::string& suffix = "") {
  if (!s) return "-";
  const std::string median = show(s->median) + suffix;
  if (s->n < 2 || show(s->min) == show(s->max)) return median;
  return median + " (" + show(s->min) + "–" + show(s->max) + suffix + ")";
}

std::string percent_range(const std::optional<Spread>& s) {
  return range_text(
      s, [](double v) { return num(v * 100, 1); }, "%");
}

std::string median_text(const std::optional<Spread>& s,
                        const std::function<std::string(double)>& show) {
  return s ? show(s->median) : "-";
}

std::string errors_text(const RowSummary& s) {
  if (s.measured == 0) return "-";
  if (s.errors_total == 0) return "0";
  std::string out = num(static_cast<double>(s.errors_total)) + " (";
  bool first = true;
  for (const auto& [kind, count] : s.errors) {
    if (count == 0) continue;
    out += (first ? "" : ", ") + kind + " " + num(static_cast<double>(count));
    first = false;
  }
  return out + ")";
}

std::string delay_text(const Row& row) {
  if (row.delay) return *row.delay;
  if (row.mean_delay_ms > 0) return num(row.mean_delay_ms);
  return "-";
}

/// "/delay/100, 2,000 conns": the path with its delay, and the connections.
std::string row_text(const Row& row) {
  std::string path = row.path;
  if (row.delay) {
    if (const auto pos = path.find("{ms}"); pos != std::string::npos)
      path.replace(pos, 4, *row.delay);
  }
  return path + ", " + num(row.connections) + " conns";
}

std::string model_text(const std::string& server, const std::string& variant) {
  return server + (variant == "-" || variant == "standard" ? "" : " (" + variant + ")");
}

std::string rounds_text(const RowSummary& s) {
  if (s.measured == s.rounds) return std::to_string(s.rounds);
  return std::to_string(s.measured) + " of " + std::to_string(s.rounds);
}

const auto whole = [](double v) { return num(v); };
const auto two = [](double v) { return num(v, 2); };
const auto one = [](double v) { return num(v, 1); };
const auto three = [](double v) { return num(v, 3); };
const auto percent = [](double v) { return pct(v); };

/// The peers priced in this run, in the order they ran: their rows are the denominators of the
/// "rps / peer" columns.
std::vector<const TargetResult*> priced_peers(const std::vector<TargetResult>& targets) {
  std::vector<const TargetResult*> out;
  for (const auto& t : targets)
    if (t.priced && t.target.kind == ServerKind::peer) out.push_back(&t);
  return out;
}

const RowRounds* find_row(const TargetResult& t, const Row& row) {
  for (const auto& rr : t.rows)
    if (same_row(rr.row, row)) return &rr;
  return nullptr;
}

/// The median of a row's within-round ratios to a peer's same row, with their min-max.
std::optional<Spread> ratio_to(const RowRounds& rr, const TargetResult& self,
                               const TargetResult& peer) {
  if (&self == &peer) return std::nullopt;
  const RowRounds* other = find_row(peer, rr.row);
  if (!other) return std::nullopt;
  return spread_of(peer_ratios(rr, *other));
}

json spread_json(const std::optional<Spread>& s) {
  if (!s) return nullptr;
  return {{"median", s->median},
          {"min", s->min},
          {"max", s->max},
          {"rounds", s->n},
          {"spread", std::isfinite(s->relative()) ? json(s->relative()) : json(nullptr)}};
}

}  // namespace

json machine_info(const std::filesystem::path& source_dir) {
  utsname u{};
  ::uname(&u);
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  json m;
  m["cpu_model"] = cpuinfo_model();
  m["logical_cpus"] = std::thread::hardware_concurrency();
  m["cpus_allowed"] = cpu_list_string(allowed_cpus());
  m["memory"] = meminfo_total();
  m["kernel"] = std::string(u.sysname) + " " + u.release + " " + u.version + " " + u.machine;
  std::string os = first_line("sh -c '. /etc/os-release && echo \"$PRETTY_NAME\"'");
  m["os"] = os.empty() ? "unknown" : os;
  m["open_files_limit"] = {{"soft", files.rlim_cur}, {"hard", files.rlim_max}};
  m["compiler"] = CM_COMPILER;
  m["build_type"] = CM_BUILD_TYPE;
  m["libraries"] = {{"boost", CM_BOOST_VERSION},
                    {"libuv", CM_LIBUV_VERSION},
                    {"liburing", CM_LIBURING_VERSION},
                    {"llhttp", CM_LLHTTP_VERSION}};
  std::string nginx = first_line("nginx -v || /usr/sbin/nginx -v");
  std::string node = first_line("node --version");
  m["peers"] = {{"nginx", nginx.empty() ? "not installed" : nginx},
                {"node", node.empty() ? "not installed" : "node " + node}};
  const std::string uring_disabled = first_line("cat /proc/sys/kernel/io_uring_disabled");
  m["io_uring_disabled"] = uring_disabled.empty() ? "(no such sysctl)" : uring_disabled;
  (void)source_dir;
  return m;
}

json commit_info(const std::filesystem::path& source_dir) {
  const std::string git = "git -C '" + source_dir.string() + "' ";
  json c;
  c["head"] = first_line(git + "rev-parse HEAD");
  if (c["head"].get<std::string>().empty()) c["head"] = "unknown (not a git checkout)";
  // Count the changed and untracked paths outside results/ (which this run rewrites).
  FILE* pipe = ::popen((git + "status --porcelain -- . ':!results' 2>/dev/null").c_str(), "r");
  int changed = 0;
  if (pipe) {
    char line[1024];
    while (std::fgets(line, sizeof line, pipe))
      ++changed;
    ::pclose(pipe);
  }
  c["dirty"] = changed > 0;
  c["changed_paths"] = changed;
  return c;
}

std::string shell_command(int argc, char** argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789-_./=:,@+") == std::string::npos;
    if (!out.empty()) out += ' ';
    if (plain) {
      out += a;
    } else {
      out += '\'';
      for (char ch : a)
        out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      out += '\'';
    }
  }
  return out;
}

json row_json(const RowResult& r) {
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  json j;
  j["server"] = r.server;
  j["variant"] = r.variant;
  j["threads"] = r.threads;
  j["round"] = r.round + 1;
  j["sequence"] = r.sequence + 1;
  j["id"] = r.row.id;
  j["path"] = r.row.path;
  j["delay"] = r.row.delay ? json(*r.row.delay) : json(nullptr);
  j["mean_delay_ms"] = r.row.mean_delay_ms;
  j["compute_us"] = r.row.compute_us;
  j["cpu_ceiling_row"] = r.row.cpu_ceiling;
  j["stagger_asked"] = r.row.stagger;
  j["stagger_passed"] = r.stagger_passed;
  j["connections_requested"] = r.row.connections;
  j["connections_open"] = r.connections_open;
  j["connections_offered"] = r.connections_offered;
  j["ceilings"] = {{"connection", opt(r.ceilings.connection)},
                   {"thread", opt(r.ceilings.thread)},
                   {"cpu", opt(r.ceilings.cpu)}};
  j["bound"] = r.ceilings.bound();
  j["rps"] = r.rps;
  j["efficiency"] = opt(r.efficiency);
  j["served_connections"] = r.served;
  j["server_cpu_s"] = r.server_cpu_s;
  j["server_cpu_ms_per_1k"] = nullptr;
  if (r.load.is_object() && r.load.value("requests", 0.0) > 0)
    j["server_cpu_ms_per_1k"] = r.server_cpu_s * 1e6 / r.load["requests"].get<double>();
  j["server_busy"] = r.server_busy;
  j["load_busy"] = r.load_busy;
  j["idle_rss_kib"] = r.idle_rss_kib;
  j["peak_rss_kib"] = r.peak_rss_kib;
  j["rss_per_connection_kib"] = nullptr;
  if (r.connections_offered > 0 && r.peak_rss_kib >= r.idle_rss_kib)
    j["rss_per_connection_kib"] =
        static_cast<double>(r.peak_rss_kib - r.idle_rss_kib) / r.connections_offered;
  j["machine"] = {{"load_average_1m", opt(r.load_average_1m)},
                  {"steal", r.machine ? json(r.machine->steal) : json(nullptr)},
                  {"others", r.machine ? json(r.machine->others) : json(nullptr)}};
  j["error"] = r.error;
  j["notes"] = json::array();
  for (const auto& n : r.notes)
    j["notes"].push_back(n.text);
  j["load"] = r.load;
  return j;
}

json row_rounds_json(const RowRounds& rr, const TargetResult& self,
                     const std::vector<TargetResult>& targets) {
  const RowSummary s = summarize(rr);
  json j;
  j["server"] = self.target.name;
  j["variant"] = self.target.variant.name;
  j["id"] = rr.row.id;
  j["path"] = rr.row.path;
  j["delay"] = rr.row.delay ? json(*rr.row.delay) : json(nullptr);
  j["mean_delay_ms"] = rr.row.mean_delay_ms;
  j["compute_us"] = rr.row.compute_us;
  j["cpu_ceiling_row"] = rr.row.cpu_ceiling;
  j["connections_requested"] = rr.row.connections;
  j["stagger_asked"] = rr.row.stagger;
  j["start"] = s.start;
  j["rounds_asked"] = s.rounds;
  j["rounds_measured"] = s.measured;
  j["median_round"] = s.median_round ? json(*s.median_round + 1) : json(nullptr);
  j["not_measured"] = s.not_measured;
  j["bound"] = s.bound;
  // Each figure over the measured rounds: median, min, max, rounds, spread = (max - min) / median.
  j["summary"] = {{"rps", spread_json(s.rps)},
                  {"efficiency", spread_json(s.efficiency)},
                  {"latency_p50_ms", spread_json(s.latency_p50_ms)},
                  {"latency_p99_ms", spread_json(s.latency_p99_ms)},
                  {"overshoot_p99_ms", spread_json(s.overshoot_p99_ms)},
                  {"server_cpu_ms_per_1k", spread_json(s.cpu_ms_per_1k)},
                  {"served_connections", spread_json(s.served)},
                  {"server_busy", spread_json(s.server_busy)},
                  {"load_busy", spread_json(s.load_busy)},
                  {"connections_open", spread_json(s.connections_open)},
                  {"peak_rss_mib", spread_json(s.peak_rss_mib)},
                  {"rss_per_connection_kib", spread_json(s.rss_per_connection_kib)},
                  {"connection_ceiling", spread_json(s.connection_ceiling)},
                  {"thread_ceiling", spread_json(s.thread_ceiling)},
                  {"cpu_ceiling", spread_json(s.cpu_ceiling)},
                  {"lowest_ceiling", spread_json(s.lowest_ceiling)},
                  {"starved_connections", spread_json(s.starved)},
                  {"fairness_jain", spread_json(s.jain)},
                  {"max_gap_ms", spread_json(s.max_gap_ms)},
                  {"errors_total", s.errors_total},
                  {"errors", s.errors}};
  // rps / a peer's rps on the same row, taken within each round; the median and min-max.
  j["ratios"] = json::object();
  for (const TargetResult* peer : priced_peers(targets)) {
    if (auto ratio = ratio_to(rr, self, *peer)) j["ratios"][peer->target.name] = spread_json(ratio);
  }
  j["spread_flagged"] = spread_too_wide(s);
  j["flags"] = row_flags(rr, s);
  j["notes"] = grouped_notes(rr, s);
  j["rounds"] = json::array();
  for (const auto& r : rr.rounds)
    j["rounds"].push_back(row_json(r));
  return j;
}

std::string compact_table(const std::vector<TargetResult>& targets) {
  std::ostringstream out;
  out << "| model | row | rps | binding ceiling | efficiency | p99 ms | errors | starved |\n";
  out << "|---|---|--:|---|--:|--:|--:|--:|\n";
  for (const auto& t : targets) {
    for (const auto& rr : t.rows) {
      const RowSummary s = summarize(rr);
      out << "| " << model_text(t.target.name, t.target.variant.name) << " | " << row_text(rr.row)
          << " | ";
      if (s.measured == 0) {
        out << "not measured: " << s.not_measured << " | | | | | |\n";
        continue;
      }
      out << range_text(s.rps, whole) << " | ";
      if (rr.row.cpu_ceiling) {
        out << "CPU (this row) | - | ";
      } else {
        out << (s.bound.empty() ? "-" : s.bound + " " + median_text(s.lowest_ceiling, whole))
            << " | " << percent_range(s.efficiency) << " | ";
      }
      out << median_text(s.latency_p99_ms, two) << " | " << num(static_cast<double>(s.errors_total))
          << " | " << median_text(s.starved, whole) << " |\n";
    }
  }
  return out.str();
}

std::string markdown_table(const std::vector<TargetResult>& targets) {
  const auto peers = priced_peers(targets);
  std::ostringstream out;
  out << "| server | variant | threads | path | delay ms | start | conns open / asked | conn "
         "ceiling "
         "| thread ceiling | CPU ceiling | bound | rps | efficiency | ";
  for (const TargetResult* p : peers)
    out << "rps / " << p->target.name << " | ";
  out << "served conns | p50 ms | p99 ms | p99 overshoot ms | server CPU ms / 1k req | server "
         "CPU busy | cm-load CPU busy | starved conns | Jain's index | peak RSS MiB | RSS / conn "
         "KiB | errors | rounds |\n";
  out << "|---|---|---|---|--:|---|--:|--:|--:|--:|---|--:|--:|";
  for (std::size_t i = 0; i < peers.size(); ++i)
    out << "--:|";
  out << "--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|\n";
  for (const auto& t : targets) {
    for (const auto& rr : t.rows) {
      const RowSummary s = summarize(rr);
      const std::string threads = rr.rounds.empty() ? "" : rr.rounds.front().threads;
      out << "| " << t.target.name << " | " << t.target.variant.name << " | " << threads << " | "
          << rr.row.path << " | " << delay_text(rr.row) << " | "
          << (rr.row.mean_delay_ms > 0 ? s.start : "-") << " | ";
      if (s.measured == 0) {
        out << num(rr.row.connections) << " asked | not measured: " << s.not_measured << " |";
        for (std::size_t i = 0; i < 20 + peers.size(); ++i)
          out << " |";
        out << "\n";
        continue;
      }
      out << median_text(s.connections_open, whole) << " / " << num(rr.row.connections) << " | "
          << median_text(s.connection_ceiling, whole) << " | "
          << median_text(s.thread_ceiling, whole) << " | " << median_text(s.cpu_ceiling, whole)
          << " | " << (rr.row.cpu_ceiling ? "(this row)" : s.bound) << " | "
          << range_text(s.rps, whole) << " | "
          << (rr.row.cpu_ceiling ? "CPU ceiling" : percent_range(s.efficiency)) << " | ";
      for (const TargetResult* p : peers)
        out << range_text(ratio_to(rr, t, *p), two) << " | ";
      out << median_text(s.served, whole) << " | " << median_text(s.latency_p50_ms, two) << " | "
          << range_text(s.latency_p99_ms, two) << " | " << median_text(s.overshoot_p99_ms, two)
          << " | " << range_text(s.cpu_ms_per_1k, one) << " | "
          << median_text(s.server_busy, percent) << " | " << median_text(s.load_busy, percent)
          << " | " << range_text(s.starved, whole) << " | " << range_text(s.jain, three) << " | "
          << median_text(s.peak_rss_mib, one) << " | " << median_text(s.rss_per_connection_kib, two)
          << " | " << errors_text(s) << " | " << rounds_text(s) << " |\n";
    }
  }
  return out.str();
}

std::string markdown_report(const json& meta, const std::vector<TargetResult>& targets,
                            const std::vector<std::string>& skipped) {
  std::ostringstream out;
  const unsigned rounds = meta.value("rounds", 1u);
  out << "# Profile `" << meta["profile"].get<std::string>() << "`\n\n";
  if (!meta["description"].get<std::string>().empty())
    out << meta["description"].get<std::string>() << "\n\n";
  out << "Written by `cm-price` on " << meta["finished_utc"].get<std::string>()
      << "; every number below comes from this run. Regenerate with:\n\n    "
      << meta["command"].get<std::string>() << "\n\n";
  out << "Commit `" << meta["commit"]["head"].get<std::string>() << "`"
      << (meta["commit"]["dirty"].get<bool>()
              ? " with uncommitted changes in the tree (" +
                    std::to_string(meta["commit"]["changed_paths"].get<int>()) + " paths)"
              : " (clean tree)")
      << ". Machine: [machine.md](machine.md). Server on CPU "
      << meta["server_cpus"].get<std::string>() << ", cm-load on CPU "
      << meta["load_cpus"].get<std::string>() << " (" << meta["pinning"].get<std::string>()
      << "); each row: " << meta["warmup_s"].get<double>() << " s warm-up, then "
      << meta["duration_s"].get<double>() << " s measured, on a freshly started server";
  if (rounds > 1)
    out << ", " << rounds
        << " times: row by row, in rounds, every server's row once per round, the servers in "
           "another order each round";
  out << ".\n\n";
  if (meta.contains("note") && !meta["note"].get<std::string>().empty())
    out << "Conditions: " << meta["note"].get<std::string>() << "\n\n";
  if (meta.contains("stagger_note") && !meta["stagger_note"].get<std::string>().empty())
    out << meta["stagger_note"].get<std::string>() << "\n\n";
  if (rounds > 1)
    out << "Each figure is the median of the " << rounds
        << " rounds, with the least and the greatest in brackets when they differ; efficiency is "
           "taken within a round, against that round's CPU ceiling. Errors are summed over the "
           "rounds. A row whose rps or efficiency varies by more than 10% is flagged in the "
           "notes, with the machine's load during its rounds. How to read a median and its "
           "spread: [results/README.md](../README.md#how-to-read-a-table).\n\n";
  out << compact_table(targets) << "\n";
  out << "## Full table\n\n";
  out << markdown_table(targets) << "\n";
  out << "How to read it: the connection ceiling is connections / mean delay; the thread ceiling "
         "is threads / mean delay where a waiting request holds a thread (the blocking model's "
         "workers; the offload pool for `/block`; the loops when a blocking call runs on them); "
         "the CPU ceiling is the same server's `/plaintext` rps in the same round (for `/cpu/N`, "
         "plus N µs per request on the server's CPUs). Efficiency = rps / the lowest ceiling that "
         "applies (the `bound` column), within each round. `rps / nginx`, `rps / node`: this "
         "row's rps over the peer's on the same row, in the same round (median and min–max of "
         "those ratios). Served conns = rps × mean latency (Little's law): the connections that "
         "actually had a request in flight. Start: `staggered` when cm-load spread the "
         "connections' first requests (`--stagger`), `together` when they all started at once. "
         "Starved conns and Jain's index are cm-load's fairness figures: connections that got no "
         "answer in the measured window, and (Σx)² / (n Σx²) over the answers per connection (1: "
         "every connection answered as often; `-` when this cm-load does not report them). Server "
         "CPU is read from `/proc/<pid>/stat` (sampled every 50 ms over the measured window), and "
         "busy = that CPU time / (window × the server's CPUs); cm-load CPU busy is its own CPU "
         "time in the window, less the time it spent polling with nothing to do "
         "(`client_spin_s`), / (window × its CPUs); peak RSS is `VmHWM` from "
         "`/proc/<pid>/status`, and RSS / conn is (peak − idle RSS at start) / connections "
         "offered. The ceilings use the connections offered (asked for, unless some could not "
         "connect); `conns open` is cm-load's count at the end. Latency and errors are cm-load's, "
         "which checks every response.\n\n";
  bool any_note = false;
  for (const auto& t : targets) {
    for (const auto& rr : t.rows) {
      const RowSummary s = summarize(rr);
      std::vector<std::string> lines = row_flags(rr, s);
      for (auto& l : lines) {
        const auto colon = l.find(':');
        l = colon == std::string::npos ? "**" + l + "**"
                                       : "**" + l.substr(0, colon) + "**" + l.substr(colon);
      }
      for (auto& n : grouped_notes(rr, s))
        lines.push_back(std::move(n));
      for (const auto& line : lines) {
        if (!any_note) out << "## Notes\n\n";
        any_note = true;
        out << "- " << model_text(t.target.name, t.target.variant.name) << ", " << rr.row.path
            << (rr.row.delay ? " delay " + *rr.row.delay : "") << ", " << num(rr.row.connections)
            << " connections: " << line << "\n";
      }
    }
  }
  if (any_note) out << "\n";
  out << "## Validation (before timing, as HttpArena validates)\n\n";
  for (const auto& t : targets) {
    const std::string name =
        t.target.name + (t.target.variant.name == "-" ? "" : " (" + t.target.variant.name + ")");
    if (!t.priced) {
      out << "- **" << name << ": not priced** -- " << t.refused << "\n";
      continue;
    }
    out << "- " << name << ": passed -- ";
    for (std::size_t i = 0; i < t.validation.passed.size(); ++i)
      out << (i ? "; " : "") << t.validation.passed[i];
    out << "\n";
  }
  for (const auto& s : skipped)
    out << "- skipped " << s << "\n";
  out << "\n";
  return out.str();
}

std::string machine_markdown(const json& m) {
  std::ostringstream out;
  out << "# Machine\n\n| | |\n|---|---|\n";
  out << "| CPU | " << m["cpu_model"].get<std::string>() << " |\n";
  out << "| logical CPUs | " << m["logical_cpus"]
      << " (allowed: " << m["cpus_allowed"].get<std::string>() << ") |\n";
  out << "| memory | " << m["memory"].get<std::string>() << " |\n";
  out << "| OS | " << m["os"].get<std::string>() << " |\n";
  out << "| kernel | " << m["kernel"].get<std::string>() << " |\n";
  out << "| io_uring_disabled | " << m["io_uring_disabled"].get<std::string>() << " |\n";
  out << "| open files (soft / hard) | " << m["open_files_limit"]["soft"] << " / "
      << m["open_files_limit"]["hard"] << " |\n";
  out << "| compiler | " << m["compiler"].get<std::string>() << " |\n";
  out << "| build type | " << m["build_type"].get<std::string>() << " |\n";
  for (const auto& [lib, version] : m["libraries"].items())
    out << "| " << lib << " | " << version.get<std::string>() << " |\n";
  for (const auto& [peer, version] : m["peers"].items())
    out << "| " << peer << " (peer) | " << version.get<std::string>() << " |\n";
  out << "\nRead by cm-price from /proc/cpuinfo, /proc/meminfo, uname(2), getrlimit(2), and the "
         "versions "
         "its own build found (CMake); peers from `nginx -v` and `node --version`.\n";
  return out.str();
}

std::string csv_report(const std::vector<TargetResult>& targets) {
  std::ostringstream out;
  out << "server,variant,threads,path,delay_ms,round,sequence,start,connections_requested,"
         "connections_open,conn_ceiling,thread_ceiling,cpu_ceiling,bound,rps,efficiency,"
         "served_connections,latency_p50_ms,latency_p99_ms,overshoot_p99_ms,server_cpu_ms_per_1k,"
         "server_busy,load_busy,starved_connections,fairness_jain,max_gap_ms,peak_rss_kib,"
         "rss_per_connection_kib,errors_total,load_average_1m,steal,others_cpu,error\n";
  auto field = [](const json& v) -> std::string {
    if (v.is_null()) return "";
    if (v.is_string()) {
      std::string s = v.get<std::string>();
      if (s.find_first_of(",\"\n") == std::string::npos) return s;
      std::string q = "\"";
      for (char c : s)
        q += c == '"' ? std::string("\"\"") : std::string(1, c);
      return q + "\"";
    }
    return v.dump();
  };
  auto load_number = [](const RowResult& r, const char* key) {
    return r.load.is_object() && r.load.contains(key) && r.load[key].is_number() ? r.load[key]
                                                                                 : json(nullptr);
  };
  for (const auto& t : targets) {
    for (const auto& rr : t.rows) {
      for (const auto& r : rr.rounds) {
        const json j = row_json(r);
        const bool ok = r.error.empty() && r.load.is_object();
        const bool stagger = ok && r.load.contains("stagger") && r.load["stagger"].is_boolean()
                                 ? r.load["stagger"].get<bool>()
                                 : r.stagger_passed;
        const std::vector<json> cells{
            j["server"],
            j["variant"],
            j["threads"],
            j["path"],
            r.row.delay ? json(*r.row.delay)
                        : (r.row.mean_delay_ms > 0 ? json(r.row.mean_delay_ms) : json(nullptr)),
            j["round"],
            j["sequence"],
            ok ? json(stagger ? "staggered" : "together") : json(nullptr),
            j["connections_requested"],
            ok ? j["connections_open"] : json(nullptr),
            j["ceilings"]["connection"],
            j["ceilings"]["thread"],
            j["ceilings"]["cpu"],
            ok ? j["bound"] : json(nullptr),
            ok ? j["rps"] : json(nullptr),
            j["efficiency"],
            ok ? j["served_connections"] : json(nullptr),
            ok ? json(r.load["latency_us"]["p50"].get<double>() / 1000) : json(nullptr),
            ok ? json(r.load["latency_us"]["p99"].get<double>() / 1000) : json(nullptr),
            ok ? json(r.load["overshoot_us"]["p99"].get<double>() / 1000) : json(nullptr),
            j["server_cpu_ms_per_1k"],
            ok ? j["server_busy"] : json(nullptr),
            ok ? j["load_busy"] : json(nullptr),
            load_number(r, "starved_connections"),
            load_number(r, "fairness_jain"),
            load_number(r, "max_gap_ms"),
            ok ? j["peak_rss_kib"] : json(nullptr),
            j["rss_per_connection_kib"],
            ok ? r.load["errors_total"] : json(nullptr),
            j["machine"]["load_average_1m"],
            j["machine"]["steal"],
            j["machine"]["others"],
            j["error"]};
        for (std::size_t i = 0; i < cells.size(); ++i)
          out << (i ? "," : "") << field(cells[i]);
        out << "\n";
      }
    }
  }
  return out.str();
}

json json_report(const json& meta, const std::vector<TargetResult>& targets,
                 const std::vector<std::string>& skipped) {
  json out;
  out["meta"] = meta;
  out["targets"] = json::array();
  for (const auto& t : targets) {
    json jt;
    jt["server"] = t.target.name;
    jt["variant"] = t.target.variant.name;
    jt["server_args"] = t.target.variant.server_args;
    jt["priced"] = t.priced;
    jt["refused"] = t.refused;
    jt["validation"] = {{"ok", t.validation.ok},
                        {"failure", t.validation.failure},
                        {"passed", t.validation.passed}};
    jt["cpu_ceiling_from"] = t.cpu_ceiling_from;
    jt["cpu_ceiling_by_round"] = json::array();
    for (const auto& c : t.cpu_rps)
      jt["cpu_ceiling_by_round"].push_back(c ? json(*c) : json(nullptr));
    jt["rows"] = json::array();
    for (const auto& rr : t.rows)
      jt["rows"].push_back(row_rounds_json(rr, t, targets));
    out["targets"].push_back(std::move(jt));
  }
  out["skipped"] = skipped;
  return out;
}

}  // namespace cm::price
