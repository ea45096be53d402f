// Cost of stats::histogram::record(), the call railgated makes per
// aggregated chunk, against the cheapest possible tally of the same values
// (++count[v % 4096]) in the same run. Values are latency-like (lognormal,
// ~1 us to ~10 ms in ns), pre-generated so the RNG is not timed.
//
//   bench_histogram [--n N] [--rounds R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "dataplane/stats/histogram.hpp"
#include "tools/bench_flags.hpp"

int main(int argc, char** argv) {
    std::size_t n = 1 << 24;
    int rounds = 7;
    railgate::bench::flags args(argc, argv, "usage: bench_histogram [--n N] [--rounds R]");
    for (std::string a; args.next(a);) {
        if (a == "--n") n = args.number<std::size_t>(1, std::size_t{1} << 30);
        else if (a == "--rounds") rounds = args.number<int>(1, 1000);
        else args.unknown();
    }
    std::mt19937_64 rng(42);
    std::lognormal_distribution<double> d(11.0, 1.5);
    std::vector<std::uint64_t> v(n);
    for (auto& x : v) x = static_cast<std::uint64_t>(d(rng));
    using clk = std::chrono::steady_clock;
    std::vector<double> hist_ns, tally_ns;
    std::uint64_t sink = 0;
    for (int r = 0; r < rounds; ++r) {
        railgate::stats::histogram h;
        auto t0 = clk::now();
        for (std::uint64_t x : v) h.record(x);
        auto t1 = clk::now();
        hist_ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n));
        sink += h.percentile(99);
        std::vector<std::uint64_t> tally(4096, 0);
        t0 = clk::now();
        for (std::uint64_t x : v) ++tally[x % 4096];
        t1 = clk::now();
        tally_ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n));
        sink += tally[7];
    }
    std::sort(hist_ns.begin(), hist_ns.end());
    std::sort(tally_ns.begin(), tally_ns.end());
    const double h = hist_ns[hist_ns.size() / 2], t = tally_ns[tally_ns.size() / 2];
    std::printf("# bench_histogram: %zu values, median of %d rounds (checksum %llu)\n", n, rounds,
                static_cast<unsigned long long>(sink % 10));
    std::printf("histogram::record  %.2f ns/value\nplain tally        %.2f ns/value\nratio              %.2f\n", h, t,
                h / t);
    return 0;
}
