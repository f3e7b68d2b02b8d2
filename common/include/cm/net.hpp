#pragma once
/// \file net.hpp
/// Small socket helpers shared by the models. These are the OS helpers of common/: they create
/// sockets but never read or write a connection.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cm/fd.hpp"

namespace cm {

/// Listening sockets for one server: `count` sockets on the same address and port, each with
/// SO_REUSEPORT, so each event loop owns one and the kernel spreads connections over them.
struct Listeners {
  std::vector<Fd> sockets;  ///< one per loop (one for the blocking model)
  std::uint16_t port = 0;   ///< the port they are bound to (the chosen one for port 0)
};

/// Opens `count` listening sockets on host:port (IPv4 or IPv6 literal, or "localhost").
/// Refuses a port another process listens on, even with SO_REUSEPORT (which alone would
/// silently share it). Sockets are blocking unless `nonblocking`; all are close-on-exec.
/// Throws std::system_error saying what failed ("bind 127.0.0.1:8080: Address already in use").
Listeners open_listeners(const std::string& host, std::uint16_t port, unsigned count,
                         int backlog = 4096, bool nonblocking = false);

/// TCP_NODELAY on a connected socket (responses are written whole; do not wait for more).
void set_nodelay(int fd) noexcept;

/// How many bytes the kernel holds unread on a connected socket (0 on an error). A deadline that
/// passes while bytes wait there was met by the client: the loop reads them late (see the models'
/// header deadlines), and a request sent in time is answered, not cut.
std::size_t bytes_unread(int fd) noexcept;

/// Lingering close on a blocking socket: shut down the write side so the client sees the end of
/// the response, then read and discard until the client closes, `linger_timeout` passes or
/// `linger_max_bytes` were read; the caller closes the fd after.
void linger_close_blocking(int fd) noexcept;

}  // namespace cm
