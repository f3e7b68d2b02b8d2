// core_bench.cpp -- what the shared sans-I/O core costs per request, on one thread.
//
// Parsing is measured twice on the same bytes: through cm::RequestParser (llhttp plus the copies
// into a cm::Request, the 431/413 checks and one pause per head and per request), and through raw
// llhttp with empty callbacks, so the wrapper's own cost is the difference between the two rows.
// Then routing (cm::plan), serialising a reply (cm::serialize) and one whole Session round as a
// model drives it: received() -> next() -> write_reply().
//
// Try: build/bin/cm-micro --benchmark_filter=BM_core_

#include <benchmark/benchmark.h>
#include <llhttp.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cm/request_parser.hpp"
#include "cm/response.hpp"
#include "cm/routes.hpp"
#include "cm/session.hpp"

namespace {

/// The build, in the JSON output's "context" (harness/micro/report prints it with the results).
[[maybe_unused]] const bool context_added = [] {
  benchmark::AddCustomContext("compiler", "g++ " __VERSION__);
  benchmark::AddCustomContext("cm_build_type", CM_MICRO_BUILD_TYPE);
  benchmark::AddCustomContext("llhttp", std::to_string(LLHTTP_VERSION_MAJOR) + "." +
                                            std::to_string(LLHTTP_VERSION_MINOR) + "." +
                                            std::to_string(LLHTTP_VERSION_PATCH));
  return true;
}();

/// A typical request of the project's load: what cm-load and curl send for /delay/10.
constexpr std::string_view delay_request =
    "GET /delay/10 HTTP/1.1\r\n"
    "Host: 127.0.0.1:8080\r\n"
    "User-Agent: cm-load/1\r\n"
    "Accept: */*\r\n"
    "\r\n";

constexpr int pipeline_depth = 16;
constexpr int chunk_count = 16;
constexpr std::size_t chunk_bytes = 1024;

std::string pipelined_requests() {
  std::string bytes;
  for (int i = 0; i < pipeline_depth; ++i)
    bytes += delay_request;
  return bytes;
}

/// POST /echo with a 16 KiB body sent as 16 chunks of 1 KiB.
std::string chunked_request() {
  std::string bytes =
      "POST /echo HTTP/1.1\r\n"
      "Host: 127.0.0.1:8080\r\n"
      "Content-Type: application/octet-stream\r\n"
      "Transfer-Encoding: chunked\r\n"
      "\r\n";
  for (int i = 0; i < chunk_count; ++i) {
    bytes += "400\r\n";
    bytes.append(chunk_bytes, static_cast<char>('a' + i));
    bytes += "\r\n";
  }
  bytes += "0\r\n\r\n";
  return bytes;
}

/// Feeds `bytes` to `parser` and takes every request in it; returns how many were taken.
int parse_all(cm::RequestParser& parser, std::string_view bytes) {
  int requests = 0;
  while (!bytes.empty()) {
    bytes.remove_prefix(parser.feed(bytes));
    if (parser.state() == cm::RequestParser::State::complete) {
      cm::Request request = parser.take();
      benchmark::DoNotOptimize(request);
      ++requests;
    } else if (parser.state() == cm::RequestParser::State::failed) {
      return -1;
    }
  }
  return requests;
}

void run_cm_parser(benchmark::State& state, std::string_view bytes, int expected) {
  cm::RequestParser parser;
  for (auto _ : state) {
    if (parse_all(parser, bytes) != expected) {
      state.SkipWithError("cm::RequestParser did not parse the expected requests");
      return;
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes.size()));
  state.SetItemsProcessed(state.iterations() * expected);
}

/// Raw llhttp, every data callback present and empty: the floor under cm::RequestParser.
struct RawLlhttp {
  llhttp_t parser{};
  llhttp_settings_t settings{};
  int messages = 0;

  RawLlhttp() {
    llhttp_settings_init(&settings);
    settings.on_url = [](llhttp_t*, const char*, std::size_t) { return 0; };
    settings.on_header_field = [](llhttp_t*, const char*, std::size_t) { return 0; };
    settings.on_header_value = [](llhttp_t*, const char*, std::size_t) { return 0; };
    settings.on_headers_complete = [](llhttp_t*) { return 0; };
    settings.on_body = [](llhttp_t*, const char*, std::size_t) { return 0; };
    settings.on_message_complete = [](llhttp_t* p) {
      ++static_cast<RawLlhttp*>(p->data)->messages;
      return 0;
    };
    llhttp_init(&parser, HTTP_REQUEST, &settings);
    parser.data = this;
  }
};

void run_raw_llhttp(benchmark::State& state, std::string_view bytes, int expected) {
  RawLlhttp raw;
  for (auto _ : state) {
    raw.messages = 0;
    if (llhttp_execute(&raw.parser, bytes.data(), bytes.size()) != HPE_OK ||
        raw.messages != expected) {
      state.SkipWithError("llhttp did not parse the expected requests");
      return;
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes.size()));
  state.SetItemsProcessed(state.iterations() * expected);
}

void BM_core_parse_get_cm(benchmark::State& state) {
  run_cm_parser(state, delay_request, 1);
}
void BM_core_parse_get_llhttp(benchmark::State& state) {
  run_raw_llhttp(state, delay_request, 1);
}

void BM_core_parse_pipelined16_cm(benchmark::State& state) {
  run_cm_parser(state, pipelined_requests(), pipeline_depth);
}
void BM_core_parse_pipelined16_llhttp(benchmark::State& state) {
  run_raw_llhttp(state, pipelined_requests(), pipeline_depth);
}

void BM_core_parse_chunked16k_cm(benchmark::State& state) {
  run_cm_parser(state, chunked_request(), 1);
}
void BM_core_parse_chunked16k_llhttp(benchmark::State& state) {
  run_raw_llhttp(state, chunked_request(), 1);
}

cm::Request parsed(std::string_view bytes) {
  cm::RequestParser parser;
  parser.feed(bytes);
  if (parser.state() != cm::RequestParser::State::complete) std::abort();
  return parser.take();
}

/// cm::plan on an already parsed request: the route spec's cost alone.
void BM_core_route(benchmark::State& state, std::string_view bytes) {
  const cm::Request request = parsed(bytes);
  for (auto _ : state) {
    cm::Plan plan = cm::plan(request);
    benchmark::DoNotOptimize(plan);
  }
  state.SetItemsProcessed(state.iterations());
}

/// cm::serialize of the /delay/10 reply. The time point is fixed, so the Date header comes from
/// its per-thread cache, as it does for every response but one a second.
void BM_core_serialize(benchmark::State& state) {
  const cm::Reply reply = cm::reply_of(cm::plan(parsed(delay_request)));
  const auto now = std::chrono::system_clock::now();
  std::string out;
  for (auto _ : state) {
    out.clear();
    cm::serialize(reply, "cm-micro", cm::Persistence::keep_alive, now, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * out.size()));
  state.SetItemsProcessed(state.iterations());
}

/// One request through a Session as every model drives it, clock read included:
/// received(bytes) -> next() -> write_reply(reply, out, Moment::now()).
void BM_core_session_round(benchmark::State& state) {
  cm::Session session("cm-micro", std::chrono::seconds(10), cm::Moment::now());
  std::string out;
  for (auto _ : state) {
    session.received(delay_request);
    std::optional<cm::Plan> plan = session.next();
    if (!plan) {
      state.SkipWithError("the session produced no plan");
      return;
    }
    out.clear();
    session.write_reply(cm::reply_of(*plan), out, cm::Moment::now());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

BENCHMARK(BM_core_parse_get_cm);
BENCHMARK(BM_core_parse_get_llhttp);
BENCHMARK(BM_core_parse_pipelined16_cm);
BENCHMARK(BM_core_parse_pipelined16_llhttp);
BENCHMARK(BM_core_parse_chunked16k_cm);
BENCHMARK(BM_core_parse_chunked16k_llhttp);
BENCHMARK_CAPTURE(BM_core_route, delay, delay_request);
BENCHMARK_CAPTURE(BM_core_route, plaintext, std::string_view("GET /plaintext HTTP/1.1\r\n\r\n"));
BENCHMARK_CAPTURE(BM_core_route, not_found, std::string_view("GET /nowhere HTTP/1.1\r\n\r\n"));
BENCHMARK(BM_core_serialize);
BENCHMARK(BM_core_session_round);
