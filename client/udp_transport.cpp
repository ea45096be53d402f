#include "client/railgate/udp_transport.hpp"

#include <atomic>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "dataplane/proto/ipv4.hpp"
#include "dataplane/proto/parse.hpp"

namespace railgate::client {
namespace {

constexpr unsigned batch = 64;
constexpr std::size_t max_dgram = 9216;
// UDP GSO (UDP_SEGMENT): one send of up to this many equal datagrams, the
// kernel cuts it (in software where the device cannot); its payload stays
// under 64 KiB.
constexpr unsigned gso_max_segments = 64;
constexpr std::size_t gso_max_bytes = 65507 - 8;
// UDP GRO (UDP_GRO): the kernel may hand over a run of one flow's
// equal-size datagrams (results) as one message of up to 64 KiB, cut here
// at the segment size it reports. Each receive slot then holds 64 KiB.
constexpr std::size_t gro_slot = 65536;

class fd_guard {
public:
    explicit fd_guard(int fd = -1) : fd_(fd) {}
    ~fd_guard() {
        if (fd_ >= 0) ::close(fd_);
    }
    fd_guard(fd_guard&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    fd_guard& operator=(fd_guard&& o) noexcept {
        std::swap(fd_, o.fd_);
        return *this;
    }
    int get() const noexcept { return fd_; }

private:
    int fd_;
};

// The IP_TOS (CE) and UDP_GRO (segment size) control messages of a receive.
struct rx_ctl {
    bool ce = false;
    unsigned segment = 0; // 0: one datagram
};
rx_ctl ctl_of(msghdr& h) noexcept {
    rx_ctl c;
    for (cmsghdr* m = CMSG_FIRSTHDR(&h); m; m = CMSG_NXTHDR(&h, m)) {
        if (m->cmsg_level == IPPROTO_IP && m->cmsg_type == IP_TOS && m->cmsg_len >= CMSG_LEN(1))
            c.ce = (*CMSG_DATA(m) & wire::ecn_mask) == wire::ecn_ce;
        else if (m->cmsg_level == SOL_UDP && m->cmsg_type == UDP_GRO && m->cmsg_len >= CMSG_LEN(sizeof(int))) {
            int seg;
            std::memcpy(&seg, CMSG_DATA(m), sizeof seg);
            c.segment = seg > 0 ? static_cast<unsigned>(seg) : 0;
        }
    }
    return c;
}

bool env_on(const char* name) {
    const char* e = std::getenv(name);
    return !e || std::strcmp(e, "0") != 0;
}

// gro: asks for UDP GRO, and says whether the kernel took it.
fd_guard open_socket(std::uint32_t ip, std::uint16_t port, std::uint8_t tos, bool& gro) {
    fd_guard fd(::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    // The traffic class: railgated answers in the DSCP it receives.
    const int t = tos;
    if (t && ::setsockopt(fd.get(), IPPROTO_IP, IP_TOS, &t, sizeof t) != 0)
        throw std::runtime_error(std::string("IP_TOS: ") + std::strerror(errno));
    // ECN-capable traffic: the TOS of what arrives (IP_RECVTOS), for its CE.
    const int on = 1;
    if ((tos & wire::ecn_mask) && ::setsockopt(fd.get(), IPPROTO_IP, IP_RECVTOS, &on, sizeof on) != 0)
        throw std::runtime_error(std::string("IP_RECVTOS: ") + std::strerror(errno));
    gro = gro && ::setsockopt(fd.get(), SOL_UDP, UDP_GRO, &on, sizeof on) == 0;
    // Deep buffers: a pool of in-flight results arrives as one burst. The
    // FORCE variants (root) go past net.core.rmem_max.
    const int bytes = 8 << 20;
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) != 0)
        ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes) != 0)
        ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(ip);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
        throw std::runtime_error("connect " + net::format_ipv4(ip) + ":" + std::to_string(port) + ": " + std::strerror(errno));
    return fd;
}

class udp_transport final : public transport {
public:
    udp_transport(std::uint32_t ip, std::uint16_t port, std::uint8_t tos) : tos_(tos) {
        rails_.push_back(make_rail(ip, port));
    }

    unsigned n_rails() const noexcept override { return static_cast<unsigned>(rails_.size()); }
    const char* name() const noexcept override { return "udp"; }
    // A larger datagram is truncated into its receive slot, and dropped.
    std::size_t max_message_bytes() const noexcept override { return max_dgram; }
    std::uint64_t dropped() const noexcept override { return dropped_.load(std::memory_order_relaxed); }
    std::uint64_t coalesced() const noexcept override { return coalesced_.load(std::memory_order_relaxed); }
    bool parallel_rails() const noexcept override { return true; }

    std::string open_rails(std::span<const wire::rail_entry> rails, const std::function<void()>&) override {
        try {
            std::vector<rail> next;
            for (std::size_t r = 0; r < rails.size(); ++r) {
                if (r == 0 && rails[0].ip == rails_[0].ip && rails[0].udp_port == rails_[0].port) {
                    next.push_back(std::move(rails_[0]));
                    continue;
                }
                next.push_back(make_rail(rails[r].ip, rails[r].udp_port));
            }
            rails_ = std::move(next);
        } catch (const std::exception& e) {
            return e.what();
        }
        return "";
    }

    unsigned send(unsigned r, const tx_msg* msgs, unsigned n) noexcept override {
        n = std::min(n, batch);
        std::uint8_t hdrs[batch][wire::header_bytes];
        iovec iov[batch][2];
        mmsghdr mm[batch];
        // With GSO, a run of datagrams of one size (a rail's contributions;
        // the last may be shorter) goes as one message: first[k] is the
        // first datagram of message k.
        alignas(cmsghdr) std::uint8_t ctl[batch][CMSG_SPACE(sizeof(std::uint16_t))];
        unsigned first[batch + 1];
        unsigned msgs_out = 0;
        const bool gso = gso_.load(std::memory_order_relaxed);
        for (unsigned i = 0; i < n;) {
            const std::size_t size = wire::header_bytes + msgs[i].bytes;
            std::size_t total = 0;
            unsigned j = i;
            // Datagram j joins the run: GSO on, room left, a payload no
            // larger than the first's, and the one before it full size.
            auto joins = [&] {
                const std::size_t sz = wire::header_bytes + msgs[j].bytes;
                return gso && msgs[i].bytes && msgs[j].bytes && j - i < gso_max_segments && sz <= size &&
                       wire::header_bytes + msgs[j - 1].bytes == size && total + sz <= gso_max_bytes;
            };
            do {
                wire::encode_header(msgs[j].h, hdrs[j]);
                iov[j][0] = {hdrs[j], wire::header_bytes};
                iov[j][1] = {const_cast<void*>(msgs[j].payload), msgs[j].bytes};
                total += wire::header_bytes + msgs[j].bytes;
                ++j;
            } while (j < n && joins());
            mmsghdr& m = mm[msgs_out];
            m = {};
            m.msg_hdr.msg_iov = &iov[i][0];
            m.msg_hdr.msg_iovlen = 2 * (j - i); // a header-only message's payload entry is empty
            if (j - i > 1) {
                m.msg_hdr.msg_control = ctl[msgs_out];
                m.msg_hdr.msg_controllen = sizeof ctl[msgs_out];
                cmsghdr* c = CMSG_FIRSTHDR(&m.msg_hdr);
                c->cmsg_level = SOL_UDP;
                c->cmsg_type = UDP_SEGMENT;
                c->cmsg_len = CMSG_LEN(sizeof(std::uint16_t));
                const auto seg = static_cast<std::uint16_t>(size);
                std::memcpy(CMSG_DATA(c), &seg, sizeof seg);
            }
            first[msgs_out++] = i;
            i = j;
        }
        first[msgs_out] = n;
        const int sent = ::sendmmsg(rails_[r].fd.get(), mm, msgs_out, 0);
        if (sent < 0 && gso && msgs_out < n && (errno == EIO || errno == EINVAL || errno == ENOPROTOOPT)) {
            gso_.store(false, std::memory_order_relaxed); // no UDP GSO here: one datagram per message from now on
            return send(r, msgs, n);
        }
        return sent <= 0 ? 0 : first[sent];
    }

    unsigned recv(unsigned r, rx_msg* out, unsigned max) noexcept override {
        rail& rl = rails_[r];
        // Datagrams left over from the last receive's coalesced messages
        // go first; the buffer they are in is not touched until they are out.
        if (rl.next < rl.pending.size()) {
            unsigned n = 0;
            while (n < max && rl.next < rl.pending.size()) out[n++] = rl.pending[rl.next++];
            return n;
        }
        rl.pending.clear();
        rl.next = 0;
        max = std::min(max, batch);
        iovec iov[batch];
        mmsghdr mm[batch];
        const bool ecn = (tos_ & wire::ecn_mask) != 0;
        const bool ctl_wanted = ecn || rl.gro;
        alignas(cmsghdr) std::uint8_t ctl[batch][CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(int))];
        const std::size_t slot = rl.gro ? gro_slot : max_dgram;
        for (unsigned i = 0; i < max; ++i) {
            iov[i] = {rl.rxbuf.get() + i * slot, slot};
            mm[i] = {};
            mm[i].msg_hdr.msg_iov = &iov[i];
            mm[i].msg_hdr.msg_iovlen = 1;
            if (ctl_wanted) {
                mm[i].msg_hdr.msg_control = ctl[i];
                mm[i].msg_hdr.msg_controllen = sizeof ctl[i];
            }
        }
        const int got = ::recvmmsg(rl.fd.get(), mm, max, MSG_DONTWAIT, nullptr);
        if (got <= 0) return 0;
        unsigned n = 0;
        std::uint64_t merged = 0;
        for (int i = 0; i < got; ++i) {
            const auto* p = static_cast<const std::uint8_t*>(iov[i].iov_base);
            const rx_ctl c = ctl_wanted ? ctl_of(mm[i].msg_hdr) : rx_ctl{};
            if (mm[i].msg_hdr.msg_flags & MSG_TRUNC) {
                dropped_.fetch_add(1, std::memory_order_relaxed);
                continue;
            }
            // One datagram, or (GRO) segments of c.segment bytes, the last
            // possibly shorter.
            const std::size_t len = mm[i].msg_len;
            const std::size_t seg = c.segment && c.segment < len ? c.segment : len;
            if (seg < len) merged += (len + seg - 1) / seg;
            for (std::size_t off = 0; off < len; off += seg) {
                rx_msg m;
                std::span<const std::uint8_t> payload;
                const std::size_t one = std::min(seg, len - off);
                if (const drop_reason r = wire::parse_server_message(p + off, one, m.h, payload);
                    r != drop_reason::none) {
                    note_foreign(p + off, one, r);
                    dropped_.fetch_add(1, std::memory_order_relaxed);
                    continue;
                }
                m.frag[0] = payload.data();
                m.frag_len[0] = static_cast<std::uint32_t>(payload.size());
                m.ce = ecn && c.ce;
                if (n < max) {
                    out[n++] = m;
                    continue;
                }
                try {
                    rl.pending.push_back(m);
                } catch (const std::bad_alloc&) {
                    dropped_.fetch_add(1, std::memory_order_relaxed); // resent by the worker's timeout
                }
            }
        }
        if (merged) coalesced_.fetch_add(merged, std::memory_order_relaxed);
        return n;
    }

    // A 250 Hz tick and a margin: 4 ms descheduled is not a loss.
    std::chrono::microseconds min_rto() const noexcept override { return std::chrono::microseconds(5000); }

    void wait(std::chrono::microseconds max) noexcept override {
        pollfd fds[wire::max_rails];
        nfds_t n = 0;
        for (const rail& rl : rails_) fds[n++] = {rl.fd.get(), POLLIN, 0};
        const auto us = max.count();
        const timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000};
        ::ppoll(fds, n, &ts, nullptr);
    }

private:
    struct rail {
        fd_guard fd;
        std::uint32_t ip;
        std::uint16_t port;
        bool gro;
        // Receive slots (batch of them, 64 KiB each with GRO), left
        // uninitialised: pages are touched only as far as datagrams fill them.
        std::unique_ptr<std::uint8_t[]> rxbuf;
        std::vector<rx_msg> pending; // a receive's datagrams past `max`
        std::size_t next = 0;        // the first of them not handed out
    };
    rail make_rail(std::uint32_t ip, std::uint16_t port) {
        bool gro = gro_wanted_;
        fd_guard fd = open_socket(ip, port, tos_, gro);
        std::unique_ptr<std::uint8_t[]> buf(new std::uint8_t[batch * (gro ? gro_slot : max_dgram)]);
        rail rl{std::move(fd), ip, port, gro, std::move(buf), {}, 0};
        if (gro) rl.pending.reserve(4096); // 64 messages of 64 datagrams (MTU 1500 chunks)
        return rl;
    }
    std::vector<rail> rails_;
    std::atomic<std::uint64_t> dropped_{0};
    std::atomic<std::uint64_t> coalesced_{0};
    std::uint8_t tos_ = 0;
    std::atomic<bool> gso_{env_on("RAILGATE_UDP_GSO")}; // UDP GSO for runs of equal datagrams (RAILGATE_UDP_GSO=0: off)
    bool gro_wanted_ = env_on("RAILGATE_UDP_GRO");       // UDP GRO on receive (RAILGATE_UDP_GRO=0: off)
};

} // namespace

std::unique_ptr<transport> make_udp_transport(std::uint32_t server_ip, std::uint16_t port, std::uint8_t tos) {
    return std::make_unique<udp_transport>(server_ip, port, tos);
}

} // namespace railgate::client
