#pragma once
/// \file validate.hpp
/// The checks a server passes before cm-price times it, after HttpArena's validation: 32
/// overlapping requests with 32 different delays, each answered with its own value and never
/// early; /delay/0 answered at once with 0; Content-Type text/plain.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace cm::price {

/// One HTTP response as a test client saw it.
struct HttpResponse {
  int status = 0;            ///< 0 when no response was read
  std::string content_type;  ///< the Content-Type header value, as sent
  std::string body;
  double latency_ms = 0;  ///< from the request written to the last byte read
  std::string error;      ///< set when the exchange failed (connect, timeout, parse)
};

/// GET `path` on 127.0.0.1:port over a fresh connection (closed after), waiting at most
/// `timeout`. Never throws: failures are in HttpResponse::error.
HttpResponse http_get(std::uint16_t port, const std::string& path,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30));

/// Which routes to check: the ones the server will be priced on.
struct ValidationPlan {
  bool plaintext = false;              ///< GET /plaintext -> 200 "Hello, World!" text/plain
  bool delay = false;                  ///< the 32 overlapping /delay/{ms} and /delay/0
  bool block = false;                  ///< the 32 overlapping /block/{ms}
  std::vector<unsigned> cpu_us;        ///< GET /cpu/N -> N
  unsigned overlapping = 32;           ///< requests sent at once
  unsigned min_ms = 10, max_ms = 250;  ///< the delays are drawn, all different, from this range
};

/// The outcome: ok, or the first reason to refuse the server.
struct Validation {
  bool ok = true;
  std::string failure;              ///< why it was refused ("/delay/37 answered 41", ...)
  std::vector<std::string> passed;  ///< what was checked, in words
};

/// Runs the plan against 127.0.0.1:port.
Validation validate_server(std::uint16_t port, const ValidationPlan& plan);

}  // namespace cm::price
