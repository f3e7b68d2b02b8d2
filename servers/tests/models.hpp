#pragma once
/// \file models.hpp
/// The names of the models this build has, for the test suites that run once per model.

#include <algorithm>
#include <string>
#include <vector>

#include "cm/registry.hpp"
#include "cm/server.hpp"

namespace cm::test {

/// Every built model's name, in the registry's order (gtest's ValuesIn takes it).
inline std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& m : built_models())
    names.emplace_back(m.name);
  return names;
}

/// Every built model, then each async one again as "MODEL+wheel": its waits in the timer wheel
/// (ServerOptions::timers, `--timers wheel`), for the suites that must hold either way.
inline std::vector<std::string> model_names_and_wheels() {
  std::vector<std::string> names = model_names();
  for (const auto& m : built_models())
    if (m.name != "blocking") names.push_back(std::string(m.name) + "+wheel");
  return names;
}
/// The model a "MODEL" or "MODEL+wheel" parameter names.
inline std::string model_of(const std::string& param) { return param.substr(0, param.find('+')); }
/// The timers a "MODEL" or "MODEL+wheel" parameter asks for.
inline Timers timers_of(const std::string& param) {
  return param.ends_with("+wheel") ? Timers::wheel : Timers::model;
}
/// A parameter as gtest may name it: "asio_coro+wheel" -> "asio_coro_wheel".
inline std::string test_name_of(std::string param) {
  std::replace(param.begin(), param.end(), '+', '_');
  return param;
}

}  // namespace cm::test
