#pragma once
/// \file trace.hpp
/// What happened to each request, on which thread, when: the events of `cm-server --trace FILE`,
/// written as Chrome trace-event JSON (Perfetto and chrome://tracing open it).
///
/// The core records them itself: a Session its connection's accept, reads, parse, plan, reply and
/// close; perform() the work a step does on a thread; ServerState::venue() a step handed away (a
/// timer, the pool, a new thread), which the reply ends. A model passes its connection's Tag to
/// those calls and adds nothing else. Without --trace every Tag is empty and each of those calls
/// costs one test of a null pointer.
///
/// In the file, a thread's own work is a complete event ("X") on that thread: it held the thread
/// for its whole duration. A request, and a step waiting elsewhere, is an async span ("b"/"e")
/// with the connection as its id: it holds no thread, so it has a track of its own. The rest are
/// instants ("i") on the thread that did them. Every event carries `args.conn`.
///
/// For scenes of a few thousand requests, not for load: events are kept in memory (up to
/// `max_events`, then counted as dropped) and written once, at the end.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace cm {

class Trace;

/// A connection's identity in a trace: what a model hands to the work of a step. Empty (no trace)
/// unless the server runs with --trace.
struct Tag {
  Trace* trace = nullptr;
  std::uint64_t conn = 0;  ///< 1, 2, ... in the order the connections were accepted
  explicit operator bool() const noexcept { return trace != nullptr; }
};

class Trace {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Trace(std::size_t max_events = 200'000);

  /// A new connection's Tag (ids count from 1).
  Tag connection();

  /// Something that took no time, on this thread: "accept", "read", "write", "close".
  /// `args` is a JSON object's members ("\"bytes\":77"), or empty.
  void instant(std::uint64_t conn, std::string_view name, std::string args = {});
  /// Work that held this thread from `start` until now ("sleep 100 ms", "parse").
  void complete(std::uint64_t conn, std::string_view name, Clock::time_point start,
                std::string args = {});
  /// Opens a span of `conn` that holds no thread (a request, a wait on a timer); spans of one
  /// connection nest, and end_all() closes every open one.
  void begin(std::uint64_t conn, std::string_view name, std::string args = {});
  /// Ends every span `conn` has open, innermost first (at a reply, or at the close).
  void end_all(std::uint64_t conn);

  /// Writes every event as Chrome trace-event JSON: {"traceEvents": [...], ...}, the threads named
  /// "thread 1", "thread 2", ... in the order they first did something, the process `process`.
  void write_json(std::ostream& out, std::string_view process) const;

  std::size_t size() const;     ///< events kept
  std::size_t dropped() const;  ///< events past max_events, not kept

 private:
  struct Event {
    char phase;           ///< 'i', 'X', 'b', 'e'
    std::int64_t ts_ns;   ///< since the trace began
    std::int64_t dur_ns;  ///< 'X' only
    int tid;              ///< the OS thread id
    std::uint64_t conn;
    std::string name;
    std::string args;  ///< members of the args object, conn apart
  };
  void add(Event event);
  std::int64_t since_start(Clock::time_point t) const;

  const Clock::time_point start_ = Clock::now();
  const std::size_t max_events_;
  mutable std::mutex mutex_;
  std::vector<Event> events_;
  std::size_t dropped_ = 0;
  std::uint64_t connections_ = 0;
  std::map<std::uint64_t, std::vector<std::string>> open_;  ///< spans open, per connection
};

/// `text` as a JSON string literal, quotes included: control characters and every byte above 0x7F
/// escaped (a request target is the client's bytes, not necessarily UTF-8).
std::string json_string(std::string_view text);

}  // namespace cm
