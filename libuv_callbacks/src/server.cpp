// libuv_callbacks/src/server.cpp -- the libuv callback model.
//
// The idea it shows: an event loop and callbacks. A thread runs a uv_loop_t; the loop waits for
// whatever is ready (a readable socket, a due timer, finished work) and calls the callback that
// was registered for it; every callback does one short step and returns. A request that waits is
// not a thread but a uv_timer_t inside its connection object, so one thread carries thousands of
// waiting requests: ceiling = connections / delay. The price is discipline: a callback that blocks
// (a sleep, a blocking driver, a long computation) stalls every connection of its loop, which is
// why /block goes to libuv's thread pool (uv_queue_work) and comes back to the loop when done.
//
// What it needs: libuv >= 1.44 (Debian's libuv1-dev). 1.44 has no UV_TCP_REUSEPORT, so each loop's
// listening socket is made with SO_REUSEPORT by cm::open_listeners and handed over with
// uv_tcp_open. libuv accepts on its own: it drains the backlog on each readiness, and when out of
// descriptors it accepts and closes with a spare fd (its "EMFILE trick") instead of a pause.
//
// Try:
//   build/bin/cm-server --model libuv_callbacks --port 8080 --threads 1
//   curl -v localhost:8080/delay/100
//   for i in $(seq 100); do curl -s localhost:8080/delay/1000 & done; wait   # 1 s, not 100 s
//   build/bin/cm-server --model libuv_callbacks --threads 1 --wait-mode sleep  # then: 100 s
//
// Shape: one uv_loop_t per thread, each with its own listening socket and its own connections
// (connection.cpp); the loops share only ServerState. stop() may come from any thread: it sets a
// flag and calls uv_async_send, the one libuv call that is safe from another thread; each loop
// then closes its listener and every connection, and uv_run returns once every handle is closed.

#include <cstdlib>
#include <string>
#include <system_error>

#include "connection.hpp"

namespace cm::libuv_callbacks {
namespace {

uv_handle_t* as_handle(auto* handle) {
  return reinterpret_cast<uv_handle_t*>(handle);
}

void check(int rc, const char* what) {
  if (rc != 0) throw std::system_error(-rc, std::generic_category(), what);  // -errno on Unix
}

/// The wake handle's callback: resumes what call threads posted; on stop, closes everything.
void on_wake(uv_async_t* wake) {
  Loop& loop = *static_cast<Loop*>(wake->data);
  std::vector<Connection*> done;
  bool stop = false;
  {
    std::lock_guard lock(loop.mutex);
    done.swap(loop.finished);
    stop = loop.stop_requested;
  }
  loop.threads_away -= static_cast<unsigned>(done.size());
  for (Connection* c : done)
    c->resume_from_thread();
  if (stop && !loop.stopping) {
    loop.stopping = true;
    uv_close(as_handle(&loop.listener), nullptr);  // embedded in Loop, which outlives the loop
    uv_walk(
        &loop.uv,
        [](uv_handle_t* h, void* listener) {
          if (h->type == UV_TCP && h != listener && !uv_is_closing(h))
            static_cast<Connection*>(h->data)->close();
        },
        &loop.listener);
  }
  if (loop.stopping && loop.threads_away == 0 && !uv_is_closing(as_handle(wake))) {
    uv_close(as_handle(wake), nullptr);  // no call thread can post to it any more
  }
}

}  // namespace

Loop::Loop(ServerState& server_state) : state(server_state) {
  check(uv_loop_init(&uv), "uv_loop_init");
  uv_tcp_init(&uv, &listener);
  check(uv_async_init(&uv, &wake, on_wake), "uv_async_init");
  listener.data = wake.data = this;
}

Loop::~Loop() {
  if (closed) return;  // else it never ran: start() failed half-way
  uv_walk(
      &uv,
      [](uv_handle_t* h, void*) {
        if (!uv_is_closing(h)) uv_close(h, nullptr);
      },
      nullptr);
  uv_run(&uv, UV_RUN_DEFAULT);
  uv_loop_close(&uv);
}

void Loop::listen(Fd socket) {
  check(uv_tcp_open(&listener, socket.get()), "uv_tcp_open");
  socket.release();  // the handle owns the fd now: uv_close closes it
  check(uv_listen(reinterpret_cast<uv_stream_t*>(&listener), state.options.backlog,
                  Connection::on_connection),
        "uv_listen");
}

void Loop::run() {
  uv_run(&uv, UV_RUN_DEFAULT);  // returns when no handle or request is active: after on_wake
  uv_walk(
      &uv, [](uv_handle_t*, void* n) { ++*static_cast<std::size_t*>(n); }, &report.handles_left);
  report.close_status = uv_loop_close(&uv);  // not 0: a handle was left open, a bug tests see
  closed = report.close_status == 0;         // else ~Loop closes what is left
}

void Loop::post(Connection* connection) {
  {
    std::lock_guard lock(mutex);
    finished.push_back(connection);
  }
  uv_async_send(&wake);  // coalesces: one on_wake may find several finished connections
}

void Loop::request_stop() {
  // NOTE: sent under the mutex on purpose. on_wake reads stop_requested under it too, so the loop
  // cannot close `wake` (and uv_loop_close) before this uv_async_send has returned; sending to a
  // closed uv_async_t would abort.
  std::lock_guard lock(mutex);
  stop_requested = true;
  uv_async_send(&wake);
}

namespace {

class UvServer final : public LibuvServer {
 public:
  explicit UvServer(ServerOptions options)
      : LibuvServer(std::move(options), "libuv_callbacks", /*nonblocking=*/true) {
    // libuv's thread pool is process-wide, made with UV_THREADPOOL_SIZE threads on the first
    // uv_queue_work: the first server of a process sizes it (each bounds its own Admission).
    // NOTE: setenv is not thread-safe against getenv; it runs before this server's loops.
    static std::once_flag sized;
    const std::string threads = std::to_string(state_.options.blocking_threads);
    std::call_once(sized, [&] { ::setenv("UV_THREADPOOL_SIZE", threads.c_str(), 1); });
  }
  ~UvServer() override { stop(); }

  std::vector<LoopReport> loop_reports() const override {
    std::vector<LoopReport> reports;
    if (!joined_) return reports;
    for (const auto& loop : loops_)
      reports.push_back(loop->report);
    return reports;
  }

 private:
  void add_loop(Fd listener) override {  // if it throws, ~Loop closes what was made
    loops_.push_back(std::make_unique<Loop>(state_));
    loops_.back()->listen(std::move(listener));
  }
  void run_loop(std::size_t i) override { loops_[i]->run(); }
  void stop_loop(std::size_t i) override { loops_[i]->request_stop(); }
  void stopped() override { joined_ = true; }

  std::vector<std::unique_ptr<Loop>> loops_;
  std::atomic<bool> joined_{false};  ///< every loop's thread was joined: its report is final
};

}  // namespace

std::unique_ptr<LibuvServer> make_server(const ServerOptions& options) {
  return std::make_unique<UvServer>(options);
}

}  // namespace cm::libuv_callbacks

namespace cm::models {
std::unique_ptr<Server> make_libuv_callbacks(const ServerOptions& options) {
  return libuv_callbacks::make_server(options);
}
}  // namespace cm::models
