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

#include "dataplane/net/job_latency.hpp"
#include "dataplane/stats/clock.hpp"
#include "dataplane/stats/histogram.hpp"

using railgate::stats::histogram;
using railgate::stats::job_histogram;

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

// A job's histogram (7 sub-bits, 20 KiB against 280): percentiles within
// 1/64 of the exact ones, and merged into a rail's histogram (railctl
// latency --job) the same count, min, max and mean, percentiles to 1/64.
BOOST_AUTO_TEST_CASE(a_jobs_histogram_is_coarser_and_merges_into_a_rails) {
    BOOST_TEST(job_histogram::bucket_count * 8 < 21u * 1024);
    job_histogram j;
    histogram fine;
    std::vector<std::uint64_t> v;
    std::mt19937_64 rng(5);
    std::lognormal_distribution<double> d(std::log(40000.0), 0.8); // around 40 us
    for (int i = 0; i < 40000; ++i) {
        v.push_back(static_cast<std::uint64_t>(d(rng)));
        j.record(v.back());
        fine.record(v.back());
    }
    histogram out;
    out.merge(j);
    BOOST_TEST(out.count() == fine.count());
    BOOST_TEST(out.min() == fine.min());
    BOOST_TEST(out.max() == fine.max());
    BOOST_TEST(out.mean() == fine.mean());
    for (double p : {50.0, 90.0, 99.0, 99.9}) {
        const double want = static_cast<double>(exact(v, p));
        BOOST_TEST(std::abs(static_cast<double>(j.percentile(p)) - want) <= want / 64, p);
        BOOST_TEST(std::abs(static_cast<double>(out.percentile(p)) - want) <= want / 64 + 1, p);
    }
    // A worker's report comes in a rail histogram's buckets.
    job_histogram r;
    const std::size_t b = histogram::index_of(123456);
    r.add_samples(histogram::middle_of(b), 7);
    BOOST_TEST(r.count() == 7u);
    BOOST_TEST(std::abs(static_cast<double>(r.percentile(50)) - 123456.0) <= 123456.0 / 64);
}

// The rail's per-job table keeps every running job's histograms however
// many jobs come and go beside them, and those of the last ones to end.
// Before, 8 entries served all jobs, least recently joined first: a
// running job lost its histograms once 8 more had joined after it.
BOOST_AUTO_TEST_CASE(every_running_jobs_histograms_are_kept) {
    constexpr unsigned max_jobs = 32;
    railgate::net::job_latency t(max_jobs);
    // The rail's table: max_jobs running, the last entry the short jobs'.
    std::vector<railgate::agg::job> jobs(max_jobs + 1);
    std::span<railgate::agg::job> running(jobs.data(), max_jobs);
    for (unsigned i = 0; i < max_jobs; ++i) {
        running[i].id = i + 1;
        running[i].st = railgate::agg::job_state::active;
        t.open(running[i], jobs);
        BOOST_TEST_REQUIRE(t.of(running[i]) != nullptr);
        t.of(running[i])->record(1000 * (i + 1));
        t.of(running[i], true)->record(2000 * (i + 1));
    }
    // 100 short jobs join and end beside them, each with one sample.
    railgate::agg::job& brief = jobs.back();
    for (std::uint32_t id = 1000; id < 1100; ++id) {
        brief.id = id;
        brief.st = railgate::agg::job_state::active;
        t.open(brief, jobs);
        BOOST_TEST_REQUIRE(t.of(brief) != nullptr);
        t.of(brief)->record(id);
        brief.st = railgate::agg::job_state::free; // it ends
    }
    for (unsigned i = 0; i < max_jobs; ++i) {
        BOOST_TEST_REQUIRE(t.of(running[i]) != nullptr);
        BOOST_TEST(t.of(running[i])->count() == 1u);
        BOOST_TEST(t.of(running[i])->max() == 1000u * (i + 1));
        BOOST_TEST(t.find(i + 1, true)->max() == 2000u * (i + 1));
    }
    // The last 8 that ended are kept, not those before them.
    for (std::uint32_t id = 1092; id < 1100; ++id) BOOST_TEST((t.find(id) && t.find(id)->max() == id), id);
    BOOST_TEST(t.find(1091) == nullptr);
    BOOST_TEST(t.find(1000) == nullptr);
    // A job id joined again keeps its entry (its incarnations add up).
    brief.id = 1095;
    t.open(brief, jobs);
    t.of(brief)->record(7);
    BOOST_TEST(t.find(1095)->count() == 2u);
    // A job object whose kept index names another job's entry (reused for
    // a new job id) finds its own by id, or none.
    railgate::agg::job stale = running[3];
    stale.id = 1099;
    BOOST_TEST(t.of(stale) == t.find(1099));
    stale.id = 5000;
    BOOST_TEST(t.of(stale) == nullptr);
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
