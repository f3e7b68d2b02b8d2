// asio_coro_uring_test.cpp -- the io_uring variant: it really runs on io_uring, and where the
// kernel refuses io_uring it says so with ModelUnavailable (the suite then skips) instead of
// failing some other way.

#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <memory>

#include "cm/server.hpp"
#include "http_client.hpp"

namespace cm::models {
std::unique_ptr<Server> make_asio_coro_uring(const ServerOptions& options);
}

namespace cm::test {
namespace {

ServerOptions local_options(unsigned threads) {
  ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.threads = threads;
  options.blocking_threads = 2;
  return options;
}

/// io_uring instances this process holds (each shows as an anon_inode:[io_uring] fd).
int io_uring_fds() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(entry.path(), ec);
    if (!ec && target.string() == "anon_inode:[io_uring]") ++n;
  }
  return n;
}

TEST(AsioCoroUring, EachLoopRunsOnItsOwnRing) {
  const int before = io_uring_fds();
  auto server = models::make_asio_coro_uring(local_options(2));
  try {
    server->start();
  } catch (const ModelUnavailable& e) {
    GTEST_SKIP() << "io_uring unavailable here: " << e.what();
  }
  EXPECT_EQ(io_uring_fds() - before, 2) << "one ring per io_context";
  auto r = get(server->port(), "/delay/20");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "20");
  EXPECT_EQ(r->header("Server"), "cm-asio_coro_uring");
  server->stop();
  EXPECT_EQ(io_uring_fds(), before) << "every ring closed by stop()";
}

TEST(AsioCoroUring, RefusedIoUringIsModelUnavailable) {
  // A child process forbids io_uring_setup with seccomp (as a container runtime may), then tries.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
      ::_exit(3);
    }
    try {
      models::make_asio_coro_uring(local_options(1))->start();
    } catch (const ModelUnavailable&) {
      ::_exit(0);
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "seccomp not available to this process";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: started anyway; 2: another exception";
}

}  // namespace
}  // namespace cm::test
