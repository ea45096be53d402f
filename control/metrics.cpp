#include "control/metrics.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string_view>

namespace railgate::control {

metrics_server::metrics_server(const std::string& endpoint, std::function<std::string()> render, metrics_limits limits)
    : render_(std::move(render)), limits_(limits) {
    const auto colon = endpoint.rfind(':');
    std::string host = colon == std::string::npos ? std::string{} : endpoint.substr(0, colon);
    if (host == "localhost") host = "127.0.0.1";
    const std::string port = colon == std::string::npos ? std::string{} : endpoint.substr(colon + 1);
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(p));
    if (port.empty() || *end || p < 1 || p > 65535 || inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1)
        throw std::runtime_error("metrics endpoint '" + endpoint + "' is not HOST:PORT");
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    const int one = 1;
    if (listen_fd_ < 0 || setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(listen_fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || listen(listen_fd_, 8) != 0 ||
        pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
        const std::string e = std::strerror(errno);
        if (listen_fd_ >= 0) close(listen_fd_);
        throw std::runtime_error("metrics endpoint " + endpoint + ": " + e);
    }
    thread_ = std::thread([this] { run(); });
}

metrics_server::~metrics_server() {
    const char b = 0;
    [[maybe_unused]] const auto n = write(wake_[1], &b, 1);
    thread_.join();
    for (int fd : {listen_fd_, wake_[0], wake_[1]}) close(fd);
}

void metrics_server::run() {
    for (;;) {
        pollfd fds[2] = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
        poll(fds, 2, -1);
        if (fds[0].revents) return;
        const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) continue;
        serve(fd);
        close(fd);
    }
}

// Waits until `fd` is ready for `events`: false at the deadline, on an
// error, or when the destructor asks this thread to stop.
bool metrics_server::ready(int fd, short events, std::chrono::steady_clock::time_point deadline) const {
    for (;;) {
        const auto left =
            std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) return false;
        pollfd p[2] = {{fd, events, 0}, {wake_[0], POLLIN, 0}};
        const int n = poll(p, 2, static_cast<int>(left));
        if (n < 0 && errno == EINTR) continue; // a signal to this thread is not the client's fault
        if (n < 0 || p[1].revents) return false;
        if (n > 0) return true; // readable, writable, or hung up: the read or send says which
    }
}

void metrics_server::serve(int fd) {
    std::string req;
    const auto request_by = std::chrono::steady_clock::now() + limits_.request;
    while (req.find("\r\n\r\n") == std::string::npos && req.find("\n\n") == std::string::npos) {
        if (req.size() > 8192) return;
        char b[1024];
        const ssize_t n = read(fd, b, sizeof b);
        if (n > 0) {
            req.append(b, static_cast<std::size_t>(n));
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) return;
        if (errno == EAGAIN && !ready(fd, POLLIN, request_by)) return;
    }
    std::string status = "200 OK", type = "text/plain; version=0.0.4; charset=utf-8", body;
    // The request line ends at a space (HTTP/1.x), or at once (a bare
    // "GET /metrics" line); a query string is ignored.
    const std::string_view path = "GET /metrics";
    if (req.rfind(path, 0) == 0 && std::string_view(" \r\n?").find(req[path.size()]) != std::string_view::npos) {
        body = render_();
    } else {
        status = "404 Not Found";
        type = "text/plain";
        body = "railgated serves only GET /metrics\n";
    }
    const std::string out = "HTTP/1.0 " + status + "\r\nContent-Type: " + type + "\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    // A client that stops reading (its window closed) is cut off at the
    // deadline, not waited for: the send would otherwise block this thread
    // for as long as the peer keeps its connection open.
    const auto answer_by = std::chrono::steady_clock::now() + limits_.answer;
    std::size_t off = 0;
    while (off < out.size()) {
        const ssize_t n = send(fd, out.data() + off, out.size() - off, MSG_NOSIGNAL);
        if (n > 0) {
            off += static_cast<std::size_t>(n);
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) return;
        if (errno == EAGAIN && !ready(fd, POLLOUT, answer_by)) return;
    }
}

} // namespace railgate::control
