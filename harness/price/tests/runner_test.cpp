// Which servers a profile prices, on which rows, validated on which routes.
#include <gtest/gtest.h>

#include "runner.hpp"

namespace cm::price {
namespace {

Profile profile(const std::string& models) {
  return parse_profile(nlohmann::json::parse(R"({"name": "t", "models": ")" + models + R"(",
    "peers": ["nginx", "node"],
    "variants": [{"name": "inline", "server_args": ["--offload", "inline"]}, {"name": "pool"}],
    "rows": [
      {"id": "plaintext", "path": "/plaintext", "connections": [8], "cpu_ceiling": true},
      {"id": "delay", "path": "/delay/{ms}", "delay_ms": [10], "connections": [8]},
      {"id": "block", "path": "/block/{ms}", "delay_ms": [1], "connections": [8]},
      {"id": "cpu", "path": "/cpu/50", "connections": [8]}]})"));
}

TEST(Runner, PlansEveryModelInEveryVariantThenThePeers) {
  std::vector<std::string> skipped;
  const auto targets = plan_targets(profile("all"), {"blocking", "asio_coro"}, {}, false, skipped);
  ASSERT_EQ(targets.size(), 4u);
  EXPECT_EQ(targets[0].name, "blocking");
  EXPECT_EQ(targets[0].kind, ServerKind::blocking);
  EXPECT_EQ(targets[1].variant.name, "pool");
  EXPECT_EQ(targets[3].name, "asio_coro");
  EXPECT_EQ(targets[3].kind, ServerKind::async);
  EXPECT_TRUE(skipped.empty());  // peers off: not even looked for

  const auto async = plan_targets(profile("async"), {"blocking", "asio_coro"}, {}, false, skipped);
  ASSERT_EQ(async.size(), 2u);
  EXPECT_EQ(async[0].name, "asio_coro");

  const auto only =
      plan_targets(profile("all"), {"blocking", "asio_coro"}, {"asio_coro"}, true, skipped);
  ASSERT_EQ(only.size(), 2u);  // no peer unless named
  EXPECT_THROW(plan_targets(profile("all"), {"blocking"}, {"nosuch"}, false, skipped),
               std::invalid_argument);
}

TEST(Runner, PeersArePricedOnlyOnWhatTheyServe) {
  const auto rows = expand_rows(profile("all"));
  const auto nginx = rows_for({"nginx", ServerKind::peer, {"-", {}}}, rows);
  ASSERT_EQ(nginx.size(), 1u);
  EXPECT_EQ(nginx[0].path, "/plaintext");
  const auto node = rows_for({"node", ServerKind::peer, {"-", {}}}, rows);
  ASSERT_EQ(node.size(), 2u);
  EXPECT_EQ(node[1].path, "/delay/{ms}");
  EXPECT_EQ(rows_for({"asio_coro", ServerKind::async, {"pool", {}}}, rows).size(), rows.size());
}

TEST(Runner, ValidatesTheRoutesARowUses) {
  const auto rows = expand_rows(profile("all"));
  const auto model = validation_plan_for({"asio_coro", ServerKind::async, {}}, rows);
  EXPECT_TRUE(model.plaintext && model.delay && model.block);
  EXPECT_EQ(model.cpu_us, std::vector<unsigned>{50});
  const Target nginx{"nginx", ServerKind::peer, {"-", {}}};
  const auto peer = validation_plan_for(nginx, rows_for(nginx, rows));
  EXPECT_TRUE(peer.plaintext);
  EXPECT_FALSE(peer.delay);  // nginx has no /delay: it is priced on /plaintext only
  EXPECT_FALSE(peer.block);
  // A model is always held to the /delay checks, whatever the profile prices.
  const std::vector<Row> plaintext_only{rows[0]};
  EXPECT_TRUE(validation_plan_for({"blocking", ServerKind::blocking, {}}, plaintext_only).delay);
}

TEST(Runner, ShapeReadsTheVariantsServerArguments) {
  Settings settings;
  settings.loops = 3;
  auto p = profile("all");
  const auto shape = shape_of({"asio_coro", ServerKind::async, p.variants[0]}, p, settings);
  EXPECT_EQ(shape.offload, "inline");
  EXPECT_EQ(shape.loops, 3u);
  EXPECT_EQ(shape.pool, 64u);
  EXPECT_EQ(waiting_threads(shape, "/block/{ms}"), 3.0);
  EXPECT_EQ(shape_of({"asio_coro", ServerKind::async, p.variants[1]}, p, settings).offload,
            "standard");
}

TEST(Runner, AVariantTakesItsCpuCeilingFromTheFirstVariantOfItsServer) {
  const std::vector<Target> targets{{"asio_coro", ServerKind::async, {"inline", {}}},
                                    {"asio_coro", ServerKind::async, {"pool", {}}},
                                    {"uring_coro", ServerKind::async, {"inline", {}}},
                                    {"uring_coro", ServerKind::async, {"pool", {}}},
                                    {"nginx", ServerKind::peer, {"-", {}}}};
  EXPECT_EQ(ceiling_sources(targets), (std::vector<std::size_t>{0, 0, 2, 2, 4}));
}

/// One round of a row, measured: cm-load's figures as price_round reads them.
RowResult measured(const Row& row, unsigned round, double rps) {
  RowResult r;
  r.row = row;
  r.round = round;
  r.rps = rps;
  r.connections_open = row.connections;
  r.load = nlohmann::json::parse(R"({"connect_failures": {}, "delay_ms": null,
    "errors": {"timeout": 0}, "errors_total": 0, "reconnects": 0,
    "latency_us": {"mean": 1000, "p50": 1000, "p99": 2000},
    "overshoot_us": {"mean": 1000, "p50": 1000, "p99": 2000}})");
  if (row.delay)
    r.load["delay_ms"] = {
        {"min", row.mean_delay_ms}, {"max", row.mean_delay_ms}, {"mean", row.mean_delay_ms}};
  r.served = served_connections(rps, 1000);
  return r;
}

TEST(Runner, EachRoundIsPricedAgainstItsOwnRoundsCpuCeiling) {
  // /delay/10 at 100,000 connections: 10M rps of connection ceiling, so the CPU ceiling binds.
  const Row plain{"plaintext", "/plaintext", std::nullopt, 0, 0, 128, true};
  const Row wait{"delay", "/delay/{ms}", std::string("10"), 10, 0, 100000, false};
  TargetResult t;
  t.target = {"asio_coro", ServerKind::async, {"standard", {}}};
  t.priced = true;
  t.rows = {{plain, {measured(plain, 0, 1000), measured(plain, 1, 2000), measured(plain, 2, 1500)}},
            {wait, {measured(wait, 0, 900), measured(wait, 1, 1000), measured(wait, 2, 1350)}}};
  ServerShape shape;
  price_rounds(t, shape, 1);
  EXPECT_EQ(t.cpu_rps, (std::vector<std::optional<double>>{1000, 2000, 1500}));
  const auto& rounds = t.rows[1].rounds;
  EXPECT_EQ(rounds[1].ceilings.bound(), "cpu");
  EXPECT_DOUBLE_EQ(*rounds[0].efficiency, 0.9);
  EXPECT_DOUBLE_EQ(*rounds[1].efficiency, 0.5);  // the fast round's ceiling, not another's
  EXPECT_DOUBLE_EQ(*rounds[2].efficiency, 0.9);
  EXPECT_FALSE(t.rows[0].rounds[0].efficiency);  // the ceiling row defines it

  // A round whose CPU-ceiling row failed has no CPU ceiling, and says so.
  t.rows[0].rounds[1].error = "cm-load exit 1";
  for (auto& r : t.rows[1].rounds)
    r.notes.clear();
  price_rounds(t, shape, 1);
  EXPECT_FALSE(t.cpu_rps[1]);
  EXPECT_FALSE(t.rows[1].rounds[1].ceilings.cpu);
  EXPECT_EQ(t.rows[1].rounds[1].ceilings.bound(), "connections");
  ASSERT_FALSE(t.rows[1].rounds[1].notes.empty());
  EXPECT_EQ(t.rows[1].rounds[1].notes.back().kind, "no-cpu-ceiling");
}

TEST(Runner, AnInheritedCeilingIsTakenRoundByRound) {
  const Row plain{"trivial", "/plaintext", std::nullopt, 0, 0, 64, false};
  TargetResult t;
  t.target = {"asio_coro", ServerKind::async, {"pool", {"--offload", "pool"}}};
  t.priced = true;
  t.cpu_ceiling_from = "variant inline";
  t.rows = {{plain, {measured(plain, 0, 800), measured(plain, 1, 800)}}};
  const std::vector<std::optional<double>> inline_ceilings{1000, 1600};
  price_rounds(t, ServerShape{}, 1, &inline_ceilings);
  EXPECT_DOUBLE_EQ(*t.rows[0].rounds[0].efficiency, 0.8);
  EXPECT_DOUBLE_EQ(*t.rows[0].rounds[1].efficiency, 0.5);
  EXPECT_EQ(t.rows[0].rounds[1].notes.back().text,
            "priced against asio_coro's CPU ceiling from variant inline in the same round "
            "(1600 rps)");
}

}  // namespace
}  // namespace cm::price
