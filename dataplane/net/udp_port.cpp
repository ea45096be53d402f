#include "dataplane/net/udp_port.hpp"

#include <arpa/inet.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <tuple>
#include <vector>

#include <rte_mbuf.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

namespace railgate::net {
namespace {

constexpr unsigned max_segs_per_frame = 4;
// The kernel's limits on one UDP_SEGMENT message: 64 segments, 64 KiB.
constexpr unsigned gso_max_segs = 64;
constexpr std::size_t gso_max_bytes = 65000;
constexpr unsigned send_retries = 256;

std::uint16_t rd16(const std::uint8_t* p) noexcept { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }
std::uint32_t rd32(const std::uint8_t* p) noexcept {
    return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | p[3];
}

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

} // namespace

struct udp_port::out_msg {
    sockaddr_in to;
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(std::uint16_t)) + CMSG_SPACE(sizeof(int))];
    unsigned first, count; // frames order_[first .. first + count)
};

udp_port::udp_port(std::uint32_t ip, std::uint16_t port, unsigned buffer_bytes, unsigned max_frames)
    : msgs_(new out_msg[max_frames]), hdrs_(new mmsghdr[max_frames]),
      iov_(new iovec[std::size_t{max_frames} * max_segs_per_frame]), order_(new unsigned[max_frames]),
      max_frames_(max_frames) {
    dgrams_.reserve(max_frames);
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) fail("socket");
    const int one = 1, size = static_cast<int>(buffer_bytes), pmtu = IP_PMTUDISC_DO;
    // As root the buffers may pass net.core.[rw]mem_max; otherwise up to it.
    for (const auto& [force, plain] : {std::pair{SO_RCVBUFFORCE, SO_RCVBUF}, std::pair{SO_SNDBUFFORCE, SO_SNDBUF}})
        if (::setsockopt(fd_, SOL_SOCKET, force, &size, sizeof size) != 0)
            ::setsockopt(fd_, SOL_SOCKET, plain, &size, sizeof size);
    // Each datagram's TOS (ECN) is read as a DPDK port's frame shows it;
    // datagrams are never fragmented (too big for the route: refused).
    if (::setsockopt(fd_, IPPROTO_IP, IP_RECVTOS, &one, sizeof one) != 0 ||
        ::setsockopt(fd_, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) != 0) {
        ::close(fd_);
        fail("socket options");
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(ip);
    if (::bind(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
        const int e = errno;
        ::close(fd_);
        errno = e;
        char text[INET_ADDRSTRLEN] = {};
        ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
        fail(std::string("bind ") + text + ":" + std::to_string(port) +
             (e == EADDRNOTAVAIL ? " (no interface has the address; give the rail an interface)" : ""));
    }
}

udp_port::~udp_port() {
    if (nspare_) rte_pktmbuf_free_bulk(spare_, nspare_);
    if (fd_ >= 0) ::close(fd_);
}

unsigned udp_port::rx(rte_mempool* pool, const frame::endpoint& self, rte_mbuf** out, unsigned n,
                      unsigned& oversize) noexcept {
    n = std::min(n, max_burst);
    if (nspare_ < n) {
        if (rte_pktmbuf_alloc_bulk(pool, spare_ + nspare_, n - nspare_) == 0) nspare_ = n;
        else n = nspare_; // the pool is short: what is spare (the rest waits in the socket)
    }
    if (n == 0) return 0;
    mmsghdr h[max_burst];
    iovec iov[max_burst];
    sockaddr_in from[max_burst];
    alignas(cmsghdr) char ctl[max_burst][CMSG_SPACE(sizeof(int))];
    constexpr std::size_t hdr = frame::udp_frame_overhead;
    for (unsigned i = 0; i < n; ++i) {
        rte_mbuf* m = spare_[i];
        iov[i].iov_base = rte_pktmbuf_mtod_offset(m, char*, hdr);
        iov[i].iov_len = rte_pktmbuf_tailroom(m) > hdr ? rte_pktmbuf_tailroom(m) - hdr : 0;
        h[i].msg_hdr = {&from[i], sizeof from[i], &iov[i], 1, ctl[i], sizeof ctl[i], 0};
    }
    const int got = ::recvmmsg(fd_, h, n, MSG_DONTWAIT, nullptr);
    if (got <= 0) return 0;
    unsigned k = 0;
    std::uint8_t used[max_burst] = {};
    for (unsigned i = 0; i < static_cast<unsigned>(got); ++i) {
        const msghdr& mh = h[i].msg_hdr;
        if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || from[i].sin_family != AF_INET) {
            ++oversize;
            continue; // the mbuf stays spare
        }
        frame::endpoint src;
        src.ip = ntohl(from[i].sin_addr.s_addr);
        src.udp_port = ntohs(from[i].sin_port);
        for (const cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&mh), const_cast<cmsghdr*>(c)))
            if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) src.tos = *CMSG_DATA(c);
        // A MAC the rail can answer to: the sender's address in a locally
        // administered one (the socket sends by IP, never by MAC).
        src.mac.b[0] = 0x02;
        std::memcpy(src.mac.b + 2, &from[i].sin_addr.s_addr, 4);
        frame::endpoint to = self;
        to.tos = src.tos;
        rte_mbuf* m = spare_[i];
        auto* p = rte_pktmbuf_mtod(m, std::uint8_t*);
        // The frame as the sender's stack would have put it on a wire, its
        // ECN field kept; the UDP checksum (the kernel checked it) stands
        // as present, and the flags say it was good.
        frame::write_udp_headers(p, src, to, h[i].msg_len);
        p[frame::eth_bytes + frame::ipv4_bytes + 6] = 0xff;
        p[frame::eth_bytes + frame::ipv4_bytes + 7] = 0xff;
        m->data_len = static_cast<std::uint16_t>(hdr + h[i].msg_len);
        m->pkt_len = m->data_len;
        m->ol_flags = RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_GOOD;
        out[k++] = m;
        used[i] = 1;
    }
    // What was not handed out stays spare, in order.
    unsigned keep = 0;
    for (unsigned i = 0; i < nspare_; ++i)
        if (i >= static_cast<unsigned>(got) || !used[i]) spare_[keep++] = spare_[i];
    nspare_ = keep;
    return k;
}

bool udp_port::intact(const rte_mbuf* m) noexcept {
    if (m->ol_flags & RTE_MBUF_F_TX_UDP_CKSUM) return true; // left to the port: nothing computed to damage
    thread_local std::vector<std::uint8_t> flat;
    if (m->pkt_len < frame::udp_frame_overhead) return true; // not a datagram: tx() refuses it
    flat.resize(m->pkt_len);
    const auto* p = static_cast<const std::uint8_t*>(rte_pktmbuf_read(m, 0, m->pkt_len, flat.data()));
    return p && frame::inet_checksum(p + frame::eth_bytes, frame::ipv4_bytes) == 0 &&
           frame::udp_checksum_ok(p, m->pkt_len);
}

unsigned udp_port::tx(rte_mbuf** v, unsigned n, const frame::endpoint& self, rte_mbuf** failed,
                      drop_reason* why) noexcept {
    unsigned nfail = 0;
    auto refuse = [&](rte_mbuf* m, drop_reason r) {
        failed[nfail] = m;
        why[nfail++] = r;
    };
    // Beyond its scratch (never, with the rail's transmit burst): not sent.
    for (unsigned i = std::min(n, max_frames_); i < n; ++i) refuse(v[i], drop_reason::tx_full);
    n = std::min(n, max_frames_);
    // The datagram in each frame: destination, TOS, payload length.
    std::vector<dgram>& d = dgrams_;
    d.resize(n);
    unsigned ok = 0;
    for (unsigned i = 0; i < n; ++i) {
        rte_mbuf* m = v[i];
        const auto* p = rte_pktmbuf_mtod(m, const std::uint8_t*);
        const std::uint8_t* ip = p + frame::eth_bytes;
        const std::uint8_t* u = ip + frame::ipv4_bytes;
        if (m->data_len < frame::udp_frame_overhead || rd16(p + 12) != 0x0800 || ip[0] != 0x45 || ip[9] != 17 ||
            rd32(ip + 12) != self.ip || rd16(u) != self.udp_port || m->nb_segs > max_segs_per_frame ||
            rd16(u + 4) < frame::udp_bytes || rd16(u + 4) - frame::udp_bytes + frame::udp_frame_overhead > m->pkt_len) {
            refuse(m, drop_reason::udp_rail_refused);
            continue;
        }
        d[i] = {rd32(ip + 16), rd16(u + 2), ip[1], static_cast<std::uint32_t>(rd16(u + 4) - frame::udp_bytes)};
        order_[ok++] = i;
    }
    // Each destination's datagrams together, in their order (a stable sort
    // of a burst: results go out to every rank of a slot in turn).
    std::stable_sort(order_.get(), order_.get() + ok, [&](unsigned a, unsigned b) {
        return std::tie(d[a].ip, d[a].port, d[a].tos) < std::tie(d[b].ip, d[b].port, d[b].tos);
    });
    // Messages: a run of one destination's datagrams of one length (the
    // last may be shorter), within the kernel's GSO limits.
    unsigned nmsg = 0, niov = 0;
    for (unsigned j = 0; j < ok;) {
        const dgram& a = d[order_[j]];
        unsigned k = 1;
        std::size_t bytes = a.len;
        while (j + k < ok && k < gso_max_segs && a.len > 0) {
            const dgram& b = d[order_[j + k]];
            if (b.ip != a.ip || b.port != a.port || b.tos != a.tos || b.len > a.len || bytes + b.len > gso_max_bytes)
                break;
            bytes += b.len;
            ++k;
            if (b.len < a.len) break; // a shorter one ends the run
        }
        out_msg& o = msgs_[nmsg];
        o.first = j;
        o.count = k;
        o.to = sockaddr_in{};
        o.to.sin_family = AF_INET;
        o.to.sin_port = htons(a.port);
        o.to.sin_addr.s_addr = htonl(a.ip);
        msghdr& mh = hdrs_[nmsg].msg_hdr;
        mh = {&o.to, sizeof o.to, iov_.get() + niov, 0, o.ctl, 0, 0};
        for (unsigned f = j; f < j + k; ++f) {
            std::size_t skip = frame::udp_frame_overhead, left = d[order_[f]].len;
            for (rte_mbuf* s = v[order_[f]]; s && left; s = s->next) {
                if (skip >= s->data_len) {
                    skip -= s->data_len;
                    continue;
                }
                const std::size_t take = std::min<std::size_t>(s->data_len - skip, left);
                iov_[niov++] = {rte_pktmbuf_mtod_offset(s, char*, skip), take};
                ++mh.msg_iovlen;
                left -= take;
                skip = 0;
            }
        }
        // The TOS (DSCP and ECN, a CE mark the shaper made) as the frame
        // carries it, and the segment size of a run.
        cmsghdr* c = reinterpret_cast<cmsghdr*>(o.ctl);
        c->cmsg_level = IPPROTO_IP;
        c->cmsg_type = IP_TOS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        const int tos = a.tos;
        std::memcpy(CMSG_DATA(c), &tos, sizeof tos);
        mh.msg_controllen = CMSG_SPACE(sizeof(int));
        if (k > 1) {
            c = reinterpret_cast<cmsghdr*>(o.ctl + CMSG_SPACE(sizeof(int)));
            c->cmsg_level = SOL_UDP;
            c->cmsg_type = UDP_SEGMENT;
            c->cmsg_len = CMSG_LEN(sizeof(std::uint16_t));
            const auto seg = static_cast<std::uint16_t>(a.len);
            std::memcpy(CMSG_DATA(c), &seg, sizeof seg);
            mh.msg_controllen += CMSG_SPACE(sizeof(std::uint16_t));
        }
        ++nmsg;
        j += k;
    }
    // Send; a full socket buffer is waited out a little, a message the
    // kernel refuses is skipped.
    unsigned done = 0, tries = 0;
    while (done < nmsg) {
        const int r = ::sendmmsg(fd_, hdrs_.get() + done, nmsg - done, MSG_DONTWAIT);
        if (r > 0) {
            for (unsigned x = done; x < done + static_cast<unsigned>(r); ++x) {
                sent_ += msgs_[x].count;
                for (unsigned f = msgs_[x].first; f < msgs_[x].first + msgs_[x].count; ++f) {
                    rte_pktmbuf_free(v[order_[f]]);
                    v[order_[f]] = nullptr;
                }
            }
            messages_ += static_cast<unsigned>(r);
            done += static_cast<unsigned>(r);
            continue;
        }
        const bool full = errno == EAGAIN || errno == ENOBUFS;
        if (full && ++tries < send_retries) continue;
        for (unsigned f = msgs_[done].first; f < msgs_[done].first + msgs_[done].count; ++f) {
            refuse(v[order_[f]], full ? drop_reason::tx_full : drop_reason::udp_rail_refused);
            v[order_[f]] = nullptr;
        }
        ++done;
        tries = 0;
    }
    return nfail;
}

} // namespace railgate::net
