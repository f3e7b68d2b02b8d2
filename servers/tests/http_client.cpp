// http_client.cpp -- the conformance suite's raw-socket client.

#include "http_client.hpp"

#include <filesystem>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <system_error>

namespace cm::test {

std::optional<std::string> Response::header(std::string_view name) const {
  for (const auto& [field, value] : headers) {
    if (field.size() == name.size() && ::strncasecmp(field.data(), name.data(), name.size()) == 0) {
      return value;
    }
  }
  return std::nullopt;
}

std::size_t Response::count(std::string_view name) const {
  std::size_t n = 0;
  for (const auto& [field, value] : headers) {
    if (field.size() == name.size() && ::strncasecmp(field.data(), name.data(), name.size()) == 0) {
      ++n;
    }
  }
  return n;
}

Client Client::connect(std::uint16_t port, const std::string& host) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw std::system_error(errno, std::generic_category(), "connect");
  }
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return Client(std::move(fd));
}

bool Client::send(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

bool Client::fill(std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_.get(), POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    char chunk[16384];
    const ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<std::size_t>(n));
    return true;
  }
}

std::optional<Response> Client::read_response(std::chrono::milliseconds timeout) {
  return read(timeout, /*head_only=*/false);
}

std::optional<Response> Client::read_response_to_head(std::chrono::milliseconds timeout) {
  return read(timeout, /*head_only=*/true);
}

std::optional<Response> Client::read(std::chrono::milliseconds timeout, bool head_only) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::size_t head_end;
  while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
    if (!fill(deadline)) return std::nullopt;
  }
  Response r;
  std::string_view head(buffer_.data(), head_end);
  const std::size_t line_end = head.find("\r\n");
  std::string_view status_line = head.substr(0, line_end);
  r.version = std::string(status_line.substr(0, status_line.find(' ')));
  if (status_line.size() < 12) return std::nullopt;
  std::from_chars(status_line.data() + 9, status_line.data() + 12, r.status);
  std::string_view rest = line_end == std::string_view::npos ? "" : head.substr(line_end + 2);
  while (!rest.empty()) {
    const std::size_t eol = rest.find("\r\n");
    std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? "" : rest.substr(eol + 2);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ')
      value.remove_prefix(1);
    r.headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
  }
  std::size_t length = 0;
  if (auto cl = r.header("Content-Length"); cl && !head_only) {
    std::from_chars(cl->data(), cl->data() + cl->size(), length);
  }
  const std::size_t body_start = head_end + 4;
  while (buffer_.size() < body_start + length) {
    if (!fill(deadline)) return std::nullopt;
  }
  r.body = buffer_.substr(body_start, length);
  buffer_.erase(0, body_start + length);
  r.received_at = std::chrono::steady_clock::now();
  return r;
}

bool Client::closed_by_peer(std::chrono::milliseconds timeout) {
  if (!buffer_.empty()) return false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_.get(), POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    char c;
    const ssize_t n = ::recv(fd_.get(), &c, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    return n <= 0;  // EOF or reset: closed; a byte: not closed
  }
}

bool Client::readable_now() {
  if (!buffer_.empty()) return true;
  pollfd p{fd_.get(), POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

void Client::shutdown_write() {
  ::shutdown(fd_.get(), SHUT_WR);
}

std::string get_request(std::string_view path, std::string_view extra) {
  std::string r = "GET ";
  r += path;
  r += " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  r += extra;
  r += "\r\n";
  return r;
}

std::string post_request(std::string_view path, std::string_view body) {
  std::string r = "POST ";
  r += path;
  r +=
      " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  r += body;
  return r;
}

std::optional<Response> get(std::uint16_t port, std::string_view path) {
  Client c = Client::connect(port);
  if (!c.send(get_request(path))) return std::nullopt;
  return c.read_response();
}

}  // namespace cm::test

namespace cm::test {

int anon_inode_fds() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(entry.path(), ec);
    if (!ec && target.string().starts_with("anon_inode:")) ++n;
  }
  return n;
}

}  // namespace cm::test
