// cost.cpp -- what a waiting request costs in the uring_coro model, measured.
//
//   build/<dir>/bin/uring_coro_cost [connections=1000] [delay_ms=3000]
//
// Starts the model in this process (one ring), opens `connections` client sockets, sends each a
// GET /delay/{delay_ms}, and once all are waiting prints, per connection: the coroutine frames
// alive and their bytes (counted by the runtime's promise operator new), the heap in use
// (mallinfo2: frames, sessions, buffers; the client side here allocates nothing meanwhile), and
// the growth of this process's RSS. Then it reads every answer, checks it, and prints the same
// for the connections once they are idle (keep-alive, a recv pending on each), and stops.

#include <malloc.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cm/fd.hpp"
#include "cm/server.hpp"
#include "cm/uring/task.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace cm::models {
std::unique_ptr<Server> make_uring_coro(const ServerOptions& options);
}

namespace {

long rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  long value = 0;
  while (status >> key) {
    if (key == "VmRSS:") {
      status >> value;
      return value;
    }
    status.ignore(1 << 10, '\n');
  }
  return -1;
}

cm::Fd connect_to(std::uint16_t port) {
  cm::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    std::perror("connect");
    std::exit(1);
  }
  return fd;
}

struct Snapshot {
  std::size_t frames = cm::uring::FrameCount::alive();
  std::size_t frame_bytes = cm::uring::FrameCount::bytes();
  std::size_t heap = mallinfo2().uordblks;
  long rss = rss_kib();
};

void report(const char* what, long connections, const Snapshot& before) {
  const Snapshot now;
  const double n = static_cast<double>(connections);
  std::printf("%s, per connection:\n", what);
  std::printf("  coroutine frames alive: %.2f\n",
              static_cast<double>(now.frames - before.frames) / n);
  std::printf("  frame bytes:            %.0f\n",
              static_cast<double>(now.frame_bytes - before.frame_bytes) / n);
  std::printf("  heap in use (malloc):   %.0f bytes\n",
              (static_cast<double>(now.heap) - static_cast<double>(before.heap)) / n);
  std::printf("  RSS growth:             %.2f KiB\n",
              static_cast<double>(now.rss - before.rss) / n);
}

}  // namespace

int main(int argc, char** argv) {
  const long connections = argc > 1 ? std::atol(argv[1]) : 1000;
  const long delay_ms = argc > 2 ? std::atol(argv[2]) : 3000;
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);

  cm::ServerOptions options;
  options.port = 0;
  options.threads = 1;
  options.header_timeout = std::chrono::milliseconds(60'000);
  auto server = cm::models::make_uring_coro(options);
  server->start();

  std::vector<cm::Fd> clients;
  clients.reserve(static_cast<std::size_t>(connections));
  // Warm up the allocator and the ring with one request before the baseline.
  {
    cm::Fd warm = connect_to(server->port());
    const std::string request = "GET /delay/0 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    (void)::send(warm.get(), request.data(), request.size(), 0);
    char sink[512];
    while (::recv(warm.get(), sink, sizeof sink, 0) > 0) {
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const Snapshot before;

  const std::string request =
      "GET /delay/" + std::to_string(delay_ms) + " HTTP/1.1\r\nHost: x\r\n\r\n";
  for (long i = 0; i < connections; ++i) {
    clients.push_back(connect_to(server->port()));
    (void)::send(clients.back().get(), request.data(), request.size(), 0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(delay_ms / 2, 1000L)));
  std::printf(
      "%ld connections, each waiting on GET /delay/%ld, one ring; open_connections() = %zu\n",
      connections, delay_ms, server->open_connections());
  report("waiting request", connections, before);

  long correct = 0;
  const std::string body = std::to_string(delay_ms);
  for (auto& c : clients) {
    std::string response;
    char chunk[512];
    while (response.find("\r\n\r\n") == std::string::npos ||
           response.size() < response.find("\r\n\r\n") + 4 + body.size()) {
      const ssize_t n = ::recv(c.get(), chunk, sizeof chunk, 0);
      if (n <= 0) break;
      response.append(chunk, static_cast<std::size_t>(n));
    }
    if (response.rfind("HTTP/1.1 200", 0) == 0 && response.ends_with("\r\n\r\n" + body)) {
      ++correct;
    }
  }
  std::printf("answered correctly: %ld of %ld\n", correct, connections);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  report("idle keep-alive connection (a recv pending)", connections, before);
  clients.clear();
  server->stop();
  return correct == connections ? 0 : 1;
}
