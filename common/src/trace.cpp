// trace.cpp -- the events of cm-server --trace, kept in memory, written as Chrome trace-event JSON.

#include "cm/trace.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <ostream>
#include <utility>

namespace cm {
namespace {

int this_thread_id() {
  static thread_local const int tid = static_cast<int>(::syscall(SYS_gettid));
  return tid;
}

/// Nanoseconds as the microseconds the format counts in, to the nanosecond ("12.345").
std::string micros(std::int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%lld.%03lld", static_cast<long long>(ns / 1000),
                static_cast<long long>(ns % 1000));
  return text;
}

}  // namespace

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (byte < 0x20 || byte > 0x7E) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", byte);
      out += escaped;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

Trace::Trace(std::size_t max_events) : max_events_(max_events) {}

Tag Trace::connection() {
  std::lock_guard lock(mutex_);
  return Tag{this, ++connections_};
}

std::int64_t Trace::since_start(Clock::time_point t) const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t - start_).count();
}

void Trace::add(Event event) {
  // NOTE: called with mutex_ held.
  if (events_.size() >= max_events_) {
    ++dropped_;
    return;
  }
  events_.push_back(std::move(event));
}

void Trace::instant(std::uint64_t conn, std::string_view name, std::string args) {
  const auto now = since_start(Clock::now());
  std::lock_guard lock(mutex_);
  add({'i', now, 0, this_thread_id(), conn, std::string(name), std::move(args)});
}

void Trace::complete(std::uint64_t conn, std::string_view name, Clock::time_point start,
                     std::string args) {
  const auto end = since_start(Clock::now());
  const auto begun = since_start(start);
  std::lock_guard lock(mutex_);
  add({'X', begun, end - begun, this_thread_id(), conn, std::string(name), std::move(args)});
}

void Trace::begin(std::uint64_t conn, std::string_view name, std::string args) {
  const auto now = since_start(Clock::now());
  std::lock_guard lock(mutex_);
  open_[conn].emplace_back(name);
  add({'b', now, 0, this_thread_id(), conn, std::string(name), std::move(args)});
}

void Trace::end_all(std::uint64_t conn) {
  const auto now = since_start(Clock::now());
  std::lock_guard lock(mutex_);
  const auto spans = open_.find(conn);
  if (spans == open_.end()) return;
  for (auto name = spans->second.rbegin(); name != spans->second.rend(); ++name)
    add({'e', now, 0, this_thread_id(), conn, std::move(*name), {}});
  open_.erase(spans);
}

std::size_t Trace::size() const {
  std::lock_guard lock(mutex_);
  return events_.size();
}

std::size_t Trace::dropped() const {
  std::lock_guard lock(mutex_);
  return dropped_;
}

void Trace::write_json(std::ostream& out, std::string_view process) const {
  std::lock_guard lock(mutex_);
  out << "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"process\":" << json_string(process)
      << ",\"events\":" << events_.size() << ",\"dropped\":" << dropped_
      << "},\n\"traceEvents\":[\n";
  out << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"tid\":0,\"args\":{\"name\":"
      << json_string(process) << "}}";
  std::map<int, int> threads;  // OS thread id -> its number, in the order it first did something
  for (const Event& e : events_) {
    if (!threads.emplace(e.tid, static_cast<int>(threads.size()) + 1).second) continue;
    out << ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":" << e.tid
        << ",\"args\":{\"name\":\"thread " << threads[e.tid] << "\"}}";
  }
  for (const Event& e : events_) {
    out << ",\n{\"ph\":\"" << e.phase << "\",\"name\":" << json_string(e.name)
        << ",\"ts\":" << micros(e.ts_ns) << ",\"pid\":1,\"tid\":" << e.tid;
    if (e.phase == 'X') out << ",\"dur\":" << micros(e.dur_ns);
    if (e.phase == 'i') out << ",\"s\":\"t\"";
    if (e.phase == 'b' || e.phase == 'e') out << ",\"cat\":\"conn\",\"id\":" << e.conn;
    out << ",\"args\":{\"conn\":" << e.conn << (e.args.empty() ? "" : ",") << e.args << "}}";
  }
  out << "\n]}\n";
}

}  // namespace cm
