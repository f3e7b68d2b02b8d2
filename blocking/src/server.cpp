// blocking/src/server.cpp -- the blocking thread-pool model.
//
// The idea it shows: one thread per connection, taken from a fixed pool. Every step blocks the
// thread that runs it -- recv(), the sleep of /delay and /block, send() -- and that is fine for
// the thread, because it has nothing else to do. The price is counted in threads: a waiting
// request holds a whole worker (a stack of 8 MiB of address space, a kernel task, a scheduler
// entry), so the server carries at most `--threads` waiting requests. With keep-alive a worker
// serves one connection until the client closes it, so connections beyond the pool wait in the
// kernel's listen backlog: ceiling = threads / delay, whatever the number of connections.
//
// What it needs: POSIX sockets and std::thread; nothing else.
//
// Try:
//   build/bin/cm-server --model blocking --port 8080 --threads 4
//   curl -v localhost:8080/delay/100
//   for i in $(seq 8); do curl -s localhost:8080/delay/1000 & done; wait   # 2 s: 4 at a time
//
// Shape: one acceptor thread accepts a connection whenever a worker is idle and hands it over;
// `--threads` workers each take one and call serve_connection() (connection.cpp) until it ends.
// stop() shuts the listening socket (waking accept), interrupts every sleep, shuts every served
// socket (waking recv), and joins.

#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "cm/net.hpp"
#include "cm/policy.hpp"
#include "connection.hpp"

namespace cm::blocking {
namespace {

constexpr unsigned default_workers = 64;

class BlockingServer final : public Server {
 public:
  explicit BlockingServer(ServerOptions options)
      : state_(std::move(options), "blocking", default_workers) {}
  ~BlockingServer() override { stop(); }

  void start() override {
    const ServerOptions& o = state_.options;
    listeners_ = open_listeners(o.host, o.port, 1, o.backlog);
    port_ = listeners_.port;
    started_ = true;
    for (unsigned i = 0; i < o.threads; ++i)
      workers_.emplace_back([this] { work(); });
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  void stop() override {
    std::lock_guard stop_lock(stop_mutex_);
    if (!started_ || stopped_) return;
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      // Wake every worker blocked in recv()/poll() on a connection it serves.
      for (int fd : serving_)
        ::shutdown(fd, SHUT_RDWR);
    }
    ::shutdown(listeners_.sockets.front().get(), SHUT_RDWR);  // wakes accept() with EINVAL
    state_.sleeper.interrupt();                               // wakes every Wait and Block
    state_.database.interrupt();                              // and whoever waits for a connection
    ready_.notify_all();
    worker_free_.notify_all();
    acceptor_.join();
    for (auto& worker : workers_)
      worker.join();
    state_.open -= queue_.size();
    queue_.clear();  // connections accepted but never served: closed by ~Fd
    listeners_.sockets.clear();
    stopped_ = true;
  }

  void drain() override {
    std::lock_guard stop_lock(stop_mutex_);
    if (!started_ || stopped_) return;
    state_.sessions.draining.store(true);
    ::shutdown(listeners_.sockets.front().get(), SHUT_RDWR);  // the acceptor wakes and ends
    std::lock_guard lock(mutex_);
    // A worker waiting for a request sees the end of its input and closes; one that is answering
    // answers first (with Connection: close, from the Session), then closes.
    for (int fd : serving_)
      ::shutdown(fd, SHUT_RD);
    state_.open -= queue_.size();
    queue_.clear();  // accepted, no worker has read them yet: closed by ~Fd
  }
  std::size_t requests_in_flight() const override { return state_.sessions.in_flight.load(); }
  std::uint16_t port() const override { return port_; }
  std::size_t open_connections() const override { return state_.open.load(); }
  std::string_view model() const override { return "blocking"; }

 private:
  void accept_loop() {
    const int listener = listeners_.sockets.front().get();
    for (;;) {
      {
        // Accept only when a worker is free to take the connection. The others wait in the
        // kernel's listen backlog, holding no descriptor of ours: accepting them early would only
        // pile up fds (a client that gives up and reconnects would leave one behind each time).
        std::unique_lock lock(mutex_);
        worker_free_.wait(lock, [this] { return stopping_ || idle_ > queue_.size(); });
        if (stopping_) return;
      }
      const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (stopping() || state_.draining()) return;
        const int error = errno;
        state_.accept_failed(error);  // out of fds: says so, at most once a second
        std::this_thread::sleep_for(accept_backoff(error));  // one failure is not the server's end
        continue;
      }
      std::lock_guard lock(mutex_);
      if (stopping_ || state_.draining()) {
        ::close(fd);
        return;
      }
      ++state_.open;
      queue_.emplace_back(fd);
      ready_.notify_one();
    }
  }

  void work() {
    for (;;) {
      Fd connection;
      {
        std::unique_lock lock(mutex_);
        ++idle_;
        worker_free_.notify_one();
        ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        --idle_;
        if (stopping_) return;
        connection = std::move(queue_.front());
        queue_.pop_front();
        serving_.insert(connection.get());
      }
      serve_connection(connection.get(), state_);
      {
        std::lock_guard lock(mutex_);
        serving_.erase(connection.get());
      }
      connection.reset();
      --state_.open;
    }
  }

  bool stopping() {
    std::lock_guard lock(mutex_);
    return stopping_;
  }

  ServerState state_;
  Listeners listeners_;
  std::uint16_t port_ = 0;
  std::thread acceptor_;
  std::vector<std::thread> workers_;

  std::mutex mutex_;                     // guards the members below
  std::condition_variable ready_;        // a connection was queued (or stopping)
  std::condition_variable worker_free_;  // a worker became idle (or stopping)
  std::deque<Fd> queue_;                 // accepted, handed to an idle worker
  std::size_t idle_ = 0;                 // workers waiting for a connection
  std::unordered_set<int> serving_;      // fds a worker is serving now
  bool stopping_ = false;

  std::mutex stop_mutex_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace
}  // namespace cm::blocking

namespace cm::models {
std::unique_ptr<Server> make_blocking(const ServerOptions& options) {
  return std::make_unique<blocking::BlockingServer>(options);
}
}  // namespace cm::models
