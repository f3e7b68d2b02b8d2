// task.cpp -- the frame counter every coroutine frame of the runtime is allocated through.

#include "cm/uring/task.hpp"

namespace cm::uring {

void* FrameCount::operator new(std::size_t size) {
  void* frame = ::operator new(size);
  alive_.fetch_add(1, std::memory_order_relaxed);
  bytes_.fetch_add(size, std::memory_order_relaxed);
  return frame;
}

void FrameCount::operator delete(void* frame, std::size_t size) noexcept {
  alive_.fetch_sub(1, std::memory_order_relaxed);
  bytes_.fetch_sub(size, std::memory_order_relaxed);
  ::operator delete(frame);
}

}  // namespace cm::uring
