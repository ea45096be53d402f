// Selective signalling of verbs sends: a completion retires every send
// posted before it, in order, with each send's own tag, and the queue is
// never overfilled.
#define BOOST_TEST_MODULE verbs_ledger
#include <boost/test/unit_test.hpp>

#include <vector>

#include "dataplane/verbs/rdma.hpp"

using railgate::verbs::send_ledger;

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
