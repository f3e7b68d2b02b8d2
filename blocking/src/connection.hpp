#pragma once
/// \file connection.hpp
/// One connection served by one blocking worker thread, from accept to close.

#include "cm/server_state.hpp"

namespace cm::blocking {

/// Serves the connection on `fd` until the client closes it, a response ends it, the header
/// timeout passes, or the server stops (its sleeper is interrupted). Does not close `fd`.
void serve_connection(int fd, ServerState& state);

}  // namespace cm::blocking
