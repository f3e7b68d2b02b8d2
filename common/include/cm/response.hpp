#pragma once
/// \file response.hpp
/// Serialising a Reply into HTTP/1.1 bytes, with the headers every response carries.

#include <chrono>
#include <string>
#include <string_view>

#include "cm/routes.hpp"

namespace cm {

/// How the connection goes on after this response.
enum class Persistence {
  keep_alive,           ///< HTTP/1.1 default: no Connection header
  keep_alive_explicit,  ///< an HTTP/1.0 client asked for keep-alive: `Connection: keep-alive`
  close,                ///< `Connection: close`
};

/// The IMF-fixdate for `now` ("Sun, 06 Nov 1994 08:49:37 GMT"). Cached per thread and reformatted
/// only when the second changes, so the Date header costs a comparison per response.
std::string_view http_date(std::chrono::system_clock::time_point now);

/// Appends the whole response to `out`: status line, Server, Date, Content-Type, Content-Length,
/// the reply's own headers, Connection when needed, then the body (unless `with_body` is false:
/// the answer to a HEAD, whose Content-Length is still the body's).
void serialize(const Reply& reply, std::string_view server_name, Persistence persistence,
               std::chrono::system_clock::time_point now, std::string& out, bool with_body = true);

}  // namespace cm
