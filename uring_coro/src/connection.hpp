#pragma once
/// \file connection.hpp
/// One connection served by one coroutine on one ring, from accept to close.

#include <atomic>
#include <cstddef>
#include <string_view>

#include "cm/fd.hpp"
#include "cm/server.hpp"
#include "cm/uring/pool.hpp"
#include "cm/uring/ring.hpp"
#include "cm/uring/task.hpp"
#include "cm/work.hpp"

namespace cm::uring_coro {

/// What a connection's coroutine uses of its loop and its server. All of it outlives the task
/// (the loop joins every task before its ring, pool and server go).
struct Context {
  uring::Ring& ring;               ///< the ring of this loop; every operation goes through it
  uring::Pool& pool;               ///< the bounded pool `Block` goes to
  Sleeper& sleeper;                ///< interrupted by stop(): cuts a sleep on a pool thread short
  const ServerOptions& options;    ///< header_timeout, wait_mode, offload
  std::string_view server_name;    ///< "cm-uring_coro"
  std::atomic<std::size_t>& open;  ///< connections held; decremented when this one is closed
};

/// Serves `fd` until the client closes it, a response ends it, the header timeout passes, or the
/// ring is cancelled (the server stops); then closes it through the ring.
uring::Task<void> serve_connection(Context& context, Fd fd);

}  // namespace cm::uring_coro
