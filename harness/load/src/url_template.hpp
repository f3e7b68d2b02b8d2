#pragma once
/// \file url_template.hpp
/// The target of a run: `http://HOST[:PORT]/path`, where the path may hold `{ms}`, and what a
/// correct answer to it looks like (its body and the least time it may take).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cm::load {

/// A parsed URL. Throws std::invalid_argument from parse() with a one-line reason.
struct UrlTemplate {
  std::string host;         ///< as written ("127.0.0.1", "localhost")
  std::uint16_t port = 80;  ///< from the URL, 80 when absent
  std::string path_prefix;  ///< the path up to `{ms}` (the whole path when there is none)
  std::string path_suffix;  ///< the path after `{ms}`
  bool has_ms = false;      ///< the path holds `{ms}` (once; twice is an error)

  /// Parses "http://host:port/path". Only http, no userinfo, no fragment; the query is kept.
  static UrlTemplate parse(std::string_view url);

  /// The path with `{ms}` replaced by `ms` (unchanged when there is no `{ms}`).
  std::string path(std::uint32_t ms) const;
  /// "host:port", for the Host header.
  std::string authority() const;

  /// The number at the end of a fixed `/delay/N`, `/block/N` or `/cpu/N` path, with its kind
  /// ("delay", "block", "cpu"); nullopt for other paths and for `{ms}` templates.
  struct FixedNumber {
    std::string kind;
    std::uint64_t value = 0;
  };
  std::optional<FixedNumber> fixed_number() const;
};

/// What the answers are checked against when the user did not say (--expect-body,
/// --min-latency-ms): see the contract in README.md.
struct Expectation {
  /// Body every answer must carry; nullopt = unchecked; `body_is_delay` = the request's own {ms}.
  std::optional<std::string> body;
  bool body_is_delay = false;
  /// Least latency of a correct answer, in ms; `min_latency_is_delay` = the request's own {ms}.
  std::uint64_t min_latency_ms = 0;
  bool min_latency_is_delay = false;
};

/// The default expectation of a URL: {ms} -> body and min latency are the delay; /delay/N and
/// /block/N -> body N, at least N ms; /cpu/N -> body N; /plaintext -> "Hello, World!".
Expectation default_expectation(const UrlTemplate& url);

}  // namespace cm::load
