#include "dataplane/net/udp_port.hpp"

#include <arpa/inet.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <tuple>
#include <vector>

#include <rte_mbuf.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
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
    // UDP GRO: a worker's UDP GSO message stays whole on its way here.
    const char* env = std::getenv("RAILGATE_UDP_GRO");
    gro_ = !(env && std::strcmp(env, "0") == 0) && ::setsockopt(fd_, SOL_UDP, UDP_GRO, &one, sizeof one) == 0;
    // Touched now (zeroed), so that railgated's resident size does not grow
    // later, the first time a receive spills.
    if (gro_) overflow_.reset(new std::uint8_t[max_rx_msgs * overflow_bytes]());
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
             (e == EADDRNOTAVAIL ? " (no interface has the address; name one for railgated to put it on: interface = \"IF\" in the config, udp,interface=IF after --rail or railctl rail add)" : ""));
    }
}

udp_port::~udp_port() {
    if (nspare_) rte_pktmbuf_free_bulk(spare_, nspare_);
    if (staged_at_ < staged_n_) rte_pktmbuf_free_bulk(staged_ + staged_at_, staged_n_ - staged_at_);
    if (fd_ >= 0) ::close(fd_);
}

unsigned udp_port::rx(rte_mempool* pool, const frame::endpoint& self, rte_mbuf** out, unsigned n,
                      rx_tally& tally) noexcept {
    if (staged_at_ == staged_n_) {
        staged_at_ = staged_n_ = 0;
        receive(pool, self, tally);
    }
    const unsigned k = std::min({n, max_burst, staged_n_ - staged_at_});
    std::copy_n(staged_ + staged_at_, k, out);
    staged_at_ += k;
    return k;
}

void udp_port::receive(rte_mempool* pool, const frame::endpoint& self, rx_tally& tally) noexcept {
    constexpr std::size_t hdr = frame::udp_frame_overhead;
    const std::size_t data_room = rte_pktmbuf_data_room_size(pool);
    const std::size_t room = data_room > RTE_PKTMBUF_HEADROOM + hdr ? data_room - RTE_PKTMBUF_HEADROOM - hdr : 0;
    if (room == 0) return;
    // Each message: `group` mbufs cut at `seg` bytes, then the overflow.
    const std::size_t seg = seg_ && seg_ <= room ? seg_ : room;
    unsigned group = gro_ ? std::clamp(group_, 1u, max_burst) : 1;
    const unsigned nmsg = std::clamp(max_burst / group, 1u, gro_ ? max_rx_msgs : max_burst / 2);
    if (unsigned want = nmsg * group; nspare_ < want) {
        if (rte_pktmbuf_alloc_bulk(pool, spare_ + nspare_, want - nspare_) == 0) nspare_ = want;
        else // the pool is short: what it has
            while (nspare_ < want && (spare_[nspare_] = rte_pktmbuf_alloc(pool)) != nullptr) ++nspare_;
    }
    if (nspare_ == 0) return; // the datagrams wait in the socket
    group = std::min(group, nspare_);
    const unsigned msgs = std::min(nmsg, nspare_ / group), want = msgs * group;
    mmsghdr h[max_burst];
    iovec iov[max_burst + max_rx_msgs];
    sockaddr_in from[max_burst];
    alignas(cmsghdr) char ctl[max_burst][CMSG_SPACE(sizeof(int)) * 2];
    for (unsigned i = 0, v = 0; i < msgs; ++i) {
        const unsigned first = v;
        for (unsigned g = 0; g < group; ++g)
            iov[v++] = {rte_pktmbuf_mtod_offset(spare_[i * group + g], char*, hdr), seg};
        if (gro_) iov[v++] = {overflow_.get() + i * overflow_bytes, overflow_bytes};
        h[i].msg_hdr = {&from[i], sizeof from[i], &iov[first], v - first, ctl[i], sizeof ctl[i], 0};
    }
    const int got = ::recvmmsg(fd_, h, msgs, MSG_DONTWAIT, nullptr);
    if (got <= 0) return;
    bool used[max_burst] = {};
    unsigned most = 0;
    for (unsigned i = 0; i < static_cast<unsigned>(got); ++i) {
        msghdr& mh = h[i].msg_hdr;
        const std::size_t len = h[i].msg_len;
        if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || from[i].sin_family != AF_INET) {
            ++tally.oversize;
            continue; // its mbufs stay spare
        }
        frame::endpoint src;
        src.ip = ntohl(from[i].sin_addr.s_addr);
        src.udp_port = ntohs(from[i].sin_port);
        std::size_t size = len; // the segment size: the whole message unless coalesced
        for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
            if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) src.tos = *CMSG_DATA(c);
            else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
                int s;
                std::memcpy(&s, CMSG_DATA(c), sizeof s);
                if (s > 0 && static_cast<std::size_t>(s) < len) size = static_cast<std::size_t>(s);
            }
        }
        const unsigned segs = size ? static_cast<unsigned>((len + size - 1) / size) : 1;
        if (size > room) {
            tally.oversize += segs;
            continue;
        }
        if (segs > 1) {
            seg_ = static_cast<std::uint32_t>(size); // the next receive cuts its buffers at this size
            ++rx_messages_;
            tally.coalesced += segs;
        }
        most = std::max(most, segs);
        // A MAC the rail can answer to: the sender's address in a locally
        // administered one (the socket sends by IP, never by MAC).
        src.mac.b[0] = 0x02;
        std::memcpy(src.mac.b + 2, &from[i].sin_addr.s_addr, 4);
        frame::endpoint to = self;
        to.tos = src.tos;
        for (unsigned j = 0; j < segs; ++j) {
            const std::size_t off = j * size, n = std::min(size, len - off);
            rte_mbuf* m;
            if (staged_n_ == std::size(staged_)) { // more segments than the kernel coalesces: never
                tally.no_mbuf += segs - j;
                break;
            }
            if (j < group && n <= seg && (j == 0 || size == seg)) {
                m = spare_[i * group + j]; // it landed alone in its own mbuf
                used[i * group + j] = true;
            } else if ((m = rte_pktmbuf_alloc(pool)) != nullptr) {
                // Copied out of the message's buffers (mbufs, then overflow).
                ++copied_;
                ++tally.copied;
                auto* dst = rte_pktmbuf_mtod_offset(m, std::uint8_t*, hdr);
                for (std::size_t at = off, left = n; left;) {
                    const std::uint8_t* p;
                    std::size_t avail;
                    if (at < group * seg) {
                        p = rte_pktmbuf_mtod_offset(spare_[i * group + at / seg], const std::uint8_t*, hdr) + at % seg;
                        avail = seg - at % seg;
                    } else {
                        p = overflow_.get() + i * overflow_bytes + (at - group * seg);
                        avail = left;
                    }
                    const std::size_t take = std::min(avail, left);
                    std::memcpy(dst, p, take);
                    dst += take;
                    at += take;
                    left -= take;
                }
            } else {
                tally.no_mbuf += segs - j;
                break;
            }
            auto* p = rte_pktmbuf_mtod(m, std::uint8_t*);
            // The frame as the sender's stack would have put it on a wire,
            // its ECN field kept; the UDP checksum (the kernel checked it)
            // stands as present, and the flags say it was good.
            frame::write_udp_headers(p, src, to, static_cast<std::uint32_t>(n));
            p[frame::eth_bytes + frame::ipv4_bytes + 6] = 0xff;
            p[frame::eth_bytes + frame::ipv4_bytes + 7] = 0xff;
            m->data_len = static_cast<std::uint16_t>(hdr + n);
            m->pkt_len = m->data_len;
            m->ol_flags = RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_GOOD;
            staged_[staged_n_++] = m;
            ++received_;
        }
    }
    // The next receive gives each message as many mbufs as the most
    // segments one had here.
    group_ = std::max(most, 1u);
    // What was not handed out stays spare, in order.
    unsigned keep = 0;
    for (unsigned i = 0; i < nspare_; ++i)
        if (i >= want || !used[i]) spare_[keep++] = spare_[i];
    nspare_ = keep;
}

bool udp_port::intact(const rte_mbuf* m) noexcept {
    if (m->ol_flags & RTE_MBUF_F_TX_UDP_CKSUM) return true; // left to the port: nothing computed to damage
    if (m->data_len < frame::udp_frame_overhead) return true; // not a datagram: tx() refuses it
    const auto* p = rte_pktmbuf_mtod(m, const std::uint8_t*);
    const std::uint8_t* u = p + frame::eth_bytes + frame::ipv4_bytes;
    if (frame::inet_checksum(p + frame::eth_bytes, frame::ipv4_bytes) != 0 || rd16(u + 6) == 0) return false;
    // The UDP checksum over the payload as the segments hold it (a piece
    // that starts at an odd offset sums byte-swapped, RFC 1071 2B).
    std::size_t left = rd16(u + 4) >= frame::udp_bytes ? rd16(u + 4) - frame::udp_bytes : 0, at = 0;
    std::size_t skip = frame::udp_frame_overhead;
    std::uint16_t sum = frame::udp_header_sum(p);
    for (const rte_mbuf* s = m; s && left; s = s->next) {
        if (skip >= s->data_len) {
            skip -= s->data_len;
            continue;
        }
        const std::size_t take = std::min<std::size_t>(s->data_len - skip, left);
        std::uint16_t piece = frame::ones_sum16(rte_pktmbuf_mtod_offset(s, const std::uint8_t*, skip), take);
        if (at & 1) piece = __builtin_bswap16(piece);
        sum = frame::add_sums(sum, piece);
        at += take;
        left -= take;
        skip = 0;
    }
    return left == 0 && sum == 0xffff;
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
    // Each destination's datagrams together, in their order (results go
    // out to every rank of a slot in turn); the index keeps the order, so
    // no stable sort (which may allocate) is needed.
    std::sort(order_.get(), order_.get() + ok, [&](unsigned a, unsigned b) {
        return std::tie(d[a].ip, d[a].port, d[a].tos, a) < std::tie(d[b].ip, d[b].port, d[b].tos, b);
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
