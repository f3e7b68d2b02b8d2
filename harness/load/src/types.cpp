// types.cpp -- parsing --delay, adding error counts, and the --stagger offsets (types.hpp).

#include "types.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <string>
#include <system_error>

namespace cm::load {

DelayRange DelayRange::parse(std::string_view text) {
  auto number = [&](std::string_view s) {
    std::uint32_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || v > 60'000)
      throw std::invalid_argument("bad --delay '" + std::string(text) +
                                  "': want MS or MIN:MAX, whole milliseconds in 0..60000");
    return v;
  };
  std::size_t colon = text.find(':');
  DelayRange d;
  d.min_ms = number(text.substr(0, colon));
  d.max_ms = colon == std::string_view::npos ? d.min_ms : number(text.substr(colon + 1));
  if (d.min_ms > d.max_ms)
    throw std::invalid_argument("bad --delay '" + std::string(text) + "': MIN is above MAX");
  return d;
}

void ErrorCounts::add(const ErrorCounts& o) {
  connect += o.connect;
  reset += o.reset;
  timeout += o.timeout;
  status += o.status;
  body += o.body;
  early += o.early;
}

std::int64_t first_request_offset_ns(unsigned slot, unsigned connections,
                                     std::int64_t spread_ns) noexcept {
  if (connections == 0 || spread_ns <= 0) return 0;
  const std::uint64_t n = connections, spread = static_cast<std::uint64_t>(spread_ns);
  const std::uint64_t i = std::min<std::uint64_t>(slot, n - 1);
  // i * spread / n, exactly, without forming i * spread (which can pass 2^64): with
  // spread = q n + r, it is i q + i r / n, and i r < n^2 <= 2^64.
  return static_cast<std::int64_t>(i * (spread / n) + i * (spread % n) / n);
}

}  // namespace cm::load
