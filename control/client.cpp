#include "control/client.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace railgate::control {

client::client(const std::string& path) : path_(path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path.size() >= sizeof a.sun_path) throw std::runtime_error("socket path too long: " + path);
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    if (connect(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
        const int e = errno;
        close(fd_);
        fd_ = -1;
        if (e == ENOENT || e == ECONNREFUSED)
            throw unreachable("cannot reach railgated at " + path + ": " + std::strerror(e) +
                                     " (is it running? --socket or RAILGATE_SOCKET choose the socket)");
        if (e == EACCES || e == EPERM)
            throw unreachable("permission denied on " + path +
                                     " (the control socket's owner, group and mode decide who may use it)");
        throw unreachable("cannot connect to " + path + ": " + std::strerror(e));
    }
}

client::~client() {
    if (fd_ >= 0) close(fd_);
}

std::string client::read_line() {
    // A signal (railctl capture's Ctrl-C) interrupts poll, whatever
    // SA_RESTART says: the wait goes on until the answer or the deadline.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
        if (const auto nl = buf_.find('\n'); nl != std::string::npos) {
            std::string line = buf_.substr(0, nl);
            buf_.erase(0, nl + 1);
            return line;
        }
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        pollfd p{fd_, POLLIN, 0};
        const int ready = left.count() > 0 ? poll(&p, 1, static_cast<int>(left.count())) : 0;
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
        if (ready == 0) throw std::runtime_error("railgated did not answer within 10 s");
        char b[65536];
        const ssize_t n = read(fd_, b, sizeof b);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw std::runtime_error(std::string("read from railgated: ") + std::strerror(errno));
        if (n == 0) throw std::runtime_error("railgated closed the connection");
        buf_.append(b, static_cast<std::size_t>(n));
        // railgated's answers are lines of JSON well under this; a peer
        // that is not railgated (the wrong socket) may send without end.
        if (buf_.size() > max_answer && buf_.find('\n') == std::string::npos)
            throw std::runtime_error("malformed response: no end of line in " + std::to_string(max_answer >> 20) +
                                     " MiB (is " + path_ + " railgated's socket?)");
    }
}

std::string client::raw(const std::string& bytes) {
    std::size_t off = 0;
    while (off < bytes.size()) {
        const ssize_t n = send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw std::runtime_error(std::string("send: ") + std::strerror(errno));
        off += static_cast<std::size_t>(n);
    }
    return read_line();
}

json client::call(const std::string& command, const json& args) { return call_with_fd(command, args, -1); }

json client::call_with_fd(const std::string& command, const json& args, int fd) {
    const json req = {{"version", protocol_version}, {"command", command}, {"args", args}};
    std::string bytes = req.dump() + "\n";
    if (fd >= 0) { // the descriptor rides on the request's first byte
        iovec iov{bytes.data(), 1};
        alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
        msghdr m{};
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = ctl;
        m.msg_controllen = sizeof ctl;
        cmsghdr* c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
        ssize_t sent;
        while ((sent = sendmsg(fd_, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
        }
        if (sent != 1) throw std::runtime_error(std::string("sendmsg: ") + std::strerror(errno));
        bytes.erase(0, 1);
    }
    const std::string line = raw(bytes);
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("ok"))
        throw std::runtime_error("malformed response from railgated: " + line.substr(0, 200));
    return j;
}

} // namespace railgate::control
