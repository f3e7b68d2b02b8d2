// cm_server_cli_test.cpp -- the cm-server binary as a user runs it: --list-models, errors that
// are one clear line, --port 0 printing its port, and a graceful drain on SIGINT/SIGTERM.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include "cm/net.hpp"
#include "cm/registry.hpp"
#include "http_client.hpp"
#include "models.hpp"

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

// Each deadline a user may set is an option of the binary, with its default (the write timeout's
// is nginx's send_timeout); a write timeout of zero would close every connection that waits.
TEST(CmServer, HelpNamesEveryDeadlineWithItsDefault) {
  Child child({"--help"});
  std::string out;  // to the end: the help has empty lines, where read_all() stops
  char buffer[4096];
  for (ssize_t n; (n = ::read(child.out.get(), buffer, sizeof buffer)) > 0;)
    out.append(buffer, static_cast<std::size_t>(n));
  EXPECT_EQ(child.wait(), 0);
  EXPECT_NE(out.find("--header-timeout"), std::string::npos) << out;
  const std::size_t write = out.find("--write-timeout");
  ASSERT_NE(write, std::string::npos) << out;
  EXPECT_NE(out.find("60000", write), std::string::npos) << out;
  Child zero({"--model", "blocking", "--port", "0", "--write-timeout", "0"});
  EXPECT_NE(Child::read_all(zero.err).find("--write-timeout"), std::string::npos);
  EXPECT_NE(zero.wait(), 0);
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

/// The port a child printed in its "listening on" line.
std::uint16_t port_of(Child& child) {
  const std::string line = Child::read_line(child.out);
  std::smatch m;
  EXPECT_TRUE(std::regex_search(line, m, std::regex(R"(http://127\.0\.0\.1:(\d+)/)"))) << line;
  return m.empty() ? 0 : static_cast<std::uint16_t>(std::stoi(m[1]));
}

/// Whether a new connection to `port` is refused (nobody listens there any more).
bool refused(std::uint16_t port) {
  try {
    Client::connect(port);
    return false;
  } catch (const std::system_error&) {
    return true;
  }
}

// --trace FILE: what each request did, written when the server stops (its contents and threads:
// trace_test.cpp); a path it cannot write is refused before it serves anything.
TEST(CmServer, TraceIsWrittenAtTheStopAndAPathItCannotWriteIsOneClearLine) {
  const std::string path = ::testing::TempDir() + "cm_server_trace.json";
  Child child({"--model", "blocking", "--port", "0", "--trace", path});
  const std::uint16_t port = port_of(child);
  ASSERT_NE(port, 0);
  const auto r = get(port, "/plaintext");
  EXPECT_TRUE(r && r->status == 200);
  ASSERT_EQ(::kill(child.pid, SIGTERM), 0);
  EXPECT_EQ(child.wait(), 0);
  EXPECT_NE(Child::read_all(child.err).find("written to " + path), std::string::npos);
  std::ifstream file(path);
  const std::string trace((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_NE(trace.find("\"traceEvents\""), std::string::npos) << trace;
  EXPECT_NE(trace.find("\"GET /plaintext\""), std::string::npos) << trace;

  Child nowhere({"--model", "blocking", "--port", "0", "--trace", "/nonexistent/dir/t.json"});
  const std::string err = Child::read_all(nowhere.err);
  EXPECT_EQ(nowhere.wait(), 2);
  EXPECT_NE(err.find("cannot write the trace to /nonexistent/dir/t.json"), std::string::npos)
      << err;
}

class Drain : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  std::string model() const { return std::get<0>(GetParam()); }
  int signal() const { return std::get<1>(GetParam()); }
};

// The issue's bar: a stop that loses nothing. Requests that wait when the signal comes are all
// answered, with Connection: close; an idle keep-alive connection is closed; the port closes;
// the exit status is 0. (The blocking model holds as many waiting requests as it has workers.)
TEST_P(Drain, EveryRequestInFlightIsAnsweredThenTheServerExits0) {
  const bool blocking = model() == "blocking";
  const int waiting = blocking ? 16 : 200;
  Child child({"--model", model(), "--port", "0", "--threads", blocking ? "17" : "1"});
  const std::uint16_t port = port_of(child);
  ASSERT_NE(port, 0);
  std::vector<Client> clients;
  for (int i = 0; i < waiting; ++i) {
    clients.push_back(Client::connect(port));
    ASSERT_TRUE(clients.back().send(get_request("/delay/1500")));
  }
  Client idle = Client::connect(port);
  ASSERT_TRUE(idle.send(get_request("/plaintext")));
  ASSERT_TRUE(idle.read_response());  // answered; now idle on keep-alive
  ::usleep(300'000);                  // every request is parsed and waiting
  ASSERT_EQ(::kill(child.pid, signal()), 0);
  EXPECT_TRUE(idle.closed_by_peer(2s)) << "an idle connection is closed at once";
  ::usleep(100'000);
  EXPECT_TRUE(refused(port)) << "the port still accepts while draining";
  int answered = 0;
  for (auto& c : clients) {
    auto r = c.read_response(5s);
    if (!r) continue;
    answered += r->status == 200 && r->body == "1500";
    EXPECT_EQ(r->header("Connection"), "close");
    EXPECT_TRUE(c.closed_by_peer(2s));
  }
  EXPECT_EQ(answered, waiting) << "requests in flight were lost";
  EXPECT_EQ(child.wait(), 0);
  EXPECT_NE(Child::read_all(child.err).find("drained"), std::string::npos);
}

TEST_P(Drain, TheDeadlineCutsWhatIsLeftAndSaysHowMuch) {
  Child child({"--model", model(), "--port", "0", "--threads", "2", "--drain-ms", "300"});
  const std::uint16_t port = port_of(child);
  Client slow = Client::connect(port);
  ASSERT_TRUE(slow.send(get_request("/delay/30000")));
  ::usleep(100'000);
  ASSERT_EQ(::kill(child.pid, signal()), 0);
  EXPECT_EQ(child.wait(5000), 3) << "stopped with requests cut: exit status 3";
  const std::string err = Child::read_all(child.err);
  EXPECT_NE(err.find("the drain deadline with 1 request(s) unanswered"), std::string::npos) << err;
  EXPECT_TRUE(slow.closed_by_peer(2s));
}

TEST_P(Drain, ASecondSignalStopsAtOnce) {
  Child child({"--model", model(), "--port", "0", "--threads", "2"});
  const std::uint16_t port = port_of(child);
  Client slow = Client::connect(port);
  ASSERT_TRUE(slow.send(get_request("/delay/30000")));
  ::usleep(100'000);
  ASSERT_EQ(::kill(child.pid, signal()), 0);
  ::usleep(100'000);
  ASSERT_EQ(::kill(child.pid, signal()), 0);
  EXPECT_EQ(child.wait(5000), 3) << "the default --drain-ms is 10 s: a second signal must cut it";
  EXPECT_NE(Child::read_all(child.err).find("a second signal with 1 request(s)"),
            std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Models, Drain,
                         ::testing::Combine(::testing::ValuesIn(model_names()),
                                            ::testing::Values(SIGTERM, SIGINT)),
                         [](const auto& info) {
                           return std::get<0>(info.param) +
                                  (std::get<1>(info.param) == SIGINT ? "_SIGINT" : "_SIGTERM");
                         });

}  // namespace
}  // namespace cm::test
