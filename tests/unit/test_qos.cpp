// Traffic classes: classification tables, the token bucket and the
// strict + ETS scheduler, all on a manual clock (no sleeps).
#define BOOST_TEST_MODULE qos
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cmath>

#include "dataplane/qos/classify.hpp"
#include "dataplane/qos/scheduler.hpp"
#include "dataplane/qos/token_bucket.hpp"

using namespace railgate::qos;
using namespace std::chrono_literals;

namespace {

struct manual_clock {
    using duration = std::chrono::nanoseconds;
    using rep = duration::rep;
    using period = duration::period;
    using time_point = std::chrono::time_point<manual_clock>;
    static constexpr bool is_steady = true;
};
using tp = manual_clock::time_point;
using sched = scheduler<int, manual_clock>;

// Runs the rail for `span`: every `step` the queues of the TCs in `fill` are
// topped up to 64 items of `bytes`, and everything allowed leaves. Returns
// the bytes each TC sent.
std::array<double, tc_count> run(sched& s, tp& now, std::chrono::nanoseconds span, std::chrono::nanoseconds step,
                                 std::initializer_list<unsigned> fill, std::uint32_t bytes = 1500) {
    std::array<double, tc_count> sent{};
    for (const tp end = now + span; now < end; now += step) {
        for (unsigned t : fill)
            while (s.queued(t) < 64) s.enqueue(t, 0, bytes);
        while (auto o = s.dequeue(now)) sent[o->tc] += o->bytes;
    }
    return sent;
}

} // namespace

BOOST_AUTO_TEST_CASE(classification_defaults_and_table) {
    tc_map m = tc_map::defaults();
    BOOST_TEST(m.from_dscp(46) == 5);      // EF
    BOOST_TEST(m.from_tos(0xb8) == 5);     // EF in the TOS byte
    BOOST_TEST(m.from_grh_tclass(106) == 3); // NCCL_IB_TC=106: DSCP 26
    BOOST_TEST(m.from_pcp(6) == 6);
    BOOST_TEST(m.from_sl(11) == 3);
    BOOST_TEST(m.set("dscp", 26, 6).empty());
    BOOST_TEST(m.from_grh_tclass(106) == 6);
    BOOST_TEST(m.set("dscp", 64, 1) == "dscp 64 out of range 0..63");
    BOOST_TEST(m.set("pcp", 1, 8) == "tc 8 out of range 0..7");
    BOOST_TEST(m.set("cos", 1, 1) == "'cos' is not dscp, pcp or sl");
}

BOOST_AUTO_TEST_CASE(token_bucket_is_exact) {
    tp now{};
    token_bucket<manual_clock> b(1'000'000'000, 1500, now); // 1 Gbit/s = 0.125 B/ns
    BOOST_TEST(b.conforms(1500, now)); // starts full
    b.consume(1500);
    BOOST_TEST(!b.conforms(1, now));
    BOOST_TEST(b.wait(1500, now).count() == 12000);
    BOOST_TEST(!b.conforms(1500, now + 11999ns));
    BOOST_TEST(b.conforms(1500, now + 12000ns));
    // A long idle time never overfills it.
    BOOST_TEST(b.conforms(1500, now + 3600s));
    BOOST_TEST(!b.conforms(1501, now + 7200s));
    token_bucket<manual_clock> off(0, 0, now);
    BOOST_TEST(off.conforms(1u << 30, now)); // rate 0: unshaped
}

BOOST_AUTO_TEST_CASE(token_bucket_rate_over_time) {
    for (std::uint64_t rate : {1'000'000ull, 100'000'000ull, 10'000'000'000ull}) {
        tp now{};
        token_bucket<manual_clock> b(rate, 3000, now);
        double sent = 0;
        const auto span = 1s;
        for (const tp end = now + span; now < end; now += 1us)
            while (b.conforms(1000, now)) {
                b.consume(1000);
                sent += 1000;
            }
        const double want = static_cast<double>(rate) / 8;
        BOOST_TEST(std::abs(sent - want) <= 3000 + want * 0.001, "rate " << rate << ": " << sent << " B vs " << want);
    }
}

BOOST_AUTO_TEST_CASE(strict_tcs_go_first_highest_first) {
    sched::options o;
    o.tcs[5].strict = true;
    o.tcs[7].strict = true;
    tp now{};
    sched s(o, now);
    for (int i = 0; i < 4; ++i) {
        s.enqueue(0, 100 + i, 100);
        s.enqueue(5, 500 + i, 100);
        s.enqueue(7, 700 + i, 100);
    }
    std::vector<int> order;
    while (auto x = s.dequeue(now)) order.push_back(x->item);
    BOOST_TEST(order == (std::vector<int>{700, 701, 702, 703, 500, 501, 502, 503, 100, 101, 102, 103}));
}

BOOST_AUTO_TEST_CASE(ets_weights_are_shares_under_contention) {
    sched::options o;
    o.rail_rate_bps = 1'000'000'000;
    o.rail_burst_bytes = 15000; // the starting burst stays within the tolerance
    o.tcs[0].weight = 3;
    o.tcs[1].weight = 1;
    tp now{};
    sched s(o, now);
    const auto sent = run(s, now, 200ms, 10us, {0, 1});
    const double total = sent[0] + sent[1];
    BOOST_TEST(std::abs(total - 125e6 * 0.2) <= 125e6 * 0.2 * 0.01); // the rail's rate
    BOOST_TEST(std::abs(sent[0] / total - 0.75) <= 0.02, "TC0 share " << sent[0] / total);
    BOOST_TEST(std::abs(sent[1] / total - 0.25) <= 0.02, "TC1 share " << sent[1] / total);
}

BOOST_AUTO_TEST_CASE(an_idle_tcs_share_is_lent) {
    sched::options o;
    o.rail_rate_bps = 1'000'000'000;
    o.rail_burst_bytes = 15000;
    o.tcs[0].weight = 1;
    o.tcs[1].weight = 9;
    tp now{};
    sched s(o, now);
    const auto sent = run(s, now, 100ms, 10us, {0}); // TC1 idle
    BOOST_TEST(std::abs(sent[0] - 125e6 * 0.1) <= 125e6 * 0.1 * 0.01);
}

BOOST_AUTO_TEST_CASE(a_capped_tc_keeps_its_cap_and_lends_the_rest) {
    sched::options o;
    o.rail_rate_bps = 1'000'000'000;
    o.tcs[0].weight = 3;
    o.tcs[0].rate_bps = 100'000'000;
    o.tcs[0].burst_bytes = 15000;
    o.rail_burst_bytes = 15000;
    o.tcs[1].weight = 1;
    tp now{};
    sched s(o, now);
    const auto sent = run(s, now, 200ms, 10us, {0, 1});
    BOOST_TEST(std::abs(sent[0] - 12.5e6 * 0.2) <= 12.5e6 * 0.2 * 0.02, "TC0 " << sent[0]);
    BOOST_TEST(std::abs(sent[1] - 112.5e6 * 0.2) <= 112.5e6 * 0.2 * 0.02, "TC1 " << sent[1]);
}

BOOST_AUTO_TEST_CASE(a_strict_tc_waits_for_at_most_one_item) {
    // A bulk TC keeps the rail saturated; a strict TC's item enqueued at any
    // moment leaves as soon as the rail has room for it.
    sched::options o;
    o.rail_rate_bps = 1'000'000'000;
    o.rail_burst_bytes = 9000;
    o.tcs[6].strict = true;
    tp now{};
    sched s(o, now);
    run(s, now, 1ms, 1us, {0}, 9000); // saturated: the bucket is empty
    s.enqueue(6, 42, 64);
    std::chrono::nanoseconds waited{};
    for (;; now += 100ns, waited += 100ns) {
        while (s.queued(0) < 64) s.enqueue(0, 0, 9000);
        if (auto x = s.dequeue(now); x && x->tc == 6) break;
    }
    BOOST_TEST(waited.count() <= 9000 * 8 + 100, "waited " << waited.count() << " ns"); // one 9000 B item at 1 Gbit/s
}

BOOST_AUTO_TEST_CASE(full_queues_refuse_and_count) {
    sched::options o;
    o.queue_items = 4;
    tp now{};
    sched s(o, now);
    for (int i = 0; i < 6; ++i) s.enqueue(2, i, 100);
    BOOST_TEST(s.queued(2) == 4u);
    BOOST_TEST(s.counters(2).drops == 2u);
    BOOST_TEST(s.counters(2).enqueued == 4u);
    std::array<tc_config, tc_count> bad{};
    bad[3].weight = 0;
    BOOST_TEST(check(bad) == "tc 3: weight 0 out of range 1..100");
}
