// session.cpp -- the per-connection protocol state machine shared by every model.

#include "cm/session.hpp"

#include "cm/work.hpp"

#include <optional>
#include <string>
#include <utility>

namespace cm {
namespace {

/// "GET /delay/100", as a trace names a request (the target cut at 80 bytes).
std::string traced_line(const Request& request) {
  return request.method + " " + request.target.substr(0, 80);
}

}  // namespace

Session::Session(std::string_view server_name, std::chrono::milliseconds header_timeout, Moment now,
                 SessionShared* shared, Limits limits)
    : server_name_(server_name),
      shared_(shared),
      header_timeout_(header_timeout),
      deadline_(now.steady + header_timeout),
      parser_(limits) {
  if (shared_ && shared_->trace) {
    tag_ = shared_->trace->connection();
    tag_.trace->instant(tag_.conn, "accept");
  }
}

Session::Session(Session&& other) noexcept
    : server_name_(other.server_name_),
      shared_(std::exchange(other.shared_, nullptr)),
      header_timeout_(other.header_timeout_),
      deadline_(other.deadline_),
      parser_(std::move(other.parser_)),
      pending_(std::move(other.pending_)),
      parsed_(other.parsed_),
      request_keep_alive_(other.request_keep_alive_),
      request_http10_(other.request_http10_),
      request_head_(other.request_head_),
      interim_(other.interim_),
      answering_(std::exchange(other.answering_, false)),
      keep_alive_(other.keep_alive_),
      done_(other.done_),
      answering_wait_(other.answering_wait_),
      tag_(std::exchange(other.tag_, {})),
      request_line_(std::move(other.request_line_)) {}

Session::~Session() {
  if (answering_ && shared_) --shared_->in_flight;  // the connection ended before its answer
  if (tag_) {
    tag_.trace->end_all(tag_.conn);  // a request cut short: its spans end with the connection
    tag_.trace->instant(tag_.conn, "close");
  }
}

Plan Session::give(Plan plan) {
  if (!answering_ && shared_) ++shared_->in_flight;
  answering_ = true;
  if (auto* query = std::get_if<Query>(&plan); query && shared_) query->database = shared_->database;
  return plan;
}

void Session::received(std::string_view bytes) {
  if (done_) return;  // after a closing reply the rest is drained, not parsed
  if (parsed_ == pending_.size()) {
    pending_.clear();
    parsed_ = 0;
  }
  pending_.append(bytes);
  if (tag_) tag_.trace->instant(tag_.conn, "read", "\"bytes\":" + std::to_string(bytes.size()));
}

std::optional<Plan> Session::refuse(Reply reply) {
  if (tag_) request_line_ = "refused, " + std::to_string(reply.status);
  done_ = true;
  answering_wait_ = false;
  request_keep_alive_ = false;
  reply.close = true;
  return give(Now{std::move(reply)});
}

std::optional<Plan> Session::next() {
  if (!tag_) return next_plan();
  const auto start = Trace::Clock::now();
  std::optional<Plan> plan = next_plan();
  if (plan) trace_plan(*plan, start);
  return plan;
}

void Session::trace_plan(const Plan& plan, Trace::Clock::time_point parse_start) {
  tag_.trace->complete(tag_.conn, "parse", parse_start);
  tag_.trace->begin(tag_.conn, interim_ ? "100 Continue" : request_line_,
                    "\"plan\":" + json_string(step_name(plan)));
}

std::optional<Plan> Session::next_plan() {
  if (done_) return std::nullopt;
  for (;;) {
    switch (parser_.state()) {
      case RequestParser::State::expect: {
        // The head asked before sending its body. Refuse it now, unread, if it will be refused
        // (RFC 9110 10.1.1); otherwise ask for the body with a 100 Continue, if one follows.
        const Request& head = parser_.head();
        if (tag_) request_line_ = traced_line(head);
        request_head_ = head.head();
        request_http10_ = false;
        if (auto refusal = refuse_head(head)) return refuse(std::move(*refusal));
        Plan provisional = plan(head);
        if (std::holds_alternative<Now>(provisional) && reply_of(provisional).status >= 400) {
          return refuse(std::move(reply_of(provisional)));
        }
        // Ask only while the body is still to come: a client that sent some of it with its head
        // did not wait, and a late 100 would read as the answer (RFC 9110 10.1.1 lets it go).
        const bool ask = parser_.body_follows() && parsed_ == pending_.size();
        parser_.continue_body();
        if (!ask) continue;  // no body to ask for, or it came already: the request goes on
        interim_ = true;
        return Now{continue_reply()};
      }
      case RequestParser::State::complete: {
        Request request = parser_.take();
        if (tag_) request_line_ = traced_line(request);
        request_keep_alive_ = request.keep_alive;
        request_http10_ = request.version_major == 1 && request.version_minor == 0;
        request_head_ = request.head();
        if (auto refusal = refuse_head(request)) return refuse(std::move(*refusal));
        if (!request_keep_alive_) done_ = true;
        Plan next_plan = plan(request);
        answering_wait_ = std::holds_alternative<Wait>(next_plan);
        if (answering_wait_ && shared_ && shared_->shared_delay_bug) {
          // TEACHING BUG (--teaching-bug shared-delay): the delay goes where every connection
          // of the server writes it, and write_reply() reads it back from there.
          shared_->last_delay_ms.store(std::get<Wait>(next_plan).duration.count());
        }
        return give(std::move(next_plan));
      }
      case RequestParser::State::failed:
        return refuse(protocol_error(parser_.error().status, parser_.error().reason));
      default: break;
    }
    if (parsed_ == pending_.size()) return std::nullopt;
    parsed_ += parser_.feed(std::string_view(pending_).substr(parsed_));
  }
}

void Session::write_reply(const Reply& reply, std::string& out, Moment now) {
  const std::size_t before = out.size();
  const int status = interim_ ? 100 : reply.status;
  compose_reply(reply, out, now);
  if (!tag_) return;
  tag_.trace->end_all(tag_.conn);  // the request, and its step if one was handed away
  tag_.trace->instant(
      tag_.conn, "write",
      "\"status\":" + std::to_string(status) + ",\"bytes\":" + std::to_string(out.size() - before));
}

void Session::write_reply(const Plan& plan, Outcome outcome, std::string& out, Moment now) {
  write_reply(reply_for(plan, outcome), out, now);
}

void Session::compose_reply(const Reply& reply, std::string& out, Moment now) {
  deadline_ = now.steady + header_timeout_;
  if (interim_) {  // 100 Continue: the same request goes on, its body comes next
    interim_ = false;
    out += "HTTP/1.1 100 Continue\r\n\r\n";
    return;
  }
  if (answering_ && shared_) --shared_->in_flight;
  answering_ = false;
  const Reply* answer = &reply;
  std::optional<Reply> wrong;  // only with the teaching bug on
  if (std::exchange(answering_wait_, false) && shared_ && shared_->shared_delay_bug &&
      reply.status == 200) {
    // TEACHING BUG (--teaching-bug shared-delay): the reply answers the last delay any
    // connection parsed -- another request's, when requests overlap -- instead of its own.
    wrong = reply;
    wrong->body = std::to_string(shared_->last_delay_ms.load());
    answer = &*wrong;
  }
  // Draining: the connection closes after this reply, unless a pipelined request is held.
  const bool drained = shared_ && shared_->draining.load() && parsed_ == pending_.size();
  keep_alive_ = request_keep_alive_ && !answer->close && !drained;
  if (!keep_alive_) done_ = true;
  const Persistence persistence = !keep_alive_      ? Persistence::close
                                  : request_http10_ ? Persistence::keep_alive_explicit
                                                    : Persistence::keep_alive;
  serialize(*answer, server_name_, persistence, now.wall, out, /*with_body=*/!request_head_);
}

bool Session::expire(std::string& out, Moment now) {
  if (!has_partial_request()) return false;  // idle keep-alive: closed without a word
  request_keep_alive_ = false;
  write_reply(request_timeout(), out, now);
  return true;
}

bool Session::has_partial_request() const {
  return parser_.state() != RequestParser::State::idle || parsed_ < pending_.size();
}

}  // namespace cm
