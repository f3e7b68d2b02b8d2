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
// uv_tcp_open.
//
// Try:
//   build/bin/cm-server --model libuv_callbacks --port 8080 --threads 1
//   curl -v localhost:8080/delay/100
//   for i in $(seq 100); do curl -s localhost:8080/delay/1000 & done; wait   # 1 s, not 100 s
//   build/bin/cm-server --model libuv_callbacks --threads 1 --wait-mode sleep  # then the same: 100
//   s
//
// Shape: one uv_loop_t per thread (--threads, default: the CPUs available), each with its own
// listening socket and its own connections (connection.cpp); nothing is shared between loops but
// the options, the Sleeper and the Admission of the pool. stop() may come from any thread: it
// sets a flag and calls uv_async_send, the one libuv call that is safe from another thread; each
// loop then closes its listener and every connection, uv_run returns once every handle's close
// callback has run, and uv_loop_close returns 0.

#include <cstdlib>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "cm/libuv_callbacks/server.hpp"
#include "cm/net.hpp"
#include "connection.hpp"

namespace cm::libuv_callbacks {
namespace {

uv_handle_t* as_handle(auto* handle) {
  return reinterpret_cast<uv_handle_t*>(handle);
}

void check(int rc, const char* what) {
  if (rc != 0) throw std::system_error(-rc, std::generic_category(), what);  // -errno on Unix
}

/// libuv has one thread pool per process, shared by every loop and every server in it, and
/// creates it on the first uv_queue_work with UV_THREADPOOL_SIZE threads (libuv caps it at 1024).
/// So the first server started in a process sizes it, before any loop runs; later servers share
/// that pool, whatever their blocking_threads (each still bounds its own queue with Admission).
void size_thread_pool(unsigned threads) {
  static std::once_flag once;
  std::call_once(once, [threads] {
    // NOTE: setenv is not thread-safe against getenv; it runs once, before this server's loops.
    ::setenv("UV_THREADPOOL_SIZE", std::to_string(threads).c_str(), 1);
  });
}

void close_if_open(uv_handle_t* handle, void*) {
  if (!uv_is_closing(handle)) uv_close(handle, nullptr);
}

}  // namespace

Loop::Loop(Shared& shared_state) : shared(shared_state) {
  check(uv_loop_init(&uv), "uv_loop_init");
  uv_tcp_init(&uv, &listener);
  check(uv_async_init(&uv, &wake, on_wake), "uv_async_init");
  listener.data = wake.data = this;
}

Loop::~Loop() {
  if (!closed) close_loop();
}

void Loop::listen(Fd socket) {
  check(uv_tcp_open(&listener, socket.get()), "uv_tcp_open");
  socket.release();  // the handle owns the fd now: uv_close closes it
  check(uv_listen(reinterpret_cast<uv_stream_t*>(&listener), shared.options.backlog,
                  Connection::on_connection),
        "uv_listen");
}

void Loop::run() {
  uv_run(&uv, UV_RUN_DEFAULT);  // returns when no handle or request is active: after on_wake
  close_loop();
}

void Loop::close_loop() {
  uv_walk(
      &uv, [](uv_handle_t*, void* n) { ++*static_cast<std::size_t*>(n); }, &report.handles_left);
  report.close_status = uv_loop_close(&uv);
  if (report.close_status != 0) {  // a handle was left open (a bug, or start() failed half-way)
    uv_walk(&uv, close_if_open, nullptr);
    uv_run(&uv, UV_RUN_DEFAULT);
    uv_loop_close(&uv);
  }
  closed = true;
}

void Loop::post_finished(Connection* connection) {
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

void Loop::on_wake(uv_async_t* wake) {
  Loop& loop = *static_cast<Loop*>(wake->data);
  std::vector<Connection*> done;
  bool stop = false;
  {
    std::lock_guard lock(loop.mutex);
    done.swap(loop.finished);
    stop = loop.stop_requested;
  }
  for (Connection* c : done)
    c->thread_done();

  if (stop && !loop.stopping) {
    loop.stopping = true;
    uv_close(as_handle(&loop.listener), nullptr);  // embedded in Loop, which outlives the loop
    uv_walk(
        &loop.uv,
        [](uv_handle_t* handle, void* arg) {
          auto* self = static_cast<Loop*>(arg);
          if (handle->type == UV_TCP && handle != as_handle(&self->listener) &&
              !uv_is_closing(handle)) {
            static_cast<Connection*>(handle->data)->close();
          }
        },
        &loop);
  }
  // The wake handle stays open while an offload thread may still post to it.
  if (loop.stopping && loop.threads_running == 0 && !uv_is_closing(as_handle(wake))) {
    uv_close(as_handle(wake), nullptr);
  }
}

namespace {

class UvServer final : public LibuvServer {
 public:
  explicit UvServer(ServerOptions options) : shared_(std::move(options)) {
    if (shared_.options.threads == 0) shared_.options.threads = default_loop_threads();
  }
  ~UvServer() override { stop(); }

  void start() override {
    size_thread_pool(shared_.options.blocking_threads);
    Listeners listeners = open_listeners(shared_.options.host, shared_.options.port,
                                         shared_.options.threads, shared_.options.backlog,
                                         /*nonblocking=*/true);
    for (Fd& socket : listeners.sockets) {  // if one throws, ~Loop closes the ones made
      loops_.push_back(std::make_unique<Loop>(shared_));
      loops_.back()->listen(std::move(socket));
    }
    port_ = listeners.port;
    // NOTE: each loop was set up on this thread; from here on only its own thread touches it
    // (std::thread's start is the hand-over), except for uv_async_send(&wake).
    for (auto& loop : loops_)
      loop->thread = std::thread([&l = *loop] { l.run(); });
    std::lock_guard lock(stop_mutex_);
    started_ = true;
  }

  void stop() override {
    std::lock_guard lock(stop_mutex_);
    if (!started_ || stopped_) return;
    shared_.sleeper.interrupt();  // a Block running in the pool or a thread, or a sleep, ends now
    for (auto& loop : loops_)
      loop->request_stop();
    for (auto& loop : loops_)
      loop->thread.join();
    stopped_ = true;
  }

  std::vector<LoopReport> loop_reports() const override {
    std::lock_guard lock(stop_mutex_);
    std::vector<LoopReport> reports;
    if (stopped_) {
      for (const auto& loop : loops_)
        reports.push_back(loop->report);
    }
    return reports;
  }

  std::uint16_t port() const override { return port_; }
  std::size_t open_connections() const override { return shared_.open.load(); }
  std::string_view model() const override { return "libuv_callbacks"; }

 private:
  Shared shared_;
  std::vector<std::unique_ptr<Loop>> loops_;
  std::uint16_t port_ = 0;
  mutable std::mutex stop_mutex_;
  bool started_ = false;
  bool stopped_ = false;
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
