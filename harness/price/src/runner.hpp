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
#include "proc.hpp"
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
  bool load_has_stagger = false;     ///< cm-load knows --stagger (see load_supports)
  bool progress = true;              ///< a line per step on stderr
};

/// A server process started for one row (or for validation), stopped by its destructor.
class RunningServer;

/// Something the numbers alone do not say. `kind` groups the same note over a row's rounds.
struct Note {
  std::string kind;  ///< "unserved", "pool-queue", "short", "server-exit", ...
  std::string text;
};

/// One round of one row: measured, then priced against the CPU ceiling of the same round.
struct RowResult {
  std::string server, variant, threads;  ///< threads: "64 workers", "1 loop, pool 64", ...
  Row row;
  unsigned round = 0;              ///< from 0
  std::size_t sequence = 0;        ///< its place among every run of the profile, from 0
  bool stagger_passed = false;     ///< cm-load ran with --stagger
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
  std::optional<double> load_average_1m;  ///< /proc/loadavg when cm-load ended
  std::optional<MachineShare> machine;    ///< steal and other processes while cm-load ran
  std::string error;                      ///< set when the row could not be measured
  std::vector<Note> notes;
};

/// A row of one target over the rounds: `rounds[k]` is round k (every round has an entry; one
/// that could not be measured carries its error).
struct RowRounds {
  Row row;
  std::vector<RowResult> rounds;
};

/// The outcome for one target.
struct TargetResult {
  Target target;
  bool priced = false;
  std::string refused;  ///< why it was not priced
  Validation validation;
  std::vector<RowRounds> rows;
  std::vector<std::optional<double>> cpu_rps;  ///< its CPU ceiling in each round
  std::string cpu_ceiling_from;                ///< where that came from ("its /plaintext row")
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

/// The CPUs cm-load runs on, as counted for "cm-load CPU busy" (all of them when not pinned).
std::size_t load_cpu_count(const Settings& settings);

/// Server CPU seconds between two instants, interpolated from (time, cpu) samples.
double cpu_between(const std::vector<std::pair<double, double>>& samples, double t0, double t1);

/// Whether `program --help` mentions `flag` (cm-load --stagger, say); false when it cannot run.
bool load_supports(const std::filesystem::path& program, const std::string& flag);

/// For each target, the index of the target it takes its CPU ceiling from: itself, or the first
/// target of the same server (the profile's first variant). An offload variant that moves even a
/// trivial request off the loop is priced against the loop's own /plaintext.
std::vector<std::size_t> ceiling_sources(const std::vector<Target>& targets);

/// Prices one round of one row against `cpu_rps`, the CPU ceiling of the same round (unless the
/// row defines it): the ceilings, the efficiency, and the notes that say where the time went.
/// Needs the row measured (`load` is cm-load's JSON); otherwise it does nothing.
void price_round(RowResult& r, ServerKind kind, const ServerShape& shape,
                 std::optional<double> cpu_rps, unsigned server_cpus);

/// Prices every round of every row of `t` against that round's CPU ceiling: its own CPU-ceiling
/// row in the same round, or, with `inherited`, that list's entry for the round (the ceilings
/// of the target it inherits from). Fills `t.cpu_rps`.
void price_rounds(TargetResult& t, const ServerShape& shape, unsigned server_cpus,
                  const std::vector<std::optional<double>>* inherited = nullptr);

/// Prices every target: validates each once, on a server of its own (one that fails is not
/// priced); then runs every row `profile.rounds` times, each on a freshly started server, in
/// the order of schedule() -- row by row, round after round, the servers interleaved within a
/// round -- and prices each round against the CPU ceiling of the same round.
std::vector<TargetResult> price_targets(const std::vector<Target>& targets, const Profile& profile,
                                        const Settings& settings);

}  // namespace cm::price
