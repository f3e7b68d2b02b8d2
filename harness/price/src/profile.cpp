#include "profile.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <set>
#include <stdexcept>

namespace cm::price {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument(what);
}

void only_keys(const json& object, const std::set<std::string>& allowed, const std::string& where) {
  if (!object.is_object()) fail(where + ": expected an object");
  for (const auto& [key, value] : object.items()) {
    if (!allowed.contains(key)) fail(where + ": unknown key \"" + key + "\"");
  }
}

unsigned positive(const json& value, const std::string& where) {
  if (!value.is_number_unsigned() || value.get<unsigned long long>() == 0 ||
      value.get<unsigned long long>() > 10'000'000)
    fail(where + ": expected a whole number from 1 to 10000000");
  return value.get<unsigned>();
}

double seconds(const json& value, const std::string& where, double min) {
  if (!value.is_number() || value.get<double>() < min || value.get<double>() > 3600)
    fail(where + ": expected a number of seconds from " + std::to_string(min) + " to 3600");
  return value.get<double>();
}

std::string text(const json& value, const std::string& where) {
  if (!value.is_string()) fail(where + ": expected a string");
  return value.get<std::string>();
}

unsigned parse_unsigned(std::string_view s, const std::string& where) {
  unsigned v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) fail(where);
  return v;
}

/// The number at the end of /block/N or /cpu/N, if the path is one.
std::optional<unsigned> trailing_number(const std::string& path, std::string_view prefix) {
  if (!path.starts_with(prefix)) return std::nullopt;
  const std::string_view rest = std::string_view(path).substr(prefix.size());
  unsigned v = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
  if (rest.empty() || ec != std::errc() || end != rest.data() + rest.size()) return std::nullopt;
  return v;
}

}  // namespace

std::pair<unsigned, unsigned> parse_delay(const std::string& text) {
  const std::string what = "delay \"" + text + "\": expected ms (\"100\") or a range (\"10:90\")";
  const auto colon = text.find(':');
  if (colon == std::string::npos) {
    const unsigned v = parse_unsigned(text, what);
    if (v > 60000) fail(what + ", at most 60000");
    return {v, v};
  }
  const unsigned a = parse_unsigned(std::string_view(text).substr(0, colon), what);
  const unsigned b = parse_unsigned(std::string_view(text).substr(colon + 1), what);
  if (a > b || b > 60000) fail(what + ", with A <= B <= 60000");
  return {a, b};
}

double mean_delay_ms(const std::string& delay) {
  const auto [a, b] = parse_delay(delay);
  return (static_cast<double>(a) + b) / 2.0;
}

Profile parse_profile(const json& doc) {
  only_keys(doc,
            {"name", "description", "duration_s", "warmup_s", "rounds", "timeout_ms", "models",
             "peers", "server", "load_threads", "chart", "variants", "rows"},
            "profile");
  Profile p;
  if (!doc.contains("name")) fail("profile: \"name\" is required");
  p.name = text(doc["name"], "name");
  if (p.name.empty() || p.name.find_first_of("/. ") != std::string::npos)
    fail("name: a plain word (it names the results folder)");
  if (doc.contains("description")) p.description = text(doc["description"], "description");
  if (doc.contains("duration_s")) p.duration_s = seconds(doc["duration_s"], "duration_s", 0.5);
  if (doc.contains("warmup_s")) p.warmup_s = seconds(doc["warmup_s"], "warmup_s", 0);
  if (doc.contains("rounds")) {
    const auto& rounds = doc["rounds"];
    if (!rounds.is_number_integer() || rounds.get<long long>() < 1 || rounds.get<long long>() > 100)
      fail("rounds: expected a whole number from 1 to 100 (each row is measured that many times)");
    p.rounds = rounds.get<unsigned>();
  }
  if (doc.contains("timeout_ms")) p.timeout_ms = positive(doc["timeout_ms"], "timeout_ms");
  if (doc.contains("models")) {
    p.models = text(doc["models"], "models");
    if (p.models != "all" && p.models != "async") fail("models: \"all\" or \"async\"");
  }
  if (doc.contains("peers")) {
    if (!doc["peers"].is_array()) fail("peers: expected a list");
    for (const auto& peer : doc["peers"]) {
      const auto name = text(peer, "peers[]");
      if (name != "nginx" && name != "node")
        fail("peers: \"nginx\" or \"node\", not \"" + name + "\"");
      p.peers.push_back(name);
    }
  }
  if (doc.contains("server")) {
    const auto& s = doc["server"];
    only_keys(s, {"blocking_workers", "pool", "loops", "cpus"}, "server");
    if (s.contains("blocking_workers"))
      p.blocking_workers = positive(s["blocking_workers"], "server.blocking_workers");
    if (s.contains("pool")) p.pool = positive(s["pool"], "server.pool");
    if (s.contains("loops")) p.loops = positive(s["loops"], "server.loops");
    if (s.contains("cpus")) p.server_cpus = positive(s["cpus"], "server.cpus");
  }
  if (doc.contains("load_threads")) p.load_threads = positive(doc["load_threads"], "load_threads");
  if (doc.contains("chart")) {
    p.chart = text(doc["chart"], "chart");
    if (p.chart != "bars" && p.chart != "sweep" && p.chart != "offload")
      fail("chart: \"bars\", \"sweep\" or \"offload\"");
  }
  if (doc.contains("variants")) {
    if (!doc["variants"].is_array() || doc["variants"].empty())
      fail("variants: expected a non-empty list");
    for (const auto& v : doc["variants"]) {
      only_keys(v, {"name", "server_args"}, "variants[]");
      Variant variant{text(v.value("name", json()), "variants[].name"), {}};
      if (v.contains("server_args")) {
        if (!v["server_args"].is_array())
          fail("variants[].server_args: expected a list of strings");
        for (const auto& a : v["server_args"])
          variant.server_args.push_back(text(a, "variants[].server_args[]"));
      }
      p.variants.push_back(std::move(variant));
    }
  } else {
    p.variants.push_back({"standard", {}});
  }
  if (!doc.contains("rows") || !doc["rows"].is_array() || doc["rows"].empty())
    fail("rows: expected a non-empty list");
  std::set<std::string> ids;
  for (const auto& r : doc["rows"]) {
    only_keys(r, {"id", "path", "delay_ms", "connections", "sweep", "cpu_ceiling", "stagger"},
              "rows[]");
    RowSpec row;
    row.id = text(r.value("id", json()), "rows[].id");
    const std::string where = "rows[" + row.id + "]";
    if (!ids.insert(row.id).second) fail(where + ": the id is used twice");
    row.path = text(r.value("path", json()), where + ".path");
    if (!row.path.starts_with("/")) fail(where + ".path: must start with /");
    if (r.contains("delay_ms")) {
      if (!r["delay_ms"].is_array()) fail(where + ".delay_ms: expected a list");
      for (const auto& d : r["delay_ms"]) {
        std::string delay = d.is_number_unsigned() ? std::to_string(d.get<unsigned>())
                                                   : text(d, where + ".delay_ms[]");
        parse_delay(delay);
        row.delays.push_back(delay);
      }
    }
    const bool templ = row.path.find("{ms}") != std::string::npos;
    if (templ && row.delays.empty()) fail(where + ": the path has {ms} but delay_ms is missing");
    if (!templ && !row.delays.empty()) fail(where + ": delay_ms given but the path has no {ms}");
    if (!r.contains("connections") || !r["connections"].is_array() || r["connections"].empty())
      fail(where + ".connections: expected a non-empty list");
    for (const auto& c : r["connections"])
      row.connections.push_back(positive(c, where + ".connections[]"));
    auto flag = [&](const char* key) {
      if (!r[key].is_boolean()) fail(where + "." + key + ": expected true or false");
      return r[key].get<bool>();
    };
    if (r.contains("sweep")) row.sweep = flag("sweep");
    if (r.contains("cpu_ceiling")) row.cpu_ceiling = flag("cpu_ceiling");
    if (r.contains("stagger")) row.stagger = flag("stagger");
    if (row.cpu_ceiling && templ) fail(where + ": a CPU-ceiling row cannot wait ({ms})");
    p.rows.push_back(std::move(row));
  }
  return p;
}

Profile load_profile(const std::string& name_or_path, const std::filesystem::path& profiles_dir) {
  std::filesystem::path file = name_or_path;
  if (name_or_path.find('/') == std::string::npos && !name_or_path.ends_with(".json"))
    file = profiles_dir / (name_or_path + ".json");
  std::ifstream in(file);
  if (!in) fail("profile " + file.string() + ": cannot be read (is the name right?)");
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::exception& e) {
    fail("profile " + file.string() + ": not valid JSON: " + e.what());
  }
  try {
    return parse_profile(doc);
  } catch (const std::invalid_argument& e) {
    fail("profile " + file.string() + ": " + e.what());
  } catch (const json::exception& e) {
    fail("profile " + file.string() + ": " + e.what());
  }
}

void apply_overrides(Profile& p, const Overrides& o) {
  const bool has_sweep = std::any_of(p.rows.begin(), p.rows.end(), [](auto& r) { return r.sweep; });
  if ((o.connections || o.delays) && !has_sweep)
    fail("--connections/--delay: profile " + p.name + " has no sweep row to apply them to");
  for (auto& row : p.rows) {
    if (!row.sweep) continue;
    if (o.connections) {
      if (o.connections->empty()) fail("--connections: expected at least one count");
      for (unsigned c : *o.connections)
        if (c == 0) fail("--connections: counts start at 1");
      row.connections = *o.connections;
    }
    if (o.delays && row.path.find("{ms}") != std::string::npos) {
      for (const auto& d : *o.delays)
        parse_delay(d);
      row.delays = *o.delays;
    }
  }
  if (o.duration_s) {
    if (*o.duration_s < 0.5) fail("--duration: at least 0.5 s");
    p.duration_s = *o.duration_s;
  }
  if (o.warmup_s) {
    if (*o.warmup_s < 0) fail("--warmup: not negative");
    p.warmup_s = *o.warmup_s;
  }
  if (o.rounds) {
    if (*o.rounds == 0 || *o.rounds > 100)
      fail("--rounds: from 1 to 100 (each row is measured that many times, servers interleaved)");
    p.rounds = *o.rounds;
  }
  auto at_least_one = [](std::optional<unsigned> v, const char* flag) {
    if (v && *v == 0) fail(std::string(flag) + ": at least 1");
    return v;
  };
  if (at_least_one(o.timeout_ms, "--timeout")) p.timeout_ms = o.timeout_ms;
  if (at_least_one(o.blocking_workers, "--blocking-workers"))
    p.blocking_workers = *o.blocking_workers;
  if (at_least_one(o.pool, "--pool")) p.pool = *o.pool;
  if (at_least_one(o.loops, "--loops")) p.loops = o.loops;
  if (at_least_one(o.server_cpus, "--server-cpus")) p.server_cpus = o.server_cpus;
  if (at_least_one(o.load_threads, "--load-threads")) p.load_threads = o.load_threads;
}

std::vector<Row> expand_rows(const Profile& p) {
  std::vector<Row> out;
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& spec : p.rows) {
      if (spec.cpu_ceiling != (pass == 0)) continue;
      std::vector<std::optional<std::string>> delays;
      if (spec.delays.empty()) delays.emplace_back();
      for (const auto& d : spec.delays)
        delays.emplace_back(d);
      for (const auto& delay : delays) {
        for (unsigned c : spec.connections) {
          Row row{spec.id, spec.path, delay, 0, 0, c, spec.cpu_ceiling, spec.stagger};
          if (delay) row.mean_delay_ms = mean_delay_ms(*delay);
          if (auto n = trailing_number(spec.path, "/block/")) row.mean_delay_ms = *n;
          if (auto n = trailing_number(spec.path, "/cpu/")) row.compute_us = *n;
          out.push_back(std::move(row));
        }
      }
    }
  }
  return out;
}

bool same_row(const Row& a, const Row& b) {
  return a.id == b.id && a.path == b.path && a.delay == b.delay && a.connections == b.connections;
}

unsigned effective_timeout_ms(const Profile& p, const Row& row) {
  if (p.timeout_ms) return *p.timeout_ms;
  unsigned longest = 0;
  if (row.delay) longest = parse_delay(*row.delay).second;
  longest = std::max(longest, static_cast<unsigned>(row.mean_delay_ms));
  return std::max(2000u, 3 * longest);
}

}  // namespace cm::price
