// railgated's DPDK rail loop on a net_ring port: frames injected into the
// port's RX ring, replies collected from its TX ring. One EAL per binary.
#define BOOST_TEST_MODULE rail_loop
#include <boost/test/unit_test.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <cstring>
#include <thread>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "client/railgate/dpdk_transport.hpp"
#include "client/railgate/embedded.hpp"
#include "client/railgate/transport.hpp"
#include "client/railgate/worker.hpp"
#include "dataplane/net/burst.hpp"
#include "dataplane/net/daemon.hpp"
#include "dataplane/net/eal.hpp"
#include "dataplane/net/fault.hpp"
#include "dataplane/proto/frame.hpp"
#include "dataplane/proto/parse.hpp"
#include "dataplane/reduce/numeric.hpp"

using namespace railgate;

namespace {
// One frame on or off a net_ring port's ring (burst.hpp: handed over).
bool ring_put(rte_ring* r, rte_mbuf* m) { return net::ring_put(r, &m, 1) == 1; }
rte_mbuf* ring_get(rte_ring* r) {
    rte_mbuf* m = nullptr;
    return net::ring_get(r, &m, 1) ? m : nullptr;
}

// Three lcores on the two CPUs: rails on two of them
// (a_removal_waits_for_jobs_listing_the_rail_and_joins_wait_for_rail_changes).
std::vector<std::string> eal_args() {
    std::vector<std::string> a = net::embedded_eal_args("test_rail_loop");
    for (std::size_t i = 0; i + 1 < a.size(); ++i)
        if (a[i] == "-l") {
            a[i] = "--lcores";
            a[i + 1] = "0@0,1@1,2@0";
        }
    return a;
}
struct eal_fixture {
    eal_fixture() : eal(eal_args()) {}
    net::eal eal;
};
BOOST_TEST_GLOBAL_FIXTURE(eal_fixture);

struct rail_fixture {
    rte_ring* rx = nullptr;
    rte_ring* tx = nullptr;
    rte_mempool* pool = nullptr;
    std::unique_ptr<net::daemon> d;
    frame::endpoint self, peer;

    explicit rail_fixture(const char* name, const std::function<void(net::daemon_config&)>& tweak = {}) {
        rx = rte_ring_create((std::string(name) + "_rx").c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        tx = rte_ring_create((std::string(name) + "_tx").c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        const int port = rte_eth_from_rings(name, &rx, 1, &tx, 1, 0);
        BOOST_REQUIRE(port >= 0);
        net::daemon_config dc;
        net::rail_config rc;
        rc.name = "r0";
        rc.port_id = port;
        rc.ip = 0xC6120001;
        dc.rails = {rc};
        dc.mbufs_per_rail = 2048;
        if (tweak) tweak(dc);
        d = std::make_unique<net::daemon>(dc);
        pool = net::make_pktmbuf_pool(std::string(name) + "_pool", 2048, RTE_PKTMBUF_HEADROOM + 2048, SOCKET_ID_ANY);
        self.ip = rc.ip;
        self.udp_port = wire::default_udp_port;
        peer.ip = 0xC612000A;
        peer.udp_port = 40000;
        d->launch();
    }
    ~rail_fixture() {
        d->stop();
        drain();
        d.reset();
        rte_mempool_free(pool);
        rte_ring_free(rx);
        rte_ring_free(tx);
    }

    // A frame into the rail's RX ring; `flags`: what a NIC's PMD would say
    // of it (RX checksum verdicts).
    void inject(const std::vector<std::uint8_t>& f, std::uint64_t flags = 0) {
        rte_mbuf* m = rte_pktmbuf_alloc(pool);
        BOOST_REQUIRE(m);
        std::memcpy(rte_pktmbuf_append(m, static_cast<std::uint16_t>(f.size())), f.data(), f.size());
        m->ol_flags = flags;
        BOOST_REQUIRE(ring_put(rx, m));
    }
    // A datagram from rank h.rank's port (40000 + rank), or `port`, with
    // IPv4 TOS byte `tos`.
    std::vector<std::uint8_t> udp(const wire::header& h, const void* body, std::size_t len, int port = -1,
                                  std::uint8_t tos = 0) const {
        std::vector<std::uint8_t> f(frame::udp_frame_overhead + wire::header_bytes + len);
        frame::endpoint src = peer;
        src.udp_port = static_cast<std::uint16_t>(port >= 0 ? port : 40000 + h.rank);
        src.tos = tos;
        frame::write_udp_headers(f.data(), src, self, wire::header_bytes + len);
        wire::encode_header(h, f.data() + frame::udp_frame_overhead);
        if (len) std::memcpy(f.data() + frame::udp_frame_overhead + wire::header_bytes, body, len);
        frame::fill_udp_checksum(f.data());
        return f;
    }
    // Moves every frame the loop sent so far into `out` (linearised).
    void take(std::vector<std::vector<std::uint8_t>>& out) {
        while (rte_mbuf* mb = ring_get(tx)) {
            std::vector<std::uint8_t> f(mb->pkt_len);
            if (const void* src = rte_pktmbuf_read(mb, 0, mb->pkt_len, f.data()); src != f.data())
                std::memcpy(f.data(), src, mb->pkt_len); // contiguous: read returned the mbuf's own data
            rte_pktmbuf_free(mb);
            out.push_back(std::move(f));
        }
    }
    // Waits until the loop consumed the RX ring and sent `want` frames (or
    // 5 s passed), lets it settle, and returns everything it sent.
    std::vector<std::vector<std::uint8_t>> collect(std::size_t want) {
        std::vector<std::vector<std::uint8_t>> out;
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while ((out.size() < want || rte_ring_count(rx) > 0) && std::chrono::steady_clock::now() < until) {
            take(out);
            std::this_thread::yield();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        take(out);
        return out;
    }
    void drain() {
        while (rte_mbuf* m = ring_get(tx)) rte_pktmbuf_free(m);
    }
    std::uint64_t drops(drop_reason r) const {
        return d->counters(0).drops[static_cast<unsigned>(r)].load();
    }
};

wire::header hdr(wire::msg_type t, std::uint16_t rank, std::uint16_t world) {
    wire::header h;
    h.type = t;
    h.job_id = 5;
    h.job_token = 77;
    h.rank = rank;
    h.world_size = world;
    return h;
}

} // namespace

BOOST_AUTO_TEST_CASE(arp_and_ping_are_answered) {
    rail_fixture f("vd_arp");
    std::vector<std::uint8_t> arp(frame::arp_frame_bytes);
    frame::write_arp_request(arp.data(), f.peer, f.self.ip);
    f.inject(arp);
    auto out = f.collect(1);
    BOOST_REQUIRE(out.size() == 1u);
    const frame::info fi = frame::classify(out[0].data(), out[0].size(), f.peer);
    BOOST_TEST(static_cast<int>(fi.k) == static_cast<int>(frame::kind::arp_reply));
    BOOST_TEST(fi.src.ip == f.self.ip);
}

// railbench --embedded drives workers on railgated's lcore (daemon::host):
// the guest runs on the lcore, in the passes that found nothing, until it
// is done; the rail is served meanwhile; one guest at a time; stop() ends a
// guest that never finishes.
namespace {
struct guest_ctx {
    std::atomic<unsigned> steps{0};
    std::atomic<bool> release{false}, off_lcore{false};
};
bool guest_step(void* p) noexcept {
    auto& c = *static_cast<guest_ctx*>(p);
    if (rte_lcore_id() == LCORE_ID_ANY || rte_lcore_id() == rte_get_main_lcore()) c.off_lcore = true;
    c.steps.fetch_add(1, std::memory_order_relaxed);
    return c.release.load(std::memory_order_acquire);
}
bool wait_done(const net::lcore_guest& g) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!g.done.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    return g.done.load(std::memory_order_acquire);
}
} // namespace

BOOST_AUTO_TEST_CASE(an_lcore_hosts_a_guest_between_its_passes_until_it_is_done) {
    rail_fixture f("vd_guest");
    guest_ctx c, c2;
    net::lcore_guest g, other;
    g.step = other.step = guest_step;
    g.ctx = &c;
    other.ctx = &c2;
    BOOST_REQUIRE(f.d->host(g));
    BOOST_TEST(!f.d->host(other)); // one at a time
    // The rail is served while the guest runs.
    std::vector<std::uint8_t> arp(frame::arp_frame_bytes);
    frame::write_arp_request(arp.data(), f.peer, f.self.ip);
    f.inject(arp);
    BOOST_TEST(f.collect(1).size() == 1u);
    const unsigned before = c.steps.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    BOOST_TEST(c.steps.load() > before); // stepped again and again
    BOOST_TEST(!g.done.load());
    c.release = true;
    BOOST_REQUIRE(wait_done(g));
    const unsigned after = c.steps.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    BOOST_TEST(c.steps.load() == after); // dropped once done
    BOOST_TEST(!c.off_lcore.load());     // only ever on the rail's lcore
    // The next guest; the loops stop under it: it is let go, done.
    BOOST_REQUIRE(f.d->host(other));
    f.d->stop();
    BOOST_TEST(wait_done(other));
    BOOST_TEST(!f.d->host(g)); // the loops are not running
}

BOOST_AUTO_TEST_CASE(bursts_of_every_size_with_garbage_are_exact) {
    rail_fixture f("vd_agg");
    constexpr std::uint16_t W = 3;
    wire::join_body b;
    b.max_count = 1 << 20;
    b.pool_size = 64;
    std::uint8_t body[wire::join_body_bytes];
    wire::encode_join_body(b, body);
    for (std::uint16_t r = 0; r < W; ++r) f.inject(f.udp(hdr(wire::msg_type::join, r, W), body, sizeof body));
    BOOST_REQUIRE(f.collect(W).size() == W);

    // Chunk i holds the MTU-1500 chunk of fp32 (352): rank r's element j =
    // (r + 1) * 1e7 + i + j * 0.5f.
    constexpr unsigned elems = wire::chunk_bytes_for_mtu(1500) / sizeof(float);
    std::uint64_t chunk = 0, garbage = 0;
    for (unsigned burst : {0u, 1u, 3u, 4u, 5u, 31u, 32u}) {
        // `burst` contributions (whole chunks of W ranks, then a partial one).
        std::vector<std::vector<std::uint8_t>> frames;
        const std::uint64_t first = chunk;
        unsigned made = 0;
        for (; made < burst; ++made) {
            const std::uint16_t r = static_cast<std::uint16_t>(made % W);
            const std::uint64_t c = first + made / W;
            float data[elems];
            for (unsigned j = 0; j < elems; ++j) data[j] = static_cast<float>((r + 1) * 1e7) + static_cast<float>(c) + j * 0.5f;
            wire::header h = hdr(wire::msg_type::contrib, r, W);
            h.slot = static_cast<std::uint16_t>(c % 64);
            h.gen = static_cast<std::uint32_t>(c / 64);
            h.offset = c * elems;
            h.count = elems;
            frames.push_back(f.udp(h, data, sizeof data));
            if (made % 4 == 1) { // garbage after some: bad version, wrong token, truncated
                auto g = frames.back();
                g[frame::udp_frame_overhead] = 9;
                frame::fill_udp_checksum(g.data());
                frames.push_back(g);
                wire::header t = h;
                t.job_token = 1;
                frames.push_back(f.udp(t, data, sizeof data));
                frames.push_back(std::vector<std::uint8_t>(frames.back().begin(), frames.back().begin() + 50));
                garbage += 3;
            }
        }
        for (auto& fr : frames) f.inject(fr);
        const unsigned complete = made / W;
        const auto out = f.collect(complete * W);
        BOOST_TEST(out.size() == complete * W, "burst " << burst);
        for (const auto& o : out) {
            BOOST_REQUIRE(o.size() > frame::udp_frame_overhead);
            wire::header h;
            std::span<const std::uint8_t> p;
            BOOST_REQUIRE(wire::parse_server_message(o.data() + frame::udp_frame_overhead,
                                                     o.size() - frame::udp_frame_overhead, h,
                                                     p) == drop_reason::none);
            frame::endpoint dst = f.peer;
            dst.udp_port = static_cast<std::uint16_t>(40000 + h.rank);
            BOOST_REQUIRE(frame::classify(o.data(), o.size(), dst).k == frame::kind::udp);
            const std::uint64_t c = h.offset / elems;
            std::vector<float> got(elems);
            std::memcpy(got.data(), p.data(), p.size());
            for (unsigned j = 0; j < elems; ++j) {
                float want = 0;
                for (unsigned r = 0; r < W; ++r) {
                    const float v = static_cast<float>((r + 1) * 1e7) + static_cast<float>(c) + j * 0.5f;
                    want = r == 0 ? v : want + v;
                }
                BOOST_REQUIRE(got[j] == want);
            }
        }
        // Finish the partial chunk so the next burst starts clean.
        chunk = first + made / W;
        if (made % W) {
            for (unsigned r = made % W; r < W; ++r) {
                float data[elems];
                for (unsigned j = 0; j < elems; ++j) data[j] = static_cast<float>((r + 1) * 1e7) + static_cast<float>(chunk) + j * 0.5f;
                wire::header h = hdr(wire::msg_type::contrib, static_cast<std::uint16_t>(r), W);
                h.slot = static_cast<std::uint16_t>(chunk % 64);
                h.gen = static_cast<std::uint32_t>(chunk / 64);
                h.offset = chunk * elems;
                h.count = elems;
                f.inject(f.udp(h, data, sizeof data));
            }
            BOOST_TEST(f.collect(W).size() == W);
            ++chunk;
        }
    }
    BOOST_TEST(f.drops(drop_reason::rg_version) + f.drops(drop_reason::bad_token) +
                   f.drops(drop_reason::ip_truncated) == garbage);
    BOOST_TEST(f.d->counters(0).aggregations.load() == chunk);
}

// ---- Gateway forwarding: two net_ring rails, A (10.1.0.2) behind rail 0
// (10.1.0.1), B (10.2.0.2) behind rail 1 (10.2.0.1, MTU 1000).
namespace {

struct ring_port {
    rte_ring* rx = nullptr;
    rte_ring* tx = nullptr;
    int port = -1;
    ring_port(const std::string& name) {
        rx = rte_ring_create((name + "_rx").c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        tx = rte_ring_create((name + "_tx").c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        port = rte_eth_from_rings(name.c_str(), &rx, 1, &tx, 1, 0);
    }
};

unsigned gateways = 0; // ring and port names stay unique in the process

struct gateway_fixture {
    ring_port p0{"gw_a" + std::to_string(gateways)}, p1{"gw_b" + std::to_string(gateways++)};
    rte_mempool* pool = nullptr;
    std::unique_ptr<net::daemon> d;
    frame::mac_addr mac0, mac1, mac_a, mac_b;

    explicit gateway_fixture(unsigned reachable_ms = 30000) {
        BOOST_REQUIRE(p0.port >= 0 && p1.port >= 0);
        net::daemon_config dc;
        net::rail_config r0, r1;
        r0.name = "g0";
        r0.port_id = p0.port;
        r0.ip = 0x0A010001;
        r1.name = "g1";
        r1.port_id = p1.port;
        r1.ip = 0x0A020001;
        r1.mtu = 1000;
        // Shaped (never binding) so that frames are classified into TCs:
        // DSCP 46 -> TC 5 by default, VLAN PCP 5 -> TC 6 by this table.
        r1.rate_bps = 10'000'000'000ull;
        r1.tc_map.set("pcp", 5, 6);
        // An lcore each: what g0 routes out of g1 crosses to g1's lcore by
        // its forward ring, as on a gateway with a core per NIC (the TSan
        // build checks that crossing: burst.hpp's ring_put and ring_get).
        r0.lcore = 1;
        r1.lcore = 2;
        dc.rails = {r0, r1};
        dc.routes = {{0x0A010000, 24, "g0", 0}, {0x0A020000, 24, "g1", 0}};
        dc.mbufs_per_rail = 2048;
        dc.neighbour_reachable_ms = reachable_ms;
        d = std::make_unique<net::daemon>(dc);
        pool = net::make_pktmbuf_pool("gw_pool" + std::to_string(gateways), 2048, RTE_PKTMBUF_HEADROOM + 2048, SOCKET_ID_ANY);
        rte_ether_addr m;
        rte_eth_macaddr_get(static_cast<std::uint16_t>(p0.port), &m);
        std::memcpy(mac0.b, m.addr_bytes, 6);
        rte_eth_macaddr_get(static_cast<std::uint16_t>(p1.port), &m);
        std::memcpy(mac1.b, m.addr_bytes, 6);
        mac_a.b[0] = 0x02, mac_a.b[5] = 0xaa;
        mac_b.b[0] = 0x02, mac_b.b[5] = 0xbb;
        d->launch();
    }
    ~gateway_fixture() {
        d->stop();
        for (rte_ring* r : {p0.tx, p1.tx}) {
            while (rte_mbuf* m = ring_get(r)) rte_pktmbuf_free(m);
        }
        d.reset();
        rte_mempool_free(pool);
    }
    void inject(rte_ring* rx, const std::vector<std::uint8_t>& f) {
        rte_mbuf* m = rte_pktmbuf_alloc(pool);
        BOOST_REQUIRE(m);
        std::memcpy(rte_pktmbuf_append(m, static_cast<std::uint16_t>(f.size())), f.data(), f.size());
        BOOST_REQUIRE(ring_put(rx, m));
    }
    // A's UDP datagram of `len` payload bytes to `dst` (sent to rail 0's MAC).
    std::vector<std::uint8_t> from_a(std::uint32_t dst, std::size_t len, std::uint8_t ttl = 64, std::uint8_t seq = 0) const {
        frame::endpoint src, to;
        src.mac = mac_a;
        src.ip = 0x0A010002;
        src.udp_port = 5000;
        src.tos = 46 << 2;
        to.mac = mac0;
        to.ip = dst;
        to.udp_port = 6000;
        std::vector<std::uint8_t> f(frame::udp_frame_overhead + len, seq);
        frame::write_udp_headers(f.data(), src, to, len);
        if (ttl != 64) {
            f[14 + 8] = ttl;
            f[24] = f[25] = 0;
            const std::uint16_t c = frame::inet_checksum(&f[14], 20);
            f[24] = static_cast<std::uint8_t>(c >> 8);
            f[25] = static_cast<std::uint8_t>(c);
        }
        return f;
    }
    // Frames sent on a port within `ms` (until `want` arrived).
    std::vector<std::vector<std::uint8_t>> sent(rte_ring* tx, std::size_t want, int ms = 2000) {
        std::vector<std::vector<std::uint8_t>> out;
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
        while (out.size() < want && std::chrono::steady_clock::now() < until) {
            while (rte_mbuf* mb = ring_get(tx)) {
                const auto* p = rte_pktmbuf_mtod(mb, const std::uint8_t*);
                out.emplace_back(p, p + mb->data_len);
                rte_pktmbuf_free(mb);
            }
            std::this_thread::yield();
        }
        return out;
    }
    std::uint64_t drops(std::size_t rail, drop_reason r) const {
        return d->counters(rail).drops[static_cast<unsigned>(r)].load();
    }
    // B's ARP reply to rail 1 (10.2.0.1), from `mac`.
    std::vector<std::uint8_t> arp_reply_from_b(const frame::mac_addr& mac) const {
        frame::endpoint b;
        b.mac = mac;
        b.ip = 0x0A020002;
        std::vector<std::uint8_t> arp(frame::arp_frame_bytes);
        frame::write_arp_request(arp.data(), b, 0x0A020001);
        frame::arp_reply_in_place(arp.data(), b); // as if answering rail 1's request
        std::memcpy(arp.data(), mac1.b, 6);
        std::memcpy(arp.data() + 14 + 18, mac1.b, 6);
        arp[14 + 24] = 10, arp[14 + 25] = 2, arp[14 + 26] = 0, arp[14 + 27] = 1;
        return arp;
    }
};

std::uint32_t be32(const std::uint8_t* p) { return std::uint32_t{p[0]} << 24 | p[1] << 16 | p[2] << 8 | p[3]; }

} // namespace

BOOST_AUTO_TEST_CASE(gateway_routes_through_arp_and_rewrites_headers) {
    gateway_fixture g;
    // B is unknown: the datagram waits, and rail 1 asks for B.
    const auto dgram = g.from_a(0x0A020002, 200, 64, 1);
    g.inject(g.p0.rx, dgram);
    auto out = g.sent(g.p1.tx, 1);
    BOOST_REQUIRE(out.size() == 1u);
    frame::endpoint b;
    b.mac = g.mac_b;
    b.ip = 0x0A020002;
    frame::info fi = frame::classify(out[0].data(), out[0].size(), b);
    BOOST_TEST(static_cast<int>(fi.k) == static_cast<int>(frame::kind::arp_request));
    BOOST_TEST(fi.src.ip == 0x0A020001u);
    BOOST_TEST((fi.src.mac == g.mac1));
    // B answers: the held datagram leaves, rewritten.
    g.inject(g.p1.rx, g.arp_reply_from_b(g.mac_b));
    out = g.sent(g.p1.tx, 1);
    BOOST_REQUIRE(out.size() == 1u);
    const auto& f = out[0];
    BOOST_REQUIRE(f.size() == dgram.size());
    BOOST_TEST((std::memcmp(f.data(), g.mac_b.b, 6) == 0));
    BOOST_TEST((std::memcmp(f.data() + 6, g.mac1.b, 6) == 0));
    BOOST_TEST(f[14 + 8] == 63); // TTL
    BOOST_TEST(frame::inet_checksum(f.data() + 14, 20) == 0);
    BOOST_TEST((std::memcmp(f.data() + 14, dgram.data() + 14, 8) == 0)); // TOS, length, id, DF kept
    BOOST_TEST((std::memcmp(f.data() + 26, dgram.data() + 26, f.size() - 26) == 0)); // addresses, payload
    BOOST_TEST(g.d->counters(1).fwd_packets.load() == 1u);
    BOOST_TEST(g.d->counters(1).arp_requests.load() == 1u);
    BOOST_TEST(g.d->counters(1).neighbours.load() == 1u);

    // Resolved now: a stream goes straight through, in order, every TTL and
    // checksum right (the incremental update covers every TTL).
    for (unsigned i = 0; i < 200; ++i) g.inject(g.p0.rx, g.from_a(0x0A020002, 100 + i, static_cast<std::uint8_t>(2 + i), static_cast<std::uint8_t>(i)));
    out = g.sent(g.p1.tx, 200);
    BOOST_REQUIRE(out.size() == 200u);
    for (unsigned i = 0; i < 200; ++i) {
        BOOST_TEST(out[i].size() == frame::udp_frame_overhead + 100 + i);
        BOOST_TEST(out[i][14 + 8] == 1 + i);
        BOOST_TEST(frame::inet_checksum(out[i].data() + 14, 20) == 0);
    }

    // Frames for this rail's own address still get railgated's answers, and
    // frames to another MAC are not routed.
    auto other = g.from_a(0x0A020002, 100);
    other[0] ^= 0x40;
    g.inject(g.p0.rx, other);
    BOOST_TEST(g.sent(g.p1.tx, 1, 100).empty());
    BOOST_TEST(g.drops(0, drop_reason::ip_not_ours) == 1u);

    // 802.1Q-tagged datagrams keep their tag.
    auto tagged = g.from_a(0x0A020002, 100);
    const std::uint8_t tag[] = {0x81, 0x00, 0xa0, 0x07};
    tagged.insert(tagged.begin() + 12, tag, tag + 4);
    g.inject(g.p0.rx, tagged);
    out = g.sent(g.p1.tx, 1);
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_TEST((out[0][12] == 0x81 && out[0][14] == 0xa0 && out[0][15] == 0x07 && out[0][18 + 8] == 63));
    BOOST_TEST(frame::inet_checksum(out[0].data() + 18, 20) == 0);
    // Classified on the way out: the untagged stream (DSCP 46) in TC 5, the
    // tagged frame (PCP 5) in TC 6 by the rail's pcp table, ARP in TC 0.
    BOOST_TEST(g.d->counters(1).tc_packets[5].load() == 201u);
    BOOST_TEST(g.d->counters(1).tc_packets[6].load() == 1u);
    BOOST_TEST(g.d->counters(1).tc_packets[0].load() == 1u);
    // Per route: the first datagram, the stream and the tagged one.
    for (const net::route_status& r : g.d->routes())
        if (r.prefix == 0x0A020000) {
            BOOST_TEST(r.packets == 202u);
            BOOST_TEST(r.bytes > 202u * 100);
        } else {
            BOOST_TEST(r.packets == 0u);
        }
}

BOOST_AUTO_TEST_CASE(gateway_answers_ttl_no_route_and_too_big_with_icmp) {
    gateway_fixture g;
    frame::endpoint a;
    a.mac = g.mac_a;
    a.ip = 0x0A010002;
    auto icmp_from_rail0 = [&](std::uint8_t type, std::uint8_t code) {
        auto out = g.sent(g.p0.tx, 1);
        BOOST_REQUIRE(out.size() == 1u);
        const auto& f = out[0];
        BOOST_REQUIRE(f.size() >= 14u + 20 + 8 + 28);
        BOOST_TEST((std::memcmp(f.data(), g.mac_a.b, 6) == 0));
        BOOST_TEST(be32(f.data() + 14 + 12) == 0x0A010001u);
        BOOST_TEST(be32(f.data() + 14 + 16) == a.ip);
        BOOST_TEST(f[14 + 9] == 1);
        BOOST_TEST(f[34] == type);
        BOOST_TEST(f[35] == code);
        return f;
    };
    g.inject(g.p0.rx, g.from_a(0x0A020002, 100, 1));
    icmp_from_rail0(11, 0);
    BOOST_TEST(g.drops(0, drop_reason::ttl_expired) == 1u);
    std::this_thread::sleep_for(std::chrono::milliseconds(2)); // ICMP errors: one per ms
    g.inject(g.p0.rx, g.from_a(0x0A090909, 100));
    icmp_from_rail0(3, 0);
    BOOST_TEST(g.drops(0, drop_reason::no_route) == 1u);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    g.inject(g.p0.rx, g.from_a(0x0A020002, 1000 - 28 + 1)); // 1001 bytes of IPv4, DF set
    const auto f = icmp_from_rail0(3, 4);
    BOOST_TEST((f[40] << 8 | f[41]) == 1000); // rail 1's MTU
    BOOST_TEST(g.drops(0, drop_reason::fwd_too_big) == 1u);
    BOOST_TEST(g.d->counters(0).icmp_errors.load() == 3u);
    BOOST_TEST(g.sent(g.p1.tx, 1, 100).empty()); // nothing leaked to B's side
}

BOOST_AUTO_TEST_CASE(gateway_routes_change_live_and_unanswered_next_hops_drop) {
    gateway_fixture g;
    // A next hop that never answers: 3 ARP requests a second apart, then the
    // 8 held datagrams are dropped (and the 9th and 10th at once).
    for (unsigned i = 0; i < 10; ++i) g.inject(g.p0.rx, g.from_a(0x0A020063, 100));
    const auto asks = g.sent(g.p1.tx, 3, 4000);
    BOOST_TEST(asks.size() == 3u);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (g.drops(1, drop_reason::neighbour_unresolved) < 10 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    BOOST_TEST(g.drops(1, drop_reason::neighbour_unresolved) == 10u);
    BOOST_TEST(g.d->counters(1).arp_requests.load() == 3u);

    // Live routes: 10.3.0.0/16 via 10.2.0.99 (unresolved: it asks for the
    // next hop, not the destination), then deleted again.
    auto packets_of = [&](std::uint32_t prefix) {
        for (const net::route_status& r : g.d->routes())
            if (r.prefix == prefix) return r.packets;
        return std::uint64_t{~0ull};
    };
    BOOST_TEST(packets_of(0x0A020000) == 10u);
    BOOST_TEST(g.d->add_route({0x0A030000, 16, "g1", 0x0A020099}).empty());
    BOOST_TEST(packets_of(0x0A020000) == 10u); // carried over to the new table
    BOOST_TEST(!g.d->add_route({0x0A030000, 16, "g0", 0}).empty()); // exists
    BOOST_TEST(!g.d->add_route({0x0A040000, 16, "nosuch", 0}).empty());
    BOOST_TEST(!g.d->add_route({0x0A040000, 16, "g1", 0x0A020001}).empty()); // via a rail's own address
    BOOST_TEST(g.d->routes().size() == 3u);
    g.inject(g.p0.rx, g.from_a(0x0A030405, 100));
    auto out = g.sent(g.p1.tx, 1);
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_TEST(be32(out[0].data() + 14 + 24) == 0x0A020099u); // ARP target: the next hop
    BOOST_TEST(!g.d->remove_rail(1).empty()); // routes leave by it
    BOOST_TEST(g.d->remove_route(0x0A030000, 16).empty());
    BOOST_TEST(!g.d->remove_route(0x0A030000, 16).empty());
    BOOST_TEST(packets_of(0x0A020000) == 10u);
    g.inject(g.p0.rx, g.from_a(0x0A030405, 100));
    g.sent(g.p0.tx, 1); // the ICMP unreachable
    BOOST_TEST(g.drops(0, drop_reason::no_route) == 1u);
}

BOOST_AUTO_TEST_CASE(gateway_confirms_stale_neighbours) {
    gateway_fixture g(100); // a next hop's MAC is trusted for 100 ms
    g.inject(g.p0.rx, g.from_a(0x0A020002, 100));
    BOOST_REQUIRE(g.sent(g.p1.tx, 1).size() == 1u); // the ARP request
    g.inject(g.p1.rx, g.arp_reply_from_b(g.mac_b));
    BOOST_REQUIRE(g.sent(g.p1.tx, 1).size() == 1u); // the held datagram
    std::this_thread::sleep_for(std::chrono::milliseconds(1100)); // stale, and a second since the last ask
    // Stale: the datagram still leaves at once, and rail 1 asks for B again.
    g.inject(g.p0.rx, g.from_a(0x0A020002, 100));
    auto out = g.sent(g.p1.tx, 2);
    BOOST_REQUIRE(out.size() == 2u);
    unsigned arps = 0, to_b = 0;
    for (const auto& f : out) {
        arps += f[12] == 0x08 && f[13] == 0x06;
        to_b += std::memcmp(f.data(), g.mac_b.b, 6) == 0;
    }
    BOOST_TEST(arps == 1u);
    BOOST_TEST(to_b == 1u);
    // B answers from a new NIC: traffic follows it.
    frame::mac_addr moved = g.mac_b;
    moved.b[4] = 0x77;
    g.inject(g.p1.rx, g.arp_reply_from_b(moved));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    g.inject(g.p0.rx, g.from_a(0x0A020002, 100));
    out = g.sent(g.p1.tx, 1);
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_TEST((std::memcmp(out[0].data(), moved.b, 6) == 0));
    BOOST_TEST(g.d->counters(1).arp_requests.load() == 2u);
}

// The daemon places rails by engine::place with the NIC's node: a rail whose
// NIC is on a node without a worker lcore (this EAL has node 0 only) is
// refused, naming the rail, and what it had opened is released (a second
// daemon in the process reuses the pool names); with its lcore set it is
// served across nodes. Its pools fall back to any node (node 1 has no EAL
// memory here), with a warning.
BOOST_AUTO_TEST_CASE(daemon_placement_follows_the_nic_node) {
    ring_port p("vd_place");
    BOOST_REQUIRE(p.port >= 0);
    net::daemon_config dc;
    net::rail_config rc;
    rc.name = "far";
    rc.port_id = p.port;
    rc.ip = 0x0A090001;
    rc.numa = 1;
    dc.rails = {rc};
    dc.mbufs_per_rail = 1024;
    try {
        net::daemon d(dc);
        BOOST_FAIL("a rail on NUMA node 1 was placed with no lcore there");
    } catch (const std::runtime_error& e) {
        const std::string what = e.what();
        BOOST_TEST(what.find("rail far: its NIC is on NUMA node 1, which has no CPU to serve it") != std::string::npos, what);
    }
    // The refused daemon closed its port: the override gets a port of its own.
    ring_port q("vd_place2");
    BOOST_REQUIRE(q.port >= 0);
    dc.rails[0].port_id = q.port;
    dc.rails[0].lcore = 1; // an explicit override is served, across nodes
    net::daemon d(dc);
    BOOST_TEST(d.status().at(0).lcore == 1u);
}

// ---- the job lifecycle through the rail loop

namespace {

struct sent {
    wire::header h;
    std::string text;
};
// railgated's messages among frames it sent (ARP and such skipped).
std::vector<sent> messages(const std::vector<std::vector<std::uint8_t>>& out) {
    std::vector<sent> v;
    for (const auto& o : out) {
        if (o.size() < frame::udp_frame_overhead + wire::header_bytes) continue;
        sent x;
        std::span<const std::uint8_t> p;
        if (wire::parse_server_message(o.data() + frame::udp_frame_overhead, o.size() - frame::udp_frame_overhead, x.h,
                                       p) != drop_reason::none)
            continue;
        x.text.assign(p.begin(), p.end());
        v.push_back(x);
    }
    return v;
}

std::vector<std::uint8_t> join_frame(const rail_fixture& f, std::uint16_t rank, std::uint16_t world,
                                     std::uint64_t nonce, int port = -1, std::uint32_t job = 5, std::uint8_t tos = 0,
                                     std::uint32_t shape = 0) {
    wire::join_body b;
    b.max_count = 1 << 16;
    b.pool_size = 4;
    b.nonce = nonce;
    std::uint8_t body[wire::join_body_bytes];
    wire::encode_join_body(b, body);
    wire::header h = hdr(wire::msg_type::join, rank, world);
    h.job_id = job;
    h.aux = shape;
    return f.udp(h, body, sizeof body, port, tos);
}

std::vector<std::uint8_t> contrib_frame(const rail_fixture& f, std::uint16_t rank, std::uint16_t world,
                                        std::uint32_t gen = 0, std::uint8_t tos = 0) {
    float data[256];
    for (unsigned i = 0; i < 256; ++i) data[i] = static_cast<float>(rank * 1000 + i);
    wire::header h = hdr(wire::msg_type::contrib, rank, world);
    h.count = 256;
    h.gen = gen;
    return f.udp(h, data, sizeof data, -1, tos);
}

// Joins ranks 0..world-1 (nonce rank + 1); returns the job's incarnation.
std::uint32_t join_ranks(rail_fixture& f, std::uint16_t world) {
    for (std::uint16_t r = 0; r < world; ++r) f.inject(join_frame(f, r, world, r + 1u));
    const auto acks = messages(f.collect(world));
    BOOST_REQUIRE(acks.size() == world);
    for (const sent& a : acks) BOOST_REQUIRE(a.h.type == wire::msg_type::join_ack);
    return acks[0].h.gen;
}

unsigned active(const net::daemon& d) {
    unsigned n = 0;
    for (const auto& s : d.status()) n += s.active_jobs;
    return n;
}

} // namespace

// A job's chunk and policy are fixed when its first JOIN creates it: a rank
// that joins after `rail set mtu` or `policy set` is told the job's, not the
// rail's new ones (before, its JOIN_ACK gave the rail's: two ranks of one job
// chunked it differently). A JOIN naming the shape (the worker's other
// rails) creates its job so; one the port cannot carry now is refused.
BOOST_AUTO_TEST_CASE(a_jobs_chunk_and_policy_hold_for_ranks_joining_after_a_change) {
    rail_fixture f("vd_shape");
    auto ack_of = [&](const std::vector<std::uint8_t>& join) {
        f.inject(join);
        const auto out = f.collect(1);
        BOOST_REQUIRE(out.size() == 1u);
        const std::uint8_t* m = out[0].data() + frame::udp_frame_overhead;
        wire::header h;
        std::span<const std::uint8_t> body;
        BOOST_REQUIRE(wire::parse_server_message(m, out[0].size() - frame::udp_frame_overhead, h, body) == drop_reason::none);
        std::pair<wire::header, wire::join_ack_body> r{h, {}};
        if (h.type == wire::msg_type::join_ack) BOOST_REQUIRE(wire::decode_join_ack_body(body, r.second));
        return r;
    };
    constexpr std::uint32_t at1500 = wire::chunk_bytes_for_mtu(1500), at1000 = wire::chunk_bytes_for_mtu(1000);
    auto a = ack_of(join_frame(f, 0, 2, 1));
    BOOST_TEST(a.second.chunk_bytes == at1500);
    BOOST_TEST((a.second.policy == wire::rail_policy::rail));
    std::string state;
    BOOST_REQUIRE(f.d->set_mtu(0, 1000, state).empty());
    BOOST_TEST(state.find("draining") == 0u, state); // job 5's 1408 B chunks hold the port at 1500
    BOOST_REQUIRE(f.d->set_policy(wire::rail_policy::lag).empty());
    a = ack_of(join_frame(f, 1, 2, 2));
    BOOST_TEST((a.first.type == wire::msg_type::join_ack));
    BOOST_TEST(a.second.chunk_bytes == at1500);
    BOOST_TEST((a.second.policy == wire::rail_policy::rail));
    // A new job gets the rail's new ones.
    a = ack_of(join_frame(f, 0, 2, 1, -1, 6));
    BOOST_TEST(a.second.chunk_bytes == at1000);
    BOOST_TEST((a.second.policy == wire::rail_policy::lag));
    // Named by the JOIN: as named, while the port (at 1500 still) carries it.
    a = ack_of(join_frame(f, 0, 2, 1, -1, 7, 0, wire::shape_word(at1500, false)));
    BOOST_TEST(a.second.chunk_bytes == at1500);
    BOOST_TEST((a.second.policy == wire::rail_policy::rail));
    // The job's other rank naming another shape is refused, told the job's.
    a = ack_of(join_frame(f, 1, 2, 2, -1, 7, 0, wire::shape_word(at1000, true)));
    BOOST_TEST((a.first.type == wire::msg_type::error));
    BOOST_TEST(a.first.aux == static_cast<std::uint32_t>(wire::error_code::shape_mismatch));
    BOOST_TEST(a.first.offset == wire::shape_word(at1500, false, 1));
    // Above what the port carries: refused, saying so.
    f.inject(join_frame(f, 0, 2, 1, -1, 8, 0, wire::shape_word(2880, false)));
    const auto out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_TEST(out[0].h.aux == static_cast<std::uint32_t>(wire::error_code::shape_mismatch));
    BOOST_TEST(out[0].h.offset == 0u);
    BOOST_TEST(out[0].text.find("rail r0's MTU 1500 carries chunks of at most 1408 B; job 8's first rail gave it 2880 B") == 0u,
               out[0].text);
    BOOST_TEST(active(*f.d) == 3u);
}

// A job's rails are the ones its first rail listed when it was created: a
// rail added while it runs is not its. A rank that joins afterwards is told
// the job's rails, not the rail's new list, and under LAG the job's
// contributions are aggregated on the home member found over its rails.
// Before, the home moved to the added rail, where the job is not: every
// contribution was answered as one for an unknown job and the job hung
// (live_changes.sh with RAILGATE_CHAOS_RAILS=1, seed 11); and the late
// rank striped over one rail more than the others.
BOOST_AUTO_TEST_CASE(a_rail_added_while_a_job_runs_is_not_the_jobs) {
    rail_fixture f("vd_added");
    BOOST_REQUIRE(f.d->set_policy(wire::rail_policy::lag).empty());
    // A job whose home over two rails would be the rail to come.
    std::uint32_t job = 10;
    while (wire::lag_member(job, 77, 2) != 1) ++job;
    auto ack_of = [&](std::uint16_t rank, std::uint32_t id) {
        f.inject(join_frame(f, rank, 2, rank + 1u, -1, id));
        const auto out = f.collect(1);
        BOOST_REQUIRE(out.size() == 1u);
        wire::header h;
        std::span<const std::uint8_t> body;
        BOOST_REQUIRE(wire::parse_server_message(out[0].data() + frame::udp_frame_overhead,
                                                 out[0].size() - frame::udp_frame_overhead, h, body) == drop_reason::none);
        BOOST_REQUIRE((h.type == wire::msg_type::join_ack));
        wire::join_ack_body a;
        BOOST_REQUIRE(wire::decode_join_ack_body(body, a));
        return a;
    };
    BOOST_TEST(ack_of(0, job).n_rails == 1u);
    net::rail_config rc;
    rc.name = "r1";
    rc.ip = 0xC6120101;
    rc.mtu = 1500;
    std::size_t index = 0;
    BOOST_REQUIRE_MESSAGE(f.d->add_rail(rc, "net_null_vdadd,no-rx=1", index).empty(), "rail add");
    // The job's second rank: the job's one rail. A new job: both.
    BOOST_TEST(ack_of(1, job).n_rails == 1u);
    BOOST_TEST(ack_of(0, job + 1).n_rails == 2u);
    // Both ranks' contributions are summed here, the job's only member.
    for (std::uint16_t r = 0; r < 2; ++r) {
        float data[256];
        for (unsigned i = 0; i < 256; ++i) data[i] = static_cast<float>(r * 1000 + i);
        wire::header h = hdr(wire::msg_type::contrib, r, 2);
        h.job_id = job;
        h.count = 256;
        f.inject(f.udp(h, data, sizeof data));
    }
    const auto out = messages(f.collect(2));
    unsigned results = 0;
    for (const sent& m : out) {
        BOOST_TEST((m.h.type == wire::msg_type::result), "a " << static_cast<int>(m.h.type) << ": " << m.text);
        results += m.h.type == wire::msg_type::result;
    }
    BOOST_TEST(results == 2u);
    BOOST_TEST(f.drops(drop_reason::unknown_job) == 0u);
    BOOST_TEST(f.drops(drop_reason::wrong_rail_or_slot) == 0u);
}

// A rail is removed only when no job lists it, and while railgated's lcores
// take a new advertisement one after the other, JOINs wait (rails_changing)
// rather than be answered from two. Before, a removal checked only the jobs
// on the rail itself: a job its first rail had just listed it to lost it
// while its ranks joined; and a removal found busy took the rail out of the
// list, then put it back: ranks of one job joining meanwhile were given two
// rail lists (lagplug: LAG jobs back to back while a rail was added and
// removed, 139 of 700 jobs failed; live_changes.sh seed 3).
BOOST_AUTO_TEST_CASE(a_removal_waits_for_jobs_listing_the_rail_and_joins_wait_for_rail_changes) {
    ring_port second("vd_hold1");
    BOOST_REQUIRE(second.port >= 0);
    rail_fixture f("vd_hold", [&](net::daemon_config& dc) {
        dc.rails[0].lcore = 1;
        net::rail_config rc;
        rc.name = "r1";
        rc.port_id = second.port;
        rc.ip = 0xC6120101;
        rc.lcore = 2;
        dc.rails.push_back(rc);
    });
    BOOST_REQUIRE(f.d->status().at(1).lcore == 2u);
    // Rank 0 joins the job on its first rail, which lists both.
    f.inject(join_frame(f, 0, 2, 1));
    auto out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_REQUIRE((out[0].h.type == wire::msg_type::join_ack));
    const std::string e = f.d->remove_rail(1);
    BOOST_TEST(e == "a job on rail r0 lists rail r1 (its ranks are joining it); remove it between jobs");
    BOOST_TEST(f.d->status().size() == 2u);

    // r1's lcore stops for 600 ms; an MTU change meanwhile waits for it,
    // r0 holding JOINs from the moment its lcore took the new chunk.
    unsigned lcore = 0;
    BOOST_REQUIRE(f.d->freeze(1, 600, lcore).empty());
    BOOST_TEST(lcore == 2u);
    std::string change_err = "not run", state;
    std::thread change([&] { change_err = f.d->set_mtu(0, 1000, state); });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    f.inject(join_frame(f, 0, 2, 7, -1, 6));
    out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_TEST((out[0].h.type == wire::msg_type::error));
    BOOST_TEST(out[0].h.aux == static_cast<std::uint32_t>(wire::error_code::rails_changing));
    BOOST_TEST(out[0].h.gen == 7u); // the JOIN's nonce: it answers that JOIN
    BOOST_TEST(out[0].text.find("railgated is changing its rails") == 0u, out[0].text);
    change.join();
    BOOST_TEST(change_err.empty(), change_err);
    // Every lcore has the new chunk: the JOIN sent again is answered with it.
    f.inject(join_frame(f, 0, 2, 7, -1, 6));
    out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_REQUIRE((out[0].h.type == wire::msg_type::join_ack));
    f.inject(join_frame(f, 0, 2, 8, -1, 9));
    wire::header h;
    std::span<const std::uint8_t> body;
    const auto acks = f.collect(1);
    BOOST_REQUIRE(acks.size() == 1u);
    BOOST_REQUIRE(wire::parse_server_message(acks[0].data() + frame::udp_frame_overhead,
                                             acks[0].size() - frame::udp_frame_overhead, h, body) == drop_reason::none);
    wire::join_ack_body a;
    BOOST_REQUIRE(wire::decode_join_ack_body(body, a));
    BOOST_TEST(a.chunk_bytes == wire::chunk_bytes_for_mtu(1000));
}

BOOST_AUTO_TEST_CASE(a_stalled_rank_is_named_and_its_job_freed) {
    rail_fixture f("vd_stall", [](net::daemon_config& dc) { dc.stall_ms = 200; });
    const std::uint32_t inst = join_ranks(f, 3);
    BOOST_TEST(inst >= 0x80000000u);
    // Ranks 0 and 1 contribute chunk 0; rank 2 never does.
    const auto t0 = std::chrono::steady_clock::now();
    f.inject(contrib_frame(f, 0, 3));
    f.inject(contrib_frame(f, 1, 3));
    const auto errs = messages(f.collect(3));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    BOOST_REQUIRE(errs.size() == 3u);
    for (const sent& e : errs) {
        BOOST_TEST((e.h.type == wire::msg_type::error));
        BOOST_TEST(e.h.aux == static_cast<std::uint32_t>(wire::error_code::rank_failed));
        BOOST_TEST(e.h.offset == 2u);
        BOOST_TEST(e.h.gen == inst);
        BOOST_TEST(e.text.find("rank 2 sent nothing to slot 0 of job 5 on rail r0") != std::string::npos, e.text);
    }
    BOOST_TEST(s >= 0.19);
    BOOST_TEST(s < 0.6);
    BOOST_TEST(active(*f.d) == 0u);
    BOOST_TEST(f.d->counters(0).stalls.load() == 1u);
    // The id is free at once; a new incarnation.
    BOOST_TEST(join_ranks(f, 3) != inst);
}

// A member whose copy of the job's end was lost (a lossy rail) sends on: it
// is told why the job ended, with the job's incarnation, not only that the
// job is gone; a stranger (another token) learns nothing of it.
BOOST_AUTO_TEST_CASE(a_member_that_missed_its_jobs_end_is_told_why) {
    rail_fixture f("vd_retold", [](net::daemon_config& dc) {
        dc.stall_ms = 100;
        dc.assemble_ms = 400;
    });
    const std::uint32_t inst = join_ranks(f, 3);
    f.inject(contrib_frame(f, 0, 3));
    f.inject(contrib_frame(f, 1, 3));
    BOOST_REQUIRE(messages(f.collect(3)).size() == 3u); // the ERRORs, lost on their way
    BOOST_TEST(active(*f.d) == 0u);
    auto told_why = [&](const sent& e, std::uint16_t rank) {
        BOOST_TEST((e.h.type == wire::msg_type::error));
        BOOST_TEST(e.h.rank == rank);
        BOOST_TEST(e.h.aux == static_cast<std::uint32_t>(wire::error_code::rank_failed));
        BOOST_TEST(e.h.offset == 2u);
        BOOST_TEST(e.h.gen == inst);
        BOOST_TEST(e.text.find("rank 2 sent nothing to slot 0 of job 5 on rail r0") != std::string::npos, e.text);
    };
    // Rank 0's PING (its probe), rank 1's retransmitted contribution.
    wire::header p = hdr(wire::msg_type::ping, 0, 3);
    p.gen = inst;
    f.inject(f.udp(p, nullptr, 0));
    auto out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    told_why(out[0], 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(2)); // past the unknown-job rate limit
    f.inject(contrib_frame(f, 1, 3, 1));
    out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    told_why(out[0], 1);
    BOOST_TEST(f.d->counters(0).ends_retold.load() == 2u);
    // Another token, or a PING of another incarnation: only that the job is gone.
    for (const std::uint64_t token : {std::uint64_t{78}, std::uint64_t{77}}) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        wire::header q = p;
        q.job_token = token;
        if (token == 77) q.gen = inst ^ 1;
        f.inject(f.udp(q, nullptr, 0));
        out = messages(f.collect(1));
        BOOST_REQUIRE(out.size() == 1u);
        BOOST_TEST(out[0].h.aux == static_cast<std::uint32_t>(wire::error_code::unknown_job));
        BOOST_TEST(out[0].text.find("railgated has no job 5 with rank 0") != std::string::npos, out[0].text);
    }
    // After the assembly time, the job is only gone.
    std::this_thread::sleep_for(std::chrono::milliseconds(450));
    f.inject(f.udp(p, nullptr, 0));
    out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_TEST(out[0].h.aux == static_cast<std::uint32_t>(wire::error_code::unknown_job));
    BOOST_TEST(f.d->counters(0).ends_retold.load() == 2u);
}

// The same id and token started twice: a live rank claimed from another
// port before the job has completed a chunk ends the job for its members
// and refuses the JOIN (rank_claimed), and the id and token stay refused.
BOOST_AUTO_TEST_CASE(a_rank_claimed_twice_before_the_job_ran_ends_it_for_both) {
    rail_fixture f("vd_clash");
    const std::uint32_t inst = join_ranks(f, 2);
    f.inject(join_frame(f, 1, 2, 0x1234567899ull, 41000));
    auto out = messages(f.collect(3));
    BOOST_REQUIRE(out.size() == 3u);
    unsigned told = 0, refused = 0;
    for (const sent& e : out) {
        BOOST_TEST((e.h.type == wire::msg_type::error));
        BOOST_TEST(e.h.aux == static_cast<std::uint32_t>(wire::error_code::rank_claimed));
        BOOST_TEST(e.text.find("two processes claim rank 1 of job 5 (198.18.0.10:40001 and 198.18.0.10:41000)") !=
                       std::string::npos, e.text);
        if (e.h.gen == inst) ++told;
        if (e.h.gen == 0x34567899u) ++refused;
    }
    BOOST_TEST(told == 2u);
    BOOST_TEST(refused == 1u);
    BOOST_TEST(active(*f.d) == 0u);
    // A late rank of either run is refused too, not made a new job.
    f.inject(join_frame(f, 0, 2, 0x55));
    out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_TEST(out[0].h.aux == static_cast<std::uint32_t>(wire::error_code::rank_claimed));
    BOOST_TEST(out[0].text.find("job 5 with this token ended") != std::string::npos, out[0].text);
    BOOST_TEST(active(*f.d) == 0u);
}

// RESULT's congestion echo (aux): each rank's result says how long its
// contribution waited for the others' and whether it came marked ECN CE;
// results are ECN-capable when the JOIN was, never CE themselves.
BOOST_AUTO_TEST_CASE(results_echo_each_ranks_wait_and_its_ce_mark) {
    rail_fixture f("vd_echo");
    // Rank 0 joins ECN-capable (ECT(0)), rank 1's JOIN came marked CE on its way.
    f.inject(join_frame(f, 0, 2, 1, -1, 5, 0xb8 | wire::ecn_ect0));
    f.inject(join_frame(f, 1, 2, 2, -1, 5, wire::ecn_ce));
    BOOST_REQUIRE(messages(f.collect(2)).size() == 2u);
    // Chunk 0: rank 0 first, rank 1 (marked CE) 60 ms later.
    f.inject(contrib_frame(f, 0, 2, 0, wire::ecn_ect0));
    BOOST_REQUIRE(f.collect(0).empty());
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    f.inject(contrib_frame(f, 1, 2, 0, wire::ecn_ce));
    const auto out = f.collect(2);
    BOOST_REQUIRE(out.size() == 2u);
    for (const auto& fr : out) {
        const auto m = messages({fr});
        BOOST_REQUIRE(m.size() == 1u);
        BOOST_REQUIRE((m[0].h.type == wire::msg_type::result));
        const std::uint32_t wait_us = m[0].h.aux & wire::result_wait_us_mask;
        const bool ce = (m[0].h.aux & wire::result_ce) != 0;
        const std::uint8_t tos = fr[frame::eth_bytes + 1];
        BOOST_TEST((m[0].h.aux & ~(wire::result_wait_us_mask | wire::result_ce)) == 0u);
        if (m[0].h.rank == 0) {
            BOOST_TEST(wait_us >= 50'000u, wait_us);
            BOOST_TEST(wait_us < 5'000'000u, wait_us);
            BOOST_TEST(!ce);
            BOOST_TEST(tos == (0xb8 | wire::ecn_ect0)); // its DSCP, ECN-capable
        } else {
            BOOST_TEST(wait_us < 50'000u, wait_us); // it completed the slot
            BOOST_TEST(ce);
            BOOST_TEST(tos == wire::ecn_ect0); // ECN-capable, never the JOIN's CE
        }
    }
    // The next generation of the slot starts clean: no mark, no old wait.
    f.inject(contrib_frame(f, 1, 2, 1));
    f.inject(contrib_frame(f, 0, 2, 1));
    const auto next = messages(f.collect(2));
    BOOST_REQUIRE(next.size() == 2u);
    for (const sent& r : next) {
        BOOST_TEST(!(r.h.aux & wire::result_ce));
        BOOST_TEST((r.h.aux & wire::result_wait_us_mask) < 50'000u);
    }
}

BOOST_AUTO_TEST_CASE(a_restarted_process_takes_its_rank_over_and_a_live_one_keeps_it) {
    rail_fixture f("vd_takeover");
    const std::uint32_t inst = join_ranks(f, 2);
    // The job runs a chunk (both results out).
    f.inject(contrib_frame(f, 0, 2));
    f.inject(contrib_frame(f, 1, 2));
    BOOST_REQUIRE(messages(f.collect(2)).size() == 2u);
    // Another process claims rank 1 from another port while rank 1 lives:
    // refused, the refusal carrying that JOIN's nonce.
    f.inject(join_frame(f, 1, 2, 0x1234567899ull, 41000));
    auto out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_TEST(out[0].h.aux == static_cast<std::uint32_t>(wire::error_code::rank_taken));
    BOOST_TEST(out[0].h.gen == 0x34567899u);
    BOOST_TEST(out[0].text.find("rank 1 of job 5 is joined from 198.18.0.10:40001") != std::string::npos, out[0].text);
    // The same JOIN again (same process): answered again, same incarnation.
    f.inject(join_frame(f, 0, 2, 1));
    out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_TEST(out[0].h.gen == inst);
    // Rank 0's process restarts (same address, new nonce): rank 1 is told
    // the job restarts, rank 0 gets a new incarnation; no old result.
    f.inject(join_frame(f, 0, 2, 77));
    out = messages(f.collect(2));
    BOOST_REQUIRE(out.size() == 2u);
    const sent& told = out[0].h.type == wire::msg_type::error ? out[0] : out[1];
    const sent& ack = out[0].h.type == wire::msg_type::error ? out[1] : out[0];
    BOOST_TEST(told.h.rank == 1u);
    BOOST_TEST(told.h.gen == inst);
    BOOST_TEST(told.h.aux == static_cast<std::uint32_t>(wire::error_code::rank_failed));
    BOOST_TEST(told.text.find("rank 0 re-joined job 5") != std::string::npos, told.text);
    BOOST_TEST((ack.h.type == wire::msg_type::join_ack));
    BOOST_TEST(ack.h.gen != inst);
    BOOST_TEST(f.d->counters(0).takeovers.load() == 1u);
    // Rank 1's old contributions are no longer anyone's: it is told why
    // again (its ERROR may have been lost), with the old incarnation.
    f.inject(contrib_frame(f, 1, 2));
    out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_TEST(out[0].h.aux == static_cast<std::uint32_t>(wire::error_code::rank_failed));
    BOOST_TEST(out[0].h.gen == inst);
    BOOST_TEST(out[0].text.find("rank 0 re-joined job 5") != std::string::npos, out[0].text);
}

BOOST_AUTO_TEST_CASE(pings_aborts_and_leaves_count_for_their_incarnation_only) {
    rail_fixture f("vd_ping");
    const std::uint32_t inst = join_ranks(f, 2);
    wire::header p = hdr(wire::msg_type::ping, 1, 2);
    p.gen = inst;
    f.inject(f.udp(p, nullptr, 0));
    auto out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_TEST((out[0].h.type == wire::msg_type::pong));
    BOOST_TEST(out[0].h.gen == inst);
    std::this_thread::sleep_for(std::chrono::milliseconds(2)); // past the unknown-job rate limit
    p.gen = inst ^ 1;
    f.inject(f.udp(p, nullptr, 0));
    out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_TEST(out[0].h.aux == static_cast<std::uint32_t>(wire::error_code::unknown_job));
    BOOST_TEST(out[0].h.gen == (inst ^ 1));
    // A late abort or LEAVE of another incarnation changes nothing (that
    // incarnation is gone: its LEAVE is acknowledged, its rank not freed).
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    wire::header a = hdr(wire::msg_type::error, 0, 2);
    a.gen = inst ^ 1;
    f.inject(f.udp(a, nullptr, 0));
    a.type = wire::msg_type::leave;
    f.inject(f.udp(a, nullptr, 0));
    out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_TEST((out[0].h.type == wire::msg_type::leave_ack));
    BOOST_TEST(active(*f.d) == 1u);
    // From another address: not the rank's.
    a.type = wire::msg_type::error;
    a.gen = inst;
    f.inject(f.udp(a, nullptr, 0, 41000));
    f.collect(0);
    BOOST_TEST(active(*f.d) == 1u);
    BOOST_TEST(f.drops(drop_reason::not_member) == 1u);
    // The rank's own abort ends it; the other rank is told.
    f.inject(f.udp(a, "mine", 4));
    out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_TEST(out[0].h.rank == 1u);
    BOOST_TEST(out[0].text == "rank 0 aborted the job: mine");
    BOOST_TEST(out[0].h.aux == static_cast<std::uint32_t>(wire::error_code::aborted));
    BOOST_TEST(out[0].h.offset == 0u); // the rank that aborted
    BOOST_TEST(active(*f.d) == 0u);
}

// A rank told on another rail that the operator ended its job (railctl job
// abort) ends it here with that code, and the other ranks are told so: a
// rank that reads this rail's word first does not re-join (a rank's own
// abort is retried). CI's rxe-verbs-faults-sanitized had a rank re-join
// when this came back as `aborted`.
BOOST_AUTO_TEST_CASE(an_abort_passing_on_the_operators_word_is_relayed_as_such) {
    rail_fixture f("vd_relay");
    const std::uint32_t inst = join_ranks(f, 3);
    wire::header a = hdr(wire::msg_type::error, 2, 3);
    a.gen = inst;
    a.aux = static_cast<std::uint32_t>(wire::error_code::operator_abort);
    static constexpr char why[] = "the operator ended job 5 (railctl job abort): drill";
    f.inject(f.udp(a, why, sizeof why - 1));
    const auto out = messages(f.collect(2));
    BOOST_REQUIRE(out.size() == 2u);
    for (const sent& e : out) {
        BOOST_TEST((e.h.type == wire::msg_type::error));
        BOOST_TEST(e.h.rank < 2u);
        BOOST_TEST(e.h.gen == inst);
        BOOST_TEST(e.h.aux == static_cast<std::uint32_t>(wire::error_code::operator_abort));
        BOOST_TEST(e.text == std::string("rank 2 aborted the job: ") + why, e.text);
    }
    BOOST_TEST(active(*f.d) == 0u);
    // A code a worker has no business passing on (a JOIN's refusal) comes
    // back as a rank's abort.
    const std::uint32_t next = join_ranks(f, 3);
    a.gen = next;
    a.aux = static_cast<std::uint32_t>(wire::error_code::job_table_full);
    f.inject(f.udp(a, nullptr, 0));
    for (const sent& e : messages(f.collect(2))) {
        BOOST_TEST(e.h.aux == static_cast<std::uint32_t>(wire::error_code::aborted));
        BOOST_TEST(e.h.offset == 2u);
    }
}

// A worker that gives up a join before a rail's JOIN_ACK came does not know
// the incarnation its JOIN made there: it leaves (or aborts) that part by
// the JOIN's nonce, its low 32 bits in gen. Left behind, the part held the
// rank, and the rank's next process was refused as a second claim on it
// (rank_claimed) for the assembly time.
BOOST_AUTO_TEST_CASE(a_join_given_up_is_left_or_aborted_by_its_nonce) {
    rail_fixture f("vd_nonce");
    constexpr std::uint64_t n0 = 0x5eed00000000a11full, n1 = 0x5eed00000000b22bull;
    f.inject(join_frame(f, 0, 2, n0));
    auto out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_REQUIRE((out[0].h.type == wire::msg_type::join_ack));
    const std::uint32_t inst = out[0].h.gen;
    BOOST_REQUIRE(inst != static_cast<std::uint32_t>(n0));
    // Rank 0's LEAVE naming `gen`: acknowledged either way.
    auto leave_naming = [&](std::uint64_t gen) {
        wire::header l = hdr(wire::msg_type::leave, 0, 2);
        l.gen = static_cast<std::uint32_t>(gen);
        f.inject(f.udp(l, nullptr, 0));
        const auto acks = messages(f.collect(1));
        BOOST_REQUIRE(acks.size() == 1u);
        BOOST_TEST((acks[0].h.type == wire::msg_type::leave_ack));
    };
    // Another number is an earlier incarnation's LEAVE: the rank kept.
    leave_naming(n1);
    BOOST_TEST(active(*f.d) == 1u);
    // The JOIN's nonce: the rank leaves, and with it the job.
    std::this_thread::sleep_for(std::chrono::milliseconds(2)); // past the unknown-job rate limit
    leave_naming(n0);
    BOOST_TEST(active(*f.d) == 0u);
    // An abort by nonce ends the job for the other ranks; another rank's
    // nonce is not the sender's.
    f.inject(join_frame(f, 0, 2, n0));
    f.inject(join_frame(f, 1, 2, n1));
    BOOST_REQUIRE(messages(f.collect(2)).size() == 2u);
    wire::header a = hdr(wire::msg_type::error, 1, 2);
    a.gen = static_cast<std::uint32_t>(n0);
    f.inject(f.udp(a, "gave up", 7));
    f.collect(0);
    BOOST_TEST(active(*f.d) == 1u);
    a.gen = static_cast<std::uint32_t>(n1);
    f.inject(f.udp(a, "gave up", 7));
    out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_TEST(out[0].h.rank == 0u);
    BOOST_TEST(out[0].text == "rank 1 aborted the job: gave up");
    BOOST_TEST(active(*f.d) == 0u);
}

// A LEAVE_ACK lost on the way: the worker's LEAVE comes again, from a
// rank that left (or of a job that ended when its last rank left), and is
// acknowledged again instead of costing the worker its retries. A LEAVE
// naming the job id with another token (another tenant's job) is not.
BOOST_AUTO_TEST_CASE(a_repeated_leave_is_acknowledged_again) {
    rail_fixture f("vd_releave");
    const std::uint32_t inst = join_ranks(f, 3);
    // want: the answers expected (collect waits up to 5 s for them).
    const auto leave = [&](std::uint16_t rank, std::uint64_t token = 77, std::size_t want = 1) {
        wire::header h = hdr(wire::msg_type::leave, rank, 3);
        h.gen = inst;
        h.job_token = token;
        std::this_thread::sleep_for(std::chrono::milliseconds(2)); // past the once-a-millisecond answer limit
        f.inject(f.udp(h, nullptr, 0));
        return messages(f.collect(want));
    };
    const auto acked = [](const std::vector<sent>& out, std::uint16_t rank) {
        return out.size() == 1u && out[0].h.type == wire::msg_type::leave_ack && out[0].h.rank == rank &&
               out[0].h.job_token == 77u;
    };
    BOOST_TEST(acked(leave(0), 0));
    BOOST_TEST(f.d->counters(0).leaves.load() == 1u);
    BOOST_TEST(acked(leave(0), 0)); // the first ACK was lost
    BOOST_TEST(f.d->counters(0).leaves.load() == 1u);
    BOOST_TEST(f.d->counters(0).leaves_again.load() == 1u);
    BOOST_TEST(f.drops(drop_reason::leave_unknown) == 0u);
    BOOST_TEST(active(*f.d) == 1u);
    // Another tenant's LEAVE for rank 1 of job 5: dropped, unanswered; rank
    // 1 stays.
    BOOST_TEST(leave(1, 78, 0).empty());
    BOOST_TEST(f.drops(drop_reason::leave_unknown) == 1u);
    BOOST_TEST(acked(leave(1), 1));
    BOOST_TEST(acked(leave(2), 2));
    BOOST_TEST(active(*f.d) == 0u);
    // The job ended with its last rank's LEAVE; that LEAVE again is
    // acknowledged again.
    BOOST_TEST(acked(leave(2), 2));
    BOOST_TEST(f.d->counters(0).leaves.load() == 3u);
    BOOST_TEST(f.d->counters(0).leaves_again.load() == 2u);
}

// A worker of another protocol version: its JOIN (byte 1 in every version)
// is answered in this one, ERROR protocol_version naming both versions (its
// own in the offset), at most once a millisecond; its other messages, and
// a JOIN whose checksum is wrong, are dropped unanswered; a JOIN of this
// version then joins.
BOOST_AUTO_TEST_CASE(a_join_of_another_protocol_version_is_told_this_ones) {
    rail_fixture f("vd_version");
    // want: the answers expected (collect waits up to 5 s for them).
    const auto foreign = [&](std::uint8_t version, std::vector<std::uint8_t> fr, bool good_sum = true,
                             std::size_t want = 1) {
        fr[frame::udp_frame_overhead] = version;
        frame::fill_udp_checksum(fr.data());
        if (!good_sum) fr.back() ^= 1;
        std::this_thread::sleep_for(std::chrono::milliseconds(2)); // past the once-a-millisecond answer limit
        f.inject(fr);
        return messages(f.collect(want));
    };
    for (const std::uint8_t v : {1, 3, 255}) {
        const auto out = foreign(v, join_frame(f, 1, 2, 0x5eed));
        BOOST_REQUIRE(out.size() == 1u);
        BOOST_TEST((out[0].h.type == wire::msg_type::error));
        BOOST_TEST(out[0].h.aux == static_cast<std::uint32_t>(wire::error_code::protocol_version));
        BOOST_TEST(out[0].h.offset == v);
        BOOST_TEST(out[0].text == "railgated on rail r0 speaks railgate protocol version 2, not " + std::to_string(v) +
                                      " (upgrade the workers or railgated so that they match)");
    }
    BOOST_TEST(f.drops(drop_reason::rg_version) == 3u);
    // Two at once: the second unanswered (a flood of them costs one answer
    // a millisecond).
    auto fr = join_frame(f, 0, 2, 0x5eed);
    fr[frame::udp_frame_overhead] = 3;
    frame::fill_udp_checksum(fr.data());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    f.inject(fr);
    f.inject(fr);
    BOOST_TEST(messages(f.collect(1)).size() == 1u);
    BOOST_TEST(foreign(3, contrib_frame(f, 0, 2), true, 0).empty());
    BOOST_TEST(foreign(3, join_frame(f, 0, 2, 0x5eed), false, 0).empty());
    BOOST_TEST(f.drops(drop_reason::rg_version) == 7u);
    BOOST_TEST(f.drops(drop_reason::udp_checksum) == 0u); // a foreign JOIN's bad checksum: its version's drop
    BOOST_TEST(active(*f.d) == 0u);
    // This version's JOIN: acked.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    f.inject(join_frame(f, 0, 2, 0x5eed));
    const auto out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_TEST((out[0].h.type == wire::msg_type::join_ack));
}

// The DPDK worker transport remembers the version of a message from
// railgated's address in another protocol version (the worker names it
// when its JOIN goes unanswered) only from a frame whose UDP checksum
// holds, by the port's verdict or checked in software: a corrupted byte 0
// is no version of railgated's (the join would fail as refused, not
// retried, naming a version nobody runs).
BOOST_AUTO_TEST_CASE(a_dpdk_worker_takes_another_version_only_from_a_sound_frame) {
    for (const bool port_verifies : {false, true}) {
        const std::string name = port_verifies ? "vd_wver_offload" : "vd_wver";
        rte_ring* wrx = rte_ring_create((name + "_rx").c_str(), 64, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        rte_ring* wtx = rte_ring_create((name + "_tx").c_str(), 64, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        const int port = rte_eth_from_rings(name.c_str(), &wrx, 1, &wtx, 1, 0);
        BOOST_REQUIRE(port >= 0);
        rte_mempool* pool = net::make_pktmbuf_pool(name + "_pool", 512, RTE_PKTMBUF_HEADROOM + 2048, SOCKET_ID_ANY);
        BOOST_REQUIRE(pool);
        frame::endpoint gated, worker;
        gated.ip = 0xC6120001;
        gated.udp_port = wire::default_udp_port;
        worker.ip = 0xC612000A;
        worker.udp_port = static_cast<std::uint16_t>(50000 + port); // the transport's
        rte_ether_addr mac{};
        BOOST_REQUIRE(rte_eth_macaddr_get(static_cast<std::uint16_t>(port), &mac) == 0);
        std::memcpy(worker.mac.b, mac.addr_bytes, 6);
        {
            auto t = client::make_dpdk_transport({{static_cast<std::uint16_t>(port), worker.ip, 0, port_verifies}},
                                                 gated.ip, gated.udp_port, pool);
            // An ERROR from railgated's address in `version`, its checksum
            // right or not, marked `flags` by the port; what recv() took.
            const auto from_railgated = [&](std::uint8_t version, bool good_sum, std::uint64_t flags = 0) {
                std::vector<std::uint8_t> f(frame::udp_frame_overhead + wire::header_bytes);
                frame::write_udp_headers(f.data(), gated, worker, wire::header_bytes);
                wire::encode_header(hdr(wire::msg_type::error, 0, 2), f.data() + frame::udp_frame_overhead);
                f[frame::udp_frame_overhead] = version;
                frame::fill_udp_checksum(f.data());
                if (!good_sum) f.back() ^= 1;
                rte_mbuf* m = rte_pktmbuf_alloc(pool);
                BOOST_REQUIRE(m);
                std::memcpy(rte_pktmbuf_append(m, static_cast<std::uint16_t>(f.size())), f.data(), f.size());
                m->ol_flags = flags;
                BOOST_REQUIRE(ring_put(wrx, m));
                client::rx_msg out[4];
                return t->recv(0, out, 4);
            };
            if (!port_verifies) { // checked in software
                BOOST_TEST(from_railgated(3, true) == 0u);
                BOOST_TEST(t->foreign_version() == 3);
                t->forget_foreign_version();
                BOOST_TEST(from_railgated(3, false) == 0u);
                BOOST_TEST(t->foreign_version() == -1);
            } else { // the port's verdict: taken as it is
                BOOST_TEST(from_railgated(3, true, RTE_MBUF_F_RX_L4_CKSUM_BAD) == 0u);
                BOOST_TEST(t->foreign_version() == -1);
                BOOST_TEST(from_railgated(7, true, RTE_MBUF_F_RX_L4_CKSUM_GOOD) == 0u);
                BOOST_TEST(t->foreign_version() == 7);
                t->forget_foreign_version();
                BOOST_TEST(from_railgated(3, false, RTE_MBUF_F_RX_L4_CKSUM_UNKNOWN) == 0u);
                BOOST_TEST(t->foreign_version() == -1);
            }
            BOOST_TEST(t->dropped() == 2u + port_verifies);
            // This version's message: taken.
            BOOST_TEST(from_railgated(wire::protocol_version, true, port_verifies ? RTE_MBUF_F_RX_L4_CKSUM_GOOD : 0) == 1u);
        }
        while (rte_mbuf* m = ring_get(wrx)) rte_pktmbuf_free(m);
        while (rte_mbuf* m = ring_get(wtx)) rte_pktmbuf_free(m);
        rte_eth_dev_close(static_cast<std::uint16_t>(port)); // stopped by the transport
        rte_mempool_free(pool);
        rte_ring_free(wrx);
        rte_ring_free(wtx);
    }
}

BOOST_AUTO_TEST_CASE(corrupted_and_injected_faults_are_counted_never_summed) {
    rail_fixture f("vd_corrupt");
    const std::uint32_t inst = join_ranks(f, 2);
    // No checksum at all: dropped on arrival, counted.
    auto none = contrib_frame(f, 0, 2);
    none[frame::eth_bytes + frame::ipv4_bytes + 6] = 0;
    none[frame::eth_bytes + frame::ipv4_bytes + 7] = 0;
    f.inject(none);
    f.collect(0);
    BOOST_TEST(f.drops(drop_reason::udp_checksum) == 1u);
    // A flipped payload bit: found when the slot is reduced (the reduce
    // sums the checksum), counted, and the slot waits for that rank again:
    // rank 1's stays, no result goes out.
    auto bad = contrib_frame(f, 0, 2);
    bad[frame::udp_frame_overhead + wire::header_bytes + 100] ^= 0x10;
    f.inject(bad);
    f.inject(contrib_frame(f, 1, 2));
    BOOST_TEST(messages(f.collect(0)).empty());
    BOOST_TEST(f.drops(drop_reason::udp_checksum) == 2u);
    // Rank 0 sends it again (its retransmit timer): the slot completes.
    auto again = contrib_frame(f, 0, 2);
    f.inject(again);
    auto out = messages(f.collect(2));
    BOOST_REQUIRE(out.size() == 2u);
    for (const sent& r : out) {
        BOOST_REQUIRE((r.h.type == wire::msg_type::result));
        std::vector<float> got(256);
        std::memcpy(got.data(), r.text.data(), 1024);
        for (unsigned i = 0; i < 256; ++i) BOOST_REQUIRE(got[i] == static_cast<float>(i) + static_cast<float>(1000 + i));
    }
    // Rank 1's corrupted, arriving last: it is dropped, and rank 0's
    // with it (the in-place reduce wrote into it), counted apart; both
    // send again. Rank 0 was answered HELD for its copy before, and is not
    // told it went: its PING naming the chunk (a worker asks about its
    // HELD chunks in turn) is answered PONG then, not HELD.
    auto bad1 = contrib_frame(f, 1, 2, 1);
    bad1[frame::udp_frame_overhead + wire::header_bytes + 1000] ^= 0x01;
    f.inject(contrib_frame(f, 0, 2, 1));
    wire::header ask = hdr(wire::msg_type::ping, 0, 2);
    ask.gen = inst;
    ask.count = 256;
    ask.aux = 1; // the slot's generation
    const auto answer_to_ask = [&] {
        f.inject(f.udp(ask, nullptr, 0));
        const auto a = messages(f.collect(1));
        BOOST_REQUIRE(a.size() == 1u);
        BOOST_TEST(a[0].h.offset == 0u);
        return a[0].h.type;
    };
    BOOST_TEST((answer_to_ask() == wire::msg_type::held));
    f.inject(bad1);
    BOOST_TEST(messages(f.collect(0)).empty());
    BOOST_TEST(f.drops(drop_reason::udp_checksum) == 3u);
    BOOST_TEST(f.drops(drop_reason::checksum_partner) == 1u);
    BOOST_TEST((answer_to_ask() == wire::msg_type::pong));
    f.inject(contrib_frame(f, 1, 2, 1));
    BOOST_TEST(messages(f.collect(0)).empty());
    f.inject(contrib_frame(f, 0, 2, 1));
    BOOST_TEST(messages(f.collect(2)).size() == 2u);
    // Everything dropped by the injector, then nothing.
    fault::spec all;
    all.drop = 1;
    BOOST_TEST(f.d->set_fault(0, all).empty());
    f.inject(contrib_frame(f, 0, 2, 2));
    f.collect(0);
    BOOST_TEST(f.drops(drop_reason::fault_injected) == 1u);
    BOOST_TEST(f.d->set_fault(0, fault::spec{}).empty());
    // The slot never saw it: the right pair completes it.
    f.inject(contrib_frame(f, 0, 2, 2));
    f.inject(contrib_frame(f, 1, 2, 2));
    out = messages(f.collect(2));
    BOOST_REQUIRE(out.size() == 2u);
    for (const sent& r : out) {
        BOOST_REQUIRE((r.h.type == wire::msg_type::result));
        std::vector<float> got(256);
        std::memcpy(got.data(), r.text.data(), 1024);
        for (unsigned i = 0; i < 256; ++i) BOOST_REQUIRE(got[i] == static_cast<float>(i) + static_cast<float>(1000 + i));
    }
    // Every buffer railgated lent came back.
    f.drain();
    const std::vector<std::string> leaks = f.d->close();
    for (const std::string& l : leaks) BOOST_ERROR(l);
    BOOST_TEST(leaks.empty());
}

// On a shaped rail a result may wait in its traffic class's queue for longer
// than a worker's timer: asked for then (a PING naming its chunk, or the
// chunk's RETRANSMIT), railgated answers HELD with no rank waited for,
// instead of queuing a second copy behind the first (paced.sh: a worker
// asking about every chunk its timer expired doubled the queue). Once the
// result has left, the same question brings it again.
BOOST_AUTO_TEST_CASE(a_kept_result_still_queued_is_answered_held_not_sent_twice) {
    // 1 Mbit/s, a burst of one frame: a result of 1 KiB leaves every 9 ms.
    rail_fixture f("vd_queued", [](net::daemon_config& dc) {
        dc.rails[0].rate_bps = 1'000'000;
        dc.rails[0].burst_bytes = 1200;
    });
    const std::uint32_t inst = join_ranks(f, 2);
    wire::header ask = hdr(wire::msg_type::ping, 1, 2);
    ask.gen = inst;
    ask.count = 256;
    ask.aux = 0; // the slot's generation
    const auto is = [](const sent& m, wire::msg_type t) { return m.h.type == t; };
    // Both ranks' results queue (the second waits for the first); rank 1
    // asks for its own at once: HELD, aux 0, about generation 0, slot 0,
    // chunk 0, after the results (the answer queues behind them).
    f.inject(contrib_frame(f, 0, 2, 0));
    f.inject(contrib_frame(f, 1, 2, 0));
    f.inject(f.udp(ask, nullptr, 0));
    auto out = messages(f.collect(3));
    BOOST_REQUIRE(out.size() == 3u);
    BOOST_TEST(is(out[0], wire::msg_type::result));
    BOOST_TEST(is(out[1], wire::msg_type::result));
    BOOST_TEST(is(out[2], wire::msg_type::held));
    BOOST_TEST(out[2].h.rank == 1u);
    BOOST_TEST(out[2].h.aux == 0u);
    BOOST_TEST(out[2].h.gen == 0u);
    BOOST_TEST(out[2].h.slot == 0u);
    BOOST_TEST(out[2].h.offset == 0u);
    BOOST_TEST(f.d->counters(0).held_queued.load() == 1u);
    BOOST_TEST(f.d->counters(0).results_resent.load() == 0u);
    // The results left: the same PING brings the kept result, flagged.
    f.inject(f.udp(ask, nullptr, 0));
    out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_TEST(is(out[0], wire::msg_type::result));
    BOOST_TEST(out[0].h.flags == wire::flag_retransmit);
    BOOST_TEST(out[0].h.rank == 1u);
    BOOST_TEST(f.d->counters(0).results_resent.load() == 1u);
    // A RETRANSMIT of the next generation's chunk while its results queue:
    // HELD, aux 0; then, once they left, the kept result.
    auto again = contrib_frame(f, 1, 2, 1);
    wire::header rh;
    std::span<const std::uint8_t> body;
    auto* hp = again.data() + frame::udp_frame_overhead;
    BOOST_REQUIRE(wire::parse_worker_message(hp, again.size() - frame::udp_frame_overhead, rh, body) ==
                  drop_reason::none);
    rh.flags = wire::flag_retransmit;
    auto retx = f.udp(rh, body.data(), body.size());
    f.inject(contrib_frame(f, 0, 2, 1));
    f.inject(contrib_frame(f, 1, 2, 1));
    f.inject(retx);
    out = messages(f.collect(3));
    BOOST_REQUIRE(out.size() == 3u);
    BOOST_TEST(is(out[2], wire::msg_type::held));
    BOOST_TEST(out[2].h.aux == 0u);
    BOOST_TEST(out[2].h.gen == 1u);
    BOOST_TEST(f.d->counters(0).held_queued.load() == 2u);
    f.inject(retx);
    out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_TEST(is(out[0], wire::msg_type::result));
    BOOST_TEST(out[0].h.flags == wire::flag_retransmit);
    BOOST_TEST(out[0].h.gen == 1u);
    // A slot that waits for a rank still answers HELD with the ranks it
    // waits for.
    wire::header held2 = rh;
    held2.gen = 2;
    f.inject(contrib_frame(f, 1, 2, 2));
    f.inject(f.udp(held2, body.data(), body.size()));
    out = messages(f.collect(1));
    BOOST_REQUIRE(out.size() == 1u);
    BOOST_TEST(is(out[0], wire::msg_type::held));
    BOOST_TEST(out[0].h.aux == 1u);
    BOOST_TEST(f.d->counters(0).held_queued.load() == 2u);
    f.drain();
    const std::vector<std::string> leaks = f.d->close();
    for (const std::string& l : leaks) BOOST_ERROR(l);
}

// Without hugepages a pool's pages are resident once it is made: a
// buffer's first use took its page faults inside the data path (each
// operation's second window of jumbo chunks copied 10x slower).
BOOST_AUTO_TEST_CASE(a_pool_without_hugepages_is_resident_before_its_first_use) {
    BOOST_REQUIRE(!rte_eal_has_hugepages());
    rte_mempool* mp = net::make_pktmbuf_pool("vd_resident", 1024, RTE_PKTMBUF_HEADROOM + 10240, SOCKET_ID_ANY);
    BOOST_REQUIRE(mp);
    struct tally {
        std::size_t pages = 0, resident = 0;
    } t;
    rte_mempool_mem_iter(
        mp,
        [](rte_mempool*, void* arg, rte_mempool_memhdr* h, unsigned) {
            auto& c = *static_cast<tally*>(arg);
            const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
            const auto start = reinterpret_cast<std::uintptr_t>(h->addr) & ~(page - 1);
            const std::size_t n = (reinterpret_cast<std::uintptr_t>(h->addr) + h->len - start + page - 1) / page;
            std::vector<unsigned char> in(n);
            if (mincore(reinterpret_cast<void*>(start), n * page, in.data()) != 0) return;
            c.pages += n;
            for (unsigned char b : in) c.resident += b & 1;
        },
        &t);
    BOOST_TEST(t.pages >= 1024u * 10240 / 4096);
    BOOST_TEST(t.resident == t.pages);
    rte_mempool_free(mp);
}

// A reordered frame is late by one poll at most, empty polls included: with
// every frame reordered each way, and nothing more arriving after a pair,
// the pair is summed and both results leave (before, the last frame in
// waited for a next burst that a window-limited worker never sends).
BOOST_AUTO_TEST_CASE(a_reordered_frame_leaves_at_the_next_poll_even_an_empty_one) {
    rail_fixture f("vd_reorder");
    join_ranks(f, 2);
    fault::spec s;
    s.reorder = 1;
    s.dir = fault::spec::way::rx;
    BOOST_TEST(f.d->set_fault(0, s).empty());
    for (std::uint32_t gen = 0; gen < 2; ++gen) {
        if (gen == 1) {
            s.dir = fault::spec::way::both;
            BOOST_TEST(f.d->set_fault(0, s).empty());
        }
        f.inject(contrib_frame(f, 0, 2, gen));
        f.inject(contrib_frame(f, 1, 2, gen));
        const auto out = messages(f.collect(2));
        BOOST_REQUIRE(out.size() == 2u);
        for (const sent& r : out) {
            BOOST_REQUIRE((r.h.type == wire::msg_type::result));
            std::vector<float> got(256);
            std::memcpy(got.data(), r.text.data(), 1024);
            for (unsigned i = 0; i < 256; ++i)
                BOOST_REQUIRE(got[i] == static_cast<float>(i) + static_cast<float>(1000 + i));
        }
    }
    BOOST_TEST(f.d->counters(0).fault_reorders.load() >= 4u);
    BOOST_TEST(f.d->set_fault(0, fault::spec{}).empty());
    f.drain();
    const std::vector<std::string> leaks = f.d->close();
    for (const std::string& l : leaks) BOOST_ERROR(l);
}

// A port with the checksum offloads (emulated on net_ring): railgated takes
// the NIC's RX verdicts, leaves the results' checksums to it (flags and the
// pseudo-header sum, as DPDK's TX offload wants), and the injector's
// corruption stays visible on both sides.
BOOST_AUTO_TEST_CASE(checksum_offloads_are_used_and_injected_corruption_stays_visible) {
    rail_fixture f("vd_offload", [](net::daemon_config& dc) { dc.rails[0].emulate_checksum_offload = true; });
    join_ranks(f, 2);
    // Verdict BAD: dropped, whatever the checksum says. Verdict GOOD: taken
    // as it is (the NIC checked it), though its checksum field is stale.
    f.inject(contrib_frame(f, 0, 2), RTE_MBUF_F_RX_L4_CKSUM_BAD);
    f.collect(0);
    BOOST_TEST(f.drops(drop_reason::udp_checksum) == 1u);
    auto stale = contrib_frame(f, 0, 2);
    stale[frame::eth_bytes + frame::ipv4_bytes + 6] ^= 0x5a;
    f.inject(stale, RTE_MBUF_F_RX_L4_CKSUM_GOOD);
    f.inject(contrib_frame(f, 1, 2)); // no verdict: checked in software
    std::vector<rte_mbuf*> results;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (results.size() < 2 && std::chrono::steady_clock::now() < until) {
        if (rte_mbuf* m = ring_get(f.tx)) results.push_back(m);
    }
    BOOST_REQUIRE(results.size() == 2u);
    for (rte_mbuf* m : results) {
        // The UDP checksum is left to the port; the IPv4 header's is
        // complete (written from the values, not offloaded).
        BOOST_TEST((m->ol_flags & RTE_MBUF_F_TX_UDP_CKSUM) == RTE_MBUF_F_TX_UDP_CKSUM);
        BOOST_TEST((m->ol_flags & RTE_MBUF_F_TX_IP_CKSUM) == 0u);
        BOOST_TEST(static_cast<unsigned>(m->l2_len) == frame::eth_bytes);
        BOOST_TEST(static_cast<unsigned>(m->l3_len) == frame::ipv4_bytes);
        std::vector<std::uint8_t> fr(m->pkt_len);
        const void* src = rte_pktmbuf_read(m, 0, m->pkt_len, fr.data());
        if (src != fr.data()) std::memcpy(fr.data(), src, m->pkt_len);
        std::uint8_t* ip = fr.data() + frame::eth_bytes;
        std::uint8_t* u = ip + frame::ipv4_bytes;
        BOOST_TEST(frame::inet_checksum(ip, frame::ipv4_bytes) == 0);
        // The field holds the pseudo-header's sum (addresses, protocol,
        // UDP length), not complemented.
        std::uint32_t ps = 17 + (u[4] << 8 | u[5]);
        for (unsigned i = 12; i < 20; i += 2) ps += ip[i] << 8 | ip[i + 1];
        while (ps >> 16) ps = (ps & 0xffff) + (ps >> 16);
        BOOST_TEST((u[6] << 8 | u[7]) == ps);
        // What the NIC then computes makes a frame the worker accepts.
        frame::fill_udp_checksum(fr.data());
        BOOST_TEST(frame::udp_checksum_ok(fr.data(), fr.size()));
        std::vector<float> got(256);
        std::memcpy(got.data(), fr.data() + frame::udp_frame_overhead + wire::header_bytes, 1024);
        for (unsigned i = 0; i < 256; ++i) BOOST_REQUIRE(got[i] == static_cast<float>(i) + static_cast<float>(1000 + i));
    }
    // The injector corrupting a frame the port was to checksum: it gets
    // its checksums in software first, so the flipped bit is caught.
    fault::spec c;
    c.corrupt = 1;
    fault::dice dice(c);
    for (unsigned k = 0; k < 64; ++k) {
        rte_mbuf* m = rte_pktmbuf_copy(results[k % 2], f.pool, 0, UINT32_MAX);
        BOOST_REQUIRE(m);
        m->ol_flags = results[k % 2]->ol_flags;
        rte_mbuf* late = nullptr;
        net::fault_tally t;
        unsigned n = 1;
        net::apply_faults(dice, late, t, &m, n, 1);
        BOOST_REQUIRE(n == 1u);
        BOOST_TEST((m->ol_flags & (RTE_MBUF_F_TX_UDP_CKSUM | RTE_MBUF_F_TX_IP_CKSUM)) == 0u);
        const auto* p = rte_pktmbuf_mtod(m, const std::uint8_t*);
        const bool ip_ok = frame::inet_checksum(p + frame::eth_bytes, frame::ipv4_bytes) == 0;
        BOOST_TEST(!(ip_ok && frame::udp_checksum_ok(p, m->data_len)), "flip " << k << " went unseen");
        rte_pktmbuf_free(m);
    }
    for (rte_mbuf* m : results) rte_pktmbuf_free(m);
    // And on receive: frames the NIC had passed, corrupted by railgated's
    // injector, are checked again, never summed: pairs of rank 0 and 1
    // for one slot, every frame with a bit flipped. Each is dropped (on
    // arrival, or when its pair reduces), at most a pair waits; no result.
    BOOST_TEST(f.d->set_fault(0, c).empty());
    const std::uint64_t before = f.d->counters(0).total_drops();
    for (unsigned k = 0; k < 16; ++k) {
        wire::header h = hdr(wire::msg_type::contrib, static_cast<std::uint16_t>(k % 2), 2);
        h.count = 256;
        h.gen = 1;
        float data[256] = {};
        f.inject(f.udp(h, data, sizeof data), RTE_MBUF_F_RX_L4_CKSUM_GOOD);
    }
    const auto after = messages(f.collect(0));
    BOOST_TEST(f.d->set_fault(0, fault::spec{}).empty());
    for (const sent& m : after) BOOST_TEST((m.h.type != wire::msg_type::result), "a corrupted pair was summed");
    BOOST_TEST(f.d->counters(0).total_drops() - before >= 14u);
    f.drain();
    const std::vector<std::string> leaks = f.d->close();
    for (const std::string& l : leaks) BOOST_ERROR(l);
}

// railbench --embedded's split of the workers' rails (client::shared_rails):
// railgated's lcore steps the last k of them, in the passes where its rails
// had nothing, this thread the others. Every sum exact for every k from
// none to all, each rail stepped by its own thread only (a rail stepped
// by both would also be a race TSan reports), the lcore's by it.
namespace {

// The embedded switch's transport, noting whether railgated's lcore
// (`lcore`) or another thread read each rail.
class watched_transport final : public client::transport {
public:
    watched_transport(std::unique_ptr<client::transport> t, unsigned lcore) : t_(std::move(t)), lcore_(lcore) {}
    struct seen {
        std::atomic<bool> on_lcore{false}, off_lcore{false};
    };
    std::atomic<bool> watching{false};
    const seen& rail(unsigned r) const { return seen_[r]; }
    void forget() {
        for (seen& s : seen_) s.on_lcore = s.off_lcore = false;
    }

    unsigned n_rails() const noexcept override { return t_->n_rails(); }
    std::string open_rails(std::span<const wire::rail_entry> rails, const std::function<void()>& meanwhile) override {
        return t_->open_rails(rails, meanwhile);
    }
    unsigned send(unsigned rail, const client::tx_msg* msgs, unsigned n) noexcept override { return t_->send(rail, msgs, n); }
    unsigned recv(unsigned rail, client::rx_msg* out, unsigned max) noexcept override {
        if (watching.load(std::memory_order_relaxed))
            (rte_lcore_id() == lcore_ ? seen_[rail].on_lcore : seen_[rail].off_lcore).store(true);
        return t_->recv(rail, out, max);
    }
    std::uint64_t dropped() const noexcept override { return t_->dropped(); }
    bool parallel_rails() const noexcept override { return t_->parallel_rails(); }
    std::size_t max_message_bytes() const noexcept override { return t_->max_message_bytes(); }
    std::string message_limit(std::size_t bytes) const override { return t_->message_limit(bytes); }
    const char* name() const noexcept override { return t_->name(); }
    const char* checksums() const noexcept override { return t_->checksums(); }

private:
    std::unique_ptr<client::transport> t_;
    unsigned lcore_;
    std::array<seen, 8> seen_; // n_rails() counts the rails open, none before the JOIN
};

} // namespace

// An in-process railgated on the embedded switch's rails, both on lcore 1
// (its own CPU, as railbench's), and 3 workers joined to one job.
struct shared_job {
    static constexpr unsigned workers = 3, rails = 2, all = workers * rails, lcore = 1;
    client::embedded_fabric fabric{rails, workers, 1500, true};
    std::unique_ptr<net::daemon> d;
    std::vector<std::unique_ptr<watched_transport>> ts;
    std::vector<std::unique_ptr<client::worker>> owners;
    std::vector<client::worker*> ws;
    net::lcore_guest guest;

    explicit shared_job(std::chrono::milliseconds peer_timeout = std::chrono::milliseconds(1000)) {
        net::daemon_config dc;
        dc.rails = fabric.daemon_rails();
        for (net::rail_config& r : dc.rails) r.lcore = lcore;
        dc.mbufs_per_rail = 4096;
        dc.default_pool = fabric.default_pool();
        d = std::make_unique<net::daemon>(dc);
        d->launch();
        for (unsigned w = 0; w < workers; ++w) {
            ts.push_back(std::make_unique<watched_transport>(fabric.worker_transport(w, 0), lcore));
            client::worker_options o;
            o.job_id = 77;
            o.job_token = 0x5ba7ed;
            o.rank = static_cast<std::uint16_t>(w);
            o.world = workers;
            o.peer_timeout = peer_timeout;
            owners.push_back(std::make_unique<client::worker>(*ts.back(), o));
            BOOST_REQUIRE_EQUAL(owners.back()->join(), "");
            ws.push_back(owners.back().get());
        }
        BOOST_REQUIRE(ws[0]->rails_in_parallel());
        guest.step = [](void* p) noexcept { return static_cast<client::shared_rails*>(p)->pass(true); };
    }
    // Starts an allreduce of every worker's buffer, the transports watched
    // from then on (start() sends the first window, and reads, from this
    // thread).
    void start(std::vector<std::vector<float>>& buf) {
        for (unsigned w = 0; w < workers; ++w) ws[w]->start(buf[w].data(), buf[w].size(), wire::dtype::fp32);
        for (auto& t : ts) {
            t->forget();
            t->watching = true;
        }
    }
    void stop_watching() {
        for (auto& t : ts) t->watching = false;
    }
    // Every buffer back, once the workers and the switch let go of theirs.
    void close() {
        for (client::worker* w : ws) w->leave();
        d->stop();
        ws.clear();
        owners.clear();
        ts.clear();
        fabric.drain();
        BOOST_TEST(d->close().empty());
    }
};

BOOST_AUTO_TEST_CASE(an_lcore_and_a_thread_share_the_workers_rails_each_its_own_and_take_over_the_lcores) {
    shared_job j(std::chrono::milliseconds(500));
    constexpr unsigned workers = shared_job::workers, rails = shared_job::rails, all = shared_job::all;
    constexpr std::size_t count = 100003; // 71 chunks of 1408 B and a bit, per worker
    std::vector<std::vector<float>> buf(workers, std::vector<float>(count));
    for (const std::size_t k : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{all}}) {
        BOOST_TEST_CONTEXT("the lcore's rails: " << k) {
            for (unsigned w = 0; w < workers; ++w)
                for (std::size_t i = 0; i < count; ++i) buf[w][i] = static_cast<float>((i + 7 * w + k) % 1000);
            j.start(buf);
            client::shared_rails shared(j.ws, k);
            BOOST_REQUIRE_EQUAL(shared.size(), std::size_t{all});
            j.guest.ctx = &shared;
            BOOST_REQUIRE(j.d->host(j.guest));
            shared.drive(j.guest.done);
            BOOST_REQUIRE(wait_done(j.guest));
            j.stop_watching();
            client::complete(j.ws);
            for (unsigned w = 0; w < workers; ++w) BOOST_REQUIRE_EQUAL(j.ws[w]->error(), "");
            std::size_t wrong = 0;
            for (unsigned w = 0; w < workers; ++w)
                for (std::size_t i = 0; i < count; ++i) {
                    float sum = 0;
                    for (unsigned v = 0; v < workers; ++v) sum += static_cast<float>((i + 7 * v + k) % 1000);
                    wrong += buf[w][i] != sum;
                }
            BOOST_TEST(wrong == 0u);
            // Rail u is worker u / rails's rail u % rails; the lcore's are the last k.
            for (unsigned u = 0; u < all; ++u) {
                const watched_transport::seen& s = j.ts[u / rails]->rail(u % rails);
                const bool lcores = u >= all - k;
                BOOST_TEST_CONTEXT("rail " << u) {
                    BOOST_TEST(s.off_lcore.load() == !lcores);
                    BOOST_TEST(s.on_lcore.load() == lcores);
                }
            }
        }
    }
    // Then railgated stops while its lcore holds every rail of an
    // operation: the lcore leaves them (lcore_guest::done), the driving
    // thread takes them over, and the operation ends as railgated gone on
    // every worker, not in a hang. (This thread, the EAL's main lcore,
    // stops railgated; one embedded switch a process: its ports' names.)
    std::vector<std::vector<float>> big(workers, std::vector<float>(4 << 20, 1.0f)); // 3,000 chunks a worker
    j.start(big);
    client::shared_rails shared(j.ws, shared_job::all);
    j.guest.ctx = &shared;
    BOOST_REQUIRE(j.d->host(j.guest));
    double took = 0;
    std::thread driver([&] {
        const auto t0 = std::chrono::steady_clock::now();
        shared.drive(j.guest.done);
        took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    j.d->stop();
    driver.join();
    BOOST_TEST_MESSAGE("the operation ended after " << took << " s");
    BOOST_REQUIRE(j.guest.done.load());
    j.stop_watching();
    bool taken_over = false;
    for (unsigned u = 0; u < shared_job::all; ++u)
        taken_over |= j.ts[u / shared_job::rails]->rail(u % shared_job::rails).off_lcore.load();
    BOOST_TEST(taken_over); // the driving thread stepped rails that were the lcore's
    client::complete(j.ws);
    for (client::worker* w : j.ws) {
        BOOST_TEST((w->failed_with() == client::failure::daemon_gone), "failed with " << client::failure_name(w->failed_with()));
        BOOST_TEST(!w->error().empty());
    }
    BOOST_TEST(took < 20.0);
    j.close();
}
