// The log-linear histogram: percentiles agree with the exact sorted-sample
// percentiles to within the bucket precision (3 significant digits), merge
// equals recording everything in one, and recording never allocates.
#define BOOST_TEST_MODULE histogram
#include <boost/test/unit_test.hpp>

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "dataplane/stats/clock.hpp"
#include "dataplane/stats/histogram.hpp"

using railgate::stats::histogram;

namespace {

// The exact p-th percentile by the same rank rule: the ceil(p% * n)-th smallest.
std::uint64_t exact(std::vector<std::uint64_t> v, double p) {
    std::sort(v.begin(), v.end());
    auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
    rank = std::clamp<std::size_t>(rank, 1, v.size());
    return v[rank - 1];
}

void check_against_exact(const std::vector<std::uint64_t>& samples) {
    histogram h;
    for (auto s : samples) h.record(s);
    BOOST_TEST(h.count() == samples.size());
    for (double p : {0.0, 1.0, 10.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0}) {
        const std::uint64_t want = exact(samples, p), got = h.percentile(p);
        // Same bucket: got is that bucket's top (or max), never below the sample.
        BOOST_TEST(got >= want, "p" << p);
        BOOST_TEST(histogram::index_of(got) == histogram::index_of(want), "p" << p << " got " << got << " want " << want);
        BOOST_TEST(static_cast<double>(got - want) <= static_cast<double>(want) / 1024.0 + 1e-9, "p" << p);
    }
    BOOST_TEST(h.min() == *std::min_element(samples.begin(), samples.end()));
    BOOST_TEST(h.max() == *std::max_element(samples.begin(), samples.end()));
}

} // namespace

BOOST_AUTO_TEST_CASE(bucket_bounds_hold_three_significant_digits) {
    for (std::uint64_t v : {0ull, 1ull, 2047ull, 2048ull, 2049ull, 4095ull, 4096ull, 1000000ull, 123456789ull,
                            (1ull << 40) + 12345}) {
        const std::size_t i = histogram::index_of(v);
        BOOST_TEST(histogram::lowest_of(i) <= v);
        BOOST_TEST(histogram::highest_of(i) >= v);
        BOOST_TEST(static_cast<double>(histogram::highest_of(i) - histogram::lowest_of(i)) <=
                   static_cast<double>(histogram::lowest_of(i)) / 1024.0);
    }
    // Buckets tile the range without gaps.
    for (std::size_t i = 0; i + 1 < histogram::bucket_count; ++i)
        BOOST_TEST_REQUIRE(histogram::highest_of(i) + 1 == histogram::lowest_of(i + 1));
    BOOST_TEST(histogram::index_of(UINT64_MAX) == histogram::bucket_count - 1);
}

BOOST_AUTO_TEST_CASE(percentiles_match_exact_sorted_samples) {
    std::mt19937_64 rng(7);
    std::lognormal_distribution<double> lat(9.0, 1.2); // ~8 us median, long tail
    std::vector<std::uint64_t> s;
    for (int i = 0; i < 200000; ++i) s.push_back(static_cast<std::uint64_t>(lat(rng)));
    check_against_exact(s);
    std::uniform_int_distribution<std::uint64_t> uni(0, 5000);
    s.clear();
    for (int i = 0; i < 10007; ++i) s.push_back(uni(rng));
    check_against_exact(s);
    check_against_exact({42});
    check_against_exact({1, 1000000000});
}

BOOST_AUTO_TEST_CASE(merge_equals_one_histogram) {
    histogram a, b, all;
    std::mt19937_64 rng(3);
    for (int i = 0; i < 50000; ++i) {
        const std::uint64_t v = rng() % 10000000;
        (i % 3 ? a : b).record(v);
        all.record(v);
    }
    a.merge(b);
    BOOST_TEST(a.count() == all.count());
    BOOST_TEST(a.min() == all.min());
    BOOST_TEST(a.max() == all.max());
    BOOST_TEST(a.mean() == all.mean());
    for (std::size_t i = 0; i < histogram::bucket_count; ++i) BOOST_TEST_REQUIRE(a.bucket(i) == all.bucket(i));
    for (double p : {50.0, 99.0, 99.99}) BOOST_TEST(a.percentile(p) == all.percentile(p));
}

BOOST_AUTO_TEST_CASE(empty_and_reset) {
    histogram h;
    BOOST_TEST(h.count() == 0u);
    BOOST_TEST(h.percentile(99) == 0u);
    BOOST_TEST(h.min() == 0u);
    h.record(5);
    h.reset();
    BOOST_TEST(h.count() == 0u);
    BOOST_TEST(h.max() == 0u);
}

// The stats library's clocks (dataplane/stats/clock.hpp): fast_now_ns()
// reads the TSC only where the kernel keeps time by it, and on every CPU
// each clock agrees with steady_clock. tests/rxe runs this in the QEMU guest
// too, whose kernel does not trust its TSC.
BOOST_AUTO_TEST_CASE(clocks) {
    namespace st = railgate::stats;
    char name[32] = {};
    if (std::FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r")) {
        if (!std::fgets(name, sizeof name, f)) name[0] = 0;
        std::fclose(f);
    }
    BOOST_TEST(st::tsc_trusted() == (std::strcmp(name, "tsc\n") == 0), "clocksource " << name);
    auto steady = [] {
        return static_cast<std::int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::steady_clock::now().time_since_epoch())
                                             .count());
    };
    cpu_set_t all;
    BOOST_REQUIRE(sched_getaffinity(0, sizeof all, &all) == 0);
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (!CPU_ISSET(cpu, &all)) continue;
        std::thread([&] {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            BOOST_REQUIRE(pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0);
            // The closest of a few reads: a preempted thread is not the clock's fault.
            std::int64_t fast = INT64_MAX, coarse = INT64_MAX;
            for (int i = 0; i < 20; ++i) {
                const std::int64_t a = steady(), f = static_cast<std::int64_t>(st::fast_now_ns()), b = steady();
                fast = std::min(fast, std::max(std::abs(f - a), std::abs(f - b)));
                const std::int64_t c = static_cast<std::int64_t>(st::coarse_now_ns()), d = steady();
                coarse = std::min(coarse, d - c); // the coarse clock lags by up to a tick
            }
            BOOST_TEST(fast < 1'000'000, "cpu " << cpu << ": fast_now_ns is " << fast << " ns off steady_clock");
            BOOST_TEST(coarse >= -1'000'000, "cpu " << cpu << ": coarse_now_ns ahead of steady_clock by " << -coarse);
            BOOST_TEST(coarse < 50'000'000, "cpu " << cpu << ": coarse_now_ns " << coarse << " ns behind");
        }).join();
    }
}
