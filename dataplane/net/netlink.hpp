// rtnetlink requests railgated makes of the kernel (internal to
// dataplane/net): veth pairs, addresses.
#pragma once

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

namespace railgate::net::detail {

// One rtnetlink request, its attributes appended (nested ones closed by
// end()), sent and acknowledged.
class nl_request {
public:
    // A link request (RTM_*LINK, an ifinfomsg), or another with its body.
    nl_request(std::uint16_t type, std::uint16_t flags) : nl_request(type, flags, ifinfomsg{AF_UNSPEC, 0, 0, 0, 0, 0}) {}
    template <class Body>
    nl_request(std::uint16_t type, std::uint16_t flags, const Body& body) {
        nlmsghdr h{};
        h.nlmsg_type = type;
        h.nlmsg_flags = static_cast<std::uint16_t>(NLM_F_REQUEST | NLM_F_ACK | flags);
        h.nlmsg_seq = 1;
        put(&h, sizeof h);
        put(&body, sizeof body);
    }
    void attr(std::uint16_t type, const void* data, std::size_t len) {
        rtattr a{};
        a.rta_type = type;
        a.rta_len = static_cast<unsigned short>(RTA_LENGTH(len));
        put(&a, sizeof a);
        put(data, len);
    }
    void attr(std::uint16_t type, const std::string& s) { attr(type, s.c_str(), s.size() + 1); }
    void attr(std::uint16_t type, std::uint32_t v) { attr(type, &v, sizeof v); }
    std::size_t begin(std::uint16_t type) {
        const std::size_t at = buf_.size();
        attr(type, nullptr, 0);
        return at;
    }
    void end(std::size_t at) {
        auto* a = reinterpret_cast<rtattr*>(buf_.data() + at);
        a->rta_len = static_cast<unsigned short>(buf_.size() - at);
    }
    void raw(const void* data, std::size_t len) { put(data, len); }

    // Sends it; returns 0 or the kernel's errno.
    int send() {
        reinterpret_cast<nlmsghdr*>(buf_.data())->nlmsg_len = static_cast<std::uint32_t>(buf_.size());
        const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        if (fd < 0) return errno;
        sockaddr_nl kernel{};
        kernel.nl_family = AF_NETLINK;
        int err = 0;
        if (::sendto(fd, buf_.data(), buf_.size(), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
            err = errno;
        } else {
            alignas(nlmsghdr) char reply[4096];
            const ssize_t n = ::recv(fd, reply, sizeof reply, 0);
            const auto* h = reinterpret_cast<const nlmsghdr*>(reply);
            if (n < 0) err = errno;
            else if (n < static_cast<ssize_t>(NLMSG_LENGTH(sizeof(nlmsgerr))) || h->nlmsg_type != NLMSG_ERROR) err = EPROTO;
            else err = -static_cast<const nlmsgerr*>(NLMSG_DATA(h))->error;
        }
        ::close(fd);
        return err;
    }

private:
    void put(const void* p, std::size_t len) {
        const auto* b = static_cast<const std::uint8_t*>(p);
        buf_.insert(buf_.end(), b, b + len);
        buf_.resize(NLMSG_ALIGN(buf_.size()));
    }
    std::vector<std::uint8_t> buf_;
};

} // namespace railgate::net::detail
