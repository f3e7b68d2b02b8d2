#pragma once
/// \file profile.hpp
/// A pricing profile (a JSON file in harness/profiles/): which servers, which rows, how long.
/// Every knob has a flag that overrides it, so the same command prices a bigger machine.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cm::price {

/// One line of a profile: a path, at one or more delays and connection counts.
struct RowSpec {
  std::string id;                     ///< short name ("plaintext", "delay", "block", "cpu")
  std::string path;                   ///< URL path; `{ms}` is replaced by the delay
  std::vector<std::string> delays;    ///< "100" or "10:90" (ms); empty when path has no {ms}
  std::vector<unsigned> connections;  ///< connection counts
  bool sweep = false;                 ///< --connections / --delay replace this row's lists
  bool cpu_ceiling = false;           ///< this row's rps is the server's CPU ceiling
  bool stagger = false;               ///< cm-load --stagger: spread the connections' first requests
};

/// A way to start every model of the profile (e.g. --offload inline); "standard" by default.
struct Variant {
  std::string name;                      ///< shown in the table
  std::vector<std::string> server_args;  ///< extra cm-server arguments
};

/// A whole profile, after the flags were applied.
struct Profile {
  std::string name;
  std::string description;
  double duration_s = 5;                 ///< measured window of each row
  double warmup_s = 1;                   ///< warm-up before it, not counted
  unsigned rounds = 1;                   ///< every row is measured this many times, interleaved
  std::optional<unsigned> timeout_ms;    ///< cm-load --timeout (default: see effective_timeout_ms)
  std::string models = "all";            ///< "all" or "async" (every built model but blocking)
  std::vector<std::string> peers;        ///< reference servers: "nginx", "node"
  unsigned blocking_workers = 64;        ///< --threads of the blocking model
  unsigned pool = 64;                    ///< --blocking-threads of the async models
  std::optional<unsigned> loops;         ///< --threads of the async models (default: server CPUs)
  std::optional<unsigned> server_cpus;   ///< CPUs for the server (default: half, at least 1)
  std::optional<unsigned> load_threads;  ///< cm-load --threads (default: the load's CPUs)
  std::string chart = "bars";            ///< what harness/plot draws: "bars", "sweep", "offload"
  std::vector<Variant> variants;         ///< at least one
  std::vector<RowSpec> rows;             ///< the CPU-ceiling row(s) first
};

/// Flags of cm-price that override a profile's knobs (unset: keep the profile's value).
struct Overrides {
  std::optional<std::vector<unsigned>> connections;  ///< for the sweep rows
  std::optional<std::vector<std::string>> delays;    ///< for the sweep rows
  std::optional<double> duration_s, warmup_s;
  std::optional<unsigned> rounds;
  std::optional<unsigned> timeout_ms;
  std::optional<unsigned> blocking_workers, pool, loops, server_cpus, load_threads;
};

/// Parses a profile; throws std::invalid_argument naming the key that is wrong or unknown.
Profile parse_profile(const nlohmann::json& doc);

/// Reads `name_or_path`: a file path, or a name looked up as <profiles_dir>/<name>.json.
/// Throws std::invalid_argument when it is missing or malformed, saying which file.
Profile load_profile(const std::string& name_or_path, const std::filesystem::path& profiles_dir);

/// Applies the flags; throws std::invalid_argument on a value that makes no sense.
void apply_overrides(Profile& profile, const Overrides& overrides);

/// Parses a delay, "100" or "10:90", into its [min, max] in ms; throws std::invalid_argument.
std::pair<unsigned, unsigned> parse_delay(const std::string& text);

/// The mean of a delay "A:B" (uniform) or "A".
double mean_delay_ms(const std::string& delay);

/// One concrete row to run: a RowSpec at one delay and one connection count.
struct Row {
  std::string id;
  std::string path;                  ///< still a template when it has {ms}
  std::optional<std::string> delay;  ///< set when the path has {ms}
  double mean_delay_ms = 0;          ///< of `delay`, or N of a literal /block/N; 0 otherwise
  double compute_us = 0;             ///< N of /cpu/N
  unsigned connections = 0;
  bool cpu_ceiling = false;
  bool stagger = false;  ///< run cm-load with --stagger
};

/// The same row of two servers' lists (id, path, delay and connections agree).
bool same_row(const Row& a, const Row& b);

/// Every row of the profile, CPU-ceiling rows first, each spec in file order.
std::vector<Row> expand_rows(const Profile& profile);

/// cm-load's --timeout for a row: the profile's, or max(2000, 3 x the longest delay) ms.
unsigned effective_timeout_ms(const Profile& profile, const Row& row);

}  // namespace cm::price
