// connection.cpp -- the blocking model's connection: read, execute the plan, write; repeat.
//
// Every call here blocks the worker thread: recv() until bytes come, the sleep of a `Wait` or a
// `Block`, the CPU of a `Compute`, send() until the kernel took the response. That is the model:
// a waiting request costs a whole thread, so the server carries as many waiting requests as it has
// workers (the thread ceiling, threads / delay).

#include "connection.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <string>

#include "cm/limits.hpp"
#include "cm/net.hpp"
#include "cm/session.hpp"

namespace cm::blocking {
namespace {

using Clock = std::chrono::steady_clock;

bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;  // the client is gone: that ends this connection only
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

/// Runs a plan on this thread. Returns false if the server stopped during a sleep.
// [plan-visit-blocking]
bool execute(const Plan& plan, Sleeper& sleeper) {
  return std::visit(
      [&](const auto& step) {
        using Step = std::decay_t<decltype(step)>;
        if constexpr (std::is_same_v<Step, Wait> || std::is_same_v<Step, Block>) {
          return sleeper.sleep_for(step.duration);  // the worker sleeps: it serves nobody else
        } else if constexpr (std::is_same_v<Step, Compute>) {
          burn_cpu(step.duration);
          return true;
        } else {
          return true;  // Now
        }
      },
      plan);
}
// [plan-visit-blocking]

}  // namespace

void serve_connection(int fd, std::string_view server_name, const ServerOptions& options,
                      Sleeper& sleeper) {
  set_nodelay(fd);
  Session session(server_name);
  std::string out;
  char buffer[read_buffer_bytes];
  auto deadline = Clock::now() + options.header_timeout;

  for (;;) {
    while (auto plan = session.next()) {
      if (!execute(*plan, sleeper)) return;  // stopping
      out.clear();
      session.write_reply(reply_of(*plan), out, std::chrono::system_clock::now());
      if (!send_all(fd, out)) return;
      if (!session.keep_alive()) {
        linger_close_blocking(fd);
        return;
      }
      deadline = Clock::now() + options.header_timeout;
    }

    // More bytes are needed. Wait for them, but not past the header timeout, so an idle or slow
    // client cannot hold this worker forever.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{fd, POLLIN, 0};
    const int ready = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      if (session.has_partial_request()) {
        out.clear();
        session.write_reply(request_timeout(), out, std::chrono::system_clock::now());
        if (send_all(fd, out)) linger_close_blocking(fd);
      }
      return;  // an idle keep-alive connection is closed without a word
    }
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // closed by the client, reset, or shut down by stop()
    if (sleeper.interrupted()) return;
    session.received({buffer, static_cast<std::size_t>(n)});
  }
}

}  // namespace cm::blocking
