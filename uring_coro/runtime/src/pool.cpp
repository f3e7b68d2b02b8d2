// pool.cpp -- the workers of a Pool.

#include "cm/uring/pool.hpp"

#include <algorithm>

namespace cm::uring {

Pool::Pool(unsigned threads) {
  threads = std::max(threads, 1u);
  workers_.reserve(threads);
  try {
    for (unsigned i = 0; i < threads; ++i)
      workers_.emplace_back([this] { work_loop(); });
  } catch (...) {
    stop();
    throw;
  }
}

Pool::~Pool() {
  stop();
}

void Pool::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (auto& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
}

void Pool::enqueue(PoolJob* job) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(job);
  }
  ready_.notify_one();
}

void Pool::work_loop() {
  for (;;) {
    PoolJob* job = nullptr;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left: every waiter was posted back
      job = queue_.front();
      queue_.pop_front();
    }
    job->run_and_post();
  }
}

}  // namespace cm::uring
