// The verbs eager rings (dataplane/verbs/ll_ring.hpp) and the connection
// data that negotiates them: an entry is read only once every word of it
// has landed, never from an earlier lap, whatever order its words arrive
// in, and begun() sees its first word; lengths out of range are refused;
// the capability survives a peer that predates it.
#define BOOST_TEST_MODULE verbs_ll
#include <boost/test/unit_test.hpp>

#include <array>
#include <cstring>
#include <numeric>
#include <vector>

#include "dataplane/verbs/ll_ring.hpp"
#include "dataplane/verbs/rdma.hpp"

namespace ll = railgate::verbs::ll;
using railgate::verbs::cm_hello;

namespace {
std::vector<std::uint8_t> bytes(std::size_t n, std::uint8_t first) {
    std::vector<std::uint8_t> v(n);
    std::iota(v.begin(), v.end(), first);
    return v;
}
} // namespace

BOOST_AUTO_TEST_CASE(an_entry_round_trips_for_every_length) {
    for (std::uint32_t len = 1; len <= ll::max_payload; ++len) {
        std::array<std::uint64_t, ll::entry_words> ring{};
        const auto in = bytes(len, static_cast<std::uint8_t>(len));
        const std::size_t w = ll::encode(ring.data(), 7, 0xabcd1234u, in.data(), len);
        BOOST_TEST(w == ll::wire_bytes(len));
        BOOST_TEST(w <= ll::entry_bytes);
        ll::entry e;
        std::array<std::uint8_t, ll::max_payload> out{};
        BOOST_REQUIRE(ll::poll(ring.data(), 7, e, out.data()) == ll::status::ready);
        BOOST_TEST(e.imm == 0xabcd1234u);
        BOOST_TEST(e.len == len);
        BOOST_TEST(std::memcmp(out.data(), in.data(), len) == 0);
    }
}

BOOST_AUTO_TEST_CASE(a_partly_landed_entry_is_not_read_in_any_word_order) {
    const auto in = bytes(40, 1);
    std::array<std::uint64_t, ll::entry_words> full{}, ring{};
    const std::size_t words = ll::encode(full.data(), 300, 5, in.data(), 40) / 8;
    // Words land one at a time, last first: the entry is ready only with the last.
    for (std::size_t k = 0; k < words; ++k) {
        ring[words - 1 - k] = full[words - 1 - k];
        ll::entry e;
        std::array<std::uint8_t, ll::max_payload> out{};
        BOOST_TEST((ll::poll(ring.data(), 300, e, out.data()) == ll::status::ready) == (k + 1 == words));
    }
    // And first word first.
    ring = {};
    for (std::size_t k = 0; k < words; ++k) {
        ring[k] = full[k];
        ll::entry e;
        std::array<std::uint8_t, ll::max_payload> out{};
        BOOST_TEST((ll::poll(ring.data(), 300, e, out.data()) == ll::status::ready) == (k + 1 == words));
    }
}

BOOST_AUTO_TEST_CASE(the_previous_lap_and_a_fresh_ring_are_not_entries) {
    std::array<std::uint64_t, ll::entry_words> ring{};
    ll::entry e;
    std::array<std::uint8_t, ll::max_payload> out{};
    BOOST_TEST((ll::poll(ring.data(), 0, e, out.data()) == ll::status::empty)); // zeroed memory
    const auto in = bytes(8, 9);
    ll::encode(ring.data(), 3, 1, in.data(), 8); // lap 0 at index 3
    BOOST_TEST((ll::poll(ring.data(), 3 + ll::entries, e, out.data()) == ll::status::empty));
    ll::encode(ring.data(), 3 + ll::entries, 2, in.data(), 8);
    BOOST_TEST((ll::poll(ring.data(), 3 + ll::entries, e, out.data()) == ll::status::ready));
    BOOST_TEST(e.imm == 2u);
    // Flags are never 0 and differ lap to lap, at the 32-bit wrap too.
    for (std::uint64_t lap : {0ull, 1ull, 0xfffffffdull, 0xfffffffeull, 0xffffffffull, 0x100000000ull}) {
        const std::uint64_t seq = lap * ll::entries + 5;
        BOOST_TEST(ll::flag_of(seq) != 0u);
        BOOST_TEST(ll::flag_of(seq) != ll::flag_of(seq + ll::entries));
        BOOST_TEST(ll::offset_of(seq) == 5 * ll::entry_bytes);
    }
}

// begun(): the entry's first word has landed (railgated then reads its
// CQ to the end before the entry: what the worker posted before it).
BOOST_AUTO_TEST_CASE(an_entry_has_begun_once_its_first_word_landed_in_its_lap) {
    std::array<std::uint64_t, ll::entry_words> ring{}, full{};
    BOOST_TEST(!ll::begun(ring.data(), 4)); // zeroed memory
    const auto in = bytes(40, 1);
    ll::encode(full.data(), 4, 9, in.data(), 40);
    ring[0] = full[0]; // the first word alone: begun, not yet ready
    BOOST_TEST(ll::begun(ring.data(), 4));
    ll::entry e;
    std::array<std::uint8_t, ll::max_payload> out{};
    BOOST_TEST((ll::poll(ring.data(), 4, e, out.data()) == ll::status::empty));
    BOOST_TEST(!ll::begun(ring.data(), 4 + ll::entries)); // the next lap's entry there
    ring[0] = 0;
    ring[1] = full[1]; // a later word alone is not the start
    BOOST_TEST(!ll::begun(ring.data(), 4));
}

BOOST_AUTO_TEST_CASE(lengths_out_of_range_are_bad_not_read) {
    std::array<std::uint64_t, ll::entry_words> ring{};
    ll::entry e;
    std::array<std::uint8_t, ll::max_payload> out{};
    for (std::uint32_t len : {0u, static_cast<std::uint32_t>(ll::max_payload) + 1, 0xffffffffu}) {
        const std::uint32_t f = ll::flag_of(11);
        ring[0] = ll::word(1, f);
        ring[1] = ll::word(len, f);
        BOOST_TEST((ll::poll(ring.data(), 11, e, out.data()) == ll::status::bad));
    }
}

BOOST_AUTO_TEST_CASE(connection_data_carries_the_ring_and_old_peers_still_parse) {
    std::uint8_t b[railgate::verbs::cm_private_ll_bytes + 36] = {};
    cm_hello h;
    h.path_mtu = 1024;
    BOOST_TEST(railgate::verbs::encode_cm_private(h, b) == railgate::verbs::cm_private_bytes);
    cm_hello d = railgate::verbs::decode_cm_private(b, sizeof b); // rdma_cm pads private data
    BOOST_TEST(d.path_mtu == 1024u);
    BOOST_TEST(!d.ll);
    h.ll = true;
    h.ll_addr = 0x0123456789abcdefull;
    h.ll_rkey = 0xfedcba98u;
    BOOST_TEST(railgate::verbs::encode_cm_private(h, b) == railgate::verbs::cm_private_ll_bytes);
    d = railgate::verbs::decode_cm_private(b, sizeof b);
    BOOST_TEST(d.ll);
    BOOST_TEST(d.ll_addr == h.ll_addr);
    BOOST_TEST(d.ll_rkey == h.ll_rkey);
    // Cut short: no ring, the MTU still read (as an old peer reads it).
    d = railgate::verbs::decode_cm_private(b, railgate::verbs::cm_private_bytes);
    BOOST_TEST(!d.ll);
    BOOST_TEST(d.path_mtu == 1024u);
    // Not railgate's.
    b[0] = 'X';
    BOOST_TEST(railgate::verbs::decode_cm_private(b, sizeof b).path_mtu == 0u);
}
