// waiting_bytes.cpp -- what a waiting request costs the asio_coro model, in heap bytes.
//
// Replaces the global operator new/delete, and wraps aligned_alloc (which Asio uses for its
// coroutine frames and operation states) and free, to keep, for every allocation size, how many
// blocks of that size are live. Starts the model in this process (one loop), opens N connections,
// sends GET /delay/60000 on each, waits until the server is quiet, and prints the live bytes per
// connection and the sizes that grew by about N blocks: the coroutine frames, the buffers and
// Asio's per-socket state that each waiting request holds. (Kernel memory -- socket buffers --
// is not on this heap; harness/waiting-cost reads the whole process's RSS instead.)
//
//   build/bin/asio_coro_waiting_bytes 2000

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "cm/server.hpp"
#include "http_client.hpp"

namespace {

constexpr std::size_t max_tracked = 1 << 17;  // sizes beyond land in the last slot
constexpr std::size_t header = alignof(std::max_align_t);
std::array<std::atomic<long>, max_tracked + 1> live_blocks{};
std::atomic<long> live_bytes{0};

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
  *reinterpret_cast<std::size_t*>(p) = size;
  count(size, +1);
  return p + header;
}
void operator delete(void* q) noexcept {
  if (!q) return;
  auto* p = static_cast<unsigned char*>(q) - header;
  count(*reinterpret_cast<std::size_t*>(p), -1);
  std::free(p);
}
void operator delete(void* q, std::size_t) noexcept {
  operator delete(q);
}

extern "C" void* aligned_alloc(std::size_t align, std::size_t size) {
  static auto* real =
      reinterpret_cast<void* (*)(std::size_t, std::size_t)>(::dlsym(RTLD_NEXT, "aligned_alloc"));
  void* p = real(align, size);
  if (p) {
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

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  const long n = argc > 1 ? std::atol(argv[1]) : 1000;
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
  const auto before = snapshot();

  for (long i = 0; i < n; ++i)
    clients.push_back(cm::test::Client::connect(server->port()));
  while (server->open_connections() < static_cast<std::size_t>(n))
    std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(300ms);
  const long idle = live_bytes.load();

  for (auto& c : clients)
    c.send(request);
  for (long last = -1; last != live_bytes.load();) {  // quiet: every request is in its Wait
    last = live_bytes.load();
    std::this_thread::sleep_for(300ms);
  }
  const long waiting = live_bytes.load();
  const auto after = snapshot();

  std::printf("asio_coro, 1 loop, %ld connections\n", n);
  std::printf("  heap per connection, idle (reading its next request head): %ld bytes\n",
              (idle - empty) / n);
  std::printf("  heap per connection, waiting on /delay/60000:              %ld bytes\n",
              (waiting - empty) / n);
  std::printf("  live blocks that grew by about %ld (size: blocks):\n", n);
  for (std::size_t size = 0; size <= max_tracked; ++size) {
    const long grew = after[size] - before[size];
    if (grew >= n * 9 / 10) {
      std::printf("    %6zu bytes: %ld (%.2f per connection)\n", size, grew,
                  static_cast<double>(grew) / static_cast<double>(n));
    }
  }
  clients.clear();
  server->stop();
  return 0;
}
