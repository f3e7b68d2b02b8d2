// What cm-price writes: the table, the CSV and the JSON carry the priced figures of a row.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

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

RowResult round_of(unsigned k, double rps) {
  RowResult r;
  r.server = "asio_coro";
  r.variant = "standard";
  r.threads = "1 loop, pool 64";
  r.row = {"delay", "/delay/{ms}", std::string("100"), 100, 0, 2000, false, true};
  r.round = k;
  r.sequence = 3 * k;
  r.load = load_json(rps);
  r.stagger_passed = true;
  r.connections_open = 2000;
  r.connections_offered = 2000;
  r.rps = rps;
  r.ceilings = compute_ceilings({.connections = 2000, .mean_delay_ms = 100, .cpu_rps = 50000});
  r.efficiency = efficiency(r.rps, r.ceilings);
  r.served = served_connections(r.rps, 101000);
  r.server_cpu_s = rps * 5 / 1e5;  // 10 ms per 1,000 answers
  r.idle_rss_kib = 4096;
  r.peak_rss_kib = 4096 + 6000;
  r.load_average_1m = 1.25;
  r.machine = MachineShare{0.0, 0.05};
  return r;
}

/// asio_coro's /delay row over three rounds (19,200, 18,000, 19,500 rps), a row that could not
/// be measured, and node on the same /delay row (16,000, 12,000, 15,000 rps).
std::vector<TargetResult> sample() {
  TargetResult t;
  t.target = {"asio_coro", ServerKind::async, {"standard", {}}};
  t.priced = true;
  RowRounds delay;
  delay.row = round_of(0, 0).row;
  delay.rounds = {round_of(0, 19200), round_of(1, 18000), round_of(2, 19500)};
  t.rows.push_back(delay);
  RowRounds failed = delay;
  failed.row.connections = 4000;
  for (auto& r : failed.rounds) {
    r.row.connections = 4000;
    r.error = "cm-load exit 1: no connection";
    r.load = json();
  }
  t.rows.push_back(failed);
  TargetResult node;
  node.target = {"node", ServerKind::peer, {"-", {}}};
  node.priced = true;
  RowRounds peer = delay;
  peer.rounds = {round_of(0, 16000), round_of(1, 12000), round_of(2, 15000)};
  for (auto& r : peer.rounds) {
    r.server = "node";
    r.variant = "-";
  }
  node.rows.push_back(peer);
  return {t, node};
}

/// The cells of a Markdown table's line that starts with `prefix`.
std::vector<std::string> cells(const std::string& table, const std::string& prefix) {
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with(prefix)) continue;
    std::vector<std::string> out;
    std::istringstream parts(line.substr(1));
    for (std::string cell; std::getline(parts, cell, '|');)
      out.push_back(cell.substr(cell.find_first_not_of(' '),
                                cell.find_last_not_of(' ') - cell.find_first_not_of(' ') + 1));
    return out;
  }
  return {};
}

TEST(Report, CompactTableHasAtMostEightColumnsAndTheMedianWithItsRange) {
  const std::string table = compact_table(sample());
  const auto header = cells(table, "| model");
  EXPECT_LE(header.size(), 8u);
  EXPECT_EQ(header, (std::vector<std::string>{"model", "row", "rps", "binding ceiling",
                                              "efficiency", "p99 ms", "errors", "starved"}));
  // Median 19,200 of 19,200 / 18,000 / 19,500; efficiency against 20,000 within each round.
  const auto row = cells(table, "| asio_coro | /delay/100, 2,000 conns");
  EXPECT_EQ(row, (std::vector<std::string>{"asio_coro", "/delay/100, 2,000 conns",
                                           "19,200 (18,000–19,500)", "connections 20,000",
                                           "96.0% (90.0–97.5%)", "104.25", "21", "-"}))
      << table;
  EXPECT_NE(table.find("| asio_coro | /delay/100, 4,000 conns | not measured: cm-load exit 1"),
            std::string::npos)
      << table;
}

TEST(Report, FullTableCarriesCeilingsCostsAndTheWithinRoundRatioToAPeer) {
  const std::string table = markdown_table(sample());
  EXPECT_NE(table.find("| rps / node |"), std::string::npos) << table;
  EXPECT_NE(table.find("| asio_coro | standard | 1 loop, pool 64 | /delay/{ms} | 100 | staggered "
                       "| 2,000 / 2,000 | 20,000 | - | 50,000 | connections | 19,200 "
                       "(18,000–19,500) | 96.0% (90.0–97.5%) |"),
            std::string::npos)
      << table;
  // Within each round: 19,200 / 16,000 = 1.20, 18,000 / 12,000 = 1.50, 19,500 / 15,000 = 1.30;
  // the median ratio 1.30 (the medians' ratio, 19,200 / 15,000 = 1.28, is not shown).
  EXPECT_NE(table.find("| 1.30 (1.20–1.50) |"), std::string::npos) << table;
  EXPECT_NE(table.find("| 10.0 |"), std::string::npos) << table;  // server CPU ms / 1k
  EXPECT_NE(table.find("| 3.00 |"), std::string::npos) << table;  // (10096 - 4096) KiB / 2000
  EXPECT_NE(table.find("| 21 (timeout 21) | 3 |"), std::string::npos) << table;
  EXPECT_NE(table.find("not measured: cm-load exit 1: no connection"), std::string::npos) << table;
}

TEST(Report, CsvKeepsEveryRound) {
  const std::string csv = csv_report(sample());
  // A header, 3 rounds of the /delay row, 3 of the failed row, 3 of node's.
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 9);
  EXPECT_TRUE(csv.starts_with("server,variant,threads,path,delay_ms,round,sequence,start,"));
  EXPECT_NE(csv.find("asio_coro,standard,\"1 loop, pool 64\",/delay/{ms},100,2,4,staggered,2000,"
                     "2000,20000.0,,50000.0,connections,18000.0,0.9,"),
            std::string::npos)
      << csv;
}

TEST(Report, JsonKeepsEveryRoundAndTheSummary) {
  json meta = {{"profile", "t"}};
  const auto doc = json_report(meta, sample(), {"nginx: not installed"});
  const auto& row = doc["targets"][0]["rows"][0];
  EXPECT_EQ(row["rounds"].size(), 3u);
  EXPECT_DOUBLE_EQ(row["rounds"][1]["rps"].get<double>(), 18000.0);
  EXPECT_EQ(row["rounds"][1]["round"], 2);
  EXPECT_EQ(row["rounds"][1]["load"]["errors"]["timeout"], 7);
  EXPECT_DOUBLE_EQ(row["rounds"][0]["machine"]["others"].get<double>(), 0.05);
  EXPECT_DOUBLE_EQ(row["summary"]["rps"]["median"].get<double>(), 19200.0);
  EXPECT_DOUBLE_EQ(row["summary"]["rps"]["min"].get<double>(), 18000.0);
  EXPECT_DOUBLE_EQ(row["summary"]["rps"]["spread"].get<double>(), 1500.0 / 19200.0);
  EXPECT_DOUBLE_EQ(row["summary"]["efficiency"]["median"].get<double>(), 0.96);
  EXPECT_DOUBLE_EQ(row["ratios"]["node"]["median"].get<double>(), 1.3);
  EXPECT_FALSE(row["spread_flagged"].get<bool>());  // 7.8%
  EXPECT_EQ(row["median_round"], 1);
  EXPECT_EQ(doc["targets"][0]["rows"][1]["rounds_measured"], 0);
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
