// The busy-task rule of an lcore of udp rails (shared_core.hpp) on a manual
// clock: what counts as a busy task, how long the core then counts as
// shared, when the loop sleeps at once, and the episodes it counts; and the
// weight its thread takes then (shared_weight.hpp).
#define BOOST_TEST_MODULE shared_core
#include <boost/test/unit_test.hpp>

#include <thread>

#include "dataplane/net/shared_core.hpp"
#include "dataplane/net/shared_weight.hpp"

using namespace railgate::net;

namespace {

constexpr std::uint64_t ms = 1000; // TSC cycles a millisecond on this clock
constexpr std::uint64_t ms_ns = 1000000; // a millisecond in ns

// An lcore's loop looking every 10 ms: each look adds what the thread
// waited and the times it got the CPU back since the last one.
struct loop {
    lcore_counters ctr;
    std::uint64_t now = 5 * ms;
    shared_core::sample s{};
    shared_core core{ms, now, s, ctr};

    // One look 10 ms on, having waited `waited_us` over `runs` returns to
    // the CPU and received `rx` bytes.
    void look(std::uint64_t waited_us, std::uint64_t runs = 1, std::uint64_t rx = 0) {
        now += shared_core::every_ms * ms;
        BOOST_REQUIRE(core.due(now));
        s.waited_ns += waited_us * 1000;
        s.runs += runs;
        s.rx_bytes += rx;
        core.look(now, s);
    }
    void looks(unsigned n, std::uint64_t waited_us, std::uint64_t runs = 1, std::uint64_t rx = 0) {
        for (unsigned i = 0; i < n; ++i) look(waited_us, runs, rx);
    }
    std::uint64_t episodes() const { return ctr.shared.load(); }
};

} // namespace

BOOST_AUTO_TEST_CASE(looks_only_every_ten_milliseconds) {
    loop l;
    BOOST_TEST(!l.core.due(l.now + 9 * ms));
    BOOST_TEST(l.core.due(l.now + 10 * ms));
}

BOOST_AUTO_TEST_CASE(a_busy_task_takes_eight_looks_in_a_row) {
    loop l;
    // A busy task's 4 ms slices: 4 ms waited in 10, one return each.
    l.looks(shared_core::contended_looks - 1, 4000);
    BOOST_TEST(!l.core.shared(l.now));
    BOOST_TEST(!l.core.sleep_at_once(l.now));
    BOOST_TEST(l.episodes() == 0u);
    l.look(4000);
    BOOST_TEST(l.core.shared(l.now));
    BOOST_TEST(l.core.sleep_at_once(l.now));
    BOOST_TEST(l.episodes() == 1u);
}

BOOST_AUTO_TEST_CASE(a_process_starting_there_does_not_count) {
    loop l;
    // 50 ms of a start (five looks), a quiet look, then five more: never
    // eight in a row.
    l.looks(5, 4000);
    l.look(0);
    l.looks(5, 4000);
    BOOST_TEST(!l.core.shared(l.now));
    BOOST_TEST(l.episodes() == 0u);
}

BOOST_AUTO_TEST_CASE(short_or_brief_waits_are_no_busy_task) {
    loop l;
    // Under 0.5 ms a look: a loop that is merely not alone.
    l.looks(20, 400);
    BOOST_TEST(!l.core.shared(l.now));
    // 2 ms in 10 runs, 200 us a time: a task that runs briefly there (a
    // worker woken by its result), which yielding serves faster.
    l.looks(20, 2000, 10);
    BOOST_TEST(!l.core.shared(l.now));
    // The same 2 ms in 5 runs, 400 us a time: a busy task.
    l.looks(8, 2000, 5);
    BOOST_TEST(l.core.shared(l.now));
}

BOOST_AUTO_TEST_CASE(a_twentieth_of_the_time_since_the_last_look) {
    loop l;
    // Looks 100 ms apart (a loop busy in between): 4 ms waited is under a
    // twentieth (5 ms), 6 ms is not.
    for (int i = 0; i < 10; ++i) {
        l.now += 100 * ms;
        l.s.waited_ns += 4000000;
        l.s.runs += 1;
        l.core.look(l.now, l.s);
    }
    BOOST_TEST(!l.core.shared(l.now));
    for (int i = 0; i < 8; ++i) {
        l.now += 100 * ms;
        l.s.waited_ns += 6000000;
        l.s.runs += 1;
        l.core.look(l.now, l.s);
    }
    BOOST_TEST(l.core.shared(l.now));
}

BOOST_AUTO_TEST_CASE(shared_until_half_a_second_after_the_last_busy_look) {
    loop l;
    l.looks(shared_core::contended_looks, 4000);
    const std::uint64_t last_busy = l.now;
    // A look that sees the busy task keeps it shared for 500 ms more; a
    // quiet one does not end it.
    l.look(0);
    BOOST_TEST(l.core.shared(l.now));
    BOOST_TEST(l.core.shared(last_busy + shared_core::contended_ms * ms - 1));
    BOOST_TEST(!l.core.shared(last_busy + shared_core::contended_ms * ms));
    l.look(4000); // seen again: renewed from here
    const std::uint64_t renewed = l.now;
    BOOST_TEST(l.core.shared(renewed + shared_core::contended_ms * ms - 1));
    BOOST_TEST(l.episodes() == 1u);
    // Quiet from here on: shared until renewed + 500 ms, and the time is
    // counted up to then, not past it.
    l.looks(60, 0);
    BOOST_TEST(!l.core.shared(l.now));
    const std::uint64_t shared_ms = (renewed + shared_core::contended_ms * ms - (last_busy)) / ms;
    BOOST_TEST(l.ctr.shared_ns.load() == shared_ms * 1000000);
    // Seen again after it ended: eight more looks, a second episode.
    l.looks(shared_core::contended_looks - 1, 4000);
    BOOST_TEST(!l.core.shared(l.now));
    l.look(4000);
    BOOST_TEST(l.core.shared(l.now));
    BOOST_TEST(l.episodes() == 2u);
}

BOOST_AUTO_TEST_CASE(short_waits_keep_it_shared_once_it_is) {
    loop l;
    l.looks(shared_core::contended_looks, 4000);
    // The loop now naps (or sleeps) and takes the core back many times a
    // look, each after a short wait: 1.5 ms in 100 runs, 15 us a time.
    l.looks(100, 1500, 100);
    BOOST_TEST(l.core.shared(l.now));
    BOOST_TEST(l.episodes() == 1u);
    // The busy task gone: waits under 0.5 ms a look end it 500 ms after
    // the last look that saw it.
    const std::uint64_t last = l.now;
    l.looks(49, 300, 100);
    BOOST_TEST(l.core.shared(l.now));
    l.look(300, 100);
    BOOST_TEST(!l.core.shared(l.now));
    BOOST_TEST(l.now == last + shared_core::contended_ms * ms);
    // Short waits alone do not make it shared again.
    l.looks(100, 1500, 100);
    BOOST_TEST(!l.core.shared(l.now));
}

// Napping or sleeping beside the busy task at its weight, the loop's
// waits no longer show the task: every 200 ms a probe says whether another
// task took the core (its CPU's time, or a yield that lost the core).
BOOST_AUTO_TEST_CASE(probes_keep_the_core_shared_while_they_see_the_task) {
    loop l;
    BOOST_TEST(!l.core.probe_due(l.now)); // not shared: no probes
    l.looks(shared_core::contended_looks, 4000);
    // No waits at all: probes that saw the task keep it shared past 500 ms...
    unsigned probes = 0;
    for (int i = 0; i < 100; ++i) {
        l.look(0);
        if (l.core.probe_due(l.now)) {
            l.core.probed(l.now, true);
            ++probes;
        }
        BOOST_TEST(!l.core.probe_due(l.now));
    }
    BOOST_TEST(probes == 5u); // one every 200 ms of the 1 s
    BOOST_TEST(l.core.shared(l.now));
    BOOST_TEST(l.episodes() == 1u);
    // ...and probes that did not let it end.
    for (int i = 0; i < 60; ++i) {
        l.look(0);
        if (l.core.probe_due(l.now)) l.core.probed(l.now, false);
    }
    BOOST_TEST(!l.core.shared(l.now));
    BOOST_TEST(!l.core.probe_due(l.now));
    // A probe while not shared does not make it shared.
    l.core.probed(l.now, true);
    BOOST_TEST(!l.core.shared(l.now));
}

// Where the loop reads its CPU's time, only its probes keep the core
// shared: short waits (a process started there every 100 ms, a busy host)
// no longer do.
BOOST_AUTO_TEST_CASE(reading_cpu_time_only_probes_keep_it_shared) {
    loop l;
    l.core.keep_by_probes();
    l.looks(shared_core::contended_looks, 4000); // entered by its waits, as before
    BOOST_TEST(l.core.shared(l.now));
    // 1 ms waited in each 10 ms look, in 10 short pieces: no longer kept...
    for (int i = 0; i < 60; ++i) {
        l.look(1000, 10);
        if (l.core.probe_due(l.now)) l.core.probed(l.now, false);
    }
    BOOST_TEST(!l.core.shared(l.now));
    BOOST_TEST(l.episodes() == 1u);
    // ...while probes that see the task keep it, waits or none.
    l.looks(shared_core::contended_looks, 4000);
    for (int i = 0; i < 100; ++i) {
        l.look(0);
        if (l.core.probe_due(l.now)) l.core.probed(l.now, true);
    }
    BOOST_TEST(l.core.shared(l.now));
    BOOST_TEST(l.episodes() == 2u);
}

BOOST_AUTO_TEST_CASE(a_probe_reads_other_tasks_time_or_a_yield) {
    // Others took a quarter of the time since the last probe or more.
    BOOST_TEST(shared_core::others_busy(50 * ms_ns, 200 * ms_ns));
    BOOST_TEST(shared_core::others_busy(190 * ms_ns, 200 * ms_ns));
    BOOST_TEST(!shared_core::others_busy(40 * ms_ns, 200 * ms_ns)); // a shell loop's forks, a worker woken now and then
    BOOST_TEST(!shared_core::others_busy(0, 200 * ms_ns));
    BOOST_TEST(!shared_core::others_busy(5, 0)); // no time passed: no verdict
    // A yield that lost the core for a 4 ms tick, or came straight back.
    loop l;
    BOOST_TEST(l.core.yield_lost(4 * ms));
    BOOST_TEST(!l.core.yield_lost(ms / 100));
}

// /proc/stat's line of one CPU: user nice system idle iowait irq softirq
// steal guest guest_nice, in ticks; tasks ran user + nice + system.
BOOST_AUTO_TEST_CASE(cpu_busy_ticks_reads_one_cpus_line) {
    const std::string_view stat = "cpu  6066747 132 2237856 3208720 8197 0 153967 0 0 0\n"
                                  "cpu0 2960692 29 1130483 1670093 1951 0 72422 0 0 0\n"
                                  "cpu1 3106054 103 1107372 1538627 6245 5 81544 77 0 0\n"
                                  "cpu10 1 2 3 4 5 6 7 8 9 10\n"
                                  "intr 123 0 0\n";
    std::uint64_t t = 0;
    BOOST_TEST(cpu_busy_ticks(stat, 0, t));
    BOOST_TEST(t == 2960692u + 29 + 1130483);
    BOOST_TEST(cpu_busy_ticks(stat, 1, t));
    BOOST_TEST(t == 3106054u + 103 + 1107372);
    BOOST_TEST(cpu_busy_ticks(stat, 10, t)); // not cpu1's line
    BOOST_TEST(t == 1u + 2 + 3);
    BOOST_TEST(!cpu_busy_ticks(stat, 2, t)); // no such CPU
    // Cut short (a buffer too small), or not numbers: false.
    BOOST_TEST(!cpu_busy_ticks("cpu0 1 2 3\n", 0, t));
    BOOST_TEST(!cpu_busy_ticks("cpu0 1 x 3 4 5 6 7\n", 0, t));
    BOOST_TEST(!cpu_busy_ticks("", 0, t));
    BOOST_TEST(!cpu_busy_ticks("cpu0", 0, t));
}

BOOST_AUTO_TEST_CASE(heavy_traffic_yields_even_when_shared) {
    loop l;
    l.looks(shared_core::contended_looks, 4000);
    BOOST_TEST(l.core.sleep_at_once(l.now));
    // 60 kB a millisecond over the last look: bulk, which batches better
    // when the loop yields.
    l.look(4000, 1, 600000);
    BOOST_TEST(l.core.shared(l.now));
    BOOST_TEST(!l.core.sleep_at_once(l.now));
    // 40 kB a millisecond: latency-bound again.
    l.look(4000, 1, 400000);
    BOOST_TEST(l.core.sleep_at_once(l.now));
}

// The weight a sleeping loop takes while its core is shared
// (shared_weight.hpp), on a thread of its own: nice -10 when raised (where
// this process may raise it), the thread's own nice again when lowered and
// when the weight goes out of scope (the EAL's thread serves the next
// daemon's loop).
BOOST_AUTO_TEST_CASE(weight_raised_while_shared_and_put_back) {
    std::thread([] {
        int own = 0, now = 0;
        BOOST_REQUIRE(thread_nice(own));
        const bool may = can_raise_weight();
        BOOST_REQUIRE(thread_nice(now));
        BOOST_TEST(now == own); // the try put it back
        {
            shared_weight w;
            w.raise(true);
            BOOST_REQUIRE(thread_nice(now));
            BOOST_TEST(now == (may ? shared_weight::nice_shared : own));
            w.raise(true); // again: no change
            BOOST_REQUIRE(thread_nice(now));
            BOOST_TEST(now == (may ? shared_weight::nice_shared : own));
            w.raise(false);
            BOOST_REQUIRE(thread_nice(now));
            BOOST_TEST(now == own);
            w.raise(true);
        }
        BOOST_REQUIRE(thread_nice(now));
        BOOST_TEST(now == own);
    }).join();
}

// A thread already weighing more than nice -10 keeps its own nice.
BOOST_AUTO_TEST_CASE(weight_never_lowers_a_heavier_thread) {
    std::thread([] {
        if (!set_thread_nice(-15)) {
            BOOST_TEST_MESSAGE("may not raise this thread's priority: case not applicable");
            return;
        }
        int now = 0;
        {
            shared_weight w;
            w.raise(true);
            BOOST_REQUIRE(thread_nice(now));
            BOOST_TEST(now == -15);
        }
        BOOST_REQUIRE(thread_nice(now));
        BOOST_TEST(now == -15);
    }).join();
}

// [daemon] shared_nice: the weight taken is the one configured; 0 never
// changes the thread's nice.
BOOST_AUTO_TEST_CASE(weight_as_configured) {
    std::thread([] {
        int own = 0, now = 0;
        BOOST_REQUIRE(thread_nice(own));
        {
            shared_weight off(0);
            off.raise(true);
            BOOST_REQUIRE(thread_nice(now));
            BOOST_TEST(now == own);
        }
        if (!can_raise_weight(-5)) {
            BOOST_TEST_MESSAGE("may not raise this thread's priority: the rest is not applicable");
            return;
        }
        {
            shared_weight w(-5);
            w.raise(true);
            BOOST_REQUIRE(thread_nice(now));
            BOOST_TEST(now == -5);
            w.raise(false);
            BOOST_REQUIRE(thread_nice(now));
            BOOST_TEST(now == own);
        }
    }).join();
}
