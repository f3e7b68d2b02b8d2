// server.cpp -- small pieces of the server contract.

#include "cm/server.hpp"

#include <sched.h>

#include <thread>

namespace cm {

unsigned default_loop_threads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<unsigned>(n);
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw ? hw : 1;
}

std::string server_header(std::string_view model) { return "cm-" + std::string(model); }

std::string_view to_string(WaitMode mode) { return mode == WaitMode::timer ? "timer" : "sleep"; }

std::string_view to_string(Timers timers) { return timers == Timers::model ? "model" : "wheel"; }

std::string_view to_string(Offload offload) {
  switch (offload) {
    case Offload::standard: return "standard";
    case Offload::inline_: return "inline";
    case Offload::pool: return "pool";
    case Offload::thread: return "thread";
  }
  return "?";
}

}  // namespace cm
