#include "cm/timer_wheel.hpp"

#include <algorithm>
#include <bit>
#include <utility>

namespace cm {

namespace {
constexpr std::int64_t tick_ns = std::chrono::nanoseconds(TimerWheel::tick).count();
constexpr std::size_t words = TimerWheel::slots / 64;
static_assert(TimerWheel::slots % 64 == 0, "the occupied bits are whole words");
}  // namespace

void TimerWheel::Timer::cancel() noexcept {
  if (!armed()) return;
  unlink();
  --wheel_->size_;
  fire_ = nullptr;
}

TimerWheel::TimerWheel(Clock::time_point now) : far_first_(0), next_tick_(ticks_at(now)) {}

TimerWheel::~TimerWheel() {
  for (Link& head : slot_)
    while (head.linked())
      head.next->unlink();  // an owner's ~Timer then finds it unarmed
  while (far_.linked())
    far_.next->unlink();
}

TimerWheel::Ticks TimerWheel::ticks_at(Clock::time_point t) noexcept {
  const std::int64_t ns = std::chrono::nanoseconds(t.time_since_epoch()).count();
  return ns / tick_ns - (ns % tick_ns < 0);  // floor, also before the clock's epoch
}

TimerWheel::Ticks TimerWheel::ticks_after(Clock::time_point t) noexcept {
  const std::int64_t ns = std::chrono::nanoseconds(t.time_since_epoch()).count();
  return ns / tick_ns + (ns % tick_ns > 0);  // ceiling, without overflowing near the maximum
}

TimerWheel::Clock::time_point TimerWheel::time_of(Ticks ticks) noexcept {
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(ticks * tick));
}

bool TimerWheel::arm(Timer& timer, Clock::time_point due, std::function<void()> fire) {
  timer.cancel();
  // The first boundary at or after `due`, and never one advance() has passed already: there the
  // timer is found by the first advance() whose clock reaches it, and not before (never early).
  const Ticks at = std::max(ticks_after(due), next_tick_);
  timer.due_ = due;
  timer.wheel_ = this;
  timer.fire_ = std::move(fire);
  ++size_;
  Ticks wake = at;
  if (at < next_tick_ + static_cast<Ticks>(slots)) {
    put(timer, at);
  } else {  // a turn or more ahead: the loop wakes a turn before it, to move it into its slot
    if (!far_.linked() || at < far_first_) far_first_ = at;
    timer.link_before(far_);
    wake = at - static_cast<Ticks>(slots);
  }
  if (scheduled_ && *scheduled_ <= wake) return false;  // the loop's timer comes in time already
  scheduled_ = wake;  // it will be set for this tick, or an earlier one
  return true;
}

void TimerWheel::put(Timer& timer, Ticks at) {
  Link& head = slot_[static_cast<std::size_t>(at % static_cast<Ticks>(slots))];
  timer.link_before(head);  // at the tail: a slot fires in arming order
  mark(static_cast<std::size_t>(&head - slot_.data()));
}

void TimerWheel::move_near(Ticks horizon) {
  Ticks first = horizon;
  for (Link* link = far_.next; link != &far_;) {
    Link* const next = link->next;
    auto* const timer = static_cast<Timer*>(link);
    const Ticks at = std::max(ticks_after(timer->due_), next_tick_);
    if (at < horizon) {
      timer->unlink();
      put(*timer, at);
    } else {
      first = std::min(first, at);
    }
    link = next;
  }
  far_first_ = first;
}

std::optional<TimerWheel::Ticks> TimerWheel::next_occupied() {
  const std::size_t start = static_cast<std::size_t>(next_tick_ % static_cast<Ticks>(slots));
  // A turn from `start`: its word from `start` on, the other words, then its bits below `start`.
  for (std::size_t i = 0; i <= words; ++i) {
    const std::size_t word = (start / 64 + i) % words;
    std::uint64_t bits = occupied_[word];
    if (i == 0) bits &= ~std::uint64_t{0} << (start % 64);
    if (i == words) bits &= (std::uint64_t{1} << (start % 64)) - 1;
    for (; bits != 0; bits &= bits - 1) {
      const std::size_t slot = word * 64 + static_cast<std::size_t>(std::countr_zero(bits));
      if (slot_[slot].linked()) return next_tick_ + static_cast<Ticks>((slot + slots - start) % slots);
      occupied_[word] &= ~(std::uint64_t{1} << (slot % 64));  // its timers went: clear it now
    }
  }
  return std::nullopt;
}

std::optional<TimerWheel::Clock::time_point> TimerWheel::next_wake() {
  scheduled_ = size_ == 0 ? std::nullopt : next_occupied();
  if (far_.linked()) {  // the tick where the earliest far timer moves into its slot
    const Ticks move = std::max(far_first_ - static_cast<Ticks>(slots), next_tick_);
    scheduled_ = std::min(scheduled_.value_or(move), move);
  }
  if (!scheduled_) return std::nullopt;
  return time_of(*scheduled_);
}

std::size_t TimerWheel::advance(Clock::time_point now) {
  scheduled_.reset();
  const Ticks last = ticks_at(now);
  if (last < next_tick_) return 0;  // no boundary passed since the last call (or the clock went back)
  // The far timers that come within a turn of the ticks visited now move into their slots, with
  // those up to a turn further (so that the next move is a turn away at least).
  const auto turn = static_cast<Ticks>(slots);
  if (far_.linked() && far_first_ < last + 1 + turn) move_near(last + 1 + 2 * turn);
  Link expired;
  const Ticks count = std::min<Ticks>(last - next_tick_ + 1, static_cast<Ticks>(slots));
  for (Ticks k = next_tick_; k < next_tick_ + count; ++k) {
    Link& head = slot_[static_cast<std::size_t>(k % static_cast<Ticks>(slots))];
    for (Link* link = head.next; link != &head;) {
      Link* const next = link->next;
      if (static_cast<Timer*>(link)->due_ <= now) {  // a later turn's timer stays where it is
        link->unlink();
        link->link_before(expired);
      }
      link = next;
    }
  }
  next_tick_ = last + 1;  // before the callbacks: what they arm goes to a tick still to come
  return fire(expired);
}

std::size_t TimerWheel::expire_all() {
  Link expired;
  for (Link& head : slot_) {
    while (head.linked()) {
      Link* const link = head.next;
      link->unlink();
      link->link_before(expired);
    }
  }
  while (far_.linked()) {
    Link* const link = far_.next;
    link->unlink();
    link->link_before(expired);
  }
  occupied_.fill(0);
  scheduled_.reset();
  return fire(expired);
}

std::size_t TimerWheel::fire(Link& expired) {
  std::size_t fired = 0;
  while (expired.linked()) {  // a callback may cancel one still in here: it unlinks itself
    auto* const timer = static_cast<Timer*>(expired.next);
    timer->unlink();
    --size_;
    // Moved out first: the callback may arm this timer again, or end its owner.
    const std::function<void()> callback = std::exchange(timer->fire_, nullptr);
    ++fired;
    callback();
  }
  return fired;
}

}  // namespace cm
