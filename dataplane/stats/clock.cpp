#include "dataplane/stats/clock.hpp"

#include <time.h>

#include <cstdio>
#include <cstring>

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
// One reading of both clocks: the TSC between two steady_clock reads, the
// closest pair of a few (a thread preempted between the reads would skew
// the rate by the time it was away).
struct pair_reading {
    std::uint64_t ns, tsc;
};
pair_reading read_pair() noexcept {
    pair_reading best{0, 0};
    std::uint64_t best_gap = UINT64_MAX;
    for (int i = 0; i < 8; ++i) {
        const std::uint64_t a = steady_ns(), t = __rdtsc(), b = steady_ns();
        if (b - a < best_gap) {
            best_gap = b - a;
            best = {a + (b - a) / 2, t};
        }
    }
    return best;
}

struct tsc_rate {
    pair_reading base;
    double ns_per_tick;
    tsc_rate() noexcept {
        base = read_pair();
        while (steady_ns() - base.ns < 10'000'000) {
        }
        const pair_reading end = read_pair();
        ns_per_tick = end.tsc > base.tsc ? static_cast<double>(end.ns - base.ns) / static_cast<double>(end.tsc - base.tsc)
                                         : 0;
    }
    // Signed: a CPU whose TSC is behind the calibrating one's (where the
    // kernel does not trust it) reads before base.tsc.
    std::uint64_t now() const noexcept {
        const auto ticks = static_cast<std::int64_t>(__rdtsc() - base.tsc);
        return base.ns + static_cast<std::uint64_t>(static_cast<std::int64_t>(static_cast<double>(ticks) * ns_per_tick));
    }
};

const tsc_rate& rate() noexcept {
    static const tsc_rate r;
    return r;
}
#endif

// The kernel's clocksource, without its newline ("" where unreadable).
void clocksource_name(char (&name)[32]) noexcept {
    name[0] = 0;
    if (std::FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r")) {
        if (!std::fgets(name, sizeof name, f)) name[0] = 0;
        std::fclose(f);
    }
    name[std::strcspn(name, "\n")] = 0;
}

} // namespace

std::string clocksource() {
    char name[32];
    clocksource_name(name);
    return name;
}

bool tsc_trusted() noexcept {
#if defined(__x86_64__)
    static const bool trusted = [] {
        char name[32];
        clocksource_name(name);
        return std::strcmp(name, "tsc") == 0 && rate().ns_per_tick > 0;
    }();
    return trusted;
#else
    return false;
#endif
}

std::uint64_t fast_now_ns() noexcept {
#if defined(__x86_64__)
    if (tsc_trusted()) return rate().now();
#endif
    return steady_ns();
}

std::uint64_t tsc_now_ns() noexcept {
#if defined(__x86_64__)
    if (rate().ns_per_tick > 0) return rate().now();
#endif
    return steady_ns();
}

std::uint64_t coarse_now_ns() noexcept {
    timespec ts;
    if (::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0) return steady_ns();
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

} // namespace railgate::stats
