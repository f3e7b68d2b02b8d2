#pragma once
/// \file format.hpp
/// Numbers as the tables and notes print them.

#include <string>

namespace cm::price {

/// 1234567 -> "1,234,567"; `decimals` after the point; "-" for a value that is not finite.
std::string num(double v, int decimals = 0);

/// 0.974 -> "97.4%".
std::string pct(double v, int decimals = 1);

}  // namespace cm::price
