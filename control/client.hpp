// railctl's side of the control socket.
#pragma once

#include <stdexcept>
#include <string>

#include "control/protocol.hpp"

namespace railgate::control {

// railgated could not be reached at all (no socket, nobody listening, no
// permission): railctl's exit status 3, apart from a refusal's 1.
struct unreachable : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class client {
public:
    // Connects; throws control::unreachable with a message for the user
    // (no daemon, no permission, ...).
    explicit client(const std::string& path);
    ~client();
    client(const client&) = delete;
    client& operator=(const client&) = delete;

    // Sends one request, waits for its response (throws on a broken or
    // silent connection). The response's "ok" is left to the caller.
    json call(const std::string& command, const json& args = json::object());
    // The same, passing the file descriptor `fd` with the request (SCM_RIGHTS).
    json call_with_fd(const std::string& command, const json& args, int fd);
    // Sends raw bytes and reads one response line (tests of bad input).
    std::string raw(const std::string& bytes);
    // A response line longer than this is refused (not railgated's).
    static constexpr std::size_t max_answer = std::size_t{64} << 20;

private:
    std::string read_line();
    int fd_ = -1;
    std::string path_, buf_;
};

} // namespace railgate::control
