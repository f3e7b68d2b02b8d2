// registry.cpp -- the table of built models, generated from cmake/cm_models.cmake.

#include "cm/registry.hpp"

#include <array>
#include <stdexcept>
#include <vector>

// Declare every registered factory: cm::models::make_<name>.
#define CM_MODEL(name, description) \
  namespace cm::models {            \
  std::unique_ptr<Server> make_##name(const ServerOptions&); \
  }
#include "registered_models.inc"
#undef CM_MODEL

namespace cm {
namespace {

const std::vector<ModelInfo> registered = {
#define CM_MODEL(name, description) ModelInfo{#name, description, &cm::models::make_##name},
#include "registered_models.inc"
#undef CM_MODEL
};

/// Every model the project has, built here or not: to tell "unknown" from "not built".
constexpr std::array<std::string_view, 5> known = {"blocking", "asio_coro", "asio_coro_uring",
                                                   "libuv_callbacks", "uring_coro"};

std::string built_list() {
  std::string list;
  for (const auto& m : registered) list += (list.empty() ? "" : ", ") + std::string(m.name);
  return list;
}

}  // namespace

std::span<const ModelInfo> built_models() { return registered; }

std::unique_ptr<Server> make_server(std::string_view model, const ServerOptions& options) {
  for (const auto& m : registered) {
    if (m.name == model) return m.make(options);
  }
  for (auto name : known) {
    if (name == model) {
      throw std::invalid_argument("model '" + std::string(model) +
                                  "' was not built here (its library was missing when the build "
                                  "was configured; built: " + built_list() + ")");
    }
  }
  throw std::invalid_argument("unknown model '" + std::string(model) + "' (built: " +
                              built_list() + ")");
}

}  // namespace cm
