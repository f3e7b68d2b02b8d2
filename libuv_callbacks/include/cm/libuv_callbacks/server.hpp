#pragma once
/// \file server.hpp
/// The libuv model's server, with what a test needs to see that stopping left nothing behind.

#include <memory>
#include <vector>

#include "cm/loop_server.hpp"

namespace cm::libuv_callbacks {

/// How one event loop ended: uv_loop_close()'s result (0: no handle or request was left) and the
/// handles uv_walk() still found before it.
struct LoopReport {
  int close_status = -1;
  std::size_t handles_left = 0;
};

/// A cm::Server that also reports how its loops closed: one report per loop once stopped.
class LibuvServer : public LoopServer {
 public:
  using LoopServer::LoopServer;
  virtual std::vector<LoopReport> loop_reports() const = 0;
};

/// Constructs (does not start) a libuv server; cm::models::make_libuv_callbacks returns the same.
std::unique_ptr<LibuvServer> make_server(const ServerOptions& options);

}  // namespace cm::libuv_callbacks
