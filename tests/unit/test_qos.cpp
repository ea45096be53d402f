// Traffic classes: classification tables, the token bucket and the
// strict + ETS scheduler, all on a manual clock (no sleeps).
#define BOOST_TEST_MODULE qos
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cmath>

#include "dataplane/qos/classify.hpp"
#include "dataplane/qos/delay_window.hpp"
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
    [[maybe_unused]] static constexpr bool is_steady = true;
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

// ECN step marking: an item joining a TC queue that holds ecn_mark_items
// or more is to be marked; other TCs' queues do not count; off at 0.
BOOST_AUTO_TEST_CASE(a_standing_queue_asks_for_ecn_marks) {
    sched::options o;
    o.rail_rate_bps = 1'000'000'000;
    o.ecn_mark_items = 3;
    tp now{};
    sched s(o, now);
    for (int i = 0; i < 3; ++i) {
        BOOST_TEST(!s.marks(0));
        s.enqueue(0, i, 1500);
    }
    BOOST_TEST(s.marks(0));  // three queued: the fourth joins marked
    BOOST_TEST(!s.marks(1)); // another TC's queue is its own
    while (s.dequeue(now += 1ms)) {
    }
    BOOST_TEST(!s.marks(0)); // drained
    o.ecn_mark_items = 0;
    sched off(o, now);
    for (int i = 0; i < 100; ++i) off.enqueue(0, i, 1500);
    BOOST_TEST(!off.marks(0));
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

// A ticket says whether its item still waits in its TC (railgated answers a
// kept result asked for while it waits HELD, instead of queuing a second
// copy): until the item leaves, on its TC only, and never for longer than
// the queue takes to drain when it came from another scheduler.
BOOST_AUTO_TEST_CASE(a_ticket_holds_while_its_item_waits_and_not_after) {
    sched::options o;
    o.tcs[3].strict = true; // TC 3 first, while it has items
    tp now{};
    sched s(o, now);
    BOOST_TEST(!s.holds(0, s.ticket(0))); // nothing queued yet
    s.enqueue(0, 1, 100);
    const std::uint32_t first = s.ticket(0);
    s.enqueue(0, 2, 100);
    const std::uint32_t second = s.ticket(0);
    s.enqueue(3, 3, 100);
    const std::uint32_t other = s.ticket(3);
    BOOST_TEST(first != second);
    BOOST_TEST(s.holds(0, first));
    BOOST_TEST(s.holds(0, second));
    BOOST_TEST(s.holds(3, other));
    BOOST_TEST(s.dequeue(now)->item == 3);
    BOOST_TEST(!s.holds(3, other));
    BOOST_TEST(s.holds(0, first)); // another TC's item left, not this one
    BOOST_TEST(s.dequeue(now)->item == 1);
    BOOST_TEST(!s.holds(0, first));
    BOOST_TEST(s.holds(0, second));
    BOOST_TEST(s.dequeue(now)->item == 2);
    BOOST_TEST(!s.holds(0, second));
    // A refused item leaves no ticket of its own: the last queued one's.
    sched::options small;
    small.queue_items = 1;
    sched f(small, now);
    f.enqueue(0, 1, 100);
    const std::uint32_t kept = f.ticket(0);
    BOOST_TEST(!f.enqueue(0, 2, 100));
    BOOST_TEST(f.ticket(0) == kept);
    // Another scheduler's ticket (the rail's shaping was made anew): at
    // most while this one holds as many items as it took since.
    sched g(o, now);
    g.enqueue(0, 1, 100);
    BOOST_TEST(!g.holds(0, second)); // ticket 2: past the one item queued
    g.enqueue(0, 2, 100);
    BOOST_TEST(g.holds(0, second));  // reads queued: two items wait
    g.dequeue(now);
    g.dequeue(now);
    BOOST_TEST(!g.holds(0, second)); // and no longer once they left
}

// The delay-based congestion window (qos::delay_window), on a manual clock:
// every time and round trip below is given, none is measured.
namespace {
constexpr std::uint64_t us = 1000;

// Feeds `n` samples of round trip `rtt`, one every `gap` ns from `now`.
std::uint64_t feed(delay_window& w, unsigned n, std::uint64_t rtt, std::uint64_t now, std::uint64_t gap) {
    for (unsigned i = 0; i < n; ++i) w.on_sample(rtt, now += gap);
    return now;
}
} // namespace

BOOST_AUTO_TEST_CASE(a_window_starts_small_and_doubles_per_round_trip_under_its_target) {
    delay_window w;
    w.start(256, 0, false);
    BOOST_TEST(w.window() == 16u);
    // 16 results of a 20 us round trip (target: 20 + 100 us): 32.
    std::uint64_t now = feed(w, 16, 20 * us, 0, us);
    BOOST_TEST(w.window() == 32u);
    BOOST_TEST(w.base() == 20 * us);
    BOOST_TEST(w.target() == 120 * us);
    now = feed(w, 32, 20 * us, now, us);
    BOOST_TEST(w.window() == 64u);
    // Capped by the pool.
    feed(w, 1000, 20 * us, now, us);
    BOOST_TEST(w.window() == 256u);
    BOOST_TEST(w.decreases() == 0u);
}

BOOST_AUTO_TEST_CASE(above_its_target_a_window_shrinks_with_the_excess_once_per_round_trip) {
    delay_window w;
    w.start(64, 0, false);
    std::uint64_t now = feed(w, 1, 20 * us, 0, us); // base 20 us, target 120 us
    const double before = w.exact();
    // 240 us: the excess is half the round trip: x (1 - 0.8 * 0.5) = x 0.6.
    w.on_sample(240 * us, now += us);
    BOOST_TEST(w.exact() == before * 0.6, boost::test_tools::tolerance(1e-9));
    // Within the same (smoothed) round trip: no second decrease.
    const double once = w.exact();
    w.on_sample(240 * us, now += us);
    BOOST_TEST(w.exact() == once);
    // A (smoothed) round trip later it shrinks again; never by more than half.
    w.on_sample(10'000 * us, now += 5000 * us);
    BOOST_TEST(w.exact() == once * 0.5, boost::test_tools::tolerance(1e-9));
    BOOST_TEST(w.decreases() == 2u);
    // After a decrease, growth is additive: one chunk per window of results.
    const double low = w.exact();
    const unsigned n = w.window();
    feed(w, n, 20 * us, now + 5000 * us, us);
    BOOST_TEST(w.exact() > low + 0.9);
    BOOST_TEST(w.exact() < low + 1.1);
}

BOOST_AUTO_TEST_CASE(a_loss_halves_the_window_and_timeouts_in_a_row_take_it_to_the_minimum) {
    delay_window w;
    w.start(64, 0, false);
    std::uint64_t now = feed(w, 48, 20 * us, 0, us); // slow start to 64
    BOOST_TEST(w.window() == 64u);
    w.on_loss(now);
    BOOST_TEST(w.window() == 32u);
    w.on_loss(now + us); // the same round trip: once
    BOOST_TEST(w.window() == 32u);
    w.on_loss(now + 1000 * us, 1); // a timeout after one: halves again
    BOOST_TEST(w.window() == 16u);
    w.on_loss(now + 1001 * us, 2); // timeouts in a row: the minimum, at once
    BOOST_TEST(w.window() == 1u);
    // The window never goes below one chunk, nor above the pool.
    w.on_loss(now + 5000 * us, 6);
    BOOST_TEST(w.window() == 1u);
}

BOOST_AUTO_TEST_CASE(after_timeouts_in_a_row_the_window_doubles_back_to_half_then_grows_by_one) {
    for (const delay_window_params& p : {delay_window_params{}, delay_window_params::queue_mode()}) {
        delay_window w(p);
        w.start(64, 0, false);
        std::uint64_t now = feed(w, 48, 20 * us, 0, us); // slow start to 64
        BOOST_TEST(w.window() == 64u);
        w.on_loss(now += 1000 * us, 2);
        BOOST_TEST(w.window() == 1u);
        w.on_loss(now += 1000 * us, 3); // at the minimum already: the aim (32) stays
        BOOST_TEST(w.window() == 1u);
        // One chunk per result (a doubling per round trip) up to half of 64.
        now = feed(w, 31, 20 * us, now, us);
        BOOST_TEST(w.exact() == 32.0, boost::test_tools::tolerance(1e-9));
        // From there one chunk per window of results.
        now = feed(w, 32, 20 * us, now, us);
        BOOST_TEST(w.exact() > 32.9);
        BOOST_TEST(w.exact() < 33.1);
        // A deep queue (or a mark) during the slow start ends it there.
        w.on_loss(now += 1000 * us, 2);
        now = feed(w, 3, 20 * us, now, us);
        BOOST_TEST(w.exact() == 4.0, boost::test_tools::tolerance(1e-9));
        w.on_sample(20 * us, now += 1000 * us, false, 80); // 80 frames queued ahead: shrinks
        const double cut = w.exact();
        BOOST_TEST(cut < 4.0);
        // 8 results from 2 chunks: about four round trips, about one chunk
        // each (a slow start would have added 8).
        feed(w, 8, 20 * us, now, us);
        BOOST_TEST(w.exact() < cut + 3.0);
    }
}

BOOST_AUTO_TEST_CASE(the_base_delay_forgets_a_path_that_got_longer_after_two_epochs) {
    delay_window_params p;
    p.epoch_ns = 1'000'000'000;
    delay_window w(p);
    w.start(64, 0, false);
    w.on_sample(20 * us, 1000);
    BOOST_TEST(w.base() == 20 * us);
    // The base follows the smoothed round trip: one lucky sample pulls it
    // down by an eighth of the difference only.
    std::uint64_t now = feed(w, 100, 400 * us, 1000, us);
    BOOST_TEST(w.base() == 20 * us); // this epoch still remembers 20 us
    w.on_sample(40 * us, now += us);
    BOOST_TEST(w.srtt() > 350 * us);
    // The path now takes 400 us: the old base holds for this epoch and the next.
    w.on_sample(400 * us, 1'500'000'000);
    BOOST_TEST(w.base() == 20 * us);
    w.on_sample(400 * us, 2'500'000'000);
    BOOST_TEST(w.base() > 350 * us);
    BOOST_TEST(w.base() <= 400 * us);
    // A slow path gets headroom in proportion: target = base + base.
    BOOST_TEST(w.target() == 2 * w.base());
    // A fixed target replaces the base's.
    p.target_ns = 50 * us;
    BOOST_TEST(delay_window(p).target() == 50 * us);
}

BOOST_AUTO_TEST_CASE(the_operation_after_the_last_keeps_its_window_and_a_new_job_starts_over) {
    delay_window w;
    w.start(64, 0, false);
    std::uint64_t now = feed(w, 48, 20 * us, 0, us);
    w.on_loss(now);
    BOOST_TEST(w.window() == 32u);
    w.start(64, now + us, true);
    BOOST_TEST(w.window() == 32u);
    w.start(8, now + 2 * us, true); // a smaller pool caps it
    BOOST_TEST(w.window() == 8u);
    w.start(64, now + 3 * us, false);
    BOOST_TEST(w.window() == 16u);
    BOOST_TEST(w.base() == 0u);
}

// Closed loop: a bottleneck of one chunk per `per_chunk` ns behind a path of
// `base` ns. A window w keeps max(0, w - bdp) chunks queued, and each
// result reports the round trip that queue gives. The window settles where
// the round trip is near the target, with the link kept busy (w >= bdp):
// the queue is bounded by the target, not by the pool.
BOOST_AUTO_TEST_CASE(against_a_bottleneck_the_window_holds_the_queue_near_the_target_and_the_link_busy) {
    const std::uint64_t base = 50 * us, per_chunk = 5 * us; // bdp: 10 chunks
    delay_window w;
    w.start(256, 0, false);
    std::uint64_t now = 0;
    double lo = 1e9, hi = 0;
    std::uint64_t worst = 0;
    for (int i = 0; i < 20000; ++i) {
        const double inflight = w.exact();
        const double queued = std::max(0.0, inflight - static_cast<double>(base / per_chunk));
        const std::uint64_t rtt = base + static_cast<std::uint64_t>(queued * static_cast<double>(per_chunk));
        // Results come back one per chunk time while the link is busy.
        now += inflight >= 10.0 ? per_chunk : base / static_cast<std::uint64_t>(std::max(1.0, inflight));
        w.on_sample(rtt, now);
        if (i > 5000) {
            lo = std::min(lo, w.exact());
            hi = std::max(hi, w.exact());
            worst = std::max(worst, rtt);
        }
    }
    BOOST_TEST_MESSAGE("window " << lo << ".." << hi << " chunks, worst round trip " << worst / us << " us, target "
                                 << w.target() / us << " us");
    // The base is the smallest round trip seen: the first window (16) was
    // already past the bdp, so it holds some queue (80 us, not 50).
    BOOST_TEST(w.base() <= 2 * base);
    BOOST_TEST(lo >= 10.0);              // the link stays busy (at least the bdp)
    BOOST_TEST(hi <= 40.0);              // far below the pool of 256
    BOOST_TEST(worst <= 2 * w.target()); // the queue is bounded by the target
}

// ECN: marks echoed by the receiver shrink the window as DCTCP does, by
// alpha / 2 once per round trip, alpha the moving fraction of marked
// results (starting at 1: the first mark halves).
BOOST_AUTO_TEST_CASE(ecn_marks_shrink_the_window_by_the_marked_fraction) {
    delay_window w;
    w.start(64, 0, false);
    std::uint64_t now = feed(w, 48, 20 * us, 0, us); // slow start to 64, all under the target
    BOOST_TEST(w.window() == 64u);
    BOOST_TEST(w.alpha() == 1.0);
    // Three windows of unmarked results: alpha = (15/16)^3.
    now = feed(w, 3 * 64, 20 * us, now, us);
    BOOST_TEST(w.alpha() == 0.82397460937500, boost::test_tools::tolerance(1e-6));
    const double a = w.alpha();
    w.on_sample(20 * us, now += us, true);
    BOOST_TEST(w.exact() == 64.0 * (1 - a / 2), boost::test_tools::tolerance(1e-9));
    BOOST_TEST(w.marks() == 1u);
    // More marks within the round trip: no further cut, no growth either.
    const double once = w.exact();
    w.on_sample(20 * us, now += us, true);
    BOOST_TEST(w.exact() == once);
    // Every result marked: alpha climbs towards 1 and each round trip cuts.
    for (int i = 0; i < 2000; ++i) w.on_sample(20 * us, now += 10 * us, true);
    BOOST_TEST(w.alpha() > 0.9);
    BOOST_TEST(w.window() == 1u);
    // Marks stop: the window grows back (additively) under the target.
    now = feed(w, 200, 20 * us, now, 10 * us);
    BOOST_TEST(w.window() > 5u);
}

// railgated's echoed queue depth: above the depth target the window
// shrinks in proportion to the excess depth, once per round trip, with the
// round trip under its target; at or below it, the depth costs nothing.
BOOST_AUTO_TEST_CASE(an_echoed_queue_depth_above_the_target_shrinks_the_window) {
    delay_window w; // depth target 16
    w.start(64, 0, false);
    std::uint64_t now = feed(w, 48, 20 * us, 0, us);
    BOOST_TEST(w.window() == 64u);
    w.on_sample(20 * us, now += us, false, 16); // at the target: still grows
    BOOST_TEST(w.decreases() == 0u);
    BOOST_TEST(w.deep() == 0u);
    // 64 frames ahead: excess 48 / 64, x (1 - 0.8 * 0.75) = x 0.4, capped at x 0.5.
    w.on_sample(20 * us, now += us, false, 64);
    BOOST_TEST(w.exact() == 32.0, boost::test_tools::tolerance(1e-9));
    // 20 frames, a round trip later: excess 4 / 20: x 0.84.
    w.on_sample(20 * us, now += 30 * us, false, 20);
    BOOST_TEST(w.exact() == 32.0 * 0.84, boost::test_tools::tolerance(1e-9));
    // Within that round trip: no further cut, and no growth either.
    const double once = w.exact();
    w.on_sample(20 * us, now += us, false, 127);
    BOOST_TEST(w.exact() == once);
    BOOST_TEST(w.deep() == 3u);
    BOOST_TEST(w.decreases() == 2u);
    // A depth target of 0 ignores the depth.
    delay_window_params p;
    p.depth_target = 0;
    delay_window off(p);
    off.start(64, 0, false);
    feed(off, 48, 20 * us, 0, us);
    off.on_sample(20 * us, 100 * us, false, 127);
    BOOST_TEST(off.window() == 64u);
    BOOST_TEST(off.deep() == 0u);
}

// The queue mode (delay and single losses off): a round trip far above any
// target, as when the workers and railgated wait for shared cores, leaves
// the window alone, and so does a single loss; railgated's queue depth, ECN
// marks and timeouts in a row still shrink it.
BOOST_AUTO_TEST_CASE(in_the_queue_mode_only_depth_marks_and_timeouts_in_a_row_shrink_the_window) {
    const delay_window_params p = delay_window_params::queue_mode();
    BOOST_TEST(!p.delay);
    BOOST_TEST(!p.loss);
    delay_window w(p);
    w.start(64, 0, false);
    std::uint64_t now = feed(w, 8, 20 * us, 0, us);
    // Round trips 100x the base: growth goes on, no decrease.
    now = feed(w, 200, 2000 * us, now, us);
    BOOST_TEST(w.window() == 64u);
    BOOST_TEST(w.decreases() == 0u);
    // The same round trips with railgated's queue standing deep: it shrinks.
    for (int i = 0; i < 200; ++i) w.on_sample(2000 * us, now += 100 * us, false, 80);
    BOOST_TEST(w.window() < 8u);
    BOOST_TEST(w.decreases() > 3u);
    // The queue drains: it grows back, whatever the round trip.
    const unsigned low = w.window();
    feed(w, 400, 2000 * us, now, 100 * us);
    BOOST_TEST(w.window() > low + 3);
    // A mark counts; a single loss (RACK, or one timeout) does not; timeouts
    // in a row take it to the minimum.
    delay_window m(p);
    m.start(64, 0, false);
    now = feed(m, 48, 20 * us, 0, us);
    m.on_sample(20 * us, now += us, true);
    BOOST_TEST(m.exact() == 32.0, boost::test_tools::tolerance(1e-9)); // alpha starts at 1: halves
    m.on_loss(now += 1000 * us);
    m.on_loss(now += 1000 * us, 1);
    BOOST_TEST(m.exact() == 32.0, boost::test_tools::tolerance(1e-9));
    m.on_loss(now += 1000 * us, 2);
    BOOST_TEST(m.window() == 1u);
}

// Against a shaped rail whose queue railgated echoes: the queue mode holds
// the depth near its target and the link busy, though every round trip is
// padded with noise far above any delay target (cores shared).
BOOST_AUTO_TEST_CASE(against_a_shaped_rail_the_queue_mode_holds_the_depth_near_the_target) {
    const std::uint64_t base = 50 * us, per_chunk = 5 * us; // bdp: 10 chunks
    const delay_window_params p = delay_window_params::queue_mode();
    delay_window w(p);
    w.start(256, 0, false);
    std::uint64_t now = 0, noise = 12345;
    double lo = 1e9, hi = 0;
    unsigned deepest = 0;
    for (int i = 0; i < 20000; ++i) {
        const double inflight = w.exact();
        const double queued = std::max(0.0, inflight - static_cast<double>(base / per_chunk));
        noise = noise * 6364136223846793005ull + 1442695040888963407ull;
        const std::uint64_t rtt = base + static_cast<std::uint64_t>(queued * static_cast<double>(per_chunk)) +
                                  (noise >> 33) % (2000 * us);
        now += inflight >= 10.0 ? per_chunk : base / static_cast<std::uint64_t>(std::max(1.0, inflight));
        const unsigned depth = static_cast<unsigned>(std::min(127.0, queued));
        w.on_sample(rtt, now, false, depth);
        if (i > 5000) {
            lo = std::min(lo, w.exact());
            hi = std::max(hi, w.exact());
            deepest = std::max(deepest, depth);
        }
    }
    BOOST_TEST_MESSAGE("window " << lo << ".." << hi << " chunks, deepest queue " << deepest << " frames");
    BOOST_TEST(lo >= 10.0);       // the link stays busy
    BOOST_TEST(hi <= 10.0 + 40);  // far below the pool of 256
    BOOST_TEST(deepest <= 2 * p.depth_target);
}
