// request_parser.cpp -- the llhttp-based request parser.
//
// llhttp is a push parser: it calls back for each piece of the message. Two callbacks return
// HPE_PAUSED so that llhttp_execute() stops exactly where we need to decide something:
//  - on_headers_complete: the head is over. We know its size (for the 431 limit) and the declared
//    Content-Length, so 413 is answered from the headers, before any body byte is read.
//  - on_message_complete: one request is whole. Pipelined bytes after it stay unconsumed until the
//    connection has answered this one (requests are answered one at a time, in order).
// llhttp_get_error_pos() tells where it paused, which is how many bytes were consumed.
//
// Who decides what (RFC 9110/9112): llhttp refuses a malformed request line, a bad chunk, a
// Transfer-Encoding whose chunked is not last ("chunked, gzip"), Content-Length beside chunked. It
// is configured to accept any HTTP/x.y version (LENIENT_VERSION), so that the core answers versions
// (routes.cpp: 505 for a major other than 1; 1.2 is served as 1.1). The rules llhttp 8 lets through
// are checked here: a field line that starts with whitespace (obs-fold) or ':' (an empty field
// name), a Transfer-Encoding without chunked (empty, "gzip"), and forbidden trailer fields.

#include "cm/request_parser.hpp"

#include <llhttp.h>

#include <strings.h>
#include <algorithm>

namespace cm {

std::string_view Request::path() const {
  std::string_view t = std::string_view(target).substr(0, target.find('?'));
  // absolute-form (RFC 9112 3.2.2): "http://host:8080/delay/5" routes as "/delay/5".
  for (std::string_view scheme : {"http://", "https://"}) {
    if (t.size() >= scheme.size() && ::strncasecmp(t.data(), scheme.data(), scheme.size()) == 0) {
      const std::size_t slash = t.find('/', scheme.size());
      return slash == std::string_view::npos ? "/" : t.substr(slash);
    }
  }
  return t;
}

std::string_view Request::header(std::string_view name) const {
  for (const auto& [field, value] : headers) {
    if (field.size() == name.size() && ::strncasecmp(field.data(), name.data(), name.size()) == 0) {
      return value;
    }
  }
  return {};
}

std::size_t Request::count(std::string_view name) const {
  return static_cast<std::size_t>(std::count_if(headers.begin(), headers.end(), [&](const auto& h) {
    return h.first.size() == name.size() &&
           ::strncasecmp(h.first.data(), name.data(), name.size()) == 0;
  }));
}

namespace {
/// Whether a field may not be sent in a trailer section (RFC 9110 6.5.1): framing, routing,
/// request modifiers, authentication and content fields are decided from the head only.
bool forbidden_in_trailer(std::string_view name) {
  auto is = [&](std::string_view other) {
    return name.size() == other.size() &&
           ::strncasecmp(name.data(), other.data(), name.size()) == 0;
  };
  auto starts = [&](std::string_view prefix) {
    return name.size() >= prefix.size() &&
           ::strncasecmp(name.data(), prefix.data(), prefix.size()) == 0;
  };
  for (std::string_view field :
       {"Transfer-Encoding", "Content-Length", "Host", "Authorization", "Proxy-Authorization",
        "Cookie", "Expect", "TE", "Max-Forwards", "Cache-Control", "Pragma", "Range"}) {
    if (is(field)) return true;
  }
  return starts("Content-") || starts("If-");
}
}  // namespace

struct RequestParser::Impl {
  llhttp_t parser{};
  llhttp_settings_t settings{};
  Request request;
  bool in_value = false;        // the last header callback was a value (the next field is new)
  bool body_too_large = false;  // on_body stopped the parser because of the body limit
  std::string trailer_field;    // the trailer field being read: its first 32 bytes judge it
  bool bad_trailer = false;     // on_header_field_complete stopped the parser on a forbidden one
  std::size_t max_body = 0;

  static Impl& self(llhttp_t* p) { return *static_cast<Impl*>(p->data); }

  explicit Impl(std::size_t max_body_bytes) : max_body(max_body_bytes) {
    llhttp_settings_init(&settings);
    settings.on_url = [](llhttp_t* p, const char* at, std::size_t n) {
      self(p).request.target.append(at, n);
      return 0;
    };
    settings.on_header_field = [](llhttp_t* p, const char* at, std::size_t n) {
      Impl& s = self(p);
      if (p->flags & F_TRAILING) {  // a trailer: judged by its name, then dropped
        const std::size_t room = 32 - std::min<std::size_t>(32, s.trailer_field.size());
        s.trailer_field.append(at, std::min(n, room));
        return 0;
      }
      if (s.in_value || s.request.headers.empty()) {
        s.request.headers.emplace_back();
        s.in_value = false;
      }
      s.request.headers.back().first.append(at, n);
      return 0;
    };
    settings.on_header_field_complete = [](llhttp_t* p) {
      Impl& s = self(p);
      if (!(p->flags & F_TRAILING)) return 0;
      s.bad_trailer = forbidden_in_trailer(s.trailer_field);
      if (!s.bad_trailer) s.trailer_field.clear();
      return s.bad_trailer ? -1 : 0;
    };
    settings.on_header_value = [](llhttp_t* p, const char* at, std::size_t n) {
      Impl& s = self(p);
      if (p->flags & F_TRAILING) return 0;
      s.in_value = true;
      s.request.headers.back().second.append(at, n);
      return 0;
    };
    settings.on_headers_complete = [](llhttp_t* p) {
      Impl& s = self(p);
      s.request.method = llhttp_method_name(static_cast<llhttp_method_t>(p->method));
      s.request.version_major = p->http_major;
      s.request.version_minor = p->http_minor;
      s.request.keep_alive = llhttp_should_keep_alive(p) != 0;
      return static_cast<int>(HPE_PAUSED);  // let feed() check the head size and Content-Length
    };
    settings.on_body = [](llhttp_t* p, const char* at, std::size_t n) {
      Impl& s = self(p);
      if (s.request.body.size() + n > s.max_body) {  // chunked bodies are only known as they come
        s.body_too_large = true;
        return -1;
      }
      s.request.body.append(at, n);
      return 0;
    };
    settings.on_message_complete = [](llhttp_t*) {
      return static_cast<int>(HPE_PAUSED);  // one request at a time
    };
    llhttp_init(&parser, HTTP_REQUEST, &settings);
    parser.lenient_flags |= LENIENT_VERSION;  // the core answers versions (505 or served as 1.1)
    parser.data = this;
  }
};

RequestParser::RequestParser(Limits limits)
    : impl_(std::make_unique<Impl>(limits.max_body_bytes)), limits_(limits) {}
RequestParser::~RequestParser() = default;
RequestParser::RequestParser(RequestParser&& other) noexcept = default;
RequestParser& RequestParser::operator=(RequestParser&& other) noexcept = default;
// NOTE: Impl is heap-allocated so that llhttp's back pointer (parser.data) stays valid when the
// RequestParser itself is moved.

void RequestParser::fail(int status, std::string reason) {
  state_ = State::failed;
  error_ = ParseError{status, std::move(reason)};
}

namespace {
// An empty view may hold a null pointer, and llhttp computes `data + len` from what it is given:
// null + 0 is undefined behaviour (clang's UBSan reports it), so zero bytes are an empty string.
const char* not_null(std::string_view bytes) { return bytes.empty() ? "" : bytes.data(); }
}  // namespace

std::size_t RequestParser::feed(std::string_view bytes) {
  switch (state_) {
    case State::idle:
      if (bytes.empty()) return 0;
      state_ = State::head;
      [[fallthrough]];
    case State::head: return feed_head(bytes);
    case State::body: return feed_body(bytes);
    case State::expect:
    case State::complete:
    case State::failed: return 0;
  }
  return 0;
}

std::size_t RequestParser::feed_head(std::string_view bytes) {
  // Never hand llhttp more head than the limit allows: a 64 KiB header is refused after 8 KiB.
  const std::size_t allowance = limits_.max_head_bytes - head_bytes_;
  const std::string_view chunk = bytes.substr(0, allowance);
  const llhttp_errno_t err = llhttp_execute(&impl_->parser, not_null(chunk), chunk.size());
  if (err == HPE_OK) {
    head_bytes_ += chunk.size();
    if (const char* why = bad_field_line(chunk)) {
      fail(400, std::string("malformed request: ") + why);
    } else if (head_bytes_ >= limits_.max_head_bytes) {
      fail(431, "request head larger than " + std::to_string(limits_.max_head_bytes) + " bytes");
    }
    return chunk.size();
  }
  if (err != HPE_PAUSED) {
    // A folded or nameless line before the error is the reason, as it is when a read ends before
    // the error: the answer must not depend on where the reads split the head.
    const std::size_t before = llhttp_get_error_pos(&impl_->parser) - not_null(chunk);
    const char* why = bad_field_line(chunk.substr(0, std::min(before, chunk.size())));
    fail(400, std::string("malformed request: ") + (why ? why : llhttp_errno_name(err)));
    return chunk.size();
  }
  // Paused in on_headers_complete: the head ends here.
  const std::size_t consumed = llhttp_get_error_pos(&impl_->parser) - not_null(chunk);
  head_bytes_ += consumed;
  const llhttp_t& p = impl_->parser;
  const char* why = bad_field_line(chunk.substr(0, consumed));
  line_start_ = false;  // the byte after the head's last LF is the body's
  if (why) {
    fail(400, std::string("malformed request: ") + why);
    return consumed;
  }
  if (impl_->request.count("Transfer-Encoding") > 0 && !(p.flags & F_CHUNKED)) {
    // RFC 9112 6.3: a Transfer-Encoding that does not end in chunked leaves the length unknown.
    fail(400, "malformed request: a Transfer-Encoding that does not end in chunked");
    return consumed;
  }
  if ((p.flags & F_CONTENT_LENGTH) && p.content_length > limits_.max_body_bytes) {
    fail(413, "request body larger than " + std::to_string(limits_.max_body_bytes) + " bytes");
    return consumed;
  }
  llhttp_resume(&impl_->parser);
  if (p.http_major == 1 && p.http_minor == 1 && !impl_->request.header("Expect").empty()) {
    state_ = State::expect;  // the Session decides (100 Continue, 417, or a refusal) first
    return consumed;
  }
  state_ = State::body;
  return consumed + feed_body(bytes.substr(consumed));
}

const char* RequestParser::bad_field_line(std::string_view head) {
  // A field line starts after an LF: look at its first byte, also when the LF ended the last feed.
  std::size_t start = 0;
  if (!line_start_) {
    const std::size_t lf = head.find('\n');
    if (lf == std::string_view::npos) return nullptr;
    start = lf + 1;
  }
  while (start < head.size()) {
    if (head[start] == ' ' || head[start] == '\t') return "a folded header line (obs-fold)";
    if (head[start] == ':') return "an empty field name";
    const std::size_t lf = head.find('\n', start);
    if (lf == std::string_view::npos) {
      line_start_ = false;
      return nullptr;
    }
    start = lf + 1;
  }
  line_start_ = true;  // the bytes ended with an LF: the next feed starts a line
  return nullptr;
}

const Request& RequestParser::head() const { return impl_->request; }

void RequestParser::continue_body() {
  if (state_ != State::expect) return;
  state_ = State::body;
  feed_body({});  // a request without a body completes here, as it would have after its head
}

bool RequestParser::body_follows() const {
  const llhttp_t& p = impl_->parser;
  return (p.flags & F_CHUNKED) || ((p.flags & F_CONTENT_LENGTH) && p.content_length > 0);
}

std::size_t RequestParser::feed_body(std::string_view bytes) {
  // Called with zero bytes right after the head: a request without a body completes then.
  const char* data = not_null(bytes);
  const llhttp_errno_t err = llhttp_execute(&impl_->parser, data, bytes.size());
  if (err == HPE_OK) return bytes.size();
  if (err == HPE_PAUSED || err == HPE_PAUSED_UPGRADE) {
    state_ = State::complete;
    upgrade_ = err == HPE_PAUSED_UPGRADE || impl_->parser.upgrade;
    return llhttp_get_error_pos(&impl_->parser) - data;
  }
  if (impl_->body_too_large) {
    fail(413, "request body larger than " + std::to_string(limits_.max_body_bytes) + " bytes");
  } else if (impl_->bad_trailer) {
    fail(400, "malformed request: " + impl_->trailer_field + " is not allowed in a trailer");
  } else {
    fail(400, std::string("malformed request: ") + llhttp_errno_name(err));
  }
  return bytes.size();
}

Request RequestParser::take() {
  Request done = std::move(impl_->request);
  impl_->request = Request{};
  impl_->in_value = false;
  if (upgrade_) {
    // The bytes after an upgrade request are not HTTP/1: the connection closes after answering.
    done.keep_alive = false;
  } else {
    llhttp_resume(&impl_->parser);
  }
  state_ = State::idle;
  head_bytes_ = 0;
  return done;
}

}  // namespace cm
