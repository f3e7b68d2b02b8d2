#pragma once
/// \file proc.hpp
/// What cm-price reads from /proc about a server, and the child processes it starts.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace cm::price {

/// CPU time of one process, all its threads included (utime + stime of /proc/<pid>/stat).
/// Throws std::system_error when the process is gone or the file cannot be parsed.
double process_cpu_seconds(pid_t pid);

/// A "kB" line of /proc/<pid>/status (e.g. "VmHWM", "VmRSS"), in KiB. Throws std::system_error
/// when the process is gone, std::invalid_argument when the line is missing.
std::uint64_t process_status_kib(pid_t pid, const std::string& key);

/// The parent pid of a process (field 4 of /proc/<pid>/stat), or nothing if it is gone.
std::optional<pid_t> parent_pid(pid_t pid);

/// `root` and every live descendant process (nginx's workers, say).
std::vector<pid_t> process_tree(pid_t root);

/// Sum of process_cpu_seconds over process_tree(root); processes that vanish meanwhile count 0.
double tree_cpu_seconds(pid_t root);

/// Sum of a status line over process_tree(root), in KiB.
std::uint64_t tree_status_kib(pid_t root, const std::string& key);

/// The CPUs this process may run on (sched_getaffinity), in ascending order.
std::vector<int> allowed_cpus();

/// "0-3,6" from a list of CPUs.
std::string cpu_list_string(const std::vector<int>& cpus);

/// A child process: started by the constructor, stopped (SIGTERM, then SIGKILL after a grace
/// period) by stop() or the destructor. Never outlives its owner: it gets SIGTERM if the thread
/// that started it dies (PR_SET_PDEATHSIG).
class Child {
 public:
  /// Starts argv[0] (a path) with argv, pinned to `cpus` when non-empty, stdout and stderr
  /// appended to `log` (or /dev/null when empty). Throws std::system_error saying what failed,
  /// including an exec failure in the child ("cannot run /x/cm-server: No such file").
  Child(const std::vector<std::string>& argv, const std::vector<int>& cpus,
        const std::filesystem::path& log);
  Child(Child&& other) noexcept;
  Child& operator=(Child&&) = delete;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();

  pid_t pid() const noexcept { return pid_; }
  /// True while the process has not exited (reaps it when it has).
  bool running();
  /// Waits up to `timeout` for it to exit by itself; returns its wait status if it did.
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  /// SIGTERM, wait up to `grace`, then SIGKILL. Returns a description of how it ended
  /// ("exit 0", "killed by signal 9 after 10 s"). Idempotent.
  std::string stop(std::chrono::milliseconds grace = std::chrono::seconds(10));

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

/// The machine's CPU time so far, from the "cpu" line of /proc/stat, in clock ticks summed over
/// every CPU.
struct MachineTicks {
  std::uint64_t total = 0;  ///< every field but guest and guest_nice (already in user and nice)
  std::uint64_t idle = 0;   ///< idle + iowait
  std::uint64_t steal = 0;  ///< time the hypervisor ran something else while this VM wanted a CPU
};

/// Parses the text of /proc/stat; throws std::invalid_argument when its "cpu" line is missing or
/// short (fewer than the 8 fields up to steal).
MachineTicks parse_proc_stat(const std::string& text);

/// Reads /proc/stat; throws std::system_error when it cannot, std::invalid_argument as above.
MachineTicks machine_ticks();

/// The 1-minute load average from the text of /proc/loadavg; throws std::invalid_argument.
double parse_load_average(const std::string& text);

/// Reads /proc/loadavg; throws as parse_load_average, or std::system_error when it cannot.
double load_average_1m();

/// User + system CPU seconds of the children this process has reaped (getrusage(RUSAGE_CHILDREN)).
double reaped_children_cpu_seconds();

/// What the rest of the machine did while a row ran, as shares of all the CPUs' time.
struct MachineShare {
  double steal = 0;   ///< stolen by the hypervisor
  double others = 0;  ///< CPU time used by neither the server nor cm-load (other processes)
};

/// From two /proc/stat readings around a row and the CPU seconds the server and cm-load used
/// between them: steal = stolen / all ticks; others = (ticks neither idle nor stolen, in seconds,
/// less the server's and cm-load's seconds, at least 0) / all ticks in seconds.
MachineShare machine_share(const MachineTicks& before, const MachineTicks& after,
                           double server_cpu_s, double load_cpu_s, double ticks_per_second);

/// "exit N" / "killed by signal N" for a wait status.
std::string describe_wait_status(int status);

}  // namespace cm::price
