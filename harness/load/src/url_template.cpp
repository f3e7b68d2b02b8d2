// url_template.cpp -- parsing the target URL and deriving what a correct answer looks like.

#include "url_template.hpp"

#include <charconv>
#include <stdexcept>

namespace cm::load {
namespace {

constexpr std::string_view kMs = "{ms}";

[[noreturn]] void bad(std::string_view url, std::string_view why) {
  throw std::invalid_argument("bad URL '" + std::string(url) + "': " + std::string(why));
}

}  // namespace

UrlTemplate UrlTemplate::parse(std::string_view url) {
  constexpr std::string_view scheme = "http://";
  if (!url.starts_with(scheme)) bad(url, "only http:// URLs are supported");
  std::string_view rest = url.substr(scheme.size());
  std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "/" : rest.substr(slash);
  if (authority.empty()) bad(url, "no host");
  if (authority.find('@') != std::string_view::npos) bad(url, "userinfo is not supported");
  if (path.find('#') != std::string_view::npos) bad(url, "a fragment has no place in a request");
  for (char c : path) {
    if (c <= ' ' || c == 0x7f) bad(url, "the path holds a space or a control character");
  }

  UrlTemplate t;
  std::size_t colon = authority.rfind(':');
  t.host = std::string(authority.substr(0, colon));
  if (colon != std::string_view::npos) {
    std::string_view digits = authority.substr(colon + 1);
    unsigned port = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size() || port == 0 ||
        port > 65535)
      bad(url, "the port must be a number in 1..65535");
    t.port = static_cast<std::uint16_t>(port);
  }
  if (t.host.empty()) bad(url, "no host");

  std::size_t at = path.find(kMs);
  if (at == std::string_view::npos) {
    t.path_prefix = std::string(path);
  } else {
    if (path.find(kMs, at + kMs.size()) != std::string_view::npos) bad(url, "{ms} appears twice");
    t.has_ms = true;
    t.path_prefix = std::string(path.substr(0, at));
    t.path_suffix = std::string(path.substr(at + kMs.size()));
  }
  if (t.path_prefix.find_first_of("{}") != std::string::npos ||
      t.path_suffix.find_first_of("{}") != std::string::npos)
    bad(url, "the only placeholder is {ms}");
  return t;
}

std::string UrlTemplate::path(std::uint32_t ms) const {
  if (!has_ms) return path_prefix;
  return path_prefix + std::to_string(ms) + path_suffix;
}

std::string UrlTemplate::authority() const {
  return host + ":" + std::to_string(port);
}

std::optional<UrlTemplate::FixedNumber> UrlTemplate::fixed_number() const {
  if (has_ms) return std::nullopt;
  for (std::string_view kind : {"delay", "block", "cpu"}) {
    // "/" kind "/" digits, compared piecewise (GCC 12 warns falsely on "/" + std::string + "/").
    std::string_view p = path_prefix;
    if (p.size() < kind.size() + 2 || p[0] != '/' || p.substr(1, kind.size()) != kind ||
        p[kind.size() + 1] != '/')
      continue;
    std::string_view digits = p.substr(kind.size() + 2);
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size())
      return std::nullopt;
    return FixedNumber{std::string(kind), value};
  }
  return std::nullopt;
}

Expectation default_expectation(const UrlTemplate& url) {
  Expectation e;
  if (url.has_ms) {
    e.body_is_delay = true;
    e.min_latency_is_delay = true;
  } else if (auto n = url.fixed_number()) {
    e.body = std::to_string(n->value);  // "/delay/007" is answered "7"
    if (n->kind != "cpu") e.min_latency_ms = n->value;
  } else if (url.path_prefix == "/plaintext") {
    e.body = "Hello, World!";
  }
  return e;
}

}  // namespace cm::load
