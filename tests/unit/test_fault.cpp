// The fault injector's spec and decisions: parsing with named errors,
// reproducible draws, and rates that match the spec.
#define BOOST_TEST_MODULE fault
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <string_view>
#include <utility>

#include "dataplane/fault/injector.hpp"
#include "dataplane/proto/wire.hpp"

using namespace railgate;

BOOST_AUTO_TEST_CASE(specs_parse_and_print_back) {
    fault::spec s;
    BOOST_TEST(fault::parse("drop=0.01,dup=0.002,reorder=0.5,corrupt=1,seed=42", s).empty());
    BOOST_TEST(s.drop == 0.01);
    BOOST_TEST(s.dup == 0.002);
    BOOST_TEST(s.reorder == 0.5);
    BOOST_TEST(s.corrupt == 1.0);
    BOOST_TEST(s.seed == 42u);
    fault::spec back;
    BOOST_TEST(fault::parse(fault::format(s), back).empty());
    BOOST_TEST((back == s));
    BOOST_TEST(fault::parse("off", s).empty());
    BOOST_TEST(!s.any());
    BOOST_TEST(fault::format(s) == "off");
    BOOST_TEST(fault::parse("", s).empty());
    BOOST_TEST(fault::parse("reorder=0.1", s).empty());
    BOOST_TEST(s.reorder == 0.1);
    BOOST_TEST(s.drop == 0.0);
    // One rank, one way.
    BOOST_TEST(fault::parse("drop=1,rank=2,dir=tx", s).empty());
    BOOST_TEST(s.rank == 2);
    BOOST_TEST(!s.on_rx());
    BOOST_TEST(s.on_tx());
    BOOST_TEST(fault::format(s) == "drop=1,dup=0,reorder=0,corrupt=0,seed=1,rank=2,dir=tx");
    BOOST_TEST(fault::parse(fault::format(s), back).empty());
    BOOST_TEST((back == s));
    BOOST_TEST(fault::parse("drop=1", s).empty());
    BOOST_TEST((s.rank == -1 && s.types == 0 && s.on_rx() && s.on_tx()));
    // One message type.
    BOOST_TEST(fault::parse("drop=0.5,type=leave_ack,dir=tx,seed=3", s).empty());
    BOOST_TEST(s.types == 1u << static_cast<unsigned>(wire::msg_type::leave_ack));
    BOOST_TEST(fault::format(s) == "drop=0.5,dup=0,reorder=0,corrupt=0,seed=3,type=leave_ack,dir=tx");
    BOOST_TEST(fault::parse(fault::format(s), back).empty());
    BOOST_TEST((back == s));
    // Several: railgated silent to a worker that has joined (its JOIN_ACK
    // passes), written in the wire's order whatever the order given.
    BOOST_TEST(fault::parse("drop=1,rank=1,type=held+result+pong,dir=tx", s).empty());
    BOOST_TEST(s.types == (1u << static_cast<unsigned>(wire::msg_type::result) |
                           1u << static_cast<unsigned>(wire::msg_type::pong) |
                           1u << static_cast<unsigned>(wire::msg_type::held)));
    BOOST_TEST(fault::format(s) == "drop=1,dup=0,reorder=0,corrupt=0,seed=1,rank=1,type=result+pong+held,dir=tx");
    BOOST_TEST(fault::parse(fault::format(s), back).empty());
    BOOST_TEST((back == s));
}

BOOST_AUTO_TEST_CASE(type_names_are_the_wire_types) {
    const std::pair<wire::msg_type, std::string_view> all[] = {
        {wire::msg_type::join, "join"},       {wire::msg_type::join_ack, "join_ack"},
        {wire::msg_type::contrib, "contrib"}, {wire::msg_type::result, "result"},
        {wire::msg_type::error, "error"},     {wire::msg_type::leave, "leave"},
        {wire::msg_type::leave_ack, "leave_ack"}, {wire::msg_type::rtt_report, "rtt_report"},
        {wire::msg_type::region, "region"},   {wire::msg_type::ping, "ping"},
        {wire::msg_type::pong, "pong"},       {wire::msg_type::held, "held"}};
    for (const auto& [t, name] : all) {
        BOOST_TEST(fault::type_name(static_cast<int>(t)) == name);
        fault::spec s;
        BOOST_TEST(fault::parse("drop=1,type=" + std::string(name), s).empty());
        BOOST_TEST(s.types == 1u << static_cast<unsigned>(t));
    }
    BOOST_TEST(fault::type_name(0) == nullptr);
    BOOST_TEST(fault::type_name(13) == nullptr);
    BOOST_TEST(fault::type_name(-1) == nullptr);
}

BOOST_AUTO_TEST_CASE(bad_specs_are_refused_naming_the_field) {
    fault::spec s;
    s.drop = 0.3;
    BOOST_TEST(fault::parse("drop=1.5", s).find("drop=1.5 is not a fraction") != std::string::npos);
    BOOST_TEST(fault::parse("drop=-0.1", s).find("not a fraction") != std::string::npos);
    BOOST_TEST(fault::parse("drop=nan", s).find("not a fraction") != std::string::npos);
    BOOST_TEST(fault::parse("drop=", s).find("not a fraction") != std::string::npos);
    BOOST_TEST(fault::parse("loss=0.1", s).find("unknown key 'loss'") != std::string::npos);
    BOOST_TEST(fault::parse("drop", s).find("not KEY=VALUE") != std::string::npos);
    BOOST_TEST(fault::parse("seed=-1", s).find("seed") != std::string::npos);
    BOOST_TEST(fault::parse("seed=12x", s).find("seed") != std::string::npos);
    BOOST_TEST(fault::parse("rank=-1", s).find("rank=-1 is not a rank") != std::string::npos);
    BOOST_TEST(fault::parse("dir=up", s).find("dir=up is not rx, tx or both") != std::string::npos);
    BOOST_TEST(fault::parse("type=3", s).find("type=3: '3' is not a message type") != std::string::npos);
    BOOST_TEST(fault::parse("type=result+pongs", s).find("'pongs' is not a message type") != std::string::npos);
    BOOST_TEST(fault::parse("type=result+", s).find("type=result+: '' is not a message type") != std::string::npos);
    BOOST_TEST(fault::parse("type=", s).find("is not a message type (join, join_ack, contrib") != std::string::npos);
    BOOST_TEST(fault::parse("type=HELD", s).find("pong, held)") != std::string::npos);
    BOOST_TEST(s.drop == 0.3); // untouched on error
}

BOOST_AUTO_TEST_CASE(the_same_seed_gives_the_same_decisions) {
    fault::spec s;
    fault::parse("drop=0.1,dup=0.1,reorder=0.1,corrupt=0.1,seed=7", s);
    fault::dice a(s), b(s);
    for (int i = 0; i < 10000; ++i) {
        const fault::verdict x = a.roll(), y = b.roll();
        BOOST_REQUIRE((x.drop == y.drop && x.dup == y.dup && x.reorder == y.reorder && x.corrupt == y.corrupt &&
                       x.bit == y.bit));
    }
    s.seed = 8;
    fault::dice c(s);
    fault::dice d(fault::spec{0.1, 0.1, 0.1, 0.1, 7});
    int differ = 0;
    for (int i = 0; i < 1000; ++i) differ += c.roll().drop != d.roll().drop;
    BOOST_TEST(differ > 0);
}

BOOST_AUTO_TEST_CASE(rates_follow_the_spec) {
    fault::spec s;
    fault::parse("drop=0.05,dup=0.01,reorder=0.2,corrupt=0.001,seed=3", s);
    fault::dice d(s);
    const int n = 1000000;
    int drop = 0, dup = 0, reorder = 0, corrupt = 0;
    for (int i = 0; i < n; ++i) {
        const fault::verdict v = d.roll();
        drop += v.drop;
        dup += v.dup;
        reorder += v.reorder;
        corrupt += v.corrupt;
        BOOST_REQUIRE(!(v.drop && (v.dup || v.reorder || v.corrupt)));
    }
    // Within 5 standard deviations of the binomial mean (draws after a
    // drop are not made: dup etc. are fractions of what was not dropped).
    auto near = [](int got, double p, double m) { return std::abs(got - p * m) < 5 * std::sqrt(p * (1 - p) * m) + 1; };
    BOOST_TEST(near(drop, 0.05, n));
    BOOST_TEST(near(dup, 0.01, n - drop));
    BOOST_TEST(near(reorder, 0.2, n - drop));
    BOOST_TEST(near(corrupt, 0.001, n - drop));
    // Everything and nothing.
    fault::dice all(fault::spec{1, 0, 0, 0, 1});
    fault::dice off(fault::spec{});
    for (int i = 0; i < 1000; ++i) {
        BOOST_REQUIRE(all.roll().drop);
        const fault::verdict v = off.roll();
        BOOST_REQUIRE(!(v.drop || v.dup || v.reorder || v.corrupt));
    }
    BOOST_TEST(!off.active());
}
