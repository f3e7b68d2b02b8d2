// cm-price -- runs a profile across the models and prices each against its ceilings.
//
//   build/bin/cm-price quick                         # what `make compare` runs
//   build/bin/cm-price delay-sweep --connections 100,1000,4000
//   build/bin/cm-price arena --connections 30000 --server-cpus 32   # a bigger machine
//   build/bin/cm-price quick --rounds 5              # more rounds than the profile's
//
// For each model built into cm-server (and each variant of the profile), then each reference
// peer (nginx, node): start a server (port 0, --port-file), validate it as HttpArena does, and
// refuse it if it fails. Then row by row, each row R times (--rounds, or the profile's), the
// servers interleaved within a round and in another order each round: start a fresh server
// pinned to its own CPUs, run cm-load pinned to the others, read the server's CPU time and peak
// RSS from /proc, and the machine's load, steal time and other processes' CPU around it. Each
// round is priced against the CPU ceiling of the same round; the tables show the median and the
// min-max. Writes results/<profile>/ and prints the compact table.

#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "proc.hpp"
#include "profile.hpp"
#include "report.hpp"
#include "runner.hpp"

#ifndef CM_SOURCE_DIR
#define CM_SOURCE_DIR "."
#endif

namespace fs = std::filesystem;
using namespace cm::price;

namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&t));
  return buf;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string part; std::getline(in, part, ',');)
    if (!part.empty()) out.push_back(part);
  return out;
}

/// Raises the soft open-files limit to the hard one: the servers started inherit it.
void raise_open_files() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cm-price: runs a profile across the models and prices each against its ceilings"};
  std::string profile_name, models, connections, delays, peers = "on", python = "/usr/bin/python3";
  std::string bin_dir, out_dir, source_dir = CM_SOURCE_DIR;
  Overrides o;
  bool charts = true, keep_work = false;
  app.add_option("profile", profile_name,
                 "a name in harness/profiles/ (quick, delay-sweep, arena, offload) or a file")
      ->required();
  app.add_option("--models", models, "only these models (and peers), comma-separated");
  app.add_option("--connections", connections,
                 "connection counts of the sweep rows, e.g. 100,1000");
  app.add_option("--delay", delays, "delays (ms, or A:B) of the sweep rows, e.g. 1000 or 10:90");
  app.add_option("--duration", o.duration_s, "measured seconds per row");
  app.add_option("--warmup", o.warmup_s, "warm-up seconds per row, not counted");
  app.add_option("--rounds", o.rounds,
                 "measure every row this many times, the servers interleaved in each round "
                 "(default: the profile's \"rounds\", else 1)");
  app.add_option("--timeout", o.timeout_ms,
                 "cm-load --timeout in ms (default: max(2000, 3 x delay))");
  app.add_option("--blocking-workers", o.blocking_workers, "the blocking model's --threads");
  app.add_option("--pool", o.pool, "the async models' --blocking-threads");
  app.add_option("--loops", o.loops, "the async models' --threads (default: the server's CPUs)");
  app.add_option("--server-cpus", o.server_cpus, "CPUs for the server (default: half, at least 1)");
  app.add_option("--load-threads", o.load_threads, "cm-load --threads (default: the load's CPUs)");
  app.add_option("--peers", peers, "reference rows from nginx and node when installed")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--out", out_dir,
                 "results folder; the profile writes <out>/<profile>/ (default: <repo>/results)");
  app.add_option("--bin-dir", bin_dir,
                 "where cm-server and cm-load are (default: next to cm-price)");
  app.add_option("--source-dir", source_dir, "the repository (profiles, peers, plot)")
      ->capture_default_str();
  app.add_option("--python", python, "the Python with matplotlib that runs harness/plot")
      ->capture_default_str();
  app.add_flag("!--no-charts", charts, "do not draw the charts");
  app.add_flag("--keep-work", keep_work, "keep the scratch folder (logs, cm-load JSON)");
  std::string note;
  app.add_option("--note", note,
                 "the conditions of the run, written into results.md (e.g. \"machine shared\")");
  CLI11_PARSE(app, argc, argv);

  try {
    if (!connections.empty()) {
      o.connections.emplace();
      for (const auto& c : split(connections)) {
        try {
          o.connections->push_back(static_cast<unsigned>(std::stoul(c)));
        } catch (const std::exception&) {
          throw std::invalid_argument("--connections: \"" + c + "\" is not a count");
        }
      }
    }
    if (!delays.empty()) o.delays = split(delays);
    Profile profile = load_profile(profile_name, fs::path(source_dir) / "harness/profiles");
    apply_overrides(profile, o);

    Settings settings;
    settings.source_dir = source_dir;
    settings.bin_dir =
        bin_dir.empty() ? fs::canonical("/proc/self/exe").parent_path() : fs::path(bin_dir);
    for (const char* tool : {"cm-server", "cm-load"}) {
      if (::access((settings.bin_dir / tool).c_str(), X_OK) != 0)
        throw std::invalid_argument((settings.bin_dir / tool).string() +
                                    " is missing: build it first (make build)");
    }
    const fs::path results =
        (out_dir.empty() ? fs::path(source_dir) / "results" : fs::path(out_dir)) / profile.name;

    // Split the CPUs: the server on the first k, cm-load on the rest.
    const auto cpus = allowed_cpus();
    std::string pinning;
    if (cpus.size() >= 2) {
      const std::size_t k = std::min<std::size_t>(
          profile.server_cpus.value_or(std::max<std::size_t>(1, cpus.size() / 2)), cpus.size() - 1);
      settings.server_cpus.assign(cpus.begin(), cpus.begin() + static_cast<std::ptrdiff_t>(k));
      settings.load_cpus.assign(cpus.begin() + static_cast<std::ptrdiff_t>(k), cpus.end());
      pinning = "pinned with sched_setaffinity";
    } else {
      pinning = "not pinned: one CPU only";
    }
    settings.loops = profile.loops.value_or(
        static_cast<unsigned>(std::max<std::size_t>(1, settings.server_cpus.size())));
    settings.load_threads = profile.load_threads.value_or(
        static_cast<unsigned>(std::max<std::size_t>(1, settings.load_cpus.size())));
    raise_open_files();
    // cm-load gains --stagger with issue 12; an older one would refuse the flag, so ask first.
    const bool wants_stagger = std::any_of(profile.rows.begin(), profile.rows.end(),
                                           [](const RowSpec& r) { return r.stagger; });
    std::string stagger_note;
    if (wants_stagger) {
      settings.load_has_stagger = load_supports(settings.bin_dir / "cm-load", "--stagger");
      if (!settings.load_has_stagger) {
        stagger_note =
            "Staggered start not available: the profile asks cm-load for --stagger on some rows, "
            "but " +
            (settings.bin_dir / "cm-load").string() +
            " --help does not list it, so those rows ran with every connection starting at "
            "once (their notes say so).";
        std::cerr << "cm-price: " << stagger_note << "\n";
      }
    }

    const auto built = built_models(settings.bin_dir / "cm-server");
    std::vector<std::string> skipped;
    const auto targets = plan_targets(profile, built, split(models), peers == "on", skipped);

    char work_template[] = "/tmp/cm-price.XXXXXX";
    if (!::mkdtemp(work_template))
      throw std::system_error(errno, std::generic_category(), "mkdtemp");
    settings.work_dir = work_template;

    nlohmann::json meta;
    meta["profile"] = profile.name;
    meta["description"] = profile.description;
    meta["chart"] = profile.chart;
    meta["command"] = shell_command(argc, argv);
    meta["note"] = note;
    meta["started_utc"] = utc_now();
    meta["commit"] = commit_info(source_dir);
    meta["machine"] = machine_info(source_dir);
    meta["server_cpus"] =
        settings.server_cpus.empty() ? "any" : cpu_list_string(settings.server_cpus);
    meta["load_cpus"] = settings.load_cpus.empty() ? "any" : cpu_list_string(settings.load_cpus);
    meta["server_cpu_count"] = std::max<std::size_t>(1, settings.server_cpus.size());
    meta["load_cpu_count"] = cm::price::load_cpu_count(settings);
    meta["pinning"] = pinning;
    meta["loops"] = settings.loops;
    meta["blocking_workers"] = profile.blocking_workers;
    meta["pool"] = profile.pool;
    meta["load_threads"] = settings.load_threads;
    meta["warmup_s"] = profile.warmup_s;
    meta["duration_s"] = profile.duration_s;
    meta["rounds"] = profile.rounds;
    meta["round_order"] =
        "row by row; each row round after round; in round k (from 0) of R, the N servers in the "
        "listed order started floor(k x N / R) places along";
    meta["load_has_stagger"] = settings.load_has_stagger;
    meta["stagger_note"] = stagger_note;

    std::cerr << "cm-price: profile " << profile.name << ", " << targets.size() << " servers, "
              << profile.rounds << (profile.rounds == 1 ? " round" : " rounds")
              << "; server on CPU " << meta["server_cpus"].get<std::string>() << ", cm-load on CPU "
              << meta["load_cpus"].get<std::string>() << "\n";
    // A model's CPU ceiling comes from the first variant it is priced in (offload: inline, where
    // the trivial request runs on the loop); its other variants are priced against that, round
    // by round.
    const std::vector<TargetResult> priced = price_targets(targets, profile, settings);
    meta["finished_utc"] = utc_now();

    fs::create_directories(results);
    const auto report = json_report(meta, priced, skipped);
    std::ofstream(results / "results.json") << report.dump(2) << "\n";
    std::ofstream(results / "results.csv") << csv_report(priced);
    std::ofstream(results / "machine.json") << meta["machine"].dump(2) << "\n";
    std::ofstream(results / "machine.md") << machine_markdown(meta["machine"]);
    std::string chart_note;
    if (charts) {
      const std::string cmd = "'" + python + "' '" +
                              (fs::path(source_dir) / "harness/plot").string() + "' '" +
                              (results / "results.json").string() + "'";
      const int rc = std::system(cmd.c_str());
      if (rc != 0)
        chart_note = "charts: `" + cmd + "` failed (" + describe_wait_status(rc) + "); none drawn";
    }
    std::string md = markdown_report(meta, priced, skipped);
    std::vector<std::string> pngs;
    for (const auto& e : fs::directory_iterator(results))
      if (e.path().extension() == ".png") pngs.push_back(e.path().filename().string());
    std::sort(pngs.begin(), pngs.end());
    if (!pngs.empty()) {
      md += "## Charts (harness/plot, matplotlib)\n\n";
      for (const auto& p : pngs)
        md += "![" + p + "](" + p + ")\n\n";
    }
    if (!chart_note.empty()) md += chart_note + "\n";
    std::ofstream(results / "results.md") << md;
    if (!keep_work) {
      std::error_code ignored;
      fs::remove_all(settings.work_dir, ignored);
    }

    std::cout << "\n" << compact_table(priced) << "\n";
    if (profile.rounds > 1)
      std::cout << "Medians of " << profile.rounds
                << " rounds (min–max); the full table and the notes are in results.md.\n";
    bool failed = false;
    for (const auto& t : priced) {
      if (!t.priced) {
        std::cout << "not priced: " << t.target.name << " (" << t.target.variant.name
                  << "): " << t.refused << "\n";
        failed |= t.validation.ok == false;
      }
      for (const auto& rr : t.rows)
        for (const auto& r : rr.rounds)
          failed |= !r.error.empty();
    }
    for (const auto& s : skipped)
      std::cout << "skipped " << s << "\n";
    std::cout << "results: " << results.string()
              << "/ (results.md, results.csv, results.json, machine.md"
              << (pngs.empty() ? "" : ", charts") << ")\n";
    if (keep_work)
      std::cout << "scratch (logs, cm-load JSON): " << settings.work_dir.string() << "\n";
    return failed ? 1 : 0;
  } catch (const std::invalid_argument& e) {
    std::cerr << "cm-price: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "cm-price: " << e.what() << "\n";
    return 1;
  }
}
