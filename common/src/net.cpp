// net.cpp -- listening sockets and the blocking lingering close.

#include "cm/net.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "cm/limits.hpp"
#include "cm/policy.hpp"

namespace cm {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

struct Address {
  sockaddr_storage storage{};
  socklen_t size = 0;
  int family = AF_INET;
};

Address resolve(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &result); rc != 0) {
    throw std::system_error(EINVAL, std::generic_category(),
                            "resolve " + host + ": " + ::gai_strerror(rc));
  }
  Address a;
  std::memcpy(&a.storage, result->ai_addr, result->ai_addrlen);
  a.size = result->ai_addrlen;
  a.family = result->ai_family;
  ::freeaddrinfo(result);
  return a;
}

void set_port(Address& a, std::uint16_t port) {
  if (a.family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&a.storage)->sin6_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in*>(&a.storage)->sin_port = htons(port);
  }
}

Fd bound_socket(const Address& a, bool reuseport, bool nonblocking, const std::string& name) {
  Fd fd(::socket(a.family, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0));
  if (!fd) fail("socket");
  const int one = 1;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
    fail("setsockopt SO_REUSEADDR");
  }
  if (reuseport && ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
    fail("setsockopt SO_REUSEPORT");
  }
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&a.storage), a.size) != 0) {
    fail("bind " + name);
  }
  return fd;
}

}  // namespace

Listeners open_listeners(const std::string& host, std::uint16_t port, unsigned count, int backlog,
                         bool nonblocking) {
  if (count == 0) count = 1;
  Address address = resolve(host, port);
  const std::string name = host + ":" + std::to_string(port);

  // SO_REUSEPORT lets any socket of the same user join a port, so a second server would silently
  // share the first one's port. A probe bound *without* it fails with EADDRINUSE if anybody
  // listens there, and picks the port when asked for port 0.
  Listeners result;
  {
    Fd probe = bound_socket(address, /*reuseport=*/false, false, name);
    sockaddr_storage bound{};
    socklen_t size = sizeof bound;
    if (::getsockname(probe.get(), reinterpret_cast<sockaddr*>(&bound), &size) != 0) {
      fail("getsockname");
    }
    result.port =
        ntohs(address.family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                         : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  set_port(address, result.port);
  const std::string bound_name = host + ":" + std::to_string(result.port);
  for (unsigned i = 0; i < count; ++i) {
    Fd fd = bound_socket(address, /*reuseport=*/true, nonblocking, bound_name);
    if (::listen(fd.get(), backlog) != 0) fail("listen " + bound_name);
    result.sockets.push_back(std::move(fd));
  }
  return result;
}

void set_nodelay(int fd) noexcept {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

std::size_t bytes_unread(int fd) noexcept {
  int unread = 0;
  if (::ioctl(fd, FIONREAD, &unread) != 0 || unread < 0) return 0;
  return static_cast<std::size_t>(unread);
}

void linger_close_blocking(int fd) noexcept {
  ::shutdown(fd, SHUT_WR);
  Linger linger(std::chrono::steady_clock::now());
  char sink[4096];
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(
        linger.deadline() - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return;
    const ssize_t n = ::recv(fd, sink, sizeof sink, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (!linger.more(n)) return;
  }
}

std::chrono::milliseconds accept_backoff(int error) noexcept {
  switch (error) {
    case EMFILE:
    case ENFILE:
    case ENOBUFS:
    case ENOMEM: return std::chrono::milliseconds(10);
    default: return std::chrono::milliseconds(0);
  }
}

namespace {

/// What running out of `error` means, and what raises it; `limit` the process's descriptors.
std::string shortage(int error, unsigned long limit) {
  const std::string held = std::to_string(limit);
  switch (error) {
    case EMFILE:
      return "out of descriptors: the process may hold " + held + " (RLIMIT_NOFILE; ulimit -n)";
    case ENFILE:
      return "the system's file table is full (fs.file-max; the process may hold " + held + ")";
    default:
      return "out of kernel memory for sockets (the process may hold " + held + " descriptors)";
  }
}

}  // namespace

std::optional<std::string> AcceptTrouble::failed(int error, std::size_t open, unsigned long limit,
                                                 Clock::time_point now) {
  if (accept_backoff(error).count() == 0) return std::nullopt;  // one client's failure
  std::lock_guard lock(mutex_);
  ++failures_;
  if (said_ && now - *said_ < std::chrono::seconds(1)) return std::nullopt;
  std::string line = "cm-server: accept failed (" + std::string(std::strerror(error)) +
                     "): " + shortage(error, limit) + "; " + std::to_string(failures_) +
                     " accept(s) failed since the last line, " + std::to_string(open) +
                     " connection(s) open; new clients wait in the listen backlog";
  said_ = now;
  failures_ = 0;
  return line;
}

void AcceptTrouble::report(int error, std::size_t open) {
  if (auto line = failed(error, open, descriptor_limit(), Clock::now()))
    std::fprintf(stderr, "%s\n", line->c_str());
}

unsigned long descriptor_limit() noexcept {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  return limit.rlim_cur;
}

unsigned long raise_descriptor_limit() noexcept {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
  return descriptor_limit();
}

bool descriptor_free(std::size_t open) noexcept {
  constexpr std::size_t room = 64;  // the loops, listeners, pools and database sockets, with room
  static const unsigned long limit = descriptor_limit();
  if (open + room < limit) return true;
  const int probe = ::open("/", O_RDONLY | O_CLOEXEC);
  if (probe < 0) return errno != EMFILE && errno != ENFILE;
  ::close(probe);
  return true;
}

}  // namespace cm
