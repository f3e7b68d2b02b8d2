#pragma once
/// \file models.hpp
/// The names of the models this build has, for the test suites that run once per model.

#include <string>
#include <vector>

#include "cm/registry.hpp"

namespace cm::test {

/// Every built model's name, in the registry's order (gtest's ValuesIn takes it).
inline std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& m : built_models())
    names.emplace_back(m.name);
  return names;
}

}  // namespace cm::test
