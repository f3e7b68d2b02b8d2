// Profiles: parsing, errors that name the key, flags that override, rows in running order.
#include <gtest/gtest.h>

#include "profile.hpp"

namespace cm::price {
namespace {

using nlohmann::json;

json sample() {
  return json::parse(R"({
    "name": "t", "duration_s": 3, "warmup_s": 0.5, "peers": ["nginx"],
    "server": {"blocking_workers": 8, "pool": 4},
    "rows": [
      {"id": "delay", "path": "/delay/{ms}", "delay_ms": [100, "10:90"], "connections": [10, 20], "sweep": true},
      {"id": "block", "path": "/block/7", "connections": [5]},
      {"id": "cpu", "path": "/cpu/50", "connections": [3]},
      {"id": "plaintext", "path": "/plaintext", "connections": [64], "cpu_ceiling": true}
    ]})");
}

TEST(Profile, ParsesEveryKnob) {
  const auto p = parse_profile(sample());
  EXPECT_EQ(p.name, "t");
  EXPECT_DOUBLE_EQ(p.duration_s, 3);
  EXPECT_DOUBLE_EQ(p.warmup_s, 0.5);
  EXPECT_EQ(p.blocking_workers, 8u);
  EXPECT_EQ(p.pool, 4u);
  EXPECT_EQ(p.peers, std::vector<std::string>{"nginx"});
  ASSERT_EQ(p.variants.size(), 1u);
  EXPECT_EQ(p.variants[0].name, "standard");
  ASSERT_EQ(p.rows.size(), 4u);
  EXPECT_EQ(p.rows[0].delays, (std::vector<std::string>{"100", "10:90"}));
  EXPECT_TRUE(p.rows[0].sweep);
  EXPECT_TRUE(p.rows[3].cpu_ceiling);
}

TEST(Profile, ExpandsRowsCpuCeilingFirst) {
  const auto rows = expand_rows(parse_profile(sample()));
  ASSERT_EQ(rows.size(), 1u + 4u + 1u + 1u);
  EXPECT_EQ(rows[0].path, "/plaintext");
  EXPECT_TRUE(rows[0].cpu_ceiling);
  EXPECT_EQ(*rows[1].delay, "100");
  EXPECT_EQ(rows[1].connections, 10u);
  EXPECT_EQ(rows[2].connections, 20u);
  EXPECT_DOUBLE_EQ(rows[3].mean_delay_ms, 50.0);  // 10:90
  EXPECT_DOUBLE_EQ(rows[5].mean_delay_ms, 7.0);   // a literal /block/7 waits 7 ms
  EXPECT_DOUBLE_EQ(rows[6].compute_us, 50.0);     // /cpu/50
  EXPECT_DOUBLE_EQ(rows[6].mean_delay_ms, 0.0);
}

TEST(Profile, RejectsMistakesNamingTheKey) {
  auto expect_error = [](json doc, const std::string& fragment) {
    try {
      parse_profile(doc);
      ADD_FAILURE() << "accepted: " << doc.dump();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  auto doc = sample();
  doc["conections"] = 5;
  expect_error(doc, "unknown key \"conections\"");
  doc = sample();
  doc["rows"][0].erase("delay_ms");
  expect_error(doc, "has {ms} but delay_ms is missing");
  doc = sample();
  doc["rows"][0]["delay_ms"] = json::array({"90:10"});
  expect_error(doc, "delay \"90:10\"");
  doc = sample();
  doc["rows"][1]["connections"] = json::array({0});
  expect_error(doc, "rows[block].connections[]");
  doc = sample();
  doc["peers"] = json::array({"apache"});
  expect_error(doc, "\"apache\"");
  doc = sample();
  doc["name"] = "../x";
  expect_error(doc, "name");
  doc = sample();
  doc["rows"][1]["id"] = "delay";
  expect_error(doc, "used twice");
}

TEST(Profile, DelaysParseAsFixedOrRange) {
  EXPECT_EQ(parse_delay("100"), std::make_pair(100u, 100u));
  EXPECT_EQ(parse_delay("10:90"), std::make_pair(10u, 90u));
  EXPECT_DOUBLE_EQ(mean_delay_ms("10:90"), 50.0);
  for (const char* bad : {"", "abc", "-5", "1.5", "90:10", "70000", "10:", ":5", "5:6:7"})
    EXPECT_THROW(parse_delay(bad), std::invalid_argument) << bad;
}

TEST(Profile, FlagsOverrideTheSweepRowsOnly) {
  auto p = parse_profile(sample());
  Overrides o;
  o.connections = std::vector<unsigned>{1000, 4000};
  o.delays = std::vector<std::string>{"1000"};
  o.duration_s = 20;
  o.pool = 128;
  o.server_cpus = 32;
  apply_overrides(p, o);
  EXPECT_EQ(p.rows[0].connections, (std::vector<unsigned>{1000, 4000}));
  EXPECT_EQ(p.rows[0].delays, std::vector<std::string>{"1000"});
  EXPECT_EQ(p.rows[1].connections, std::vector<unsigned>{5});  // not a sweep row
  EXPECT_EQ(p.rows[3].connections, std::vector<unsigned>{64});
  EXPECT_DOUBLE_EQ(p.duration_s, 20);
  EXPECT_EQ(p.pool, 128u);
  EXPECT_EQ(p.server_cpus, 32u);

  Overrides bad;
  bad.delays = std::vector<std::string>{"abc"};
  EXPECT_THROW(apply_overrides(p, bad), std::invalid_argument);
  Overrides zero;
  zero.connections = std::vector<unsigned>{0};
  EXPECT_THROW(apply_overrides(p, zero), std::invalid_argument);
}

TEST(Profile, TimeoutDefaultsToThreeDelaysAndAtLeastTwoSeconds) {
  auto p = parse_profile(sample());
  const auto rows = expand_rows(p);
  EXPECT_EQ(effective_timeout_ms(p, rows[0]), 2000u);  // /plaintext
  Row slow{"d", "/delay/{ms}", std::string("1000"), 1000, 0, 10, false};
  EXPECT_EQ(effective_timeout_ms(p, slow), 3000u);
  p.timeout_ms = 500;
  EXPECT_EQ(effective_timeout_ms(p, slow), 500u);
}

TEST(Profile, RoundsComeFromTheProfileAndTheFlagOverridesThem) {
  auto doc = sample();
  EXPECT_EQ(parse_profile(doc).rounds, 1u);  // absent: one round, as before
  doc["rounds"] = 3;
  auto p = parse_profile(doc);
  EXPECT_EQ(p.rounds, 3u);
  Overrides o;
  o.rounds = 5;
  apply_overrides(p, o);
  EXPECT_EQ(p.rounds, 5u);
  for (const json& bad : {json(0), json(-1), json(2.5), json("3"), json(101)}) {
    doc["rounds"] = bad;
    EXPECT_THROW(parse_profile(doc), std::invalid_argument) << bad;
  }
  Overrides zero;
  zero.rounds = 0;
  try {
    apply_overrides(p, zero);
    ADD_FAILURE() << "--rounds 0 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--rounds: from 1 to 100"), std::string::npos) << e.what();
  }
}

TEST(Profile, ARowCanAskForAStaggeredStart) {
  auto doc = sample();
  doc["rows"][0]["stagger"] = true;
  const auto rows = expand_rows(parse_profile(doc));
  EXPECT_FALSE(rows[0].stagger);  // /plaintext, the CPU-ceiling row, runs first
  EXPECT_TRUE(rows[1].stagger);   // every /delay row of the spec
  EXPECT_TRUE(rows[4].stagger);
  EXPECT_FALSE(rows[5].stagger);  // /block/7
  doc["rows"][0]["stagger"] = "yes";
  EXPECT_THROW(parse_profile(doc), std::invalid_argument);
}

TEST(Profile, TheShippedProfilesParse) {
  const std::filesystem::path dir = std::filesystem::path(CM_SOURCE_DIR) / "harness/profiles";
  for (const char* name : {"quick", "delay-sweep", "arena", "offload"}) {
    const auto p = load_profile(name, dir);
    EXPECT_EQ(p.name, name);
    const auto rows = expand_rows(p);
    ASSERT_FALSE(rows.empty()) << name;
    EXPECT_TRUE(rows.front().cpu_ceiling) << name << ": the CPU ceiling row runs first";
    EXPECT_GE(p.rounds, 3u) << name << ": a published profile measures each row 3 times or more";
    // quick and delay-sweep start their /delay rows staggered; arena keeps HttpArena's
    // simultaneous start.
    const bool staggered = std::string(name) == "quick" || std::string(name) == "delay-sweep";
    for (const auto& row : rows)
      if (row.path.starts_with("/delay/")) {
        EXPECT_EQ(row.stagger, staggered) << name;
      }
  }
  EXPECT_THROW(load_profile("no-such-profile", dir), std::invalid_argument);
}

TEST(Profile, QuickKeepsMakeCompareWithinItsBudget) {
  // make compare runs quick on 2 cores in under 4 minutes: 5 models x its rows, nginx on
  // /plaintext, node on /plaintext and /delay, each row `rounds` times. Beside the windows each
  // run costs about 0.6 s (start, settle, stop), so the windows alone must stay near 200 s.
  const auto p = load_profile("quick", std::filesystem::path(CM_SOURCE_DIR) / "harness/profiles");
  const auto rows = expand_rows(p);
  std::size_t runs = 5 * rows.size();
  for (const auto& row : rows)
    runs += (row.path == "/plaintext" ? 2 : 0) + (row.path.starts_with("/delay/") ? 1 : 0);
  runs *= p.rounds;
  const double seconds = static_cast<double>(runs) * (p.warmup_s + p.duration_s + 0.6);
  EXPECT_LT(seconds, 230) << runs << " runs of " << p.warmup_s << " + " << p.duration_s << " s";
}

}  // namespace
}  // namespace cm::price
