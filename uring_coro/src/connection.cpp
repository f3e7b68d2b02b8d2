// connection.cpp -- the io_uring model's connection: one coroutine reads, executes the plan,
// writes; repeat.
//
// Every co_await below suspends this coroutine and hands the ring one SQE; the thread goes on
// with the other connections. A waiting request is this suspended frame and an IORING_OP_TIMEOUT
// in the kernel -- no thread, no timer of our own. A connection's error is a -errno value that
// ends this coroutine only.

#include "connection.hpp"

#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <span>
#include <string>

#include "cm/limits.hpp"
#include "cm/net.hpp"
#include "cm/session.hpp"

namespace cm::uring_coro {
namespace {

using Clock = std::chrono::steady_clock;
using uring::Task;

/// How a plan's work ended.
enum class Outcome {
  done,     ///< answer with the plan's reply
  refused,  ///< the pool is full: answer 503
  stopped,  ///< the server stops: answer nothing
};

Task<bool> send_all(uring::Ring& ring, int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const int n = co_await uring::Send(ring, fd, bytes);
    if (n <= 0) co_return false;  // the client is gone, or the ring is stopping
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  co_return true;
}

/// Shut down the write side, then read and discard what the client still sends (bounded), so
/// the close does not reset the connection under a response the client has not read yet.
Task<void> linger(uring::Ring& ring, int fd) {
  ::shutdown(fd, SHUT_WR);
  std::array<char, 4096> buffer;  // in this frame, which outlives each RecvFor that fills it
  const auto until = Clock::now() + linger_timeout;
  std::size_t drained = 0;
  while (drained < linger_max_bytes && Clock::now() < until) {
    const int n = co_await uring::RecvFor(ring, fd, buffer, until - Clock::now());
    if (n <= 0) co_return;  // the client closed, the linger time passed, or the ring stops
    drained += static_cast<std::size_t>(n);
  }
}

/// Wait: an IORING_OP_TIMEOUT whose awaiter lives in this frame. The loop serves others meanwhile.
Task<Outcome> timer(uring::Ring& ring, std::chrono::milliseconds duration) {
  const auto until = Clock::now() + duration;
  do {
    if (co_await uring::Timeout(ring, until) != -ETIME) {
      co_return Outcome::stopped;  // -ECANCELED: cancel_all(), the loop stops
    }
  } while (Clock::now() < until);  // a kernel timer does not fire early; this makes sure of it
  co_return Outcome::done;
}

/// Wait with --wait-mode sleep, the anti-pattern: the loop's thread sleeps, and every other
/// connection of this ring waits with it.
Task<Outcome> sleep_on_loop(Sleeper& sleeper, std::chrono::milliseconds duration) {
  co_return sleeper.sleep_for(duration) ? Outcome::done : Outcome::stopped;
}

/// Block or Compute (or Now) on the loop's own thread.
Task<Outcome> on_loop(const Plan& plan, Sleeper& sleeper) {
  co_return perform(plan, sleeper) ? Outcome::done : Outcome::stopped;
}

/// On a worker of the bounded pool; the coroutine comes back on this ring (its eventfd).
Task<Outcome> on_pool(Context& context, const Plan& plan) {
  bool finished = false;
  const bool admitted =
      co_await context.pool.run(context.ring, [&] { finished = perform(plan, context.sleeper); });
  if (!admitted) co_return Outcome::refused;
  co_return finished ? Outcome::done : Outcome::stopped;
}

/// On a new thread per call (aeronet's deferWork); back on this ring the same way.
Task<Outcome> on_new_thread(Context& context, const Plan& plan) {
  bool finished = false;
  const bool started = co_await uring::on_new_thread(
      context.ring, [&] { finished = perform(plan, context.sleeper); });
  if (!started) co_return Outcome::refused;
  co_return finished ? Outcome::done : Outcome::stopped;
}

/// What the plan needs before its reply, in this model's idiom. The lambda is not a coroutine: it
/// only picks which coroutine to start (a capturing lambda coroutine would outlive its captures).
/// NOTE: `plan` lives in converse()'s frame, which awaits the returned task at once.
// [plan-visit-uring_coro]
Task<Outcome> execute(Context& context, const Plan& plan) {
  return std::visit(
      [&](const auto& step) -> Task<Outcome> {
        using Step = std::decay_t<decltype(step)>;
        if constexpr (std::is_same_v<Step, Wait>) {
          if (context.options.wait_mode == WaitMode::sleep) {
            return sleep_on_loop(context.sleeper, step.duration);  // anti-pattern
          }
          return timer(context.ring, step.duration);  // suspends; no thread waits
        } else {
          constexpr bool blocks = std::is_same_v<Step, Block>;
          switch (context.options.offload) {
            case Offload::standard:
              return blocks ? on_pool(context, plan) : on_loop(plan, context.sleeper);
            case Offload::pool:
              return on_pool(context, plan);
            case Offload::thread:
              return on_new_thread(context, plan);
            case Offload::inline_:
              break;
          }
          return on_loop(plan, context.sleeper);  // a Block here stalls the whole ring
        }
      },
      plan);
}
// [plan-visit-uring_coro]

/// The conversation: requests in, replies out, until one side ends it.
Task<void> converse(Context& context, int fd) {
  uring::Ring& ring = context.ring;
  Session session(context.server_name);
  std::string out;
  auto deadline = Clock::now() + context.options.header_timeout;

  for (;;) {
    while (auto plan = session.next()) {
      const Outcome outcome = co_await execute(context, *plan);
      if (outcome == Outcome::stopped) co_return;
      out.clear();
      session.write_reply(outcome == Outcome::refused ? service_unavailable() : reply_of(*plan),
                          out, std::chrono::system_clock::now());
      if (!co_await send_all(ring, fd, out)) co_return;
      if (!session.keep_alive()) {
        co_await linger(ring, fd);
        co_return;
      }
      deadline = Clock::now() + context.options.header_timeout;
    }

    // More bytes are needed: a recv linked to a timeout at the header deadline.
    // NOTE: the kernel writes into `buffer` until the recv's CQE, and this coroutine stays
    // suspended until then, so the buffer outlives the SQE. It is held only for this read: a
    // request that waits (a /delay) holds no read buffer, an idle connection holds one.
    const auto buffer = std::make_unique_for_overwrite<char[]>(read_buffer_bytes);
    const int n = co_await uring::RecvFor(ring, fd, {buffer.get(), read_buffer_bytes},
                                          deadline - Clock::now());
    if (n == -ETIME) {
      if (session.has_partial_request()) {
        out.clear();
        session.write_reply(request_timeout(), out, std::chrono::system_clock::now());
        if (co_await send_all(ring, fd, out)) co_await linger(ring, fd);
      }
      co_return;  // an idle keep-alive connection is closed without a word
    }
    if (n <= 0) co_return;  // closed by the client, an error, or -ECANCELED: the ring stops
    session.received({buffer.get(), static_cast<std::size_t>(n)});
  }
}

}  // namespace

Task<void> serve_connection(Context& context, Fd fd) {
  set_nodelay(fd.get());
  try {
    co_await converse(context, fd.get());
  } catch (const std::exception& e) {
    // A failure of this connection (no memory, no SQE) ends this connection only.
    std::fprintf(stderr, "uring_coro: connection ended: %s\n", e.what());
  }
  co_await uring::Close(context.ring, fd.release());
  context.open.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace cm::uring_coro
