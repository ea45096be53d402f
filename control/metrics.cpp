#include "control/metrics.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace railgate::control {

metrics_server::metrics_server(const std::string& endpoint, std::function<std::string()> render)
    : render_(std::move(render)) {
    const auto colon = endpoint.rfind(':');
    std::string host = endpoint.substr(0, colon);
    if (host == "localhost") host = "127.0.0.1";
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(std::stoi(endpoint.substr(colon + 1))));
    if (colon == std::string::npos || inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1)
        throw std::runtime_error("metrics endpoint '" + endpoint + "' is not HOST:PORT");
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    const int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 ||
        listen(listen_fd_, 8) != 0 || pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
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
        const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;
        serve(fd);
        close(fd);
    }
}

void metrics_server::serve(int fd) {
    std::string req;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (req.find("\r\n\r\n") == std::string::npos && req.find("\n\n") == std::string::npos) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        pollfd p{fd, POLLIN, 0};
        if (left.count() <= 0 || req.size() > 8192) return;
        if (const int ready = poll(&p, 1, static_cast<int>(left.count())); ready <= 0) {
            if (ready < 0 && errno == EINTR) continue; // a signal to this thread is not the client's fault
            return;
        }
        char b[1024];
        const ssize_t n = read(fd, b, sizeof b);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        req.append(b, static_cast<std::size_t>(n));
    }
    std::string status = "200 OK", type = "text/plain; version=0.0.4; charset=utf-8", body;
    if (req.rfind("GET /metrics ", 0) == 0 || req.rfind("GET /metrics\r", 0) == 0) {
        body = render_();
    } else {
        status = "404 Not Found";
        type = "text/plain";
        body = "railgated serves only GET /metrics\n";
    }
    const std::string out = "HTTP/1.0 " + status + "\r\nContent-Type: " + type + "\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    std::size_t off = 0;
    while (off < out.size()) {
        const ssize_t n = send(fd, out.data() + off, out.size() - off, MSG_NOSIGNAL);
        if (n <= 0) return;
        off += static_cast<std::size_t>(n);
    }
}

} // namespace railgate::control
