// What railgated's rail loop sends with (internal to dataplane/net): the
// rail's transmit burst, its traffic-class scheduler, replies built in a
// received buffer, and the fault injector's transmit side. Shared by the
// packet handlers, the rail loop and the gateway; all run on the lcore
// that serves the rail.
#pragma once

#include <cstring>
#include <string_view>

#include "dataplane/net/burst.hpp"
#include "dataplane/net/fault.hpp"
#include "dataplane/net/rail_state.hpp"
#include "dataplane/proto/parse.hpp"

namespace railgate::net::detail {

// The traffic class of a frame railgated sends: a tagged frame's VLAN PCP,
// else its IPv4 DSCP, through the rail's tables; anything else (ARP) is TC 0.
inline unsigned tc_of(const rail_state& rs, const rte_mbuf* m) noexcept {
    const auto* p = rte_pktmbuf_mtod(m, const std::uint8_t*);
    if (m->data_len < 16) return 0;
    if (p[12] == 0x81 && p[13] == 0x00) return rs.s.cfg.tc_map.from_pcp(static_cast<std::uint8_t>(p[14] >> 5));
    if (p[12] != 0x08 || p[13] != 0x00) return 0;
    return rs.s.cfg.tc_map.from_tos(p[15]);
}

// Moves what the shaper lets go now from the TC queues to the burst.
inline void drain(rail_state& rs) noexcept {
    const std::uint64_t tsc = rte_rdtsc();
    const auto now = rs.tx_time(tsc);
    while (rs.ntx < tx_cap) {
        const auto o = rs.sched->dequeue(now);
        if (!o) break;
        bump(rs.ctr.tx_bytes, o->item.m->pkt_len);
        bump(rs.ctr.tc_packets[o->tc]);
        bump(rs.ctr.tc_bytes[o->tc], o->bytes);
        (*rs.tc_wait)[o->tc].record(static_cast<std::uint64_t>(static_cast<double>(tsc - o->item.enq_tsc) * rs.ns_per_tsc));
        rs.tx[rs.ntx++] = o->item.m;
    }
}

enum class fault_side : std::uint8_t { rx = 0, tx = 1 };

// The rail's fault injector on one of its bursts, counted in its counters.
inline void inject_faults(rail_state& rs, rte_mbuf** v, unsigned& n, unsigned cap, fault_side side) noexcept {
    if (!(side == fault_side::rx ? rs.dice.current().on_rx() : rs.dice.current().on_tx())) return;
    fault_tally t;
    apply_faults(rs.dice, rs.late[static_cast<unsigned>(side)], t, v, n, cap);
    if (t.drops) bump(rs.ctr.drops[static_cast<unsigned>(drop_reason::fault_injected)], t.drops);
    if (t.dups) bump(rs.ctr.fault_dups, t.dups);
    if (t.reorders) bump(rs.ctr.fault_reorders, t.reorders);
    if (t.corrupts) bump(rs.ctr.fault_corrupts, t.corrupts);
}

// Now on the data plane's clock (net::daemon::clock_ns), for capture records.
inline std::uint64_t capture_ns(const rail_state& rs) noexcept {
    return static_cast<std::uint64_t>(static_cast<double>(rte_rdtsc()) * rs.ns_per_tsc);
}
// Copies the first snaplen bytes of m into the rail's capture ring, if
// the capture's filter selects it; a full ring counts an overrun.
inline void mirror(rail_state& rs, const rte_mbuf* m, capture_dir dir, drop_reason why, std::uint64_t ns) noexcept {
    const capture_filter& f = rs.capf;
    if (f.job && !frame_of_job(rte_pktmbuf_mtod(m, const std::uint8_t*), m->data_len, f.udp_port, *f.job)) return;
    capture_ring::record* r = rs.cap->reserve(m->pkt_len, dir, why, ns);
    if (!r) return bump(rs.ctr.capture_overruns);
    unsigned char* d = capture_ring::data(r);
    if (const void* src = rte_pktmbuf_read(m, 0, r->cap_len, d); src != d) std::memcpy(d, src, r->cap_len);
    rs.cap->commit();
    bump(rs.ctr.capture_packets);
}
// Out of line and cold, as the fault injector's path is: with capture off
// the rail loop carries only the test of rs.hooks, not this code.
[[gnu::cold, gnu::noinline]] inline void mirror_burst(rail_state& rs, rte_mbuf* const* v, unsigned n,
                                                      capture_dir dir) noexcept {
    const std::uint64_t ns = capture_ns(rs);
    for (unsigned i = 0; i < n; ++i) mirror(rs, v[i], dir, drop_reason::none, ns);
}
// A packet railgated drops (the caller frees or reuses it): counted, and
// mirrored when a capture asks for drops.
[[gnu::cold, gnu::noinline]] inline void mirror_drop(rail_state& rs, const rte_mbuf* m, drop_reason r,
                                                     capture_dir dir) noexcept {
    mirror(rs, m, dir, r, capture_ns(rs));
}
inline void count_drop(rail_state& rs, const rte_mbuf* m, drop_reason r, capture_dir dir = capture_dir::rx) noexcept {
    rs.ctr.drop(r);
    if (rs.hooks & rail_state::hook_cap_drop) [[unlikely]]
        mirror_drop(rs, m, r, dir);
}

// A udp rail's burst goes to its socket; what the kernel would not take
// is counted and freed here.
[[gnu::noinline]] inline void flush_udp(rail_state& rs) noexcept {
    if (rs.faulty) [[unlikely]] { // what the injector damaged is lost on the way (counted as fault_corrupts)
        unsigned k = 0;
        for (unsigned i = 0; i < rs.ntx; ++i)
            if (udp_port::intact(rs.tx[i])) rs.tx[k++] = rs.tx[i];
            else rte_pktmbuf_free(rs.tx[i]);
        rs.ntx = k;
    }
    rte_mbuf* failed[tx_cap];
    drop_reason why[tx_cap];
    const unsigned nf = rs.s.udp->tx(rs.tx, rs.ntx, rs.s.self, failed, why);
    for (unsigned i = 0; i < nf; ++i) {
        count_drop(rs, failed[i], why[i], capture_dir::tx);
        rte_pktmbuf_free(failed[i]);
    }
    bump(rs.ctr.tx_packets, rs.ntx - nf);
    rs.ntx = 0;
}

inline void flush(rail_state& rs) noexcept {
    if (rs.hooks) [[unlikely]] {
        if (rs.faulty) inject_faults(rs, rs.tx, rs.ntx, tx_cap, fault_side::tx);
        // What goes to the port (a frame it then refuses is also a tx_full drop).
        if (rs.hooks & rail_state::hook_cap_tx) mirror_burst(rs, rs.tx, rs.ntx, capture_dir::tx);
    }
    if (rs.s.udp) {
        if (rs.ntx) flush_udp(rs);
        return;
    }
    unsigned sent = 0;
    for (unsigned tries = 0; sent < rs.ntx && tries < tx_retries; ++tries)
        sent += port_tx(rs.s.port, 0, rs.tx + sent, static_cast<std::uint16_t>(rs.ntx - sent));
    for (unsigned i = sent; i < rs.ntx; ++i) {
        count_drop(rs, rs.tx[i], drop_reason::tx_full, capture_dir::tx);
        rte_pktmbuf_free(rs.tx[i]);
    }
    bump(rs.ctr.tx_packets, sent);
    rs.ntx = 0;
}

// Where queue_tx put a frame: on a shaped rail, its traffic class's queue
// and the scheduler's ticket for it (qos::scheduler::holds); ticket 0 when
// it left at once (no shaping) or was dropped.
struct tx_place {
    std::uint8_t tc = 0;
    std::uint32_t ticket = 0;
};

inline tx_place queue_tx(rail_state& rs, rte_mbuf* m) noexcept {
    if (rs.sched) {
        // Ethernet preamble, FCS and gap count against the rate (24 bytes).
        const unsigned tc = tc_of(rs, m);
        // A standing queue: ECN-capable frames join it marked CE.
        if (rs.sched->marks(tc) && frame::mark_ce(rte_pktmbuf_mtod(m, std::uint8_t*), m->data_len))
            bump(rs.ctr.ecn_marked);
        if (!rs.sched->enqueue(tc, {m, rte_rdtsc()}, m->pkt_len + 24)) {
            count_drop(rs, m, drop_reason::tc_queue_full, capture_dir::tx);
            bump(rs.ctr.tc_drops[tc]);
            rte_pktmbuf_free(m);
            return {};
        }
        return {static_cast<std::uint8_t>(tc), rs.sched->ticket(tc)};
    }
    if (rs.ntx == tx_cap) flush(rs);
    bump(rs.ctr.tx_bytes, m->pkt_len);
    rs.tx[rs.ntx++] = m;
    return {};
}

inline void free_drop(rail_state& rs, rte_mbuf* m, drop_reason r) noexcept {
    count_drop(rs, m, r);
    rte_pktmbuf_free(m);
}

// Resets m to hold one UDP datagram of msg_len bytes to `dst`; returns the
// message area or nullptr when the buffer is too small. The caller fills
// the message and then the UDP checksum (send_udp).
inline std::uint8_t* reuse_as_reply(rail_state& rs, rte_mbuf* m, const frame::endpoint& dst, std::size_t msg_len,
                                    std::uint16_t* header_sum = nullptr, bool offload_udp = false) noexcept {
    const std::size_t len = frame::udp_frame_overhead + msg_len;
    if (m->buf_len < RTE_PKTMBUF_HEADROOM + len) return nullptr;
    if (m->nb_segs > 1) {
        rte_pktmbuf_free(m->next);
        m->next = nullptr;
        m->nb_segs = 1;
    }
    m->data_off = RTE_PKTMBUF_HEADROOM;
    m->data_len = static_cast<std::uint16_t>(len);
    m->pkt_len = static_cast<std::uint32_t>(len);
    m->ol_flags = 0;
    std::uint8_t* p = rte_pktmbuf_mtod(m, std::uint8_t*);
    if (offload_udp) {
        frame::write_udp_headers_offloaded(p, rs.s.self, dst, msg_len);
        return p + frame::udp_frame_overhead;
    }
    const std::uint16_t hs = frame::write_udp_headers(p, rs.s.self, dst, msg_len);
    if (header_sum) *header_sum = hs;
    return p + frame::udp_frame_overhead;
}

// A one-segment datagram built by reuse_as_reply, its message written:
// checksummed and queued.
inline void send_udp(rail_state& rs, rte_mbuf* m) noexcept {
    frame::fill_udp_checksum(rte_pktmbuf_mtod(m, std::uint8_t*));
    queue_tx(rs, m);
}

// An ERROR about request `req` to `dst`, built in m (a received buffer, or
// a new one): `code` in aux, `detail` in offset (a rank, or rails), the job
// instance (or what the worker asked with) in gen, and `text` as the reason
// (at most wire::max_error_text bytes).
inline void send_error(rail_state& rs, rte_mbuf* m, const frame::endpoint& dst, const wire::header& req,
                       wire::error_code code, std::string_view text, std::uint64_t detail = 0,
                       std::uint32_t gen = 0) noexcept {
    text = wire::error_text(text, code);
    std::uint8_t* msg = reuse_as_reply(rs, m, dst, wire::header_bytes + text.size());
    if (!msg) return free_drop(rs, m, drop_reason::no_mbuf);
    wire::encode_header(wire::error_header(req, code, detail, gen), msg);
    std::memcpy(msg + wire::header_bytes, text.data(), text.size());
    send_udp(rs, m);
}

} // namespace railgate::net::detail
