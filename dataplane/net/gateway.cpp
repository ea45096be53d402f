// Gateway forwarding: datagrams for other addresses routed between rails
// (daemon.hpp's route_config), their next hops resolved by ARP, and the
// ICMP errors a router sends.
#include "dataplane/net/gateway.hpp"

#include <cstring>
#include <optional>

namespace railgate::net::detail {
namespace {

std::uint32_t be32_at(const std::uint8_t* p) noexcept {
    return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | p[3];
}

// An ICMP error about the datagram in m, back on the rail it came in by, to
// the neighbour that sent it. At most one per millisecond per rail.
void send_icmp_error(rail_state& rs, const rte_mbuf* m, const frame::info& fi, std::uint8_t type,
                     std::uint8_t code, std::uint16_t mtu) noexcept {
    if (fi.l3_offset != frame::eth_bytes) return; // tagged: the VLAN is not ours to answer in
    const std::uint64_t now = rs.burst_tsc;
    if (now - rs.icmp_tsc < rte_get_tsc_hz() / 1000) return;
    rte_mbuf* e = rte_pktmbuf_alloc(rs.s.pool);
    if (!e) return rs.ctr.drop(drop_reason::no_mbuf);
    const auto* p = rte_pktmbuf_mtod(m, const std::uint8_t*);
    frame::mac_addr to;
    std::memcpy(to.b, p + 6, 6);
    auto* o = reinterpret_cast<std::uint8_t*>(rte_pktmbuf_append(e, frame::icmp_error_max));
    const std::size_t len = frame::write_icmp_error(o, rs.s.self, to, p + fi.l3_offset, m->data_len - fi.l3_offset,
                                                    type, code, mtu);
    if (!len) {
        rte_pktmbuf_free(e);
        return;
    }
    rte_pktmbuf_trim(e, static_cast<std::uint16_t>(frame::icmp_error_max - len));
    rs.icmp_tsc = now;
    bump(rs.ctr.icmp_errors);
    queue_tx(rs, e);
}

// A routed datagram leaves: Ethernet addresses rewritten (a VLAN tag stays).
void send_routed(rail_state& rs, rte_mbuf* m, const frame::mac_addr& to) noexcept {
    auto* p = rte_pktmbuf_mtod(m, std::uint8_t*);
    std::memcpy(p, to.b, 6);
    std::memcpy(p + 6, rs.s.self.mac.b, 6);
    bump(rs.ctr.fwd_packets);
    bump(rs.ctr.fwd_bytes, m->pkt_len);
    queue_tx(rs, m);
}

void ask_neighbour(rail_state& rs, neighbour_table::entry& e, std::uint64_t tsc) noexcept {
    e.asks = static_cast<std::uint8_t>(e.asks + 1);
    e.asked_tsc = tsc;
    rte_mbuf* m = rte_pktmbuf_alloc(rs.s.pool);
    if (!m) return rs.ctr.drop(drop_reason::no_mbuf);
    frame::write_arp_request(reinterpret_cast<std::uint8_t*>(rte_pktmbuf_append(m, frame::arp_frame_bytes)), rs.s.self,
                             e.ip);
    bump(rs.ctr.arp_requests);
    queue_tx(rs, m);
}

// A routed datagram on its out rail: sent to its next hop's MAC, or held
// while ARP resolves it.
void forward_out(rail_state& rs, rte_mbuf* m, std::uint64_t tsc) noexcept {
    neighbour_table::entry* e = rs.neigh.get(m->hash.usr);
    if (!e) return free_drop(rs, m, drop_reason::neighbour_unresolved);
    if (e->resolved && tsc - e->confirmed_tsc > rs.neigh.reachable_tsc && tsc - e->asked_tsc >= rte_get_tsc_hz()) {
        if (e->asks < neighbour_table::max_asks) {
            ask_neighbour(rs, *e, tsc); // stale: confirm it
        } else {
            e->resolved = false; // it stopped answering: resolve afresh
            e->asks = 0;
        }
    }
    if (e->resolved) return send_routed(rs, m, e->mac);
    if (e->nheld == neighbour_table::hold) return free_drop(rs, m, drop_reason::neighbour_unresolved);
    if (e->nheld++ == 0) ++rs.neigh.waiting;
    e->held[e->nheld - 1] = m;
    if (e->asks == 0) ask_neighbour(rs, *e, tsc);
}

// Asks again for next hops that have not answered in a second, and gives
// up on them (dropping what waits) after max_asks. Every 10 ms at most.
void neighbour_timers(rail_state& rs, std::uint64_t tsc) noexcept {
    const std::uint64_t hz = rte_get_tsc_hz();
    if (!rs.neigh.waiting || tsc - rs.neigh.swept_tsc < hz / 100) return;
    rs.neigh.swept_tsc = tsc;
    for (neighbour_table::entry& e : rs.neigh.e) {
        if (!e.nheld || tsc - e.asked_tsc < hz) continue;
        if (e.asks < neighbour_table::max_asks) {
            ask_neighbour(rs, e, tsc);
            continue;
        }
        for (unsigned i = 0; i < e.nheld; ++i) free_drop(rs, e.held[i], drop_reason::neighbour_unresolved);
        e.nheld = 0;
        e.asks = 0;
        --rs.neigh.waiting;
    }
}

} // namespace

// A datagram for another address, received on rs: looked up, its TTL
// decremented, and handed to the out rail's lcore with its next hop.
void route(rail_state& rs, rte_mbuf* m, const frame::info& fi) noexcept {
    if (!rs.routes) return free_drop(rs, m, drop_reason::ip_not_ours);
    std::uint8_t* ip = rte_pktmbuf_mtod(m, std::uint8_t*) + fi.l3_offset;
    const std::uint32_t dst = be32_at(ip + 16);
    const std::optional<std::uint32_t> h = rs.routes->table.lookup(dst);
    if (!h) {
        send_icmp_error(rs, m, fi, 3, 0, 0); // network unreachable
        return free_drop(rs, m, drop_reason::no_route);
    }
    const fib::hop& hop = rs.routes->hops[*h];
    if (ip[8] <= 1) {
        send_icmp_error(rs, m, fi, 11, 0, 0);
        return free_drop(rs, m, drop_reason::ttl_expired);
    }
    const std::uint16_t mtu = hop.out->mtu_now.load(std::memory_order_relaxed);
    if (fi.l4_len > mtu) {
        if (ip[6] & 0x40) send_icmp_error(rs, m, fi, 3, 4, mtu); // DF: fragmentation needed
        return free_drop(rs, m, drop_reason::fwd_too_big);
    }
    // TTL - 1, and the checksum updated for it (RFC 1624: HC' = ~(~HC + ~m + m')).
    const std::uint16_t old_word = static_cast<std::uint16_t>(ip[8] << 8 | ip[9]);
    --ip[8];
    const std::uint16_t new_word = static_cast<std::uint16_t>(ip[8] << 8 | ip[9]);
    std::uint32_t sum = static_cast<std::uint16_t>(~(ip[10] << 8 | ip[11])) + static_cast<std::uint16_t>(~old_word) + new_word;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    const auto ck = static_cast<std::uint16_t>(~sum);
    ip[10] = static_cast<std::uint8_t>(ck >> 8);
    ip[11] = static_cast<std::uint8_t>(ck);
    // Ethernet padding of a short frame does not travel on.
    const std::uint32_t frame_len = fi.l3_offset + fi.l4_len;
    if (m->pkt_len > frame_len) rte_pktmbuf_trim(m, static_cast<std::uint16_t>(m->pkt_len - frame_len));
    m->hash.usr = hop.via ? hop.via : dst;
    counter* c = rs.routes->hit(rs.lcore_slot, *h);
    bump(c[0]);
    bump(c[1], m->pkt_len);
    rs.out[rs.nrouted++] = {hop.out, m};
}

// What ARP says of ip (a request to us, or a reply): entries that exist are
// updated, and frames waiting for it leave. `make`: learn it if new.
void learn_neighbour(rail_state& rs, std::uint32_t ip, const frame::mac_addr& mac, bool make) noexcept {
    neighbour_table::entry* e = make ? rs.neigh.get(ip) : rs.neigh.find(ip);
    if (!e) return;
    if (!e->resolved) bump(rs.ctr.neighbours);
    e->mac = mac;
    e->resolved = true;
    e->asks = 0;
    e->confirmed_tsc = rte_rdtsc();
    if (!e->nheld) return;
    for (unsigned i = 0; i < e->nheld; ++i) send_routed(rs, e->held[i], mac);
    e->nheld = 0;
    --rs.neigh.waiting;
}

// Hands the burst's routed datagrams to their out rails: directly when this
// lcore serves the out rail too, else through its ring, one bulk enqueue
// per ring.
void flush_routed(rail_state& rs) noexcept {
    rte_mbuf* batch[rx_burst];
    const std::uint64_t tsc = rs.burst_tsc;
    for (unsigned i = 0; i < rs.nrouted; ++i) {
        rail_static* out = rs.out[i].out;
        if (!out) continue;
        const bool local = out->lcore == rs.s.lcore && out->served_by;
        unsigned n = 0;
        for (unsigned j = i; j < rs.nrouted; ++j)
            if (rs.out[j].out == out) {
                if (local) forward_out(*out->served_by, rs.out[j].m, tsc);
                else batch[n++] = rs.out[j].m;
                rs.out[j].out = nullptr;
            }
        if (local) continue;
        // Another lcore serves it: through its forward ring (ring_put marks
        // the hand-over for TSan, as port_tx does).
        const unsigned put = ring_put(out->fwd, batch, n);
        for (unsigned k = put; k < n; ++k) free_drop(rs, batch[k], drop_reason::fwd_queue_full);
    }
    rs.nrouted = 0;
}

// Datagrams other lcores (or this one) routed out of this rail.
bool pull_routed(rail_state& rs) noexcept {
    rte_mbuf* in[rx_burst];
    const unsigned n = ring_get(rs.s.fwd, in, rx_burst);
    if (n == 0 && !rs.neigh.waiting) return false; // the idle pass reads no clock
    const std::uint64_t tsc = rte_rdtsc();
    for (unsigned i = 0; i < n; ++i) forward_out(rs, in[i], tsc);
    neighbour_timers(rs, tsc);
    return n != 0;
}

} // namespace railgate::net::detail
