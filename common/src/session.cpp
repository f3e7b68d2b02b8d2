// session.cpp -- the per-connection protocol state machine shared by every model.

#include "cm/session.hpp"

namespace cm {

Session::Session(std::string_view server_name, Limits limits)
    : server_name_(server_name), parser_(limits) {}

void Session::received(std::string_view bytes) {
  if (done_) return;  // after a closing reply the rest is drained, not parsed
  if (parsed_ == pending_.size()) {
    pending_.clear();
    parsed_ = 0;
  }
  pending_.append(bytes);
}

std::optional<Plan> Session::next() {
  if (done_) return std::nullopt;
  for (;;) {
    switch (parser_.state()) {
      case RequestParser::State::complete: {
        Request request = parser_.take();
        request_keep_alive_ = request.keep_alive;
        request_http10_ = request.version_major == 1 && request.version_minor == 0;
        if (!request_keep_alive_) done_ = true;
        return plan(request);
      }
      case RequestParser::State::failed:
        done_ = true;
        request_keep_alive_ = false;
        return Now{protocol_error(parser_.error().status, parser_.error().reason)};
      default:
        break;
    }
    if (parsed_ == pending_.size()) return std::nullopt;
    parsed_ += parser_.feed(std::string_view(pending_).substr(parsed_));
  }
}

void Session::write_reply(const Reply& reply, std::string& out,
                          std::chrono::system_clock::time_point now) {
  keep_alive_ = request_keep_alive_ && !reply.close;
  if (!keep_alive_) done_ = true;
  const Persistence persistence = !keep_alive_     ? Persistence::close
                                  : request_http10_ ? Persistence::keep_alive_explicit
                                                    : Persistence::keep_alive;
  serialize(reply, server_name_, persistence, now, out);
}

bool Session::has_partial_request() const {
  return parser_.state() == RequestParser::State::head ||
         parser_.state() == RequestParser::State::body || parsed_ < pending_.size();
}

}  // namespace cm
