#pragma once
/// \file http_client.hpp
/// A raw-socket HTTP/1.1 client for tests: it sends exactly the bytes it is given and parses what
/// comes back, so a test can send split, pipelined, malformed or oversized requests. Every read
/// has a timeout, so a misbehaving server fails a test instead of hanging it.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cm/fd.hpp"

namespace cm::test {

using namespace std::chrono_literals;

/// One parsed response.
struct Response {
  int status = 0;
  std::string version;  ///< "HTTP/1.1"
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::chrono::steady_clock::time_point received_at;  ///< when its last byte was read

  /// The first header with this name (case-insensitive); nullopt if absent.
  std::optional<std::string> header(std::string_view name) const;
  /// How many headers have this name.
  std::size_t count(std::string_view name) const;
};

/// One client connection.
class Client {
 public:
  /// Connects to host:port; throws std::system_error if it cannot.
  static Client connect(std::uint16_t port, const std::string& host = "127.0.0.1");

  /// Sends all of `bytes`; returns false if the server closed or reset the connection.
  bool send(std::string_view bytes);
  /// Reads one whole response; nullopt if the connection ended or `timeout` passed first.
  /// Bytes after it stay buffered for the next call (pipelined responses).
  std::optional<Response> read_response(std::chrono::milliseconds timeout = 10s);
  /// Reads the status line and headers of a response whose body is not sent (the answer to a
  /// HEAD): Content-Length is reported but no body bytes are read.
  std::optional<Response> read_response_to_head(std::chrono::milliseconds timeout = 10s);
  /// True if the server closes the connection (EOF or reset) within `timeout` with no more bytes.
  bool closed_by_peer(std::chrono::milliseconds timeout = 5s);
  /// True if some bytes are ready to read right now (nothing is consumed).
  bool readable_now();
  void shutdown_write();
  void close() { fd_.reset(); }
  int fd() const { return fd_.get(); }

 private:
  explicit Client(Fd fd) : fd_(std::move(fd)) {}
  std::optional<Response> read(std::chrono::milliseconds timeout, bool head_only);
  /// Reads more bytes into buffer_; false on EOF, error or timeout.
  bool fill(std::chrono::steady_clock::time_point deadline);

  Fd fd_;
  std::string buffer_;
};

/// "GET <path> HTTP/1.1" with a Host header, and `extra` header lines (each ending in \r\n).
std::string get_request(std::string_view path, std::string_view extra = "");
/// "POST <path>" with a Content-Length body.
std::string post_request(std::string_view path, std::string_view body);

/// Descriptors of this process that are not files or sockets ("anon_inode:[eventpoll]",
/// "[eventfd]", "[timerfd]", "[io_uring]"): what an event loop holds. A server that stops cleanly
/// gives back every one it opened.
int anon_inode_fds();

/// Connects, sends one GET, reads the response.
std::optional<Response> get(std::uint16_t port, std::string_view path);

}  // namespace cm::test
