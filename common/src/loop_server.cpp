// loop_server.cpp -- start and stop for every async model.

#include "cm/loop_server.hpp"

#include "cm/net.hpp"

namespace cm {

LoopServer::LoopServer(ServerOptions options, std::string_view model, bool nonblocking)
    : state_(std::move(options), model, default_loop_threads()),
      model_(model),
      nonblocking_(nonblocking) {}

void LoopServer::start() {
  const ServerOptions& o = state_.options;
  Listeners listeners = open_listeners(o.host, o.port, o.threads, o.backlog, nonblocking_);
  for (Fd& socket : listeners.sockets)
    add_loop(std::move(socket));
  port_ = listeners.port;
  std::lock_guard lock(stop_mutex_);
  started_ = true;  // first: if a thread cannot be made, stop() still joins those that run
  // NOTE: each loop was set up on this thread; std::thread's start hands it over to its own.
  for (std::size_t i = 0; i < listeners.sockets.size(); ++i) {
    threads_.emplace_back([this, i] { run_loop(i); });
  }
}

void LoopServer::stop() {
  std::lock_guard lock(stop_mutex_);
  if (!started_ || stopped_) return;
  state_.sleeper.interrupt();  // a Block in a pool or on a thread, or a sleep on a loop, ends now
  state_.database.interrupt();  // a thread waiting for a database connection answers 503 now
  for (std::size_t i = 0; i < threads_.size(); ++i)
    stop_loop(i);
  for (auto& thread : threads_)
    thread.join();
  stopped();
  state_.call_threads.join_all();  // their resume hooks ran: they are only returning now
  stopped_ = true;
}

void LoopServer::drain() {
  std::lock_guard lock(stop_mutex_);
  if (!started_ || stopped_) return;
  state_.sessions.draining.store(true, std::memory_order_release);
  for (std::size_t i = 0; i < threads_.size(); ++i)
    drain_loop(i);
}

}  // namespace cm
