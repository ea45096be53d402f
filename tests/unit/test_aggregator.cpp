// The slot pool: rank-order results whatever the arrival order, every drop
// reason, and exact ownership (each accepted buffer released exactly once).
#define BOOST_TEST_MODULE aggregator
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "dataplane/agg/aggregator.hpp"

using namespace railgate;

namespace {

std::map<void*, int>& released() {
    static std::map<void*, int> m;
    return m;
}

struct test_release {
    void operator()(void* owner) const noexcept { ++released()[owner]; }
};

using aggregator = agg::rail_aggregator<test_release>;

// Rank r joins from address 100 + r.
agg::peer peer_of(unsigned r) { return {100 + r, 100 + r, 7}; }

// A LEAVE of rank r for the job's incarnation in a (what JOIN_ACK told).
template <class A>
wire::header leave_of(A& a, std::uint16_t rank) {
    wire::header h;
    h.type = wire::msg_type::leave;
    h.job_id = 1;
    h.job_token = 42;
    h.rank = rank;
    h.world_size = 3;
    h.gen = a.find(1)->instance;
    return h;
}

wire::header hdr(wire::msg_type t, std::uint16_t rank, std::uint16_t world = 3) {
    wire::header h;
    h.type = t;
    h.job_id = 1;
    h.job_token = 42;
    h.rank = rank;
    h.world_size = world;
    return h;
}

void join_all(aggregator& a, unsigned world, std::uint64_t max_count = 1 << 20, std::uint16_t pool = 4) {
    for (unsigned r = 0; r < world; ++r) {
        wire::join_body b;
        b.max_count = max_count;
        b.pool_size = pool;
        frame::endpoint e;
        e.ip = 100 + r;
        BOOST_REQUIRE(a.join(hdr(wire::msg_type::join, static_cast<std::uint16_t>(r), static_cast<std::uint16_t>(world)), b, e,
                             peer_of(r), 0)
                          .st == agg::join_status::joined);
    }
}

wire::header contrib(std::uint16_t rank, std::uint16_t slot, std::uint64_t off, std::uint16_t count,
                     std::uint32_t gen = 0, std::uint16_t world = 3) {
    wire::header h = hdr(wire::msg_type::contrib, rank, world);
    h.slot = slot;
    h.offset = off;
    h.count = count;
    h.gen = gen;
    return h;
}

const reduce::kernels& k() { return reduce::best(); }

agg::limits small() {
    agg::limits l;
    l.max_jobs = 2;
    l.max_pool = 8;
    l.job_chunk_bytes = 64; // 16 fp32
    return l;
}

} // namespace

BOOST_AUTO_TEST_CASE(every_arrival_order_gives_rank_order_sum) {
    // 1e8, 1, -1e8: rank order gives 0; any other association gives 1.
    std::vector<int> order = {0, 1, 2};
    do {
        released().clear();
        aggregator a(small());
        join_all(a, 3);
        std::vector<float> buf[3] = {{1e8f, 2.f}, {1.f, 3.f}, {-1e8f, 4.f}};
        agg::outcome o;
        for (int i = 0; i < 3; ++i) {
            const int r = order[i];
            o = a.contribute(contrib(static_cast<std::uint16_t>(r), 0, 0, 2), buf[r].data(), &buf[r], k());
            BOOST_TEST(static_cast<int>(o.act) == static_cast<int>(i < 2 ? agg::action::stored : agg::action::completed));
        }
        BOOST_TEST(o.s->result_payload == buf[0].data());
        BOOST_TEST(o.s->result_owner == &buf[0]);
        BOOST_TEST(buf[0][0] == 0.f);
        BOOST_TEST(buf[0][1] == 9.f);
        BOOST_TEST(released().size() == 2u);
        BOOST_TEST(released()[&buf[1]] == 1);
        BOOST_TEST(released()[&buf[2]] == 1);
        BOOST_TEST(o.s->gen == 1u);
    } while (std::next_permutation(order.begin(), order.end()));
}

BOOST_AUTO_TEST_CASE(each_bad_contribution_is_dropped_with_its_reason) {
    released().clear();
    aggregator a(small());
    join_all(a, 3, 100);
    float data[16] = {};
    auto expect = [&](wire::header h, drop_reason r) {
        const agg::outcome o = a.contribute(h, data, data, k());
        BOOST_TEST(static_cast<int>(o.act) == static_cast<int>(agg::action::dropped));
        BOOST_TEST(drop_reason_name(o.reason) == drop_reason_name(r));
    };
    auto h = contrib(0, 0, 0, 16); h.job_id = 2; expect(h, drop_reason::unknown_job);
    h = contrib(0, 0, 0, 16); h.job_token = 43; expect(h, drop_reason::bad_token);
    h = contrib(0, 0, 0, 16); h.dt = wire::dtype::bf16; expect(h, drop_reason::dtype_mismatch);
    h = contrib(0, 0, 0, 16, 0, 4); expect(h, drop_reason::world_mismatch);
    expect(contrib(0, 4, 0, 16), drop_reason::slot_range);
    expect(contrib(0, 0, 0, 17), drop_reason::count_range);
    expect(contrib(0, 0, 90, 16), drop_reason::job_offset_range);
    expect(contrib(0, 0, 0, 16, 1), drop_reason::bad_generation);
    expect(contrib(0, 0, 0, 16, 0xffffffffu), drop_reason::stale_no_result);

    float r0[16] = {}, r1[16] = {};
    BOOST_TEST(static_cast<int>(a.contribute(contrib(0, 0, 0, 16), r0, r0, k()).act) ==
               static_cast<int>(agg::action::stored));
    expect(contrib(0, 0, 0, 16), drop_reason::duplicate);
    expect(contrib(1, 0, 16, 16), drop_reason::wrong_rail_or_slot);
    expect(contrib(1, 0, 8, 8), drop_reason::chunk_misaligned);
    expect(contrib(1, 0, 0, 8), drop_reason::chunk_mismatch);
    // None of the drops touched the slot or released anything.
    BOOST_TEST(released().empty());
    BOOST_TEST(static_cast<int>(a.contribute(contrib(1, 0, 0, 16), r1, r1, k()).act) ==
               static_cast<int>(agg::action::stored));
    BOOST_TEST(a.find(1)->slots[0].bitmap == 3u);

    // A rank that left cannot contribute.
    aggregator b(small());
    join_all(b, 3);
    auto stale = leave_of(b, 2);
    stale.gen ^= 1; // for an earlier incarnation of the job
    BOOST_TEST(drop_reason_name(b.leave(stale, 102)) == "leave_unknown");
    BOOST_TEST(drop_reason_name(b.leave(leave_of(b, 2), 102)) == "none");
    const agg::outcome o = b.contribute(contrib(2, 0, 0, 16), data, data, k());
    BOOST_TEST(drop_reason_name(o.reason) == "rank_not_joined");
}

BOOST_AUTO_TEST_CASE(only_the_address_a_rank_joined_from_speaks_for_it) {
    released().clear();
    aggregator a(small());
    join_all(a, 3);
    float data[16] = {};
    // Rank 1's contribution, LEAVE from rank 0's address (or any other).
    BOOST_TEST(drop_reason_name(a.contribute(contrib(1, 0, 0, 16), data, data, k(), 0, 100).reason) == "not_member");
    BOOST_TEST(drop_reason_name(a.contribute(contrib(1, 0, 0, 16), data, data, k(), 0, 999).reason) == "not_member");
    BOOST_TEST(drop_reason_name(a.leave(leave_of(a, 1), 100)) == "not_member");
    BOOST_TEST(a.find(1)->joined == 7u);
    BOOST_TEST(static_cast<int>(a.contribute(contrib(1, 0, 0, 16), data, data, k(), 0, 101).act) ==
               static_cast<int>(agg::action::stored));
    BOOST_TEST(released().empty());
}

// A rank sends again a contribution the slot holds, waiting for another
// rank's: HELD (it is not lost), the stored copy kept and the new one the
// caller's; the copy the wire duplicated is dropped. The slot then
// completes with the first copy.
BOOST_AUTO_TEST_CASE(retransmit_of_held_contribution_is_held) {
    released().clear();
    aggregator a(small());
    join_all(a, 3, 1000);
    float x[3][16] = {};
    x[0][0] = 1;
    x[1][0] = 2;
    x[2][0] = 4;
    BOOST_TEST(static_cast<int>(a.contribute(contrib(0, 1, 16, 16, 0, 3), x[0], x[0], k()).act) ==
               static_cast<int>(agg::action::stored));
    BOOST_TEST(static_cast<int>(a.contribute(contrib(1, 1, 16, 16, 0, 3), x[1], x[1], k()).act) ==
               static_cast<int>(agg::action::stored));
    float again[16] = {};
    again[0] = 100;
    BOOST_TEST(drop_reason_name(a.contribute(contrib(1, 1, 16, 16, 0, 3), again, again, k()).reason) == "duplicate");
    auto re = contrib(1, 1, 16, 16, 0, 3);
    re.flags = wire::flag_retransmit;
    const agg::outcome h = a.contribute(re, again, again, k());
    BOOST_TEST(static_cast<int>(h.act) == static_cast<int>(agg::action::held));
    BOOST_REQUIRE(h.s != nullptr);
    BOOST_TEST(h.s->bitmap == 3u); // ranks 0 and 1: the slot waits for rank 2
    BOOST_TEST(released().empty());
    const agg::outcome c = a.contribute(contrib(2, 1, 16, 16, 0, 3), x[2], x[2], k());
    BOOST_TEST(static_cast<int>(c.act) == static_cast<int>(agg::action::completed));
    BOOST_TEST(static_cast<const float*>(c.s->result_payload)[0] == 7.0f);
}

// A PING naming a chunk (a worker's timeout asks before it resends):
// held while the slot holds the rank's contribution, resend once the
// generation completed (its result kept), dropped (not here: the rank
// sends it) for a rank that has not contributed, another chunk or
// generation, a slot out of range. Nothing changes.
BOOST_AUTO_TEST_CASE(a_ping_naming_a_chunk_is_answered_as_its_retransmit) {
    released().clear();
    aggregator a(small());
    join_all(a, 2, 1000);
    const auto ask = [&](std::uint16_t rank, std::uint16_t slot, std::uint64_t off, std::uint16_t count,
                         std::uint32_t gen) {
        wire::header p = hdr(wire::msg_type::ping, rank, 2);
        p.slot = slot;
        p.offset = off;
        p.count = count;
        p.aux = gen;
        return static_cast<int>(a.query(*a.find(1), p).act);
    };
    constexpr int held = static_cast<int>(agg::action::held), resend = static_cast<int>(agg::action::resend),
                  missing = static_cast<int>(agg::action::dropped);
    float x[2][16] = {};
    BOOST_TEST(ask(0, 1, 16, 16, 0) == missing);
    a.contribute(contrib(0, 1, 16, 16, 0, 2), x[0], x[0], k());
    BOOST_TEST(ask(0, 1, 16, 16, 0) == held);
    BOOST_TEST(ask(1, 1, 16, 16, 0) == missing); // rank 1's is not here
    BOOST_TEST(ask(0, 1, 32, 16, 0) == missing); // another chunk
    BOOST_TEST(ask(0, 1, 16, 8, 0) == missing);
    BOOST_TEST(ask(0, 1, 16, 16, 1) == missing); // another generation
    BOOST_TEST(ask(0, 9, 16, 16, 0) == missing); // no such slot
    BOOST_TEST(a.find(1)->slots[1].bitmap == 1u);
    BOOST_TEST(static_cast<int>(a.contribute(contrib(1, 1, 16, 16, 0, 2), x[1], x[1], k()).act) ==
               static_cast<int>(agg::action::completed));
    BOOST_TEST(ask(0, 1, 16, 16, 0) == resend);
    BOOST_TEST(ask(1, 1, 16, 16, 0) == resend);
    BOOST_TEST(ask(1, 1, 16, 16, 1) == missing); // the next generation: not begun
    BOOST_TEST(ask(1, 1, 16, 8, 0) == missing);
}

BOOST_AUTO_TEST_CASE(retransmit_of_completed_generation_resends_result) {
    released().clear();
    aggregator a(small());
    join_all(a, 2, 1000);
    float x[2][16] = {};
    a.contribute(contrib(0, 1, 16, 16, 0, 2), x[0], x[0], k());
    BOOST_TEST(static_cast<int>(a.contribute(contrib(1, 1, 16, 16, 0, 2), x[1], x[1], k()).act) ==
               static_cast<int>(agg::action::completed));
    float again[16] = {};
    // A copy the wire duplicated (no RETRANSMIT flag): the result is on its way.
    const agg::outcome d = a.contribute(contrib(1, 1, 16, 16, 0, 2), again, again, k());
    BOOST_TEST(drop_reason_name(d.reason) == "duplicate");
    auto re = contrib(1, 1, 16, 16, 0, 2);
    re.flags = wire::flag_retransmit;
    const agg::outcome o = a.contribute(re, again, again, k());
    BOOST_TEST(static_cast<int>(o.act) == static_cast<int>(agg::action::resend));
    BOOST_TEST(o.s->result_payload == x[0]);
    // Different chunk under the old generation: not a retransmit.
    re.offset = 80;
    const agg::outcome p = a.contribute(re, again, again, k());
    BOOST_TEST(drop_reason_name(p.reason) == "stale_no_result");
}

// The integrity check at completion: contributions a port verified are not
// summed; the others' checksums are checked against the sums the reduce
// computed. A corrupted one is released (or dropped, arriving), rank 0's
// too (reduced into), the others stay, and the slot completes when those
// ranks send again.
struct test_check {
    const std::map<void*, std::uint16_t>* want; // owner -> its payload's ones' sum
    const std::vector<void*>* verified_by_port;
    mutable unsigned asked = 0;
    bool verified(void* o) const noexcept {
        return std::find(verified_by_port->begin(), verified_by_port->end(), o) != verified_by_port->end();
    }
    bool ok(void* o, std::uint16_t sum) const noexcept {
        ++asked;
        return want->at(o) == sum;
    }
    bool whole(void* o) const noexcept { return want->at(o) == frame::ones_sum16(o, 16 * sizeof(float)); }
};

// A damaged header can put a contribution first into a slot with the wrong
// chunk (here its count); its checksum is only read at the reduce. The
// ranks' real ones must not be refused for good: the first disagreeing one
// has the stored ones checked whole, the damaged one goes, the slot
// completes right.
BOOST_AUTO_TEST_CASE(a_damaged_first_contribution_does_not_hold_its_slot) {
    released().clear();
    aggregator a(small());
    join_all(a, 3, 1000);
    float x[3][16];
    for (unsigned r = 0; r < 3; ++r)
        for (unsigned i = 0; i < 16; ++i) x[r][i] = static_cast<float>(r * 100 + i);
    std::map<void*, std::uint16_t> sums;
    for (unsigned r = 0; r < 3; ++r) sums[x[r]] = frame::ones_sum16(x[r], sizeof x[r]);
    std::vector<void*> by_port;
    test_check c{&sums, &by_port};
    float damaged[16];
    std::memcpy(damaged, x[0], sizeof damaged);
    sums[damaged] = static_cast<std::uint16_t>(sums[x[0]] ^ 0x40); // its checksum fails
    BOOST_TEST(static_cast<int>(a.contribute(contrib(0, 0, 0, 8), damaged, damaged, k(), 0, 0, c).act) ==
               static_cast<int>(agg::action::stored));
    agg::outcome o = a.contribute(contrib(1, 0, 0, 16), x[1], x[1], k(), 0, 0, c);
    BOOST_TEST(static_cast<int>(o.act) == static_cast<int>(agg::action::stored));
    BOOST_TEST(o.corrupted == 1u);
    BOOST_TEST(released()[damaged] == 1);
    // An intact one that disagrees is refused; the stored one stays.
    o = a.contribute(contrib(2, 0, 0, 8), x[2], x[2], k(), 0, 0, c);
    BOOST_TEST(drop_reason_name(o.reason) == "chunk_mismatch");
    BOOST_TEST(released().count(x[1]) == 0u);
    a.contribute(contrib(2, 0, 0, 16), x[2], x[2], k(), 0, 0, c);
    o = a.contribute(contrib(0, 0, 0, 16), x[0], x[0], k(), 0, 0, c);
    BOOST_TEST(static_cast<int>(o.act) == static_cast<int>(agg::action::completed));
    for (unsigned i = 0; i < 16; ++i) BOOST_TEST(x[0][i] == static_cast<float>(300 + 3 * i));
}

BOOST_AUTO_TEST_CASE(corrupted_contributions_are_found_when_the_slot_reduces) {
    released().clear();
    aggregator a(small());
    join_all(a, 3, 1000);
    float x[3][16], good[3][16];
    for (unsigned r = 0; r < 3; ++r)
        for (unsigned i = 0; i < 16; ++i) good[r][i] = static_cast<float>(r * 100 + i);
    std::memcpy(x, good, sizeof x);
    std::map<void*, std::uint16_t> sums;
    for (unsigned r = 0; r < 3; ++r) sums[x[r]] = frame::ones_sum16(good[r], sizeof good[r]);
    std::vector<void*> by_port;
    test_check c{&sums, &by_port};
    x[1][3] = 7.5f; // rank 1's payload damaged after its checksum
    BOOST_TEST(static_cast<int>(a.contribute(contrib(0, 0, 0, 16), x[0], x[0], k(), 0, 0, c).act) ==
               static_cast<int>(agg::action::stored));
    BOOST_TEST(static_cast<int>(a.contribute(contrib(1, 0, 0, 16), x[1], x[1], k(), 0, 0, c).act) ==
               static_cast<int>(agg::action::stored));
    agg::outcome o = a.contribute(contrib(2, 0, 0, 16), x[2], x[2], k(), 0, 0, c);
    BOOST_TEST(static_cast<int>(o.act) == static_cast<int>(agg::action::stored)); // rank 2's stays
    BOOST_TEST(o.corrupted == 1u);
    BOOST_TEST(o.discarded == 1u);
    BOOST_TEST(released()[x[0]] == 1);
    BOOST_TEST(released()[x[1]] == 1);
    BOOST_TEST(released().count(x[2]) == 0u);
    BOOST_TEST(c.asked == 3u);
    // Ranks 0 and 1 send again (intact now); rank 0's the port verified:
    // not asked. The sum is right.
    std::memcpy(x, good, 2 * sizeof x[0]);
    by_port.push_back(x[0]);
    c.asked = 0;
    BOOST_TEST(static_cast<int>(a.contribute(contrib(1, 0, 0, 16), x[1], x[1], k(), 0, 0, c).act) ==
               static_cast<int>(agg::action::stored));
    o = a.contribute(contrib(0, 0, 0, 16), x[0], x[0], k(), 0, 0, c);
    BOOST_TEST(static_cast<int>(o.act) == static_cast<int>(agg::action::completed));
    BOOST_TEST(c.asked == 2u);
    for (unsigned i = 0; i < 16; ++i) BOOST_TEST(x[0][i] == static_cast<float>(300 + 3 * i));
    // Next generation: the arriving one is the corrupted one: dropped
    // (the caller's), the others kept but rank 0's.
    std::memcpy(x, good, sizeof x);
    for (unsigned r = 0; r < 3; ++r) sums[x[r]] = frame::ones_sum16(good[r], sizeof good[r]);
    by_port.clear();
    released().clear();
    x[2][0] = -1.f;
    a.contribute(contrib(0, 0, 0, 16, 1), x[0], x[0], k(), 0, 0, c);
    a.contribute(contrib(1, 0, 0, 16, 1), x[1], x[1], k(), 0, 0, c);
    o = a.contribute(contrib(2, 0, 0, 16, 1), x[2], x[2], k(), 0, 0, c);
    BOOST_TEST(static_cast<int>(o.act) == static_cast<int>(agg::action::dropped));
    BOOST_TEST(drop_reason_name(o.reason) == "udp_checksum");
    BOOST_TEST(o.corrupted == 0u);
    BOOST_TEST(o.discarded == 1u);
    BOOST_TEST(released().count(x[2]) == 0u);
    BOOST_TEST(released()[x[0]] == 1);
    BOOST_TEST(released().count(x[1]) == 0u);
}

BOOST_AUTO_TEST_CASE(spares_go_to_the_caller_instead_of_being_released) {
    released().clear();
    aggregator a(small());
    a.keep_spares(true);
    join_all(a, 3, 1000);
    float x[3][16] = {};
    for (std::uint16_t r = 0; r < 2; ++r) {
        a.contribute(contrib(r, 0, 0, 16), x[r], x[r], k());
        BOOST_TEST(a.spares().empty());
    }
    BOOST_TEST(static_cast<int>(a.contribute(contrib(2, 0, 0, 16), x[2], x[2], k()).act) ==
               static_cast<int>(agg::action::completed));
    // Ranks 1 and 2's buffers, in rank order; rank 0's is the kept result.
    BOOST_REQUIRE(a.spares().size() == 2u);
    BOOST_TEST(a.spares()[0] == static_cast<void*>(x[1]));
    BOOST_TEST(a.spares()[1] == static_cast<void*>(x[2]));
    BOOST_TEST(released().empty());
    // The next contribution, whatever its outcome, clears them.
    a.contribute(contrib(0, 9, 0, 16), x[0], x[0], k());
    BOOST_TEST(a.spares().empty());
}

BOOST_AUTO_TEST_CASE(striping_decides_rail_and_slot) {
    agg::limits l = small();
    l.n_rails = 3;
    l.rail_index = 1;
    aggregator a(l);
    join_all(a, 3);
    float d[16] = {};
    // Chunk i -> rail i % 3; the k-th chunk of rail 1 (chunks 1, 4, 7, ...) -> slot k % 4.
    BOOST_TEST(drop_reason_name(a.contribute(contrib(0, 0, 0, 16), d, d, k()).reason) == "wrong_rail_or_slot");
    BOOST_TEST(static_cast<int>(a.contribute(contrib(0, 0, 16, 16), d, d, k()).act) == static_cast<int>(agg::action::stored));
    BOOST_TEST(static_cast<int>(a.contribute(contrib(0, 1, 64, 16), d, d, k()).act) == static_cast<int>(agg::action::stored));
    BOOST_TEST(static_cast<int>(a.contribute(contrib(0, 0, 13 * 16, 16), d, d, k()).act) == static_cast<int>(agg::action::dropped));
    BOOST_TEST(drop_reason_name(a.contribute(contrib(0, 2, 64, 16), d, d, k()).reason) == "wrong_rail_or_slot");
}

BOOST_AUTO_TEST_CASE(join_rules) {
    aggregator a(small());
    join_all(a, 3);
    wire::join_body b;
    b.max_count = 1 << 20;
    b.pool_size = 4;
    auto err = [&](const wire::header& h) { return static_cast<int>(a.join(h, b, {}, peer_of(h.rank), 0).err); };
    auto h = hdr(wire::msg_type::join, 0);
    h.job_token = 1;
    BOOST_TEST(err(h) == static_cast<int>(wire::error_code::job_in_use));
    h = hdr(wire::msg_type::join, 0, 4);
    BOOST_TEST(err(h) == static_cast<int>(wire::error_code::world_mismatch));
    h = hdr(wire::msg_type::join, 0);
    h.dt = wire::dtype::fp16;
    BOOST_TEST(err(h) == static_cast<int>(wire::error_code::dtype_mismatch));
    b.pool_size = 8;
    BOOST_TEST(err(hdr(wire::msg_type::join, 0)) == static_cast<int>(wire::error_code::pool_mismatch));
    b.pool_size = 9; // above max_pool
    auto h2 = hdr(wire::msg_type::join, 0);
    h2.job_id = 5;
    BOOST_TEST(err(h2) == static_cast<int>(wire::error_code::bad_request));
    b.pool_size = 4;
    BOOST_TEST(err(h2) == static_cast<int>(wire::error_code::none));
    h2.job_id = 6;
    BOOST_TEST(err(h2) == static_cast<int>(wire::error_code::job_table_full));
}

// The JOIN of a rail after the first names the job's shape (aux): the job
// is created with that chunk and policy, not the rail's current ones; a
// chunk above what the rail's port carries now, or a malformed word, is
// refused and creates nothing.
BOOST_AUTO_TEST_CASE(a_join_naming_the_jobs_shape_creates_it_so) {
    aggregator a(small()); // the rail's job chunk: 64 B, 16 fp32
    wire::join_body b;
    b.max_count = 1 << 20;
    b.pool_size = 4;
    auto join = [&](std::uint32_t aux, std::uint32_t carry, bool lag_now = false, std::uint32_t id = 1) {
        wire::header h = hdr(wire::msg_type::join, 0, 2);
        h.job_id = id;
        h.aux = aux;
        return a.join(h, b, {}, peer_of(0), 0, lag_now, 0, carry);
    };
    agg::join_result r = join(wire::shape_word(1408, true), 1408);
    BOOST_REQUIRE((r.st == agg::join_status::joined));
    BOOST_TEST(a.find(1)->chunk_elems == 352u);
    BOOST_TEST(a.find(1)->lag);
    BOOST_TEST(a.find(1)->stripe_n == 1u);
    BOOST_TEST(a.lag_jobs() == 1u);
    // Under LAG now, asked for the rail policy: the rail policy.
    r = join(wire::shape_word(128, false), 1408, true, 2);
    BOOST_REQUIRE((r.st == agg::join_status::joined));
    BOOST_TEST(!a.find(2)->lag);
    BOOST_TEST(a.find(2)->chunk_elems == 32u);
    // Above what the port carries: refused, naming no job shape (detail 0).
    r = join(wire::shape_word(2880, false), 1408, false, 3);
    BOOST_TEST(static_cast<int>(r.err) == static_cast<int>(wire::error_code::shape_mismatch));
    BOOST_TEST(r.detail == 0u);
    BOOST_TEST(!a.find(3));
    for (std::uint32_t bad : {wire::shape_word(100, false), wire::shape_word(0, true), (8u << 20) | 0u, wire::shape_word(1408, false, wire::max_rails + 1)}) {
        r = join(bad, 0, false, 3);
        BOOST_TEST(static_cast<int>(r.err) == static_cast<int>(wire::error_code::bad_request));
        BOOST_TEST(!a.find(3));
    }
}

// The rails a job spans are its first rail's (the JOIN names how many):
// on a rail whose railgated has one more now (a rail added while the job's
// ranks joined), it is striped over the job's, not the rail's; on a rail
// past them it is refused; a JOIN naming none gets the rail's count.
BOOST_AUTO_TEST_CASE(a_jobs_rails_are_its_first_rails_whatever_was_added_since) {
    agg::limits l = small();
    l.max_jobs = 4;
    aggregator a(l);
    a.set_stripe(3, 1); // rail 1 of 3 now
    wire::join_body b;
    b.max_count = 1 << 20;
    b.pool_size = 4;
    auto join = [&](std::uint32_t aux, std::uint32_t id) {
        wire::header h = hdr(wire::msg_type::join, 0, 2);
        h.job_id = id;
        h.aux = aux;
        return a.join(h, b, {}, peer_of(0), 0);
    };
    agg::join_result r = join(wire::shape_word(64, false, 2), 1);
    BOOST_REQUIRE((r.st == agg::join_status::joined));
    BOOST_TEST(a.find(1)->rails == 2u);
    BOOST_TEST(a.find(1)->stripe_n == 2u); // chunks 1, 3, 5...: what the worker sends here
    BOOST_TEST(a.find(1)->stripe_index == 1u);
    r = join(wire::shape_word(64, true, 2), 2);
    BOOST_REQUIRE((r.st == agg::join_status::joined));
    BOOST_TEST(a.find(2)->rails == 2u); // LAG: its home is found over 2
    r = join(0, 3);
    BOOST_REQUIRE((r.st == agg::join_status::joined));
    BOOST_TEST(a.find(3)->rails == 3u);
    BOOST_TEST(a.find(3)->stripe_n == 3u);
    a.set_stripe(3, 2); // a rail past the job's
    r = join(wire::shape_word(64, false, 2), 4);
    BOOST_TEST(static_cast<int>(r.err) == static_cast<int>(wire::error_code::shape_mismatch));
    BOOST_TEST(!a.find(4));
}

BOOST_AUTO_TEST_CASE(jobs_are_admitted_while_the_rail_can_lend_their_buffers) {
    agg::limits l = small();
    l.max_jobs = 4;
    l.buffer_budget = 20; // pool 4 x world 3 = 12 per job
    aggregator a(l);
    wire::join_body b;
    b.max_count = 1000;
    b.pool_size = 4;
    auto h = hdr(wire::msg_type::join, 0);
    BOOST_TEST((a.join(h, b, {}, peer_of(0), 0).st == agg::join_status::joined));
    BOOST_TEST(a.buffers_admitted() == 12u);
    h.job_id = 2;
    const agg::join_result r = a.join(h, b, {}, peer_of(0), 0);
    BOOST_TEST(static_cast<int>(r.err) == static_cast<int>(wire::error_code::no_buffers));
    b.pool_size = 2; // 6 more: fits
    BOOST_TEST((a.join(h, b, {}, peer_of(0), 0).st == agg::join_status::joined));
    a.release(*a.find(1));
    BOOST_TEST(a.buffers_admitted() == 6u);
}

BOOST_AUTO_TEST_CASE(abort_and_leave_release_every_held_buffer) {
    released().clear();
    {
        aggregator a(small());
        join_all(a, 3);
        static float bufs[8][16];
        // Two partial slots and one completed (kept result).
        a.contribute(contrib(0, 0, 0, 16), bufs[0], bufs[0], k());
        a.contribute(contrib(2, 0, 0, 16), bufs[1], bufs[1], k());
        a.contribute(contrib(1, 1, 16, 16), bufs[2], bufs[2], k());
        for (int r = 0; r < 3; ++r)
            a.contribute(contrib(static_cast<std::uint16_t>(r), 2, 32, 16), bufs[3 + r], bufs[3 + r], k());
        BOOST_TEST(a.find(1)->x.members[2].ip == 102u);
        a.release(*a.find(1));
        BOOST_TEST(a.find(1) == nullptr);
        for (int i = 0; i < 6; ++i) BOOST_TEST(released()[bufs[i]] == 1, "buffer " << i);
    }
    released().clear();
    {
        aggregator a(small());
        join_all(a, 3);
        static float b2[16];
        a.contribute(contrib(1, 3, 48, 16), b2, b2, k());
        a.leave(leave_of(a, 0), 0);
        BOOST_TEST(a.find(1) != nullptr);
        BOOST_TEST(released().empty());
        a.leave(leave_of(a, 1), 0); // its partial contribution goes with it
        BOOST_TEST(released()[b2] == 1);
        BOOST_TEST(a.find(1) != nullptr);
        a.leave(leave_of(a, 2), 0);
        BOOST_TEST(a.find(1) == nullptr);
        BOOST_TEST(released()[b2] == 1);
        BOOST_TEST(released().size() == 1u);
    }
}

BOOST_AUTO_TEST_CASE(random_interleaving_with_garbage_is_exact_and_leak_free) {
    // 5 workers stream 64 chunks through a pool of 4 slots, in random order,
    // with duplicates and garbage mixed in. Every result is the rank-order
    // sum and every accepted buffer is released exactly once at the end.
    released().clear();
    std::mt19937 rng(3);
    constexpr unsigned W = 5, chunks = 64, elems = 16, pool = 4;
    std::vector<std::vector<float>> src(W, std::vector<float>(chunks * elems));
    for (auto& s : src)
        for (float& f : s) f = std::ldexp(static_cast<float>(rng() % 2000) - 1000.f, static_cast<int>(rng() % 40) - 20);
    std::vector<float> want(chunks * elems);
    for (std::size_t i = 0; i < want.size(); ++i) {
        float acc = src[0][i];
        for (unsigned r = 1; r < W; ++r) acc += src[r][i];
        want[i] = acc;
    }
    std::vector<float> got(chunks * elems, -1);
    std::vector<std::vector<float>> owned; // copies, as mbufs would be
    owned.reserve(chunks * W * 3);
    unsigned accepted = 0;
    {
        aggregator a(small());
        for (unsigned r = 0; r < W; ++r) {
            wire::join_body b;
            b.max_count = chunks * elems;
            b.pool_size = pool;
            a.join(hdr(wire::msg_type::join, static_cast<std::uint16_t>(r), W), b, {}, peer_of(r), 0);
        }
        std::vector<unsigned> next(W, 0); // next chunk per rank
        std::vector<unsigned> done_gen(pool, 0);
        unsigned completed = 0;
        while (completed < chunks) {
            const unsigned r = rng() % W;
            const unsigned c = next[r];
            if (c >= chunks) continue;
            const unsigned s = c % pool, g = c / pool;
            if (g > done_gen[s]) continue; // the worker waits for this slot's result
            owned.emplace_back(src[r].begin() + c * elems, src[r].begin() + (c + 1) * elems);
            auto& buf = owned.back();
            const auto h = contrib(static_cast<std::uint16_t>(r), static_cast<std::uint16_t>(s), c * elems, elems, g, W);
            const agg::outcome o = a.contribute(h, buf.data(), &buf, k());
            BOOST_REQUIRE(o.act != agg::action::dropped);
            ++accepted;
            ++next[r];
            if (o.act == agg::action::completed) {
                std::copy_n(static_cast<const float*>(o.s->result_payload), elems, got.begin() + c * elems);
                ++done_gen[s];
                ++completed;
            }
            if (rng() % 4 == 0) { // a duplicate or garbage: must never be accepted
                std::vector<float> junk(elems, 1e30f);
                auto bad = h;
                bad.slot = static_cast<std::uint16_t>(rng() % 6);
                // Duplicates of the current generation, or generations no
                // worker can be at. (A rank that skips ahead by exactly one
                // generation stalls its own job; stall timeouts come with
                // loss recovery.)
                const std::uint32_t skew[] = {0, 2, 5};
                bad.gen = g + skew[rng() % 3];
                const agg::outcome d = a.contribute(bad, junk.data(), &junk, k());
                BOOST_REQUIRE(d.act != agg::action::stored);
                BOOST_REQUIRE(d.act != agg::action::completed);
            }
        }
        BOOST_TEST(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
    } // destructor releases the kept results
    unsigned total = 0;
    for (auto& [p, n] : released()) {
        BOOST_TEST(n == 1);
        total += static_cast<unsigned>(n);
    }
    BOOST_TEST(total == accepted);
}
