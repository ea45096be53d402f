// railgated's ports and their kernel side: opening, configuring and
// starting a rail's DPDK port with its pools on the NIC's NUMA node, the
// lcore placement, XDP steering on af_xdp rails, addresses and MTUs of the
// kernel interfaces behind tap/af_packet ports, link monitoring, and
// closing it all.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "dataplane/engine/placement.hpp"
#include "dataplane/net/daemon_impl.hpp"
#include "dataplane/net/eal.hpp"
#include "dataplane/net/kernel_if.hpp"
#include "dataplane/net/port_mtu.hpp"
#include "dataplane/net/topology.hpp"
#include "dataplane/log/log.hpp"

namespace railgate::net {
using namespace detail;

namespace detail {

// The rte_device of a port name, for hot-unplug (before the port closes).
rte_device* device_of(const std::string& name) {
    std::uint16_t port;
    rte_eth_dev_info info;
    if (rte_eth_dev_get_port_by_name(name.c_str(), &port) == 0 && rte_eth_dev_info_get(port, &info) == 0)
        return info.device;
    return nullptr;
}

// Sets the port's MTU from its own lcore, between bursts.
std::string apply_port_mtu(rail_static& st, std::uint16_t mtu) noexcept {
    if (st.udp) {
        // Datagrams too big for the route are refused by the kernel, each
        // counted (udp_rail_refused): nothing to set.
    } else if (mtu <= st.pmd_max_mtu) {
        const int rc = rte_eth_dev_set_mtu(st.port, mtu);
        if (rc < 0 && rc != -ENOTSUP) return std::string("set MTU: ") + rte_strerror(-rc);
    } else if (st.ifname.empty()) {
        return st.driver + " takes MTU up to " + std::to_string(st.pmd_max_mtu);
    } else if (std::string e = set_kernel_mtu(st.ifname, mtu); !e.empty()) {
        return e;
    }
    // A veth's peer takes what its port end sends only up to its own MTU.
    if (!st.cfg.host_if.empty())
        if (std::string e = set_kernel_mtu(st.cfg.host_if, mtu); !e.empty()) return e;
    st.mtu_now.store(mtu, std::memory_order_relaxed);
    return {};
}

bool link_is_up(const rail_static& rs) noexcept {
    if (!rs.ifname.empty()) {
        // The kernel interface behind the port (tap, af_packet, af_xdp):
        // its carrier, which a peer going down (a veth's other end, a
        // cable) clears. An interface that is down has no carrier to read.
        std::ifstream f("/sys/class/net/" + rs.ifname + "/carrier");
        int carrier = 0;
        return f && (f >> carrier) && carrier == 1;
    }
    if (rs.udp) return true; // the address is on no interface railgated could watch
    rte_eth_link link{};
    if (rte_eth_link_get_nowait(rs.port, &link) != 0) return true; // cannot tell: assume up
    return link.link_status == RTE_ETH_LINK_UP;
}

void close_port(rail_static& rs) noexcept {
    if (rs.cfg.udp) {
        rs.udp.reset(); // its spare mbufs go back to the pool
        rs.udp_address.reset();
        return;
    }
    rte_eth_dev_stop(rs.port);
    rte_eth_dev_close(rs.port);
}

void drain_ring(rail_static& rs) noexcept {
    rte_mbuf* m;
    while (rs.fwd && ring_get(rs.fwd, &m, 1)) rte_pktmbuf_free(m);
}

// A closed rail's ring and pools. Rings hold other rails' mbufs: drain
// every ring before freeing any pool.
void free_memory(rail_static& rs) noexcept {
    rs.udp.reset(); // its spare mbufs go back to the pool first
    drain_ring(rs);
    rte_ring_free(rs.fwd);
    rte_mempool_free(rs.pool);
    rte_mempool_free(rs.hdr_pool);
    rs.fwd = nullptr;
    rs.pool = rs.hdr_pool = nullptr;
}

} // namespace detail

void daemon::impl::open_ports() {
    rails.reserve(wire::max_rails * 2); // rails added later never move the others
    for (std::size_t i = 0; i < cfg.rails.size(); ++i) rails.push_back(open_rail(i, cfg.rails[i]));
    ports_open = true;
    rebuild_ack();
}

// Opens, configures and starts one rail's port, with its pools.
std::unique_ptr<rail_static> daemon::impl::open_rail(std::size_t i, const rail_config& rcfg) {
    auto rs = std::make_unique<rail_static>();
    rs->cfg = rcfg;
    const std::string where = "rail " + rs->cfg.name + ": ";
    if (rs->cfg.udp) return open_udp_rail(i, std::move(rs));
    std::uint16_t port;
    if (rs->cfg.port_id >= 0) {
        port = static_cast<std::uint16_t>(rs->cfg.port_id);
        if (!rte_eth_dev_is_valid_port(port)) throw std::runtime_error(where + "invalid port id");
    } else if (rte_eth_dev_get_port_by_name(rs->cfg.port_name.c_str(), &port) != 0) {
        throw std::runtime_error(where + "no DPDK port named " + rs->cfg.port_name);
    }
    rs->port = port;
    rte_eth_dev_info info;
    if (rte_eth_dev_info_get(port, &info) != 0) throw std::runtime_error(where + "cannot read device info");
    rs->driver = info.driver_name ? info.driver_name : "?";
    rs->device = info.device;
    rs->socket = rs->cfg.numa >= 0 ? rs->cfg.numa : port_numa_node(port);
    // Some vdevs report a fixed 1518-byte max frame (af_packet in 22.11)
    // although they carry what the kernel interface carries (af_packet
    // with a large framesz). Others mean it (tap's TX refuses more).
    const port_mtu pm = port_mtu_of(info, rs->cfg.mtu);
    const std::uint32_t pmd_mtu = pm.pmd;
    const std::uint32_t carry_max = std::min<std::uint32_t>(wire::max_mtu, pm.carried);
    if (rs->cfg.mtu > carry_max)
        throw std::runtime_error(where + "MTU " + std::to_string(rs->cfg.mtu) + " is more than " + rs->driver +
                                 " carries (" + std::to_string(carry_max) + ")" +
                                 (pm.framesz ? " " + pm.frames() + ": " + pm.advice(rs->cfg.mtu) : ""));
    rs->cfg.mtu_max = static_cast<std::uint16_t>(
        std::clamp<std::uint32_t>(rs->cfg.mtu_max ? rs->cfg.mtu_max : rs->cfg.mtu, rs->cfg.mtu, carry_max));
    rs->chunk_bytes = wire::chunk_bytes_for_mtu(rs->cfg.mtu);

    make_pools(i, *rs);
    const int sock = rs->socket < 0 ? static_cast<int>(SOCKET_ID_ANY) : rs->socket;

    rte_eth_conf conf{};
    // Beyond the stated limit (af_packet): configure the ethdev within
    // it and keep the rail MTU for railgate's own chunking.
    const bool mtu_beyond_pmd = rs->cfg.mtu > pmd_mtu;
    rs->pmd_max_mtu = pmd_mtu;
    conf.rxmode.mtu = mtu_beyond_pmd ? pmd_mtu : rs->cfg.mtu;
    if (mtu_beyond_pmd)
        log::warning("rail %s: %s states max MTU %u; using MTU %u as set on the "
                     "kernel interface",
                     rs->cfg.name.c_str(), rs->driver.c_str(), pmd_mtu, rs->cfg.mtu);
    // net_ring passes mbuf pointers through untouched, so chains are fine
    // there even though it does not advertise the offload.
    rs->multiseg_tx = (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) || rs->driver == "net_ring";
    if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
        conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
    // A port that verifies UDP checksums says so in each mbuf's flags;
    // elsewhere the rail loop verifies them itself.
    if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_UDP_CKSUM) {
        conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
        rs->rx_udp_cksum = true;
    }
    // And one that computes them leaves the results' to the NIC (no pass
    // over the result in software).
    constexpr std::uint64_t tx_csum = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
    if ((info.tx_offload_capa & tx_csum) == tx_csum) {
        conf.txmode.offloads |= tx_csum;
        rs->tx_udp_cksum = true;
    }
    if (rcfg.emulate_checksum_offload) rs->rx_udp_cksum = rs->tx_udp_cksum = true;
    int rc = rte_eth_dev_configure(port, 1, 1, &conf);
    if (rc < 0) throw std::runtime_error(where + "configure: " + rte_strerror(-rc));
    std::uint16_t nrx = static_cast<std::uint16_t>(cfg.rx_desc), ntx = static_cast<std::uint16_t>(cfg.tx_desc);
    rte_eth_dev_adjust_nb_rx_tx_desc(port, &nrx, &ntx);
    rc = rte_eth_rx_queue_setup(port, 0, nrx, static_cast<unsigned>(sock), nullptr, rs->pool);
    if (rc < 0) throw std::runtime_error(where + "rx queue: " + rte_strerror(-rc));
    rte_eth_txconf txc = info.default_txconf;
    txc.offloads = conf.txmode.offloads;
    rc = rte_eth_tx_queue_setup(port, 0, ntx, static_cast<unsigned>(sock), &txc);
    if (rc < 0) throw std::runtime_error(where + "tx queue: " + rte_strerror(-rc));
    rc = mtu_beyond_pmd ? 0 : rte_eth_dev_set_mtu(port, rs->cfg.mtu);
    if (rc < 0 && rc != -ENOTSUP)
        throw std::runtime_error(where + "mtu " + std::to_string(rs->cfg.mtu) + ": " + rte_strerror(-rc));
    rc = rte_eth_dev_start(port);
    if (rc < 0) throw std::runtime_error(where + "start: " + rte_strerror(-rc));
    if (info.if_index) {
        char name[IF_NAMESIZE] = {};
        if (if_indextoname(info.if_index, name)) rs->ifname = name;
    }
    // Beyond the PMD's stated limit the kernel interface carries the rail
    // (af_packet): it is given the rail's MTU, as `rail set ... mtu` gives
    // it. Trusted as found, an interface a removed rail had lowered kept
    // its MTU under the rail added on it again: every frame above it was
    // dropped by the kernel, unseen (live_changes.sh seed 3: a job's
    // contributions on a re-added rail at MTU 9000 over a veth left at
    // 1500, sent again for 60 s while its small PINGs were answered).
    if (mtu_beyond_pmd) {
        if (rs->ifname.empty())
            throw std::runtime_error(where + rs->driver + " states max MTU " + std::to_string(pmd_mtu) +
                                     " and has no kernel interface to carry MTU " + std::to_string(rs->cfg.mtu));
        if (std::string e = set_kernel_mtu(rs->ifname, rs->cfg.mtu); !e.empty()) throw std::runtime_error(where + e);
    }
    if (rs->driver == "net_af_xdp" && info.if_index) attach_steering(*rs, info.if_index);
    if (rs->cfg.host_ip) {
        const std::string& host_if = rs->cfg.host_if.empty() ? rs->ifname : rs->cfg.host_if;
        if (host_if.empty())
            throw std::runtime_error(where + "host_ip needs a port with a kernel interface (tap) or a veth_peer");
        if (const std::string e = set_kernel_address(host_if, rs->cfg.host_ip, rs->cfg.host_prefix); !e.empty())
            throw std::runtime_error(where + e);
    }
    rte_ether_addr mac;
    rte_eth_macaddr_get(port, &mac);
    std::memcpy(rs->self.mac.b, mac.addr_bytes, 6);
    finish_rail(*rs);
    return rs;
}

// What every rail's port starts with: its MTU, who it is on the wire (its
// MAC set), the fault injector, the link, and the mbufs the port holds.
void daemon::impl::finish_rail(rail_static& rs) {
    rs.mtu_now.store(rs.cfg.mtu);
    rs.mtu_target.store(rs.cfg.mtu);
    rs.self.ip = rs.cfg.ip;
    rs.self.udp_port = rs.cfg.udp_port;
    rs.self.tos = static_cast<std::uint8_t>(rs.cfg.traffic_class);
    rs.fault_spec = cfg.fault;
    rs.link_up.store(link_is_up(rs));
    rs.pool_baseline = rte_mempool_in_use_count(rs.pool);
}

// A rail's pools (on its NIC's NUMA node) and its forwarding ring.
void daemon::impl::make_pools(std::size_t i, rail_static& rs) {
    // Jumbo rails get 1 KiB of slack so that kernel-backed PMDs with a
    // frame size rounded up (af_packet framesz=10240) still fit one mbuf.
    const unsigned frame = rs.cfg.mtu_max + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
    const unsigned room = RTE_PKTMBUF_HEADROOM + (frame <= 2048 ? 2048 : RTE_ALIGN_CEIL(frame + 1024, 1024));
    const int sock = rs.socket < 0 ? static_cast<int>(SOCKET_ID_ANY) : rs.socket;
    // On the NIC's node; where that node has no EAL memory (a --numa
    // override, a node without hugepages) anywhere, with a warning.
    auto pool_on_node = [&](const std::string& name, unsigned n, unsigned data_room) {
        try {
            return make_pktmbuf_pool(name, n, data_room, sock);
        } catch (const std::runtime_error& e) {
            if (sock == static_cast<int>(SOCKET_ID_ANY)) throw;
            log::warning("rail %s: %s on NUMA node %d; allocating on any node",
                         rs.cfg.name.c_str(), e.what(), sock);
            return make_pktmbuf_pool(name, n, data_room, SOCKET_ID_ANY);
        }
    };
    // What was made before a failure is freed: a daemon made again in the
    // same process (railbench, the tests) takes the same pool names.
    try {
        rs.pool = pool_on_node("rg_pool_" + std::to_string(i), cfg.mbufs_per_rail, room);
        rs.hdr_pool = pool_on_node("rg_hdr_" + std::to_string(i), cfg.mbufs_per_rail * 2, RTE_PKTMBUF_HEADROOM + 128);
        static std::atomic<unsigned> rings{0}; // names stay unique across daemons in one process
        const std::string ring = "rg_fwd_" + std::to_string(rings++);
        rs.fwd = rte_ring_create(ring.c_str(), 1024, sock, RING_F_SC_DEQ);
        if (!rs.fwd && sock != static_cast<int>(SOCKET_ID_ANY)) { // as the pools
            log::warning("rail %s: forward ring: %s on NUMA node %d; allocating on any node", rs.cfg.name.c_str(),
                         rte_strerror(rte_errno), sock);
            rs.fwd = rte_ring_create(ring.c_str(), 1024, SOCKET_ID_ANY, RING_F_SC_DEQ);
        }
        if (!rs.fwd) throw std::runtime_error("rail " + rs.cfg.name + ": forward ring: " + rte_strerror(rte_errno));
    } catch (...) {
        free_memory(rs);
        throw;
    }
}

// A udp rail: the kernel's socket on the rail's address is its port.
std::unique_ptr<rail_static> daemon::impl::open_udp_rail(std::size_t i, std::unique_ptr<rail_static> rs) {
    const std::string where = "rail " + rs->cfg.name + ": ";
    rs->driver = "udp";
    rs->cfg.port_name = "socket"; // what status shows for its device
    rs->socket = rs->cfg.numa;
    rs->pmd_max_mtu = wire::max_mtu;
    rs->cfg.mtu_max = static_cast<std::uint16_t>(
        std::clamp<std::uint32_t>(rs->cfg.mtu_max ? rs->cfg.mtu_max : rs->cfg.mtu, rs->cfg.mtu, wire::max_mtu));
    rs->chunk_bytes = wire::chunk_bytes_for_mtu(rs->cfg.mtu);
    make_pools(i, *rs);
    // The kernel checks received checksums and fills sent ones; a chained
    // result goes as an iovec per segment.
    rs->rx_udp_cksum = rs->tx_udp_cksum = rs->multiseg_tx = true;
    try {
        if (!rs->cfg.udp_interface.empty())
            rs->udp_address = std::make_unique<local_address>(rs->cfg.ip, rs->cfg.udp_interface);
        // Room for a receive ring's worth of full frames, as a port has.
        const unsigned frame = rs->cfg.mtu_max + frame::udp_frame_overhead;
        rs->udp = std::make_unique<udp_port>(rs->cfg.ip, rs->cfg.udp_port,
                                             std::max(4u << 20, cfg.rx_desc * frame * 2), tx_cap);
    } catch (const std::runtime_error& e) {
        free_memory(*rs);
        throw std::runtime_error(where + e.what());
    }
    rs->ifname = interface_with(rs->cfg.ip);
    // Datagrams larger than the interface carries would be refused, each.
    if (unsigned if_mtu = 0; !rs->ifname.empty() && (std::ifstream("/sys/class/net/" + rs->ifname + "/mtu") >> if_mtu) &&
                             if_mtu < rs->cfg.mtu)
        log::warning("rail %s: MTU %u, but %s carries %u: larger results are refused (udp_rail_refused); lower the "
                     "rail's MTU or raise the interface's",
                     rs->cfg.name.c_str(), rs->cfg.mtu, rs->ifname.c_str(), if_mtu);
    // No wire: a locally administered MAC made of the address.
    rs->self.mac.b[0] = 0x02;
    for (unsigned k = 0; k < 4; ++k) rs->self.mac.b[2 + k] = static_cast<std::uint8_t>(rs->cfg.ip >> (24 - 8 * k));
    finish_rail(*rs);
    return rs;
}

// The af_xdp PMD attached an XDP program when the rx queue was set up. If
// it is railgate's, point it at this rail: from now on only railgate
// packets reach the socket, and the kernel keeps ARP, ICMP and host traffic
// for the address, which it must therefore own.
void daemon::impl::attach_steering(rail_static& rs, unsigned ifindex) {
    rs.steering = xdp::attached::find(ifindex);
    if (!rs.steering) return;
    rs.steering->program_maps().configure(rs.cfg.ip, rs.cfg.udp_port, wire::protocol_version);
    if (interface_with(rs.cfg.ip) != rs.ifname)
        log::warning("rail %s: XDP steering leaves ARP to the kernel, but %s does not "
                     "own %s; add it (ip addr add %s/N dev %s) or workers cannot resolve the rail",
                     rs.cfg.name.c_str(), rs.ifname.c_str(), format_ipv4(rs.cfg.ip).c_str(),
                     format_ipv4(rs.cfg.ip).c_str(), rs.ifname.c_str());
}

// Chooses the lcore of one rail among `candidates` (engine::place: its
// override, else the least loaded on its NIC's NUMA node; never another
// node silently) and counts it in `load`.
unsigned daemon::impl::place_rail(rail_static& rs, const std::vector<unsigned>& candidates,
                                  std::vector<unsigned>& load) {
    std::vector<engine::cpu_slot> slots;
    for (unsigned l : candidates) slots.push_back({l, static_cast<int>(rte_lcore_to_socket_id(l))});
    // The loads so far, as rails already placed on those lcores.
    std::vector<engine::rail_need> needs;
    for (unsigned l : candidates)
        for (unsigned i = 0; i < load[l]; ++i) needs.push_back({"(placed)", -1, static_cast<int>(l)});
    needs.push_back({rs.cfg.name, rs.socket, rs.cfg.lcore});
    std::vector<engine::rail_place> out;
    if (rs.cfg.lcore >= 0 &&
        std::find(candidates.begin(), candidates.end(), static_cast<unsigned>(rs.cfg.lcore)) == candidates.end())
        throw std::runtime_error("rail " + rs.cfg.name + ": lcore " + std::to_string(rs.cfg.lcore) +
                                 " is not a worker lcore serving rails");
    if (std::string e = engine::place(slots, needs, out); !e.empty()) throw std::runtime_error(e);
    const engine::rail_place& p = out.back();
    if (!p.warning.empty()) log::warning("%s", p.warning.c_str());
    rs.lcore = p.cpu;
    ++load[rs.lcore];
    return rs.lcore;
}

void daemon::impl::place() {
    std::vector<unsigned> workers;
    unsigned l;
    RTE_LCORE_FOREACH_WORKER(l) workers.push_back(l);
    if (workers.empty()) throw std::runtime_error("no worker lcore: give EAL at least 2 lcores (-l 0-1)");
    std::vector<unsigned> load(RTE_MAX_LCORE, 0);
    for (auto& rs : rails) {
        const unsigned lc = place_rail(*rs, workers, load);
        if (std::find(lcores.begin(), lcores.end(), lc) == lcores.end()) lcores.push_back(lc);
    }
}

void daemon::impl::close_all() noexcept {
    for (auto& rs : rails)
        if (!rs->closed) {
            close_port(*rs);
            rs->closed = true;
        }
    for (auto& rs : rails) drain_ring(*rs);
    for (auto& rs : rails) free_memory(*rs);
}

} // namespace railgate::net
