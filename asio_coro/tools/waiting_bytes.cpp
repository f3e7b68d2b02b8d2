// waiting_bytes.cpp -- what a waiting request costs the asio_coro model, in heap bytes.
//
// Replaces the global operator new/delete, and wraps aligned_alloc (which Asio uses for what its
// recycling allocator hands out) and free, to keep, for every allocation size, how many blocks of
// that size the server's threads hold (the main thread is the client: its blocks are not
// counted). Starts the model in this process (one loop), opens N connections, sends
// GET /delay/60000 on each, waits until the heap is quiet, and prints the live bytes per
// connection and the sizes that grew by about N blocks: the coroutine frames, the buffers and
// Asio's per-socket state that each waiting request holds. Each block is also priced as glibc's
// malloc holds it (its size plus an 8-byte header, in steps of 16, at least 32 bytes), which is
// what the resident memory pays before fragmentation. (Kernel memory -- socket buffers -- is not
// on this heap; harness/waiting-cost reads the whole process's RSS instead.)
//
// With `keep-alive`, each connection is first answered a GET /plaintext, so what is measured is a
// request waiting on a connection that has already served one: what a closed-loop load sees.
//
// The client and the server share this process's open-files limit: N connections take 2N.
//
//   build/bin/asio_coro_waiting_bytes 5000
//   build/bin/asio_coro_waiting_bytes 5000 keep-alive

#include <dlfcn.h>
#include <sys/resource.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "cm/server.hpp"
#include "http_client.hpp"

namespace {

constexpr std::size_t max_tracked = 1 << 17;  // sizes beyond land in the last slot
constexpr std::size_t header = alignof(std::max_align_t);
constexpr std::size_t uncounted = std::size_t{1} << 63;  // in a header: a block of the client's
std::array<std::atomic<long>, max_tracked + 1> live_blocks{};
std::atomic<long> live_bytes{0};
std::atomic<long> live_chunk_bytes{0};
thread_local bool client_thread = false;  // set by main(): its blocks are not the server's

/// What glibc's malloc takes for a block of `size` bytes on x86-64.
constexpr long chunk(std::size_t size) {
  return static_cast<long>(std::max<std::size_t>(32, (size + 8 + 15) & ~std::size_t{15}));
}

/// Pointers handed out by aligned_alloc, with their size, so free() can tell them apart.
struct AlignedBlocks {
  static constexpr std::size_t capacity = 1 << 21;
  static inline void* const tombstone = reinterpret_cast<void*>(1);
  std::atomic_flag lock = ATOMIC_FLAG_INIT;
  std::array<void*, capacity> key{};
  std::array<std::size_t, capacity> size{};
  static std::size_t slot(void* p) { return (reinterpret_cast<std::uintptr_t>(p) >> 4) % capacity; }
  void insert(void* p, std::size_t n) {
    while (lock.test_and_set(std::memory_order_acquire)) {
    }
    std::size_t i = slot(p);
    while (key[i] != nullptr && key[i] != tombstone)
      i = (i + 1) % capacity;
    key[i] = p;
    size[i] = n;
    lock.clear(std::memory_order_release);
  }
  /// The size of `p` if it came from aligned_alloc (and forgets it), else 0.
  std::size_t erase(void* p) {
    while (lock.test_and_set(std::memory_order_acquire)) {
    }
    std::size_t n = 0;
    for (std::size_t i = slot(p); key[i] != nullptr; i = (i + 1) % capacity) {
      if (key[i] == p) {
        n = size[i];
        key[i] = tombstone;
        break;
      }
    }
    lock.clear(std::memory_order_release);
    return n;
  }
};
AlignedBlocks aligned_blocks;

void count(std::size_t size, long delta) {
  live_blocks[std::min(size, max_tracked)].fetch_add(delta, std::memory_order_relaxed);
  live_bytes.fetch_add(delta * static_cast<long>(size), std::memory_order_relaxed);
  live_chunk_bytes.fetch_add(delta * chunk(size), std::memory_order_relaxed);
}

std::array<long, max_tracked + 1> snapshot() {
  std::array<long, max_tracked + 1> s{};
  for (std::size_t i = 0; i <= max_tracked; ++i)
    s[i] = live_blocks[i].load();
  return s;
}

}  // namespace

void* operator new(std::size_t size) {
  auto* p = static_cast<unsigned char*>(std::malloc(size + header));
  if (!p) throw std::bad_alloc();
  *reinterpret_cast<std::size_t*>(p) = client_thread ? size | uncounted : size;
  if (!client_thread) count(size, +1);
  return p + header;
}
void operator delete(void* q) noexcept {
  if (!q) return;
  auto* p = static_cast<unsigned char*>(q) - header;
  const std::size_t size = *reinterpret_cast<std::size_t*>(p);
  if (!(size & uncounted)) count(size, -1);
  std::free(p);
}
void operator delete(void* q, std::size_t) noexcept {
  operator delete(q);
}

extern "C" void* aligned_alloc(std::size_t align, std::size_t size) {
  static auto* real =
      reinterpret_cast<void* (*)(std::size_t, std::size_t)>(::dlsym(RTLD_NEXT, "aligned_alloc"));
  void* p = real(align, size);
  if (p && !client_thread) {
    aligned_blocks.insert(p, size);
    count(size, +1);
  }
  return p;
}
extern "C" void free(void* p) {
  static auto* real = reinterpret_cast<void (*)(void*)>(::dlsym(RTLD_NEXT, "free"));
  if (p) {
    if (const std::size_t size = aligned_blocks.erase(p)) count(size, -1);
  }
  real(p);
}

namespace cm::models {
std::unique_ptr<Server> make_asio_coro(const ServerOptions& options);
}

namespace {

/// Waits until the server's heap stops changing: every request has reached its Wait.
void until_quiet() {
  using namespace std::chrono_literals;
  for (long last = -1; last != live_bytes.load();) {
    last = live_bytes.load();
    std::this_thread::sleep_for(300ms);
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  client_thread = true;
  const long n = argc > 1 ? std::atol(argv[1]) : 1000;
  const bool keep_alive = argc > 2 && std::strcmp(argv[2], "keep-alive") == 0;
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &files);
  if (n < 1 || static_cast<rlim_t>(2 * n + 100) > files.rlim_cur) {
    std::fprintf(stderr,
                 "waiting_bytes: %ld connections take %ld descriptors here (client and "
                 "server); the limit is %ld\n",
                 n, 2 * n, static_cast<long>(files.rlim_cur));
    return 2;
  }
  cm::ServerOptions options;
  options.port = 0;
  options.threads = 1;
  options.blocking_threads = 1;
  auto server = cm::models::make_asio_coro(options);
  server->start();

  std::vector<cm::test::Client> clients;
  clients.reserve(static_cast<std::size_t>(n));
  const std::string request = cm::test::get_request("/delay/60000");
  std::this_thread::sleep_for(200ms);
  const long empty = live_bytes.load();
  const long empty_chunks = live_chunk_bytes.load();
  const auto before = snapshot();

  for (long i = 0; i < n; ++i)
    clients.push_back(cm::test::Client::connect(server->port()));
  while (server->open_connections() < static_cast<std::size_t>(n))
    std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(300ms);
  const long idle = live_bytes.load();

  if (keep_alive) {
    const std::string plaintext = cm::test::get_request("/plaintext");
    for (auto& c : clients)
      c.send(plaintext);
    for (auto& c : clients) {
      if (!c.read_response()) {
        std::fprintf(stderr, "waiting_bytes: no answer to GET /plaintext\n");
        return 1;
      }
    }
    until_quiet();
  }
  const long idle_after_reply = live_bytes.load();

  for (auto& c : clients)
    c.send(request);
  until_quiet();
  const long waiting = live_bytes.load();
  const long waiting_chunks = live_chunk_bytes.load();
  const auto after = snapshot();

  std::printf("asio_coro, 1 loop, %ld connections%s\n", n,
              keep_alive ? ", each answered a GET /plaintext first" : "");
  std::printf("  heap per connection, idle (reading its next request head): %ld bytes\n",
              ((keep_alive ? idle_after_reply : idle) - empty) / n);
  std::printf(
      "  heap per connection, waiting on /delay/60000:              %ld bytes asked, "
      "%ld in malloc's blocks\n",
      (waiting - empty) / n, (waiting_chunks - empty_chunks) / n);
  std::printf("  live blocks that grew by about %ld (size: blocks, in malloc's blocks):\n", n);
  for (std::size_t size = 0; size <= max_tracked; ++size) {
    const long grew = after[size] - before[size];
    if (grew >= n * 9 / 10) {
      std::printf("    %6zu bytes: %ld (%.2f per connection), %ld\n", size, grew,
                  static_cast<double>(grew) / static_cast<double>(n), chunk(size));
    }
  }
  clients.clear();
  server->stop();
  return 0;
}
