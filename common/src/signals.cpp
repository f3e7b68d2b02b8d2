// signals.cpp -- SIGINT/SIGTERM delivered to one waiting thread (sigwait), never to a handler
// that would have to be async-signal-safe.

#include "cm/signals.hpp"

#include <pthread.h>

#include <system_error>

namespace cm {

StopSignals::StopSignals() {
  ignore_sigpipe();
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  // Threads inherit the mask, so every server thread started after this leaves the two signals
  // pending for wait().
  if (const int err = ::pthread_sigmask(SIG_BLOCK, &set_, nullptr); err != 0) {
    throw std::system_error(err, std::generic_category(), "pthread_sigmask");
  }
}

int StopSignals::wait() const {
  int sig = 0;
  while (::sigwait(&set_, &sig) != 0) {
  }
  return sig;
}

int StopSignals::wait_for(std::chrono::milliseconds limit) const {
  const timespec ts{static_cast<time_t>(limit.count() / 1000),
                    static_cast<long>(limit.count() % 1000) * 1'000'000};
  const int sig = ::sigtimedwait(&set_, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

void ignore_sigpipe() noexcept {
  struct sigaction sa {};
  sa.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &sa, nullptr);
}

}  // namespace cm
