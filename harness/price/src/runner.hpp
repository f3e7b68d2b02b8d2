#pragma once
/// \file runner.hpp
/// Runs a profile: one server at a time, validated first, then each row under cm-load, with
/// the server's CPU time and memory read from /proc, priced against its ceilings.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ceilings.hpp"
#include "profile.hpp"
#include "validate.hpp"

namespace cm::price {

/// One server to price: a model of cm-server in one variant, or a reference peer.
struct Target {
  std::string name;  ///< "blocking", "asio_coro", ..., "nginx", "node"
  ServerKind kind = ServerKind::async;
  Variant variant;
};

/// Where things are and how the machine is split.
struct Settings {
  std::filesystem::path bin_dir;     ///< holds cm-server and cm-load
  std::filesystem::path source_dir;  ///< the repository (harness/peers lives there)
  std::filesystem::path work_dir;    ///< scratch: port files, logs, cm-load JSON
  std::vector<int> server_cpus;      ///< empty: not pinned
  std::vector<int> load_cpus;        ///< empty: not pinned
  unsigned loops = 1;                ///< async models' --threads
  unsigned load_threads = 1;         ///< cm-load --threads
  bool progress = true;              ///< a line per step on stderr
};

/// A server process started for one row (or for validation), stopped by its destructor.
class RunningServer;

/// One measured row, priced.
struct RowResult {
  std::string server, variant, threads;  ///< threads: "64 workers", "1 loop, pool 64", ...
  Row row;
  unsigned connections_open = 0;   ///< cm-load's count at the end of the run
  double connections_offered = 0;  ///< asked for, or open if some failed to connect
  nlohmann::json load;             ///< cm-load's JSON, as written
  Ceilings ceilings;
  std::optional<double> efficiency;
  double rps = 0;
  double served = 0;        ///< rps x mean latency (Little's law)
  double server_cpu_s = 0;  ///< server CPU in the measured window
  double server_busy = 0;   ///< server_cpu_s / (window x server CPUs)
  double load_busy = 0;     ///< cm-load CPU / (its wall time x load CPUs)
  std::uint64_t idle_rss_kib = 0, peak_rss_kib = 0;
  std::string error;  ///< set when the row could not be measured
  std::vector<std::string> notes;
};

/// The outcome for one target.
struct TargetResult {
  Target target;
  bool priced = false;
  std::string refused;  ///< why it was not priced
  Validation validation;
  std::vector<RowResult> rows;
  std::optional<double> cpu_rps;  ///< its CPU ceiling, measured here or inherited
  std::string cpu_ceiling_from;   ///< where that came from ("this run", "variant inline")
};

/// cm-server --list-models, the names in order. Throws std::system_error if it cannot run.
std::vector<std::string> built_models(const std::filesystem::path& cm_server);

/// The targets of a profile: the models it names (filtered by `only` when non-empty, which
/// must name built models) in each variant, then the peers that are installed (unless off).
/// Peers that are not installed are reported through `skipped`.
std::vector<Target> plan_targets(const Profile& profile, const std::vector<std::string>& built,
                                 const std::vector<std::string>& only, bool peers,
                                 std::vector<std::string>& skipped);

/// What a server of this target runs with, as the ceilings see it.
ServerShape shape_of(const Target& target, const Profile& profile, const Settings& settings);

/// The rows a target is priced on (nginx: /plaintext only; node: /plaintext and /delay).
std::vector<Row> rows_for(const Target& target, const std::vector<Row>& rows);

/// The routes to validate for those rows.
ValidationPlan validation_plan_for(const Target& target, const std::vector<Row>& rows);

/// Server CPU seconds between two instants, interpolated from (time, cpu) samples.
/// The CPUs cm-load runs on, as counted for "cm-load CPU busy" (all of them when not pinned).
std::size_t load_cpu_count(const Settings& settings);

double cpu_between(const std::vector<std::pair<double, double>>& samples, double t0, double t1);

/// Prices one target: validates it on a fresh server, then runs every row on a fresh server.
/// With `inherited` (the same model's CPU ceiling from the profile's first variant), the
/// CPU-ceiling rows are priced against it instead of defining it: an offload variant that moves
/// even a trivial request off the loop is measured against the loop's own /plaintext.
TargetResult price_target(const Target& target, const Profile& profile, const Settings& settings,
                          std::optional<std::pair<double, std::string>> inherited = std::nullopt);

}  // namespace cm::price
