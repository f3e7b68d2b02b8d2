// conformance_test.cpp -- every built model, through the same cases.
//
// Each test starts the model in process on port 0 and talks to it with a raw-socket client, so the
// cases see exactly the bytes a real client would. A model joins the suite by being registered
// (cmake/cm_models.cmake); nothing here names a model.
//
// Nothing here asserts a speed. Times appear only as lower bounds the spec demands (a /delay/{ms}
// is never answered before {ms}) and as orderings (a /delay/0 is answered while a long delay is
// still pending).

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <memory>
#include <numeric>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include "cm/registry.hpp"
#include "http_client.hpp"
#include "models.hpp"

namespace cm::test {
namespace {

using Clock = std::chrono::steady_clock;

class Conformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { start_server(ServerOptions{}); }
  void TearDown() override {
    if (server_) server_->stop();
  }

  void start_server(ServerOptions options) {
    if (server_) server_->stop();
    options.host = "127.0.0.1";
    options.port = 0;
    options.timers = timers_of(GetParam());
    server_ = make_server(model_of(GetParam()), options);
    try {
      server_->start();
    } catch (const ModelUnavailable& e) {
      server_.reset();
      GTEST_SKIP() << GetParam() << " cannot run here: " << e.what();
    }
  }

  std::uint16_t port() const { return server_->port(); }
  Client connect() { return Client::connect(port()); }
  std::string server_header() const { return "cm-" + model_of(GetParam()); }

  /// One request on a fresh connection; fails the test if no response comes.
  Response exchange(std::string_view request) {
    Client c = connect();
    EXPECT_TRUE(c.send(request));
    auto r = c.read_response();
    EXPECT_TRUE(r.has_value()) << "no response to: " << request.substr(0, 80);
    return r.value_or(Response{});
  }

  /// Waits (bounded) until the server holds `n` connections or fewer; returns what it holds.
  std::size_t wait_for_connections_at_most(std::size_t n, std::chrono::seconds limit = 10s) {
    const auto deadline = Clock::now() + limit;
    while (server_->open_connections() > n && Clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
    }
    return server_->open_connections();
  }

  void expect_text(const Response& r, int status, std::string_view body) {
    EXPECT_EQ(r.status, status);
    EXPECT_EQ(r.body, body);
    EXPECT_EQ(r.header("Content-Type"), "text/plain");
  }

  /// `request` gets `status` and the connection closes after it; the server goes on serving.
  void expect_refused(std::string_view request, int status) {
    {
      Client c = connect();
      ASSERT_TRUE(c.send(request));
      auto r = c.read_response();
      ASSERT_TRUE(r) << request;
      EXPECT_EQ(r->status, status) << request;
      EXPECT_EQ(r->header("Connection"), "close") << request;
      EXPECT_TRUE(c.closed_by_peer()) << request;
    }
    expect_text(exchange(get_request("/plaintext")), 200, "Hello, World!");
  }

  std::unique_ptr<Server> server_;
};

// --- every route and status ---------------------------------------------------------------------

TEST_P(Conformance, PlaintextCarriesEveryRequiredHeader) {
  const Response r = exchange(get_request("/plaintext"));
  expect_text(r, 200, "Hello, World!");
  EXPECT_EQ(r.version, "HTTP/1.1");
  EXPECT_EQ(r.header("Content-Length"), "13");
  EXPECT_EQ(r.header("Server"), server_header());
  ASSERT_TRUE(r.header("Date").has_value());
  EXPECT_TRUE(
      std::regex_match(*r.header("Date"), std::regex(R"([A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} )"
                                                     R"(\d{2}:\d{2}:\d{2} GMT)")))
      << *r.header("Date");
  EXPECT_EQ(r.count("Connection"), 0u) << "HTTP/1.1 keep-alive needs no Connection header";
}

TEST_P(Conformance, DelayAnswersItsValueNeverEarly) {
  Client c = connect();
  const auto sent = Clock::now();
  ASSERT_TRUE(c.send(get_request("/delay/250")));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  expect_text(*r, 200, "250");
  EXPECT_GE(r->received_at - sent, 250ms);
}

TEST_P(Conformance, DelayNormalisesLeadingZeros) {
  expect_text(exchange(get_request("/delay/007")), 200, "7");
  expect_text(exchange(get_request("/delay/0000")), 200, "0");
}

TEST_P(Conformance, DelayRejectsWhatIsNotDecimalDigitsInRange) {
  for (const char* bad :
       {"/delay/abc", "/delay/-5", "/delay/+5", "/delay/1.5", "/delay/", "/delay/60001",
        "/delay/99999999999999999999999999", "/delay/1e3", "/delay/%31", "/delay/5/6", "/delay"}) {
    const Response r = exchange(get_request(bad));
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_EQ(r.header("Content-Type"), "text/plain") << bad;
    EXPECT_FALSE(r.body.empty()) << bad;
    EXPECT_EQ(std::count(r.body.begin(), r.body.end(), '\n'), 1) << "one line: " << r.body;
  }
  expect_text(exchange(get_request("/plaintext")), 200, "Hello, World!");  // still serving
}

TEST_P(Conformance, BlockAndCpuAnswerTheirValue) {
  Client c = connect();
  const auto sent = Clock::now();
  ASSERT_TRUE(c.send(get_request("/block/50")));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  expect_text(*r, 200, "50");
  EXPECT_GE(r->received_at - sent, 50ms);

  expect_text(exchange(get_request("/cpu/2000")), 200, "2000");
  expect_text(exchange(get_request("/cpu/0")), 200, "0");
  EXPECT_EQ(exchange(get_request("/cpu/1000001")).status, 400);
  EXPECT_EQ(exchange(get_request("/block/60001")).status, 400);
  EXPECT_EQ(exchange(get_request("/block/x")).status, 400);
}

TEST_P(Conformance, EchoReturnsTheBodyByteForByte) {
  std::string body;
  for (int i = 0; i < 256 * 40; ++i)
    body += static_cast<char>(i % 256);
  const Response r = exchange(post_request("/echo", body));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Content-Type"), "application/octet-stream");
  EXPECT_EQ(r.body, body);
  EXPECT_EQ(exchange(post_request("/echo", "")).body, "");
}

TEST_P(Conformance, EchoAcceptsAChunkedBody) {
  const std::string request =
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n1;ext=1\r\n,\r\n6\r\n world\r\n0\r\nTrailer: yes\r\n\r\n";
  const Response r = exchange(request);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello, world");
}

TEST_P(Conformance, EchoAcceptsExactlyTheBodyLimit) {
  const std::string body(1024 * 1024, 'b');
  const Response r = exchange(post_request("/echo", body));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body.size(), body.size());
}

TEST_P(Conformance, WrongMethodIs405WithAllow) {
  Response r = exchange(post_request("/plaintext", "x"));
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("Allow"), "GET, HEAD, OPTIONS");
  r = exchange(get_request("/echo"));
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("Allow"), "POST, OPTIONS");
  r = exchange("DELETE /delay/5 HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("Allow"), "GET, HEAD, OPTIONS");
}

TEST_P(Conformance, UnknownPathIs404) {
  for (const char* path : {"/nope", "/", "/plaintext/", "/PLAINTEXT", "/delayed/5"}) {
    EXPECT_EQ(exchange(get_request(path)).status, 404) << path;
  }
  EXPECT_EQ(exchange(get_request("/plaintext?x=1")).status, 200) << "the query is not the path";
}

// --- HTTP semantics every model gets from the core
// ------------------------------------------------

TEST_P(Conformance, HeadIsGetWithoutTheBody) {
  for (const char* path : {"/plaintext", "/delay/20"}) {
    Client c = connect();
    ASSERT_TRUE(c.send(std::string("HEAD ") + path + " HTTP/1.1\r\nHost: x\r\n\r\n" +
                       get_request("/plaintext")));
    // The client reads the head; a body, if the server sent one, would be read as the start of
    // the next response and fail to parse as one.
    auto head = c.read_response_to_head();
    ASSERT_TRUE(head) << path;
    EXPECT_EQ(head->status, 200) << path;
    const std::string expected = std::string(path) == "/plaintext" ? "13" : "2";
    EXPECT_EQ(head->header("Content-Length"), expected) << "the GET's length, " << path;
    auto next = c.read_response();
    ASSERT_TRUE(next) << "the response after a HEAD answer must start right after its head";
    EXPECT_EQ(next->body, "Hello, World!");
  }
}

TEST_P(Conformance, AbsoluteFormTargetRoutesLikeOriginForm) {
  const Response r =
      exchange("GET http://localhost:8080/delay/3?x=1 HTTP/1.1\r\nHost: localhost\r\n\r\n");
  expect_text(r, 200, "3");
}

TEST_P(Conformance, UnsupportedVersionIs505ThenClose) {
  for (const char* version : {"HTTP/2.0", "HTTP/9.9", "HTTP/0.9"}) {
    expect_refused(std::string("GET /plaintext ") + version + "\r\nHost: x\r\n\r\n", 505);
  }
}

// RFC 9112 2.3: a higher minor version of HTTP/1 is answered as HTTP/1.1 (it was a 400 from
// llhttp, which is now configured to let the core judge versions: LENIENT_VERSION).
TEST_P(Conformance, HigherHttp1MinorVersionIsServedAsHttp11) {
  Client c = connect();
  ASSERT_TRUE(c.send("GET /plaintext HTTP/1.2\r\nHost: x\r\n\r\n" + get_request("/delay/1")));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->version, "HTTP/1.1");
  EXPECT_EQ(r->body, "Hello, World!");
  auto next = c.read_response();
  ASSERT_TRUE(next) << "the connection is kept, as HTTP/1.1's";
  EXPECT_EQ(next->body, "1");
  expect_refused("GET /plaintext HTTP/1.2\r\n\r\n", 400);  // as HTTP/1.1: it needs a Host
}

// RFC 9112 3.2 and RFC 3986 3.2: Host is one host and an optional port. Decided in routes.cpp.
TEST_P(Conformance, HostThatIsNotHostAndPortIs400ThenClose) {
  for (const char* host : {"user@x", "user:secret@x", "x/path", "", "a, b", "x:80x"}) {
    expect_refused(std::string("GET /plaintext HTTP/1.1\r\nHost: ") + host + "\r\n\r\n", 400);
  }
  for (const char* host : {"x", "localhost:8080", "127.0.0.1", "[::1]:80"}) {
    expect_text(exchange(std::string("GET /plaintext HTTP/1.1\r\nHost: ") + host + "\r\n\r\n"),
                200, "Hello, World!");
  }
}

// RFC 9112 5: a field name is at least one character. llhttp 8 passes ": value" as an empty name;
// the parser refuses it (RequestParser::bad_field_line).
TEST_P(Conformance, EmptyFieldNameIs400ThenClose) {
  expect_refused("GET /plaintext HTTP/1.1\r\nHost: x\r\n: empty\r\n\r\n", 400);
}

// RFC 9112 5.2: a server may refuse obs-fold with a 400 (nginx does) or unfold it; this one
// refuses. llhttp 8 unfolds; the parser refuses it (RequestParser::bad_field_line).
TEST_P(Conformance, FoldedHeaderLineIs400ThenClose) {
  expect_refused("GET /plaintext HTTP/1.1\r\nHost: x\r\nX-A: one\r\n two\r\n\r\n", 400);
  expect_refused("GET /plaintext HTTP/1.1\r\nHost: x\r\nX-A: one\r\n\ttwo\r\n\r\n", 400);
}

// RFC 9112 6.3: a Transfer-Encoding present whose last coding is not chunked: 400 and close. The
// parser refuses an empty or chunk-less one (llhttp 8 frames it by Content-Length); llhttp
// refuses "chunked, gzip" itself.
TEST_P(Conformance, TransferEncodingNotEndingInChunkedIs400ThenClose) {
  for (const char* coding : {"", "gzip", "chunked, gzip"}) {
    expect_refused(std::string("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ") + coding +
                       "\r\nContent-Length: 3\r\n\r\nabc",
                   400);
  }
}

// RFC 9110 6.5.1: no framing, routing, authentication or content field in a trailer. The parser
// refuses them (on_header_field_complete, in the trailer section); another trailer is dropped.
TEST_P(Conformance, ForbiddenTrailerFieldIs400ThenClose) {
  const std::string chunked =
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n";
  for (const char* field :
       {"Content-Length: 3", "Authorization: Basic eA==", "Content-Type: x/y"}) {
    expect_refused(chunked + field + "\r\n\r\n", 400);
  }
  const Response r = exchange(chunked + "X-Checksum: 1\r\n\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "abc");
}

// RFC 9112 3.2.2 says an origin server takes the host of an absolute-form target and ignores
// Host; this server refuses a request whose two hosts disagree (which one would a front end have
// routed by?), and serves one whose hosts agree (AbsoluteFormTargetRoutesLikeOriginForm).
TEST_P(Conformance, AbsoluteFormTargetThatContradictsHostIs400ThenClose) {
  expect_refused("GET http://a.example/plaintext HTTP/1.1\r\nHost: b.example\r\n\r\n", 400);
}

// RFC 9112 3.2.4: the asterisk form is for OPTIONS only.
TEST_P(Conformance, AsteriskFormIsForOptionsOnly) {
  expect_refused("GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400);
  const Response r = exchange("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Allow"), "GET, HEAD, POST, OPTIONS");
  EXPECT_EQ(r.header("Content-Length"), "0");
}

// RFC 9110 9.3.7: an origin server answers OPTIONS with what the target allows -- the Allow of
// the route spec, the one a 405 carries -- and the connection goes on.
TEST_P(Conformance, OptionsOnEveryRouteAnswersItsAllowAndKeepsTheConnection) {
  Client c = connect();
  for (const auto& [path, allow] :
       {std::pair{"/plaintext", "GET, HEAD, OPTIONS"}, {"/echo", "POST, OPTIONS"},
        {"/delay/5", "GET, HEAD, OPTIONS"}, {"/block/5", "GET, HEAD, OPTIONS"},
        {"/cpu/5", "GET, HEAD, OPTIONS"}}) {
    ASSERT_TRUE(c.send(std::string("OPTIONS ") + path + " HTTP/1.1\r\nHost: x\r\n\r\n"));
    auto r = c.read_response();
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
    EXPECT_EQ(r->header("Allow"), allow) << path;
    EXPECT_EQ(r->body, "") << path;
  }
  ASSERT_TRUE(c.send("OPTIONS /nope HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
}

// RFC 9110 9.3.6: CONNECT asks for a tunnel, which an origin server does not make: 501.
TEST_P(Conformance, ConnectIs501ThenClose) {
  expect_refused("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", 501);
}

TEST_P(Conformance, Http11WithoutExactlyOneHostIs400) {
  for (const char* request : {"GET /plaintext HTTP/1.1\r\n\r\n",
                              "GET /plaintext HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"}) {
    Client c = connect();
    ASSERT_TRUE(c.send(request));
    auto r = c.read_response();
    ASSERT_TRUE(r) << request;
    EXPECT_EQ(r->status, 400) << request;
    EXPECT_TRUE(c.closed_by_peer()) << request;
  }
  expect_text(exchange("GET /plaintext HTTP/1.0\r\n\r\n"), 200, "Hello, World!");
}

TEST_P(Conformance, ExpectContinueGets100BeforeTheBodyIsSent) {
  Client c = connect();
  ASSERT_TRUE(
      c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n"
             "Expect: 100-continue\r\n\r\n"));
  auto interim = c.read_response(5s);  // nothing of the body was sent: the server must ask for it
  ASSERT_TRUE(interim) << "no 100 Continue before the body";
  EXPECT_EQ(interim->status, 100);
  ASSERT_TRUE(c.send("hello world"));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello world");
}

TEST_P(Conformance, ExpectContinueOnARefusedRequestIsAnsweredAtOnce) {
  for (const char* head : {"POST /nope HTTP/1.1\r\n", "POST /plaintext HTTP/1.1\r\n",
                           "POST /echo HTTP/1.1\r\nX-Big: no\r\n"}) {
    const bool too_big = std::string_view(head).find("X-Big") != std::string_view::npos;
    Client c = connect();
    ASSERT_TRUE(c.send(std::string(head) + "Host: x\r\nExpect: 100-continue\r\nContent-Length: " +
                       (too_big ? "104857600" : "5") + "\r\n\r\n"));
    auto r = c.read_response(5s);  // the body is never sent
    ASSERT_TRUE(r) << head;
    EXPECT_TRUE(r->status == 404 || r->status == 405 || r->status == 413) << r->status;
    EXPECT_EQ(r->header("Connection"), "close") << head;
    EXPECT_TRUE(c.closed_by_peer()) << head;
  }
}

TEST_P(Conformance, AnotherExpectationIs417) {
  Client c = connect();
  ASSERT_TRUE(
      c.send("POST /echo HTTP/1.1\r\nHost: x\r\nExpect: something-else\r\n"
             "Content-Length: 2\r\n\r\nhi"));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 417);
  EXPECT_TRUE(c.closed_by_peer());
}

// --- framing ----------------------------------------------------------------------------------

TEST_P(Conformance, RequestSplitAtEveryByteOffset) {
  const std::string requests[] = {
      get_request("/delay/1", "User-Agent: split-test\r\n"),
      post_request("/echo", "split body"),
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
  };
  const std::string expected[] = {"1", "split body", "abc"};
  Client c = connect();
  for (std::size_t k = 0; k < std::size(requests); ++k) {
    const std::string& req = requests[k];
    for (std::size_t offset = 1; offset < req.size(); ++offset) {
      ASSERT_TRUE(c.send(std::string_view(req).substr(0, offset)));
      std::this_thread::sleep_for(1ms);  // let the first part arrive (and be read) on its own
      ASSERT_TRUE(c.send(std::string_view(req).substr(offset)));
      auto r = c.read_response();
      ASSERT_TRUE(r) << "request " << k << " split at " << offset;
      ASSERT_EQ(r->status, 200) << "request " << k << " split at " << offset;
      ASSERT_EQ(r->body, expected[k]) << "request " << k << " split at " << offset;
    }
  }
}

TEST_P(Conformance, RequestSentOneByteAtATime) {
  const std::string req = post_request("/echo", "byte by byte");
  Client c = connect();
  for (char ch : req)
    ASSERT_TRUE(c.send(std::string_view(&ch, 1)));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "byte by byte");
}

TEST_P(Conformance, PipelinedRequestsAnsweredInOrder) {
  Client c = connect();
  ASSERT_TRUE(c.send(get_request("/delay/60") + get_request("/plaintext") +
                     post_request("/echo", "third")));
  auto first = c.read_response(), second = c.read_response(), third = c.read_response();
  ASSERT_TRUE(first && second && third);
  EXPECT_EQ(first->body, "60");
  EXPECT_EQ(second->body, "Hello, World!");
  EXPECT_EQ(third->body, "third");
}

TEST_P(Conformance, FiftyRequestsOnOneKeepAliveConnection) {
  Client c = connect();
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(c.send(get_request("/delay/" + std::to_string(i % 3))));
    auto r = c.read_response();
    ASSERT_TRUE(r) << "request " << i;
    EXPECT_EQ(r->body, std::to_string(i % 3));
    EXPECT_EQ(r->count("Connection"), 0u);
  }
  EXPECT_FALSE(c.closed_by_peer(50ms));
}

TEST_P(Conformance, Http10ClosesByDefault) {
  Client c = connect();
  ASSERT_TRUE(c.send("GET /plaintext HTTP/1.0\r\n\r\n"));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->header("Connection"), "close");
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_P(Conformance, Http10KeepAliveWhenAsked) {
  Client c = connect();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.send("GET /plaintext HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    auto r = c.read_response();
    ASSERT_TRUE(r) << "request " << i;
    EXPECT_EQ(r->header("Connection"), "keep-alive");
  }
}

TEST_P(Conformance, ConnectionCloseIsHonoured) {
  Client c = connect();
  ASSERT_TRUE(c.send(get_request("/delay/5", "Connection: close\r\n")));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "5");
  EXPECT_EQ(r->header("Connection"), "close");
  EXPECT_TRUE(c.closed_by_peer());
}

// --- bad input: a clear error, then the server goes on ------------------------------------------

TEST_P(Conformance, GarbageIs400ThenClose) {
  for (const char* garbage :
       {"HELLO\r\n\r\n", "GET / HTTP/1\r\n\r\n", "\x01\x02\x03\x04\r\n\r\n",
        "GET /plaintext HTTP/1.1\r\nBad Header\r\n\r\n",
        "POST /echo HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        // a bare CR is no line end (llhttp left lenient took it for one: a smuggling shape)
        "GET /plaintext HTTP/1.1\r\nHost:\r\r\r\r\nX: y\r\n\r\n",
        "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\rx0\r\n\r\n"}) {
    Client c = connect();
    ASSERT_TRUE(c.send(garbage));
    auto r = c.read_response();
    ASSERT_TRUE(r) << garbage;
    EXPECT_EQ(r->status, 400) << garbage;
    EXPECT_EQ(r->header("Connection"), "close");
    EXPECT_TRUE(c.closed_by_peer()) << garbage;
  }
  expect_text(exchange(get_request("/plaintext")), 200, "Hello, World!");
}

TEST_P(Conformance, HugeHeaderIs431AndTheClientReceivesIt) {
  Client c = connect();
  const std::string request =
      "GET /plaintext HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(64 * 1024, 'a') + "\r\n\r\n";
  ASSERT_TRUE(c.send(request));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 431);
  EXPECT_EQ(r->header("Connection"), "close");
  EXPECT_TRUE(c.closed_by_peer());
  expect_text(exchange(get_request("/plaintext")), 200, "Hello, World!");
}

TEST_P(Conformance, HugeDeclaredBodyIs413BeforeTheBodyIsSent) {
  Client c = connect();
  ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\n"));
  auto r = c.read_response();  // not one byte of the body was sent
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(r->header("Connection"), "close");
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_P(Conformance, ChunkedBodyOverTheLimitIs413) {
  Client c = connect();
  ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
  const std::string chunk = "10000\r\n" + std::string(0x10000, 'c') + "\r\n";
  std::optional<Response> r;
  for (int i = 0; i < 17 && c.send(chunk); ++i) {
  }
  r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_P(Conformance, PartialHeadTimesOutWith408AndIdleConnectionIsClosed) {
  ServerOptions options;
  options.header_timeout = 300ms;
  start_server(options);
  if (!server_) return;
  Client partial = connect();
  Client idle = connect();
  ASSERT_TRUE(partial.send("GET /plaintext HTTP/1.1\r\nHo"));
  auto r = partial.read_response(5s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 408);
  EXPECT_TRUE(partial.closed_by_peer());
  EXPECT_TRUE(idle.closed_by_peer()) << "an idle connection must not hold the server forever";
}

TEST_P(Conformance, ARequestSentBeforeItsDeadlineIsAnsweredThoughTheLoopReadsItLate) {
  // The header deadline is the client's: a request that came in time but sat unread while the
  // loop was busy (a /delay slept on the loop, --wait-mode sleep) is answered, not cut as a slow
  // client. libuv runs due timers before it polls (this case); Asio takes in at most 128
  // readinesses per turn of its reactor (it took 2,000 connections from cm-load, with a 10 s
  // deadline and 10 ms slept per request, for half of them to be cut with a request unread).
  ServerOptions options;
  options.threads = 1;  // one loop (or one worker): the sleep holds the other request unread
  options.header_timeout = 300ms;
  options.wait_mode = WaitMode::sleep;
  start_server(options);
  if (!server_) return;
  Client on_time = connect();  // its header deadline runs from its accept
  Client busy = connect();
  std::this_thread::sleep_for(50ms);  // both accepted, each waiting for its request
  ASSERT_TRUE(busy.send("GET /delay/800 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  std::this_thread::sleep_for(100ms);                    // the loop sleeps in /delay/800
  ASSERT_TRUE(on_time.send(get_request("/plaintext")));  // 150 ms in: before its deadline
  auto r = on_time.read_response(5s);
  ASSERT_TRUE(r) << "a request sent before its deadline was cut when the loop read it late";
  expect_text(*r, 200, "Hello, World!");
  auto slept = busy.read_response(5s);
  ASSERT_TRUE(slept);
  expect_text(*slept, 200, "800");
}

// --- waiting requests ---------------------------------------------------------------------------

TEST_P(Conformance, ClientsLeavingMidDelayAreFreed) {
  const std::size_t before = server_->open_connections();
  {
    std::vector<Client> leaving;
    for (int i = 0; i < 20; ++i) {
      leaving.push_back(connect());
      ASSERT_TRUE(leaving.back().send(get_request("/delay/300")));
    }
    std::this_thread::sleep_for(50ms);  // the requests are parsed and waiting
  }                                     // every client closes here, in the middle of its wait
  expect_text(exchange(get_request("/plaintext")), 200, "Hello, World!");
  EXPECT_EQ(wait_for_connections_at_most(before), before)
      << "connections whose clients left are still held";
  expect_text(exchange(get_request("/delay/1")), 200, "1");
}

/// HttpArena's validation: 32 overlapping requests, 32 different delays, each on its own
/// connection, all sent before any is answered. Returns each delay with the response it got.
std::vector<std::pair<int, Response>> overlapping_delays(std::uint16_t port) {
  std::vector<int> delays(32);
  std::iota(delays.begin(), delays.end(), 0);
  for (int& d : delays)
    d = 40 + d * 13;
  std::shuffle(delays.begin(), delays.end(), std::mt19937(42));
  std::vector<Client> clients;
  for (std::size_t i = 0; i < delays.size(); ++i)
    clients.push_back(Client::connect(port));
  std::vector<Clock::time_point> sent(delays.size());
  for (std::size_t i = 0; i < delays.size(); ++i) {
    sent[i] = Clock::now();
    EXPECT_TRUE(clients[i].send(get_request("/delay/" + std::to_string(delays[i]))));
  }
  std::vector<std::pair<int, Response>> answers;
  for (std::size_t i = 0; i < delays.size(); ++i) {
    auto r = clients[i].read_response();
    EXPECT_TRUE(r) << "delay " << delays[i];
    if (!r) continue;
    EXPECT_GE(r->received_at - sent[i], std::chrono::milliseconds(delays[i]))
        << "answered before its delay";
    answers.emplace_back(delays[i], std::move(*r));
  }
  return answers;
}

TEST_P(Conformance, OverlappingRequestsEachGetTheirOwnDelay) {
  // A delay kept anywhere but in the request (the server, the loop, a shared handler) is read
  // back by the wrong one.
  const auto answers = overlapping_delays(port());
  EXPECT_EQ(answers.size(), 32u);
  for (const auto& [delay, r] : answers)
    expect_text(r, 200, std::to_string(delay));
}

TEST_P(Conformance, TheTeachingBugSharedDelayFailsTheOverlappingValidation) {
  // --teaching-bug shared-delay keeps the last /delay parsed in the server (common/, so every
  // model has it): the validation above must catch it, or the exercise that uses it teaches
  // nothing. Some replies carry another request's delay; every one still waits its own.
  start_server(ServerOptions{.teaching_bug = TeachingBug::shared_delay});
  if (!server_) return;
  const auto answers = overlapping_delays(port());
  ASSERT_EQ(answers.size(), 32u);
  std::set<std::string> asked;
  for (const auto& [delay, r] : answers)
    asked.insert(std::to_string(delay));
  std::size_t wrong = 0;
  for (const auto& [delay, r] : answers) {
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(asked.contains(r.body)) << "a body that no request asked for: " << r.body;
    if (r.body != std::to_string(delay)) ++wrong;
  }
  EXPECT_GE(wrong, 1u) << "with the shared-delay bug on, every overlapping /delay got its own "
                          "value: the validation no longer catches state kept in the server";
}

TEST_P(Conformance, DelayZeroIsAnsweredWhileALongDelayWaits) {
  Client waiting = connect();
  ASSERT_TRUE(waiting.send(get_request("/delay/3000")));
  Client zero = connect();
  ASSERT_TRUE(zero.send(get_request("/delay/0")));
  auto r = zero.read_response(2500ms);
  ASSERT_TRUE(r) << "/delay/0 must not wait behind another request's delay";
  expect_text(*r, 200, "0");
  EXPECT_FALSE(waiting.readable_now()) << "/delay/3000 answered early";
}

TEST_P(Conformance, StopEndsWaitingRequestsAndReturns) {
  std::vector<Client> clients;
  for (int i = 0; i < 10; ++i) {
    clients.push_back(connect());
    ASSERT_TRUE(clients.back().send(get_request("/delay/30000")));
  }
  ASSERT_TRUE(clients.back().send(get_request("/block/30000")));
  std::this_thread::sleep_for(100ms);
  server_->stop();  // must not wait the 30 s out (the test's timeout would catch it)
  for (auto& c : clients)
    EXPECT_TRUE(c.closed_by_peer(5s));
  EXPECT_EQ(server_->open_connections(), 0u);
}

TEST_P(Conformance, StopGivesBackEveryLoopAndConnection) {
  server_->stop();
  server_.reset();
  const int before = anon_inode_fds();
  ServerOptions options;
  options.threads = 4;  // loops, or the blocking model's workers: one per client below
  start_server(options);
  if (!server_) return;
  std::vector<Client> clients;
  for (const char* path : {"/delay/30000", "/block/30000", "/plaintext"}) {
    clients.push_back(connect());
    ASSERT_TRUE(clients.back().send(get_request(path)));
  }
  ASSERT_TRUE(clients.back().read_response());
  clients.push_back(connect());  // idle
  std::this_thread::sleep_for(50ms);
  server_->stop();
  EXPECT_EQ(server_->open_connections(), 0u) << "a connection outlived stop()";
  EXPECT_EQ(anon_inode_fds(), before) << "stop() left an event loop's descriptors open";
}

// Each async model twice: with its own timers and with the timer wheel (`--timers wheel`).
INSTANTIATE_TEST_SUITE_P(Models, Conformance, ::testing::ValuesIn(model_names_and_wheels()),
                         [](const auto& info) { return test_name_of(info.param); });

}  // namespace
}  // namespace cm::test
