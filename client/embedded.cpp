#include "client/railgate/embedded.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_prefetch.h>
#include <rte_ring.h>

#include "dataplane/net/burst.hpp"
#include "dataplane/net/eal.hpp"
#include "dataplane/proto/frame.hpp"
#include "dataplane/proto/wire.hpp"

namespace railgate::client {
namespace {

constexpr unsigned ring_size = 4096;

rte_ring* make_ring(const std::string& name, unsigned flags) {
    rte_ring* r = rte_ring_create(name.c_str(), ring_size, SOCKET_ID_ANY, flags);
    if (!r) throw std::runtime_error("ring " + name + ": " + rte_strerror(rte_errno));
    return r;
}

std::uint16_t ring_port(const std::string& name, rte_ring* rx, rte_ring* tx) {
    const int id = rte_eth_from_rings(name.c_str(), &rx, 1, &tx, 1, static_cast<unsigned>(SOCKET_ID_ANY));
    if (id < 0) throw std::runtime_error("ring port " + name + ": " + rte_strerror(rte_errno));
    // Give every port a distinct locally administered MAC.
    rte_ether_addr mac{{0x02, 0x72, 0x67, 0, static_cast<std::uint8_t>(id >> 8), static_cast<std::uint8_t>(id)}};
    rte_eth_dev_default_mac_addr_set(static_cast<std::uint16_t>(id), &mac);
    return static_cast<std::uint16_t>(id);
}

// The wire between two ports that offload checksums (see the header): what
// the sender's port would compute of the IPv4 header, and the receiver's
// verdict on the UDP checksum. A frame without the TX flags carries its
// checksums already (computed in software, or before a corruption) and is
// left for the receiver to check.
void offloaded_wire(rte_mbuf* m) noexcept {
    if (!(m->ol_flags & RTE_MBUF_F_TX_UDP_CKSUM) || m->data_len < frame::eth_bytes + frame::ipv4_bytes) return;
    if (m->ol_flags & RTE_MBUF_F_TX_IP_CKSUM) {
        std::uint8_t* ip = rte_pktmbuf_mtod_offset(m, std::uint8_t*, frame::eth_bytes);
        ip[10] = ip[11] = 0;
        const std::uint16_t c = frame::inet_checksum(ip, frame::ipv4_bytes);
        ip[10] = static_cast<std::uint8_t>(c >> 8);
        ip[11] = static_cast<std::uint8_t>(c);
    }
    m->ol_flags = (m->ol_flags & ~(RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_UDP_CKSUM |
                                   RTE_MBUF_F_RX_IP_CKSUM_MASK | RTE_MBUF_F_RX_L4_CKSUM_MASK)) |
                  RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_GOOD;
}

// f(m) for each frame of a burst railgated's lcore wrote on its core: every
// header brought in at once, then each frame's first line a few ahead, so
// that the misses overlap (as railgated's rail loop reads a burst) instead
// of two in turn per frame (they took a third of pump()'s samples).
template <class F> void each_prefetched(void* const* v, unsigned n, F&& f) noexcept {
    auto first_line = [v](unsigned i) { rte_prefetch0(rte_pktmbuf_mtod(static_cast<rte_mbuf*>(v[i]), void*)); };
    for (unsigned i = 0; i < n; ++i) rte_prefetch0(v[i]);
    for (unsigned i = 0; i < n && i < 4; ++i) first_line(i);
    for (unsigned i = 0; i < n; ++i) {
        if (i + 4 < n) first_line(i + 4);
        f(static_cast<rte_mbuf*>(v[i]));
    }
}

// Whether ring r holds anything, as a hint: rte_ring_empty() reads the
// indices plainly, and with railgated's lcore driving rails too another
// thread may be dequeuing (under the pump's flag) as this one looks.
bool ring_holds(const rte_ring* r) noexcept {
    return __atomic_load_n(&r->prod.tail, __ATOMIC_ACQUIRE) != __atomic_load_n(&r->cons.tail, __ATOMIC_RELAXED);
}

// Frees what a ring (a PMD's) holds.
void empty_ring(rte_ring* r) noexcept {
    void* objs[64];
    unsigned n;
    while ((n = rte_ring_dequeue_burst(r, objs, 64, nullptr)) > 0) {
        net::taking_over(reinterpret_cast<rte_mbuf**>(objs), n);
        rte_pktmbuf_free_bulk(reinterpret_cast<rte_mbuf**>(objs), n);
    }
}
} // namespace

embedded_fabric::embedded_fabric(unsigned rails, unsigned workers, std::uint16_t mtu, bool checksum_offload)
    : rails_(rails), workers_(workers), mtu_(mtu), offload_(checksum_offload), direct_(workers == 1),
      late_up_(std::size_t{rails} * workers, nullptr),
      late_down_(rails, nullptr) {
    if (rails == 0 || rails > 8) throw std::runtime_error("embedded mode: rails must be 1..8");
    if (workers == 0 || workers > 32) throw std::runtime_error("embedded mode: workers must be 1..32");
    // A port per rail for railgated and per rail per worker, among the
    // EAL's RTE_MAX_ETHPORTS (before: "ring port rg_w3r0: Invalid argument").
    const unsigned ports = rails * (workers + 1), free_ports = RTE_MAX_ETHPORTS - rte_eth_dev_count_total();
    if (ports > free_ports)
        throw std::runtime_error("embedded mode: " + std::to_string(rails) + " rails x " + std::to_string(workers) +
                                 " workers need " + std::to_string(ports) + " DPDK ports (one per rail, and one per rail "
                                 "per worker); this DPDK has room for " + std::to_string(free_ports) + " (RTE_MAX_ETHPORTS " +
                                 std::to_string(RTE_MAX_ETHPORTS) + ")");
    const unsigned room = RTE_PKTMBUF_HEADROOM + std::max<unsigned>(2048, mtu + 18u);
    pool_ = net::make_pktmbuf_pool("rg_workers", 8192 * rails, room, SOCKET_ID_ANY);
    for (unsigned r = 0; r < rails; ++r) {
        up_.push_back(make_ring("rg_up" + std::to_string(r), RING_F_SC_DEQ));
        down_.push_back(make_ring("rg_down" + std::to_string(r), RING_F_SP_ENQ | RING_F_SC_DEQ));
        daemon_ports_.push_back(ring_port("rg_rail" + std::to_string(r), up_[r], down_[r]));
    }
    for (unsigned w = 0; w < workers; ++w)
        for (unsigned r = 0; r < rails; ++r) {
            const std::string n = "w" + std::to_string(w) + "r" + std::to_string(r);
            // One worker: a link, no switch. Its port reads what railgated
            // sends (the hop through the pump and a ring of its own cost a
            // 4-byte round trip 40-100 ns of 1.3 us).
            if (direct_) {
                worker_ports_.push_back(ring_port("rg_" + n, down_[r], up_[r]));
                continue;
            }
            wdown_.push_back(make_ring("rg_" + n, RING_F_SP_ENQ | RING_F_SC_DEQ));
            worker_ports_.push_back(ring_port("rg_" + n, wdown_.back(), up_[r]));
        }
}

unsigned embedded_fabric::default_pool() const noexcept {
    constexpr unsigned window_bytes = 64 << 10;
    const unsigned chunk = wire::chunk_bytes_for_mtu(mtu_);
    if (chunk >= 8192) return 4; // jumbo: see the header
    if (chunk && chunk < 2048) return 64; // MTU 1500: see the header
    return chunk ? std::clamp(window_bytes / chunk, 4u, 64u) : 64u;
}

void embedded_fabric::drain() noexcept {
    for (auto* v : {&up_, &down_, &wdown_})
        for (rte_ring* r : *v) empty_ring(r);
    for (auto* v : {&late_up_, &late_down_})
        for (rte_mbuf*& m : *v)
            if (m) {
                rte_pktmbuf_free(m);
                m = nullptr;
            }
}

void embedded_fabric::set_fault(const fault::spec& f) noexcept {
    up_dice_.reset(f);
    fault::spec down = f;
    down.seed = f.seed * 0x9e3779b97f4a7c15ull + 1; // the other direction: its own draws
    down_dice_.reset(down);
    faulty_ = f.any();
}

embedded_fabric::~embedded_fabric() {
    drain();
    // The daemon and the transports may have closed their ports already.
    for (auto* ports : {&worker_ports_, &daemon_ports_})
        for (std::uint16_t p : *ports)
            if (rte_eth_dev_is_valid_port(p)) rte_eth_dev_close(p);
    for (auto* v : {&up_, &down_, &wdown_})
        for (rte_ring* r : *v) {
            empty_ring(r);
            rte_ring_free(r);
        }
    rte_mempool_free(pool_);
}

std::vector<net::rail_config> embedded_fabric::daemon_rails() const {
    std::vector<net::rail_config> v;
    for (unsigned r = 0; r < rails_; ++r) {
        net::rail_config c;
        c.name = "r" + std::to_string(r);
        c.port_id = daemon_ports_[r];
        c.port_name = "rg_rail" + std::to_string(r);
        c.ip = rail_ip(r);
        c.mtu = mtu_;
        c.emulate_checksum_offload = offload_;
        v.push_back(c);
    }
    return v;
}

std::unique_ptr<transport> embedded_fabric::worker_transport(unsigned w, std::uint8_t tos) {
    std::vector<dpdk_port> ports;
    for (unsigned r = 0; r < rails_; ++r) ports.push_back({worker_ports_[w * rails_ + r], worker_ip(r, w), tos, offload_});
    burst_hook up;
    const bool faults = faulty_ && up_dice_.current().on_rx();
    if (faults || offload_)
        up = [this, w, faults](unsigned r, rte_mbuf** v, unsigned& n, unsigned cap) {
            if (faults) {
                // late_up_[w * rails_ + r] is this worker's own; the lock guards the dice.
                if (n == 0 && !late_up_[w * rails_ + r]) return;
                while (up_faults_.test_and_set(std::memory_order_acquire)) rte_pause();
                net::apply_faults(up_dice_, late_up_[w * rails_ + r], up_tally_, v, n, cap);
                up_faults_.clear(std::memory_order_release);
            }
            if (offload_)
                for (unsigned i = 0; i < n; ++i) offloaded_wire(v[i]);
        };
    if (!direct_)
        return make_dpdk_transport(ports, rail_ip(0), wire::default_udp_port, pool_, [this] { pump(); }, std::move(up),
                                   faults);
    // A link: what the pump does to each frame, as the worker receives it.
    burst_hook down = [this](unsigned r, rte_mbuf** v, unsigned& n, unsigned cap) {
        if (faulty_) {
            // The lock guards the dice (rails may be driven by threads of
            // their own: no pump).
            while (down_faults_.test_and_set(std::memory_order_acquire)) rte_pause();
            fault_down(r, v, n, cap);
            down_faults_.clear(std::memory_order_release);
        }
        if (offload_) each_prefetched(reinterpret_cast<void* const*>(v), n, offloaded_wire);
    };
    return make_dpdk_transport(ports, rail_ip(0), wire::default_udp_port, pool_, {}, std::move(up), faults, std::move(down));
}

void embedded_fabric::fault_down(unsigned r, rte_mbuf** v, unsigned& n, unsigned cap) noexcept {
    if ((n || late_down_[r]) && down_dice_.current().on_tx()) net::apply_faults(down_dice_, late_down_[r], down_tally_, v, n, cap);
}

unsigned embedded_fabric::pump() noexcept {
    // Nothing from railgated (the common case of a worker's poll): no
    // atomic. The flag's exchange is a full barrier, which waits for the
    // thread's stores in flight (a burst's copies into frames) to land: it
    // took 40% of pump()'s samples, called on every recv. A frame the fault
    // injector holds back goes on a later pump, ring empty or not.
    if (direct_ || (!faulty_ && std::none_of(down_.begin(), down_.end(), ring_holds)))
        return 0; // a link has no switch: its worker's port reads railgated's ring
    if (pumping_.test_and_set(std::memory_order_acquire)) return 0;
    unsigned moved = 0;
    for (unsigned r = 0; r < rails_; ++r) {
        void* objs[256];
        unsigned n = rte_ring_dequeue_burst(down_[r], objs, 128, nullptr);
        net::taking_over(reinterpret_cast<rte_mbuf**>(objs), n); // railgated's port wrote them
        if (faulty_) fault_down(r, reinterpret_cast<rte_mbuf**>(objs), n, 256);
        each_prefetched(objs, n, [&](rte_mbuf* m) {
            if (offload_) offloaded_wire(m);
            const auto* p = rte_pktmbuf_mtod(m, const std::uint8_t*);
            std::uint32_t dst = 0;
            if (m->data_len >= 42 && p[12] == 0x08 && p[13] == 0x06) std::memcpy(&dst, p + 38, 4); // ARP target
            else if (m->data_len >= 34 && p[12] == 0x08 && p[13] == 0x00) std::memcpy(&dst, p + 30, 4);
            dst = rte_be_to_cpu_32(dst);
            const unsigned w = (dst & 0xff) - 10;
            net::handing_over(&m, 1); // to the worker's port
            if ((dst & 0xffffff00u) != (0xC6120000u | (r << 8)) || (dst & 0xff) < 10 || w >= workers_ ||
                rte_ring_enqueue(wdown_[w * rails_ + r], m) != 0) {
                ++drops_;
                rte_pktmbuf_free(m);
                return;
            }
            ++moved;
        });
    }
    pumping_.clear(std::memory_order_release);
    return moved;
}

} // namespace railgate::client
