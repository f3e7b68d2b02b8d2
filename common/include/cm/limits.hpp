#pragma once
/// \file limits.hpp
/// The protocol limits every model enforces, in one place (DESIGN.md, "The route spec").

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace cm {

/// Limits of one request; the defaults are the project's published ones.
struct Limits {
  std::size_t max_head_bytes = 8 * 1024;     ///< request line + headers; beyond -> 431
  std::size_t max_body_bytes = 1024 * 1024;  ///< body; beyond -> 413 (decided from the headers)
};

/// Route argument bounds.
inline constexpr std::uint64_t max_delay_ms = 60'000;   ///< `/delay/{ms}` and `/block/{ms}`
inline constexpr std::uint64_t max_cpu_us = 1'000'000;  ///< `/cpu/{us}`
inline constexpr std::uint64_t max_db_sleep_ms = 60'000;  ///< `/db/sleep/{ms}`
inline constexpr std::uint64_t world_rows = 10'000;       ///< `/db/row/{id}`: ids 1..world_rows

/// Lingering close: after a response that ends the connection, the server shuts down its write
/// side and reads (and discards) what the client still sends, for at most this long and at most
/// this many bytes, so that closing does not reset the connection under an unread response.
inline constexpr std::chrono::milliseconds linger_timeout{1000};
inline constexpr std::size_t linger_max_bytes = 4 * 1024 * 1024;

/// Input a connection holds unparsed while it answers an earlier request (pipelined requests). A
/// model that goes on reading while it serves stops reading past this, until it has answered:
/// backpressure against a client that pipelines without reading the answers.
inline constexpr std::size_t max_held_bytes = 64 * 1024;

/// Size of the read buffer a connection reads into.
inline constexpr std::size_t read_buffer_bytes = 16 * 1024;

/// Size of the buffer a completion-based read (io_uring) lends the kernel while it waits for a
/// request: lent for the whole wait, so every waiting connection holds one. A request head of
/// ordinary size fits (nginx's client_header_buffer_size is 1 KiB); a bigger one takes more reads.
/// With 16 KiB, 10,000 connections made malloc reserve 172 MB at the connect phase, and a
/// saturated loop touched more of it for minutes (docs/reliability.md, "Soak").
inline constexpr std::size_t lent_read_bytes = 2 * 1024;

}  // namespace cm
