#pragma once
/// \file session.hpp
/// The protocol side of one connection, sans I/O: bytes in, plans out, reply bytes out, and the
/// header deadline with what its expiry means.
///
/// Every model drives a Session the same way, and that loop is all a model adds on top of it:
///
///     read bytes (until session.deadline())  -> session.received(bytes)
///     while next() gives a plan:
///         execute it      (the model's own idiom: the part that differs)
///         session.write_reply(plan, outcome, out, now); write `out`
///         if !session.keep_alive(): lingering close, stop
///     deadline passed     -> if session.expire(out, now): write `out`, lingering close; else close
///
/// Requests are answered one at a time, in order: a pipelined request is not parsed until the one
/// before it has been answered. An `Expect: 100-continue` request comes out of next() first as a
/// `Now` whose reply is `100 Continue` (an interim reply: write it like any other, then go on), or
/// as its refusal, answered before the body is read.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cm/limits.hpp"
#include "cm/request_parser.hpp"
#include "cm/response.hpp"
#include "cm/routes.hpp"
#include "cm/trace.hpp"

namespace cm {

enum class Outcome;  // work.hpp: how a plan's step ended

/// One instant on both clocks a connection needs: steady for deadlines, the system clock for the
/// Date header. The core never reads a clock; a model passes Moment::now().
struct Moment {
  std::chrono::steady_clock::time_point steady;
  std::chrono::system_clock::time_point wall;
  static Moment now() {
    return {std::chrono::steady_clock::now(), std::chrono::system_clock::now()};
  }
};

/// What the sessions of one server share: whether it drains (a reply then closes its connection
/// once no input is held after it), and the count of requests parsed and not yet answered.
struct SessionShared {
  std::atomic<bool> draining{false};
  std::atomic<std::size_t> in_flight{0};

  /// TEACHING BUG, off by default (`cm-server --teaching-bug shared-delay`, for the exercise in
  /// docs/exercises/): when set, every session stores the delay of each /delay request it parses
  /// in `last_delay_ms`, one value for the whole server, and a /delay reply answers that value
  /// instead of its own. It still waits its own delay, so one request at a time looks right; only
  /// overlapping requests with different delays -- HttpArena's validation -- show it. The request's
  /// state belongs to the request, never to the server: this is what breaking that rule looks like.
  bool shared_delay_bug = false;
  std::atomic<std::int64_t> last_delay_ms{0};  ///< written only when shared_delay_bug is set

  /// cm-server --trace: where every session records its connection's events (null: none).
  Trace* trace = nullptr;
  /// cm-server --db: the blocking driver a Query's perform() runs (null: a Query answers 503).
  Database* database = nullptr;
};

class Session {
 public:
  /// `server_name` is the Server header ("cm-blocking"); it must outlive the session, and so must
  /// `shared` (if given). The first request's head must arrive within `header_timeout` of `now`.
  Session(std::string_view server_name, std::chrono::milliseconds header_timeout, Moment now,
          SessionShared* shared = nullptr, Limits limits = {});
  ~Session();
  Session(Session&& other) noexcept;
  Session& operator=(Session&&) = delete;

  /// Hands over bytes read from the connection. They are kept until parsed.
  void received(std::string_view bytes);

  /// The plan for the next request, or nothing until more bytes arrive (or after the connection
  /// has decided to close). A request the parser refuses comes out as a `Now` with a 400/413/431
  /// reply that closes the connection. Call it again only after answering the previous plan.
  std::optional<Plan> next();

  /// Appends the response to the plan last returned by next() to `out`, and restarts the header
  /// deadline from `now`. A HEAD request's response carries the headers of the GET, no body.
  void write_reply(const Reply& reply, std::string& out, Moment now);
  /// The same, for the plan's step as it came out: its own reply, or a 503 if it was refused
  /// (cm::reply_for); what every model calls once a step is done.
  void write_reply(const Plan& plan, Outcome outcome, std::string& out, Moment now);

  /// After write_reply(): whether the connection goes on to the next request.
  bool keep_alive() const { return keep_alive_; }
  /// When the head of the next request must have arrived (from the accept or the last reply).
  std::chrono::steady_clock::time_point deadline() const { return deadline_; }
  /// The deadline passed. With part of a request buffered, appends a 408 that closes the
  /// connection to `out` and returns true (write it, then a lingering close); an idle keep-alive
  /// connection gets nothing: returns false (close it without a word).
  bool expire(std::string& out, Moment now);
  /// Whether the input held for later (received, not yet parsed) passed max_held_bytes: a model
  /// that reads while it serves stops reading until it has answered (backpressure).
  bool backlogged() const { return pending_.size() - parsed_ >= max_held_bytes; }
  /// The Server header this session writes.
  std::string_view server_name() const { return server_name_; }
  /// This connection in the server's trace (empty without --trace): what a model passes to the
  /// calls that run or hand away a step (venue, perform, CallThreads::start).
  Tag tag() const { return tag_; }

 private:
  bool has_partial_request() const;
  std::optional<Plan> refuse(Reply reply);
  Plan give(Plan plan);  // counts the request in flight
  std::optional<Plan> next_plan();
  void compose_reply(const Reply& reply, std::string& out, Moment now);
  void trace_plan(const Plan& plan, Trace::Clock::time_point parse_start);

  std::string_view server_name_;
  SessionShared* shared_;
  std::chrono::milliseconds header_timeout_;
  std::chrono::steady_clock::time_point deadline_;
  RequestParser parser_;
  std::string pending_;     // received, not yet parsed
  std::size_t parsed_ = 0;  // bytes of pending_ already fed to the parser
  bool request_keep_alive_ = true;
  bool request_http10_ = false;
  bool request_head_ = false;  // HEAD: the reply goes without its body
  bool interim_ = false;       // the plan out is a 100 Continue; the request goes on after it
  bool answering_ = false;     // a request was given out by next() and not yet answered
  bool keep_alive_ = true;
  bool done_ = false;  // the connection closes after the reply in flight

  // The request being answered is a Wait (/delay): the one reply the teaching bug rewrites.
  bool answering_wait_ = false;

  Tag tag_;                   // with --trace: this connection's id in the trace
  std::string request_line_;  // with --trace: "GET /delay/100" of the request being answered
};

}  // namespace cm
