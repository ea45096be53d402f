// The log-linear histogram: percentiles agree with the exact sorted-sample
// percentiles to within the bucket precision (3 significant digits), merge
// equals recording everything in one, and recording never allocates.
#define BOOST_TEST_MODULE histogram
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

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
