#include "dataplane/stats/report.hpp"

#include <algorithm>
#include <bit>
#include <vector>

namespace railgate::stats {

void print_latency(std::FILE* out, const histogram& h, const char* title) {
    if (h.count() == 0) {
        std::fprintf(out, "# %s: no samples\n", title);
        return;
    }
    auto us = [](std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; };
    std::fprintf(out, "# %s (us): samples %llu\n", title, static_cast<unsigned long long>(h.count()));
    std::fprintf(out, "#   t_min %.2f  t_typical(p50) %.2f  t_avg %.2f  t_stdev %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  t_max %.2f\n",
                 us(h.min()), us(h.percentile(50)), h.mean() / 1000.0, h.stddev() / 1000.0, us(h.percentile(90)),
                 us(h.percentile(99)), us(h.percentile(99.9)), us(h.max()));
    // Power-of-two buckets in ns for the bar chart.
    std::vector<std::uint64_t> b(48, 0);
    for (std::size_t i = 0; i < histogram::bucket_count; ++i)
        if (const std::uint64_t c = h.bucket(i)) {
            const std::uint64_t lo = histogram::lowest_of(i);
            b[lo ? 64 - static_cast<unsigned>(std::countl_zero(lo)) : 0] += c;
        }
    const std::uint64_t peak = *std::max_element(b.begin(), b.end());
    for (std::size_t k = 0; k < b.size(); ++k) {
        if (!b[k]) continue;
        const double lo = k ? static_cast<double>(std::uint64_t{1} << (k - 1)) / 1000.0 : 0.0;
        const double hi = static_cast<double>(std::uint64_t{1} << k) / 1000.0;
        const int bar = static_cast<int>(50.0 * static_cast<double>(b[k]) / static_cast<double>(peak) + 0.5);
        std::fprintf(out, "#   [%9.2f, %9.2f) %10llu |%.*s\n", lo, hi, static_cast<unsigned long long>(b[k]), bar,
                     "##################################################");
    }
}

void print_perftest_summary(std::FILE* out, const histogram& h, unsigned bytes) {
    auto us = [](double ns) { return ns / 1000.0; };
    std::fprintf(out, " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
                      "t_stdev[usec]   99%% percentile[usec]   99.9%% percentile[usec]\n");
    std::fprintf(out, " %-6u %-11llu %-14.2f %-14.2f %-16.2f %-14.2f %-15.2f %-22.2f %.2f\n", bytes,
                 static_cast<unsigned long long>(h.count()), us(static_cast<double>(h.min())),
                 us(static_cast<double>(h.max())), us(static_cast<double>(h.percentile(50))), us(h.mean()),
                 us(h.stddev()), us(static_cast<double>(h.percentile(99))), us(static_cast<double>(h.percentile(99.9))));
}

void print_lcore_sharing(std::FILE* out, unsigned lcore, const std::vector<std::string>& rails,
                         const lcore_sharing& s) {
    std::string names;
    for (const std::string& r : rails) names += (names.empty() ? "" : ", ") + r;
    std::fprintf(out, "lcore %u%s%s%s: waited %.3f s for its CPU", lcore, names.empty() ? "" : " (", names.c_str(),
                 names.empty() ? "" : ")", s.waited_s);
    if (s.shared == 1) std::fprintf(out, ", shared it with a busy task once (%.3f s)", s.shared_s);
    else if (s.shared)
        std::fprintf(out, ", shared it with a busy task %llu times (%.3f s)", static_cast<unsigned long long>(s.shared),
                     s.shared_s);
    if (s.absences == 1) std::fprintf(out, ", away once (%.3f s)", s.absent_s);
    else if (s.absences)
        std::fprintf(out, ", away %llu times (%.3f s)", static_cast<unsigned long long>(s.absences), s.absent_s);
    std::fprintf(out, "\n");
}

} // namespace railgate::stats
