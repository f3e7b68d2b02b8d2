#include "proc.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "cm/fd.hpp"

namespace cm::price {
namespace {

/// The fields of /proc/<pid>/stat after the command name (which may hold spaces and parens):
/// fields[0] is field 3 (state) of proc(5).
std::vector<std::string> stat_fields(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line))
    throw std::system_error(ESRCH, std::generic_category(),
                            "read /proc/" + std::to_string(pid) + "/stat");
  const auto close = line.rfind(')');
  if (close == std::string::npos)
    throw std::system_error(EINVAL, std::generic_category(),
                            "parse /proc/" + std::to_string(pid) + "/stat");
  std::istringstream rest(line.substr(close + 1));
  std::vector<std::string> fields;
  for (std::string f; rest >> f;)
    fields.push_back(f);
  if (fields.size() < 13)
    throw std::system_error(EINVAL, std::generic_category(),
                            "parse /proc/" + std::to_string(pid) + "/stat");
  return fields;
}

}  // namespace

double process_cpu_seconds(pid_t pid) {
  const auto f = stat_fields(pid);
  // utime and stime are fields 14 and 15 of proc(5), in clock ticks; f[0] is field 3.
  const double ticks = static_cast<double>(std::stoull(f[11]) + std::stoull(f[12]));
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::uint64_t process_status_kib(pid_t pid, const std::string& key) {
  const std::string file = "/proc/" + std::to_string(pid) + "/status";
  std::ifstream in(file);
  if (!in) throw std::system_error(ESRCH, std::generic_category(), "read " + file);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(key + ":")) {
      std::istringstream value(line.substr(key.size() + 1));
      std::uint64_t kib = 0;
      if (value >> kib) return kib;
    }
  }
  throw std::invalid_argument(file + ": no " + key + " line");
}

std::optional<pid_t> parent_pid(pid_t pid) {
  try {
    return static_cast<pid_t>(std::stol(stat_fields(pid)[1]));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::vector<pid_t> process_tree(pid_t root) {
  std::vector<std::pair<pid_t, pid_t>> all;  // (pid, ppid)
  if (DIR* dir = ::opendir("/proc")) {
    while (const dirent* e = ::readdir(dir)) {
      char* end = nullptr;
      const long pid = std::strtol(e->d_name, &end, 10);
      if (*end != '\0' || pid <= 0) continue;
      if (auto ppid = parent_pid(static_cast<pid_t>(pid))) all.emplace_back(pid, *ppid);
    }
    ::closedir(dir);
  }
  std::vector<pid_t> tree{root};
  for (std::size_t i = 0; i < tree.size(); ++i) {
    for (const auto& [pid, ppid] : all)
      if (ppid == tree[i]) tree.push_back(pid);
  }
  return tree;
}

double tree_cpu_seconds(pid_t root) {
  double total = 0;
  for (pid_t pid : process_tree(root)) {
    try {
      total += process_cpu_seconds(pid);
    } catch (const std::system_error&) {
      // gone meanwhile
    }
  }
  return total;
}

std::uint64_t tree_status_kib(pid_t root, const std::string& key) {
  std::uint64_t total = 0;
  for (pid_t pid : process_tree(root)) {
    try {
      total += process_status_kib(pid, key);
    } catch (const std::exception&) {
      // gone meanwhile
    }
  }
  return total;
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0)
    throw std::system_error(errno, std::generic_category(), "sched_getaffinity");
  std::vector<int> cpus;
  for (int i = 0; i < CPU_SETSIZE; ++i)
    if (CPU_ISSET(i, &set)) cpus.push_back(i);
  return cpus;
}

std::string cpu_list_string(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1)
      ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(cpus[j]);
    }
    i = j + 1;
  }
  return out;
}

MachineTicks parse_proc_stat(const std::string& text) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("cpu ")) continue;
    std::istringstream fields(line.substr(4));
    std::vector<std::uint64_t> v;
    for (std::uint64_t x; v.size() < 8 && fields >> x;)
      v.push_back(x);
    if (v.size() < 8)
      throw std::invalid_argument("/proc/stat: the \"cpu\" line has fewer than 8 fields");
    // user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is already
    // counted in user and nice, so the total stops at steal.
    MachineTicks t;
    for (std::uint64_t x : v)
      t.total += x;
    t.idle = v[3] + v[4];
    t.steal = v[7];
    return t;
  }
  throw std::invalid_argument("/proc/stat: no \"cpu\" line");
}

MachineTicks machine_ticks() {
  std::ifstream in("/proc/stat");
  if (!in) throw std::system_error(errno, std::generic_category(), "read /proc/stat");
  std::stringstream s;
  s << in.rdbuf();
  return parse_proc_stat(s.str());
}

double parse_load_average(const std::string& text) {
  std::istringstream in(text);
  double one = 0;
  if (!(in >> one) || one < 0)
    throw std::invalid_argument("/proc/loadavg: expected the 1-minute load average first");
  return one;
}

double load_average_1m() {
  std::ifstream in("/proc/loadavg");
  if (!in) throw std::system_error(errno, std::generic_category(), "read /proc/loadavg");
  std::string line;
  std::getline(in, line);
  return parse_load_average(line);
}

double reaped_children_cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_CHILDREN, &ru);
  auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + tv.tv_usec / 1e6;
  };
  return seconds(ru.ru_utime) + seconds(ru.ru_stime);
}

MachineShare machine_share(const MachineTicks& before, const MachineTicks& after,
                           double server_cpu_s, double load_cpu_s, double ticks_per_second) {
  MachineShare share;
  if (after.total <= before.total || ticks_per_second <= 0) return share;
  const double total = static_cast<double>(after.total - before.total);
  const auto delta = [](std::uint64_t a, std::uint64_t b) {
    return a > b ? static_cast<double>(a - b) : 0.0;
  };
  const double steal = delta(after.steal, before.steal);
  const double idle = delta(after.idle, before.idle);
  share.steal = steal / total;
  const double worked_s = std::max(0.0, total - idle - steal) / ticks_per_second;
  share.others = std::max(0.0, worked_s - server_cpu_s - load_cpu_s) / (total / ticks_per_second);
  return share;
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

Child::Child(const std::vector<std::string>& argv, const std::vector<int>& cpus,
             const std::filesystem::path& log) {
  if (argv.empty()) throw std::invalid_argument("Child: empty argv");
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::string log_path = log.empty() ? "/dev/null" : log.string();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    CPU_SET(c, &set);

  // The child reports an exec (or setup) failure through this close-on-exec pipe: nothing read
  // means exec succeeded.
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
    throw std::system_error(errno, std::generic_category(), "pipe2");
  Fd read_end(pipe_fds[0]), write_end(pipe_fds[1]);

  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (pid_ == 0) {
    // Only async-signal-safe calls from here to exec.
    int err = 0;
    const int out = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (out < 0 || ::dup2(out, 1) < 0 || ::dup2(out, 2) < 0) err = errno;
    if (!err && !cpus.empty() && ::sched_setaffinity(0, sizeof set, &set) != 0) err = errno;
    // A server must not outlive cm-price (killed by a timeout, say): SIGTERM when it dies.
    if (!err && ::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) err = errno;
    if (!err && ::getppid() != parent) ::_exit(127);  // it died already
    if (!err) {
      ::execv(args[0], args.data());
      err = errno;
    }
    [[maybe_unused]] auto n = ::write(write_end.get(), &err, sizeof err);
    ::_exit(127);
  }
  write_end.reset();
  int err = 0;
  ssize_t n;
  do
    n = ::read(read_end.get(), &err, sizeof err);
  while (n < 0 && errno == EINTR);
  if (n == sizeof err) {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    throw std::system_error(err, std::generic_category(), "cannot run " + argv[0]);
  }
}

Child::Child(Child&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), status_(other.status_) {}

Child::~Child() {
  stop(std::chrono::seconds(5));
}

bool Child::running() {
  if (pid_ < 0 || status_) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) status_ = status;
  return !status_;
}

std::optional<int> Child::wait_for(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status_;
}

std::string Child::stop(std::chrono::milliseconds grace) {
  if (pid_ < 0) return "not started";
  if (running()) {
    ::kill(pid_, SIGTERM);
    if (!wait_for(grace)) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      status_ = status;
      return describe_wait_status(status) + " (SIGKILL: no exit within " +
             std::to_string(grace.count()) + " ms of SIGTERM)";
    }
  }
  return status_ ? describe_wait_status(*status_) : "unknown";
}

}  // namespace cm::price
