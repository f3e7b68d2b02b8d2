#pragma once
/// \file registry.hpp
/// The models that were built, by name. Generated from the cm_register_model() calls of the model
/// folders, so adding a model changes nothing here.

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "cm/server.hpp"

namespace cm {

/// A model that can be started.
struct ModelInfo {
  std::string_view name;         ///< as `--model` spells it
  std::string_view description;  ///< one line for --list-models
  std::unique_ptr<Server> (*make)(const ServerOptions&);  ///< constructs, does not start
};

/// Every model built into this binary, in registration order.
std::span<const ModelInfo> built_models();

/// Constructs a server of `model`. Throws std::invalid_argument with a one-line reason for an
/// unknown model, or a known one that was not built (its library was missing at configure time).
std::unique_ptr<Server> make_server(std::string_view model, const ServerOptions& options);

}  // namespace cm
