#include "client/railgate/dpdk_transport.hpp"

#include <sched.h>

#include <atomic>
#include <cstring>
#include <stdexcept>

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "dataplane/net/burst.hpp"
#include "dataplane/net/kernel_if.hpp"
#include "dataplane/net/port_mtu.hpp"
#include "dataplane/proto/frame.hpp"
#include "dataplane/proto/parse.hpp"

namespace railgate::client {
namespace {

constexpr unsigned burst_max = 64;

class dpdk_transport final : public transport {
public:
    dpdk_transport(const std::vector<dpdk_port>& ports, std::uint32_t server_ip, std::uint16_t server_port,
                   rte_mempool* pool, std::function<void()> pump, burst_hook tx_hook, bool hook_holds, burst_hook rx_hook)
        : pool_(pool), pump_(std::move(pump)), tx_hook_(std::move(tx_hook)), rx_hook_(std::move(rx_hook)),
          hook_holds_(hook_holds && tx_hook_) {
        if (ports.empty()) throw std::runtime_error("dpdk transport: no ports");
        for (const dpdk_port& p : ports) {
            rail r;
            r.port = p.port_id;
            start_port(r, p.emulate_checksum_offload);
            rte_ether_addr mac;
            rte_eth_macaddr_get(p.port_id, &mac);
            std::memcpy(r.self.mac.b, mac.addr_bytes, 6);
            r.self.ip = p.ip;
            r.self.tos = p.tos;
            r.self.udp_port = static_cast<std::uint16_t>(50000 + p.port_id);
            all_.push_back(r);
        }
        all_[0].server.ip = server_ip;
        all_[0].server.udp_port = server_port;
        n_open_ = 1;
    }

    ~dpdk_transport() override {
        for (rail& r : all_) {
            net::handing_over(r.held, r.nheld);
            rte_pktmbuf_free_bulk(r.held, r.nheld);
            rte_eth_dev_stop(r.port);
        }
    }

    unsigned n_rails() const noexcept override { return n_open_; }
    // Poll mode: nothing to sleep on. Idle, give the core away for a
    // moment: kernel-backed ports (af_xdp, af_packet) move their packets in
    // the kernel, maybe on this very core.
    void wait(std::chrono::microseconds) noexcept override { sched_yield(); }
    const char* name() const noexcept override { return "dpdk"; }
    // A message goes in one buffer (send() appends it whole), in a frame
    // every port carries.
    std::size_t max_message_bytes() const noexcept override {
        std::size_t most = mbuf_message_bytes();
        for (const rail& r : all_) most = std::min(most, port_message_bytes(r));
        return most;
    }
    std::string message_limit(std::size_t bytes) const override {
        const unsigned mtu = static_cast<unsigned>(bytes + frame::ipv4_bytes + frame::udp_bytes);
        for (const rail& r : all_) {
            if (port_message_bytes(r) >= bytes) continue;
            const std::string port = "port " + std::to_string(r.port) + " (" + r.driver +
                                     (r.mtu.ifname.empty() ? "" : " on " + r.mtu.ifname) + ")";
            if (r.if_mtu && r.if_mtu < r.mtu.carried)
                return port + ": its kernel interface has MTU " + std::to_string(r.if_mtu) + ", " +
                       std::to_string(mtu) + " wanted (ip link set " + r.mtu.ifname + " mtu " + std::to_string(mtu) +
                       ", and its peer's)";
            return port + " carries MTU " + std::to_string(r.mtu.carried) +
                   (r.mtu.framesz ? " " + r.mtu.frames() : "") + ", " + std::to_string(mtu) + " wanted" +
                   (r.mtu.framesz ? ": " + r.mtu.advice(mtu) : "");
        }
        if (mbuf_message_bytes() < bytes)
            return "its mbufs hold " + std::to_string(rte_pktmbuf_data_room_size(pool_)) + " B";
        return "";
    }
    const char* checksums() const noexcept override {
        unsigned offloaded = 0;
        for (const rail& r : all_) offloaded += r.rx_csum && r.tx_csum;
        return offloaded == all_.size() ? "port" : offloaded ? "mixed" : "software";
    }
    std::uint64_t dropped() const noexcept override { return dropped_.load(std::memory_order_relaxed); }
    // Each rail is its own port and queue; the pool is thread-safe (threads
    // without an lcore id bypass its per-lcore caches). So is the embedded
    // mode's virtual switch (its pump runs on one thread at a time, the
    // others find it taken and read their ports; its fault dice have a
    // lock of their own).
    bool parallel_rails() const noexcept override { return true; }

    std::string open_rails(std::span<const wire::rail_entry> rails, const std::function<void()>&) override {
        if (rails.size() > all_.size())
            return "railgated has " + std::to_string(rails.size()) + " rails but this worker has " +
                   std::to_string(all_.size()) + " DPDK ports";
        for (std::size_t i = 0; i < rails.size(); ++i) {
            all_[i].server.ip = rails[i].ip;
            all_[i].server.udp_port = rails[i].udp_port;
            std::memcpy(all_[i].server.mac.b, rails[i].mac, 6);
            all_[i].resolved = true;
        }
        n_open_ = static_cast<unsigned>(rails.size());
        return "";
    }

    unsigned send(unsigned ri, const tx_msg* msgs, unsigned n) noexcept override {
        rail& r = all_[ri];
        if (!r.resolved) {
            send_arp(r);
            return 0;
        }
        n = std::min(n, burst_max);
        rte_mbuf* out[2 * burst_max]; // room for the switch's duplicates
        unsigned built = 0;
        // The next messages' payloads into the cache while this one is
        // copied: a small chunk (MTU 1500: 22 lines) read from memory, where
        // the tensor outgrows the cache, otherwise waits on each line
        // (64 MiB: 1.15-1.20x faster). Jumbo chunks span pages the hardware
        // streams by itself.
        constexpr unsigned ahead = 2;
        auto prefetch = [msgs](unsigned j) noexcept {
            if (msgs[j].bytes >= 4096) return;
            for (std::uint32_t b = 0; b < msgs[j].bytes; b += 64)
                __builtin_prefetch(static_cast<const std::uint8_t*>(msgs[j].payload) + b, 0, 3);
        };
        for (unsigned j = 1; j < std::min(n, ahead + 1); ++j) prefetch(j);
        for (; built < n; ++built) {
            const tx_msg& m = msgs[built];
            if (built + ahead + 1 < n) prefetch(built + ahead + 1);
            rte_mbuf* mb = rte_pktmbuf_alloc(pool_);
            if (!mb) break;
            const std::size_t len = frame::udp_frame_overhead + wire::header_bytes + m.bytes;
            auto* p = reinterpret_cast<std::uint8_t*>(rte_pktmbuf_append(mb, static_cast<std::uint16_t>(len)));
            if (!p) {
                rte_pktmbuf_free(mb);
                break;
            }
            std::uint8_t* h = p + frame::udp_frame_overhead;
            if (r.tx_csum) {
                // The port sums the payload as it sends it (the pseudo
                // header's sum in the field, as DPDK's offload wants; the
                // IPv4 header's is complete).
                frame::write_udp_headers_offloaded(p, r.self, r.server, wire::header_bytes + m.bytes);
                wire::encode_header(m.h, h);
                if (m.bytes) std::memcpy(h + wire::header_bytes, m.payload, m.bytes);
                mb->l2_len = frame::eth_bytes;
                mb->l3_len = frame::ipv4_bytes;
                mb->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_UDP_CKSUM;
            } else {
                const std::uint16_t udp_sum = frame::write_udp_headers(p, r.self, r.server, wire::header_bytes + m.bytes);
                wire::encode_header(m.h, h);
                // The payload's checksum as it is copied in: one pass.
                const std::uint16_t psum = m.bytes ? frame::copy_and_sum(h + wire::header_bytes, m.payload, m.bytes) : 0;
                frame::set_udp_checksum(p, udp_sum, frame::add_sums(wire::header_sum(m.h), psum));
            }
            out[built] = mb;
        }
        unsigned leaving = built;
        if (tx_hook_) tx_hook_(ri, out, leaving, 2 * burst_max); // a lost frame was sent, as far as the worker knows
        const std::uint16_t sent = net::port_tx(r.port, 0, out, static_cast<std::uint16_t>(leaving));
        if (sent < leaving) rte_pktmbuf_free_bulk(out + sent, leaving - sent);
        return sent < leaving && !tx_hook_ ? sent : built;
    }

    unsigned recv(unsigned ri, rx_msg* out, unsigned max) noexcept override {
        if (pump_) pump_();
        rail& r = all_[ri];
        if (hook_holds_) [[unlikely]] { // what the hook held back leaves now
            rte_mbuf* late[2];
            unsigned n = 0;
            tx_hook_(ri, late, n, 2);
            const std::uint16_t sent = net::port_tx(r.port, 0, late, static_cast<std::uint16_t>(n));
            if (sent < n) rte_pktmbuf_free_bulk(late + sent, n - sent);
        }
        net::handing_over(r.held, r.nheld); // results' payloads are shared: see burst.hpp
        rte_pktmbuf_free_bulk(r.held, r.nheld);
        r.nheld = 0;
        max = std::min(max, burst_max);
        unsigned got;
        if (rx_hook_ && max) {
            // Half the room (out[] has max): the hook may add duplicates
            // and a frame it held.
            got = net::port_rx(r.port, 0, r.held, static_cast<std::uint16_t>(std::max(1u, max / 2)));
            rx_hook_(ri, r.held, got, max);
        } else {
            got = net::port_rx(r.port, 0, r.held, static_cast<std::uint16_t>(max));
        }
        unsigned n = 0;
        unsigned keep = 0;
        for (unsigned i = 0; i < got; ++i) {
            rte_mbuf* m = r.held[i];
            if (accept(r, m, out[n])) {
                ++n;
                r.held[keep++] = m; // payload stays valid until the next recv
            } else {
                rte_pktmbuf_free(m);
            }
        }
        r.nheld = keep;
        return n;
    }

private:
    struct rail {
        std::uint16_t port = 0;
        frame::endpoint self, server;
        bool resolved = false;
        bool rx_csum = false, tx_csum = false; // the port verifies / computes UDP checksums
        std::string driver;
        net::port_mtu mtu;   // what its frames carry
        unsigned if_mtu = 0; // its kernel interface's MTU (0: none, or not read)
        rte_mbuf* held[burst_max];
        unsigned nheld = 0;
    };

    // The most header and payload a message has in one mbuf, and in a
    // frame the rail's port carries.
    std::size_t mbuf_message_bytes() const noexcept {
        const std::size_t room = rte_pktmbuf_data_room_size(pool_);
        return room > RTE_PKTMBUF_HEADROOM + frame::udp_frame_overhead
                   ? room - RTE_PKTMBUF_HEADROOM - frame::udp_frame_overhead
                   : 0;
    }
    static std::size_t port_message_bytes(const rail& r) noexcept {
        unsigned mtu = r.mtu.carried;
        if (r.if_mtu) mtu = std::min(mtu, r.if_mtu);
        return mtu > frame::ipv4_bytes + frame::udp_bytes ? mtu - frame::ipv4_bytes - frame::udp_bytes : 0;
    }

    // The port's UDP checksum offloads, where it has them (or emulates
    // them: the embedded switch), as railgated's rails use them.
    void start_port(rail& r, bool emulate_offload) {
        const std::uint16_t port = r.port;
        rte_eth_conf conf{};
        rte_eth_dev_info info{};
        int rc = rte_eth_dev_info_get(port, &info);
        if (rc == 0 && (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_UDP_CKSUM)) {
            conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
            r.rx_csum = true;
        }
        constexpr std::uint64_t tx_csum = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
        if (rc == 0 && (info.tx_offload_capa & tx_csum) == tx_csum) {
            conf.txmode.offloads |= tx_csum;
            r.tx_csum = true;
        }
        if (emulate_offload) r.rx_csum = r.tx_csum = true;
        if (rc == 0) {
            r.driver = info.driver_name ? info.driver_name : "?";
            r.mtu = net::port_mtu_of(info, UINT16_MAX);
            // A port with a kernel interface behind it (af_packet, af_xdp,
            // tap) gets no frame over the interface's MTU: the kernel, or
            // the veth or bridge before it, drops it (railgated sets its
            // own rails' MTU; a worker's interface is the host's to set).
            if (!r.mtu.ifname.empty()) r.if_mtu = net::kernel_mtu(r.mtu.ifname);
        }
        rte_eth_txconf txc = info.default_txconf;
        txc.offloads = conf.txmode.offloads;
        if (rc == 0) rc = rte_eth_dev_configure(port, 1, 1, &conf);
        if (rc == 0) rc = rte_eth_rx_queue_setup(port, 0, 1024, rte_eth_dev_socket_id(port), nullptr, pool_);
        if (rc == 0) rc = rte_eth_tx_queue_setup(port, 0, 1024, rte_eth_dev_socket_id(port), &txc);
        if (rc == 0) rc = rte_eth_dev_start(port);
        if (rc != 0) throw std::runtime_error("dpdk transport: port " + std::to_string(port) + ": " + rte_strerror(-rc));
    }

    void send_arp(rail& r) noexcept {
        rte_mbuf* m = rte_pktmbuf_alloc(pool_);
        if (!m) return;
        auto* p = reinterpret_cast<std::uint8_t*>(rte_pktmbuf_append(m, frame::arp_frame_bytes));
        frame::write_arp_request(p, r.self, r.server.ip);
        if (net::port_tx(r.port, 0, &m, 1) == 0) rte_pktmbuf_free(m);
    }

    // The port's verdict on frame m's UDP checksum (its flags), or UNKNOWN
    // where the port does not verify.
    static std::uint64_t port_l4_verdict(const rail& r, const rte_mbuf* m) noexcept {
        return r.rx_csum ? m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK : RTE_MBUF_F_RX_L4_CKSUM_UNKNOWN;
    }

    // Whether frame m's UDP checksum is right: the port's verdict, or
    // checked here (both segments) where it gave none.
    static bool checksum_holds(const rail& r, const rte_mbuf* m, const std::uint8_t* p, const frame::info& fi) noexcept {
        const std::uint64_t l4 = port_l4_verdict(r, m);
        if (l4 == RTE_MBUF_F_RX_L4_CKSUM_GOOD) return true;
        if (l4 == RTE_MBUF_F_RX_L4_CKSUM_BAD) return false;
        const rte_mbuf* more = m->next;
        return frame::udp_checksum_ok(p, m->data_len, fi, more ? rte_pktmbuf_mtod(more, const std::uint8_t*) : nullptr,
                                      more ? more->data_len : 0);
    }

    bool accept(rail& r, rte_mbuf* m, rx_msg& out) noexcept {
        auto* p = rte_pktmbuf_mtod(m, std::uint8_t*);
        const frame::info fi = frame::classify(p, m->data_len, r.self, m->pkt_len);
        if (fi.k == frame::kind::arp_reply) {
            if (fi.src.ip == r.server.ip) {
                r.server.mac = fi.src.mac;
                r.resolved = true;
            }
            return false;
        }
        if (fi.k == frame::kind::arp_request) { // answer, so kernel peers can reach us
            frame::arp_reply_in_place(p, r.self);
            rte_mbuf* c = rte_pktmbuf_copy(m, pool_, 0, frame::arp_frame_bytes);
            if (c && net::port_tx(r.port, 0, &c, 1) == 0) rte_pktmbuf_free(c);
            return false;
        }
        // The railgate header must be in the first segment; the payload may
        // continue in one more (railgated's zero-copy results).
        if (fi.k != frame::kind::udp || m->nb_segs > 2 || m->data_len < fi.msg_offset + wire::header_bytes) {
            dropped_.fetch_add(1, std::memory_order_relaxed);
            return false;
        }
        // From railgated's rail only.
        if (fi.src.ip != r.server.ip || fi.src.udp_port != r.server.udp_port ||
            (p[fi.l4_offset + 6] == 0 && p[fi.l4_offset + 7] == 0)) {
            dropped_.fetch_add(1, std::memory_order_relaxed);
            return false;
        }
        std::span<const std::uint8_t> payload;
        if (const drop_reason why = wire::parse_server_message(p + fi.msg_offset, fi.l4_len, out.h, payload);
            why != drop_reason::none) {
            // Another version's, remembered only from a frame whose checksum
            // holds: a corrupted byte 0 is no version of railgated's.
            if (why == drop_reason::rg_version && checksum_holds(r, m, p, fi))
                note_foreign(p + fi.msg_offset, fi.l4_len, why);
            dropped_.fetch_add(1, std::memory_order_relaxed);
            return false;
        }
        const std::uint32_t first = std::min<std::uint32_t>(
            static_cast<std::uint32_t>(payload.size()), m->data_len - fi.msg_offset - wire::header_bytes);
        out.frag[0] = payload.data();
        out.frag_len[0] = first;
        out.frag[1] = nullptr;
        out.frag_len[1] = 0;
        out.ce = (fi.src.tos & wire::ecn_mask) == wire::ecn_ce;
        // Its UDP checksum: verified by the port (its flags), or checked as
        // the worker copies the payload out (rx_msg::copy_to): one pass
        // over it, not two.
        const std::uint64_t l4 = port_l4_verdict(r, m);
        if (l4 == RTE_MBUF_F_RX_L4_CKSUM_BAD) {
            dropped_.fetch_add(1, std::memory_order_relaxed);
            return false;
        }
        out.unchecked = l4 != RTE_MBUF_F_RX_L4_CKSUM_GOOD;
        if (out.unchecked)
            out.head_sum =
                frame::add_sums(frame::udp_header_sum(p), frame::ones_sum16(p + fi.msg_offset, wire::header_bytes));
        if (first < payload.size()) {
            if (!m->next || m->next->data_len < payload.size() - first) {
                dropped_.fetch_add(1, std::memory_order_relaxed);
                return false;
            }
            out.frag[1] = rte_pktmbuf_mtod(m->next, const std::uint8_t*);
            out.frag_len[1] = static_cast<std::uint32_t>(payload.size() - first);
        }
        return true;
    }

    rte_mempool* pool_;
    std::function<void()> pump_;
    burst_hook tx_hook_, rx_hook_;
    bool hook_holds_;
    std::vector<rail> all_;
    unsigned n_open_ = 0;
    std::atomic<std::uint64_t> dropped_{0};
};

} // namespace

std::unique_ptr<transport> make_dpdk_transport(const std::vector<dpdk_port>& ports, std::uint32_t server_ip,
                                               std::uint16_t server_port, rte_mempool* pool,
                                               std::function<void()> pump, burst_hook tx_hook, bool hook_holds,
                                               burst_hook rx_hook) {
    return std::make_unique<dpdk_transport>(ports, server_ip, server_port, pool, std::move(pump), std::move(tx_hook),
                                            hook_holds, std::move(rx_hook));
}

} // namespace railgate::client
