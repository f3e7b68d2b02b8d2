#pragma once
/// \file request_parser.hpp
/// An incremental HTTP/1.x request parser over llhttp. Sans-I/O: it is fed bytes and says what it
/// has. It stops after each complete request, so pipelined requests are answered one at a time.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cm/limits.hpp"
#include "cm/request.hpp"

namespace cm {

/// Why a request could not be accepted; each maps to a status the connection answers, then closes.
struct ParseError {
  int status = 400;    ///< 400 malformed, 431 head too large, 413 body too large
  std::string reason;  ///< one line, for the response body
};

/// Parses one request after another from a byte stream.
///
/// Usage: `feed()` bytes; it returns how many it consumed. When `state()` is `complete`, take the
/// request with `take()`, which also readies the parser for the next one; feed the unconsumed rest
/// again. When `state()` is `failed`, answer `error()` and close.
class RequestParser {
 public:
  enum class State {
    idle,      ///< no byte of the next request yet
    head,      ///< inside the request line or headers
    expect,    ///< an HTTP/1.1 head with `Expect` is done, its body unread: see head(), then
               ///< continue_body() (or answer without reading it, and close)
    body,      ///< headers done, reading the body
    complete,  ///< a whole request is ready: take() it
    failed,    ///< see error(); the connection must be closed
  };

  explicit RequestParser(Limits limits = {});
  ~RequestParser();
  RequestParser(RequestParser&&) noexcept;
  RequestParser& operator=(RequestParser&&) noexcept;
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  /// Consumes bytes up to the end of the current request (or all of them). Returns the count
  /// consumed; bytes after a complete request are left for the next call. Feeding in `complete`
  /// or `failed` state consumes nothing.
  std::size_t feed(std::string_view bytes);

  State state() const { return state_; }
  /// The request line and headers so far; complete in `expect` state (the body is still unread).
  const Request& head() const;
  /// In `expect` state: goes on to read the body (feed() it as usual).
  void continue_body();
  /// Whether the head in `expect` state announced a body (Content-Length > 0, or chunked).
  bool body_follows() const;
  /// The finished request; valid in `complete` state. Resets the parser for the next request.
  Request take();
  /// Why parsing failed; valid in `failed` state.
  const ParseError& error() const { return error_; }
  /// True if the finished request asked to switch protocols (Upgrade/CONNECT): the connection must
  /// close after the response, because the bytes that follow are not HTTP/1.
  bool upgrade() const { return upgrade_; }

 private:
  struct Impl;
  void fail(int status, std::string reason);
  std::size_t feed_head(std::string_view bytes);
  std::size_t feed_body(std::string_view bytes);
  /// Why a field line of these head bytes is malformed in a way llhttp 8 lets through (it starts
  /// with whitespace: obs-fold; or with ':': an empty name), or null. Follows lines across feeds.
  const char* bad_field_line(std::string_view head);

  std::unique_ptr<Impl> impl_;
  Limits limits_;
  State state_ = State::idle;
  std::size_t head_bytes_ = 0;
  bool line_start_ = false;  ///< the last head byte fed was an LF: the next one starts a line
  bool upgrade_ = false;
  ParseError error_;
};

}  // namespace cm
