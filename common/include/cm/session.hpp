#pragma once
/// \file session.hpp
/// The protocol side of one connection, sans I/O: bytes in, plans out, reply bytes out.
///
/// Every model drives a Session the same way, and that loop is all a model adds on top of it:
///
///     read bytes          -> session.received(bytes)
///     while next() gives a plan:
///         execute it      (the model's own idiom: the part that differs)
///         session.write_reply(reply, out, now); write `out`
///         if !session.keep_alive(): lingering close, stop
///
/// Requests are answered one at a time, in order: a pipelined request is not parsed until the one
/// before it has been answered.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "cm/limits.hpp"
#include "cm/request_parser.hpp"
#include "cm/response.hpp"
#include "cm/routes.hpp"

namespace cm {

class Session {
 public:
  /// `server_name` is the Server header ("cm-blocking"); it must outlive the session.
  explicit Session(std::string_view server_name, Limits limits = {});

  /// Hands over bytes read from the connection. They are kept until parsed.
  void received(std::string_view bytes);

  /// The plan for the next request, or nothing until more bytes arrive (or after the connection
  /// has decided to close). A request the parser refuses comes out as a `Now` with a 400/413/431
  /// reply that closes the connection. Call it again only after answering the previous plan.
  std::optional<Plan> next();

  /// Appends the response to the request last returned by next() to `out`.
  void write_reply(const Reply& reply, std::string& out, std::chrono::system_clock::time_point now);

  /// After write_reply(): whether the connection goes on to the next request.
  bool keep_alive() const { return keep_alive_; }
  /// Whether bytes of a request that is not yet whole are buffered (a timeout then gets a 408,
  /// an idle keep-alive connection is just closed).
  bool has_partial_request() const;
  /// The Server header this session writes.
  std::string_view server_name() const { return server_name_; }

 private:
  std::string_view server_name_;
  RequestParser parser_;
  std::string pending_;         // received, not yet parsed
  std::size_t parsed_ = 0;      // bytes of pending_ already fed to the parser
  bool request_keep_alive_ = true;
  bool request_http10_ = false;
  bool keep_alive_ = true;
  bool done_ = false;           // the connection closes after the reply in flight
};

}  // namespace cm
