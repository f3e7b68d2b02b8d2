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

}  // namespace
}  // namespace cm::price
