// A udp rail's port (net::udp_port) on loopback: datagrams in as frames the
// rail loop can classify, frames out as datagrams (UDP GSO runs, chained
// results, TOS), and what it refuses. One EAL per binary.
#define BOOST_TEST_MODULE udp_port
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <stdexcept>
#include <vector>

#include <rte_mbuf.h>

#include "dataplane/net/eal.hpp"
#include "dataplane/net/udp_port.hpp"
#include "dataplane/proto/frame.hpp"

using namespace railgate;

namespace {

constexpr std::uint32_t loopback = 0x7f000001;

struct eal_fixture {
    eal_fixture() : eal(net::embedded_eal_args("test_udp_port")) {}
    net::eal eal;
};
BOOST_TEST_GLOBAL_FIXTURE(eal_fixture);

// A plain UDP socket on 127.0.0.1 (an ephemeral port), as a worker has.
struct peer {
    int fd = -1;
    std::uint16_t port = 0;
    peer() {
        fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(loopback);
        socklen_t len = sizeof a;
        const int one = 1;
        BOOST_REQUIRE(::setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof one) == 0);
        BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        BOOST_REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
        port = ntohs(a.sin_port);
    }
    ~peer() { ::close(fd); }
    // One UDP GSO message (UDP_SEGMENT) of datagrams cut at the first's
    // size, as a worker sends a chunk's datagrams.
    void send_gso(std::uint16_t to, const std::vector<std::vector<std::uint8_t>>& dgrams) const {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(to);
        a.sin_addr.s_addr = htonl(loopback);
        std::vector<iovec> iov;
        std::size_t total = 0;
        for (const auto& d : dgrams) {
            iov.push_back({const_cast<std::uint8_t*>(d.data()), d.size()});
            total += d.size();
        }
        alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(std::uint16_t))] = {};
        msghdr m{&a, sizeof a, iov.data(), iov.size(), ctl, sizeof ctl, 0};
        cmsghdr* c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(std::uint16_t));
        const auto seg = static_cast<std::uint16_t>(dgrams.front().size());
        std::memcpy(CMSG_DATA(c), &seg, sizeof seg);
        BOOST_REQUIRE(::sendmsg(fd, &m, 0) == static_cast<ssize_t>(total));
    }
    void send_to(std::uint16_t to, const std::vector<std::uint8_t>& d, int tos = 0) const {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(to);
        a.sin_addr.s_addr = htonl(loopback);
        BOOST_REQUIRE(::setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos) == 0);
        BOOST_REQUIRE(::sendto(fd, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a) ==
                      static_cast<ssize_t>(d.size()));
    }
    // The next datagram (within a second) and its TOS; empty when none came.
    std::vector<std::uint8_t> recv(int* tos = nullptr) const {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 1000) != 1) return {};
        std::vector<std::uint8_t> d(65536);
        iovec iov{d.data(), d.size()};
        alignas(cmsghdr) char ctl[64];
        msghdr m{nullptr, 0, &iov, 1, ctl, sizeof ctl, 0};
        const ssize_t n = ::recvmsg(fd, &m, 0);
        BOOST_REQUIRE(n >= 0);
        for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
            if (tos && c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) *tos = *CMSG_DATA(c);
        d.resize(static_cast<std::size_t>(n));
        return d;
    }
};

std::vector<std::uint8_t> bytes(std::size_t n, std::uint8_t seed) {
    std::vector<std::uint8_t> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(seed + i * 7);
    return v;
}

struct port_fixture {
    rte_mempool* pool = nullptr;
    rte_mempool* small = nullptr; // 2 KiB of room: a jumbo datagram does not fit
    frame::endpoint self;
    std::unique_ptr<net::udp_port> port;
    port_fixture() {
        static int n = 0;
        pool = net::make_pktmbuf_pool("udp_pool" + std::to_string(n), 1024, RTE_PKTMBUF_HEADROOM + 10240, SOCKET_ID_ANY);
        small = net::make_pktmbuf_pool("udp_small" + std::to_string(n++), 256, RTE_PKTMBUF_HEADROOM + 2048, SOCKET_ID_ANY);
        self.ip = loopback;
        self.udp_port = peer().port; // a port the kernel just gave out, free again
        port = std::make_unique<net::udp_port>(self.ip, self.udp_port, 1 << 20, 512);
    }
    ~port_fixture() {
        port.reset();
        rte_mempool_free(pool);
        rte_mempool_free(small);
    }
    // Receives until `want` frames came (or a second passed).
    std::vector<rte_mbuf*> rx(unsigned want, rte_mempool* from, unsigned& oversize) {
        net::udp_port::rx_tally d;
        std::vector<rte_mbuf*> got = rx(want, from, d);
        oversize = d.oversize;
        BOOST_TEST(d.no_mbuf == 0u);
        return got;
    }
    std::vector<rte_mbuf*> rx(unsigned want, rte_mempool* from, net::udp_port::rx_tally& d) {
        std::vector<rte_mbuf*> got;
        for (int spin = 0; spin < 100000 && got.size() + d.no_mbuf + d.oversize < want; ++spin) {
            rte_mbuf* m[32];
            const unsigned n = port->rx(from, self, m, 32, d);
            got.insert(got.end(), m, m + n);
            if (!n) ::usleep(10);
        }
        return got;
    }
    // A frame from the rail to `to` carrying `payload`: in one mbuf, or as
    // a header mbuf chained to one holding the payload (a result).
    rte_mbuf* frame_to(const frame::endpoint& to, const std::vector<std::uint8_t>& payload, bool chained = false) {
        rte_mbuf* m = rte_pktmbuf_alloc(pool);
        BOOST_REQUIRE(m);
        auto* p = reinterpret_cast<std::uint8_t*>(rte_pktmbuf_append(m, frame::udp_frame_overhead));
        frame::write_udp_headers(p, self, to, payload.size());
        rte_mbuf* body = m;
        if (chained) {
            body = rte_pktmbuf_alloc(pool);
            BOOST_REQUIRE(body);
        }
        if (!payload.empty())
            std::memcpy(rte_pktmbuf_append(body, static_cast<std::uint16_t>(payload.size())), payload.data(),
                        payload.size());
        if (chained) BOOST_REQUIRE(rte_pktmbuf_chain(m, body) == 0);
        return m;
    }
};

frame::endpoint at(std::uint16_t port, std::uint8_t tos = 0) {
    frame::endpoint e;
    e.ip = loopback;
    e.udp_port = port;
    e.tos = tos;
    return e;
}

} // namespace

BOOST_FIXTURE_TEST_CASE(received_datagrams_are_frames_the_rail_classifies, port_fixture) {
    peer w;
    const std::vector<std::vector<std::uint8_t>> sent = {bytes(10, 1), bytes(1000, 2), bytes(8972, 3)};
    for (std::size_t i = 0; i < sent.size(); ++i) w.send_to(self.udp_port, sent[i], i == 1 ? 0x02 : 0);
    unsigned oversize = 0;
    const std::vector<rte_mbuf*> got = rx(3, pool, oversize);
    BOOST_REQUIRE_EQUAL(got.size(), 3u);
    BOOST_TEST(oversize == 0u);
    for (std::size_t i = 0; i < got.size(); ++i) {
        const rte_mbuf* m = got[i];
        const auto* p = rte_pktmbuf_mtod(m, const std::uint8_t*);
        BOOST_TEST(m->data_len == frame::udp_frame_overhead + sent[i].size());
        BOOST_TEST(m->pkt_len == m->data_len);
        BOOST_TEST((m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_GOOD);
        // What the rail loop makes of it: a UDP datagram to the rail from
        // the worker's address and port, its TOS kept, the payload intact.
        const frame::info fi = frame::classify(p, m->data_len, self);
        BOOST_TEST((fi.k == frame::kind::udp));
        BOOST_TEST(fi.src.ip == loopback);
        BOOST_TEST(fi.src.udp_port == w.port);
        BOOST_TEST(fi.src.tos == (i == 1 ? 0x02 : 0));
        BOOST_TEST(fi.l4_len == sent[i].size());
        BOOST_TEST(std::memcmp(p + fi.msg_offset, sent[i].data(), sent[i].size()) == 0);
        rte_pktmbuf_free(const_cast<rte_mbuf*>(m));
    }
}

BOOST_FIXTURE_TEST_CASE(a_datagram_too_big_for_the_buffers_is_counted_not_delivered, port_fixture) {
    peer w;
    w.send_to(self.udp_port, bytes(4000, 4)); // more than 2 KiB of room
    w.send_to(self.udp_port, bytes(100, 5));
    unsigned oversize = 0;
    const std::vector<rte_mbuf*> got = rx(1, small, oversize);
    BOOST_REQUIRE_EQUAL(got.size(), 1u);
    BOOST_TEST(oversize == 1u);
    BOOST_TEST(got[0]->data_len == frame::udp_frame_overhead + 100);
    rte_pktmbuf_free(got[0]);
}

// A run of `n` datagrams of `size` bytes and a shorter last one.
std::vector<std::vector<std::uint8_t>> run_of(unsigned n, std::size_t size, std::size_t last, std::uint8_t seed) {
    std::vector<std::vector<std::uint8_t>> r;
    for (unsigned i = 0; i < n; ++i) r.push_back(bytes(size, static_cast<std::uint8_t>(seed + i)));
    r.push_back(bytes(last, static_cast<std::uint8_t>(seed + n)));
    return r;
}

BOOST_FIXTURE_TEST_CASE(coalesced_messages_are_cut_into_a_frame_per_datagram_in_order, port_fixture) {
    BOOST_REQUIRE(port->gro()); // this kernel has UDP GRO
    peer w;
    // Runs as workers send chunks at MTU 9000 and at 1500, each twice (the
    // first of a size is copied out, the second lands in place), a single
    // jumbo and a small datagram between them, then the first size again.
    const auto jumbo = run_of(7, 8232, 1000, 10), small = run_of(60, 1064, 500, 50);
    std::vector<std::vector<std::uint8_t>> want;
    auto gso = [&](const std::vector<std::vector<std::uint8_t>>& r) {
        w.send_gso(self.udp_port, r);
        want.insert(want.end(), r.begin(), r.end());
    };
    auto one = [&](const std::vector<std::uint8_t>& d) {
        w.send_to(self.udp_port, d);
        want.push_back(d);
    };
    // Each sent, then received: the receive's buffers follow what came last.
    net::udp_port::rx_tally d;
    std::vector<rte_mbuf*> got;
    auto take = [&](std::uint64_t copies) {
        const std::uint64_t before = port->copied_datagrams();
        const auto r = rx(static_cast<unsigned>(want.size() - got.size()), pool, d);
        got.insert(got.end(), r.begin(), r.end());
        BOOST_TEST(port->copied_datagrams() - before == copies, "after " << got.size() << " datagrams: " << port->copied_datagrams() - before);
    };
    gso(jumbo);
    take(7); // the first lands in the first buffer, the rest are copied
    gso(jumbo);
    take(0);
    gso(small);
    take(60);
    gso(small);
    take(0);
    one(bytes(9000, 7)); // across 1064-byte buffers: copied
    take(1);
    one(bytes(10, 8));
    take(0);
    gso(jumbo); // none fits a 1064-byte buffer
    take(8);
    BOOST_TEST(d.oversize == 0u);
    BOOST_TEST(d.no_mbuf == 0u);
    BOOST_REQUIRE_EQUAL(got.size(), want.size());
    BOOST_TEST(port->received_datagrams() == want.size());
    BOOST_TEST(port->received_messages() == 5u); // each run arrived whole
    for (std::size_t i = 0; i < got.size(); ++i) {
        const auto* p = rte_pktmbuf_mtod(got[i], const std::uint8_t*);
        const frame::info fi = frame::classify(p, got[i]->data_len, self);
        BOOST_TEST((fi.k == frame::kind::udp));
        BOOST_TEST(fi.src.udp_port == w.port);
        BOOST_TEST(got[i]->nb_segs == 1u);
        BOOST_TEST(got[i]->data_len == frame::udp_frame_overhead + want[i].size());
        BOOST_TEST(fi.l4_len == want[i].size(), "datagram " << i);
        BOOST_TEST(std::memcmp(p + fi.msg_offset, want[i].data(), want[i].size()) == 0, "datagram " << i);
        rte_pktmbuf_free(got[i]);
    }
}

BOOST_FIXTURE_TEST_CASE(a_coalesced_message_the_pool_cannot_hold_is_counted_not_delivered_wrong, port_fixture) {
    BOOST_REQUIRE(port->gro());
    rte_mempool* tiny = rte_pktmbuf_pool_create("udp_tiny", 12, 0, 0, RTE_PKTMBUF_HEADROOM + 10240, SOCKET_ID_ANY);
    BOOST_REQUIRE(tiny);
    peer w;
    const auto r = run_of(19, 1000, 1000, 1);
    w.send_gso(self.udp_port, r);
    net::udp_port::rx_tally d;
    const std::vector<rte_mbuf*> got = rx(20, tiny, d);
    BOOST_TEST(d.no_mbuf > 0u);
    BOOST_TEST(got.size() + d.no_mbuf == 20u);
    for (std::size_t i = 0; i < got.size(); ++i) {
        const auto* p = rte_pktmbuf_mtod(got[i], const std::uint8_t*);
        const frame::info fi = frame::classify(p, got[i]->data_len, self);
        BOOST_TEST(std::memcmp(p + fi.msg_offset, r[i].data(), r[i].size()) == 0, "datagram " << i);
        rte_pktmbuf_free(got[i]);
    }
    port.reset(); // its spare mbufs back before the pool goes
    rte_mempool_free(tiny);
}

BOOST_FIXTURE_TEST_CASE(frames_go_as_datagrams_in_order_per_destination_gso_runs_and_chains, port_fixture) {
    peer a, b;
    // Interleaved as results to two ranks are: a's 20 of 1000 bytes and a
    // shorter last, b's 10 of 1400, one of a's chained (a zero-copy result).
    std::vector<rte_mbuf*> v;
    std::vector<std::vector<std::uint8_t>> to_a, to_b;
    for (unsigned i = 0; i < 21; ++i) {
        to_a.push_back(bytes(i == 20 ? 500 : 1000, static_cast<std::uint8_t>(i)));
        v.push_back(frame_to(at(a.port), to_a.back(), i == 7));
        if (i < 10) {
            to_b.push_back(bytes(1400, static_cast<std::uint8_t>(100 + i)));
            v.push_back(frame_to(at(b.port), to_b.back()));
        }
    }
    rte_mbuf* failed[64];
    drop_reason why[64];
    BOOST_TEST(port->tx(v.data(), static_cast<unsigned>(v.size()), self, failed, why) == 0u);
    BOOST_TEST(port->sent_datagrams() == 31u);
    BOOST_TEST(port->sent_messages() < 31u); // runs went as UDP_SEGMENT messages
    for (const auto& want : to_a) BOOST_TEST((a.recv() == want));
    for (const auto& want : to_b) BOOST_TEST((b.recv() == want));
    BOOST_TEST(a.recv().empty());
    BOOST_TEST(b.recv().empty());
}

BOOST_FIXTURE_TEST_CASE(the_frames_tos_goes_with_the_datagram, port_fixture) {
    peer a;
    std::vector<rte_mbuf*> v = {frame_to(at(a.port, 0x03), bytes(64, 9)), frame_to(at(a.port, 0xb8), bytes(64, 9))};
    rte_mbuf* failed[2];
    drop_reason why[2];
    BOOST_TEST(port->tx(v.data(), 2, self, failed, why) == 0u);
    int tos = -1;
    BOOST_TEST(!a.recv(&tos).empty());
    BOOST_TEST(tos == 0x03); // a CE mark the shaper made
    BOOST_TEST(!a.recv(&tos).empty());
    BOOST_TEST(tos == 0xb8);
}

BOOST_FIXTURE_TEST_CASE(what_is_not_a_datagram_from_the_rail_is_refused, port_fixture) {
    peer a;
    rte_mbuf* arp = rte_pktmbuf_alloc(pool);
    frame::write_arp_request(reinterpret_cast<std::uint8_t*>(rte_pktmbuf_append(arp, frame::arp_frame_bytes)), self,
                             loopback);
    rte_mbuf* other = frame_to(at(a.port), bytes(64, 1));
    rte_pktmbuf_mtod(other, std::uint8_t*)[frame::eth_bytes + 15] ^= 1; // another source address
    rte_mbuf* good = frame_to(at(a.port), bytes(64, 2));
    std::vector<rte_mbuf*> v = {arp, other, good};
    rte_mbuf* failed[3];
    drop_reason why[3];
    const unsigned nf = port->tx(v.data(), 3, self, failed, why);
    BOOST_REQUIRE_EQUAL(nf, 2u);
    BOOST_TEST((failed[0] == arp && failed[1] == other));
    BOOST_TEST((why[0] == drop_reason::udp_rail_refused && why[1] == drop_reason::udp_rail_refused));
    for (unsigned i = 0; i < nf; ++i) rte_pktmbuf_free(failed[i]);
    BOOST_TEST((a.recv() == bytes(64, 2)));
    BOOST_TEST(a.recv().empty());
}

BOOST_AUTO_TEST_CASE(an_address_no_interface_has_is_refused_by_name) {
    try {
        net::udp_port p(0xC6336407, 47000, 1 << 20, 64); // 198.51.100.7
        BOOST_FAIL("bound an address no interface has");
    } catch (const std::runtime_error& e) {
        BOOST_TEST_MESSAGE(e.what());
        BOOST_TEST(std::string(e.what()).find("198.51.100.7:47000") != std::string::npos);
        BOOST_TEST(std::string(e.what()).find("no interface has the address") != std::string::npos);
        BOOST_TEST(std::string(e.what()).find("udp,interface=IF") != std::string::npos); // how to give it one
    }
}

BOOST_FIXTURE_TEST_CASE(a_frame_damaged_after_its_checksums_were_computed_is_not_intact, port_fixture) {
    // As the fault injector damages a frame on transmit: checksums in
    // software first (the socket would otherwise send the damage with
    // fresh ones), then a bit flipped.
    for (const bool chained : {false, true}) {
        rte_mbuf* m = frame_to(at(9), bytes(1000, 3), chained);
        m->ol_flags |= RTE_MBUF_F_TX_UDP_CKSUM; // left to the port: nothing computed to damage
        BOOST_TEST(net::udp_port::intact(m));
        m->ol_flags = 0;
        BOOST_TEST(!net::udp_port::intact(m)); // no checksum, and none to come: wrong
        std::vector<std::uint8_t> flat(m->pkt_len);
        if (const void* src = rte_pktmbuf_read(m, 0, m->pkt_len, flat.data()); src != flat.data())
            std::memcpy(flat.data(), src, m->pkt_len);
        frame::fill_udp_checksum(flat.data()); // what a software checksum puts there
        std::memcpy(rte_pktmbuf_mtod_offset(m, std::uint8_t*, frame::eth_bytes + frame::ipv4_bytes + 6),
                    flat.data() + frame::eth_bytes + frame::ipv4_bytes + 6, 2);
        BOOST_TEST(net::udp_port::intact(m));
        rte_mbuf* last = rte_pktmbuf_lastseg(m);
        rte_pktmbuf_mtod(last, std::uint8_t*)[last->data_len - 1] ^= 0x10; // the payload's last byte
        BOOST_TEST(!net::udp_port::intact(m));
        rte_pktmbuf_free(m);
    }
}

BOOST_FIXTURE_TEST_CASE(intact_sums_a_chain_whose_pieces_start_at_odd_offsets, port_fixture) {
    // Headers and 3 payload bytes, then pieces of 997 and 500 bytes: the
    // second and third start at odd offsets of the payload.
    const std::vector<std::uint8_t> payload = bytes(1500, 5);
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    BOOST_REQUIRE(m);
    auto* p = reinterpret_cast<std::uint8_t*>(rte_pktmbuf_append(m, frame::udp_frame_overhead + 3));
    frame::write_udp_headers(p, self, at(9), payload.size());
    std::memcpy(p + frame::udp_frame_overhead, payload.data(), 3);
    for (const auto& [from, n] : {std::pair<std::size_t, std::size_t>{3, 997}, {1000, 500}}) {
        rte_mbuf* s = rte_pktmbuf_alloc(pool);
        BOOST_REQUIRE(s);
        std::memcpy(rte_pktmbuf_append(s, static_cast<std::uint16_t>(n)), payload.data() + from, n);
        BOOST_REQUIRE(rte_pktmbuf_chain(m, s) == 0);
    }
    std::vector<std::uint8_t> flat(frame::udp_frame_overhead + payload.size());
    std::memcpy(flat.data(), p, frame::udp_frame_overhead);
    std::memcpy(flat.data() + frame::udp_frame_overhead, payload.data(), payload.size());
    frame::fill_udp_checksum(flat.data());
    std::memcpy(p + frame::eth_bytes + frame::ipv4_bytes + 6, flat.data() + frame::eth_bytes + frame::ipv4_bytes + 6, 2);
    BOOST_TEST(net::udp_port::intact(m));
    rte_mbuf* last = rte_pktmbuf_lastseg(m);
    rte_pktmbuf_mtod(last, std::uint8_t*)[7] ^= 0x01;
    BOOST_TEST(!net::udp_port::intact(m));
    rte_pktmbuf_mtod(last, std::uint8_t*)[7] ^= 0x01;
    rte_pktmbuf_trim(m, 1); // a payload shorter than the UDP length says
    BOOST_TEST(!net::udp_port::intact(m));
    rte_pktmbuf_free(m);
}
