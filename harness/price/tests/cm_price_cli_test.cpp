// cm-price end to end, against the real cm-server (blocking model) and a fake cm-load that
// writes contract JSON with known figures: the real validation, /proc readers, pinning and
// pricing arithmetic run; the output files carry the figures the arithmetic implies.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

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

TEST_F(CmPrice, PricesTheBlockingModelAndWritesEveryFile) {
  if (run(std::string(CM_SERVER_BINARY) + " --list-models").output.find("blocking") ==
      std::string::npos)
    GTEST_SKIP() << "the blocking model is not built (CM_ONLY_MODELS)";
  const auto r = run(price((dir_ / "t.json").string() + " --models blocking"));
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* file :
       {"results.md", "results.csv", "results.json", "machine.md", "machine.json"})
    EXPECT_TRUE(fs::exists(dir_ / "out/t" / file)) << file;
  std::ifstream in(dir_ / "out/t/results.json");
  const auto doc = nlohmann::json::parse(in);
  ASSERT_EQ(doc["targets"].size(), 1u);
  const auto& t = doc["targets"][0];
  EXPECT_EQ(t["server"], "blocking");
  EXPECT_TRUE(t["priced"].get<bool>()) << t["refused"];
  EXPECT_TRUE(t["validation"]["ok"].get<bool>());
  ASSERT_EQ(t["rows"].size(), 2u);
  const auto& plain = t["rows"][0];
  EXPECT_EQ(plain["path"], "/plaintext");
  EXPECT_DOUBLE_EQ(plain["ceilings"]["cpu"].get<double>(), 1000.0);
  const auto& delay = t["rows"][1];
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
  // The unserved connections are said, with the reason of the model.
  const std::string notes = delay["notes"].dump();
  EXPECT_NE(notes.find("a worker serves one connection until it closes"), std::string::npos)
      << notes;
  EXPECT_FALSE(doc["meta"]["commit"]["head"].get<std::string>().empty());
  EXPECT_NE(doc["meta"]["command"].get<std::string>().find("--models blocking"), std::string::npos);
  // The table is printed too.
  EXPECT_NE(r.output.find("| blocking | standard | 4 workers | /delay/{ms} | 100 |"),
            std::string::npos)
      << r.output;
}

TEST_F(CmPrice, RefusesAnUnknownModelOrProfile) {
  auto r = run(price((dir_ / "t.json").string() + " --models nosuch"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("\"nosuch\" is not a built model"), std::string::npos) << r.output;
  r = run(price("no-such-profile"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("cannot be read"), std::string::npos) << r.output;
  r = run(price((dir_ / "t.json").string() + " --connections 1,x"));
  EXPECT_EQ(r.status, 2);
}

}  // namespace
