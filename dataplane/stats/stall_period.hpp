#pragma once
// Whether a CPU's stalls (the times it was taken from a spinning thread)
// come at a fixed period, as a hypervisor's or a kernel's tick takes them:
// on the CI kind of machine each vCPU loses about 34 us every 1.000 ms, and
// the guest's own 250 Hz tick more every 4 ms. A periodic stall bounds any
// tail measured on that CPU from below: whatever is in flight when it comes
// waits it out, so a tail percentile smaller than the share of time it
// touches cannot be under the stall's length (raillat --stalls reports it;
// doc/performance.md has the arithmetic for railbench's per-chunk p99).
//
// find_period() looks at the intervals between each stall and the next few
// (several ticks interleave: a 1 ms and a 4 ms one), takes the most common
// interval, within a tolerance, preferring the shortest of those nearly as
// common (a period's multiples are common too), and counts the stalls that
// belong to it: another stall one period before or after.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace railgate::stats {

struct stall {
    std::uint64_t at_ns = 0;  // when the CPU was taken
    std::uint64_t len_ns = 0; // for how long
};

struct stall_period {
    std::uint64_t period_ns = 0; // 0: no period found
    std::size_t members = 0;     // stalls one period from another
    std::size_t of = 0;          // all the stalls looked at
    std::uint64_t median_len_ns = 0; // the members' median length
    double share() const noexcept { return of ? static_cast<double>(members) / static_cast<double>(of) : 0.0; }
};

// Stalls in time order. A period is reported when at least min_share of
// them (and at least 8) belong to it.
inline stall_period find_period(std::span<const stall> s, double min_share = 0.5) {
    constexpr std::uint64_t bin_ns = 5'000;         // intervals to 5 us
    constexpr std::uint64_t longest_ns = 50'000'000; // periods up to 50 ms
    constexpr std::size_t ahead = 16;               // the next stalls each one is paired with
    stall_period r;
    r.of = s.size();
    if (s.size() < 8) return r;
    // Each bin's intervals: how many, and their sum (a period's exact length).
    std::vector<std::uint32_t> count(longest_ns / bin_ns + 2, 0);
    std::vector<std::uint64_t> sum(count.size(), 0);
    for (std::size_t i = 0; i < s.size(); ++i)
        for (std::size_t j = i + 1; j < s.size() && j <= i + ahead; ++j) {
            const std::uint64_t d = s[j].at_ns - s[i].at_ns;
            if (d >= longest_ns) break;
            ++count[d / bin_ns];
            sum[d / bin_ns] += d;
        }
    // A bin with its neighbours: a period's intervals straddle a bin's edge.
    // Below 20 us, stalls in a row are one event (an interrupt, then its
    // softirq), not a period.
    const std::size_t first = 20'000 / bin_ns;
    auto score = [&](std::size_t b) { return count[b - 1] + count[b] + count[b + 1]; };
    std::uint32_t best = 0;
    for (std::size_t b = first; b + 1 < count.size(); ++b) best = std::max(best, score(b));
    if (best == 0) return r;
    std::size_t pick = first;
    while (score(pick) * 10 < best * 8) ++pick; // the shortest nearly as common
    const std::uint64_t p = (sum[pick - 1] + sum[pick] + sum[pick + 1]) / score(pick);
    const std::uint64_t tol = std::max<std::uint64_t>(10'000, p / 50);
    // Members: a stall one period (within the tolerance) before or after;
    // each pair found marks both.
    std::vector<bool> member(s.size(), false);
    for (std::size_t i = 0; i < s.size(); ++i)
        for (std::size_t j = i + 1; j < s.size(); ++j) {
            const std::uint64_t d = s[j].at_ns - s[i].at_ns;
            if (d > p + tol) break;
            if (d + tol >= p) member[i] = member[j] = true;
        }
    std::vector<std::uint64_t> lens;
    for (std::size_t i = 0; i < s.size(); ++i)
        if (member[i]) lens.push_back(s[i].len_ns);
    if (lens.size() < 8 || static_cast<double>(lens.size()) < min_share * static_cast<double>(s.size())) return r;
    std::nth_element(lens.begin(), lens.begin() + static_cast<std::ptrdiff_t>(lens.size() / 2), lens.end());
    r.period_ns = p;
    r.members = lens.size();
    r.median_len_ns = lens[lens.size() / 2];
    return r;
}

} // namespace railgate::stats
