#include "dataplane/stats/clock.hpp"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace railgate::stats {
namespace {

std::uint64_t steady_ns() noexcept {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

#if defined(__x86_64__)
struct tsc_rate {
    std::uint64_t tsc0, ns0;
    double ns_per_tick;
    tsc_rate() noexcept {
        // The base and the rate from one 10 ms span: both ends read as
        // close together as the two clocks allow.
        ns0 = steady_ns();
        tsc0 = __rdtsc();
        std::uint64_t ns1 = ns0, tsc1 = tsc0;
        while (ns1 - ns0 < 10'000'000) {
            ns1 = steady_ns();
            tsc1 = __rdtsc();
        }
        ns_per_tick = tsc1 > tsc0 ? static_cast<double>(ns1 - ns0) / static_cast<double>(tsc1 - tsc0) : 0;
    }
};
#endif

} // namespace

std::uint64_t fast_now_ns() noexcept {
#if defined(__x86_64__)
    static const tsc_rate r;
    if (r.ns_per_tick > 0) {
        const std::uint64_t t = __rdtsc();
        return r.ns0 + static_cast<std::uint64_t>(static_cast<double>(t - r.tsc0) * r.ns_per_tick);
    }
#endif
    return steady_ns();
}

} // namespace railgate::stats
