// The gateway's route table: prefix parsing and longest-prefix match,
// against a brute-force reference.
#define BOOST_TEST_MODULE fib
#include <boost/test/unit_test.hpp>

#include <random>
#include <set>

#include "dataplane/net/fib.hpp"

using namespace railgate::net;

BOOST_AUTO_TEST_CASE(prefixes_parse_strictly) {
    std::uint32_t p = 0;
    unsigned len = 0;
    BOOST_TEST(parse_prefix("10.2.0.0/24", p, len).empty());
    BOOST_TEST(p == 0x0A020000u);
    BOOST_TEST(len == 24u);
    BOOST_TEST(parse_prefix("0.0.0.0/0", p, len).empty());
    BOOST_TEST(len == 0u);
    BOOST_TEST(parse_prefix("10.2.0.7/32", p, len).empty());
    BOOST_TEST(parse_prefix("10.2.0.1/24", p, len).find("host bits set (10.2.0.0/24?)") != std::string::npos);
    for (const char* bad : {"10.2.0.0", "10.2.0.0/", "10.2.0.0/33", "10.2.0.0/-1", "10.2.0/24", "x/8", "10.2.0.0/2a", "/8",
                            "10.2.0.0/024"})
        BOOST_TEST(!parse_prefix(bad, p, len).empty(), bad);
    BOOST_TEST(format_prefix(0x0A020000u, 24) == "10.2.0.0/24");
}

BOOST_AUTO_TEST_CASE(longest_prefix_wins) {
    const lpm_table t({{0, 0, 1}, {0x0A000000, 8, 2}, {0x0A020000, 16, 3}, {0x0A020300, 24, 4}, {0x0A020305, 32, 5}});
    BOOST_TEST(*t.lookup(0x0B000001) == 1u); // default route
    BOOST_TEST(*t.lookup(0x0A010101) == 2u);
    BOOST_TEST(*t.lookup(0x0A02FF01) == 3u);
    BOOST_TEST(*t.lookup(0x0A020301) == 4u);
    BOOST_TEST(*t.lookup(0x0A020305) == 5u);
    const lpm_table no_default({{0x0A000000, 8, 2}});
    BOOST_TEST(!no_default.lookup(0x0B000001));
    BOOST_TEST(!lpm_table().lookup(0));
    BOOST_TEST(lpm_table().empty());
}

BOOST_AUTO_TEST_CASE(matches_a_linear_scan_on_random_tables) {
    std::mt19937 rng(7);
    for (unsigned round = 0; round < 20; ++round) {
        std::vector<lpm_table::entry> e;
        std::set<std::pair<std::uint32_t, unsigned>> seen;
        const unsigned n = 1 + rng() % 3000;
        while (e.size() < n) {
            const unsigned len = rng() % 33;
            // Clustered prefixes so that lengths nest.
            const std::uint32_t p = (0x0A000000u | (rng() & 0x00ffffffu)) & prefix_mask(len);
            if (seen.insert({p, len}).second) e.push_back({p, len, static_cast<std::uint32_t>(e.size())});
        }
        const lpm_table t(e);
        for (unsigned q = 0; q < 5000; ++q) {
            const std::uint32_t ip = q % 2 ? (0x0A000000u | (rng() & 0x00ffffffu)) : static_cast<std::uint32_t>(rng());
            int best = -1;
            for (const auto& x : e)
                if ((ip & prefix_mask(x.len)) == x.prefix && (best < 0 || x.len > e[static_cast<std::size_t>(best)].len))
                    best = static_cast<int>(x.value);
            const auto got = t.lookup(ip);
            BOOST_TEST(got.has_value() == (best >= 0));
            if (got && best >= 0) BOOST_TEST(*got == static_cast<std::uint32_t>(best));
        }
    }
}
