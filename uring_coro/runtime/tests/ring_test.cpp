// ring_test.cpp -- the Ring, its operations and the Pool, on a real io_uring. Skipped where the
// kernel refuses io_uring. Every test ends with no task left and no frame alive.

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/utsname.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "cm/net.hpp"
#include "cm/uring/pool.hpp"
#include "cm/uring/ring.hpp"

namespace cm::uring {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class RingTest : public ::testing::Test {
 protected:
  void SetUp() override { make_ring(64); }
  void make_ring(unsigned entries) {
    ring_.reset();
    try {
      ring_ = std::make_unique<Ring>(entries);
    } catch (const std::system_error& e) {
      if (means_unavailable(e)) GTEST_SKIP() << "io_uring is not available here: " << e.what();
      throw;
    }
  }
  void TearDown() override {
    if (!ring_) return;
    EXPECT_EQ(ring_->spawned(), 0u) << "a task was not joined";
    ring_.reset();
    EXPECT_EQ(FrameCount::alive(), frames_before_) << "a coroutine frame leaked";
  }
  void run_until_joined() {
    while (ring_->spawned() > 0)
      ring_->run_once();
  }
  Ring& ring() { return *ring_; }

  const std::size_t frames_before_ = FrameCount::alive();
  std::unique_ptr<Ring> ring_;
};

/// A connected pair of sockets.
struct SocketPair {
  SocketPair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
      throw std::runtime_error("socketpair");
    a.reset(fds[0]);
    b.reset(fds[1]);
  }
  Fd a, b;
};

TEST_F(RingTest, NopCompletesWithZero) {
  EXPECT_EQ(ring().run([](Ring& r) -> Task<int> { co_return co_await Nop(r); }(ring())), 0);
}

Task<std::chrono::nanoseconds> timed(Ring& ring, std::chrono::milliseconds duration, int& result) {
  const auto start = Clock::now();
  result = co_await Timeout(ring, duration);
  co_return Clock::now() - start;
}

TEST_F(RingTest, TimeoutExpiresWithEtimeNeverEarly) {
  int result = 0;
  EXPECT_GE(ring().run(timed(ring(), 30ms, result)), 30ms);
  EXPECT_EQ(result, -ETIME);
}

TEST_F(RingTest, TimeoutAtADeadlineExpiresWithEtimeNeverBeforeIt) {
  const auto deadline = Clock::now() + 30ms;
  int result = 0;
  Clock::time_point woke;
  auto waiter = [&](Ring& r) -> Task<void> {  // NOTE: outlives the spawned task it captures for
    result = co_await Timeout(r, deadline);
    woke = Clock::now();
  };
  ring().spawn(waiter(ring()));
  // The SQE waits in the SQ until run_once() submits it; the deadline does not move with it.
  std::this_thread::sleep_for(10ms);
  run_until_joined();
  EXPECT_EQ(result, -ETIME);
  EXPECT_GE(woke, deadline);
}

TEST_F(RingTest, TimeoutAtADeadlineAlreadyPassedExpiresAtOnce) {
  int result = 0;
  ring().run(
      [&](Ring& r) -> Task<void> { result = co_await Timeout(r, Clock::now() - 1s); }(ring()));
  EXPECT_EQ(result, -ETIME);
}

TEST_F(RingTest, SendAndRecvOverASocketPair) {
  SocketPair pair;
  auto exchange = [&](Ring& r) -> Task<std::string> {
    const std::string message = "hello, ring";
    const int sent = co_await Send(r, pair.a.get(), message);
    EXPECT_EQ(sent, static_cast<int>(message.size()));
    char buffer[64];
    const int got = co_await RecvFor(r, pair.b.get(), buffer, 10s);
    co_return std::string(buffer, got > 0 ? static_cast<std::size_t>(got) : 0);
  };
  EXPECT_EQ(ring().run(exchange(ring())), "hello, ring");
}

TEST_F(RingTest, ATurnWithADeadlineTakesEveryCompletionThatWaitedInOneGo) {
  // 100 recvs wait for data (the kernel completes them later, in a wait of this thread); a turn
  // with a deadline -- the one a timer wheel's loop runs -- takes them all, not a first batch.
  make_ring(256);
  constexpr int n = 100;
  std::vector<SocketPair> pairs(n);
  int received = 0;
  auto receive = [&](Ring& r, int fd) -> Task<void> {  // NOTE: outlives the tasks it makes
    char buffer[8];
    if (co_await RecvFor(r, fd, buffer, 10s) > 0) ++received;
  };
  for (auto& pair : pairs)
    ring().spawn(receive(ring(), pair.b.get()));
  ring().run_once(Clock::now());  // submits them; nothing has come, and it waits for nothing
  ASSERT_EQ(received, 0);
  for (auto& pair : pairs)
    ASSERT_EQ(::write(pair.a.get(), "x", 1), 1);
  ring().run_once(Clock::now() + 10s);
  EXPECT_EQ(received, n);
  run_until_joined();
}

TEST_F(RingTest, ATurnWithADeadlineReturnsByItWhenNothingCompletes) {
  const auto deadline = Clock::now() + 20ms;
  ring().run_once(deadline);
  EXPECT_GE(Clock::now(), deadline);  // the kernel's timed wait: never before it
}

TEST_F(RingTest, RecvForGivesEtimeWhenNothingComesAndDataWhenItDoes) {
  SocketPair pair;
  auto receive = [&](Ring& r, std::chrono::milliseconds limit) -> Task<int> {
    char buffer[16];
    co_return co_await RecvFor(r, pair.b.get(), buffer, limit);
  };
  const auto start = Clock::now();
  EXPECT_EQ(ring().run(receive(ring(), 20ms)), -ETIME);
  EXPECT_GE(Clock::now() - start, 20ms);
  ASSERT_EQ(::send(pair.a.get(), "abc", 3, 0), 3);
  EXPECT_EQ(ring().run(receive(ring(), 10s)), 3);
  // Leave the ring idle for longer than the first limit: its link timeout must be gone with it.
  pair.a.reset();
  EXPECT_EQ(ring().run(receive(ring(), 10s)), 0) << "EOF";
}

/// `count` clients connected to `port` on the loopback (each waits in the listener's backlog).
std::vector<Fd> connect_clients(std::uint16_t port, int count) {
  std::vector<Fd> clients;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < count; ++i) {
    clients.emplace_back(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(clients.back().get(), reinterpret_cast<sockaddr*>(&address), sizeof address))
      throw std::system_error(errno, std::system_category(), "connect");
  }
  return clients;
}

// The write deadline's two halves: a send with MSG_DONTWAIT into a full socket gives -EAGAIN at
// once, and SendFor gives -ETIME when the peer takes nothing within its limit, then the bytes it
// sent once the peer reads.
TEST_F(RingTest, SendForGivesEtimeWhenThePeerDoesNotReadAndSendsWhenItDoes) {
  // TCP on the loopback, as the server's.
  Listeners listeners = open_listeners("127.0.0.1", 0, 1);
  std::vector<Fd> clients = connect_clients(listeners.port, 1);
  const Fd server(::accept4(listeners.sockets.front().get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_GE(server.get(), 0);
  struct {
    const Fd& a;
    const Fd& b;
  } pair{server, clients.front()};
  const std::string block(64 * 1024, 'x');
  auto fill = [&] {
    while (::send(pair.a.get(), block.data(), block.size(), MSG_DONTWAIT) > 0) {
    }
  };
  auto send_now = [&](Ring& r) -> Task<int> {
    co_return co_await Send(r, pair.a.get(), block, MSG_DONTWAIT);
  };
  auto send = [&](Ring& r, std::chrono::milliseconds limit) -> Task<int> {
    co_return co_await SendFor(r, pair.a.get(), block, limit);
  };
  // The loopback may move bytes on to the peer after a send gave EAGAIN (later still under load or
  // a sanitizer), and a send then rightly takes the room they left. So each try fills the socket
  // again; within a few the peer's buffer is full and stays so for the whole limit.
  bool refused_now = false;
  int limited = 0;
  auto waited = Clock::duration::zero();
  for (int attempt = 0; attempt < 10 && limited != -ETIME; ++attempt) {
    fill();  // the peer reads nothing
    const int now = ring().run(send_now(ring()));
    const auto start = Clock::now();
    limited = ring().run(send(ring(), 20ms));
    waited = Clock::now() - start;
    EXPECT_TRUE(now == -EAGAIN || now > 0) << now;
    EXPECT_TRUE(limited == -ETIME || limited > 0) << limited;
    refused_now = refused_now || now == -EAGAIN;
  }
  EXPECT_TRUE(refused_now) << "a Send with MSG_DONTWAIT into a full socket gives -EAGAIN";
  EXPECT_EQ(limited, -ETIME);
  EXPECT_GE(waited, 20ms);
  std::vector<char> sink(1 << 20);
  while (::recv(pair.b.get(), sink.data(), sink.size(), MSG_DONTWAIT) > 0) {
  }  // the peer reads all: room again
  EXPECT_GT(ring().run(send(ring(), 10s)), 0);
}

/// Whether the running kernel is major.minor or later.
bool kernel_at_least(int major, int minor) {
  utsname name{};
  int got_major = 0, got_minor = 0;
  if (::uname(&name) != 0 || std::sscanf(name.release, "%d.%d", &got_major, &got_minor) != 2)
    return false;
  return got_major > major || (got_major == major && got_minor >= minor);
}

/// Takes connections from `acceptor` into `accepted` until it says the ring stopped.
Task<void> accept_all(Acceptor& acceptor, std::vector<Fd>& accepted, std::vector<int>& errors) {
  for (;;) {
    const int fd = co_await acceptor.next();
    if (fd == -ECANCELED) co_return;
    if (fd >= 0) accepted.emplace_back(fd);
    if (fd < 0) errors.push_back(fd);
  }
}

/// Accepts `count` clients waiting in a backlog; gives the loop turns (run_once) that took.
int accept_backlog(Ring& ring, Acceptor& acceptor, int count, std::vector<Fd>& accepted) {
  std::vector<int> errors;
  ring.spawn(accept_all(acceptor, accepted, errors));
  int turns = 0;
  while (accepted.size() < static_cast<std::size_t>(count) && errors.empty() && turns < 10 * count) {
    ring.run_once();
    ++turns;
  }
  EXPECT_TRUE(errors.empty()) << "accept failed: " << std::strerror(-errors.front());
  ring.cancel_all();  // the acceptor's SQE is still armed: only a cancel ends it
  while (ring.spawned() > 0)
    ring.run_once();
  return turns;
}

TEST_F(RingTest, AMultishotAcceptTakesAWholeBacklogInOneTurn) {
  constexpr int count = 100;
  Listeners listeners = open_listeners("127.0.0.1", 0, 1);
  std::vector<Fd> clients = connect_clients(listeners.port, count);
  Acceptor acceptor(ring(), listeners.sockets.front().get());
  std::vector<Fd> accepted;
  const int turns = accept_backlog(ring(), acceptor, count, accepted);
  if (!acceptor.multishot() && !kernel_at_least(5, 19))
    GTEST_SKIP() << "this kernel refuses IORING_ACCEPT_MULTISHOT (5.19+); the fallback served";
  ASSERT_TRUE(acceptor.multishot()) << "a kernel of 5.19 or later refused multishot accept";
  ASSERT_EQ(accepted.size(), static_cast<std::size_t>(count));
  // One SQE gave a CQE per connection. A single-shot accept, armed again after each CQE, would
  // have needed a turn per connection (the fallback below does).
  EXPECT_LE(turns, 3);
  for (const Fd& fd : accepted)
    EXPECT_NE(::fcntl(fd.get(), F_GETFD) & FD_CLOEXEC, 0);
}

TEST_F(RingTest, WhereTheKernelRefusesMultishotAcceptOneSqePerConnection) {
  constexpr int count = 20;
  Listeners listeners = open_listeners("127.0.0.1", 0, 1);
  std::vector<Fd> clients = connect_clients(listeners.port, count);
  ::setenv("CM_URING_SIMULATE_NO_MULTISHOT", "1", 1);  // the kernel is sent a flag it refuses
  Acceptor acceptor(ring(), listeners.sockets.front().get());
  ::unsetenv("CM_URING_SIMULATE_NO_MULTISHOT");
  std::vector<Fd> accepted;
  const int turns = accept_backlog(ring(), acceptor, count, accepted);
  EXPECT_FALSE(acceptor.multishot()) << "the -EINVAL was not taken as a refusal";
  EXPECT_EQ(accepted.size(), static_cast<std::size_t>(count));
  EXPECT_GE(turns, count) << "one connection per loop turn";
}

TEST_F(RingTest, CancelAllEndsAnAcceptorAndClosesWhatCameMeanwhile) {
  Listeners listeners = open_listeners("127.0.0.1", 0, 1);
  Acceptor acceptor(ring(), listeners.sockets.front().get());
  int result = 0;
  ring().spawn([](Acceptor& a, int& r) -> Task<void> { r = co_await a.next(); }(acceptor, result));
  ring().run([](Ring& r) -> Task<void> { co_await Nop(r); }(ring()));  // the SQE is armed now
  std::vector<Fd> clients = connect_clients(listeners.port, 1);
  ring().cancel_all();
  run_until_joined();
  EXPECT_EQ(result, -ECANCELED) << "a stopping ring serves no new connection";
  // The connection was accepted and closed by the ring (its CQE came before the cancel), or is
  // still in the listener's backlog (with DEFER_TASKRUN the cancel may come first): closing the
  // listener resets it. Either way the client learns, and no accepted fd is left open.
  listeners.sockets.front().reset();
  pollfd client{clients.front().get(), POLLIN, 0};
  ASSERT_EQ(::poll(&client, 1, 2000), 1) << "the connection was accepted and kept open";
  char byte;
  const ssize_t n = ::recv(client.fd, &byte, 1, 0);
  EXPECT_TRUE(n == 0 || (n < 0 && errno == ECONNRESET)) << n << " " << std::strerror(errno);
}

TEST_F(RingTest, CompletionsWaitForTheRingsThreadWhereTheKernelCan) {
  // Linux 6.1 has DEFER_TASKRUN. The same tests run again with it refused (ctest's NoDefer.*).
  const bool refused = std::getenv("CM_URING_SIMULATE_NO_DEFER") != nullptr;
  EXPECT_EQ(ring().deferred(), kernel_at_least(6, 1) && !refused);
  // Whichever it is, a completion reaches its coroutine through run_once().
  EXPECT_EQ(ring().run([](Ring& r) -> Task<int> { co_return co_await Nop(r); }(ring())), 0);
}

TEST_F(RingTest, AnotherThreadRunsTheRingItDidNotCreate) {
  // cm-server makes a ring on the main thread and runs it on the loop's: the first submission
  // makes that thread the ring's one issuer.
  int result = -1;
  std::thread([&] {
    result = ring().run([](Ring& r) -> Task<int> { co_return co_await Nop(r); }(ring()));
  }).join();
  EXPECT_EQ(result, 0);
}

TEST_F(RingTest, CloseThroughTheRing) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  Fd keep(fds[1]);
  EXPECT_EQ(ring().run([](Ring& r, int fd) -> Task<int> { co_return co_await Close(r, fd); }(
                                               ring(), fds[0])),
            0);
  EXPECT_EQ(::fcntl(fds[0], F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);
}

TEST_F(RingTest, AFullSubmissionQueueIsSubmittedFirst) {
  make_ring(4);  // 4 SQEs, 100 operations queued before the ring runs once
  int completed = 0;
  for (int i = 0; i < 100; ++i) {
    ring().spawn([](Ring& r, int& done) -> Task<void> {
      if (co_await Nop(r) == 0) ++done;
    }(ring(), completed));
  }
  run_until_joined();
  EXPECT_EQ(completed, 100);
}

TEST_F(RingTest, AnExceptionCrossesTheRingToTheAwaiter) {
  auto fails_after_io = [](Ring& r) -> Task<int> {
    co_await Nop(r);
    throw std::runtime_error("after a nop");
  };
  EXPECT_THROW(ring().run(fails_after_io(ring())), std::runtime_error);
}

TEST_F(RingTest, CancelAllEndsEveryTaskAndRefusesNewOperations) {
  SocketPair pair;
  int cancelled = 0;
  for (int i = 0; i < 10; ++i) {
    ring().spawn([](Ring& r, int fd, int& count) -> Task<void> {
      if (co_await Timeout(r, 1h) == -ECANCELED) ++count;
      char buffer[8];
      if (co_await RecvFor(r, fd, buffer, 1h) == -ECANCELED)
        ++count;  // refused: never reaches the kernel
    }(ring(), pair.b.get(), cancelled));
  }
  ring().run(Task<void>([](Ring& r) -> Task<void> { co_await Nop(r); }(ring())));
  EXPECT_EQ(ring().spawned(), 10u);
  ring().cancel_all();
  run_until_joined();
  EXPECT_EQ(cancelled, 20);
  EXPECT_EQ(ring().run([](Ring& r) -> Task<int> { co_return co_await Close(r, -1); }(ring())),
            -EBADF)
      << "close still runs after cancel_all";
}

/// Resumes on the ring after a trip through another thread (what the pool does, by hand).
struct ViaThread {
  Ring& ring;
  std::thread thread;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> waiter) {
    thread = std::thread([this, waiter] { ring.post(waiter); });
  }
  void await_resume() { thread.join(); }
};

TEST_F(RingTest, PostResumesOnTheRingsThread) {
  const auto ring_thread = std::this_thread::get_id();
  EXPECT_EQ(ring().run([](Ring& r) -> Task<std::thread::id> {
    co_await ViaThread{r, {}};
    co_return std::this_thread::get_id();
  }(ring())),
            ring_thread);
}

TEST_F(RingTest, PoolRunsElsewhereAndComesBackOnTheRing) {
  Pool pool(2);
  const auto ring_thread = std::this_thread::get_id();
  std::thread::id worker;
  auto offload = [&](Ring& r) -> Task<std::thread::id> {
    co_await pool.run(r, [&] { worker = std::this_thread::get_id(); });
    co_return std::this_thread::get_id();
  };
  EXPECT_EQ(ring().run(offload(ring())), ring_thread) << "the coroutine goes on on its ring";
  EXPECT_NE(worker, ring_thread);
  EXPECT_NE(worker, std::thread::id{});
}

TEST_F(RingTest, AJobsExceptionReachesItsAwaiter) {
  Pool pool(1);
  EXPECT_THROW(ring().run([](Ring& r, Pool& p) -> Task<void> {
    co_await p.run(r, [] { throw std::runtime_error("in the job"); });
  }(ring(), pool)),
               std::runtime_error);
}

TEST_F(RingTest, StopRunsWhatIsQueuedFirst) {
  Pool pool(1);
  std::latch release(1);
  int ran = 0;
  for (int i = 0; i < 3; ++i) {
    ring().spawn([](Ring& r, Pool& p, std::latch& l, int& n) -> Task<void> {
      co_await p.run(r, [&] {
        l.wait();
        ++n;
      });
    }(ring(), pool, release, ran));
  }
  release.count_down();
  run_until_joined();
  pool.stop();
  EXPECT_EQ(ran, 3) << "every queued job ran and came back";
}

TEST(RingUnavailable, TheRefusalIsRecognised) {
  ::setenv("CM_URING_SIMULATE_ENOSYS", "1", 1);
  try {
    Ring ring;
    ::unsetenv("CM_URING_SIMULATE_ENOSYS");
    FAIL() << "the simulated refusal did not refuse";
  } catch (const std::system_error& e) {
    ::unsetenv("CM_URING_SIMULATE_ENOSYS");
    EXPECT_TRUE(means_unavailable(e)) << e.what();
    EXPECT_NE(std::string(e.what()).find("io_uring_queue_init"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cm::uring
