#include "control/metrics.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string_view>

namespace railgate::control {

metrics_server::metrics_server(const std::string& endpoint, std::function<std::string()> render, metrics_limits limits)
    : render_(std::move(render)), limits_(limits) {
    limits_.clients = std::max(limits_.clients, 1u);
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
        bind(listen_fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || listen(listen_fd_, 64) != 0 ||
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

// One connection: its request as it comes, then its answer as it goes.
struct metrics_server::client {
    int fd = -1;
    std::string in, out;
    std::size_t sent = 0;
    bool answering = false;
    std::chrono::steady_clock::time_point deadline;
};

void metrics_server::run() {
    std::vector<client> cs;
    std::vector<pollfd> fds;
    for (;;) {
        fds.assign({{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}});
        auto next = std::chrono::steady_clock::time_point::max();
        for (const client& c : cs) {
            fds.push_back({c.fd, static_cast<short>(c.answering ? POLLOUT : POLLIN), 0});
            next = std::min(next, c.deadline);
        }
        int wait_ms = -1;
        if (!cs.empty())
            wait_ms = static_cast<int>(std::max<std::int64_t>(
                0, std::chrono::ceil<std::chrono::milliseconds>(next - std::chrono::steady_clock::now()).count()));
        if (poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) continue;
        if (fds[0].revents) break;
        // Each ready client, then those past their deadline: cut off.
        const auto now = std::chrono::steady_clock::now();
        std::size_t k = 0;
        for (std::size_t i = 0; i < cs.size(); ++i) {
            const bool keep = (fds[i + 2].revents ? step(cs[i]) : true) && now < cs[i].deadline;
            if (!keep) {
                close(cs[i].fd);
                continue;
            }
            if (k != i) cs[k] = std::move(cs[i]);
            ++k;
        }
        cs.resize(k);
        if (fds[1].revents) accept_all(cs);
    }
    for (const client& c : cs) close(c.fd);
}

// Takes every waiting connection; past limits_.clients, each pushes out the
// oldest one still sending its request, or is closed itself if every one
// is being answered.
void metrics_server::accept_all(std::vector<client>& cs) {
    for (;;) {
        const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;
        if (cs.size() >= limits_.clients) {
            const auto oldest = std::find_if(cs.begin(), cs.end(), [](const client& c) { return !c.answering; });
            if (oldest == cs.end()) {
                close(fd);
                continue;
            }
            close(oldest->fd);
            cs.erase(oldest); // the order stays that of arrival
        }
        client c;
        c.fd = fd;
        c.deadline = std::chrono::steady_clock::now() + limits_.request;
        cs.push_back(std::move(c));
    }
}

bool metrics_server::step(client& c) {
    if (!c.answering) {
        for (;;) {
            char b[1024];
            const ssize_t n = read(c.fd, b, sizeof b);
            if (n > 0) {
                c.in.append(b, static_cast<std::size_t>(n));
                if (c.in.size() > 8192) return false;
                if (c.in.find("\r\n\r\n") != std::string::npos || c.in.find("\n\n") != std::string::npos) break;
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true; // more to come
            return false;                                                   // closed, or an error
        }
        c.out = answer(c.in);
        c.answering = true;
        c.deadline = std::chrono::steady_clock::now() + limits_.answer;
    }
    // A client that stops reading (its window closed) waits in poll with
    // the others until its deadline; the thread never blocks on it.
    while (c.sent < c.out.size()) {
        const ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
        if (n > 0) {
            c.sent += static_cast<std::size_t>(n);
            continue;
        }
        return n < 0 && (errno == EAGAIN || errno == EINTR);
    }
    return false; // all of it handed to the kernel: close
}

std::string metrics_server::answer(const std::string& req) const {
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
    return "HTTP/1.0 " + status + "\r\nContent-Type: " + type + "\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\nConnection: close\r\n\r\n" + body;
}

} // namespace railgate::control
