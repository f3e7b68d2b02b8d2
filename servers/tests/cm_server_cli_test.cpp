// cm_server_cli_test.cpp -- the cm-server binary as a user runs it: --list-models, errors that
// are one clear line, --port 0 printing its port, and a clean stop on SIGINT/SIGTERM.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <regex>
#include <string>
#include <vector>

#include "cm/net.hpp"
#include "http_client.hpp"

extern char** environ;

namespace cm::test {
namespace {

/// A cm-server child with its stdout and stderr piped.
struct Child {
  pid_t pid = -1;
  Fd out, err;

  explicit Child(std::vector<std::string> args) {
    int out_pipe[2], err_pipe[2];
    EXPECT_EQ(::pipe2(out_pipe, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(err_pipe, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
    args.insert(args.begin(), CM_SERVER_BINARY);
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(::posix_spawn(&pid, CM_SERVER_BINARY, &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    out.reset(out_pipe[0]);
    err.reset(err_pipe[0]);
  }

  /// Reads a line from `fd` (bounded wait).
  static std::string read_line(const Fd& fd, int timeout_ms = 10000) {
    std::string line;
    char c;
    while (true) {
      pollfd p{fd.get(), POLLIN, 0};
      if (::poll(&p, 1, timeout_ms) <= 0) break;
      if (::read(fd.get(), &c, 1) != 1 || c == '\n') break;
      line += c;
    }
    return line;
  }
  static std::string read_all(const Fd& fd) {
    std::string all, line;
    while (!(line = read_line(fd)).empty())
      all += line + "\n";
    return all;
  }

  /// Waits (bounded) for the child to exit; returns its exit status, or -1 if it did not.
  int wait(int timeout_ms = 10000) {
    for (int waited = 0; waited < timeout_ms; waited += 10) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      ::usleep(10000);
    }
    return -1;
  }
  ~Child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

TEST(CmServer, ListsTheBlockingModel) {
  Child child({"--list-models"});
  const std::string out = Child::read_all(child.out);
  EXPECT_NE(out.find("blocking"), std::string::npos) << out;
  EXPECT_EQ(child.wait(), 0);
}

TEST(CmServer, UnknownModelIsOneClearLine) {
  Child child({"--model", "fibers", "--port", "0"});
  const std::string err = Child::read_all(child.err);
  EXPECT_EQ(child.wait(), 2);
  EXPECT_NE(err.find("unknown model 'fibers'"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST(CmServer, PortInUseIsOneClearLine) {
  Listeners taken = open_listeners("127.0.0.1", 0, 1);
  Child child({"--model", "blocking", "--port", std::to_string(taken.port)});
  const std::string err = Child::read_all(child.err);
  EXPECT_EQ(child.wait(), 1);
  EXPECT_NE(err.find("Address already in use"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

class CmServerSignal : public ::testing::TestWithParam<int> {};

TEST_P(CmServerSignal, PortZeroPrintsThePortServesAndStopsCleanly) {
  Child child({"--model", "blocking", "--port", "0", "--threads", "4"});
  const std::string line = Child::read_line(child.out);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(line, m, std::regex(R"(http://127\.0\.0\.1:(\d+)/)"))) << line;
  const auto port = static_cast<std::uint16_t>(std::stoi(m[1]));
  auto r = get(port, "/delay/20");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "20");
  Client waiting = Client::connect(port);  // a request still waiting when the signal comes
  ASSERT_TRUE(waiting.send(get_request("/delay/30000")));
  ::usleep(50000);
  ASSERT_EQ(::kill(child.pid, GetParam()), 0);
  EXPECT_EQ(child.wait(), 0);
  EXPECT_TRUE(waiting.closed_by_peer());
}

INSTANTIATE_TEST_SUITE_P(Signals, CmServerSignal, ::testing::Values(SIGINT, SIGTERM),
                         [](const auto& info) {
                           return std::string(info.param == SIGINT ? "SIGINT" : "SIGTERM");
                         });

}  // namespace
}  // namespace cm::test
