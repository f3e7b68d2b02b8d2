// The /proc readers and Child, on child processes this test starts.
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "proc.hpp"

namespace cm::price {
namespace {

std::string status_line(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(key + ":"))
      return line.substr(line.find_first_not_of(" \t", key.size() + 1));
  return "";
}

TEST(Proc, ReadsTheCpuTimeAndMemoryOfAChild) {
  // Burns CPU in the shell, then becomes `sleep` (exec: same pid) so it stays readable.
  Child child({"/bin/sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; exec sleep 30"},
              {}, {});
  double cpu = 0;
  for (int i = 0; i < 3000 && cpu < 0.05;
       ++i) {  // waits for the burn, whatever the machine's speed
    cpu = process_cpu_seconds(child.pid());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(cpu, 0.05);
  EXPECT_GT(process_status_kib(child.pid(), "VmHWM"), 0u);
  EXPECT_GE(process_status_kib(child.pid(), "VmHWM"), process_status_kib(child.pid(), "VmRSS"));
  EXPECT_THROW(process_status_kib(child.pid(), "NoSuchLine"), std::invalid_argument);
  EXPECT_EQ(parent_pid(child.pid()), ::getpid());
  const auto tree = process_tree(::getpid());
  EXPECT_NE(std::find(tree.begin(), tree.end(), child.pid()), tree.end());
  EXPECT_GE(tree_cpu_seconds(::getpid()), cpu);
  EXPECT_EQ(child.stop(), "killed by signal 15");
  EXPECT_FALSE(child.running());
  EXPECT_THROW(process_cpu_seconds(child.pid()), std::system_error);  // reaped: gone
}

TEST(Proc, ChildIsPinnedToTheCpusAskedFor) {
  const auto cpus = allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  Child child({"/bin/sleep", "30"}, {cpus.back()}, {});
  EXPECT_EQ(status_line(child.pid(), "Cpus_allowed_list"), std::to_string(cpus.back()));
}

TEST(Proc, StopEscalatesToSigkillWhenSigtermIsIgnored) {
  Child child({"/bin/sh", "-c", "trap '' TERM; exec sleep 30"}, {}, {});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let the trap be set
  const std::string how = child.stop(std::chrono::milliseconds(300));
  EXPECT_NE(how.find("killed by signal 9"), std::string::npos) << how;
  EXPECT_NE(how.find("SIGKILL"), std::string::npos) << how;
}

TEST(Proc, ChildThatCannotRunThrowsSayingWhat) {
  try {
    Child child({"/no/such/program"}, {}, {});
    ADD_FAILURE() << "no exception";
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot run /no/such/program"), std::string::npos)
        << e.what();
  }
}

TEST(Proc, ChildOutputGoesToItsLog) {
  const auto log =
      std::filesystem::temp_directory_path() / ("cm_price_proc_test_" + std::to_string(::getpid()));
  {
    Child child({"/bin/sh", "-c", "echo to-stdout; echo to-stderr >&2"}, {}, log);
    ASSERT_TRUE(child.wait_for(std::chrono::seconds(30)));
  }
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(text.find("to-stdout"), std::string::npos);
  EXPECT_NE(text.find("to-stderr"), std::string::npos);
  std::filesystem::remove(log);
}

TEST(Proc, ProcStatGivesTheMachinesTicksAndStealTime) {
  // user nice system idle iowait irq softirq steal guest guest_nice
  const auto t = parse_proc_stat(
      "cpu  100 5 50 800 20 3 2 20 40 0\ncpu0 50 2 25 400 10 1 1 10 20 0\nintr 1 2 3\n");
  EXPECT_EQ(t.total, 100u + 5 + 50 + 800 + 20 + 3 + 2 + 20);  // guest is already in user
  EXPECT_EQ(t.idle, 820u);
  EXPECT_EQ(t.steal, 20u);
  EXPECT_THROW(parse_proc_stat("cpu  1 2 3 4 5 6 7\n"), std::invalid_argument);  // no steal
  EXPECT_THROW(parse_proc_stat("cpu0 1 2 3 4 5 6 7 8\n"), std::invalid_argument);
  const auto here = machine_ticks();  // this machine's, whatever it is
  EXPECT_GE(here.total, here.idle + here.steal);
}

TEST(Proc, LoadAverageIsTheFirstFigure) {
  EXPECT_DOUBLE_EQ(parse_load_average("2.35 1.10 0.50 3/210 4242\n"), 2.35);
  EXPECT_THROW(parse_load_average("busy"), std::invalid_argument);
  EXPECT_GE(load_average_1m(), 0.0);
}

TEST(Proc, MachineShareIsStealAndOthersOverAllTheTicks) {
  // 2 CPUs for 1 s at 100 ticks a second: 200 ticks, of which 100 idle and 20 stolen; the 80
  // worked (0.8 s) less the server's 0.3 s and cm-load's 0.2 s leave 0.3 s of 2 s to others.
  const MachineTicks before{1000, 500, 10}, after{1200, 600, 30};
  const auto share = machine_share(before, after, 0.3, 0.2, 100);
  EXPECT_DOUBLE_EQ(share.steal, 0.1);
  EXPECT_DOUBLE_EQ(share.others, 0.15);
  // Never below zero (the server's CPU is read a little after the ticks), nothing when no time.
  EXPECT_DOUBLE_EQ(machine_share(before, after, 0.7, 0.2, 100).others, 0.0);
  EXPECT_DOUBLE_EQ(machine_share(before, before, 0, 0, 100).steal, 0.0);
}

TEST(Proc, CpuListsPrintAsRanges) {
  EXPECT_EQ(cpu_list_string({0, 1, 2, 5}), "0-2,5");
  EXPECT_EQ(cpu_list_string({3}), "3");
  EXPECT_EQ(cpu_list_string({}), "");
}

}  // namespace
}  // namespace cm::price
