#pragma once
/// \file connection.hpp
/// One connection served by one blocking worker thread, from accept to close.

#include <string_view>

#include "cm/server.hpp"
#include "cm/work.hpp"

namespace cm::blocking {

/// Serves the connection on `fd` until the client closes it, a response ends it, the header
/// timeout passes, or `sleeper` is interrupted (the server stops). Does not close `fd`.
void serve_connection(int fd, std::string_view server_name, const ServerOptions& options,
                      Sleeper& sleeper);

}  // namespace cm::blocking
