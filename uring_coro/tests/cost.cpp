// cost.cpp -- what a waiting request costs in the uring_coro model, measured.
//
//   build/<dir>/bin/uring_coro_cost [connections=1000] [delay_ms=3000]
//
// Starts the model in this process (one ring), opens `connections` client sockets, sends each a
// GET /delay/{delay_ms}, and once all are waiting prints: the coroutine frames alive and their
// bytes (counted by the runtime's promise operator new), per connection, and the growth of this
// process's RSS per connection (server and the test's own client sockets together). Then it reads
// every answer, checks it, and stops.

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
  const long rss_before = rss_kib();
  const std::size_t frames_before = cm::uring::frames_alive();
  const std::size_t bytes_before = cm::uring::FrameCount::bytes();

  const std::string request =
      "GET /delay/" + std::to_string(delay_ms) + " HTTP/1.1\r\nHost: x\r\n\r\n";
  for (long i = 0; i < connections; ++i) {
    clients.push_back(connect_to(server->port()));
    (void)::send(clients.back().get(), request.data(), request.size(), 0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(delay_ms / 2, 1000L)));

  const std::size_t frames = cm::uring::frames_alive() - frames_before;
  const std::size_t bytes = cm::uring::FrameCount::bytes() - bytes_before;
  const long rss_after = rss_kib();
  std::printf("connections waiting:     %ld (GET /delay/%ld, one ring)\n", connections, delay_ms);
  std::printf("open_connections():      %zu\n", server->open_connections());
  std::printf("coroutine frames alive:  %zu (%.2f per connection)\n", frames,
              static_cast<double>(frames) / static_cast<double>(connections));
  std::printf("frame bytes:             %zu (%.0f per connection)\n", bytes,
              static_cast<double>(bytes) / static_cast<double>(connections));
  std::printf("RSS growth:              %ld KiB (%.1f KiB per connection, server and client)\n",
              rss_after - rss_before,
              static_cast<double>(rss_after - rss_before) / static_cast<double>(connections));

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
  std::printf("answered correctly:      %ld of %ld\n", correct, connections);
  clients.clear();
  server->stop();
  return correct == connections ? 0 : 1;
}
