#pragma once
/// \file server.hpp
/// The libuv model's server, with what a test needs to see that stopping left nothing behind.

#include <cstddef>
#include <memory>
#include <vector>

#include "cm/server.hpp"

namespace cm::libuv_callbacks {

/// How one event loop ended, as its own thread saw it after uv_run() returned.
struct LoopReport {
  int close_status = -1;         ///< uv_loop_close()'s result: 0 when no handle or request was left
  std::size_t handles_left = 0;  ///< handles uv_walk() still found before uv_loop_close()
};

/// A cm::Server that also reports how its loops closed.
class LibuvServer : public Server {
 public:
  /// One report per loop once stop() has returned; empty before.
  virtual std::vector<LoopReport> loop_reports() const = 0;
};

/// Constructs (does not start) a libuv server; cm::models::make_libuv_callbacks returns the same.
std::unique_ptr<LibuvServer> make_server(const ServerOptions& options);

}  // namespace cm::libuv_callbacks
