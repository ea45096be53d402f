// railgated's liveness check on a manual clock: when a loop counts as
// stuck, what is logged, and when systemd's watchdog is told.
#include <boost/test/unit_test.hpp>

#include <vector>

#include "dataplane/railgated/liveness.hpp"

using namespace railgate;
using namespace std::chrono_literals;
using live::liveness;

namespace {
std::vector<live::loop> loops(std::chrono::nanoseconds lcore1, std::chrono::nanoseconds v0) {
    return {{"lcore 1", lcore1}, {"verbs rail v0", v0}};
}
} // namespace

// No watchdog ($WATCHDOG_USEC unset): nothing is told; a loop silent for
// 5 s is logged once, and again when it goes round.
BOOST_AUTO_TEST_CASE(without_a_watchdog_a_stuck_loop_is_logged_once) {
    liveness l(0us);
    BOOST_TEST(l.stuck_after().count() == 5000);
    const auto t0 = liveness::clock::time_point{} + 1h;
    auto v = l.step(t0, loops(10ms, 80ms));
    BOOST_TEST(!v.ping);
    BOOST_TEST(v.stuck.empty());
    v = l.step(t0 + 5s, loops(5s, 90ms));
    BOOST_REQUIRE(v.stuck.size() == 1u);
    BOOST_TEST(v.stuck[0] == "lcore 1 has not gone round its loop for 5.0 s");
    BOOST_TEST(l.step(t0 + 6s, loops(6s, 10ms)).stuck.empty()); // said once
    BOOST_TEST(l.step(t0 + 7s, loops(7200ms, 10ms)).stuck.empty());
    v = l.step(t0 + 8s, loops(10ms, 10ms));
    BOOST_REQUIRE(v.back.size() == 1u);
    BOOST_TEST(v.back[0] == "lcore 1 goes round its loop again (it stopped for 7.2 s or more)");
    BOOST_TEST(!l.any_stuck());
}

// WatchdogSec=2: told at once and every second while every loop goes
// round; a loop silent for a second (half the interval) stops it, so
// systemd restarts railgated if it stays so; told again once it is back.
BOOST_AUTO_TEST_CASE(the_watchdog_is_told_only_while_every_loop_goes_round) {
    liveness l(2s);
    BOOST_TEST(l.stuck_after().count() == 1000);
    const auto t0 = liveness::clock::time_point{} + 1h;
    BOOST_TEST(l.step(t0, loops(10ms, 10ms)).ping);
    BOOST_TEST(!l.step(t0 + 500ms, loops(10ms, 10ms)).ping);
    BOOST_TEST(l.step(t0 + 1000ms, loops(10ms, 10ms)).ping);
    auto v = l.step(t0 + 2000ms, loops(10ms, 1100ms));
    BOOST_TEST(!v.ping);
    BOOST_REQUIRE(v.stuck.size() == 1u);
    BOOST_TEST(v.stuck[0] == "verbs rail v0 has not gone round its loop for 1.1 s: systemd's watchdog is no longer "
                             "told railgated is alive");
    for (auto t = 2100ms; t <= 4000ms; t += 100ms) BOOST_TEST(!l.step(t0 + t, loops(10ms, t - 900ms)).ping);
    v = l.step(t0 + 4100ms, loops(10ms, 20ms));
    BOOST_TEST(v.ping);
    BOOST_TEST(v.back.size() == 1u);
    BOOST_TEST(!l.step(t0 + 4200ms, loops(10ms, 20ms)).ping);
}

// A stuck loop that goes away (its rail removed) no longer holds the
// watchdog back; a watchdog interval shorter than the default stuck time
// sets it (half), and a longer one leaves it.
BOOST_AUTO_TEST_CASE(a_loop_that_goes_away_is_not_stuck) {
    liveness l(30s);
    BOOST_TEST(l.stuck_after().count() == 5000);
    const auto t0 = liveness::clock::time_point{} + 1h;
    BOOST_TEST(l.step(t0, loops(6s, 10ms)).stuck.size() == 1u);
    BOOST_TEST(!l.step(t0 + 20s, loops(26s, 10ms)).ping);
    const std::vector<live::loop> only_v0 = {{"verbs rail v0", 10ms}};
    BOOST_TEST(l.step(t0 + 21s, only_v0).ping);
    BOOST_TEST(!l.any_stuck());
}
