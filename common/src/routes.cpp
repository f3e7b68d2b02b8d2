// routes.cpp -- the route spec of DESIGN.md. Pure: no clock, no I/O, no state between requests.

#include "cm/routes.hpp"

#include <strings.h>

#include <algorithm>
#include <cctype>
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
constexpr std::string_view allow_get = "GET, HEAD, OPTIONS";
constexpr std::string_view allow_post = "POST, OPTIONS";
constexpr std::string_view allow_any = "GET, HEAD, POST, OPTIONS";  // what `OPTIONS *` answers

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

/// RFC 3986's unreserved and sub-delims characters but ',' (a list of hosts is not one host).
bool reg_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("-._~!$&'()*+;=%").find(c) != std::string_view::npos;
}

/// The host of an authority, without its port ("h:8080" -> "h", "[::1]:80" -> "[::1]").
std::string_view host_part(std::string_view authority) {
  if (authority.starts_with('[')) return authority.substr(0, authority.find(']') + 1);
  return authority.substr(0, authority.find(':'));
}

/// The authority of an absolute-form target ("http://h:8080/x" -> "h:8080"), or nothing.
std::optional<std::string_view> target_authority(std::string_view target) {
  for (std::string_view scheme : {"http://", "https://"}) {
    if (target.size() >= scheme.size() && iequal(target.substr(0, scheme.size()), scheme)) {
      const std::string_view rest = target.substr(scheme.size());
      return rest.substr(0, rest.find_first_of("/?#"));
    }
  }
  return std::nullopt;
}

Reply method_not_allowed(std::string_view allow) {
  Reply r = text(405, "method not allowed\n");
  r.headers.emplace_back("Allow", std::string(allow));
  return r;
}

/// The routes that take a number: /delay/{ms}, /block/{ms}, /cpu/{us}, /db/sleep/{ms} (from 0
/// to `max`) and /db/row/{id} (from 1).
template <typename MakePlan>
Plan numeric_route(const Request& req, std::string_view arg, std::uint64_t max,
                   std::string_view what, MakePlan make, std::uint64_t min = 0) {
  if (!get_or_head(req)) return Now{method_not_allowed(allow_get)};
  const auto value = parse_bounded(arg, max);
  if (!value || *value < min) {
    return Now{text(400, std::string(what) + " must be decimal digits from " +
                             std::to_string(min) + " to " + std::to_string(max) + "\n")};
  }
  return make(*value, text(200, std::to_string(*value)));
}

/// A Query for the database: its reply is the database's (a 503 until it answers).
Plan query(DbCall::Kind kind, std::uint64_t value) {
  return Query{DbCall{kind, static_cast<int>(value)}, database_unavailable()};
}

}  // namespace

Plan plan(const Request& req) {
  const std::string_view path = req.path();
  constexpr std::string_view delay = "/delay/", block = "/block/", cpu = "/cpu/";
  constexpr std::string_view db_sleep = "/db/sleep/", db_row = "/db/row/";

  if (req.method == "OPTIONS") {  // RFC 9110 9.3.7: what the target allows, with no content
    const std::string_view allow = path == "*" ? allow_any : allowed(path);
    if (allow.empty()) return Now{text(404, "not found\n")};
    Reply r = text(200, "");
    r.headers.emplace_back("Allow", std::string(allow));
    return Now{std::move(r)};
  }
  if (path == "/plaintext") {
    if (!get_or_head(req)) return Now{method_not_allowed(allow_get)};
    return Now{text(200, "Hello, World!")};
  }
  if (path == "/echo") {
    if (req.method != "POST") return Now{method_not_allowed(allow_post)};
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
  if (path.starts_with(db_sleep)) {
    return numeric_route(req, path.substr(db_sleep.size()), max_db_sleep_ms, "sleep in ms",
                         [](std::uint64_t ms, Reply) { return query(DbCall::Kind::sleep, ms); });
  }
  if (path.starts_with(db_row)) {
    return numeric_route(
        req, path.substr(db_row.size()), world_rows, "row id",
        [](std::uint64_t id, Reply) { return query(DbCall::Kind::row, id); }, 1);
  }
  if (path == "/delay" || path == "/block" || path == "/cpu" || path == "/db/sleep" ||
      path == "/db/row") {
    return Now{text(
        400, std::string(path.substr(1)) + " needs a number: " + std::string(path) + "/{n}\n")};
  }
  return Now{text(404, "not found\n")};
}

std::string_view allowed(std::string_view path) {
  if (path == "/plaintext") return allow_get;
  if (path == "/echo") return allow_post;
  for (std::string_view route : {"/delay", "/block", "/cpu", "/db/sleep", "/db/row"}) {
    if (path.starts_with(route) && (path.size() == route.size() || path[route.size()] == '/')) {
      return allow_get;
    }
  }
  return {};
}

bool valid_host(std::string_view host) {
  std::string_view name = host;
  if (host.starts_with('[')) {  // IP-literal: "[::1]", "[::1]:8080"
    const std::size_t close = host.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    for (char c : host.substr(1, close - 1)) {
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.') return false;
    }
    name = {};
    host.remove_prefix(close + 1);
    if (!host.empty() && host.front() != ':') return false;
  } else {
    name = host.substr(0, host.find(':'));
    host.remove_prefix(name.size());
    if (name.empty() || !std::all_of(name.begin(), name.end(), reg_name_char)) return false;
  }
  if (host.empty()) return true;  // no port
  const std::string_view port = host.substr(1);
  return port.size() <= 5 && std::all_of(port.begin(), port.end(), [](char c) {
           return c >= '0' && c <= '9';
         });
}

std::optional<Reply> refuse_head(const Request& req) {
  if (req.version_major != 1) {  // a higher HTTP/1.x minor version is answered as HTTP/1.1
    Reply r = protocol_error(505, "HTTP/" + std::to_string(req.version_major) + "." +
                                      std::to_string(req.version_minor) +
                                      " is not supported: HTTP/1.0 and HTTP/1.1 are");
    return r;
  }
  if (req.method == "CONNECT") return protocol_error(501, "CONNECT: this server is no proxy");
  if (req.target == "*" && req.method != "OPTIONS") {
    return protocol_error(400, "the asterisk-form target is for OPTIONS only");
  }
  const std::size_t hosts = req.count("Host");
  if (hosts > 1) return protocol_error(400, "a request has at most one Host header");
  const std::string_view host = req.header("Host");
  if (hosts == 1 && !valid_host(host)) {
    return protocol_error(400, "Host must be a host and an optional port (RFC 3986), once");
  }
  const auto authority = target_authority(req.target);
  if (authority && hosts == 1 && !iequal(host_part(*authority), host_part(host))) {
    return protocol_error(400, "the target's host and the Host header disagree");
  }
  if (req.version_minor >= 1) {
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

Reply database_unavailable() {
  Reply r = text(503, "the database cannot answer now, retry later\n");
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
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

}  // namespace cm
