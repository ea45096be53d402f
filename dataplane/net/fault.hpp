// The fault injector on bursts of mbufs: railgated's rails (--fault,
// railctl fault) and railbench --embedded's virtual switch. The decisions
// come from seeded dice (dataplane/fault/injector.hpp); this applies them.
// Callers run it only when their injector is on.
#pragma once

#include <algorithm>
#include <cstdint>

#include <rte_mbuf.h>

#include "dataplane/fault/injector.hpp"
#include "dataplane/proto/frame.hpp"
#include "dataplane/proto/parse.hpp"

namespace railgate::net {

// What one application of the injector did.
struct fault_tally {
    std::uint64_t drops = 0, dups = 0, reorders = 0, corrupts = 0;
};

inline constexpr unsigned fault_max_burst = 1024;

// A corrupted frame is corrupted on the wire, as far as checksums go: one
// whose checksums the port was to compute (TX offload) gets them in
// software first, so that the receiver sees the damage; one the port had
// verified (RX offload) loses that verdict, so that railgated checks it.
inline void before_corruption(rte_mbuf* m) noexcept {
    if ((m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_GOOD)
        m->ol_flags &= ~RTE_MBUF_F_RX_L4_CKSUM_MASK; // unknown
    if (!(m->ol_flags & RTE_MBUF_F_TX_UDP_CKSUM)) return;
    auto* p = rte_pktmbuf_mtod(m, std::uint8_t*);
    std::uint8_t* ip = p + frame::eth_bytes;
    ip[10] = ip[11] = 0;
    const std::uint16_t c = frame::inet_checksum(ip, frame::ipv4_bytes);
    ip[10] = static_cast<std::uint8_t>(c >> 8);
    ip[11] = static_cast<std::uint8_t>(c);
    // The UDP payload: this segment's part, then the next one's (a result
    // sent as headers + a clone of the payload).
    std::uint8_t* u = ip + frame::ipv4_bytes;
    u[6] = u[7] = 0;
    std::uint16_t sum = frame::ones_sum16(u + frame::udp_bytes, m->data_len - frame::udp_frame_overhead);
    if (m->next) {
        std::uint16_t more = frame::ones_sum16(rte_pktmbuf_mtod(m->next, const void*), m->next->data_len);
        if ((m->data_len - frame::udp_frame_overhead) & 1) more = __builtin_bswap16(more); // RFC 1071 2B
        sum = frame::add_sums(sum, more);
    }
    frame::set_udp_checksum(p, frame::udp_header_sum(p), sum);
    m->ol_flags &= ~(RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_UDP_CKSUM);
}

// Whether m is a railgate message of `rank` (-1: any) and of one of
// `types` (bit t: wire::msg_type t; 0: any): the header of an IPv4/UDP
// frame long enough to hold one.
inline bool frame_matches(const rte_mbuf* m, int rank, std::uint32_t types) noexcept {
    if (m->data_len < frame::udp_frame_overhead + wire::header_bytes) return false;
    const auto* p = rte_pktmbuf_mtod(m, const std::uint8_t*);
    if (p[12] != 0x08 || p[13] != 0x00 || p[frame::eth_bytes] != 0x45 || p[frame::eth_bytes + 9] != 17) return false;
    const wire::header h = wire::decode_header(p + frame::udp_frame_overhead);
    const auto t = static_cast<unsigned>(h.type);
    return (rank < 0 || h.rank == rank) && (types == 0 || (t < 32 && (types >> t & 1)));
}

// Applies the dice to the burst v[0..n) in place (room for `cap`):
// dropped frames are freed, duplicates are copies placed right after their
// original, a reordered frame waits in `late` and leaves after the next
// burst's frames, a corrupted frame has one bit flipped somewhere after its
// Ethernet header. Callers apply it to every poll while `late` holds a
// frame, empty ones too (n == 0), so that the frame is late by one poll at
// most: a real network reorders within a bounded time.
inline void apply_faults(fault::dice& dice, rte_mbuf*& late, fault_tally& t, rte_mbuf** v, unsigned& n,
                         unsigned cap) noexcept {
    rte_mbuf* out[fault_max_burst];
    cap = std::min(cap, fault_max_burst);
    unsigned k = 0;
    rte_mbuf* waited = late;
    late = nullptr;
    auto lose = [&t](rte_mbuf* m) {
        ++t.drops;
        rte_pktmbuf_free(m);
    };
    const int rank = dice.current().rank;
    const std::uint32_t types = dice.current().types;
    for (unsigned i = 0; i < n; ++i) {
        rte_mbuf* m = v[i];
        if ((rank >= 0 || types) && !frame_matches(m, rank, types)) {
            if (k < cap) out[k++] = m;
            else lose(m);
            continue;
        }
        const fault::verdict f = dice.roll();
        if (f.drop) {
            lose(m);
            continue;
        }
        if (f.corrupt && m->data_len > frame::eth_bytes) {
            if (m->data_len >= frame::udp_frame_overhead && m->nb_segs <= 2) before_corruption(m);
            const std::uint32_t bits = (m->data_len - static_cast<std::uint32_t>(frame::eth_bytes)) * 8;
            const std::uint32_t b = f.bit % bits;
            rte_pktmbuf_mtod_offset(m, std::uint8_t*, frame::eth_bytes)[b / 8] ^= static_cast<std::uint8_t>(1u << (b % 8));
            ++t.corrupts;
        }
        if (f.reorder && !late) {
            late = m;
            ++t.reorders;
            continue;
        }
        if (k == cap) {
            lose(m);
            continue;
        }
        out[k++] = m;
        if (f.dup && k < cap)
            if (rte_mbuf* c = rte_pktmbuf_copy(m, m->pool, 0, UINT32_MAX)) {
                out[k++] = c;
                ++t.dups;
            }
    }
    if (waited) {
        if (k < cap) out[k++] = waited;
        else lose(waited);
    }
    std::copy_n(out, k, v);
    n = k;
}

} // namespace railgate::net
