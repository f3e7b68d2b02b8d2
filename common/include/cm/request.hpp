#pragma once
/// \file request.hpp
/// One parsed HTTP/1.x request. It is per-request state: nothing about a request lives anywhere
/// else.

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cm {

/// A complete request, as the parser hands it over.
struct Request {
  std::string method;     ///< "GET", "POST", ...
  std::string target;     ///< request-target as sent ("/delay/7?x")
  int version_major = 1;  ///< 1 (any other is answered 505)
  int version_minor = 1;  ///< 0 or 1 (or higher: answered as 1.1)
  /// In order, names as sent; a trailer's fields are not among them.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;                                          ///< de-chunked
  bool keep_alive = true;  ///< what HTTP/1.0, 1.1 and `Connection` say about the connection

  /// The path the routes see: the target before '?', without the scheme and authority of an
  /// absolute-form target ("http://h/plaintext?x" -> "/plaintext").
  std::string_view path() const;
  /// Whether this is a HEAD request: routed as GET, answered without the body.
  bool head() const { return method == "HEAD"; }
  /// The first header with this name (case-insensitive), or empty.
  std::string_view header(std::string_view name) const;
  /// How many headers have this name (case-insensitive): an empty value counts.
  std::size_t count(std::string_view name) const;
};

}  // namespace cm
