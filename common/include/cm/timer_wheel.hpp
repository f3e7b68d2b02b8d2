#pragma once
/// \file timer_wheel.hpp
/// A hashed timer wheel, sans I/O: where an async model can park its waiting requests instead of
/// its own timer structure (`--timers wheel`). The model keeps one timer of its loop set for
/// next_wake() and calls advance() when it fires; the wheel does the rest.
///
/// Arm and cancel are O(1): a timer is a node its owner keeps (no allocation), linked into the
/// slot of the tick at or after it is due. A turn of the loop fires a whole slot at once. What it
/// gives up is precision: a timer fires at the first tick boundary at or after it is due, up to
/// one `tick` late (plus the loop's own lateness), never early. The kernel's timer wheel, Netty's
/// HashedWheelTimer and Kafka's purgatory are wheels; libuv and Asio keep a binary heap instead
/// (docs/timers.md).

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

namespace cm {

class TimerWheel {
 public:
  using Clock = std::chrono::steady_clock;
  /// The granularity: how late past its due time a timer may fire, at most, on the wheel's part.
  static constexpr std::chrono::microseconds tick{250};
  /// Slots in one turn of the wheel (a turn: slots x tick = 1.024 s). A timer due more than a
  /// turn ahead waits in a list of its own, and moves into its slot once it is less than two turns
  /// away (a pass over that list at most once a turn): the loop wakes for it then, not at every
  /// occupied tick of each turn before. In its slot it may be passed over once.
  static constexpr std::size_t slots = 4096;

  /// A doubly linked node: a slot's list head, or a timer in it.
  struct Link {
    Link* prev = this;
    Link* next = this;
    void unlink() noexcept {
      prev->next = next;
      next->prev = prev;
      prev = next = this;
    }
    /// Puts this (unlinked) node last in the list `head` begins: a slot fires in arming order.
    void link_before(Link& head) noexcept {
      prev = head.prev;
      next = &head;
      head.prev->next = this;
      head.prev = this;
    }
    bool linked() const noexcept { return next != this; }
  };

  /// One waiting request's timer, kept by its owner (a connection, a coroutine frame). Neither
  /// copyable nor movable: the wheel holds its address while it is armed.
  class Timer : Link {
   public:
    Timer() = default;
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;
    ~Timer() { cancel(); }
    /// Armed and not yet fired (nor cancelled).
    bool armed() const noexcept { return linked(); }
    /// Takes it out of its wheel, if armed; its callback will not run. O(1).
    void cancel() noexcept;

   private:
    friend class TimerWheel;
    Clock::time_point due_{};
    TimerWheel* wheel_ = nullptr;
    std::function<void()> fire_;
  };

  /// `now`: where the wheel's ticks start (any time at or before the first timer's arming).
  explicit TimerWheel(Clock::time_point now = Clock::now());
  TimerWheel(const TimerWheel&) = delete;
  TimerWheel& operator=(const TimerWheel&) = delete;
  ~TimerWheel();  ///< cancels what is still armed (its callbacks never run)

  /// Arms `timer` (cancelled first, if armed) to call `fire` once the clock given to advance() is
  /// at or past `due`. Returns true when the loop's timer must be set again: the timer's tick is
  /// earlier than the wake next_wake() last gave (or none was given since the last advance()).
  bool arm(Timer& timer, Clock::time_point due, std::function<void()> fire);

  /// When the loop should call advance() next: the first tick boundary that has a timer in its
  /// slot, or the one where a timer further ahead moves into its slot, or nothing if no timer is
  /// armed. It may be a wake that finds nothing due (a later turn's timer, or only that move).
  std::optional<Clock::time_point> next_wake();

  /// Fires, in no set order, every timer due at or before `now`, and none other: "never early".
  /// A callback may arm or cancel any timer, itself included. A clock that went back fires nothing;
  /// one that jumped ahead by more than a turn visits each slot once. Returns the timers fired.
  std::size_t advance(Clock::time_point now);

  /// At a server's stop: fires every armed timer now, due or not (each owner tells a stop from its
  /// time by its own state). Returns the timers fired.
  std::size_t expire_all();

  std::size_t size() const noexcept { return size_; }  ///< timers armed

 private:
  using Ticks = std::int64_t;
  static Ticks ticks_at(Clock::time_point t) noexcept;       ///< the tick at or before `t`
  static Ticks ticks_after(Clock::time_point t) noexcept;    ///< the tick at or after `t`
  static Clock::time_point time_of(Ticks ticks) noexcept;    ///< a tick boundary as a time
  void mark(std::size_t slot) noexcept { occupied_[slot / 64] |= std::uint64_t{1} << (slot % 64); }
  std::optional<Ticks> next_occupied();                     ///< the first tick with a timer
  void put(Timer& timer, Ticks at);                          ///< into the slot of tick `at`
  void move_near(Ticks horizon);  ///< the far timers of ticks before `horizon`, into their slots
  std::size_t fire(Link& expired);                           ///< runs and unlinks each of them

  std::array<Link, slots> slot_{};
  std::array<std::uint64_t, slots / 64> occupied_{};  ///< a slot's bit: it may hold a timer
  Link far_;          ///< the timers armed a turn or more ahead of next_tick_, in no order
  Ticks far_first_;   ///< at or before the tick of the earliest of them (while far_ holds any)
  Ticks next_tick_;                 ///< the first tick advance() has not visited yet
  std::optional<Ticks> scheduled_;  ///< the wake next_wake() gave, until the next advance()
  std::size_t size_ = 0;
};

}  // namespace cm
