// worker.cpp -- one client event loop: connect, send, parse, check, repeat.
//
// Each connection is a small state machine driven by level-triggered epoll events:
//
//   idle --start_connect--> connecting --(writable, SO_ERROR 0)--> open: send a request
//   open: readable -> parse; a complete answer is checked, then the next request is sent at once
//   a close, reset, timeout or unparsable answer -> closed and reconnected (counted)
//
// The loop only ever waits for readability, except while a connect is in progress or a request
// could not be written whole (both rare), so an answered request costs one read and one write.
// Time is read from the vDSO clock once per read and once per write.
//
// While answers keep coming, the loop polls epoll without sleeping, and sleeps in epoll_wait only
// after Target::spin_ns without an event. A client that sleeps between answers makes the server
// pay for waking it on every answer it sends (a cross-CPU wake-up, priced by the server's own CPU);
// wrk sleeps less than a lean client because it does more work per answer. Polling that finds
// nothing yields the CPU (sched_yield) and is timed, so `client_spin_s` can be subtracted from
// the client's CPU time: what is left is the work it did.
//
// With --rate the loop is open: requests are due at a rate (evenly spaced, or Poisson), whatever
// the server does. A due request goes out on an open connection with nothing in flight; when there
// is none it waits for one, and its latency is still counted from when it was due (its intended
// send time), so a server that stalls is charged for every request that should have been sent
// during the stall -- a closed loop sends none then, and hides them (coordinated omission).

#include "worker.hpp"

#include <netinet/tcp.h>
#include <sched.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <system_error>

#include "cm/net.hpp"

namespace cm::load {
namespace {

/// Connects in flight per worker: enough to open thousands of connections in well under a
/// second on loopback, few enough not to overflow the server's SYN and accept backlogs.
constexpr unsigned kConnectBatch = 64;
/// Events taken from epoll at once.
constexpr int kMaxEvents = 256;
/// Timeouts are checked this often (ms).
constexpr int kScanIntervalMs = 50;
/// A body longer than any expected one is a wrong body; we keep at most this much of it.
constexpr std::size_t kMaxBodyKept = 256;
/// epoll user data of the stop event and the stagger timer (slots are indices, far below).
constexpr std::uint64_t kStopToken = UINT64_MAX;
constexpr std::uint64_t kStaggerToken = UINT64_MAX - 1;
constexpr std::uint64_t kPaceToken = UINT64_MAX - 2;

}  // namespace

std::int64_t now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string errno_name(int err) {
  const char* name = strerrorname_np(err);
  return name ? name : "errno " + std::to_string(err);
}

/// One client connection. Lives in Worker::connections_ for the whole run; only its fd changes.
struct Worker::Connection {
  enum class State { idle, connecting, open, dead };

  unsigned slot = 0;  ///< index in connections_ (and epoll user data)
  State state = State::idle;
  cm::Fd fd;
  bool first_attempt = true;  ///< its first connect has not ended yet (Shared::resolved)
  bool released = true;       ///< may send requests (with --stagger: once its first is due)
  llhttp_t parser{};
  // The request in flight.
  std::string request;           ///< its bytes when the URL has {ms} (else fixed_request_)
  std::string_view out;          ///< what remains to write of it
  bool awaiting = false;         ///< a request was written (at least its first byte)
  bool want_write = false;       ///< EPOLLOUT is in its epoll set (part of a request is left)
  std::int64_t started_ns = 0;   ///< connect start, then the first byte of the request written
  std::int64_t intended_ns = 0;  ///< when the request was due (--rate), else started_ns
  bool in_idle = false;          ///< --rate: listed in idle_
  std::uint32_t delay_ms = 0;    ///< this request's {ms}
  // The answer being parsed (filled by the llhttp callbacks).
  std::string body;
  bool body_too_long = false;
  bool complete = false;
  bool keep_alive = true;
  int status = 0;
  // Fairness: the slot's answers in the window, kept across reconnects (fairness.hpp).
  SlotTally tally;
  std::int64_t open_since_ns = 0;  ///< when its current connection opened
};

namespace {

Worker::Connection* of(llhttp_t* p) { return static_cast<Worker::Connection*>(p->data); }

int on_message_begin(llhttp_t* p) {
  auto* c = of(p);
  c->body.clear();
  c->body_too_long = false;
  c->complete = false;
  return 0;
}

int on_body(llhttp_t* p, const char* at, std::size_t length) {
  auto* c = of(p);
  if (c->body.size() + length > kMaxBodyKept) {
    c->body_too_long = true;
  } else {
    c->body.append(at, length);
  }
  return 0;
}

int on_message_complete(llhttp_t* p) {
  auto* c = of(p);
  c->complete = true;
  c->status = p->status_code;
  c->keep_alive = llhttp_should_keep_alive(p) != 0;
  return HPE_PAUSED;  // stop at the end of this answer: anything after it was never asked for
}

const llhttp_settings_t& parser_settings() {
  static const llhttp_settings_t settings = [] {
    llhttp_settings_t s;
    llhttp_settings_init(&s);
    s.on_message_begin = on_message_begin;
    s.on_body = on_body;
    s.on_message_complete = on_message_complete;
    return s;
  }();
  return settings;
}

}  // namespace

Worker::Worker(const Target& target, Shared& shared, unsigned first_slot, unsigned count)
    : target_(target),
      shared_(shared),
      connections_(count),
      first_slot_(first_slot),
      rng_(0x9e3779b9u ^ first_slot),
      read_buffer_(64 * 1024) {
  for (unsigned i = 0; i < count; ++i) {
    connections_[i].slot = i;
    connections_[i].released = !target.stagger;
  }
  if (target.stagger) {
    stagger_timer_.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
    if (!stagger_timer_) throw std::system_error(errno, std::generic_category(), "timerfd_create");
  }
  if (target.rate > 0) {  // this worker's share: as its share of the connections
    rate_ = target.rate * count / target.connections;
    pace_timer_.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
    if (!pace_timer_) throw std::system_error(errno, std::generic_category(), "timerfd_create");
  }
  request_tail_ = " HTTP/1.1\r\nHost: " + target.url.authority() + "\r\n";
  if (target.method == "POST") {
    request_tail_ += "Content-Length: " + std::to_string(target.body.size()) + "\r\n";
  }
  request_tail_ += "\r\n" + target.body;
  if (!target.url.has_ms) fixed_request_ = target.method + " " + target.url.path(0) + request_tail_;
}

Worker::~Worker() = default;

std::map<std::string, std::uint64_t> Worker::connect_failures() const {
  std::lock_guard lock(failures_mutex_);
  return connect_failures_;
}

void Worker::count_error(std::uint64_t ErrorCounts::*kind) {
  ++(errors.*kind);
  live_errors.store(live_errors.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void Worker::run() {
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) throw std::system_error(errno, std::generic_category(), "epoll_create1");
  epoll_event stop_ev{};
  stop_ev.events = EPOLLIN;
  stop_ev.data.u64 = kStopToken;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, shared_.stop_event.get(), &stop_ev) != 0)
    throw std::system_error(errno, std::generic_category(), "epoll_ctl(stop event)");
  for (auto [timer, token] :
       {std::pair{stagger_timer_.get(), kStaggerToken}, std::pair{pace_timer_.get(), kPaceToken}}) {
    if (timer < 0) continue;
    epoll_event timer_ev{};
    timer_ev.events = EPOLLIN;
    timer_ev.data.u64 = token;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, timer, &timer_ev) != 0)
      throw std::system_error(errno, std::generic_category(), "epoll_ctl(timer)");
  }

  for (unsigned i = 0; i < connections_.size(); ++i)
    connect_queue_.push_back(i);
  pump_connects();

  epoll_event events[kMaxEvents];
  std::int64_t loop_end = now_ns();
  std::int64_t next_scan = loop_end + kScanIntervalMs * 1'000'000LL;
  std::int64_t spin_until = 0;  // poll without sleeping until then (the last event + spin_ns)
  while (!shared_.stop.load(std::memory_order_relaxed)) {
    const bool spinning = loop_end < spin_until;
    int n = ::epoll_wait(epoll_.get(), events, kMaxEvents, spinning ? 0 : kScanIntervalMs);
    if (n < 0 && errno != EINTR)
      throw std::system_error(errno, std::generic_category(), "epoll_wait");
    if (n > 0) {
      spin_until = now_ns() + target_.spin_ns;
    } else if (spinning) {
      // Nothing yet: let anything else runnable on this CPU go first, and time the pass as idle.
      ::sched_yield();
      std::int64_t now = now_ns();
      if (now >= shared_.window_start_ns.load(std::memory_order_relaxed) &&
          now < shared_.window_end_ns.load(std::memory_order_relaxed))
        spin_ns_in_window += now - loop_end;
    }
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == kStopToken) continue;  // the loop condition sees stop
      if (events[i].data.u64 == kStaggerToken) {
        on_stagger_timer();
        continue;
      }
      if (events[i].data.u64 == kPaceToken) {
        on_pace_timer();
        continue;
      }
      Connection& c = connections_[events[i].data.u64];
      if (c.state == Connection::State::connecting) {
        on_connect_ready(c);
      } else if (c.state == Connection::State::open) {
        if (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) on_readable(c);
        if (c.state == Connection::State::open && (events[i].events & EPOLLOUT)) flush(c);
      }
    }
    std::int64_t now = now_ns();
    if (now >= next_scan) {
      check_timeouts(now);
      next_scan = now + kScanIntervalMs * 1'000'000LL;
    }
    pump_connects();
    loop_end = now_ns();
    if (next_due_ns_ != 0) pace(loop_end);  // --rate: what fell due while events were handled
    if (shared_.draining.load(std::memory_order_relaxed) && !drained.load()) drain_step();
  }
  unsent = backlog_.size();
  for (const Connection& c : connections_)
    if (c.state == Connection::State::open && c.awaiting) ++unanswered_at_end;
  // Every fd closes with connections_ (RAII); answers in flight are neither counted nor errors.
  const std::int64_t end = now_ns();
  for (Connection& c : connections_)
    if (c.state == Connection::State::open) note_open_in_window(c, end);
}

void Worker::note_open_in_window(Connection& c, std::int64_t closed_ns) {
  // Open over [open_since_ns, closed_ns): does that meet the window [start, end)?
  if (c.open_since_ns < shared_.window_end_ns.load(std::memory_order_relaxed) &&
      closed_ns > shared_.window_start_ns.load(std::memory_order_relaxed))
    c.tally.open_in_window = true;
}

std::vector<SlotTally> Worker::tallies() const {
  std::vector<SlotTally> out;
  out.reserve(connections_.size());
  for (const Connection& c : connections_)
    out.push_back(c.tally);
  return out;
}

void Worker::drain_step() {
  // A connection with nothing in flight is closed: a server that serves one connection at a time
  // (the blocking model's worker) goes on to the next, whose request is then answered.
  bool in_flight = false;
  for (Connection& c : connections_) {
    if (c.state != Connection::State::open) continue;
    if (c.awaiting)
      in_flight = true;
    else
      close_connection(c);
  }
  if (!in_flight) drained.store(true);
}

void Worker::pump_connects() {
  while (connecting_ < kConnectBatch && !connect_queue_.empty() &&
         !shared_.stop.load(std::memory_order_relaxed) &&
         !shared_.draining.load(std::memory_order_relaxed)) {
    // First in, first out: reopened connections queue behind every first attempt, so a server
    // that drops connections cannot stretch the connect phase by starving the slots not yet open.
    unsigned slot = connect_queue_.front();
    connect_queue_.pop_front();
    start_connect(connections_[slot]);
  }
}

void Worker::start_connect(Connection& c) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return connect_failed(c, errno_name(errno));
  c.fd.reset(fd);
  cm::set_nodelay(fd);
  if (!target_.sources.empty()) {
    // Pick the source address, but let connect() pick the port: with IP_BIND_ADDRESS_NO_PORT a
    // port is only reserved for the whole 4-tuple, so each source address adds ~28,000 ports.
    int one = 1;
    ::setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    sockaddr_in src{};
    src.sin_family = AF_INET;
    src.sin_addr = target_.sources[(first_slot_ + c.slot) % target_.sources.size()];
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&src), sizeof src) != 0)
      return connect_failed(c, errno_name(errno));
  }
  llhttp_init(&c.parser, HTTP_RESPONSE, &parser_settings());
  c.parser.data = &c;
  c.awaiting = false;
  c.started_ns = now_ns();
  int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&target_.server), sizeof target_.server);
  if (rc != 0 && errno != EINPROGRESS) return connect_failed(c, errno_name(errno));
  c.state = Connection::State::connecting;
  ++connecting_;
  epoll_event ev{};
  ev.events = EPOLLOUT;  // writable = the connect ended, either way
  ev.data.u64 = c.slot;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
    return connect_failed(c, errno_name(errno));
}

void Worker::on_connect_ready(Connection& c) {
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(c.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) return connect_failed(c, errno_name(err));
  --connecting_;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = c.slot;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
  c.state = Connection::State::open;
  c.open_since_ns = now_ns();
  c.want_write = false;
  live_open.store(live_open.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (c.first_attempt) {
    c.first_attempt = false;
    shared_.resolved.fetch_add(1, std::memory_order_relaxed);
  }
  if (c.released) ready_for_next(c);  // else on_stagger_timer() sends it when due
}

/// A connection that can take a request: the closed loop sends one now; the open loop gives it the
/// oldest request waiting for a connection, or lists it idle until one falls due.
void Worker::ready_for_next(Connection& c) {
  if (shared_.draining.load(std::memory_order_relaxed)) return close_connection(c);  // --drain
  if (target_.rate <= 0) return send_request(c, now_ns());
  if (!backlog_.empty()) {
    const std::int64_t intended = backlog_.front();
    backlog_.pop_front();
    return send_request(c, now_ns(), intended);
  }
  if (!c.in_idle) {
    c.in_idle = true;
    idle_.push_back(c.slot);
  }
}

// --rate. Each worker paces its share of the rate with its own timer. The main thread sets
// Shared::pace_origin_ns and arms the timer once (release_schedule); from then on only the worker
// sets it, to the next intended send time.

void Worker::release_schedule() {
  // NOTE: runs on the main thread before this worker's pace timer has ever fired.
  if (!pace_timer_) return;
  itimerspec when{};
  when.it_value.tv_nsec = 1;  // as soon as possible: the worker reads the origin itself
  ::timerfd_settime(pace_timer_.get(), 0, &when, nullptr);
}

std::int64_t Worker::next_interval_ns() {
  if (target_.poisson)
    return std::llround(std::exponential_distribution<double>(rate_)(rng_) * 1e9);
  return std::llround(1e9 / rate_);
}

void Worker::on_pace_timer() {
  std::uint64_t expirations = 0;
  [[maybe_unused]] ssize_t n = ::read(pace_timer_.get(), &expirations, sizeof expirations);
  const std::int64_t origin = shared_.pace_origin_ns.load(std::memory_order_acquire);
  if (origin == INT64_MAX || rate_ <= 0) return;
  if (next_due_ns_ == 0)  // the workers' schedules start a fraction of an interval apart
    next_due_ns_ = origin + std::llround(1e9 / rate_ * first_slot_ / target_.connections);
  pace(now_ns());
}

void Worker::pace(std::int64_t now) {
  while (next_due_ns_ <= now && !shared_.stop.load(std::memory_order_relaxed) &&
         !shared_.draining.load(std::memory_order_relaxed)) {
    dispatch(next_due_ns_);
    next_due_ns_ += std::max<std::int64_t>(1, next_interval_ns());
  }
  itimerspec when{};
  when.it_value.tv_sec = next_due_ns_ / 1'000'000'000;
  when.it_value.tv_nsec = next_due_ns_ % 1'000'000'000;
  ::timerfd_settime(pace_timer_.get(), TFD_TIMER_ABSTIME, &when, nullptr);
}

/// A request due at `intended`: on an idle connection now, or waiting for one (late).
void Worker::dispatch(std::int64_t intended) {
  const bool in_window = intended >= shared_.window_start_ns.load(std::memory_order_relaxed) &&
                         intended < shared_.window_end_ns.load(std::memory_order_relaxed);
  const std::int64_t now = now_ns();
  if (in_window) {
    ++offered_in_window;
    pace_lag_us.record(
        static_cast<std::uint64_t>(std::max<std::int64_t>(0, now - intended) / 1000));
  }
  if (Connection* c = take_idle()) return send_request(*c, now, intended);
  backlog_.push_back(intended);
  backlog_max = std::max<std::uint64_t>(backlog_max, backlog_.size());
  if (in_window) ++late_in_window;
}

Worker::Connection* Worker::take_idle() {
  while (!idle_.empty()) {
    Connection& c = connections_[idle_.front()];
    idle_.pop_front();
    c.in_idle = false;
    if (c.state == Connection::State::open && !c.awaiting && c.released) return &c;
  }
  return nullptr;
}

// The first requests (all at once without --stagger). Slots are numbered in the order of their offsets, and each worker owns a contiguous
// run of them, so a worker releases its slots in slot order, with one timer set for the next.
// A slot released while its connection is not open yet (still connecting, or reconnecting)
// sends as soon as it opens; from then on it is an ordinary closed loop.

std::int64_t Worker::first_request_due(unsigned slot) const {
  return shared_.stagger_origin_ns.load(std::memory_order_acquire) +
         first_request_offset_ns(first_slot_ + slot, target_.connections, target_.stagger_ns);
}

void Worker::arm_stagger_timer(std::int64_t due_ns) {
  itimerspec when{};
  when.it_value.tv_sec = due_ns / 1'000'000'000;
  when.it_value.tv_nsec = due_ns % 1'000'000'000;
  if (::timerfd_settime(stagger_timer_.get(), TFD_TIMER_ABSTIME, &when, nullptr) != 0)
    throw std::system_error(errno, std::generic_category(), "timerfd_settime");
}

void Worker::release_first_requests() {
  // NOTE: runs on the main thread, before this worker's timer has ever fired; the worker only
  // sets the timer again from on_stagger_timer(), so the two never race over it.
  if (stagger_timer_ && !connections_.empty()) arm_stagger_timer(first_request_due(0));
}

void Worker::on_stagger_timer() {
  std::uint64_t expirations = 0;
  [[maybe_unused]] ssize_t n = ::read(stagger_timer_.get(), &expirations, sizeof expirations);
  if (shared_.stagger_origin_ns.load(std::memory_order_acquire) == INT64_MAX) return;
  while (next_release_ < connections_.size() && first_request_due(next_release_) <= now_ns()) {
    Connection& c = connections_[next_release_++];
    c.released = true;
    if (c.state == Connection::State::open && !c.awaiting) ready_for_next(c);
  }
  if (next_release_ < connections_.size()) arm_stagger_timer(first_request_due(next_release_));
}

void Worker::connect_failed(Connection& c, const std::string& reason) {
  // A slot that cannot connect stays closed: retrying EMFILE or EADDRNOTAVAIL would only spin.
  if (c.state == Connection::State::connecting) --connecting_;
  c.fd.reset();
  c.state = Connection::State::dead;
  {
    std::lock_guard lock(failures_mutex_);
    ++connect_failures_[reason];
  }
  count_error(&ErrorCounts::connect);
  if (c.first_attempt) {
    c.first_attempt = false;
    shared_.resolved.fetch_add(1, std::memory_order_relaxed);
  }
}

void Worker::send_request(Connection& c, std::int64_t now, std::int64_t intended) {
  if (target_.url.has_ms) {
    const DelayRange& d = *target_.delay;
    c.delay_ms = d.min_ms == d.max_ms
                     ? d.min_ms
                     : std::uniform_int_distribution<std::uint32_t>(d.min_ms, d.max_ms)(rng_);
    // Rebuilt in place: the string keeps its capacity, so no allocation after the first.
    c.request.assign(target_.method);
    c.request.append(" ");
    c.request.append(target_.url.path_prefix);
    c.request.append(std::to_string(c.delay_ms));
    c.request.append(target_.url.path_suffix);
    c.request.append(request_tail_);
    c.out = c.request;
  } else {
    c.out = fixed_request_;
  }
  c.started_ns = now;
  c.intended_ns = intended < 0 ? now : intended;
  c.awaiting = true;
  flush(c);
}

void Worker::flush(Connection& c) {
  ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      n = 0;
    else {
      count_error(&ErrorCounts::reset);
      return reconnect(c);
    }
  }
  c.out.remove_prefix(static_cast<std::size_t>(n));
  // Wait for writability only while part of a request is left (rare: requests are small).
  bool want_write = !c.out.empty();
  if (want_write != c.want_write) {
    epoll_event ev{};
    ev.events = EPOLLIN | (want_write ? static_cast<unsigned>(EPOLLOUT) : 0u);
    ev.data.u64 = c.slot;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
    c.want_write = want_write;
  }
}

void Worker::on_readable(Connection& c) {
  ssize_t n = ::read(c.fd.get(), read_buffer_.data(), read_buffer_.size());
  std::int64_t now = now_ns();  // the last byte of the answer, if this read completes it
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
    count_error(&ErrorCounts::reset);
    return reconnect(c);
  }
  if (n == 0) {
    // End of stream. An answer delimited by the close completes here; else the server dropped
    // a request we were waiting on (we always have one in flight), which is a reset.
    if (c.awaiting && llhttp_finish(&c.parser) == HPE_OK && c.complete) {
      on_response(c, now);
      if (c.state != Connection::State::open) return;
    }
    // A connection idle until its staggered first request loses nothing when closed: reopen it.
    if (c.awaiting) count_error(&ErrorCounts::reset);
    return reconnect(c);
  }
  const char* data = read_buffer_.data();
  llhttp_errno_t rc = llhttp_execute(&c.parser, data, static_cast<std::size_t>(n));
  if (rc == HPE_OK) return;  // more to come
  if (rc == HPE_PAUSED && c.awaiting && c.out.empty()) {
    const char* end = llhttp_get_error_pos(&c.parser);
    llhttp_resume(&c.parser);
    if (end == data + n) return on_response(c, now);
  }
  // Not HTTP, an answer nobody asked for, or bytes after the answer: the stream is lost.
  count_error(&ErrorCounts::status);
  reconnect(c);
}

void Worker::on_response(Connection& c, std::int64_t now) {
  c.awaiting = false;
  const std::int64_t latency_ns = now - c.intended_ns;  // from when it was due (--rate), or sent
  const std::int64_t served_ns = now - c.started_ns;    // what the server took, for `early`
  std::uint64_t least_ms =
      target_.expect.min_latency_is_delay ? c.delay_ms : target_.expect.min_latency_ms;
  std::int64_t least_ns = static_cast<std::int64_t>(least_ms) * 1'000'000;

  bool body_ok = true;
  if (target_.expect.body_is_delay) {
    char digits[16];
    auto [end, ec] = std::to_chars(digits, digits + sizeof digits, c.delay_ms);
    body_ok = !c.body_too_long && c.body == std::string_view(digits, end);
  } else if (target_.expect.body) {
    body_ok = !c.body_too_long && c.body == *target_.expect.body;
  }

  if (c.status != target_.expect_status) {
    count_error(&ErrorCounts::status);
  } else if (!body_ok) {
    count_error(&ErrorCounts::body);
  } else if (served_ns < least_ns) {
    count_error(&ErrorCounts::early);
  } else {
    live_completed.store(live_completed.load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
    const std::int64_t window_start = shared_.window_start_ns.load(std::memory_order_relaxed);
    if (now >= window_start && now < shared_.window_end_ns.load(std::memory_order_relaxed)) {
      ++requests_in_window;
      latency_us.record(static_cast<std::uint64_t>(latency_ns / 1000));
      overshoot_us.record(static_cast<std::uint64_t>((latency_ns - least_ns) / 1000));
      c.tally.record(now, window_start);  // an increment and a timestamp
    }
  }

  if (!c.keep_alive) return reconnect(c);  // the server said it would close: not an error
  ready_for_next(c);
}

void Worker::close_connection(Connection& c) {
  if (c.state == Connection::State::open) {
    live_open.store(live_open.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    note_open_in_window(c, now_ns());
  }
  c.fd.reset();  // closing the fd also takes it out of the epoll set
  c.state = Connection::State::idle;
  c.awaiting = false;
}

void Worker::reconnect(Connection& c) {
  close_connection(c);
  ++reconnects;
  connect_queue_.push_back(c.slot);
}

void Worker::check_timeouts(std::int64_t now) {
  for (Connection& c : connections_) {
    if (now - c.started_ns <= target_.timeout_ns) continue;
    if (c.state == Connection::State::connecting) {
      connect_failed(c, "timeout");
    } else if (c.state == Connection::State::open && c.awaiting) {
      count_error(&ErrorCounts::timeout);
      reconnect(c);
    }
  }
}

}  // namespace cm::load
