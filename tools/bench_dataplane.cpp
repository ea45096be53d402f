// One railgated lcore on a net_ring rail, a traffic generator on the other
// core: how much gradient input one data-plane core absorbs.
//   bench_dataplane [--mtu N] [--workers W] [--seconds S] [--pool P]
//                   [--gen-mbufs N] [--csum sw|nic] [--capture rx|tx|rxtx]
//                   [--snaplen B]
// The generator streams contributions of W ranks (chunk i -> slot i % pool,
// generation i / pool) into the rail's RX ring and frees the results from
// its TX ring. Frames are built once per mbuf and only their 40-byte
// railgate header is rewritten, so the generator is cheap per packet.
// --csum: who verifies the contributions' UDP checksums and computes the
// results'. sw (default): railgated, the contributions' in the pass that
// reduces them (a port without the offloads: vdevs, af_packet, af_xdp);
// nic: the generator marks each frame verified, as a NIC's PMD does with
// the RX UDP checksum offload, and railgated leaves the results' to the
// port, as with the TX one (mlx5, ice, i40e...).
// --capture: railctl capture runs on the rail (what it mirrors), its
// pcapng written to /dev/null by railgated's capture code, pumped from the
// generator's loop: the lcore's cost per packet shows in its capacity, the
// control thread's is timed apart.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "dataplane/net/daemon.hpp"
#include "dataplane/net/eal.hpp"
#include "dataplane/proto/frame.hpp"
#include "dataplane/proto/parse.hpp"
#include "dataplane/railgated/capture.hpp"
#include "tools/bench_flags.hpp"

using namespace railgate;

int main(int argc, char** argv) {
    unsigned mtu = 9000, workers = 4, pool = 64, gen_mbufs = 16384;
    double seconds = 3;
    bool nic_csum = false;
    std::string capture = "off";
    unsigned snaplen = capture_sessions::default_snaplen;
    bench::flags args(argc, argv,
                   "usage: bench_dataplane [--mtu N] [--workers W] [--seconds S] [--pool P] [--gen-mbufs N] "
                   "[--csum sw|nic] [--capture off|rx|tx|rxtx] [--snaplen B]");
    for (std::string a; args.next(a);) {
        if (a == "--mtu") {
            if (const std::string e = wire::parse_mtu(args.text(), mtu); !e.empty()) args.fail(e);
        }
        else if (a == "--workers") workers = args.number<unsigned>(1, wire::max_world);
        else if (a == "--seconds") seconds = args.number<double>(0.1, 3600);
        else if (a == "--pool") pool = args.number<unsigned>(1, 65535);
        else if (a == "--gen-mbufs") gen_mbufs = args.number<unsigned>(2048, 65536);
        else if (a == "--csum") {
            const std::string v = args.text();
            if (v != "sw" && v != "nic") args.fail("--csum: '" + v + "' is neither sw nor nic");
            nic_csum = v == "nic";
        } else if (a == "--capture") {
            capture = args.text();
            if (capture != "rx" && capture != "tx" && capture != "rxtx" && capture != "off")
                args.fail("--capture: '" + capture + "' is not off, rx, tx or rxtx");
        } else if (a == "--snaplen") snaplen = args.number<unsigned>(1, 65535);
        else args.unknown();
    }
    net::eal eal(net::embedded_eal_args("bench_dataplane"));
    rte_ring* rx = rte_ring_create("bd_rx", 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    rte_ring* tx = rte_ring_create("bd_tx", 16384, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    const int port = rte_eth_from_rings("bd_rail", &rx, 1, &tx, 1, 0);
    net::daemon_config dc;
    net::rail_config rc;
    rc.name = "r0";
    rc.port_id = port;
    rc.ip = 0xC6120001;
    rc.mtu = static_cast<std::uint16_t>(mtu);
    rc.emulate_checksum_offload = nic_csum;
    dc.rails = {rc};
    dc.mbufs_per_rail = 16384;
    dc.default_pool = pool;
    net::daemon d(dc);
    const std::uint32_t chunk = wire::chunk_bytes_for_mtu(mtu);
    const std::uint32_t elems = chunk / 4;
    rte_mempool* gp = net::make_pktmbuf_pool("bd_gen", gen_mbufs, RTE_PKTMBUF_HEADROOM + chunk + 128, SOCKET_ID_ANY);
    // Every buffer's data room zeroed (the checksums below assume it).
    rte_mempool_obj_iter(
        gp, [](rte_mempool*, void*, void* obj, unsigned) {
            auto* m = static_cast<rte_mbuf*>(obj);
            std::memset(static_cast<char*>(m->buf_addr), 0, m->buf_len);
        },
        nullptr);

    frame::endpoint self{}, peer{};
    self.ip = rc.ip;
    self.udp_port = wire::default_udp_port;
    rte_ether_addr mac;
    rte_eth_macaddr_get(static_cast<std::uint16_t>(port), &mac);
    std::memcpy(self.mac.b, mac.addr_bytes, 6);
    const std::size_t frame_len = frame::udp_frame_overhead + wire::header_bytes + chunk;
    auto send = [&](const wire::header& h, std::size_t body, const void* bodyp) {
        rte_mbuf* m = rte_pktmbuf_alloc(gp);
        auto* p = reinterpret_cast<std::uint8_t*>(rte_pktmbuf_append(m, static_cast<std::uint16_t>(frame::udp_frame_overhead + wire::header_bytes + body)));
        peer.ip = 0xC612000A + h.rank;
        peer.udp_port = static_cast<std::uint16_t>(40000 + h.rank);
        frame::write_udp_headers(p, peer, self, wire::header_bytes + body);
        wire::encode_header(h, p + frame::udp_frame_overhead);
        if (body) std::memcpy(p + frame::udp_frame_overhead + wire::header_bytes, bodyp, body);
        frame::fill_udp_checksum(p);
        while (rte_ring_enqueue(rx, m) != 0) {}
    };
    d.launch();
    // Join every rank.
    wire::header h;
    h.job_id = 1;
    h.job_token = 9;
    h.world_size = static_cast<std::uint16_t>(workers);
    for (unsigned r = 0; r < workers; ++r) {
        h.type = wire::msg_type::join;
        h.rank = static_cast<std::uint16_t>(r);
        wire::join_body b;
        b.max_count = wire::max_tensor_elems;
        std::uint8_t body[wire::join_body_bytes];
        wire::encode_join_body(b, body);
        send(h, sizeof body, body);
    }
    // The JOIN_ACKs come back in the JOINs' buffers: zeroed again before
    // they join the generator's pool of contributions.
    for (unsigned got = 0; got < workers;) {
        void* acks[64];
        const unsigned n = rte_ring_dequeue_burst(tx, acks, 64, nullptr);
        for (unsigned i = 0; i < n; ++i) {
            auto* m = static_cast<rte_mbuf*>(acks[i]);
            std::memset(static_cast<char*>(m->buf_addr), 0, m->buf_len);
            rte_pktmbuf_free(m);
        }
        got += n;
    }
    // Pre-build every generator mbuf as a full contribution frame.
    {
        std::vector<rte_mbuf*> all(gen_mbufs - 512);
        if (rte_pktmbuf_alloc_bulk(gp, all.data(), static_cast<unsigned>(all.size())) != 0) return 1;
        for (rte_mbuf* m : all) {
            auto* p = reinterpret_cast<std::uint8_t*>(rte_pktmbuf_append(m, static_cast<std::uint16_t>(frame_len)));
            frame::write_udp_headers(p, peer, self, wire::header_bytes + chunk);
            // Zeros: their sum is zeros, so a buffer that comes back as a
            // result (railgated answers in the contributions' buffers)
            // still holds the payload whose checksum the generator knows.
            std::memset(p + frame::udp_frame_overhead + wire::header_bytes, 0, chunk);
        }
        rte_pktmbuf_free_bulk(all.data(), static_cast<unsigned>(all.size()));
    }
    std::unique_ptr<capture_sessions> cap;
    control::json cap_id;
    std::chrono::nanoseconds pump_time{0};
    if (capture != "off") {
        cap = std::make_unique<capture_sessions>(d, capture_sessions::writer::caller);
        const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        const control::json r = cap->start({0},
                                           {{"rx", capture != "tx"}, {"tx", capture != "rx"}, {"snaplen", snaplen}}, null);
        close(null);
        if (!r["ok"].get<bool>()) {
            std::fprintf(stderr, "bench_dataplane: capture: %s\n", r["error"].get<std::string>().c_str());
            return 1;
        }
        cap_id = {{"id", r["result"]["id"]}};
    }
    auto pump = [&] {
        const auto a = std::chrono::steady_clock::now();
        cap->pump();
        pump_time += std::chrono::steady_clock::now() - a;
    };
    auto last_status = std::chrono::steady_clock::now();
    h.type = wire::msg_type::contrib;
    h.count = static_cast<std::uint16_t>(elems);
    std::uint64_t chunk_i = 0;
    const auto t0 = std::chrono::steady_clock::now();
    auto deadline = t0 + std::chrono::duration<double>(seconds);
    std::uint64_t results = 0;
    while (std::chrono::steady_clock::now() < deadline) {
        for (int batch = 0; batch < 64; ++batch) {
            rte_mbuf* ms[wire::max_world];
            if (rte_pktmbuf_alloc_bulk(gp, ms, workers) != 0) break;
            h.slot = static_cast<std::uint16_t>(chunk_i % pool);
            h.gen = static_cast<std::uint32_t>(chunk_i / pool);
            h.offset = chunk_i * elems;
            for (unsigned r = 0; r < workers; ++r) {
                rte_mbuf* m = ms[r];
                m->data_off = RTE_PKTMBUF_HEADROOM;
                m->data_len = static_cast<std::uint16_t>(frame_len);
                m->pkt_len = static_cast<std::uint32_t>(frame_len);
                m->ol_flags = nic_csum ? RTE_MBUF_F_RX_L4_CKSUM_GOOD : 0;
                h.rank = static_cast<std::uint16_t>(r);
                auto* p = rte_pktmbuf_mtod(m, std::uint8_t*);
                // Each rank from where it joined (railgated binds it there).
                peer.ip = 0xC612000A + r;
                peer.udp_port = static_cast<std::uint16_t>(40000 + r);
                const std::uint16_t udp_sum = frame::write_udp_headers(p, peer, self, wire::header_bytes + chunk);
                wire::encode_header(h, p + frame::udp_frame_overhead);
                // The payload is zeros (its sum 0): the headers' sum is the
                // checksum; railgated verifies the whole datagram.
                frame::set_udp_checksum(p, udp_sum, wire::header_sum(h));
            }
            while (rte_ring_enqueue_bulk(rx, reinterpret_cast<void**>(ms), workers, nullptr) == 0) {
                void* out[256];
                const unsigned n = rte_ring_dequeue_burst(tx, out, 256, nullptr);
                results += n;
                rte_pktmbuf_free_bulk(reinterpret_cast<rte_mbuf**>(out), n);
            }
            ++chunk_i;
        }
        void* out[256];
        const unsigned n = rte_ring_dequeue_burst(tx, out, 256, nullptr);
        results += n;
        rte_pktmbuf_free_bulk(reinterpret_cast<rte_mbuf**>(out), n);
        if (cap) {
            pump();
            if (const auto now = std::chrono::steady_clock::now(); now - last_status > std::chrono::seconds(1)) {
                cap->status(cap_id); // renews its lease
                last_status = now;
            }
        }
    }
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    control::json cap_end;
    if (cap) {
        cap->stop(cap_id);
        for (int i = 0; i < 1000; ++i) {
            pump();
            cap_end = cap->status(cap_id)["result"];
            if (cap_end["done"].get<bool>()) break;
        }
    }
    d.stop();
    void* out[256];
    unsigned n;
    while ((n = rte_ring_dequeue_burst(tx, out, 256, nullptr)) > 0) {
        results += n;
        rte_pktmbuf_free_bulk(reinterpret_cast<rte_mbuf**>(out), n);
    }
    const auto& c = d.counters(0);
    if (c.total_drops() > c.drops[static_cast<unsigned>(drop_reason::duplicate)].load()) d.print_stats(stderr);
    const double contribs = static_cast<double>(c.contributions.load());
    std::printf("# bench_dataplane: 1 railgated lcore, net_ring rail, MTU %u (chunk %u B), W=%u, pool %u, %.1f s, "
                "UDP checksums by %s, memory %s\n",
                mtu, chunk, workers, pool, t, nic_csum ? "the NIC (emulated offloads)" : "railgated", net::eal_memory_kind());
    std::printf("  contributions %.0f (%.2f Mpps), aggregations %llu, results %llu, drops %llu\n", contribs,
                contribs / t / 1e6, static_cast<unsigned long long>(c.aggregations.load()),
                static_cast<unsigned long long>(results), static_cast<unsigned long long>(c.total_drops()));
    const double gbit = contribs * chunk * 8 / t / 1e9;
    std::printf("  gradient input absorbed: %.2f Gbit/s (payload only)\n", gbit);
    // The lcore's busy share (polls that found packets): below 100% the
    // generator, not railgated, set the rate; the capacity is then the rate
    // over the busy share (conservative: a starved lcore gets short bursts,
    // which cost more per packet than full ones).
    const double busy = c.poll_cycles.load() ? static_cast<double>(c.busy_cycles.load()) /
                                                   static_cast<double>(c.poll_cycles.load())
                                             : 0;
    std::printf("  railgated lcore busy %.1f%% -> one core's capacity about %.2f Gbit/s (%.2f Mpps)\n", busy * 100,
                busy > 0 ? gbit / busy : 0.0, busy > 0 ? contribs / t / 1e6 / busy : 0.0);
    // The lcore's busy time per packet it received or sent.
    const double pkts = static_cast<double>(c.rx_packets.load() + c.tx_packets.load());
    std::printf("  lcore busy time per packet (rx + tx): %.1f ns\n",
                pkts > 0 ? static_cast<double>(c.busy_cycles.load()) / static_cast<double>(rte_get_tsc_hz()) * 1e9 / pkts
                         : 0.0);
    if (cap) {
        const auto written = cap_end.value("packets", std::uint64_t{0});
        std::printf("  capture %s, snaplen %u: %llu packets mirrored, %llu overruns; pcapng written by the control "
                    "thread at %.1f ns per packet\n",
                    capture.c_str(), snaplen, static_cast<unsigned long long>(c.capture_packets.load()),
                    static_cast<unsigned long long>(c.capture_overruns.load()),
                    written ? static_cast<double>(pump_time.count()) / static_cast<double>(written) : 0.0);
    }
    return 0;
}
