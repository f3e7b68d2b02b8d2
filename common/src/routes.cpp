// routes.cpp -- the route spec of DESIGN.md. Pure: no clock, no I/O, no state between requests.

#include "cm/routes.hpp"

#include <strings.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

#include "cm/limits.hpp"

namespace cm {
namespace {

Reply text(int status, std::string body) {
  Reply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

/// `{n}` of a route: decimal digits only, at most `max`. Leading zeros are fine ("007" is 7);
/// a sign, a point, letters, an empty string or an overflow are not.
std::optional<std::uint64_t> parse_bounded(std::string_view digits, std::uint64_t max) {
  if (digits.empty() || digits.size() > 20) return std::nullopt;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc{} || end != digits.data() + digits.size() || value > max) return std::nullopt;
  return value;
}

/// GET routes answer HEAD too (RFC 9110 9.3.2): the same reply, its body left out on the wire.
bool get_or_head(const Request& req) { return req.method == "GET" || req.method == "HEAD"; }
constexpr std::string_view allow_get = "GET, HEAD";

Reply method_not_allowed(std::string_view allow) {
  Reply r = text(405, "method not allowed\n");
  r.headers.emplace_back("Allow", std::string(allow));
  return r;
}

/// The routes that take a number: /delay/{ms}, /block/{ms}, /cpu/{us}.
template <typename MakePlan>
Plan numeric_route(const Request& req, std::string_view arg, std::uint64_t max,
                   std::string_view what, MakePlan make) {
  if (!get_or_head(req)) return Now{method_not_allowed(allow_get)};
  const auto value = parse_bounded(arg, max);
  if (!value) {
    return Now{text(400, std::string(what) + " must be decimal digits from 0 to " +
                             std::to_string(max) + "\n")};
  }
  return make(*value, text(200, std::to_string(*value)));
}

}  // namespace

Plan plan(const Request& req) {
  const std::string_view path = req.path();
  constexpr std::string_view delay = "/delay/", block = "/block/", cpu = "/cpu/";

  if (path == "/plaintext") {
    if (!get_or_head(req)) return Now{method_not_allowed(allow_get)};
    return Now{text(200, "Hello, World!")};
  }
  if (path == "/echo") {
    if (req.method != "POST") return Now{method_not_allowed("POST")};
    Reply r = text(200, req.body);
    r.content_type = "application/octet-stream";
    return Now{std::move(r)};
  }
  if (path.starts_with(delay)) {
    return numeric_route(req, path.substr(delay.size()), max_delay_ms, "delay in ms",
                         [](std::uint64_t ms, Reply r) -> Plan {
                           return Wait{std::chrono::milliseconds(ms), std::move(r)};
                         });
  }
  if (path.starts_with(block)) {
    return numeric_route(req, path.substr(block.size()), max_delay_ms, "block in ms",
                         [](std::uint64_t ms, Reply r) -> Plan {
                           return Block{std::chrono::milliseconds(ms), std::move(r)};
                         });
  }
  if (path.starts_with(cpu)) {
    return numeric_route(req, path.substr(cpu.size()), max_cpu_us, "cpu in us",
                         [](std::uint64_t us, Reply r) -> Plan {
                           return Compute{std::chrono::microseconds(us), std::move(r)};
                         });
  }
  if (path == "/delay" || path == "/block" || path == "/cpu") {
    return Now{text(
        400, std::string(path.substr(1)) + " needs a number: " + std::string(path) + "/{n}\n")};
  }
  return Now{text(404, "not found\n")};
}

std::optional<Reply> refuse_head(const Request& req) {
  if (req.version_major != 1 || req.version_minor > 1) {
    Reply r = protocol_error(505, "HTTP/" + std::to_string(req.version_major) + "." +
                                      std::to_string(req.version_minor) +
                                      " is not supported: HTTP/1.0 and HTTP/1.1 are");
    return r;
  }
  if (req.version_minor == 1) {
    const auto hosts = std::count_if(req.headers.begin(), req.headers.end(), [](const auto& h) {
      return h.first.size() == 4 && ::strncasecmp(h.first.data(), "Host", 4) == 0;
    });
    if (hosts != 1) return protocol_error(400, "an HTTP/1.1 request needs exactly one Host header");
    const std::string_view expect = req.header("Expect");
    if (!expect.empty() &&
        !(expect.size() == 12 && ::strncasecmp(expect.data(), "100-continue", 12) == 0)) {
      return protocol_error(417, "the only expectation this server meets is 100-continue");
    }
  }
  return std::nullopt;
}

Reply continue_reply() {
  Reply r;
  r.status = 100;
  return r;
}

const Reply& reply_of(const Plan& p) {
  return std::visit([](const auto& step) -> const Reply& { return step.reply; }, p);
}
Reply& reply_of(Plan& p) {
  return std::visit([](auto& step) -> Reply& { return step.reply; }, p);
}

Reply service_unavailable() {
  Reply r = text(503, "offload pool is full, retry later\n");
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

Reply request_timeout() {
  Reply r = text(408, "request head not received in time\n");
  r.close = true;
  return r;
}

Reply protocol_error(int status, std::string reason) {
  Reply r = text(status, std::move(reason) + "\n");
  r.close = true;
  return r;
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

}  // namespace cm
