// When a verbs rail's thread looks at its clock (pass_clock.hpp), on a
// manual clock: busy passes look every 10 ms and are never taken for the
// thread's absence; idle passes do not read the clock; a gap where the
// thread did not run is an absence.
#define BOOST_TEST_MODULE verbs_pass_clock
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>

#include "dataplane/verbs/pass_clock.hpp"

using railgate::verbs::pass_clock;

namespace {
constexpr std::uint64_t ms = 1'000'000;
}

// 2 ms passes, each with work (a connection's completions reduced in the
// engine), for 2 s: a look at least every 12 ms, none an absence. Looking
// only every 256 passes, as the thread did, these would be 512 ms apart.
BOOST_AUTO_TEST_CASE(busy_passes_look_every_10_ms_and_are_no_absence) {
    BOOST_TEST(pass_clock::every_passes * 2 * ms >= pass_clock::away_ns); // the old rule's gap
    std::uint64_t t = 1000 * ms;
    pass_clock c(t);
    std::uint64_t last = t, widest = 0;
    unsigned looks = 0, absences = 0;
    for (unsigned pass = 1; pass <= 1000; ++pass) {
        t += 2 * ms;
        if (c.due(pass, true, [&] { return t; })) {
            if (c.look(t)) ++absences;
            widest = std::max(widest, t - last);
            last = t;
            ++looks;
        }
    }
    BOOST_TEST(absences == 0u);
    BOOST_TEST(widest <= 12 * ms);
    BOOST_TEST(looks >= 2000u / 12);
    BOOST_TEST(c.looked() == last);
}

// Idle passes: no clock read, a look every 256 passes.
BOOST_AUTO_TEST_CASE(idle_passes_do_not_read_the_clock) {
    pass_clock c(0);
    unsigned reads = 0, looks = 0;
    for (unsigned pass = 1; pass <= 1024; ++pass)
        if (c.due(pass, false, [&] {
                ++reads;
                return std::uint64_t{1} << 40;
            }))
            ++looks;
    BOOST_TEST(reads == 0u);
    BOOST_TEST(looks == 4u);
}

// A busy pass less than 10 ms after the last look does not look.
BOOST_AUTO_TEST_CASE(a_busy_pass_soon_after_a_look_does_not_look) {
    pass_clock c(100 * ms);
    BOOST_TEST(!c.due(1, true, [] { return 109 * ms; }));
    BOOST_TEST(c.due(1, true, [] { return 110 * ms; }));
    BOOST_TEST(c.due(256, false, [] { return 100 * ms; }));
}

// A gap of 250 ms or more between looks is an absence, of its length; a
// shorter one, or a clock that went back, is not.
BOOST_AUTO_TEST_CASE(a_gap_where_the_thread_did_not_run_is_an_absence) {
    pass_clock c(1000 * ms);
    BOOST_TEST(c.look(1300 * ms) == 300 * ms);
    BOOST_TEST(c.look(1549 * ms) == 0u);
    BOOST_TEST(c.look(1500 * ms) == 0u);
    BOOST_TEST(c.looked() == 1500 * ms);
    BOOST_TEST(c.look(1750 * ms) == 250 * ms);
}
