// railctl capture's pure parts: the lcore-to-control-thread ring, the job
// filter, and the pcapng blocks.
#define BOOST_TEST_MODULE capture
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <thread>
#include <vector>

#include "control/pcapng.hpp"
#include "dataplane/net/capture.hpp"
#include "dataplane/proto/frame.hpp"
#include "dataplane/proto/parse.hpp"

using namespace railgate;
using net::capture_dir;
using net::capture_ring;

namespace {
std::uint32_t u32(const std::string& s, std::size_t at) {
    std::uint32_t v;
    std::memcpy(&v, s.data() + at, 4);
    return v;
}
std::uint16_t u16(const std::string& s, std::size_t at) {
    std::uint16_t v;
    std::memcpy(&v, s.data() + at, 2);
    return v;
}
bool push(capture_ring& r, std::uint32_t len, std::uint64_t ns, unsigned char fill) {
    capture_ring::record* x = r.reserve(len, capture_dir::tx, drop_reason::none, ns);
    if (!x) return false;
    std::memset(capture_ring::data(x), fill, x->cap_len);
    r.commit();
    return true;
}
} // namespace

BOOST_AUTO_TEST_CASE(ring_keeps_order_truncates_and_refuses_when_full) {
    capture_ring r(100, 64 * 1024);
    BOOST_TEST(r.slots() >= 64u);
    BOOST_TEST(!r.front());
    std::size_t n = 0;
    while (push(r, static_cast<std::uint32_t>(50 + n), n, static_cast<unsigned char>(n))) ++n;
    BOOST_TEST(n == r.slots()); // full: the next reserve says so, nothing overwritten
    for (std::size_t i = 0; i < n; ++i) {
        const capture_ring::record* x = r.front();
        BOOST_REQUIRE(x);
        BOOST_TEST(x->ns == i);
        BOOST_TEST(x->orig_len == 50 + i);
        BOOST_TEST(x->cap_len == std::min<std::size_t>(50 + i, 100)); // snaplen
        BOOST_TEST(capture_ring::data(x)[x->cap_len - 1] == static_cast<unsigned char>(i));
        r.pop();
        if (i == 3) BOOST_TEST(push(r, 10, 1000, 0)); // room again once read
    }
    BOOST_TEST(r.front()->ns == 1000u);
}

BOOST_AUTO_TEST_CASE(ring_between_two_threads_loses_and_reorders_nothing) {
    capture_ring r(64, 64 * 1024);
    constexpr std::uint64_t total = 200000;
    std::uint64_t refused = 0;
    std::thread producer([&] {
        for (std::uint64_t i = 0; i < total;)
            if (push(r, 64, i, static_cast<unsigned char>(i))) ++i;
            else ++refused;
    });
    std::uint64_t next = 0;
    bool ok = true;
    while (next < total) {
        const capture_ring::record* x = r.front();
        if (!x) continue;
        ok &= x->ns == next && capture_ring::data(x)[63] == static_cast<unsigned char>(next);
        r.pop();
        ++next;
    }
    producer.join();
    BOOST_TEST(ok);
    BOOST_TEST(!r.front());
    BOOST_TEST_MESSAGE("producer found the ring full " << refused << " times");
}

BOOST_AUTO_TEST_CASE(job_filter_reads_railgate_datagrams_only) {
    std::uint8_t f[200] = {};
    frame::endpoint a{}, b{};
    a.ip = 0x0A000001;
    b.ip = 0x0A000002;
    a.udp_port = 40000;
    b.udp_port = 47000;
    frame::write_udp_headers(f, a, b, wire::header_bytes);
    wire::header h;
    h.job_id = 0xDEADBEEF;
    wire::encode_header(h, f + frame::udp_frame_overhead);
    const std::size_t len = frame::udp_frame_overhead + wire::header_bytes;
    BOOST_TEST(net::frame_of_job(f, len, 47000, 0xDEADBEEF));
    BOOST_TEST(!net::frame_of_job(f, len, 47000, 7));
    BOOST_TEST(!net::frame_of_job(f, len, 47001, 0xDEADBEEF)); // not railgate's port
    BOOST_TEST(!net::frame_of_job(f, frame::udp_frame_overhead + 7, 47000, 0xDEADBEEF)); // cut short
    for (std::size_t n = 0; n < len; ++n) net::frame_of_job(f, n, 47000, 0xDEADBEEF); // never reads past n
    // The same datagram behind an 802.1Q tag.
    std::uint8_t t[204] = {};
    std::memcpy(t, f, 12);
    t[12] = 0x81;
    t[14] = 0xA0;
    std::memcpy(t + 16, f + 12, len - 12);
    BOOST_TEST(net::frame_of_job(t, len + 4, 47000, 0xDEADBEEF));
    f[12] = 0x86; // IPv6: not parsed
    BOOST_TEST(!net::frame_of_job(f, len, 47000, 0xDEADBEEF));
}

BOOST_AUTO_TEST_CASE(pcapng_blocks) {
    std::string out;
    control::pcapng::begin(out, "railgated test", {{"r0", "net_ring0", 128}, {"r1", "", 9000}});
    BOOST_TEST(u32(out, 0) == 0x0A0D0D0Au);
    BOOST_TEST(u32(out, 8) == 0x1A2B3C4Du);
    std::size_t at = 0;
    std::vector<std::uint32_t> types;
    while (at < out.size()) { // blocks chain by their lengths, each repeated at its end
        const std::uint32_t len = u32(out, at + 4);
        BOOST_REQUIRE(len % 4 == 0);
        BOOST_REQUIRE(at + len <= out.size());
        BOOST_TEST(u32(out, at + len - 4) == len);
        types.push_back(u32(out, at));
        at += len;
    }
    BOOST_TEST((types == std::vector<std::uint32_t>{0x0A0D0D0A, 1, 1}));
    const std::size_t epb = out.size();
    control::pcapng::packet(out, 1, 0x123456789ABCull, "abcde", 1500, control::pcapng::direction::outbound,
                            "drop: tx_full: transmit queue full");
    BOOST_TEST(u32(out, epb) == 6u);
    const std::uint32_t len = u32(out, epb + 4);
    BOOST_TEST(len == out.size() - epb);
    BOOST_TEST(u32(out, epb + 8) == 1u);                // interface
    BOOST_TEST(u32(out, epb + 12) == 0x1234u);          // timestamp, high
    BOOST_TEST(u32(out, epb + 16) == 0x56789ABCu);      // low
    BOOST_TEST(u32(out, epb + 20) == 5u);               // captured
    BOOST_TEST(u32(out, epb + 24) == 1500u);            // on the wire
    BOOST_TEST(out.substr(epb + 28, 5) == "abcde");
    std::size_t o = epb + 28 + 8;                       // data padded to 4
    BOOST_TEST(u16(out, o) == 2u);                      // epb_flags
    BOOST_TEST(u32(out, o + 4) == 2u);                  // outbound
    BOOST_TEST(u16(out, o + 8) == 1u);                  // opt_comment
    BOOST_TEST(out.substr(o + 12, u16(out, o + 10)) == "drop: tx_full: transmit queue full");
    BOOST_TEST(u32(out, epb + len - 8) == 0u);          // opt_endofopt
}
