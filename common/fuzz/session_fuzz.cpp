// session_fuzz.cpp -- a libFuzzer target over the sans-I/O core: RequestParser, routes::plan,
// serialize, driven through a cm::Session exactly as a model drives it.
//
// What it shows: the protocol side of a connection needs no socket to be tested. The fuzz input
// is a byte stream and the offsets at which a "read" splits it; the target feeds the chunks to a
// Session (received -> next -> write_reply -> keep_alive), checks every response it writes, plays
// the header timeout at the end (408 for a partial request; an idle session must answer a fresh
// request), then feeds the same stream again in one piece and checks that the bytes out are the
// same: where TCP happens to split a request must never change its answer. The one thing a split
// may add is a `100 Continue` to a read that ended at an `Expect: 100-continue` head.
//
// Input layout (README.md has examples):
//   byte 0        h: h % 16 = k, the number of chunk lengths that follow; h & 0x40 = small limits
//                 (head 256 B, body 64 B), so that 431 and 413 (chunked too) are in reach of short
//                 inputs; h & 0x80 = the offload pool is full (every Block is answered 503).
//                 A seed that starts with '0' is a plain stream with the default limits.
//   bytes 1..k    g_i % 64 = the length of read i (0 is an empty read); the rest is the last read.
//   the rest      the bytes the client sent.
//
// Needs: clang with libFuzzer (-DCM_FUZZ=ON, preset `fuzz`). Try:
//   make fuzz                                                    # 60 s over a copy of the corpus
//   build/fuzz/bin/session_fuzz -runs=0 common/fuzz/corpus      # replay the seeds
// Every build also replays the corpus through this file as the `session_fuzz_corpus` test.
//
// NOTE: when the Session API changes, adapt drive() (construction, write_reply, the end state)
// and check_response(); the invariants themselves stay.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "cm/limits.hpp"
#include "cm/response.hpp"
#include "cm/routes.hpp"
#include "cm/session.hpp"

namespace {

using namespace std::string_view_literals;

/// A broken invariant is a crash: libFuzzer saves the input that caused it.
void require(bool ok, const char* what, std::string_view context = {}) {
  if (ok) return;
  std::fprintf(stderr, "session_fuzz: invariant broken: %s\n", what);
  if (!context.empty()) {
    std::fprintf(stderr, "--- context (%zu bytes) ---\n%.*s\n---\n", context.size(),
                 static_cast<int>(std::min<std::size_t>(context.size(), 2048)), context.data());
  }
  std::abort();
}

const cm::Moment fixed_now{std::chrono::steady_clock::time_point(std::chrono::hours(1)),
                           std::chrono::system_clock::from_time_t(1'700'000'000)};
constexpr std::string_view server_name = "cm-fuzz";
// The interim reply an `Expect: 100-continue` request is asked for its body with.
constexpr std::string_view interim = "HTTP/1.1 100 Continue\r\n\r\n";

std::size_t decimal(std::string_view s, bool& ok) {
  std::size_t value = 0;
  ok = !s.empty() && s.size() < 19;
  for (char c : s) {
    if (c < '0' || c > '9') ok = false;
    value = value * 10 + static_cast<std::size_t>(c - '0');
  }
  return value;
}

/// The route spec's promises about a plan, whatever the request was.
void check_plan(const cm::Plan& plan) {
  const cm::Reply& reply = cm::reply_of(plan);
  require(reply.status >= 100 && reply.status <= 599, "status out of range");
  auto check_step = [&](std::uint64_t amount, std::uint64_t max) {
    require(amount <= max, "a Wait/Block/Compute beyond the route's bound");
    require(reply.status == 200 && reply.body == std::to_string(amount),
            "a delayed reply's body is not its parsed number", reply.body);
  };
  if (const auto* w = std::get_if<cm::Wait>(&plan))
    check_step(w->duration.count(), cm::max_delay_ms);
  if (const auto* b = std::get_if<cm::Block>(&plan))
    check_step(b->duration.count(), cm::max_delay_ms);
  if (const auto* c = std::get_if<cm::Compute>(&plan))
    check_step(c->duration.count(), cm::max_cpu_us);
}

/// One response, as write_reply() appended it: a status line with a known reason, well-formed
/// header lines, exactly one each of Server, Date, Content-Type and Content-Length, that length
/// equal to the body that follows (the reply's own body), and `Connection: close` exactly when
/// the session says the connection ends.
void check_response(std::string_view response, const cm::Reply& reply, bool keep_alive) {
  require(response.starts_with("HTTP/1.1 "), "a response does not start with \"HTTP/1.1 \"",
          response);
  const std::size_t head_end = response.find("\r\n\r\n");
  require(head_end != std::string_view::npos, "a response head without its blank line", response);
  const std::string_view head = response.substr(0, head_end + 2);  // every line ends with CRLF
  const std::string_view body = response.substr(head_end + 4);

  std::size_t line_end = head.find("\r\n");
  const std::string_view status_line = head.substr(0, line_end);
  const std::string expected_status = "HTTP/1.1 " + std::to_string(reply.status) + " ";
  require(status_line.starts_with(expected_status), "the status line is not the reply's status",
          response);
  const std::string_view reason = status_line.substr(expected_status.size());
  require(!reason.empty() && reason != "Unknown", "a status without its reason phrase", response);

  int servers = 0, dates = 0, types = 0, lengths = 0, closes = 0;
  std::string_view content_length;
  for (std::size_t pos = line_end + 2; pos < head.size(); pos = line_end + 2) {
    line_end = head.find("\r\n", pos);
    const std::string_view line = head.substr(pos, line_end - pos);
    const std::size_t colon = line.find(": ");
    require(colon != std::string_view::npos && colon > 0, "a header line without \"name: \"",
            response);
    require(line.find_first_of("\r\n\0"sv) == std::string_view::npos,
            "a CR, LF or NUL inside a header line", response);
    const std::string_view name = line.substr(0, colon), value = line.substr(colon + 2);
    require(name.find_first_of(" \t:") == std::string_view::npos, "a header name that is no token",
            response);
    if (name == "Server") {
      ++servers;
      require(value == server_name, "a Server header that is not the session's", response);
    }
    if (name == "Date") ++dates;
    if (name == "Content-Type") ++types;
    if (name == "Content-Length") {
      ++lengths;
      content_length = value;
    }
    if (name == "Connection") closes += value == "close" ? 1 : 0;
  }
  require(servers == 1 && dates == 1 && types == 1 && lengths == 1,
          "not exactly one each of Server, Date, Content-Type and Content-Length", response);
  bool numeric = false;
  // The answer to a HEAD carries the GET's Content-Length and no body (the driver does not see
  // the request's method, so an empty body is accepted where the reply has one).
  require(decimal(content_length, numeric) == reply.body.size() && numeric,
          "Content-Length is not the size of the reply's body", response);
  require(body == reply.body || body.empty(), "the body written is not the reply's body", response);
  require((closes == 1) == !keep_alive, "Connection: close disagrees with keep_alive()", response);
}

/// How the driver plays the model's part.
struct Script {
  cm::Limits limits;
  bool pool_full = false;  // every Block is refused with 503, as a model with a full pool does
};

/// What one pass over the stream produced.
struct Outcome {
  std::string out;              // every byte written, in order
  std::size_t answered = 0;     // requests of the stream answered
  bool closed = false;          // a reply ended the connection
  bool partial_at_end = false;  // has_partial_request() after the last read (if still open)
};

/// Feeds `reads` one after the other, the way every model does, checking as it goes; then, if
/// the connection is still open, plays the header timeout: a partial request gets its 408; an
/// idle connection must read the next request from its first byte.
Outcome drive(const std::vector<std::string_view>& reads, const Script& script) {
  cm::SessionShared shared;
  cm::Session session(server_name, std::chrono::seconds(10), fixed_now, &shared, script.limits);
  Outcome o;
  auto answer = [&](const cm::Reply& reply) {
    const std::size_t before = o.out.size();
    session.write_reply(reply, o.out, fixed_now);
    check_response(std::string_view(o.out).substr(before), reply, session.keep_alive());
    if (!session.keep_alive()) o.closed = true;  // a model would now close; keep feeding anyway
  };
  for (std::string_view read : reads) {
    session.received(read);
    while (auto plan = session.next()) {
      require(!o.closed, "next() gave a plan after a reply that closed the connection");
      check_plan(*plan);
      if (cm::reply_of(*plan).status == 100) {  // Expect: 100-continue: an interim reply first
        const std::size_t before = o.out.size();
        session.write_reply(cm::reply_of(*plan), o.out, fixed_now);
        require(o.out.substr(before) == interim, "a malformed 100");
        require(session.keep_alive(), "a 100 Continue closed the connection");
        continue;
      }
      ++o.answered;
      const bool refused = script.pool_full && std::holds_alternative<cm::Block>(*plan);
      answer(refused ? cm::service_unavailable() : cm::reply_of(*plan));
    }
  }
  if (o.closed) return o;

  const std::size_t before = o.out.size();
  o.partial_at_end = session.expire(o.out, fixed_now);  // the header deadline passes
  if (o.partial_at_end) {
    check_response(std::string_view(o.out).substr(before), cm::request_timeout(), false);
    require(!session.keep_alive(), "a 408 left the connection open");
    o.closed = true;
  } else {
    session.received("GET /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n");
    auto plan = session.next();
    require(plan && cm::reply_of(*plan).body == "Hello, World!",
            "an idle session did not answer the next request as sent", o.out);
    answer(cm::reply_of(*plan));
  }
  require(!session.next(), "next() gave a plan with nothing left to parse");
  require(shared.in_flight.load() == 0, "a request answered is still counted in flight");
  return o;
}

// The interim reply has no border (no proper prefix of it is also its suffix), so its copies in
// a stream never overlap, and one written between two responses never joins the bytes around it
// into another: counting and removing the copies reads the interim replies, wherever an echoed
// body holds the same bytes (it does so in both passes alike).
std::size_t interims(std::string_view out) {
  std::size_t count = 0;
  for (std::size_t at = out.find(interim); at != std::string_view::npos;
       at = out.find(interim, at + interim.size())) {
    ++count;
  }
  return count;
}

std::string without_interims(std::string_view out) {
  std::string kept;
  for (std::size_t at = out.find(interim); at != std::string_view::npos; at = out.find(interim)) {
    kept += out.substr(0, at);
    out.remove_prefix(at + interim.size());
  }
  kept += out;
  return kept;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const unsigned header = static_cast<unsigned char>(input[0]);
  const std::size_t splits = std::min<std::size_t>(header % 16, input.size() - 1);
  Script script;
  if (header & 0x40) script.limits = cm::Limits{.max_head_bytes = 256, .max_body_bytes = 64};
  script.pool_full = (header & 0x80) != 0;
  const std::string_view stream = input.substr(1 + splits);

  std::vector<std::string_view> reads;
  std::size_t at = 0;
  for (std::size_t i = 0; i < splits; ++i) {
    const std::size_t length =
        std::min<std::size_t>(static_cast<unsigned char>(input[1 + i]) % 64, stream.size() - at);
    reads.push_back(stream.substr(at, length));
    at += length;
  }
  reads.push_back(stream.substr(at));

  const Outcome split = drive(reads, script);

  // Every request ends its request line and its head with a line feed; only the one refused
  // (400/413/431, which closes) can be answered with fewer.
  const auto line_feeds = static_cast<std::size_t>(std::count(stream.begin(), stream.end(), '\n'));
  require(split.answered <= line_feeds / 2 + 1, "more answers than the stream holds requests");

  if (splits > 0) {
    // A 100 Continue is asked only while the body is still to come (RFC 9110 10.1.1): a read
    // that ends at the head of an `Expect: 100-continue` request gets one, the same head with its
    // body in one read does not. The split can only add such interim replies, never drop one, and
    // with them set aside the bytes out are the same.
    const Outcome whole = drive({stream}, script);
    require(interims(whole.out) <= interims(split.out),
            "the stream in one read asked for a body the split had sent", split.out);
    require(without_interims(whole.out) == without_interims(split.out),
            "the split of the stream changed the bytes out", split.out);
    require(whole.closed == split.closed, "the split of the stream changed whether it closes");
    require(whole.partial_at_end == split.partial_at_end,
            "the split of the stream changed has_partial_request()");
  }
  return 0;
}
