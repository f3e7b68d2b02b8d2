// response.cpp -- reply serialisation and the cached Date header.

#include "cm/response.hpp"

#include <ctime>

namespace cm {

std::string_view http_date(std::chrono::system_clock::time_point now) {
  // NOTE: one cache per thread, so no lock: each event loop or worker formats at most once a
  // second.
  struct Cache {
    std::time_t second = -1;
    char text[64] = {};
    std::size_t size = 0;
  };
  thread_local Cache cache;
  const std::time_t second = std::chrono::system_clock::to_time_t(now);
  if (second != cache.second) {
    std::tm tm{};
    ::gmtime_r(&second, &tm);
    cache.size = std::strftime(cache.text, sizeof cache.text, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    cache.second = second;
  }
  return {cache.text, cache.size};
}

void serialize(const Reply& reply, std::string_view server_name, Persistence persistence,
               std::chrono::system_clock::time_point now, std::string& out, bool with_body) {
  out.reserve(out.size() + 192 + reply.body.size());
  out += "HTTP/1.1 ";
  out += std::to_string(reply.status);
  out += ' ';
  out += reason_phrase(reply.status);
  out += "\r\nServer: ";
  out += server_name;
  out += "\r\nDate: ";
  out += http_date(now);
  out += "\r\nContent-Type: ";
  out += reply.content_type;
  out += "\r\nContent-Length: ";
  out += std::to_string(reply.body.size());
  out += "\r\n";
  for (const auto& [name, value] : reply.headers) {
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
  }
  if (persistence == Persistence::close) {
    out += "Connection: close\r\n";
  } else if (persistence == Persistence::keep_alive_explicit) {
    out += "Connection: keep-alive\r\n";
  }
  out += "\r\n";
  if (with_body) out += reply.body;
}

}  // namespace cm
