// The period finder raillat --stalls uses: ticks found among interleaved
// ones and random stalls, and none made up where the stalls are random.
#define BOOST_TEST_MODULE stall_period
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "dataplane/stats/stall_period.hpp"

using railgate::stats::find_period;
using railgate::stats::stall;

namespace {
constexpr std::uint64_t us = 1000, ms = 1000 * us;

// A tick every `period` from `phase`, `len` long, each jittered by up to
// `jitter` either way; over `span`.
void add_tick(std::vector<stall>& v, std::mt19937_64& rng, std::uint64_t period, std::uint64_t phase,
              std::uint64_t len, std::uint64_t jitter, std::uint64_t span) {
    std::uniform_int_distribution<std::uint64_t> j(0, 2 * jitter);
    for (std::uint64_t t = phase + jitter; t < span; t += period) v.push_back({t + j(rng) - jitter, len + j(rng) / 4});
}
void add_random(std::vector<stall>& v, std::mt19937_64& rng, std::size_t n, std::uint64_t span) {
    std::uniform_int_distribution<std::uint64_t> at(0, span), len(20 * us, 200 * us);
    for (std::size_t i = 0; i < n; ++i) v.push_back({at(rng), len(rng)});
}
void in_order(std::vector<stall>& v) {
    std::sort(v.begin(), v.end(), [](const stall& a, const stall& b) { return a.at_ns < b.at_ns; });
}
} // namespace

BOOST_AUTO_TEST_CASE(the_hypervisors_tick_among_the_guests_and_random_stalls) {
    // What the CI kind of machine shows: 34 us every 1 ms, the guest's 250
    // Hz tick at another phase, and some stalls at random.
    std::mt19937_64 rng(7);
    std::vector<stall> v;
    add_tick(v, rng, 1 * ms, 656 * us, 34 * us, 3 * us, 3000 * ms);
    add_tick(v, rng, 4 * ms, 14 * us, 45 * us, 5 * us, 3000 * ms);
    add_random(v, rng, 300, 3000 * ms);
    in_order(v);
    const auto p = find_period(v);
    BOOST_TEST(p.period_ns >= 995 * us);
    BOOST_TEST(p.period_ns <= 1005 * us);
    BOOST_TEST(p.median_len_ns >= 34 * us);
    BOOST_TEST(p.median_len_ns <= 36 * us);
    BOOST_TEST(p.share() > 0.6);
    BOOST_TEST(p.of == v.size());
}

BOOST_AUTO_TEST_CASE(the_guests_tick_alone) {
    std::mt19937_64 rng(11);
    std::vector<stall> v;
    add_tick(v, rng, 4 * ms, 100 * us, 45 * us, 2 * us, 1000 * ms);
    in_order(v);
    const auto p = find_period(v);
    BOOST_TEST(p.period_ns >= 3995 * us);
    BOOST_TEST(p.period_ns <= 4005 * us);
    BOOST_TEST(p.members == v.size());
}

BOOST_AUTO_TEST_CASE(random_stalls_have_no_period) {
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
        std::mt19937_64 rng(seed);
        std::vector<stall> v;
        add_random(v, rng, 3000, 3000 * ms);
        in_order(v);
        const auto p = find_period(v);
        BOOST_TEST(p.period_ns == 0u, "seed " << seed << ": a period of " << p.period_ns << " ns, " << p.members
                                              << " of " << p.of);
    }
}

BOOST_AUTO_TEST_CASE(too_few_stalls_say_nothing) {
    std::vector<stall> v;
    for (std::uint64_t k = 0; k < 7; ++k) v.push_back({k * ms, 30 * us});
    BOOST_TEST(find_period(v).period_ns == 0u);
    BOOST_TEST(find_period(std::vector<stall>{}).period_ns == 0u);
    for (std::uint64_t k = 7; k < 12; ++k) v.push_back({k * ms, 30 * us});
    BOOST_TEST(find_period(v).period_ns == 1 * ms);
}

BOOST_AUTO_TEST_CASE(stalls_in_a_burst_are_not_a_period) {
    // An interrupt and its softirq back to back, at random: the intervals
    // under 20 us are not periods.
    std::mt19937_64 rng(3);
    std::vector<stall> v;
    std::uniform_int_distribution<std::uint64_t> at(0, 1000 * ms);
    for (int i = 0; i < 500; ++i) {
        const std::uint64_t t = at(rng);
        v.push_back({t, 25 * us});
        v.push_back({t + 12 * us, 22 * us});
    }
    in_order(v);
    BOOST_TEST(find_period(v).period_ns == 0u);
}
