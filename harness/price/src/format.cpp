#include "format.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

namespace cm::price {

std::string num(double v, int decimals) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  const std::string_view s = buf;
  const std::size_t start = s[0] == '-' ? 1 : 0;
  const std::size_t int_end = std::min(s.find('.'), s.size());
  std::string out(s.substr(0, start));
  for (std::size_t i = start; i < int_end; ++i) {
    out.push_back(s[i]);
    const std::size_t left = int_end - i - 1;  // digits still to come
    if (left > 0 && left % 3 == 0) out.push_back(',');
  }
  out.append(s.substr(int_end));
  return out;
}

std::string pct(double v, int decimals) {
  return num(v * 100, decimals) + "%";
}

}  // namespace cm::price
