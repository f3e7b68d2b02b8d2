// What cm-price writes: the table, the CSV and the JSON carry the priced figures of a row.
#include <gtest/gtest.h>

#include <algorithm>

#include "report.hpp"

namespace cm::price {
namespace {

using nlohmann::json;

json load_json(double rps) {
  return json::parse(R"({"tool": "cm-load", "connections_requested": 2000, "connections_open": 2000,
    "connect_failures": {}, "delay_ms": {"min": 100, "max": 100, "mean": 100}, "warmup_s": 1,
    "duration_s": 5, "requests": )" +
                     std::to_string(rps * 5) + R"(, "rps": )" + std::to_string(rps) + R"(,
    "errors": {"connect": 0, "reset": 0, "timeout": 7, "status": 0, "body": 0, "early": 0},
    "errors_total": 7,
    "latency_us": {"mean": 101000, "p50": 100500, "p90": 102000, "p99": 104250, "p999": 110000, "max": 120000},
    "overshoot_us": {"mean": 1000, "p50": 500, "p90": 2000, "p99": 4250, "p999": 10000, "max": 20000},
    "client_cpu_s": 0.5})");
}

TargetResult sample() {
  TargetResult t;
  t.target = {"asio_coro", ServerKind::async, {"standard", {}}};
  t.priced = true;
  RowResult r;
  r.server = "asio_coro";
  r.variant = "standard";
  r.threads = "1 loop, pool 64";
  r.row = {"delay", "/delay/{ms}", std::string("100"), 100, 0, 2000, false};
  r.load = load_json(19200);
  r.connections_open = 2000;
  r.connections_offered = 2000;
  r.rps = 19200;
  r.ceilings = compute_ceilings({.connections = 2000, .mean_delay_ms = 100, .cpu_rps = 50000});
  r.efficiency = efficiency(r.rps, r.ceilings);
  r.served = served_connections(r.rps, 101000);
  r.server_cpu_s = 0.96;
  r.idle_rss_kib = 4096;
  r.peak_rss_kib = 4096 + 6000;
  t.rows.push_back(r);
  RowResult failed = r;
  failed.error = "cm-load exit 1: no connection";
  t.rows.push_back(failed);
  return t;
}

TEST(Report, TableCarriesCeilingsEfficiencyAndCosts) {
  const std::string table = markdown_table({sample()});
  // connection ceiling 20,000; 19,200 rps = 96.0%; 0.96 s over 96,000 requests = 10 ms per 1k.
  EXPECT_NE(table.find("| asio_coro | standard | 1 loop, pool 64 | /delay/{ms} | 100 | 2,000 / "
                       "2,000 | 20,000 | - | "
                       "50,000 | connections | 19,200 | 96.0% |"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| 10.0 |"), std::string::npos) << table;  // server CPU ms / 1k
  EXPECT_NE(table.find("| 3.00 |"), std::string::npos) << table;  // (10096 - 4096) KiB / 2000
  EXPECT_NE(table.find("| 7 (timeout 7) |"), std::string::npos) << table;
  EXPECT_NE(table.find("not measured: cm-load exit 1: no connection"), std::string::npos) << table;
}

TEST(Report, CsvHasAHeaderAndOneLinePerRow) {
  const std::string csv = csv_report({sample()});
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_TRUE(csv.starts_with("server,variant,threads,path,delay_ms,"));
  EXPECT_NE(
      csv.find("asio_coro,standard,\"1 loop, pool 64\",/delay/{ms},100,2000,2000,20000.0,,50000.0,"
               "connections,19200.0,0.96,"),
      std::string::npos)
      << csv;
}

TEST(Report, JsonKeepsTheRawLoadAndThePricing) {
  json meta = {{"profile", "t"}};
  const auto doc = json_report(meta, {sample()}, {"nginx: not installed"});
  const auto& row = doc["targets"][0]["rows"][0];
  EXPECT_DOUBLE_EQ(row["ceilings"]["connection"].get<double>(), 20000.0);
  EXPECT_TRUE(row["ceilings"]["thread"].is_null());
  EXPECT_DOUBLE_EQ(row["efficiency"].get<double>(), 0.96);
  EXPECT_DOUBLE_EQ(row["server_cpu_ms_per_1k"].get<double>(), 10.0);
  EXPECT_EQ(row["load"]["errors"]["timeout"], 7);
  EXPECT_EQ(doc["skipped"][0], "nginx: not installed");
}

TEST(Report, CommandIsQuotedForTheShell) {
  const char* argv[] = {"build/bin/cm-price",       "quick",         "--note",
                        "busy machine, it's noisy", "--connections", "100,1000"};
  EXPECT_EQ(
      shell_command(6, const_cast<char**>(argv)),
      "build/bin/cm-price quick --note 'busy machine, it'\\''s noisy' --connections 100,1000");
}

}  // namespace
}  // namespace cm::price
