// libuv_callbacks/src/server.cpp -- the libuv callback model.
//
// The idea it shows: an event loop and callbacks. A thread runs a uv_loop_t, which waits for what
// is ready (a readable socket, a due timer, finished work) and calls the callback registered for
// it; each callback does one short step and returns. A waiting request is a uv_timer_t in its
// connection object, not a thread: one thread carries thousands (ceiling: connections / delay).
// The price is discipline: a callback that blocks stalls every connection of its loop, so /block
// goes to libuv's pool (uv_queue_work) and back.
//
// What it needs: libuv >= 1.44 (Debian's libuv1-dev). Commands to try:
// docs/models/libuv_callbacks.md.
//
// Shape: one uv_loop_t per thread (cm::LoopServer) with its own listener and connections
// (connection.cpp); drain and stop reach it by uv_async_send, safe from another thread.

#include <cstdio>
#include <cstdlib>
#include <string>
#include <system_error>

#include "cm/loop_server.hpp"
#include "connection.hpp"

namespace cm::libuv_callbacks {
namespace {

void check(int rc, const char* what) {  // libuv's errors are -errno on Unix
  if (rc != 0) throw std::system_error(-rc, std::generic_category(), what);
}

/// The wake handle's callback, after a drain or a stop: closes the listener, then drains (or, to
/// stop, closes) every connection -- every uv_tcp_t but the listener -- and, to stop, itself.
void on_wake(uv_async_t* wake) {
  Loop& loop = *static_cast<Loop*>(wake->data);
  auto* listener = reinterpret_cast<uv_handle_t*>(&loop.listener);  // lives in Loop
  if (!uv_is_closing(listener)) uv_close(listener, nullptr);
  uv_timer_stop(&loop.retry);  // a connection libuv accepted and kept closes with the listener
  if (loop.stopping && loop.db) loop.db->close_all();  // every Query ends: its connection closes
  uv_walk(
      &loop.uv,
      [](uv_handle_t* handle, void* loop) {
        if (handle->type != UV_TCP || handle->data == loop) return;  // the listener
        auto* c = static_cast<Connection*>(handle->data);
        if (static_cast<Loop*>(loop)->stopping) return c->close();
        c->drain();
      },
      &loop);
  if (!loop.stopping) return;
  uv_close(reinterpret_cast<uv_handle_t*>(&loop.tick), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&loop.retry), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(wake), nullptr);  // NOTE: libuv
}  // waits out a concurrent uv_async_send before it closes an async (uv__async_spin)

}  // namespace

Loop::Loop(ServerState& server_state) : state(server_state) {
  check(uv_loop_init(&uv), "uv_loop_init");
  uv_tcp_init(&uv, &listener);
  check(uv_async_init(&uv, &wake, on_wake), "uv_async_init");
  uv_timer_init(&uv, &tick);
  uv_timer_init(&uv, &retry);
  listener.data = wake.data = tick.data = retry.data = this;
}

// Out of descriptors, libuv's next accept would close every client in the backlog (its "EMFILE
// trick"): instead, as nginx does, it leaves the connection it accepted untaken -- libuv then stops
// accepting -- and takes it once a descriptor is free, the others still waiting in the backlog.
void Loop::defer_accept() {
  state.accept_failed(EMFILE);
  auto again = [](uv_timer_t* t) {  // the connection libuv holds, if a descriptor is free now
    auto* listener = &static_cast<Loop*>(t->data)->listener;
    Connection::on_connection(reinterpret_cast<uv_stream_t*>(listener), 0);
  };
  uv_timer_start(&retry, again, accept_backoff(EMFILE).count(), 0);
}

// [turn-wheel-libuv_callbacks]
void Loop::set_tick() {
  const auto wake = wheel.next_wake().value_or(Clock::time_point::max());  // none: never
  uv_timer_start(&tick, [](uv_timer_t* t) {
    auto* loop = static_cast<Loop*>(t->data);
    loop->wheel.advance(Clock::now());  // each due wait's resume()
    loop->set_tick();
  }, timeout_until(wake), 0);
}
// [turn-wheel-libuv_callbacks]

// libuv counts a timeout in whole ms from its loop's clock (CLOCK_MONOTONIC, as steady_clock, cut
// to the ms and read once per turn): from there, to the first ms at or after the deadline.
std::uint64_t Loop::timeout_until(Clock::time_point deadline) const {
  const Clock::time_point uv_time{std::chrono::milliseconds(uv_now(&uv))};
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - uv_time).count();
  return left > 0 ? static_cast<std::uint64_t>(left) : 0;
}

Loop::~Loop() {
  if (closed) return;
  wake_up(true);  // it never ran (start() failed half-way): close it now
  run();
}

void Loop::listen(Fd socket) {
  check(uv_tcp_open(&listener, socket.get()), "uv_tcp_open");
  socket.release();  // the handle owns the fd now: uv_close closes it
  auto* stream = reinterpret_cast<uv_stream_t*>(&listener);
  check(uv_listen(stream, state.options.backlog, Connection::on_connection), "uv_listen");
}

void Loop::run() {
  uv_run(&uv, UV_RUN_DEFAULT);  // returns once no handle is active: after on_wake stopped it
  closed = uv_loop_close(&uv) == 0;
  if (!closed) std::fprintf(stderr, "libuv_callbacks: a handle outlived its loop\n");  // a bug
}

namespace {

class UvServer final : public LoopServer {
 public:
  explicit UvServer(ServerOptions options)
      : LoopServer(std::move(options), "libuv_callbacks", /*nonblocking=*/true) {}
  ~UvServer() override { stop(); }

 private:
  void add_loop(Fd listener) override {  // if it throws, ~Loop closes what was made
    // libuv's pool is process-wide, made with UV_THREADPOOL_SIZE threads by the first
    // uv_queue_work: the first server started in a process sizes it (each bounds its Admission).
    static std::once_flag sized;
    const std::string threads = std::to_string(state_.options.blocking_threads);
    std::call_once(sized, [&] { ::setenv("UV_THREADPOOL_SIZE", threads.c_str(), 1); });
    loops_.push_back(std::make_unique<Loop>(state_));
    Loop& loop = *loops_.back();
    if (state_.database_on_loops()) loop.db = std::make_unique<LoopDb>(loop.uv, state_.options.db);
    loop.listen(std::move(listener));
  }
  void run_loop(std::size_t i) override { loops_[i]->run(); }
  void stop_loop(std::size_t i) override { loops_[i]->wake_up(/*stop=*/true); }
  void drain_loop(std::size_t i) override { loops_[i]->wake_up(/*stop=*/false); }

  std::vector<std::unique_ptr<Loop>> loops_;
};

}  // namespace
}  // namespace cm::libuv_callbacks

namespace cm::models {
std::unique_ptr<Server> make_libuv_callbacks(const ServerOptions& options) {
  return std::make_unique<libuv_callbacks::UvServer>(options);
}
}  // namespace cm::models
