// connection.cpp -- the blocking model's connection: read, execute the plan, write; repeat.
//
// Every call here blocks the worker thread: recv() until bytes come, the sleep of a `Wait` or a
// `Block`, the CPU of a `Compute`, send() until the kernel took the response. That is the model:
// a waiting request costs a whole thread, so the server carries as many waiting requests as it has
// workers (the thread ceiling, threads / delay). Two deadlines bound how long a client can hold
// one: the header deadline (a poll() before each read) and the write deadline (SO_SNDTIMEO).

#include "connection.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <chrono>
#include <string>

#include "cm/net.hpp"

namespace cm::blocking {
namespace {

/// The write deadline: a send() that moves no byte for this long fails with EAGAIN, so a client
/// that does not read its answers cannot hold this worker past it (ServerOptions::write_timeout).
void set_write_deadline(int fd, std::chrono::milliseconds limit) {
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(limit);
  const timeval tv{.tv_sec = seconds.count(),
                   .tv_usec = std::chrono::microseconds(limit - seconds).count()};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;  // gone, or EAGAIN at the write deadline: this connection ends
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

/// Runs a plan's step on this thread, whatever it is: there is nowhere else to run it.
// [plan-visit-blocking]
Outcome execute(Plan& plan, ServerState& state, Tag tag) {
  return perform(plan, state.sleeper, tag);  // a Wait, a Block or a Query blocks the worker
}
// [plan-visit-blocking]

}  // namespace

void serve_connection(int fd, ServerState& state) {
  set_nodelay(fd);
  set_write_deadline(fd, state.options.write_timeout);
  Session session = state.session(Moment::now());
  std::string out;
  char buffer[read_buffer_bytes];

  for (;;) {
    while (auto plan = session.next()) {
      const Outcome outcome = execute(*plan, state, session.tag());
      if (outcome == Outcome::stopped) return;
      out.clear();
      session.write_reply(*plan, outcome, out, Moment::now());
      if (!send_all(fd, out)) return;
      if (!session.keep_alive()) return linger_close_blocking(fd);
    }

    // More bytes are needed. Wait for them, but not past the header deadline, so an idle or slow
    // client cannot hold this worker forever.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(
        state.read_deadline(session) - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    const int ready = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      out.clear();
      if (session.expire(out, Moment::now()) && send_all(fd, out)) linger_close_blocking(fd);
      return;
    }
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || state.sleeper.interrupted()) return;  // closed, reset, or stop() shut it down
    session.received({buffer, static_cast<std::size_t>(n)});
  }
}

}  // namespace cm::blocking
