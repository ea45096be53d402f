// Selective signalling of verbs sends: a completion retires every send
// posted before it, in order, with each send's own tag, and the queue is
// never overfilled.
#define BOOST_TEST_MODULE verbs_ledger
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <vector>

#include "dataplane/verbs/rdma.hpp"

using railgate::verbs::send_ledger;
namespace verbs = railgate::verbs;

BOOST_AUTO_TEST_CASE(one_signalled_completion_retires_the_sends_before_it) {
    send_ledger l(64, 4);
    std::vector<std::uint64_t> signalled;
    for (std::uint64_t tag = 100; tag < 110; ++tag) {
        const std::uint64_t seq = l.next_seq();
        if (l.signal_next(false)) signalled.push_back(seq);
        l.posted(tag);
    }
    BOOST_TEST(signalled == (std::vector<std::uint64_t>{3, 7})); // every 4th
    std::vector<std::uint64_t> retired;
    l.complete(3, [&](std::uint64_t t) { retired.push_back(t); });
    BOOST_TEST(retired == (std::vector<std::uint64_t>{100, 101, 102, 103}));
    BOOST_TEST(l.in_flight() == 6u);
    l.complete(3, [&](std::uint64_t t) { retired.push_back(t); }); // a repeat retires nothing
    BOOST_TEST(retired.size() == 4u);
    retired.clear();
    l.drop_all([&](std::uint64_t t) { retired.push_back(t); });
    BOOST_TEST(retired == (std::vector<std::uint64_t>{104, 105, 106, 107, 108, 109}));
    BOOST_TEST(l.in_flight() == 0u);
}

BOOST_AUTO_TEST_CASE(tags_may_repeat_and_forced_sends_signal) {
    send_ledger l(64, 16);
    l.posted(7); // seq 0
    BOOST_TEST(l.signal_next(true));
    l.posted(7); // seq 1, the same tag again
    std::vector<std::uint64_t> retired;
    l.complete(1, [&](std::uint64_t t) { retired.push_back(t); });
    BOOST_TEST(retired == (std::vector<std::uint64_t>{7, 7}));
}

BOOST_AUTO_TEST_CASE(a_nearly_full_queue_signals_every_send_and_full_is_exact) {
    send_ledger l(8, 4);
    unsigned signalled = 0;
    for (unsigned i = 0; i < 8; ++i) {
        BOOST_TEST(!l.full());
        signalled += l.signal_next(false);
        l.posted(i);
    }
    BOOST_TEST(l.full());
    // From 4 in flight on (4 + every >= depth), each send asks for a completion.
    BOOST_TEST(signalled == 5u);
    l.complete(l.next_seq() - 1, [](std::uint64_t) {});
    BOOST_TEST(!l.full());
}

// The RC timers' IB encodings, their text, and a worker's overrides from
// its environment (all four set, then each bad one refused by name with s
// unchanged).
BOOST_AUTO_TEST_CASE(connect_attempts_spend_the_timeout_doubling) {
    using std::chrono::milliseconds;
    using v = std::vector<milliseconds>;
    const auto at = [](long total, long first) { return verbs::connect_attempts(milliseconds(total), milliseconds(first)); };
    BOOST_TEST((at(5000, 1000) == v{milliseconds(1000), milliseconds(2000), milliseconds(2000)})); // the worker's
    BOOST_TEST((at(7000, 1000) == v{milliseconds(1000), milliseconds(2000), milliseconds(4000)}));
    BOOST_TEST((at(3100, 1000) == v{milliseconds(1000), milliseconds(2100)})); // the 100 ms left goes to the last attempt
    BOOST_TEST((at(3600, 1000) == v{milliseconds(1000), milliseconds(2000), milliseconds(600)}));
    BOOST_TEST((at(5000, 0) == v{milliseconds(5000)}));   // no retries
    BOOST_TEST((at(800, 1000) == v{milliseconds(800)}));  // one attempt of the whole
    BOOST_TEST((at(1000, 1000) == v{milliseconds(1000)}));
    BOOST_TEST((at(5000, 4000) == v{milliseconds(5000)})); // 4 s and 1 s left: one attempt
    BOOST_TEST((at(0, 1000) == v{milliseconds(0)}));
    for (long total : {1L, 999L, 1500L, 5000L, 60000L, 3600000L})
        for (long first : {1L, 100L, 1000L, 4000L}) {
            const v w = at(total, first);
            milliseconds sum(0);
            for (std::size_t i = 0; i < w.size(); ++i) {
                sum += w[i];
                BOOST_TEST(w[i].count() > 0, total << ' ' << first);
                if (i > 0 && i + 1 < w.size()) BOOST_TEST(w[i] == 2 * w[i - 1], total << ' ' << first);
            }
            if (w.size() > 1) BOOST_TEST(2 * w.back().count() >= first, total << ' ' << first); // no too-short last attempt
            BOOST_TEST(sum.count() == total, total << ' ' << first);
            BOOST_TEST(w.front().count() == (w.size() == 1 ? total : first), total << ' ' << first);
            BOOST_TEST(w.size() <= 40u, total << ' ' << first);
        }
}

BOOST_AUTO_TEST_CASE(rc_timer_encodings_and_environment) {
    BOOST_TEST(verbs::ack_timeout_us(0) == 0.0); // no timeout
    BOOST_TEST(verbs::ack_timeout_us(14) == 4.096 * 16384);
    BOOST_TEST(verbs::ack_timeout_us(19) == 4.096 * 524288); // rdma_cm's on rxe: 2.1 s
    BOOST_TEST(verbs::rnr_timer_us(0) == 655360.0);
    BOOST_TEST(verbs::rnr_timer_us(1) == 10.0);
    BOOST_TEST(verbs::rnr_timer_us(12) == 640.0);
    BOOST_TEST(verbs::rnr_timer_us(31) == 491520.0);
    for (unsigned n = 2; n < 32; ++n) BOOST_TEST(verbs::rnr_timer_us(n) > verbs::rnr_timer_us(n - 1), n);
    using std::chrono::milliseconds;
    BOOST_TEST(verbs::ack_timeout_within(milliseconds(500)) == 16);  // 268 ms
    BOOST_TEST(verbs::ack_timeout_within(milliseconds(2500)) == 19); // 2.1 s
    BOOST_TEST(verbs::ack_timeout_within(milliseconds(125)) == 14);  // 67 ms
    // The defaults: the longest of which retry_count + 1 fit in railgated's
    // stall time or a worker's peer timeout.
    BOOST_TEST(verbs::default_ack_timeout(milliseconds(1000), 7) == 14); // 8 x 67 ms: stall_ms 1000, the default
    BOOST_TEST(verbs::default_ack_timeout(milliseconds(5000), 7) == 17); // 8 x 537 ms: the rxe faults' 5 s
    BOOST_TEST(verbs::default_ack_timeout(milliseconds(250), 7) == 12);  // 8 x 16.8 ms
    BOOST_TEST(verbs::default_ack_timeout(milliseconds(1000), 3) == 15); // 4 x 134 ms
    BOOST_TEST(verbs::default_ack_timeout(milliseconds(1000), 0) == 17); // one send: 537 ms
    BOOST_TEST(verbs::default_ack_timeout(milliseconds(1000), 9) == 14); // retry_count is 0..7
    for (unsigned retry = 0; retry <= 7; ++retry)
        for (unsigned ms : {100u, 1000u, 5000u, 60000u}) {
            const unsigned n = verbs::default_ack_timeout(milliseconds(ms), retry);
            BOOST_TEST((retry + 1) * verbs::ack_timeout_us(n) <= 1e3 * ms, retry << ' ' << ms);
            BOOST_TEST((retry + 1) * verbs::ack_timeout_us(n + 1) > 1e3 * ms, retry << ' ' << ms);
        }
    BOOST_TEST(verbs::ack_timeout_within(std::chrono::microseconds(16384 * 4096 / 1000 + 1)) == 14); // exactly 2^14 x 4.096 us
    BOOST_TEST(verbs::ack_timeout_within(milliseconds(1)) == 7);
    BOOST_TEST(verbs::ack_timeout_within(milliseconds(0)) == 1);     // never 0: no timeout at all
    BOOST_TEST(verbs::ack_timeout_within(std::chrono::hours(1000)) == 31);
    BOOST_TEST(verbs::describe(verbs::qp_timers{19, 7, 7, 0}) ==
               "ack timeout 19 (2.15 s), retry 7, rnr retry 7, min rnr timer 0 (655 ms)");
    verbs::qp_settings s;
    BOOST_TEST(verbs::describe_timers(s) == "ack timeout rdma_cm's, retry 7, rnr retry 7, min rnr timer 12 (0.64 ms)");
    for (const char* n : {"RAILGATE_IB_TIMEOUT", "RAILGATE_IB_RETRY_CNT", "RAILGATE_IB_RNR_RETRY", "RAILGATE_IB_MIN_RNR_TIMER",
                          "RAILGATE_IB_GID_INDEX"})
        unsetenv(n);
    BOOST_TEST(verbs::settings_from_env(s).empty());
    BOOST_TEST(s.gid_index == -1);
    BOOST_TEST((s.ack_timeout == 0 && s.retry_count == 7 && s.rnr_retry == 7 && s.min_rnr_timer == 12));
    setenv("RAILGATE_IB_TIMEOUT", "14", 1);
    setenv("RAILGATE_IB_RETRY_CNT", "2", 1);
    setenv("RAILGATE_IB_RNR_RETRY", "0", 1);
    setenv("RAILGATE_IB_MIN_RNR_TIMER", "31", 1);
    BOOST_TEST(verbs::settings_from_env(s).empty());
    BOOST_TEST((s.ack_timeout == 14 && s.retry_count == 2 && s.rnr_retry == 0 && s.min_rnr_timer == 31));
    BOOST_TEST(verbs::describe_timers(s) == "ack timeout 14 (67.1 ms), retry 2, rnr retry 0, min rnr timer 31 (492 ms)");
    const struct {
        const char *name, *value, *error;
    } bad[] = {{"RAILGATE_IB_TIMEOUT", "0", "RAILGATE_IB_TIMEOUT='0': must be an integer 1..31"},
               {"RAILGATE_IB_TIMEOUT", "32", "RAILGATE_IB_TIMEOUT='32': must be an integer 1..31"},
               {"RAILGATE_IB_RETRY_CNT", "8", "RAILGATE_IB_RETRY_CNT='8': must be an integer 0..7"},
               {"RAILGATE_IB_RNR_RETRY", "-1", "RAILGATE_IB_RNR_RETRY='-1': must be an integer 0..7"},
               {"RAILGATE_IB_MIN_RNR_TIMER", "12ms", "RAILGATE_IB_MIN_RNR_TIMER='12ms': must be an integer 0..31"},
               {"RAILGATE_IB_MIN_RNR_TIMER", "", "RAILGATE_IB_MIN_RNR_TIMER='': must be an integer 0..31"},
               {"RAILGATE_IB_TIMEOUT", "99999999999999999999", "RAILGATE_IB_TIMEOUT='99999999999999999999': must be an integer 1..31"}};
    for (const auto& b : bad) {
        const std::string keep = std::getenv(b.name);
        setenv(b.name, b.value, 1);
        verbs::qp_settings t;
        BOOST_TEST(verbs::settings_from_env(t) == b.error);
        BOOST_TEST((t.ack_timeout == 0 && t.retry_count == 7 && t.rnr_retry == 7 && t.min_rnr_timer == 12)); // unchanged
        setenv(b.name, keep.c_str(), 1);
    }
    // The GID index: taken where none is given, a given one kept; a bad
    // value named, whatever was given.
    setenv("RAILGATE_IB_GID_INDEX", "3", 1);
    verbs::qp_settings g;
    BOOST_TEST(verbs::settings_from_env(g).empty());
    BOOST_TEST(g.gid_index == 3);
    g.gid_index = 1;
    BOOST_TEST(verbs::settings_from_env(g).empty());
    BOOST_TEST(g.gid_index == 1);
    for (const char* v : {"256", "-1", "x", ""}) {
        setenv("RAILGATE_IB_GID_INDEX", v, 1);
        verbs::qp_settings t;
        t.gid_index = 2;
        BOOST_TEST(verbs::settings_from_env(t) == "RAILGATE_IB_GID_INDEX='" + std::string(v) + "': must be an integer 0..255");
        BOOST_TEST(t.gid_index == 2);
    }
    for (const char* n : {"RAILGATE_IB_TIMEOUT", "RAILGATE_IB_RETRY_CNT", "RAILGATE_IB_RNR_RETRY", "RAILGATE_IB_MIN_RNR_TIMER",
                          "RAILGATE_IB_GID_INDEX"})
        unsetenv(n);
}
