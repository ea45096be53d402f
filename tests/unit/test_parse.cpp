// The stateless validation of railgate messages and of Ethernet/IPv4/UDP
// framing: every rule, each invalid input counted under its own reason.
#define BOOST_TEST_MODULE parse
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/proto/frame.hpp"
#include "dataplane/proto/parse.hpp"

using namespace railgate;
using namespace railgate::wire;

namespace {

wire::header contrib_header(std::uint16_t count, dtype dt = dtype::fp32) {
    wire::header h;
    h.type = msg_type::contrib;
    h.dt = dt;
    h.job_id = 7;
    h.job_token = 0x1122334455667788ull;
    h.rank = 1;
    h.world_size = 3;
    h.slot = 5;
    h.count = count;
    h.offset = 1024;
    h.gen = 9;
    return h;
}

std::vector<std::uint8_t> message(const wire::header& h, std::size_t payload) {
    std::vector<std::uint8_t> m(header_bytes + payload, 0);
    encode_header(h, m.data());
    return m;
}

drop_reason parse(const std::vector<std::uint8_t>& m) {
    wire::header h;
    std::span<const std::uint8_t> p;
    return parse_worker_message(m.data(), m.size(), h, p);
}

frame::endpoint rail() {
    frame::endpoint e;
    e.ip = 0xC6120001; // 198.18.0.1
    e.udp_port = default_udp_port;
    for (int i = 0; i < 6; ++i) e.mac.b[i] = static_cast<std::uint8_t>(0x02 + i);
    return e;
}

std::vector<std::uint8_t> udp_frame(const std::vector<std::uint8_t>& msg) {
    frame::endpoint src;
    src.ip = 0xC612000A;
    src.udp_port = 40000;
    std::vector<std::uint8_t> f(frame::udp_frame_overhead + msg.size());
    frame::write_udp_headers(f.data(), src, rail(), msg.size());
    std::memcpy(f.data() + frame::udp_frame_overhead, msg.data(), msg.size());
    return f;
}

} // namespace

BOOST_AUTO_TEST_CASE(header_roundtrip_is_big_endian) {
    wire::header h = contrib_header(256);
    std::uint8_t b[header_bytes];
    encode_header(h, b);
    BOOST_TEST(b[0] == protocol_version);
    BOOST_TEST(b[4] == 0);
    BOOST_TEST(b[7] == 7);      // job id, big-endian
    BOOST_TEST(b[8] == 0x11);   // token MSB first
    BOOST_TEST(b[23] == 0x00);  // count 256 = 0x0100
    BOOST_TEST(b[22] == 0x01);
    const wire::header d = decode_header(b);
    BOOST_TEST(d.job_token == h.job_token);
    BOOST_TEST(d.offset == h.offset);
    BOOST_TEST(d.gen == h.gen);
    BOOST_TEST(d.count == h.count);
}

BOOST_AUTO_TEST_CASE(valid_contribution_parses) {
    const auto m = message(contrib_header(256), 1024);
    wire::header h;
    std::span<const std::uint8_t> p;
    BOOST_TEST(static_cast<int>(parse_worker_message(m.data(), m.size(), h, p)) ==
               static_cast<int>(drop_reason::none));
    BOOST_TEST(p.size() == 1024u);
    BOOST_TEST(h.rank == 1);
}

BOOST_AUTO_TEST_CASE(every_invalid_field_has_its_reason) {
    auto expect = [](const std::vector<std::uint8_t>& m, drop_reason r) {
        BOOST_TEST(drop_reason_name(parse(m)) == drop_reason_name(r));
    };
    auto base = message(contrib_header(256), 1024);
    for (std::size_t len = 0; len < header_bytes; ++len)
        expect(std::vector<std::uint8_t>(base.begin(), base.begin() + static_cast<long>(len)),
               drop_reason::rg_truncated);
    auto m = base; m[0] = protocol_version + 1; expect(m, drop_reason::rg_version);
    m = base; m[0] = 1; expect(m, drop_reason::rg_version);
    m = base; m[1] = 0; expect(m, drop_reason::rg_type);
    m = base; m[1] = 99; expect(m, drop_reason::rg_type);
    m = base; m[1] = static_cast<std::uint8_t>(msg_type::result); expect(m, drop_reason::rg_type);
    m = base; m[3] = 0x80; expect(m, drop_reason::rg_flags);
    m = base; m[2] = 4; expect(m, drop_reason::rg_dtype);
    auto h = contrib_header(256); h.world_size = 0; expect(message(h, 1024), drop_reason::rg_world);
    h = contrib_header(256); h.world_size = 65; h.rank = 0; expect(message(h, 1024), drop_reason::rg_world);
    h = contrib_header(256); h.rank = 3; expect(message(h, 1024), drop_reason::rg_rank);
    h = contrib_header(0); expect(message(h, 0), drop_reason::rg_count_zero);
    expect(message(contrib_header(257), 1024), drop_reason::rg_count_exceeds_payload);
    expect(message(contrib_header(255), 1024), drop_reason::rg_payload_trailing);
    expect(message(contrib_header(256, dtype::bf16), 1024), drop_reason::rg_payload_trailing);
    h = contrib_header(256); h.offset = max_tensor_elems - 10; expect(message(h, 1024), drop_reason::rg_offset_range);
    h = contrib_header(256); h.offset = ~0ull; expect(message(h, 1024), drop_reason::rg_offset_range);
    h = contrib_header(0); h.type = msg_type::join; expect(message(h, 3), drop_reason::rg_body);
    expect(message(h, join_body_bytes), drop_reason::none);
}

BOOST_AUTO_TEST_CASE(join_ack_roundtrip_and_rejects_bad_bodies) {
    join_ack_body b;
    b.pool_size = 64;
    b.policy = rail_policy::rail;
    b.n_rails = 2;
    b.chunk_bytes = 1024;
    b.rails[0].ip = 0xC6120001;
    b.rails[0].udp_port = 47000;
    b.rails[0].mtu = 9000;
    b.rails[0].chunk_bytes = 8192;
    b.rails[1].ip = 0xC6120101;
    std::uint8_t buf[join_ack_fixed_bytes + max_rails * rail_entry_bytes];
    const std::size_t n = encode_join_ack_body(b, buf);
    BOOST_TEST(n == join_ack_fixed_bytes + 2 * rail_entry_bytes);
    join_ack_body d;
    BOOST_TEST(decode_join_ack_body({buf, n}, d));
    BOOST_TEST(d.rails[0].mtu == 9000);
    BOOST_TEST(d.rails[1].ip == 0xC6120101u);
    BOOST_TEST(!decode_join_ack_body({buf, n - 1}, d));
    buf[3] = 0;
    BOOST_TEST(!decode_join_ack_body({buf, n}, d));
}

BOOST_AUTO_TEST_CASE(chunk_size_follows_mtu) {
    BOOST_TEST(chunk_bytes_for_mtu(1500) == 1408u);
    BOOST_TEST(chunk_bytes_for_mtu(9000) == 8896u);
    BOOST_TEST(chunk_bytes_for_mtu(576) == 448u);
    BOOST_TEST(chunk_bytes_for_mtu(9216) == 9088u);
    BOOST_TEST(chunk_bytes_for_mtu(100) == 0u);
    // Every MTU: the largest whole number of cache lines that fits the
    // frame's payload (IPv4 + UDP + railgate header taken off).
    for (unsigned mtu = min_mtu; mtu <= max_mtu; ++mtu) {
        const std::uint32_t c = chunk_bytes_for_mtu(mtu), room = mtu - 20 - 8 - header_bytes;
        BOOST_TEST_REQUIRE(c % 64 == 0u);
        BOOST_TEST_REQUIRE(c <= room);
        BOOST_TEST_REQUIRE(c + 64 > room);
    }
}

// A chunk that is not a power of two (MTU 1500's) travels in the u16 with
// log2 0, and decodes to itself.
BOOST_AUTO_TEST_CASE(join_ack_chunk_not_a_power_of_two) {
    join_ack_body b;
    b.pool_size = 46;
    b.n_rails = 1;
    b.chunk_bytes = chunk_bytes_for_mtu(1500);
    b.rails[0].mtu = 1500;
    b.rails[0].chunk_bytes = b.chunk_bytes;
    std::uint8_t buf[join_ack_fixed_bytes + rail_entry_bytes * max_rails];
    const std::size_t n = encode_join_ack_body(b, buf);
    BOOST_TEST(buf[7] == 0u);
    join_ack_body d;
    BOOST_TEST_REQUIRE(decode_join_ack_body({buf, n}, d));
    BOOST_TEST(d.chunk_bytes == 1408u);
    BOOST_TEST(d.rails[0].chunk_bytes == 1408u);
}

BOOST_AUTO_TEST_CASE(frame_classification) {
    const auto msg = message(contrib_header(256), 1024);
    auto f = udp_frame(msg);
    frame::info fi = frame::classify(f.data(), f.size(), rail());
    BOOST_TEST(static_cast<int>(fi.k) == static_cast<int>(frame::kind::udp));
    BOOST_TEST(fi.msg_offset == frame::udp_frame_overhead);
    BOOST_TEST(fi.l4_len == msg.size());
    BOOST_TEST(fi.src.udp_port == 40000);

    auto expect = [](const std::vector<std::uint8_t>& fr, drop_reason r) {
        const frame::info i = frame::classify(fr.data(), fr.size(), rail());
        BOOST_TEST(drop_reason_name(i.reason) == drop_reason_name(r));
    };
    // Every truncation of the L2-L4 headers is caught.
    for (std::size_t len = 0; len < frame::udp_frame_overhead; ++len) {
        const frame::info i = frame::classify(f.data(), len, rail());
        BOOST_TEST((i.k == frame::kind::drop), "len " << len);
    }
    auto g = f; g[14 + 16] ^= 1; expect(g, drop_reason::ip_bad_checksum);
    g = f; g[12] = 0x86; g[13] = 0xdd; expect(g, drop_reason::ethertype);
    g = f; g[14] = 0x46; expect(g, drop_reason::ip_bad_checksum); // IHL 24, checksum no longer valid
    g = f; g[14] = 0x65; expect(g, drop_reason::ip_bad_header);
    g = f; g[14] = 0x44; expect(g, drop_reason::ip_bad_header);
    g = f; g[14 + 2] = 0xff; expect(g, drop_reason::ip_truncated);
    // Fragment: set MF and fix the checksum.
    g = f; g[14 + 6] |= 0x20; g[14 + 10] = g[14 + 11] = 0;
    { const std::uint16_t c = frame::inet_checksum(&g[14], 20); g[24] = static_cast<std::uint8_t>(c >> 8); g[25] = static_cast<std::uint8_t>(c); }
    expect(g, drop_reason::ip_fragment);
    g = f; g[14 + 20 + 3] ^= 1; expect(g, drop_reason::udp_port);
    g = f; g[14 + 20 + 4] = 0xff; expect(g, drop_reason::udp_truncated);
    // Another address at this MAC is the gateway's to route; at another MAC it is not ours.
    frame::endpoint other = rail(); other.ip = 1;
    fi = frame::classify(f.data(), f.size(), other);
    BOOST_TEST(static_cast<int>(fi.k) == static_cast<int>(frame::kind::forward));
    BOOST_TEST(fi.l3_offset == 14u);
    BOOST_TEST(fi.l4_len == 20u + 8u + msg.size());
    other.mac.b[0] ^= 1;
    BOOST_TEST(drop_reason_name(frame::classify(f.data(), f.size(), other).reason) == "ip_not_ours");
}

BOOST_AUTO_TEST_CASE(forwarding_classification) {
    const auto msg = message(contrib_header(256), 1024);
    frame::endpoint gw = rail();
    gw.ip = 0x0A000001; // the frame is for 198.18.0.1, not the gateway
    auto f = udp_frame(msg);
    // Fragments are forwarded as they are; a bad checksum still is not.
    auto g = f; g[14 + 6] |= 0x20; g[24] = g[25] = 0;
    { const std::uint16_t c = frame::inet_checksum(&g[14], 20); g[24] = static_cast<std::uint8_t>(c >> 8); g[25] = static_cast<std::uint8_t>(c); }
    BOOST_TEST(static_cast<int>(frame::classify(g.data(), g.size(), gw).k) == static_cast<int>(frame::kind::forward));
    g = f; g[14 + 16] ^= 1;
    BOOST_TEST(drop_reason_name(frame::classify(g.data(), g.size(), gw).reason) == "ip_bad_checksum");
    // Multicast and broadcast destinations are never routed.
    for (std::uint8_t first : {224, 239, 255}) {
        g = f; g[14 + 16] = first; g[24] = g[25] = 0;
        const std::uint16_t c = frame::inet_checksum(&g[14], 20); g[24] = static_cast<std::uint8_t>(c >> 8); g[25] = static_cast<std::uint8_t>(c);
        BOOST_TEST(drop_reason_name(frame::classify(g.data(), g.size(), gw).reason) == "ip_not_ours");
    }
    // 802.1Q: an IPv4 datagram behind the tag is forwarded (l3 at 18); tagged
    // traffic to the rail itself, or tagged ARP, is not railgated's.
    std::vector<std::uint8_t> t(f.begin(), f.begin() + 12);
    const std::uint8_t tag[] = {0x81, 0x00, 0xa0, 0x05}; // PCP 5, VLAN 5
    t.insert(t.end(), tag, tag + 4);
    t.insert(t.end(), f.begin() + 12, f.end());
    frame::info fi = frame::classify(t.data(), t.size(), gw);
    BOOST_TEST(static_cast<int>(fi.k) == static_cast<int>(frame::kind::forward));
    BOOST_TEST(fi.l3_offset == 18u);
    BOOST_TEST(drop_reason_name(frame::classify(t.data(), t.size(), rail()).reason) == "ethertype");
    for (std::size_t len = 0; len < 18 + 20; ++len)
        BOOST_TEST((frame::classify(t.data(), len, gw).k == frame::kind::drop), "len " << len);
    t[16] = 0x08; t[17] = 0x06;
    BOOST_TEST(drop_reason_name(frame::classify(t.data(), t.size(), gw).reason) == "ethertype");
}

BOOST_AUTO_TEST_CASE(icmp_errors_quote_the_datagram) {
    const auto msg = message(contrib_header(256), 1024);
    auto f = udp_frame(msg);
    frame::endpoint gw = rail();
    gw.ip = 0x0A000001;
    frame::mac_addr to;
    to.b[5] = 0x42;
    std::vector<std::uint8_t> e(frame::icmp_error_max);
    const std::size_t n = frame::write_icmp_error(e.data(), gw, to, f.data() + 14, f.size() - 14, 3, 4, 1400);
    BOOST_REQUIRE(n == 14u + 20u + 8u + 28u);
    BOOST_TEST((std::memcmp(e.data(), to.b, 6) == 0));
    BOOST_TEST(frame::inet_checksum(e.data() + 14, 20) == 0); // valid IPv4 header
    BOOST_TEST(frame::inet_checksum(e.data() + 34, n - 34) == 0); // valid ICMP checksum
    BOOST_TEST(e[34] == 3); BOOST_TEST(e[35] == 4);
    BOOST_TEST((e[40] << 8 | e[41]) == 1400); // next-hop MTU
    BOOST_TEST((std::memcmp(e.data() + 42, f.data() + 14, 28) == 0)); // header + 8 bytes
    // To the datagram's source, from the gateway.
    BOOST_TEST((std::memcmp(e.data() + 14 + 16, f.data() + 14 + 12, 4) == 0));
    // Never about an ICMP error, a later fragment, or from a broadcast source.
    auto g = f; g[14 + 9] = 1; g[34] = 3;
    BOOST_TEST(frame::write_icmp_error(e.data(), gw, to, g.data() + 14, g.size() - 14, 11, 0, 0) == 0u);
    g[34] = 8; // an echo request does get one
    BOOST_TEST(frame::write_icmp_error(e.data(), gw, to, g.data() + 14, g.size() - 14, 11, 0, 0) > 0u);
    g = f; g[14 + 7] = 1;
    BOOST_TEST(frame::write_icmp_error(e.data(), gw, to, g.data() + 14, g.size() - 14, 11, 0, 0) == 0u);
    g = f; g[14 + 12] = 255;
    BOOST_TEST(frame::write_icmp_error(e.data(), gw, to, g.data() + 14, g.size() - 14, 11, 0, 0) == 0u);
    BOOST_TEST(frame::write_icmp_error(e.data(), gw, to, f.data() + 14, 19, 11, 0, 0) == 0u);
}

BOOST_AUTO_TEST_CASE(arp_and_icmp_replies) {
    frame::endpoint peer;
    peer.ip = 0xC612000A;
    peer.mac.b[5] = 9;
    std::vector<std::uint8_t> arp(frame::arp_frame_bytes);
    frame::write_arp_request(arp.data(), peer, rail().ip);
    frame::info fi = frame::classify(arp.data(), arp.size(), rail());
    BOOST_TEST(static_cast<int>(fi.k) == static_cast<int>(frame::kind::arp_request));
    frame::arp_reply_in_place(arp.data(), rail());
    // The reply, seen by the requester, is an ARP reply targeting it.
    fi = frame::classify(arp.data(), arp.size(), peer);
    BOOST_TEST(static_cast<int>(fi.k) == static_cast<int>(frame::kind::arp_reply));
    BOOST_TEST(fi.src.ip == rail().ip);
    BOOST_TEST((fi.src.mac == rail().mac));

    // ICMP echo request, 8 bytes of data.
    std::vector<std::uint8_t> ping(14 + 20 + 16, 0);
    frame::write_udp_headers(ping.data(), peer, rail(), 8); // reuse for Eth+IP
    ping[14 + 9] = 1;                                       // protocol ICMP
    ping[14 + 10] = ping[14 + 11] = 0;
    std::uint16_t c = frame::inet_checksum(&ping[14], 20);
    ping[24] = static_cast<std::uint8_t>(c >> 8); ping[25] = static_cast<std::uint8_t>(c);
    std::uint8_t* icmp = &ping[34];
    std::memset(icmp, 0, 16);
    icmp[0] = 8; icmp[8] = 'r'; icmp[9] = 'g';
    c = frame::inet_checksum(icmp, 16);
    icmp[2] = static_cast<std::uint8_t>(c >> 8); icmp[3] = static_cast<std::uint8_t>(c);
    fi = frame::classify(ping.data(), ping.size(), rail());
    BOOST_TEST(static_cast<int>(fi.k) == static_cast<int>(frame::kind::icmp_echo));
    frame::icmp_echo_reply_in_place(ping.data(), fi);
    BOOST_TEST(icmp[0] == 0);
    BOOST_TEST(frame::inet_checksum(icmp, 16) == 0);
    BOOST_TEST(frame::inet_checksum(&ping[14], 20) == 0);
    BOOST_TEST(ping[14 + 19] == 0x0A); // destination is now the peer
}

BOOST_AUTO_TEST_CASE(rtt_report_bodies) {
    wire::header h = contrib_header(3);
    h.type = msg_type::rtt_report;
    auto m = message(h, 3 * rtt_entry_bytes);
    for (unsigned i = 0; i < 3; ++i) encode_rtt_entry(static_cast<std::uint16_t>(100 + i), 7 * i, m.data() + header_bytes + i * rtt_entry_bytes);
    BOOST_TEST((parse(m) == drop_reason::none));
    std::uint16_t b;
    std::uint32_t n;
    decode_rtt_entry(m.data() + header_bytes + 2 * rtt_entry_bytes, b, n);
    BOOST_TEST(b == 102u);
    BOOST_TEST(n == 14u);
    // Taken whole by both kinds of rail: every entry, in order...
    const std::span<const std::uint8_t> body(m.data() + header_bytes, 3 * rtt_entry_bytes);
    std::vector<std::pair<unsigned, unsigned>> got;
    BOOST_TEST(take_rtt_entries(body, 3, 103, [&](std::uint16_t x, std::uint32_t y) { got.emplace_back(x, y); }));
    BOOST_TEST((got == std::vector<std::pair<unsigned, unsigned>>{{100, 0}, {101, 7}, {102, 14}}));
    // ...or none, when one names a bucket the histogram has not (the last).
    got.clear();
    BOOST_TEST(!take_rtt_entries(body, 3, 102, [&](std::uint16_t x, std::uint32_t y) { got.emplace_back(x, y); }));
    BOOST_TEST(got.empty());
    BOOST_TEST((parse(message(h, 3 * rtt_entry_bytes + 1)) == drop_reason::rg_rtt_body)); // trailing byte
    BOOST_TEST((parse(message(h, 2 * rtt_entry_bytes)) == drop_reason::rg_rtt_body));     // short
    h.count = 0;
    BOOST_TEST((parse(message(h, 0)) == drop_reason::rg_rtt_body));
    h.count = rtt_entries_per_msg + 1;
    BOOST_TEST((parse(message(h, h.count * rtt_entry_bytes)) == drop_reason::rg_rtt_body));
    // Only workers send it.
    h.count = 1;
    wire::header out;
    std::span<const std::uint8_t> p;
    const auto one = message(h, rtt_entry_bytes);
    BOOST_TEST((parse_server_message(one.data(), one.size(), out, p) == drop_reason::rg_type));
}

BOOST_AUTO_TEST_CASE(verbs_region_and_immediate) {
    // REGION travels both ways with a 16-byte body, big-endian.
    wire::header h = contrib_header(0);
    h.type = msg_type::region;
    std::vector<std::uint8_t> m = message(h, region_body_bytes);
    encode_region_body({0x0102030405060708ull, 0xaabbccdd, 65536}, m.data() + header_bytes);
    BOOST_TEST((m[header_bytes] == 0x01 && m[header_bytes + 8] == 0xaa));
    wire::header out;
    std::span<const std::uint8_t> body;
    BOOST_TEST((parse_worker_message(m.data(), m.size(), out, body) == drop_reason::none));
    const region_body rb = decode_region_body(body.data());
    BOOST_TEST(rb.addr == 0x0102030405060708ull);
    BOOST_TEST(rb.rkey == 0xaabbccddu);
    BOOST_TEST(rb.bytes == 65536u);
    BOOST_TEST((parse_server_message(m.data(), m.size(), out, body) == drop_reason::none));
    m.pop_back();
    BOOST_TEST((parse_worker_message(m.data(), m.size(), out, body) == drop_reason::rg_body));
    // The immediate: slot high, generation's low 16 bits low.
    BOOST_TEST(verbs_imm(5, 0x12345) == 0x00052345u);
    BOOST_TEST(verbs_imm_slot(verbs_imm(255, 7)) == 255u);
    BOOST_TEST(verbs_imm_gen(verbs_imm(255, 0x1ffff)) == 0xffffu);
}

// railgated's header-only answers (LEAVE_ACK, PONG, HELD) have no body: a
// RESULT whose type byte a bit flip made HELD (4 -> 12) is refused before
// the worker reads it, not taken for a HELD with a payload. Only railgated
// sends them.
BOOST_AUTO_TEST_CASE(header_only_answers_have_no_body) {
    for (const msg_type t : {msg_type::leave_ack, msg_type::pong, msg_type::held}) {
        wire::header h = contrib_header(0);
        h.type = t;
        h.count = 0;
        wire::header out;
        std::span<const std::uint8_t> body;
        const auto empty = message(h, 0);
        BOOST_TEST((parse_server_message(empty.data(), empty.size(), out, body) == drop_reason::none));
        BOOST_TEST(body.empty());
        BOOST_TEST((parse_worker_message(empty.data(), empty.size(), out, body) == drop_reason::rg_type));
        const auto with_body = message(h, 64);
        BOOST_TEST((parse_server_message(with_body.data(), with_body.size(), out, body) == drop_reason::rg_body));
    }
    wire::header r = contrib_header(16);
    r.type = msg_type::result;
    auto flipped = message(r, std::size_t{r.count} * 4);
    flipped[1] ^= 0x08; // RESULT (4) -> HELD (12)
    wire::header out;
    std::span<const std::uint8_t> body;
    BOOST_TEST((parse_server_message(flipped.data(), flipped.size(), out, body) == drop_reason::rg_body));
}

// Both planes answer with these: an ERROR keeps the request's job, token,
// rank and world, and parses as a server message with its text as body.
BOOST_AUTO_TEST_CASE(error_answers_keep_the_request_and_carry_the_code) {
    wire::header req = contrib_header(16);
    req.flags = 0xff;
    req.slot = 7;
    const wire::header e = wire::error_header(req, wire::error_code::rank_failed, 3, 9);
    BOOST_TEST((e.type == msg_type::error));
    BOOST_TEST(e.job_id == req.job_id);
    BOOST_TEST(e.job_token == req.job_token);
    BOOST_TEST(e.rank == req.rank);
    BOOST_TEST(e.world_size == req.world_size);
    BOOST_TEST(e.flags == 0);
    BOOST_TEST(e.count == 0u);
    BOOST_TEST(e.slot == 0);
    BOOST_TEST(e.offset == 3u);
    BOOST_TEST(e.gen == 9u);
    BOOST_TEST(e.aux == static_cast<std::uint32_t>(wire::error_code::rank_failed));
    BOOST_TEST(wire::error_text("", wire::error_code::expired) == wire::error_name(wire::error_code::expired));
    BOOST_TEST(wire::error_text("rank 2 died", wire::error_code::rank_failed) == "rank 2 died");
    const std::string longer(wire::max_error_text + 50, 'x');
    const std::string_view cut = wire::error_text(longer, wire::error_code::aborted);
    BOOST_TEST(cut.size() == wire::max_error_text);
    auto bytes = message(e, cut.size());
    std::memcpy(bytes.data() + wire::header_bytes, cut.data(), cut.size());
    wire::header out;
    std::span<const std::uint8_t> body;
    BOOST_TEST((parse_server_message(bytes.data(), bytes.size(), out, body) == drop_reason::none));
    BOOST_TEST(body.size() == cut.size());
}

BOOST_AUTO_TEST_CASE(checksum_matches_rfc1071_reference) {
    // The 16-bit big-endian word sum, folded and complemented, byte by byte.
    auto reference = [](const std::uint8_t* p, std::size_t n) {
        std::uint32_t acc = 0;
        for (std::size_t i = 0; i + 1 < n; i += 2) acc += static_cast<std::uint32_t>(p[i] << 8 | p[i + 1]);
        if (n & 1) acc += static_cast<std::uint32_t>(p[n - 1] << 8);
        while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
        return static_cast<std::uint16_t>(~acc);
    };
    std::vector<std::uint8_t> buf(2100);
    std::uint32_t x = 12345;
    for (auto& b : buf) b = static_cast<std::uint8_t>((x = x * 1103515245 + 12345) >> 16);
    for (std::size_t off = 0; off < 9; ++off)
        for (std::size_t n = 0; n < 2000; n += (n < 80 ? 1 : 37))
            BOOST_TEST(frame::inet_checksum(buf.data() + off, n) == reference(buf.data() + off, n), "off " << off << " n " << n);
    // All-ones data: carries on every add.
    std::vector<std::uint8_t> ff(1501, 0xff);
    for (std::size_t n : {0u, 1u, 2u, 7u, 8u, 9u, 1500u, 1501u})
        BOOST_TEST(frame::inet_checksum(ff.data(), n) == reference(ff.data(), n), "n " << n);
}

BOOST_AUTO_TEST_CASE(join_and_join_ack_carry_nonce_stall_and_excluded_rails) {
    join_body b;
    b.max_count = 123456789;
    b.pool_size = 77;
    b.op = 0xbeef;
    b.excluded_rails = 0x80000005u;
    b.nonce = 0x0123456789abcdefull;
    std::uint8_t jb[join_body_bytes];
    encode_join_body(b, jb);
    const join_body d = decode_join_body(jb);
    BOOST_TEST(d.max_count == b.max_count);
    BOOST_TEST(d.pool_size == 77u);
    BOOST_TEST(d.op == 0xbeefu);
    BOOST_TEST(d.excluded_rails == 0x80000005u);
    BOOST_TEST(d.nonce == b.nonce);

    join_ack_body a;
    a.pool_size = 8;
    a.n_rails = 3;
    a.chunk_bytes = 1024;
    a.stall_ms = 1500;
    a.excluded_rails = 0b010;
    for (unsigned r = 0; r < 3; ++r) a.rails[r].ip = 0xC6120001 + (r << 8);
    std::uint8_t buf[join_ack_fixed_bytes + max_rails * rail_entry_bytes];
    std::size_t n = encode_join_ack_body(a, buf);
    join_ack_body got;
    BOOST_REQUIRE(decode_join_ack_body({buf, n}, got));
    BOOST_TEST(got.stall_ms == 1500u);
    BOOST_TEST(got.excluded_rails == 0b010u);
    // Every rail excluded, or a rail beyond the list: nothing to stripe over.
    a.excluded_rails = 0b111;
    n = encode_join_ack_body(a, buf);
    BOOST_TEST(!decode_join_ack_body({buf, n}, got));
    a.excluded_rails = 0b1000;
    n = encode_join_ack_body(a, buf);
    BOOST_TEST(!decode_join_ack_body({buf, n}, got));
}

BOOST_AUTO_TEST_CASE(udp_checksums_catch_every_flipped_bit) {
    const auto msg = message(contrib_header(32), 128);
    auto f = udp_frame(msg);
    frame::fill_udp_checksum(f.data());
    frame::info fi = frame::classify(f.data(), f.size(), rail());
    BOOST_REQUIRE(static_cast<int>(fi.k) == static_cast<int>(frame::kind::udp));
    BOOST_TEST(frame::udp_checksum_ok(f.data(), f.size(), fi));
    // The payload's sum, given apart (railgated sums a result once for all
    // its copies), gives the same checksum.
    auto g = f;
    frame::fill_udp_checksum(g.data(), frame::ones_sum16(g.data() + frame::udp_frame_overhead, msg.size()));
    BOOST_TEST((g == f));
    // Any single bit flipped in the UDP header or payload is caught.
    for (std::size_t byte = frame::eth_bytes + frame::ipv4_bytes; byte < f.size(); ++byte)
        for (int bit = 0; bit < 8; ++bit) {
            auto c = f;
            c[byte] ^= static_cast<std::uint8_t>(1 << bit);
            const frame::info ci = frame::classify(c.data(), c.size(), rail());
            if (ci.k != frame::kind::udp) continue; // a flip in the ports or length is caught there
            BOOST_REQUIRE_MESSAGE(!frame::udp_checksum_ok(c.data(), c.size(), ci), "byte " << byte << " bit " << bit);
        }
    // No checksum (0) is not accepted.
    auto z = f;
    z[frame::eth_bytes + frame::ipv4_bytes + 6] = 0;
    z[frame::eth_bytes + frame::ipv4_bytes + 7] = 0;
    BOOST_TEST(!frame::udp_checksum_ok(z.data(), z.size(), fi));
    // Split in two pieces anywhere (a chained mbuf), odd offsets included.
    for (std::size_t cut = fi.msg_offset; cut <= f.size(); ++cut)
        BOOST_REQUIRE_MESSAGE(frame::udp_checksum_ok(f.data(), cut, fi, f.data() + cut, f.size() - cut), "cut " << cut);
    BOOST_TEST(!frame::udp_checksum_ok(f.data(), f.size() - 2, fi)); // short
}

// Headers for a port that computes the UDP checksum: the same frame but
// for the UDP checksum field, a complete IPv4 checksum, and in the field the
// pseudo header's sum (RFC 768: addresses, protocol, UDP length), which the
// port completes into the checksum the software path writes.
BOOST_AUTO_TEST_CASE(udp_offload_headers) {
    const auto msg = message(contrib_header(32), 128);
    const auto soft = udp_frame(msg);
    frame::endpoint src;
    src.ip = 0xC612000A;
    src.udp_port = 40000;
    std::vector<std::uint8_t> f(soft.size());
    frame::write_udp_headers_offloaded(f.data(), src, rail(), msg.size());
    std::memcpy(f.data() + frame::udp_frame_overhead, msg.data(), msg.size());
    const std::size_t csum = frame::eth_bytes + frame::ipv4_bytes + 6;
    for (std::size_t i = 0; i < f.size(); ++i)
        if (i != csum && i != csum + 1) BOOST_REQUIRE_MESSAGE(f[i] == soft[i], "byte " << i);
    BOOST_TEST(frame::inet_checksum(f.data() + frame::eth_bytes, frame::ipv4_bytes) == 0);
    const std::uint32_t udp_len = frame::udp_bytes + msg.size();
    std::uint32_t pseudo = (src.ip >> 16) + (src.ip & 0xffff) + (rail().ip >> 16) + (rail().ip & 0xffff) + 17 + udp_len;
    pseudo = (pseudo & 0xffff) + (pseudo >> 16);
    pseudo = (pseudo & 0xffff) + (pseudo >> 16);
    BOOST_TEST((f[csum] << 8 | f[csum + 1]) == pseudo);
    // Completed as the port does, it is the software checksum.
    f[csum] = f[csum + 1] = 0;
    frame::fill_udp_checksum(f.data());
    auto ref = soft;
    frame::fill_udp_checksum(ref.data());
    BOOST_TEST((f == ref));
}

// The sums every checksum is built from, against RFC 1071 byte by byte: the
// wide path (target clones, >= 256 bytes), the fused copy, and a total of
// little-endian words folded afterwards (the reduce kernels' way).
BOOST_AUTO_TEST_CASE(ones_sums_match_rfc1071_at_every_length) {
    std::mt19937 rng(7);
    std::vector<std::uint8_t> data(9100);
    for (auto& b : data) b = static_cast<std::uint8_t>(rng());
    // A run of 0xff bytes: carries out of every fold.
    std::fill(data.begin() + 4000, data.begin() + 6000, 0xff);
    auto reference = [](const std::uint8_t* p, std::size_t n) {
        std::uint32_t s = 0;
        for (std::size_t i = 0; i < n; ++i) s += i % 2 ? p[i] : p[i] << 8;
        while (s >> 16) s = (s & 0xffff) + (s >> 16);
        return static_cast<std::uint16_t>(s);
    };
    std::vector<std::uint8_t> copy(data.size());
    for (std::size_t off : {0u, 1u, 3u, 4000u})
        for (std::size_t n = 0; n + off <= data.size(); n += n < 600 ? 1 : 61) {
            const std::uint8_t* p = data.data() + off;
            const std::uint16_t want = reference(p, n);
            BOOST_REQUIRE_MESSAGE(frame::ones_sum16(p, n) == want, "ones_sum16 off " << off << " n " << n);
            std::fill(copy.begin(), copy.end(), 0);
            BOOST_REQUIRE_MESSAGE(frame::copy_and_sum(copy.data(), p, n) == want, "copy_and_sum n " << n);
            BOOST_REQUIRE(std::equal(p, p + n, copy.begin()));
            std::uint64_t words = 0;
            for (std::size_t i = 0; i < n; ++i) words += std::uint64_t{p[i]} << (8 * (i % 4));
            BOOST_REQUIRE_MESSAGE(frame::fold_words(words) == want,
                                  "fold_words n " << n);
        }
}

// The sums the hot paths compute from values (write_udp_headers'
// pseudo-header and UDP header, header_sum) match the bytes written.
BOOST_AUTO_TEST_CASE(header_sums_from_values_match_the_bytes) {
    std::mt19937_64 rng(11);
    for (int i = 0; i < 2000; ++i) {
        frame::endpoint a{}, b{};
        for (auto& x : a.mac.b) x = static_cast<std::uint8_t>(rng());
        for (auto& x : b.mac.b) x = static_cast<std::uint8_t>(rng());
        a.ip = static_cast<std::uint32_t>(rng());
        b.ip = i % 3 ? static_cast<std::uint32_t>(rng()) : 0xffffffff;
        a.udp_port = static_cast<std::uint16_t>(rng());
        b.udp_port = i % 5 ? static_cast<std::uint16_t>(rng()) : 0xffff;
        a.tos = static_cast<std::uint8_t>(rng());
        b.tos = i % 2 ? static_cast<std::uint8_t>(rng()) : 0;
        wire::header h;
        h.version = static_cast<std::uint8_t>(rng());
        h.type = static_cast<wire::msg_type>(rng() % 12);
        h.dt = static_cast<wire::dtype>(rng() % 4);
        h.flags = static_cast<std::uint8_t>(rng());
        h.job_id = static_cast<std::uint32_t>(rng());
        h.job_token = i % 7 ? rng() : ~0ull;
        h.rank = static_cast<std::uint16_t>(rng());
        h.world_size = static_cast<std::uint16_t>(rng());
        h.slot = static_cast<std::uint16_t>(rng());
        h.count = static_cast<std::uint16_t>(rng());
        h.offset = rng();
        h.gen = static_cast<std::uint32_t>(rng());
        h.aux = i % 11 ? static_cast<std::uint32_t>(rng()) : 0xffffffffu;
        const std::size_t body = rng() % 300;
        std::vector<std::uint8_t> f(frame::udp_frame_overhead + wire::header_bytes + body);
        for (std::size_t k = frame::udp_frame_overhead + wire::header_bytes; k < f.size(); ++k)
            f[k] = static_cast<std::uint8_t>(rng());
        const std::uint16_t hs = frame::write_udp_headers(f.data(), a, b, wire::header_bytes + body);
        encode_header(h, f.data() + frame::udp_frame_overhead);
        BOOST_REQUIRE_EQUAL(hs, frame::udp_header_sum(f.data()));
        BOOST_REQUIRE_EQUAL(header_sum(h), frame::ones_sum16(f.data() + frame::udp_frame_overhead, wire::header_bytes));
        BOOST_REQUIRE_EQUAL(frame::inet_checksum(f.data() + frame::eth_bytes, frame::ipv4_bytes), 0);
        frame::set_udp_checksum(
            f.data(), hs,
            frame::add_sums(header_sum(h), frame::ones_sum16(f.data() + frame::udp_frame_overhead + wire::header_bytes, body)));
        BOOST_REQUIRE(frame::udp_checksum_ok(f.data(), f.size()));
    }
}

// ECN: mark_ce turns ECT(0) and ECT(1) into CE with a valid IPv4 checksum
// (the UDP checksum does not cover the TOS), and leaves not-ECT, CE and
// short or non-IPv4 frames alone.
BOOST_AUTO_TEST_CASE(ce_marks_keep_the_ip_checksum_valid) {
    const auto msg = message(contrib_header(32), 128);
    for (std::uint8_t tos : {0x02, 0x01, 0xba, 0xb9, 0xfe}) {
        auto f = udp_frame(msg);
        f[frame::eth_bytes + 1] = tos;
        f[frame::eth_bytes + 10] = f[frame::eth_bytes + 11] = 0;
        const std::uint16_t c = frame::inet_checksum(f.data() + frame::eth_bytes, frame::ipv4_bytes);
        f[frame::eth_bytes + 10] = static_cast<std::uint8_t>(c >> 8);
        f[frame::eth_bytes + 11] = static_cast<std::uint8_t>(c);
        frame::fill_udp_checksum(f.data());
        BOOST_TEST(frame::mark_ce(f.data(), f.size()));
        BOOST_TEST((f[frame::eth_bytes + 1] & 0x03) == 0x03);
        BOOST_TEST((f[frame::eth_bytes + 1] & 0xfc) == (tos & 0xfc));
        const frame::info fi = frame::classify(f.data(), f.size(), rail());
        BOOST_TEST(drop_reason_name(fi.reason) == drop_reason_name(drop_reason::none), "tos " << int(tos));
        BOOST_TEST(frame::udp_checksum_ok(f.data(), f.size(), fi));
        BOOST_TEST(!frame::mark_ce(f.data(), f.size())); // already CE
    }
    auto plain = udp_frame(msg); // not ECN-capable
    const auto before = plain;
    BOOST_TEST(!frame::mark_ce(plain.data(), plain.size()));
    BOOST_TEST((plain == before));
    BOOST_TEST(!frame::mark_ce(plain.data(), 20)); // too short for its IPv4 header
    auto arp = plain;
    arp[12] = 0x08;
    arp[13] = 0x06;
    arp[frame::eth_bytes + 1] = 0x02;
    BOOST_TEST(!frame::mark_ce(arp.data(), arp.size()));
}
