#include "validate.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <latch>
#include <numeric>
#include <random>
#include <thread>

#include "cm/fd.hpp"

namespace cm::price {
namespace {

using clock_type = std::chrono::steady_clock;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

/// A connected socket to 127.0.0.1:port, or an error text.
Fd connect_local(std::uint16_t port, std::string& error) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) {
    error = std::string("socket: ") + std::strerror(errno);
    return fd;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    error = std::string("connect: ") + std::strerror(errno);
    return Fd();
  }
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

/// Sends the request on `fd` and reads one response (Content-Length framed).
HttpResponse exchange(int fd, const std::string& path, clock_type::time_point deadline) {
  HttpResponse r;
  // Connection: close, and the caller closes at once: a blocking server's worker serves one
  // connection until it closes, so a connection kept open would hold a worker from the others.
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  const auto sent_at = clock_type::now();
  for (std::size_t off = 0; off < request.size();) {
    const ssize_t n = ::send(fd, request.data() + off, request.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      r.error = std::string("send: ") + std::strerror(errno);
      return r;
    }
    off += static_cast<std::size_t>(n);
  }
  std::string in;
  std::size_t head_end = std::string::npos, length = 0;
  bool have_length = false;
  char buf[4096];
  for (;;) {
    if (head_end != std::string::npos && have_length && in.size() >= head_end + length) break;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
    if (left.count() <= 0) {
      r.error = "no complete response in time";
      return r;
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // the deadline check above ends it
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      r.error = n == 0 ? "connection closed before a complete response"
                       : std::string("recv: ") + std::strerror(errno);
      return r;
    }
    in.append(buf, static_cast<std::size_t>(n));
    if (head_end == std::string::npos && (head_end = in.find("\r\n\r\n")) != std::string::npos) {
      head_end += 4;
      const std::string head = in.substr(0, head_end);
      if (!head.starts_with("HTTP/1.") || head.size() < 12) {
        r.error = "not an HTTP/1.x response";
        return r;
      }
      r.status = std::atoi(head.c_str() + 9);
      // Headers, one per line after the status line.
      for (std::size_t pos = head.find("\r\n") + 2; pos < head_end - 2;) {
        const std::size_t eol = head.find("\r\n", pos);
        const std::string line = head.substr(pos, eol - pos);
        pos = eol + 2;
        const auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        const std::string name = lower(line.substr(0, colon));
        std::string value = line.substr(colon + 1);
        value.erase(0, value.find_first_not_of(" \t"));
        value.erase(value.find_last_not_of(" \t") + 1);
        if (name == "content-length") {
          length = std::strtoull(value.c_str(), nullptr, 10);
          have_length = true;
        } else if (name == "content-type") {
          r.content_type = value;
        }
      }
      if (!have_length) {
        r.error = "response without Content-Length";
        return r;
      }
    }
  }
  r.latency_ms = std::chrono::duration<double, std::milli>(clock_type::now() - sent_at).count();
  r.body = in.substr(head_end, length);
  return r;
}

bool is_text_plain(const std::string& content_type) {
  std::string media = lower(content_type.substr(0, content_type.find(';')));
  media.erase(media.find_last_not_of(" \t") + 1);
  return media == "text/plain";
}

/// What is wrong with a response to `path` that should be 200 `body` no sooner than `min_ms`.
std::string check(const std::string& path, const HttpResponse& r, const std::string& body,
                  double min_ms) {
  if (!r.error.empty()) return path + ": " + r.error;
  if (r.status != 200) return path + ": status " + std::to_string(r.status) + ", expected 200";
  if (r.body != body)
    return path + ": body \"" + r.body.substr(0, 40) + "\", expected \"" + body + "\"";
  if (!is_text_plain(r.content_type))
    return path + ": Content-Type \"" + r.content_type + "\", expected text/plain";
  if (r.latency_ms < min_ms) {
    char text[160];
    std::snprintf(text, sizeof text, "%s: answered after %.2f ms, before its delay of %.0f ms",
                  path.c_str(), r.latency_ms, min_ms);
    return text;
  }
  return "";
}

/// `plan.overlapping` requests to prefix + N, all different N, sent at the same moment.
std::string overlapping(std::uint16_t port, const std::string& prefix, const ValidationPlan& plan) {
  const unsigned n = plan.overlapping;
  if (plan.max_ms < plan.min_ms || plan.max_ms - plan.min_ms + 1 < n)
    return "validation: the delay range holds fewer than " + std::to_string(n) +
           " different values";
  std::vector<unsigned> values(plan.max_ms - plan.min_ms + 1);
  std::iota(values.begin(), values.end(), plan.min_ms);
  std::mt19937 rng(std::random_device{}());
  std::shuffle(values.begin(), values.end(), rng);
  values.resize(n);

  // Connect all first, so the requests overlap for certain; then send all at once.
  std::vector<Fd> fds;
  for (unsigned i = 0; i < n; ++i) {
    std::string error;
    fds.push_back(connect_local(port, error));
    if (!fds.back()) return prefix + "{ms}: " + error;
  }
  const auto deadline = clock_type::now() + std::chrono::seconds(60);
  std::vector<HttpResponse> responses(n);
  std::latch go(n);
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      go.arrive_and_wait();
      responses[i] = exchange(fds[i].get(), prefix + std::to_string(values[i]), deadline);
      fds[i].reset();
    });
  }
  for (auto& t : threads)
    t.join();
  for (unsigned i = 0; i < n; ++i) {
    const auto v = std::to_string(values[i]);
    if (auto why = check(prefix + v, responses[i], v, values[i]); !why.empty()) {
      return why + " (one of " + std::to_string(n) + " overlapping requests with different delays)";
    }
  }
  return "";
}

}  // namespace

HttpResponse http_get(std::uint16_t port, const std::string& path,
                      std::chrono::milliseconds timeout) {
  HttpResponse r;
  Fd fd = connect_local(port, r.error);
  if (!fd) return r;
  return exchange(fd.get(), path, clock_type::now() + timeout);
}

Validation validate_server(std::uint16_t port, const ValidationPlan& plan) {
  Validation v;
  auto refuse = [&](std::string why) {
    v.ok = false;
    v.failure = std::move(why);
    return v;
  };
  if (plan.plaintext) {
    if (auto why = check("/plaintext", http_get(port, "/plaintext"), "Hello, World!", 0);
        !why.empty())
      return refuse(why);
    v.passed.push_back("/plaintext answered 200 \"Hello, World!\" text/plain");
  }
  if (plan.delay) {
    if (auto why = check("/delay/0", http_get(port, "/delay/0"), "0", 0); !why.empty())
      return refuse(why);
    v.passed.push_back("/delay/0 answered 0");
    if (auto why = overlapping(port, "/delay/", plan); !why.empty()) return refuse(why);
    v.passed.push_back(
        std::to_string(plan.overlapping) +
        " overlapping /delay/{ms}, all different, each answered with its own value, none early");
  }
  if (plan.block) {
    if (auto why = overlapping(port, "/block/", plan); !why.empty()) return refuse(why);
    v.passed.push_back(
        std::to_string(plan.overlapping) +
        " overlapping /block/{ms}, all different, each answered with its own value, none early");
  }
  for (unsigned us : plan.cpu_us) {
    const auto path = "/cpu/" + std::to_string(us);
    if (auto why = check(path, http_get(port, path), std::to_string(us), 0); !why.empty())
      return refuse(why);
    v.passed.push_back(path + " answered " + std::to_string(us));
  }
  return v;
}

}  // namespace cm::price
