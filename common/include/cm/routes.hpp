#pragma once
/// \file routes.hpp
/// The route spec (DESIGN.md) as one pure function from a request to a Plan.
///
/// A Plan says what the request needs before it can be answered -- nothing, a wait, a blocking call
/// or some CPU -- and carries the reply to send when that is done. Executing it is the one thing
/// the four models do differently: each `std::visit`s the Plan in its own idiom.

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "cm/request.hpp"

namespace cm {

/// A response, before serialisation.
struct Reply {
  int status = 200;                                          ///< 200, 400, 404, ...
  std::string content_type = "text/plain";                   ///< Content-Type
  std::string body;                                          ///< the body
  std::vector<std::pair<std::string, std::string>> headers;  ///< extra (Allow, Retry-After)
  bool close = false;  ///< end the connection after this reply, whatever the request asked
};

/// Answer at once.
struct Now {
  Reply reply;
};
/// Answer after a real timer of `duration`; never earlier. Holds no thread in an async model.
struct Wait {
  std::chrono::milliseconds duration;
  Reply reply;
};
/// Answer after a blocking call of `duration` (it stands for a blocking driver).
struct Block {
  std::chrono::milliseconds duration;
  Reply reply;
};
/// Answer after burning `duration` of CPU on the serving thread.
struct Compute {
  std::chrono::microseconds duration;
  Reply reply;
};
/// A query a route asks of the database (cm/database.hpp says which SQL).
struct DbCall {
  enum class Kind { sleep, row };  ///< /db/sleep/{ms}: pg_sleep; /db/row/{id}: one row of World
  Kind kind = Kind::sleep;
  int value = 0;  ///< the ms to sleep, or the row's id
};
class Database;
/// Answer after a query to the database: the reply comes from the row it returns (a 503 until
/// then). `database`, the server's blocking driver, is set by the Session (none: a 503 at once).
struct Query {
  DbCall call;
  Reply reply;
  Database* database = nullptr;
};
/// What a request needs before it can be answered.
using Plan = std::variant<Now, Wait, Block, Compute, Query>;

/// The route spec: which plan answers this request.
Plan plan(const Request& request);

/// The HTTP rules a head must meet before any route (RFC 9110/9112): 505 for a major version other
/// than 1 (a higher 1.x is served as 1.1); 501 for CONNECT (an origin server is no tunnel); 400 for
/// the asterisk-form target in any method but OPTIONS, for an HTTP/1.1 request without exactly one
/// Host, for a Host that is not host[:port] (valid_host) and for an absolute-form target whose
/// authority is not the Host; 417 for an expectation other than 100-continue. Each reply closes the
/// connection. Nothing when the head is fine.
std::optional<Reply> refuse_head(const Request& request);
/// The methods a path allows, as an `Allow` header says them ("GET, HEAD, OPTIONS"); empty for a
/// path no route serves. The 405 of a route and its OPTIONS answer both say this.
std::string_view allowed(std::string_view path);
/// Whether a Host value is RFC 3986's host and optional port: a reg-name without ',' (one host,
/// not a list), an IPv4 address or a bracketed IP literal; no userinfo, no path, not empty.
bool valid_host(std::string_view host);
/// `100 Continue`: the interim answer that asks a client to send the body it announced.
Reply continue_reply();

/// The reply carried by any plan.
const Reply& reply_of(const Plan& plan);
Reply& reply_of(Plan& plan);

/// 503 for a request whose offload pool is full.
Reply service_unavailable();
/// 503 with Retry-After for a request the database cannot answer: none configured, down, slower
/// than --db-timeout, or every connection busy and the queue full.
Reply database_unavailable();
/// 408 for a request whose head did not arrive in time (the connection then closes).
Reply request_timeout();
/// The reply to a request the parser refused (400, 413 or 431); it closes the connection.
Reply protocol_error(int status, std::string reason);

/// The text of a status code ("OK", "Not Found", ...).
std::string_view reason_phrase(int status);

}  // namespace cm
