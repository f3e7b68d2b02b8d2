#pragma once
/// \file fd.hpp
/// A move-only owner of a file descriptor.

#include <unistd.h>

#include <utility>

namespace cm {

/// Owns one fd and closes it exactly once. Moving transfers ownership; copying would lie.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  /// Gives up ownership without closing.
  int release() noexcept { return std::exchange(fd_, -1); }
  /// Closes the owned fd (if any) and owns `fd` instead.
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace cm
