// A rail's state inside railgated's data plane (internal to dataplane/net):
// what every lcore touches per packet, shared by the packet handlers
// (handlers.cpp), the rail loop (rail_loop.cpp) and the gateway
// (gateway.cpp). The transmit helpers they share are in tx.hpp.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "dataplane/agg/aggregator.hpp"
#include "dataplane/bpf/xdp_steer.hpp"
#include "dataplane/net/capture.hpp"
#include "dataplane/fault/injector.hpp"
#include "dataplane/net/daemon.hpp"
#include "dataplane/net/burst.hpp"
#include "dataplane/net/fib.hpp"
#include "dataplane/net/job_latency.hpp"
#include "dataplane/net/kernel_if.hpp"
#include "dataplane/net/rail_counters.hpp"
#include "dataplane/net/udp_port.hpp"
#include "dataplane/proto/frame.hpp"
#include "dataplane/qos/scheduler.hpp"
#include "dataplane/reduce/reduce.hpp"
#include "dataplane/stats/histogram.hpp"

namespace railgate::net::detail {

constexpr unsigned rx_burst = 32;
constexpr unsigned tx_cap = 512;
// A full TX queue is usually transient (the peer is draining); retry this
// many times before freeing and counting the rest as tx_full.
constexpr unsigned tx_retries = 256;

struct mbuf_release {
    void operator()(void* m) const noexcept {
        auto* b = static_cast<rte_mbuf*>(m);
        handing_over(&b, 1); // a result's buffer: result frames in flight may hold it
        rte_pktmbuf_free(b);
    }
};
using aggregator = agg::rail_aggregator<mbuf_release>;

struct rail_state;

// A result of at most this many bytes goes copied behind its headers in
// one buffer, not chained to the kept payload: the copy of a few cache-hot
// lines costs less than a second and third buffer, the payload's reference
// count taken on the lcore and dropped by whoever frees the frame (the
// worker's thread, embedded), and a chain to read (drivers' rx_copybreak).
constexpr std::uint32_t result_copybreak = 256;

struct rail_static {
    rail_config cfg;
    std::uint16_t port = 0;
    int socket = 0;
    unsigned lcore = 0;
    frame::endpoint self;
    // Its port sends chains: a result goes as its headers chained to the
    // slot's kept payload (a clone), when it is over result_copybreak.
    bool multiseg_tx = false;
    std::uint32_t chunk_bytes = 0;
    // Control-plane state (never read by lcores): in the set JOIN_ACKs
    // advertise, its position there, and whether its port is closed.
    bool active = true;
    int stripe = -1;
    bool closed = false;
    bool hotplugged = false; // added at run time: unplugged when removed
    rte_device* device = nullptr;
    rte_mempool* pool = nullptr;     // full-size frames
    rte_mempool* hdr_pool = nullptr; // result headers and indirect clones
    rte_ring* fwd = nullptr;         // gateway: datagrams routed out of this rail (MP/SC)
    rail_state* served_by = nullptr; // its state; only its own lcore reads this
    rail_counters ctr;
    std::string driver;
    std::string ifname;                      // kernel interface behind the port, if any
    std::unique_ptr<xdp::attached> steering; // railgate's XDP program (af_xdp rails)
    // A udp rail's socket (in place of the DPDK port `port`, then unused)
    // and the address railgated put on an interface for it.
    std::unique_ptr<local_address> udp_address;
    std::unique_ptr<udp_port> udp;
    std::uint32_t pmd_max_mtu = 0;           // what the ethdev API accepts; beyond it the
                                             // kernel interface's MTU governs (tap, af_packet)
    // Written by the rail's lcore, read by the control plane.
    std::atomic<std::uint16_t> mtu_now{0};   // the port's MTU
    std::atomic<std::uint16_t> mtu_target{0};
    std::atomic<unsigned> active_jobs{0};
    // The most rails any of those jobs lists (0: none): a rail at that
    // stripe index or beyond is none of this rail's jobs' (remove_rail).
    std::atomic<unsigned> job_rails{0};
    std::atomic<bool> link_up{true};           // written by the link monitor
    // The fault injector's spec as set (shown by the control plane).
    fault::spec fault_spec;
    // Offloads the port does: it verifies received UDP checksums (mbuf
    // flags say good or bad), it fills transmitted ones.
    bool rx_udp_cksum = false, tx_udp_cksum = false;
    // Mbufs of `pool` the port held right after it started (its receive
    // descriptors; af_xdp's fill ring): a port holds as many at the end.
    unsigned pool_baseline = 0;
};

// The transmit scheduler's clock: the TSC in nanoseconds, read once per
// burst by the rail loop (qos::scheduler takes `now` from its caller).
struct tsc_ns_clock {
    using duration = std::chrono::nanoseconds;
    using rep = duration::rep;
    using period = duration::period;
    using time_point = std::chrono::time_point<tsc_ns_clock>;
    static constexpr bool is_steady = true;
};
// A frame waiting in a traffic class, with when it started to wait.
struct tx_item {
    rte_mbuf* m;
    std::uint64_t enq_tsc;
};
using tx_scheduler = qos::scheduler<tx_item, tsc_ns_clock>;

inline tx_scheduler::options scheduler_options(const rail_static& st) {
    tx_scheduler::options o;
    o.tcs = st.cfg.tcs;
    o.rail_rate_bps = st.cfg.rate_bps;
    o.rail_burst_bytes = st.cfg.burst_bytes;
    o.max_item_bytes = static_cast<std::uint32_t>(std::max(st.cfg.mtu_max, st.cfg.mtu)) + 14 + 24;
    o.queue_items = 4096;
    o.ecn_mark_items = st.cfg.ecn_mark_items;
    return o;
}

// The gateway's routes as the lcores read them: built by the control plane,
// replaced whole (lcore_command::routes), never changed in place.
struct fib {
    struct hop {
        rail_static* out;
        std::uint32_t via; // 0: the destination is on the out rail's link
    };
    lpm_table table; // prefix -> index in hops
    std::vector<hop> hops;
    // Datagrams and bytes each route carried, one block per lcore (the
    // lcore's slot; blocks apart by whole cache lines), so that lcores never
    // write the same line; `base` carries a route's totals over from the
    // table this one replaced. Read by the control plane.
    unsigned stride = 0; // counters per lcore block
    std::unique_ptr<counter[]> hits;
    std::vector<std::uint64_t> base_packets, base_bytes;
    void size_hits(unsigned lcores) {
        stride = (static_cast<unsigned>(hops.size()) * 2 + 7) & ~7u;
        hits = std::make_unique<counter[]>(std::size_t{stride} * std::max(lcores, 1u));
        base_packets.assign(hops.size(), 0);
        base_bytes.assign(hops.size(), 0);
        slots = std::max(lcores, 1u);
    }
    counter* hit(unsigned slot, std::uint32_t h) const noexcept { return &hits[std::size_t{slot} * stride + h * 2]; }
    std::uint64_t total(std::uint32_t h, unsigned which) const noexcept {
        std::uint64_t t = which ? base_bytes[h] : base_packets[h];
        for (unsigned s = 0; s < slots; ++s) t += hit(s, h)[which].load(std::memory_order_relaxed);
        return t;
    }
    unsigned slots = 1;
};

// A rail's next hops (the gateway's ARP cache), owned by the rail's lcore.
// Open addressing over a window of `window` slots; entries are overwritten,
// never emptied, so a lookup stops at the first unused slot. Frames for an
// unresolved next hop wait (at most `hold`) while ARP asks up to
// `max_asks` times, a second apart; then they are dropped and counted.
struct neighbour_table {
    static constexpr unsigned size = 1024, window = 8, hold = 8, max_asks = 3;
    struct entry {
        std::uint32_t ip = 0;
        bool used = false, resolved = false;
        std::uint8_t asks = 0, nheld = 0;
        frame::mac_addr mac;
        std::uint64_t asked_tsc = 0;
        std::uint64_t confirmed_tsc = 0; // when ARP last said where it is
        rte_mbuf* held[hold];
    };
    std::array<entry, size> e{};
    unsigned waiting = 0;       // entries holding frames
    std::uint64_t swept_tsc = 0;
    // After this long without word from ARP an entry is stale: traffic to it
    // still goes to the known MAC while it is asked again, a second apart;
    // unanswered max_asks times, it is resolved afresh (frames wait).
    std::uint64_t reachable_tsc = 0;

    static std::size_t home(std::uint32_t ip) noexcept { return (ip * 0x9E3779B1u) >> 22; }
    entry* find(std::uint32_t ip) noexcept {
        for (std::size_t k = 0, i = home(ip); k < window; ++k, i = (i + 1) % size) {
            if (!e[i].used) return nullptr;
            if (e[i].ip == ip) return &e[i];
        }
        return nullptr;
    }
    // The entry of ip, made if needed by taking a free slot or one that
    // holds no frames; null when the whole window waits for ARP.
    entry* get(std::uint32_t ip) noexcept {
        entry* victim = nullptr;
        for (std::size_t k = 0, i = home(ip); k < window; ++k, i = (i + 1) % size) {
            entry& x = e[i];
            if (x.used && x.ip == ip) return &x;
            if (!x.used) {
                victim = &x;
                break;
            }
            if (!victim && !x.nheld) victim = &x;
        }
        if (victim) {
            *victim = entry{};
            victim->ip = ip;
            victim->used = true;
        }
        return victim;
    }
};

// Everything one rail's lcore touches per packet; built on that lcore so
// that it lives on its NUMA node.
struct rail_state {
    rail_state(rail_static& st, const agg::limits& lim, const wire::join_ack_body& ack_body,
               wire::rail_policy pol)
        : s(st), ctr(st.ctr), agg(lim), k(reduce::best()), ack(ack_body), policy(pol),
          ns_per_tsc(1e9 / static_cast<double>(rte_get_tsc_hz())),
          us_per_tsc_q32(static_cast<std::uint64_t>(1e6 / static_cast<double>(rte_get_tsc_hz()) * 4294967296.0)),
          ms_tsc(rte_get_tsc_hz() / 1000) {
        agg.keep_spares(true);
        if (tx_scheduler::shapes(scheduler_options(st))) make_scheduler(scheduler_options(st));
        set_fault(st.fault_spec);
    }
    ~rail_state() {
        if (sched) sched->clear([](const tx_item& i) { rte_pktmbuf_free(i.m); });
        drop_held();
        for (rte_mbuf*& m : late)
            if (m) rte_pktmbuf_free(m);
    }
    void set_fault(const fault::spec& f) noexcept {
        dice.reset(f);
        faulty = dice.active();
        hooks = static_cast<std::uint8_t>((hooks & ~hook_fault) | (faulty ? hook_fault : 0));
    }
    // Mirrors into `ring` what `f` selects (null: capture off).
    void set_capture(capture_ring* ring, const capture_filter& f) noexcept {
        cap = ring;
        capf = f;
        std::uint8_t h = hooks & hook_fault;
        if (ring) h |= static_cast<std::uint8_t>((f.rx ? hook_cap_rx : 0) | (f.tx ? hook_cap_tx : 0) |
                                                 (f.drops ? hook_cap_drop : 0));
        hooks = h;
    }
    // Frames waiting for ARP (when the gateway stops, and at the end).
    void drop_held() noexcept {
        for (auto& e : neigh.e) {
            for (unsigned i = 0; i < e.nheld; ++i) rte_pktmbuf_free(e.held[i]);
            e.nheld = 0;
        }
        neigh.waiting = 0;
    }
    rail_state(const rail_state&) = delete;
    rail_state& operator=(const rail_state&) = delete;
    void make_scheduler(const tx_scheduler::options& o) {
        sched = std::make_unique<tx_scheduler>(o, tx_now());
        tc_wait = std::make_unique<std::array<stats::histogram, qos::tc_count>>();
    }
    tsc_ns_clock::time_point tx_time(std::uint64_t tsc) const noexcept {
        return tsc_ns_clock::time_point(
            std::chrono::nanoseconds(static_cast<std::int64_t>(static_cast<double>(tsc) * ns_per_tsc)));
    }
    tsc_ns_clock::time_point tx_now() const noexcept { return tx_time(rte_rdtsc()); }

    rail_static& s;
    rail_counters& ctr;
    aggregator agg;
    const reduce::kernels& k;
    wire::join_ack_body ack; // this lcore's copy; replaced by lcore_command::adopt
    wire::rail_policy policy;
    std::size_t index = 0;   // in daemon::impl::rails
    unsigned lcore_slot = 0; // its lcore's position among the rail lcores (fib::hits)
    int stripe = -1;         // position among the advertised rails
    bool closing = false;    // removed from the advertised set: no new jobs
    // The control plane is moving the lcores to a new advertisement (see
    // daemon::impl::advertise): JOINs are refused (rails_changing) meanwhile.
    bool holding_joins = false;
    // LAG: this lcore's rails by stripe (a bond is served by one lcore).
    const std::vector<rail_state*>* bond = nullptr;
    double ns_per_tsc;
    std::uint64_t us_per_tsc_q32; // microseconds per TSC tick, 32.32 fixed point (no division per result)
    std::uint64_t burst_tsc = 0; // TSC when the current burst was received
    stats::histogram lat;    // aggregation latency, ns
    stats::histogram worker_rtt; // round trips the workers reported, ns
    job_latency job_lat{agg.lim().max_jobs};
    std::uint16_t pending_mtu = 0; // lower MTU waiting for larger-chunk jobs to leave
    std::unique_ptr<tx_scheduler> sched; // a shaped rail's traffic classes; null: unshaped
    // Per TC, how long frames waited in the scheduler (ns); made with sched.
    std::unique_ptr<std::array<stats::histogram, qos::tc_count>> tc_wait;
    unsigned ntx = 0;
    rte_mbuf* tx[tx_cap];
    // Gateway: the routes (null: not a gateway), this rail's next hops,
    // the current burst's routed datagrams by out ring, and when it last
    // sent an ICMP error (at most one per millisecond).
    const fib* routes = nullptr;
    neighbour_table neigh;
    struct routed {
        rail_static* out;
        rte_mbuf* m;
    };
    unsigned nrouted = 0;
    routed out[rx_burst];
    std::uint64_t icmp_tsc = 0;
    // Job lifecycle: when the next expiry scan is due, when railgated last
    // answered a message it had no job for (may_answer: at most one a
    // millisecond), the stall time JOIN_ACKs advertise, and the advertised
    // rails that are down (the daemon's, read at JOIN).
    std::uint64_t ms_tsc;
    std::uint64_t expire_tsc = 0;
    std::uint64_t unknown_tsc = 0;
    std::uint16_t stall_ms = 0;
    const std::atomic<std::uint32_t>* rails_down = nullptr;
    // What runs beside the packet path, one bit each: the fault injector
    // and capture's three mirrors. The receive burst and the transmit flush
    // test `hooks` once each, so that with neither on they cost one
    // predictable branch per burst; a drop tests hook_cap_drop.
    static constexpr std::uint8_t hook_fault = 1, hook_cap_rx = 2, hook_cap_tx = 4, hook_cap_drop = 8;
    std::uint8_t hooks = 0;
    // The fault injector (--fault, railctl fault). A reordered frame waits
    // in `late` for the next burst (rx, tx).
    bool faulty = false;
    fault::dice dice;
    rte_mbuf* late[2] = {nullptr, nullptr};
    // Capture (railctl capture): the ring this lcore mirrors into, owned by
    // the control plane, and what goes in it.
    capture_ring* cap = nullptr;
    capture_filter capf;
};

} // namespace railgate::net::detail
