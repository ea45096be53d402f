#include "control/server.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <vector>

namespace railgate::control {
namespace {

std::string sys_err(const std::string& what) { return what + ": " + std::strerror(errno); }

sockaddr_un address_of(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path.size() >= sizeof a.sun_path) throw std::runtime_error("control socket path too long: " + path);
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    return a;
}

bool someone_listens(const std::string& path) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    const sockaddr_un a = address_of(path);
    const bool yes = connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
    close(fd);
    return yes;
}

struct session {
    int fd = -1;
    long uid = -1, pid = -1; // SO_PEERCRED
    std::string in, out;
    std::chrono::steady_clock::time_point partial_since{};
    std::chrono::steady_clock::time_point backed_up_since{}; // responses piling up since
    bool closing = false; // close once `out` is written
    std::deque<int> fds;  // descriptors passed (SCM_RIGHTS), for the next requests
    static constexpr std::size_t max_fds = 4;
    void close_fds() {
        for (int f : fds) close(f);
        fds.clear();
    }
};

} // namespace

server::server(socket_options opt, handler h, std::function<void()> tick)
    : opt_(std::move(opt)), h_(std::move(h)), tick_(std::move(tick)) {
    const sockaddr_un a = address_of(opt_.path);
    if (const auto slash = opt_.path.rfind('/'); slash != std::string::npos && slash > 0) {
        const std::string dir = opt_.path.substr(0, slash);
        if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) throw std::runtime_error(sys_err("mkdir " + dir));
    }
    struct stat st;
    if (lstat(opt_.path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) throw std::runtime_error(opt_.path + " exists and is not a socket");
        if (someone_listens(opt_.path))
            throw std::runtime_error("another railgated listens on " + opt_.path);
        unlink(opt_.path.c_str()); // stale, from a killed daemon
    }
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listen_fd_ < 0) throw std::runtime_error(sys_err("control socket"));
    // Bind with no permissions at all, then open up to the configured mode.
    const mode_t old = umask(0777);
    const int rc = bind(listen_fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a);
    umask(old);
    auto fail = [&](const std::string& what) {
        const std::string e = sys_err(what);
        close(listen_fd_);
        remove_socket_file();
        throw std::runtime_error(e);
    };
    // A failed bind made no file: what is at the path now is another's.
    if (rc != 0) fail("bind " + opt_.path);
    if (lstat(opt_.path.c_str(), &st) == 0) {
        bound_dev_ = st.st_dev;
        bound_ino_ = st.st_ino;
    }
    uid_t uid = static_cast<uid_t>(-1);
    gid_t gid = static_cast<gid_t>(-1);
    if (!opt_.owner.empty()) {
        const passwd* pw = getpwnam(opt_.owner.c_str());
        if (!pw) fail("no user " + opt_.owner);
        uid = pw->pw_uid;
    }
    if (!opt_.group.empty()) {
        const group* gr = getgrnam(opt_.group.c_str());
        if (!gr) fail("no group " + opt_.group);
        gid = gr->gr_gid;
    }
    if ((uid != static_cast<uid_t>(-1) || gid != static_cast<gid_t>(-1)) && chown(opt_.path.c_str(), uid, gid) != 0)
        fail("chown " + opt_.path);
    if (chmod(opt_.path.c_str(), opt_.mode) != 0) fail("chmod " + opt_.path);
    if (listen(listen_fd_, 16) != 0) fail("listen " + opt_.path);
    if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) fail("pipe");
    thread_ = std::thread([this] { run(); });
}

server::~server() {
    if (thread_.joinable()) {
        const char b = 0;
        [[maybe_unused]] const auto n = write(wake_[1], &b, 1);
        thread_.join();
    }
    for (int fd : {listen_fd_, wake_[0], wake_[1]})
        if (fd >= 0) close(fd);
    remove_socket_file();
}

void server::remove_socket_file() const {
    struct stat st;
    if (bound_ino_ != 0 && lstat(opt_.path.c_str(), &st) == 0 && st.st_dev == bound_dev_ && st.st_ino == bound_ino_)
        unlink(opt_.path.c_str());
}

void server::run() {
    std::vector<session> clients;
    // Invalid UTF-8 in a response (an error quoting a truncated name) is
    // replaced, never thrown: nothing a client sends stops this thread.
    auto respond = [](session& c, const json& j) {
        c.out += j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    };
    for (;;) {
        std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
        // A client whose responses pile up is not read until it reads them.
        for (const session& c : clients)
            fds.push_back({c.fd,
                           static_cast<short>((c.out.size() > opt_.max_output / 2 ? 0 : POLLIN) | (c.out.empty() ? 0 : POLLOUT)),
                           0});
        poll(fds.data(), fds.size(), 200);
        if (fds[0].revents) {
            for (session& c : clients) c.close_fds();
            return;
        }
        if (tick_) {
            try {
                tick_();
            } catch (const std::exception&) { // nothing stops this thread
            }
        }
        const auto now = std::chrono::steady_clock::now();
        if (fds[1].revents & POLLIN) {
            const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd >= 0) {
                session c;
                c.fd = fd;
                ucred cred{};
                socklen_t len = sizeof cred;
                if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
                    c.uid = static_cast<long>(cred.uid);
                    c.pid = static_cast<long>(cred.pid);
                }
                if (clients.size() >= opt_.max_clients) {
                    respond(c, fail("too many control clients (" + std::to_string(opt_.max_clients) + ")"));
                    c.closing = true;
                }
                clients.push_back(std::move(c));
            }
        }
        for (std::size_t i = 2; i < fds.size(); ++i) {
            session& c = clients[i - 2];
            if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) && !c.closing) {
                char buf[4096];
                alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * 4)];
                iovec iov{buf, sizeof buf};
                msghdr m{};
                m.msg_iov = &iov;
                m.msg_iovlen = 1;
                m.msg_control = ctl;
                m.msg_controllen = sizeof ctl;
                const ssize_t n = recvmsg(c.fd, &m, MSG_CMSG_CLOEXEC);
                // Descriptors passed along go with the next request; at
                // most max_fds wait, the rest are closed.
                for (cmsghdr* h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
                    if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
                    const std::size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                    for (std::size_t j = 0; j < k; ++j) {
                        int got;
                        std::memcpy(&got, CMSG_DATA(h) + j * sizeof(int), sizeof got);
                        if (c.fds.size() < session::max_fds) c.fds.push_back(got);
                        else close(got);
                    }
                }
                if (n <= 0 && !(n < 0 && errno == EAGAIN)) {
                    c.closing = true;
                    c.out.clear();
                    continue;
                }
                if (n > 0) {
                    if (c.in.empty()) c.partial_since = now;
                    c.in.append(buf, static_cast<std::size_t>(n));
                }
                std::size_t nl;
                while (!c.closing && c.out.size() <= opt_.max_output && (nl = c.in.find('\n')) != std::string::npos) {
                    const std::string line = c.in.substr(0, nl);
                    c.in.erase(0, nl + 1);
                    c.partial_since = now;
                    request r;
                    r.peer_uid = c.uid;
                    r.peer_pid = c.pid;
                    if (!c.fds.empty()) {
                        r.fd = c.fds.front();
                        c.fds.pop_front();
                    }
                    struct closer {
                        int fd;
                        ~closer() {
                            if (fd >= 0) close(fd);
                        }
                    } owned{r.fd};
                    if (std::string e = parse_request(line, r); !e.empty()) {
                        respond(c, fail(e));
                        continue;
                    }
                    try {
                        respond(c, h_(r));
                    } catch (const std::exception& e) {
                        respond(c, fail(std::string("internal error: ") + e.what()));
                    }
                }
                if (c.in.size() > max_request) {
                    respond(c, fail("request larger than " + std::to_string(max_request) + " bytes"));
                    c.in.clear();
                    c.closing = true;
                }
            }
            if (!c.in.empty() && !c.closing && now - c.partial_since > opt_.incomplete_timeout) {
                respond(c, fail("incomplete request: no newline within " +
                                std::to_string(opt_.incomplete_timeout.count()) + " ms"));
                c.in.clear();
                c.closing = true;
            }
            if (!c.out.empty()) {
                const ssize_t n = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
                if (n > 0) c.out.erase(0, static_cast<std::size_t>(n));
                else if (n < 0 && errno != EAGAIN) c.out.clear(), c.closing = true;
            }
            // It does not read: it is dropped rather than kept in memory.
            if (c.out.size() <= opt_.max_output / 2) {
                c.backed_up_since = {};
            } else if (c.backed_up_since == std::chrono::steady_clock::time_point{}) {
                c.backed_up_since = now;
            } else if (now - c.backed_up_since > opt_.incomplete_timeout || c.out.size() > opt_.max_output) {
                c.out.clear();
                c.closing = true;
            }
        }
        // Drop closed clients once their last response is out.
        for (auto it = clients.begin(); it != clients.end();) {
            if (it->closing && it->out.empty()) {
                it->close_fds();
                close(it->fd);
                it = clients.erase(it);
            } else {
                ++it;
            }
        }
    }
}

} // namespace railgate::control
