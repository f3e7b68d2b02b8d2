// test_server.cpp -- the deliberately simple server behind cm-load's tests: poll() over the
// listener and every connection, one pending answer per connection, answers sent when due.

#include "test_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace cm::load::test {
namespace {

using Clock = std::chrono::steady_clock;

struct Client {
  std::string input;
  std::optional<Clock::time_point> due;  // an answer is pending until then
  std::uint64_t ms = 0;                  // the request's own delay
  bool plaintext = false;
  bool starved = false;  // never answered (TestServer's starve_every)
  bool asked = false;    // its first request has arrived
};

}  // namespace

TestServer::TestServer(Behaviour behaviour, unsigned starve_every)
    : behaviour_(behaviour), starve_every_(starve_every) {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listener_ < 0) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener_, 128) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::system_error(errno, std::generic_category(), "test server listen");
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { serve(); });
}

TestServer::~TestServer() {
  stop_ = true;
  thread_.join();
  ::close(listener_);
}

std::vector<std::int64_t> TestServer::first_requests_ns() const {
  std::lock_guard lock(first_requests_mutex_);
  return first_requests_ns_;
}

void TestServer::serve() {
  std::map<int, Client> clients;
  std::uint64_t last_parsed_ms = 0;  // the shared state of Behaviour::shared_state
  std::uint64_t accepted = 0;
  const auto started = Clock::now();
  auto stalled = [&](Clock::time_point now) {  // Behaviour::stalls: the first 200 ms of a second
    return behaviour_ == Behaviour::stalls &&
           std::chrono::duration_cast<std::chrono::milliseconds>(now - started).count() % 1000 <
               kStallMs;
  };
  auto close_client = [&](int fd) {
    ::close(fd);
    clients.erase(fd);
  };

  while (!stop_) {
    std::vector<pollfd> fds{{listener_, POLLIN, 0}};
    for (auto& [fd, c] : clients)
      fds.push_back({fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 1);

    if (fds[0].revents & POLLIN) {
      for (int fd; (fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) {
        ++accepted;
        clients[fd] = Client{};
        clients[fd].starved = starve_every_ > 0 && accepted % starve_every_ == 0;
      }
    }
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close_client(fds[i].fd);
        continue;
      }
      Client& c = clients[fds[i].fd];
      c.input.append(buf, static_cast<std::size_t>(n));
      std::size_t end = c.input.find("\r\n\r\n");
      if (end == std::string::npos || c.due) continue;  // one request at a time (no pipelining)
      // "GET /delay/37 HTTP/1.1": the number after the last '/' of the path.
      if (!c.asked) {
        c.asked = true;
        std::lock_guard lock(first_requests_mutex_);
        first_requests_ns_.push_back(
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
                .count());
      }
      std::string line = c.input.substr(0, c.input.find("\r\n"));
      c.input.erase(0, end + 4);
      std::string path = line.substr(4, line.rfind(' ') - 4);
      c.plaintext = path == "/plaintext";
      c.ms = c.plaintext ? 0 : std::stoull(path.substr(path.rfind('/') + 1));
      last_parsed_ms = c.ms;
      auto wait = std::chrono::milliseconds(behaviour_ == Behaviour::early ? 0 : c.ms);
      if (behaviour_ != Behaviour::silent && !c.starved) c.due = Clock::now() + wait;
    }

    auto now = Clock::now();
    std::vector<int> to_close;
    if (stalled(now)) continue;  // answers wait for the stall's end
    for (auto& [fd, c] : clients) {
      if (!c.due || *c.due > now) continue;
      c.due.reset();
      std::uint64_t value = c.ms;
      if (behaviour_ == Behaviour::wrong_body) value = c.ms + 1;
      if (behaviour_ == Behaviour::shared_state) value = last_parsed_ms;
      std::string body = c.plaintext ? "Hello, World!" : std::to_string(value);
      std::string status =
          behaviour_ == Behaviour::wrong_status ? "500 Internal Server Error" : "200 OK";
      bool announce_close = behaviour_ == Behaviour::close_announced;
      std::string reply =
          "HTTP/1.1 " + status +
          "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
          "\r\n" + (announce_close ? "Connection: close\r\n" : "") + "\r\n" + body;
      if (behaviour_ == Behaviour::dribble) {
        // One byte per segment (TCP_NODELAY), a little apart: the client sees every split.
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        bool sent = true;
        for (char byte : reply) {
          sent = sent && ::send(fd, &byte, 1, MSG_NOSIGNAL) == 1;
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
        if (sent) ++answered_;
      } else if (::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL) ==
                 static_cast<ssize_t>(reply.size())) {
        ++answered_;
      }
      if (behaviour_ == Behaviour::close_after_answer || announce_close) to_close.push_back(fd);
    }
    for (int fd : to_close)
      close_client(fd);
  }
  for (auto& [fd, c] : clients)
    ::close(fd);
}

}  // namespace cm::load::test
