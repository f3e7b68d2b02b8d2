#pragma once
/// \file worker.hpp
/// One client thread: an epoll loop that owns a slice of the connections, keeps one request in
/// flight on each, and checks every answer. Internal to cm-load (load.cpp drives the workers).

#include <llhttp.h>
#include <netinet/in.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cm/fd.hpp"
#include "fairness.hpp"
#include "histogram.hpp"
#include "types.hpp"
#include "url_template.hpp"

namespace cm::load {

/// What every worker sends and expects; read-only once the workers start.
struct Target {
  sockaddr_in server{};          ///< where to connect
  std::vector<in_addr> sources;  ///< source addresses to bind, round robin (empty: any)
  UrlTemplate url;
  std::optional<DelayRange> delay;  ///< set iff url.has_ms
  Expectation expect;
  int expect_status = 200;
  /// "GET", or "POST" with this body (--body) sent with its Content-Length.
  std::string method = "GET";
  std::string body;
  std::int64_t timeout_ns = 0;
  /// Poll without sleeping for this long after the last event (0: always sleep in epoll_wait).
  std::int64_t spin_ns = 0;
  /// The closed loop: hold the first requests until the connect phase ends, then spread them
  /// over stagger_ns (first_request_offset_ns(); 0 without --stagger: all at once), counting
  /// `connections` slots in all. false with --rate, whose schedule starts there too.
  bool stagger = false;
  std::int64_t stagger_ns = 0;
  unsigned connections = 0;
  /// --rate: the open loop's requests per second over all the connections (0: a closed loop,
  /// each connection sending its next request when the last is answered), and whether the
  /// arrivals are Poisson (else evenly spaced).
  double rate = 0;
  bool poisson = false;
};

/// State shared by the main thread and the workers.
struct Shared {
  std::atomic<bool> stop{false};
  /// The measured window, monotonic ns; an answer counts when it completes inside it.
  std::atomic<std::int64_t> window_start_ns{INT64_MAX};
  std::atomic<std::int64_t> window_end_ns{INT64_MAX};
  /// --stagger: the end of the connect phase, from which the first requests' offsets count;
  /// set once, before Worker::release_first_requests().
  std::atomic<std::int64_t> stagger_origin_ns{INT64_MAX};
  /// --rate: when the schedule of intended send times begins (the end of the connect phase).
  std::atomic<std::int64_t> pace_origin_ns{INT64_MAX};
  /// First connection attempts that ended, connected or failed (the connect phase is over when
  /// this reaches the number of connections asked for).
  std::atomic<unsigned> resolved{0};
  /// --drain, set by the main thread after the window: no new request or connection from then on.
  std::atomic<bool> draining{false};
  /// Readable once stop is set: every worker's epoll watches it, so they all wake at once.
  cm::Fd stop_event;
};

/// Monotonic clock in nanoseconds.
std::int64_t now_ns() noexcept;

/// The name of an errno value ("ECONNREFUSED"), for the connect failure report.
std::string errno_name(int err);

/// One event loop over `count` connections (slots first_slot .. first_slot + count - 1).
class Worker {
 public:
  Worker(const Target& target, Shared& shared, unsigned first_slot, unsigned count);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  /// Opens the connections and runs until shared.stop. Throws std::system_error if the loop
  /// itself cannot be set up; everything that goes wrong with a connection is counted instead.
  void run();

  /// --stagger, called by the main thread once shared.stagger_origin_ns is set: arms the timer
  /// that lets each slot send its first request when due (until then an open connection idles).
  void release_first_requests();
  /// --rate, called by the main thread once shared.pace_origin_ns is set: starts this worker's
  /// schedule of intended send times.
  void release_schedule();

  // Live counters, written by this worker only, read by the progress line (relaxed).
  std::atomic<std::uint64_t> live_completed{0};  ///< correct answers so far, warm-up included
  std::atomic<std::uint64_t> live_errors{0};     ///< errors so far
  std::atomic<unsigned> live_open{0};            ///< connections connected now
  /// --drain: set by this worker once no request of its own is in flight after `draining` (it
  /// closes each connection as it falls idle).
  std::atomic<bool> drained{false};

  // Final figures, read by the main thread after run() returned.
  std::uint64_t requests_in_window = 0;
  // --rate: intended send times that fell in the window; of them, those no idle connection could
  // take when due (sent later, their latency still counted from the intended time); the most
  // requests ever waiting for a connection; and those still waiting when the run stopped.
  std::uint64_t offered_in_window = 0;
  std::uint64_t late_in_window = 0;
  std::uint64_t backlog_max = 0;
  std::uint64_t unsent = 0;
  /// Requests in flight (sent, not answered) when the worker stopped.
  std::uint64_t unanswered_at_end = 0;
  /// --rate: how late this client itself was in noticing each request due in the window (the
  /// moment it dispatched it, less its intended send time): its own lag, apart from the server's.
  Histogram pace_lag_us;
  std::uint64_t reconnects = 0;
  /// Time spent inside the window in polls that found nothing (see worker.cpp), ns.
  std::int64_t spin_ns_in_window = 0;
  ErrorCounts errors;
  /// Why connects failed, by reason; safe to call while the worker runs.
  std::map<std::string, std::uint64_t> connect_failures() const;
  Histogram latency_us;
  Histogram overshoot_us;
  /// Each slot's answers in the window (fairness.hpp), in slot order; read after run() returned.
  std::vector<SlotTally> tallies() const;

  /// One connection's state (defined in worker.cpp; public for the llhttp callbacks there).
  struct Connection;

 private:
  void start_connect(Connection& c);
  void on_connect_ready(Connection& c);
  void connect_failed(Connection& c, const std::string& reason);
  void send_request(Connection& c, std::int64_t now, std::int64_t intended = -1);
  void ready_for_next(Connection& c);
  void on_pace_timer();
  void pace(std::int64_t now);
  void dispatch(std::int64_t intended);
  Connection* take_idle();
  std::int64_t next_interval_ns();
  void flush(Connection& c);
  void on_readable(Connection& c);
  void on_response(Connection& c, std::int64_t now);
  void reconnect(Connection& c);
  void note_open_in_window(Connection& c, std::int64_t closed_ns);
  void close_connection(Connection& c);
  void check_timeouts(std::int64_t now);
  void pump_connects();
  void drain_step();
  void count_error(std::uint64_t ErrorCounts::*kind);
  void on_stagger_timer();
  std::int64_t first_request_due(unsigned slot) const;
  void arm_stagger_timer(std::int64_t due_ns);

  mutable std::mutex failures_mutex_;  // connect failures are rare: a lock costs nothing here
  std::map<std::string, std::uint64_t> connect_failures_;
  const Target& target_;
  Shared& shared_;
  cm::Fd epoll_;
  std::vector<Connection> connections_;  // never resized: llhttp_t::data points into it
  std::deque<unsigned> connect_queue_;   // slots waiting to connect: first attempts, then reopens
  unsigned connecting_ = 0;              // connects in flight (bounded by kConnectBatch)
  unsigned first_slot_;
  std::string request_tail_;   // " HTTP/1.1\r\nHost: ...\r\n\r\n", after the path
  std::string fixed_request_;  // the whole request when the URL has no {ms}
  std::mt19937 rng_;
  std::vector<char> read_buffer_;
  cm::Fd stagger_timer_;       // --stagger: a timerfd set for the next slot due to start
  unsigned next_release_ = 0;  // --stagger: slots below this may send their first request
  // --rate: this worker's share of the rate, its timer, the next intended send time (0: not
  // begun), the open connections with no request in flight, and the intended times of requests
  // that found none.
  double rate_ = 0;
  cm::Fd pace_timer_;
  std::int64_t next_due_ns_ = 0;
  std::deque<unsigned> idle_;
  std::deque<std::int64_t> backlog_;
};

}  // namespace cm::load
