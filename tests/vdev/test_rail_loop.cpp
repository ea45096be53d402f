// railgated's DPDK rail loop on a net_ring port: frames injected into the
// port's RX ring, replies collected from its TX ring. One EAL per binary.
#define BOOST_TEST_MODULE rail_loop
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "dataplane/net/daemon.hpp"
#include "dataplane/net/eal.hpp"
#include "dataplane/proto/frame.hpp"
#include "dataplane/proto/parse.hpp"
#include "dataplane/reduce/numeric.hpp"

using namespace railgate;

namespace {

struct eal_fixture {
    eal_fixture() : eal(net::embedded_eal_args("test_rail_loop")) {}
    net::eal eal;
};
BOOST_TEST_GLOBAL_FIXTURE(eal_fixture);

struct rail_fixture {
    rte_ring* rx = nullptr;
    rte_ring* tx = nullptr;
    rte_mempool* pool = nullptr;
    std::unique_ptr<net::daemon> d;
    frame::endpoint self, peer;

    explicit rail_fixture(const char* name) {
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

    void inject(const std::vector<std::uint8_t>& f) {
        rte_mbuf* m = rte_pktmbuf_alloc(pool);
        BOOST_REQUIRE(m);
        std::memcpy(rte_pktmbuf_append(m, static_cast<std::uint16_t>(f.size())), f.data(), f.size());
        BOOST_REQUIRE(rte_ring_enqueue(rx, m) == 0);
    }
    std::vector<std::uint8_t> udp(const wire::header& h, const void* body, std::size_t len) const {
        std::vector<std::uint8_t> f(frame::udp_frame_overhead + wire::header_bytes + len);
        frame::endpoint src = peer;
        src.udp_port = static_cast<std::uint16_t>(40000 + h.rank);
        frame::write_udp_headers(f.data(), src, self, wire::header_bytes + len);
        wire::encode_header(h, f.data() + frame::udp_frame_overhead);
        if (len) std::memcpy(f.data() + frame::udp_frame_overhead + wire::header_bytes, body, len);
        return f;
    }
    // Waits until the loop consumed the RX ring, then returns what it sent
    // (linearised frames).
    // Moves every frame the loop sent so far into `out` (linearised).
    void take(std::vector<std::vector<std::uint8_t>>& out) {
        void* m;
        while (rte_ring_dequeue(tx, &m) == 0) {
            auto* mb = static_cast<rte_mbuf*>(m);
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
        void* m;
        while (rte_ring_dequeue(tx, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
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

    // Chunk i holds 256 fp32: rank r's element j = (r + 1) * 1e7 + i + j * 0.5f.
    constexpr unsigned elems = 256;
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
