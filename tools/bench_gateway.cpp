// Gateway forwarding cost on one lcore: railgated routes IPv4/UDP datagrams
// from rail 0 to rail 1 (net_ring ports, both served by the one worker
// lcore); the main lcore recycles what rail 1 sent back into rail 0.
// Baselines, same run and same harness, on the same lcore: testpmd's
// macswap mode (rx_burst, swap the MACs, tx_burst), the ratio's reference, and
// its io mode (the packet untouched: the harness's own ceiling).
//   bench_gateway [--seconds S] [--sizes 64,512,1514]
// Sizes are Ethernet frame bytes (without FCS). Rows: Mpps, Gbit/s of
// frames, ns per packet, and the ratio to io-forward; the routed path is
// measured unshaped and through a traffic-class scheduler whose rate does
// not bind (the scheduler's cost), with the neighbour resolved beforehand.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "dataplane/net/burst.hpp"
#include "dataplane/net/daemon.hpp"
#include "dataplane/net/eal.hpp"
#include "dataplane/proto/frame.hpp"
#include "tools/bench_flags.hpp"

using namespace railgate;

namespace {

struct ports {
    rte_ring *rx0, *tx0, *rx1, *tx1;
    int p0, p1;
    explicit ports(const std::string& tag) {
        auto ring = [&](const char* what) {
            return rte_ring_create((tag + what).c_str(), 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        };
        rx0 = ring("_rx0"), tx0 = ring("_tx0"), rx1 = ring("_rx1"), tx1 = ring("_tx1");
        p0 = rte_eth_from_rings((tag + "0").c_str(), &rx0, 1, &tx0, 1, 0);
        p1 = rte_eth_from_rings((tag + "1").c_str(), &rx1, 1, &tx1, 1, 0);
    }
    frame::mac_addr mac(int port) const {
        rte_ether_addr m;
        rte_eth_macaddr_get(static_cast<std::uint16_t>(port), &m);
        frame::mac_addr out;
        std::memcpy(out.b, m.addr_bytes, 6);
        return out;
    }
};

// The baselines' loop: io-forward, or with `touch` testpmd's macswap mode
// (reads and swaps the MAC addresses, so the packet's first line crosses
// cores as it does for the gateway, which reads it).
std::atomic<bool> io_stop{false};
std::atomic<bool> io_touch{false}; // atomic: TSan does not see rte_eal_wait_lcore order the rounds
int io_forward(void* arg) {
    const auto* p = static_cast<const ports*>(arg);
    const auto in = static_cast<std::uint16_t>(p->p0), out = static_cast<std::uint16_t>(p->p1);
    rte_mbuf* b[32];
    while (!io_stop.load(std::memory_order_relaxed)) {
        const std::uint16_t n = net::port_rx(in, 0, b, 32);
        if (io_touch.load(std::memory_order_relaxed))
            for (std::uint16_t i = 0; i < n; ++i) {
                auto* f = rte_pktmbuf_mtod(b[i], std::uint8_t*);
                std::uint8_t t[6];
                std::memcpy(t, f, 6);
                std::memcpy(f, f + 6, 6);
                std::memcpy(f + 6, t, 6);
            }
        std::uint16_t s = 0;
        while (s < n) s = static_cast<std::uint16_t>(s + net::port_tx(out, 0, b + s, static_cast<std::uint16_t>(n - s)));
    }
    return 0;
}

// Fills `count` mbufs with one datagram from host A to B (10.2.0.2), frame
// `size` bytes, addressed to `to` (rail 0's MAC), and keeps them cycling
// from tx1 back into rx0 for `seconds`; the 12 bytes the gateway rewrites
// (destination MAC, TTL, checksum) are restored each lap. Returns packets
// forwarded per second.
double cycle(const ports& p, rte_mempool* pool, unsigned size, const frame::mac_addr& to, double seconds) {
    frame::endpoint a, gw;
    a.ip = 0x0A010002;
    a.udp_port = 5000;
    a.mac.b[0] = 2;
    a.mac.b[5] = 0xaa;
    gw.mac = to;
    gw.ip = 0x0A020002;
    gw.udp_port = 9;
    std::vector<std::uint8_t> tmpl(size);
    frame::write_udp_headers(tmpl.data(), a, gw, size - frame::udp_frame_overhead);
    const unsigned count = 2048;
    std::vector<rte_mbuf*> ms(count);
    if (rte_pktmbuf_alloc_bulk(pool, ms.data(), count) != 0) return 0;
    for (rte_mbuf* m : ms) std::memcpy(rte_pktmbuf_append(m, static_cast<std::uint16_t>(size)), tmpl.data(), size);
    unsigned put = 0;
    while (put < count) put += net::ring_put(p.rx0, ms.data() + put, count - put);
    std::uint64_t laps = 0;
    const auto t0 = std::chrono::steady_clock::now();
    const auto end = t0 + std::chrono::duration<double>(seconds);
    rte_mbuf* b[64];
    while (std::chrono::steady_clock::now() < end) {
        for (int k = 0; k < 256; ++k) {
            const unsigned n = net::ring_get(p.tx1, b, 64);
            for (unsigned i = 0; i < n; ++i) {
                auto* f = rte_pktmbuf_mtod(b[i], std::uint8_t*);
                std::memcpy(f, tmpl.data(), 6);
                std::memcpy(f + 22, tmpl.data() + 22, 4); // TTL, protocol, checksum
            }
            unsigned s = 0;
            while (s < n) s += net::ring_put(p.rx0, b + s, n - s);
            laps += n;
        }
    }
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return static_cast<double>(laps) / t;
}

// Frees what the ports sent. With a loop still polling the ports, only the
// TX rings are ours to dequeue (the RX rings are single-consumer).
void drain(const ports& p, bool rx_too) {
    rte_mbuf* m;
    for (rte_ring* r : {p.rx0, p.tx0, p.rx1, p.tx1})
        if (rx_too || r == p.tx0 || r == p.tx1)
            while (net::ring_get(r, &m, 1)) rte_pktmbuf_free(m);
}

} // namespace

int main(int argc, char** argv) {
    double seconds = 2;
    std::vector<unsigned> sizes{64, 512, 1514};
    bench::flags args(argc, argv, "usage: bench_gateway [--seconds S] [--sizes 64,512,1514]");
    for (std::string a; args.next(a);) {
        if (a == "--seconds") seconds = args.number<double>(0.1, 3600);
        else if (a == "--sizes") {
            sizes.clear();
            std::stringstream ss(args.text());
            for (std::string s; std::getline(ss, s, ',');) sizes.push_back(args.parse<unsigned>(s, 60, 1514, "--sizes"));
            if (sizes.empty()) args.fail("--sizes needs at least one frame size");
        } else args.unknown();
    }
    net::eal eal(net::embedded_eal_args("bench_gateway"));
    const unsigned worker = rte_get_next_lcore(rte_lcore_id(), 1, 0);
    rte_mempool* pool = net::make_pktmbuf_pool("bg_gen", 8192, RTE_PKTMBUF_HEADROOM + 2048, SOCKET_ID_ANY);

    // Baseline: io-forward on the worker lcore.
    ports base("bg_io");
    for (int port : {base.p0, base.p1}) {
        const auto id = static_cast<std::uint16_t>(port);
        rte_eth_conf conf{};
        if (rte_eth_dev_configure(id, 1, 1, &conf) < 0 || rte_eth_rx_queue_setup(id, 0, 1024, SOCKET_ID_ANY, nullptr, pool) < 0 ||
            rte_eth_tx_queue_setup(id, 0, 1024, SOCKET_ID_ANY, nullptr) < 0 || rte_eth_dev_start(id) < 0) {
            std::fprintf(stderr, "bench_gateway: cannot start the baseline's port %d\n", port);
            return 1;
        }
    }
    std::vector<double> io_pps, mac_pps;
    for (bool touch : {false, true})
        for (unsigned s : sizes) {
            io_stop = false;
            io_touch = touch;
            rte_eal_remote_launch(io_forward, &base, worker);
            (touch ? mac_pps : io_pps).push_back(cycle(base, pool, s, base.mac(base.p0), seconds));
            io_stop = true;
            rte_eal_wait_lcore(worker);
            drain(base, true);
        }

    std::printf("# bench_gateway: 1 lcore routes rail 0 -> rail 1 (net_ring), main lcore recycles, %.1f s per row\n",
                seconds);
    std::printf("%-10s %6s %10s %10s %10s %10s\n", "path", "bytes", "Mpps", "Gbit/s", "ns/pkt", "vs macswap");
    for (bool shaped : {false, true}) {
        ports p(shaped ? "bg_sh" : "bg_gw");
        net::daemon_config dc;
        net::rail_config r0, r1;
        r0.name = "g0", r0.port_id = p.p0, r0.ip = 0x0A010001;
        r1.name = "g1", r1.port_id = p.p1, r1.ip = 0x0A020001;
        if (shaped) r1.rate_bps = 400'000'000'000ull; // never binds: the scheduler's cost alone
        if (shaped) r1.burst_bytes = 1 << 20;   // nor does its burst (16 frames would, at 1514 B)
        dc.rails = {r0, r1};
        dc.routes = {{0x0A010000, 24, "g0", 0}, {0x0A020000, 24, "g1", 0}};
        dc.mbufs_per_rail = 4096;
        net::daemon d(dc);
        d.launch();
        // B introduces itself (an ARP request to rail 1): resolved from the start.
        frame::endpoint b, rail1;
        b.ip = 0x0A020002;
        b.mac.b[0] = 2;
        b.mac.b[5] = 0xbb;
        rail1.ip = r1.ip;
        rte_mbuf* arp = rte_pktmbuf_alloc(pool);
        frame::write_arp_request(reinterpret_cast<std::uint8_t*>(rte_pktmbuf_append(arp, frame::arp_frame_bytes)), b, rail1.ip);
        net::ring_put(p.rx1, &arp, 1);
        rte_mbuf* reply = nullptr;
        while (!net::ring_get(p.tx1, &reply, 1)) {}
        rte_pktmbuf_free(reply);
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            const double pps = cycle(p, pool, sizes[i], p.mac(p.p0), seconds);
            const double wire_bits = (sizes[i] + 24) * 8.0; // + preamble, FCS, gap
            std::printf("%-10s %6u %10.2f %10.2f %10.1f %10.2f\n", shaped ? "routed+tc" : "routed", sizes[i], pps / 1e6,
                        pps * wire_bits / 1e9, 1e9 / pps, pps / mac_pps[i]);
            std::this_thread::sleep_for(std::chrono::milliseconds(50)); // the lcore empties rx0
            drain(p, false);
        }
        d.stop();
        const auto& c = d.counters(0);
        if (c.total_drops()) std::printf("  (rail 0 dropped %llu)\n", static_cast<unsigned long long>(c.total_drops()));
    }
    for (bool touch : {true, false})
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            const double pps = (touch ? mac_pps : io_pps)[i];
            std::printf("%-10s %6u %10.2f %10.2f %10.1f %10.2f\n", touch ? "macswap" : "io-fwd", sizes[i], pps / 1e6,
                        pps * (sizes[i] + 24) * 8.0 / 1e9, 1e9 / pps, pps / mac_pps[i]);
        }
    return 0;
}
