#pragma once
/// \file test_server.hpp
/// A tiny HTTP server for cm-load's tests, correct or misbehaving on purpose. One thread, poll(),
/// answers `GET /delay/N` after N ms with body N (when correct) and `GET /plaintext` at once.
/// Requests are one at a time per connection (no pipelining), which is all cm-load sends.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace cm::load::test {

/// How the server answers.
enum class Behaviour {
  correct,             ///< after N ms, 200, body N
  early,               ///< at once: answers before the delay asked for
  wrong_body,          ///< after N ms, body N + 1
  shared_state,        ///< after N ms, body = the N of the last request parsed (any connection)
  wrong_status,        ///< after N ms, 500 with body N
  close_after_answer,  ///< correct, then closes the connection without saying so
  close_announced,     ///< correct with `Connection: close`, then closes (a legitimate close)
  silent,              ///< reads requests, never answers
  dribble,             ///< correct, but each answer is written a byte at a time
  /// correct, but answers nothing during the first 200 ms of every second since it started (a
  /// garbage collector's pause, a stalled disk): what arrives then waits for the stall's end
  stalls,
};

/// Behaviour::stalls: how long each stall lasts, once a second.
inline constexpr int kStallMs = 200;

/// Listens on 127.0.0.1, port 0, from construction to destruction.
class TestServer {
 public:
  /// `starve_every` k > 0: the k-th, 2k-th, ... connection accepted is read but never answered
  /// (whatever the behaviour), as a server that serves some clients and forgets others.
  explicit TestServer(Behaviour behaviour, unsigned starve_every = 0);
  ~TestServer();
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  /// The port it listens on.
  std::uint16_t port() const { return port_; }
  /// Answers written whole so far.
  std::uint64_t answered() const { return answered_.load(); }
  /// When each connection's first request arrived whole, in the order seen; steady_clock ns,
  /// which is CLOCK_MONOTONIC, the clock of Result::window_start_ns.
  std::vector<std::int64_t> first_requests_ns() const;

 private:
  void serve();

  Behaviour behaviour_;
  unsigned starve_every_;
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> answered_{0};
  mutable std::mutex first_requests_mutex_;
  std::vector<std::int64_t> first_requests_ns_;
  std::thread thread_;
};

}  // namespace cm::load::test
