#include "report.hpp"

#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "proc.hpp"

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

/// 1234567 -> "1,234,567"; small values keep `decimals`.
std::string num(double v, int decimals = 0) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  const std::string_view s = buf;
  const std::size_t start = s[0] == '-' ? 1 : 0;
  const std::size_t int_end = std::min(s.find('.'), s.size());
  std::string out(s.substr(0, start));
  for (std::size_t i = start; i < int_end; ++i) {
    out.push_back(s[i]);
    const std::size_t left = int_end - i - 1;  // digits still to come
    if (left > 0 && left % 3 == 0) out.push_back(',');
  }
  out.append(s.substr(int_end));
  return out;
}

std::string opt_num(const std::optional<double>& v) {
  return v ? num(*v) : "-";
}

std::string pct(double v) {
  return num(v * 100, 1) + "%";
}

std::string errors_text(const json& load) {
  if (!load.is_object()) return "-";
  const auto total = load.at("errors_total").get<long long>();
  if (total == 0) return "0";
  std::string out = num(static_cast<double>(total)) + " (";
  bool first = true;
  for (const auto& [kind, count] : load.at("errors").items()) {
    if (count.get<long long>() == 0) continue;
    out += (first ? "" : ", ") + kind + " " + num(count.get<double>());
    first = false;
  }
  return out + ")";
}

std::string delay_text(const RowResult& r) {
  if (r.row.delay) return *r.row.delay;
  if (r.row.mean_delay_ms > 0) return num(r.row.mean_delay_ms);
  return "-";
}

std::string label(const TargetResult& t) {
  return t.target.name;
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
  j["id"] = r.row.id;
  j["path"] = r.row.path;
  j["delay"] = r.row.delay ? json(*r.row.delay) : json(nullptr);
  j["mean_delay_ms"] = r.row.mean_delay_ms;
  j["compute_us"] = r.row.compute_us;
  j["cpu_ceiling_row"] = r.row.cpu_ceiling;
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
  j["error"] = r.error;
  j["notes"] = r.notes;
  j["load"] = r.load;
  return j;
}

std::string markdown_table(const std::vector<TargetResult>& targets) {
  std::ostringstream out;
  out << "| server | variant | threads | path | delay ms | conns open / asked | conn ceiling | "
         "thread ceiling | CPU ceiling | bound | rps | efficiency | served conns | p50 ms | p99 ms "
         "| "
         "p99 overshoot ms | server CPU ms / 1k req | server CPU busy | cm-load CPU busy | peak "
         "RSS MiB | "
         "RSS / conn KiB | errors |\n";
  out << "|---|---|---|---|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"
         "\n";
  for (const auto& t : targets) {
    for (const auto& r : t.rows) {
      const json j = row_json(r);
      out << "| " << label(t) << " | " << r.variant << " | " << r.threads << " | " << r.row.path
          << " | " << delay_text(r) << " | ";
      if (!r.error.empty()) {
        out << num(r.row.connections) << " asked | not measured: " << r.error
            << " | | | | | | | | | | | | | | | | |\n";
        continue;
      }
      const auto& lat = r.load.at("latency_us");
      out << num(r.connections_open) << " / " << num(r.row.connections) << " | "
          << opt_num(r.ceilings.connection) << " | " << opt_num(r.ceilings.thread) << " | "
          << opt_num(r.ceilings.cpu) << " | "
          << (r.row.cpu_ceiling ? "(this row)" : r.ceilings.bound()) << " | " << num(r.rps) << " | "
          << (r.row.cpu_ceiling ? "CPU ceiling"
              : r.efficiency    ? pct(*r.efficiency)
                                : "-")
          << " | " << num(r.served) << " | " << num(lat.at("p50").get<double>() / 1000, 2) << " | "
          << num(lat.at("p99").get<double>() / 1000, 2) << " | "
          << num(r.load.at("overshoot_us").at("p99").get<double>() / 1000, 2) << " | "
          << (j["server_cpu_ms_per_1k"].is_null() ? "-"
                                                  : num(j["server_cpu_ms_per_1k"].get<double>(), 1))
          << " | " << pct(r.server_busy) << " | " << pct(r.load_busy) << " | "
          << num(static_cast<double>(r.peak_rss_kib) / 1024, 1) << " | "
          << (j["rss_per_connection_kib"].is_null()
                  ? "-"
                  : num(j["rss_per_connection_kib"].get<double>(), 2))
          << " | " << errors_text(r.load) << " |\n";
    }
  }
  return out.str();
}

std::string markdown_report(const json& meta, const std::vector<TargetResult>& targets,
                            const std::vector<std::string>& skipped) {
  std::ostringstream out;
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
      << meta["duration_s"].get<double>() << " s measured, on a freshly started server.\n\n";
  if (meta.contains("note") && !meta["note"].get<std::string>().empty())
    out << "Conditions: " << meta["note"].get<std::string>() << "\n\n";
  out << markdown_table(targets) << "\n";
  out << "How to read it: the connection ceiling is connections / mean delay; the thread ceiling "
         "is "
         "threads / mean delay where a waiting request holds a thread (the blocking model's "
         "workers; "
         "the offload pool for `/block`; the loops when a blocking call runs on them); the CPU "
         "ceiling "
         "is the same server's `/plaintext` rps in this run (for `/cpu/N`, plus N µs per request "
         "on the "
         "server's CPUs). Efficiency = rps / the lowest ceiling that applies (the `bound` column). "
         "Served conns = rps × mean latency (Little's law): the connections that actually had a "
         "request "
         "in flight. Server CPU is read from `/proc/<pid>/stat` (sampled every 50 ms; the window "
         "is the "
         "measured seconds before cm-load exited), and busy = that CPU time / (window x the "
         "server's CPUs); "
         "cm-load CPU busy is its own CPU time in the window, less the time it spent polling with "
         "nothing to do (`client_spin_s`), / (window x its CPUs); peak RSS is "
         "`VmHWM` from `/proc/<pid>/status`, and RSS "
         "/ conn is (peak − idle RSS at start) / connections offered. The ceilings use the "
         "connections "
         "offered (asked for, unless some could not connect); `conns open` is cm-load's count at "
         "the end. Latency and errors are cm-load's, which "
         "checks every response.\n\n";
  bool any_note = false;
  for (const auto& t : targets) {
    for (const auto& r : t.rows) {
      for (const auto& n : r.notes) {
        if (!any_note) out << "## Notes\n\n";
        any_note = true;
        out << "- " << t.target.name
            << (r.variant == "-" || r.variant == "standard" ? "" : " (" + r.variant + ")") << ", "
            << r.row.path << (r.row.delay ? " delay " + *r.row.delay : "") << ", "
            << num(r.row.connections) << " connections: " << n << "\n";
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
  out << "server,variant,threads,path,delay_ms,connections_requested,connections_open,conn_ceiling,"
         "thread_ceiling,cpu_ceiling,bound,rps,efficiency,served_connections,latency_p50_ms,"
         "latency_p99_ms,overshoot_p99_ms,server_cpu_ms_per_1k,server_busy,load_busy,peak_rss_kib,"
         "rss_per_connection_kib,errors_total,error\n";
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
  for (const auto& t : targets) {
    for (const auto& r : t.rows) {
      const json j = row_json(r);
      const bool ok = r.error.empty();
      const std::vector<json> cells{
          j["server"],
          j["variant"],
          j["threads"],
          j["path"],
          r.row.delay ? json(*r.row.delay)
                      : (r.row.mean_delay_ms > 0 ? json(r.row.mean_delay_ms) : json(nullptr)),
          j["connections_requested"],
          j["connections_open"],
          j["ceilings"]["connection"],
          j["ceilings"]["thread"],
          j["ceilings"]["cpu"],
          j["bound"],
          ok ? j["rps"] : json(nullptr),
          j["efficiency"],
          ok ? j["served_connections"] : json(nullptr),
          ok ? json(r.load["latency_us"]["p50"].get<double>() / 1000) : json(nullptr),
          ok ? json(r.load["latency_us"]["p99"].get<double>() / 1000) : json(nullptr),
          ok ? json(r.load["overshoot_us"]["p99"].get<double>() / 1000) : json(nullptr),
          j["server_cpu_ms_per_1k"],
          ok ? j["server_busy"] : json(nullptr),
          ok ? j["load_busy"] : json(nullptr),
          ok ? j["peak_rss_kib"] : json(nullptr),
          j["rss_per_connection_kib"],
          ok ? r.load["errors_total"] : json(nullptr),
          j["error"]};
      for (std::size_t i = 0; i < cells.size(); ++i)
        out << (i ? "," : "") << field(cells[i]);
      out << "\n";
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
    jt["rows"] = json::array();
    for (const auto& r : t.rows)
      jt["rows"].push_back(row_json(r));
    out["targets"].push_back(std::move(jt));
  }
  out["skipped"] = skipped;
  return out;
}

}  // namespace cm::price
