#pragma once
/// \file task.hpp
/// A lazy, move-only coroutine task, after cppcoro's `task<T>`.
///
/// `Task<T>` does nothing until it is awaited; then it runs on the awaiting thread and, at its end,
/// resumes its awaiter by symmetric transfer (final_suspend returns the awaiter's handle): a chain
/// of tasks that complete at once never grows the stack. An exception leaves through `co_await`,
/// in the awaiter. Destroying a Task destroys its frame; a Task never awaited never ran.
///
/// Every frame of this runtime is allocated through FrameCount, so a test can see a leaked frame
/// (FrameCount::alive() does not come back) and a doc can quote what a frame costs.

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace cm::uring {

/// Counts the coroutine frames of this runtime that are alive, and their bytes.
struct FrameCount {
  /// Frames allocated and not yet freed, all threads together.
  static std::size_t alive() noexcept { return alive_.load(std::memory_order_relaxed); }
  /// Bytes of those frames (as the compiler asked operator new for them).
  static std::size_t bytes() noexcept { return bytes_.load(std::memory_order_relaxed); }

  // Promise types derive from FrameCount: the compiler then allocates the frame through these.
  // (In ring.cpp, never inlined: GCC's -Wmismatched-new-delete misreads them when inlined.)
  static void* operator new(std::size_t size);
  static void operator delete(void* frame, std::size_t size) noexcept;

 private:
  static inline std::atomic<std::size_t> alive_{0};
  static inline std::atomic<std::size_t> bytes_{0};
};

class Ring;
template <typename T = void>
class Task;

namespace detail {

/// Where a coroutine's value goes (none for void).
template <typename T>
struct Result {
  std::optional<T> value;
  void return_value(T result) { value.emplace(std::move(result)); }
};
template <>
struct Result<void> {
  void return_void() noexcept {}
};

template <typename T>
struct Promise final : FrameCount, Result<T> {
  Task<T> get_return_object() noexcept { return Task<T>(Task<T>::Handle::from_promise(*this)); }
  /// Lazy: the body runs only when the task is awaited.
  std::suspend_always initial_suspend() noexcept { return {}; }
  /// At the end, transfer straight to the awaiter (no stack growth, no resume() from here).
  struct FinalAwaiter {
    bool await_ready() noexcept { return false; }
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> done) noexcept {
      return done.promise().continuation;
    }
    void await_resume() noexcept {}
  };
  FinalAwaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() noexcept { failure = std::current_exception(); }
  /// How the task ended: its value, or the exception that escaped it, rethrown.
  T take() {
    if (failure) std::rethrow_exception(failure);
    if constexpr (!std::is_void_v<T>) return std::move(*this->value);
  }

  /// Who awaits the task, resumed at its end (noop_coroutine(): nobody, when Ring::run drives it).
  std::coroutine_handle<> continuation = std::noop_coroutine();
  std::exception_ptr failure;
};

}  // namespace detail

/// A lazy coroutine producing a T (see the file comment). Await it once, as an rvalue.
template <typename T>
class [[nodiscard]] Task {
 public:
  using promise_type = detail::Promise<T>;
  using Handle = std::coroutine_handle<promise_type>;

  explicit Task(Handle frame) noexcept : frame_(frame) {}
  Task(Task&& other) noexcept : frame_(std::exchange(other.frame_, {})) {}  // and no copy
  ~Task() {
    if (frame_) frame_.destroy();
  }

  /// Starts the task (symmetric transfer into it) and gives its value, or throws its exception.
  auto operator co_await() && noexcept {
    struct Awaiter {
      Handle frame;
      bool await_ready() const noexcept { return !frame || frame.done(); }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiter) noexcept {
        frame.promise().continuation = awaiter;
        return frame;
      }
      T await_resume() {
        // An empty Task (moved from) has no frame to run: awaiting it is the caller's bug.
        if (!frame) throw std::logic_error("co_await on an empty Task (it was moved from)");
        return frame.promise().take();
      }
    };
    return Awaiter{frame_};
  }

 private:
  friend class Ring;  // Ring::run() drives a task from outside any coroutine
  Handle frame_;
};

}  // namespace cm::uring
