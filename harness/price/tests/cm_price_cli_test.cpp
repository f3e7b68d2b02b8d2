// cm-price end to end, against the real cm-server (blocking model) and a fake cm-load that
// writes contract JSON with known figures: the real validation, /proc readers, pinning and
// pricing arithmetic run; the output files carry the figures the arithmetic implies.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

struct Run {
  int status;
  std::string output;
};

Run run(const std::string& command) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  while (pipe && std::fgets(buf, sizeof buf, pipe))
    out += buf;
  const int status = pipe ? ::pclose(pipe) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

class CmPrice : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("cm_price_cli_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "bin");
    fs::create_symlink(CM_SERVER_BINARY, dir_ / "bin/cm-server");
    fs::create_symlink(CM_FAKE_LOAD, dir_ / "bin/cm-load");
    std::ofstream(dir_ / "t.json") << R"({
      "name": "t", "duration_s": 2, "warmup_s": 0, "server": {"blocking_workers": 4},
      "rows": [
        {"id": "plaintext", "path": "/plaintext", "connections": [4], "cpu_ceiling": true},
        {"id": "delay", "path": "/delay/{ms}", "delay_ms": [100], "connections": [20], "sweep": true}
      ]})";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string price(const std::string& args) {
    return std::string(CM_PRICE_BINARY) + " --bin-dir " + (dir_ / "bin").string() +
           " --source-dir " + CM_SOURCE_DIR + " --out " + (dir_ / "out").string() +
           " --peers off --no-charts " + args;
  }

  fs::path dir_;
};

bool built(const std::string& model) {
  return run(std::string(CM_SERVER_BINARY) + " --list-models").output.find(model) !=
         std::string::npos;
}

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::vector<std::string> lines_of(const fs::path& file) {
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

TEST_F(CmPrice, PricesTheBlockingModelAndWritesEveryFile) {
  if (!built("blocking")) GTEST_SKIP() << "the blocking model is not built (CM_ONLY_MODELS)";
  const auto r = run(price((dir_ / "t.json").string() + " --models blocking"));
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* file :
       {"results.md", "results.csv", "results.json", "machine.md", "machine.json"})
    EXPECT_TRUE(fs::exists(dir_ / "out/t" / file)) << file;
  const auto doc = read_json(dir_ / "out/t/results.json");
  EXPECT_EQ(doc["meta"]["rounds"], 1);  // the profile sets none
  ASSERT_EQ(doc["targets"].size(), 1u);
  const auto& t = doc["targets"][0];
  EXPECT_EQ(t["server"], "blocking");
  EXPECT_TRUE(t["priced"].get<bool>()) << t["refused"];
  EXPECT_TRUE(t["validation"]["ok"].get<bool>());
  ASSERT_EQ(t["rows"].size(), 2u);
  ASSERT_EQ(t["rows"][0]["rounds"].size(), 1u);
  const auto& plain = t["rows"][0]["rounds"][0];
  EXPECT_EQ(plain["path"], "/plaintext");
  EXPECT_DOUBLE_EQ(plain["ceilings"]["cpu"].get<double>(), 1000.0);
  const auto& delay = t["rows"][1]["rounds"][0];
  // 20 connections / 0.1 s = 200; 4 workers / 0.1 s = 40; CPU ceiling 1000 (the /plaintext row).
  EXPECT_DOUBLE_EQ(delay["ceilings"]["connection"].get<double>(), 200.0);
  EXPECT_DOUBLE_EQ(delay["ceilings"]["thread"].get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(delay["ceilings"]["cpu"].get<double>(), 1000.0);
  EXPECT_EQ(delay["bound"], "threads");
  EXPECT_DOUBLE_EQ(delay["efficiency"].get<double>(), 20.0 / 40.0);
  EXPECT_DOUBLE_EQ(delay["served_connections"].get<double>(), 2.0);  // 20 rps x 0.1 s
  EXPECT_GT(delay["peak_rss_kib"].get<double>(), 0);
  // cm-load CPU busy leaves out its idle polling: (0.01 - 0.004) s over the 2 s window.
  const double load_cpus = doc["meta"]["load_cpu_count"].get<double>();
  EXPECT_NEAR(delay["load_busy"].get<double>() * 2 * load_cpus, 0.006, 1e-12);
  EXPECT_GE(delay["server_cpu_s"].get<double>(), 0);
  // The machine around the row: the load average and /proc/stat's shares were read.
  EXPECT_TRUE(delay["machine"]["load_average_1m"].is_number());
  EXPECT_TRUE(delay["machine"]["steal"].is_number());
  // The unserved connections are said, with the reason of the model.
  const std::string notes = t["rows"][1]["notes"].dump();
  EXPECT_NE(notes.find("a worker serves one connection until it closes"), std::string::npos)
      << notes;
  // cm-load's fairness figures: the fake starves a quarter of the /delay row's 20 connections.
  EXPECT_DOUBLE_EQ(t["rows"][1]["summary"]["starved_connections"]["median"].get<double>(), 5);
  EXPECT_DOUBLE_EQ(t["rows"][1]["summary"]["fairness_jain"]["median"].get<double>(), 0.75);
  const std::string flags = t["rows"][1]["flags"].dump();
  EXPECT_NE(flags.find("served some connections and not others"), std::string::npos) << flags;
  EXPECT_EQ(t["rows"][0]["flags"].dump().find("starved"), std::string::npos);
  EXPECT_FALSE(doc["meta"]["commit"]["head"].get<std::string>().empty());
  EXPECT_NE(doc["meta"]["command"].get<std::string>().find("--models blocking"), std::string::npos);
  // The compact table is printed, and opens results.md above the full one.
  EXPECT_NE(r.output.find("| blocking | /delay/100, 20 conns | 20 | threads 40 | 50.0% | 100.00 | "
                          "3 | 5 |"),
            std::string::npos)
      << r.output;
  const std::string md = read_text(dir_ / "out/t/results.md");
  const auto compact = md.find("| model | row | rps | binding ceiling |");
  const auto full = md.find("| blocking | standard | 4 workers | /delay/{ms} | 100 | together |");
  EXPECT_NE(compact, std::string::npos) << md;
  EXPECT_NE(full, std::string::npos) << md;
  EXPECT_LT(compact, full);
  EXPECT_NE(md.find("**starved connections in 1 of 1 rounds"), std::string::npos) << md;
}

TEST_F(CmPrice, RoundsInterleaveTheServersAndPriceEachRoundAgainstItsOwnCeiling) {
  if (!built("blocking") || !built("asio_coro"))
    GTEST_SKIP() << "needs the blocking and asio_coro models";
  std::ofstream(dir_ / "r.json") << R"({
      "name": "r", "duration_s": 2, "warmup_s": 0, "rounds": 3, "server": {"blocking_workers": 4},
      "rows": [
        {"id": "plaintext", "path": "/plaintext", "connections": [4], "cpu_ceiling": true},
        {"id": "delay", "path": "/delay/{ms}", "delay_ms": [100], "connections": [500],
         "stagger": true}
      ]})";
  // The machine "runs" twice as fast in round 2 (runs 3-4 and 7-8 of 8), for both servers.
  const fs::path log = dir_ / "load.log";
  const auto r = run("FAKE_CM_LOAD_LOG=" + log.string() + " FAKE_CM_LOAD_SCALES=1,1,2,2,1,1,2,2 " +
                     price((dir_ / "r.json").string() + " --models blocking,asio_coro --rounds 2"));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto doc = read_json(dir_ / "out/r/results.json");
  EXPECT_EQ(doc["meta"]["rounds"], 2);  // --rounds overrides the profile's 3
  ASSERT_EQ(doc["targets"].size(), 2u);
  // Row by row; each row round by round; the second round starts one server along.
  auto sequence = [&](int target, int row, int round) {
    return doc["targets"][target]["rows"][row]["rounds"][round]["sequence"].get<int>();
  };
  EXPECT_EQ(sequence(0, 0, 0), 1);  // blocking, /plaintext, round 1
  EXPECT_EQ(sequence(1, 0, 0), 2);  // asio_coro
  EXPECT_EQ(sequence(1, 0, 1), 3);  // round 2: asio_coro first
  EXPECT_EQ(sequence(0, 0, 1), 4);
  EXPECT_EQ(sequence(0, 1, 0), 5);  // then /delay
  EXPECT_EQ(sequence(1, 1, 0), 6);
  EXPECT_EQ(sequence(1, 1, 1), 7);
  EXPECT_EQ(sequence(0, 1, 1), 8);
  EXPECT_EQ(lines_of(log).size(), 8u);
  // asio_coro's /delay: 500 connections / 0.1 s = 5,000, so the CPU ceiling binds -- 1,000 rps in
  // round 1 and 2,000 in round 2. Each round is priced against its own: 500 / 1,000 and
  // 1,000 / 2,000 are both 50%, though the rps doubled.
  const auto& asio = doc["targets"][1]["rows"][1];
  EXPECT_DOUBLE_EQ(asio["rounds"][0]["ceilings"]["cpu"].get<double>(), 1000.0);
  EXPECT_DOUBLE_EQ(asio["rounds"][1]["ceilings"]["cpu"].get<double>(), 2000.0);
  EXPECT_DOUBLE_EQ(asio["summary"]["efficiency"]["min"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(asio["summary"]["efficiency"]["max"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(asio["summary"]["rps"]["median"].get<double>(), 750.0);
  EXPECT_DOUBLE_EQ(asio["summary"]["rps"]["spread"].get<double>(), 500.0 / 750.0);
  // The rps spread (67%) is flagged, with the machine seen in each round.
  EXPECT_TRUE(asio["spread_flagged"].get<bool>());
  const std::string flags = asio["flags"].dump();
  EXPECT_NE(flags.find("load average (1 min)"), std::string::npos) << flags;
  EXPECT_NE(flags.find("steal"), std::string::npos) << flags;
  // The /delay row asked for a staggered start and got it; /plaintext did not ask.
  int staggered = 0;
  for (const auto& line : lines_of(log)) {
    const bool stagger = line.find("--stagger") != std::string::npos;
    EXPECT_EQ(stagger, line.find("/delay/") != std::string::npos) << line;
    staggered += stagger;
  }
  EXPECT_EQ(staggered, 4);
  EXPECT_EQ(asio["start"], "staggered");
  // The CSV keeps every round: a header and 8 lines.
  EXPECT_EQ(lines_of(dir_ / "out/r/results.csv").size(), 9u);
  // The table shows the median and the min-max.
  EXPECT_NE(r.output.find("| asio_coro | /delay/100, 500 conns | 750 (500–1,000) | cpu 1,500 | "
                          "50.0% |"),
            std::string::npos)
      << r.output;
}

TEST_F(CmPrice, AnOlderCmLoadWithoutStaggerOrFairnessStillPrices) {
  if (!built("blocking")) GTEST_SKIP() << "the blocking model is not built (CM_ONLY_MODELS)";
  std::ofstream(dir_ / "s.json") << R"({
      "name": "s", "duration_s": 2, "warmup_s": 0, "server": {"blocking_workers": 4},
      "rows": [
        {"id": "plaintext", "path": "/plaintext", "connections": [4], "cpu_ceiling": true},
        {"id": "delay", "path": "/delay/{ms}", "delay_ms": [100], "connections": [20],
         "stagger": true}
      ]})";
  const fs::path log = dir_ / "load.log";
  const auto r = run("FAKE_CM_LOAD_OLD=1 FAKE_CM_LOAD_LOG=" + log.string() + " " +
                     price((dir_ / "s.json").string() + " --models blocking"));
  ASSERT_EQ(r.status, 0) << r.output;
  for (const auto& line : lines_of(log))
    EXPECT_EQ(line.find("--stagger"), std::string::npos) << "an older cm-load refuses it";
  const auto doc = read_json(dir_ / "out/s/results.json");
  EXPECT_FALSE(doc["meta"]["load_has_stagger"].get<bool>());
  const auto& delay = doc["targets"][0]["rows"][1];
  EXPECT_TRUE(delay["summary"]["starved_connections"].is_null());
  EXPECT_EQ(delay["start"], "together");
  EXPECT_NE(delay["flags"].dump().find("this cm-load has no --stagger"), std::string::npos);
  const std::string md = read_text(dir_ / "out/s/results.md");
  EXPECT_NE(md.find("Staggered start not available"), std::string::npos) << md;
  EXPECT_NE(r.output.find("| blocking | /delay/100, 20 conns | 20 | threads 40 | 50.0% | 100.00 | "
                          "3 | - |"),
            std::string::npos)
      << r.output;
}

TEST_F(CmPrice, RefusesAnUnknownModelOrProfileOrNoRounds) {
  auto r = run(price((dir_ / "t.json").string() + " --models nosuch"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("\"nosuch\" is not a built model"), std::string::npos) << r.output;
  r = run(price("no-such-profile"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("cannot be read"), std::string::npos) << r.output;
  r = run(price((dir_ / "t.json").string() + " --connections 1,x"));
  EXPECT_EQ(r.status, 2);
  r = run(price((dir_ / "t.json").string() + " --rounds 0"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("--rounds: from 1 to 100"), std::string::npos) << r.output;
  r = run(price((dir_ / "t.json").string() + " --rounds two"));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--rounds"), std::string::npos) << r.output;
}

}  // namespace
