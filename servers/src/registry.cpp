// registry.cpp -- the table of built models, generated from cmake/cm_models.cmake.

#include "cm/registry.hpp"

#include <stdexcept>
#include <vector>

// Declare every registered factory: cm::models::make_<name>.
#define CM_MODEL(name, description)                          \
  namespace cm::models {                                     \
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

/// The models this configure left out, and why: to tell "unknown" from "not built".
struct LeftOut {
  std::string_view name;
  std::string_view reason;
};
const std::vector<LeftOut> left_out = {
#define CM_LEFT_OUT(name, reason) LeftOut{#name, reason},
#include "left_out_models.inc"
#undef CM_LEFT_OUT
};

std::string built_list() {
  std::string list;
  for (const auto& m : registered)
    list += (list.empty() ? "" : ", ") + std::string(m.name);
  return list;
}

}  // namespace

std::span<const ModelInfo> built_models() { return registered; }

std::unique_ptr<Server> make_server(std::string_view model, const ServerOptions& options) {
  for (const auto& m : registered) {
    if (m.name == model) return m.make(options);
  }
  for (const auto& m : left_out) {
    if (m.name == model) {
      throw std::invalid_argument("model '" + std::string(model) + "' was not built here (" +
                                  std::string(m.reason) + "; built: " + built_list() + ")");
    }
  }
  throw std::invalid_argument("unknown model '" + std::string(model) + "' (built: " + built_list() +
                              ")");
}

}  // namespace cm
