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

namespace railgate::net {

// What one application of the injector did.
struct fault_tally {
    std::uint64_t drops = 0, dups = 0, reorders = 0, corrupts = 0;
};

inline constexpr unsigned fault_max_burst = 1024;

// Applies the dice to the burst v[0..n) in place (room for `cap`):
// dropped frames are freed, duplicates are copies placed right after their
// original, a reordered frame waits in `late` and leaves after the next
// burst's frames, a corrupted frame has one bit flipped somewhere after its
// Ethernet header.
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
    for (unsigned i = 0; i < n; ++i) {
        rte_mbuf* m = v[i];
        const fault::verdict f = dice.roll();
        if (f.drop) {
            lose(m);
            continue;
        }
        if (f.corrupt && m->data_len > frame::eth_bytes) {
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
