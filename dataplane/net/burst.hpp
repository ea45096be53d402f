// rte_eth_rx_burst and rte_eth_tx_burst as ThreadSanitizer sees them.
// A PMD hands frames from one thread to another inside DPDK's libraries
// (net_ring's rings, af_packet's), which TSan does not instrument: it saw
// railgated's lcore read a frame a worker's thread had written with nothing
// ordering the two, on every frame of the embedded default. In a TSan build
// a frame given to a port is released and one taken from a port acquired,
// so TSan orders a frame's writes before its next owner's reads, as the
// PMD's own barriers do. Elsewhere these are the plain calls.
// (The pools' side, a buffer freed on one thread and allocated on another,
// is eal.cpp's: a TSan build's pools keep their free buffers under a mutex
// of railgate's, and take back each one acquiring what handing_over and
// the reference count released.)
#pragma once

#include <cstdint>

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#if defined(__SANITIZE_THREAD__)
#define RAILGATE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RAILGATE_TSAN 1
#endif
#endif

#ifdef RAILGATE_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace railgate::net {

// Frames leaving this thread by a way TSan does not see (a port, or a ring
// a PMD reads; or a free of a buffer others still hold, whose reference
// count the last holder drops in an uninstrumented library): what this
// thread did with them happens before their next owner's accesses.
inline void handing_over([[maybe_unused]] rte_mbuf* const* m, [[maybe_unused]] unsigned n) noexcept {
#ifdef RAILGATE_TSAN
    for (unsigned i = 0; i < n; ++i)
        for (rte_mbuf* s = m[i]; s;) {
            rte_mbuf* next = s->next; // read before its next owner may write it
            __tsan_release(s);
            s = next;
        }
#endif
}

// Frames arriving by such a way: ordered after their last owner's writes.
inline void taking_over([[maybe_unused]] rte_mbuf* const* m, [[maybe_unused]] unsigned n) noexcept {
#ifdef RAILGATE_TSAN
    for (unsigned i = 0; i < n; ++i)
        for (rte_mbuf* s = m[i]; s; s = s->next) __tsan_acquire(s);
#endif
}

inline std::uint16_t port_rx(std::uint16_t port, std::uint16_t queue, rte_mbuf** m, std::uint16_t n) noexcept {
    const std::uint16_t got = rte_eth_rx_burst(port, queue, m, n);
    taking_over(m, got);
    return got;
}

inline std::uint16_t port_tx(std::uint16_t port, std::uint16_t queue, rte_mbuf** m, std::uint16_t n) noexcept {
    handing_over(m, n);
    return rte_eth_tx_burst(port, queue, m, n);
}

// A net_ring port's rings from outside the port (a test or a benchmark
// feeding it frames and taking its output): as port_tx and port_rx.
inline unsigned ring_put(rte_ring* r, rte_mbuf* const* m, unsigned n) noexcept {
    handing_over(m, n);
    return rte_ring_enqueue_burst(r, reinterpret_cast<void* const*>(m), n, nullptr);
}

inline unsigned ring_get(rte_ring* r, rte_mbuf** m, unsigned n) noexcept {
    const unsigned got = rte_ring_dequeue_burst(r, reinterpret_cast<void**>(m), n, nullptr);
    taking_over(m, got);
    return got;
}

} // namespace railgate::net
