#pragma once
/// \file loop_server.hpp
/// The shell every async model's server shares: one event loop per thread, each with its own
/// SO_REUSEPORT listening socket and its own connections, started and stopped in one place. A
/// model writes only its loop: how it sets one up, runs it, and makes it stop.

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cm/fd.hpp"
#include "cm/server.hpp"
#include "cm/server_state.hpp"

namespace cm {

/// A Server of `--threads` loops. A derived model's destructor must call stop() (the loops it
/// owns go before this base).
class LoopServer : public Server {
 public:
  /// `nonblocking`: whether the model's loop wants its listening sockets non-blocking.
  LoopServer(ServerOptions options, std::string_view model, bool nonblocking);

  /// Opens one listening socket per loop, add_loop() for each, then a thread per loop.
  void start() final;
  /// Interrupts every sleep, stop_loop() for each, joins their threads, stopped(), then joins the
  /// call threads. Idempotent, thread-safe.
  void stop() final;
  /// Marks the server draining, then drain_loop() for each loop.
  void drain() final;
  std::size_t requests_in_flight() const final { return state_.sessions.in_flight.load(); }
  std::uint16_t port() const final { return port_; }
  std::size_t open_connections() const final { return state_.open.load(); }
  std::string_view model() const final { return model_; }

 protected:
  /// On the starting thread: sets up the next loop around its listening socket. Throws
  /// std::system_error (ModelUnavailable when the machine refuses the model) on failure.
  virtual void add_loop(Fd listener) = 0;
  /// On loop `index`'s own thread: serves until the loop has stopped and released everything.
  virtual void run_loop(std::size_t index) = 0;
  /// From stop()'s thread: makes loop `index` close its listener and its connections and return.
  virtual void stop_loop(std::size_t index) = 0;
  /// From drain()'s thread: makes loop `index` close its listener, and close every connection that
  /// waits for a request (as if its header deadline had passed). The Session closes the others
  /// after their reply.
  virtual void drain_loop(std::size_t index) = 0;
  /// After every loop's thread was joined: join what the loops shared (an offload pool) and
  /// release what they held, so that stop() returns with every fd closed.
  virtual void stopped() {}

  ServerState state_;

 private:
  const std::string model_;
  const bool nonblocking_;
  std::uint16_t port_ = 0;
  std::vector<std::thread> threads_;
  std::mutex stop_mutex_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace cm
