// The control socket: a unix stream socket with configurable owner, group
// and mode, served by one thread. Each line received is a request; each
// gets one response line. Oversized requests, requests left unfinished for
// `incomplete_timeout`, and clients beyond `max_clients` get an error and
// are disconnected; nothing a client sends reaches the handler unparsed. A
// client that does not read its responses is disconnected once more than
// `max_output` bytes wait for it (its requests are not read meanwhile).
// Every request carries its sender's uid and pid (SO_PEERCRED).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "control/protocol.hpp"

namespace railgate::control {

struct socket_options {
    std::string path = default_socket;
    unsigned mode = 0660;
    std::string owner, group; // empty: the daemon's own
    std::chrono::milliseconds incomplete_timeout{5000};
    unsigned max_clients = 32;
    std::size_t max_output = 1 << 20;
};

// Runs on the server thread, one request at a time; returns the response.
using handler = std::function<json(const request&)>;

class server {
public:
    // Binds and applies permissions; throws std::runtime_error. Refuses a
    // path where another daemon is listening; removes a stale one.
    // `tick`, if given, runs on the server thread between requests, at
    // least every 200 ms (the handler's timers: capture leases).
    server(socket_options opt, handler h, std::function<void()> tick = {});
    ~server(); // stops and removes the socket, if the path is still the one it bound
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    const std::string& path() const noexcept { return opt_.path; }

private:
    void run();
    void remove_socket_file() const;
    socket_options opt_;
    handler h_;
    std::function<void()> tick_;
    int listen_fd_ = -1;
    int wake_[2] = {-1, -1}; // stop signal for the poll loop
    // The bound socket file: what is removed at the end, and only while
    // the path still names it (another daemon may have taken the path).
    dev_t bound_dev_ = 0;
    ino_t bound_ino_ = 0;
    std::thread thread_;
};

} // namespace railgate::control
