// The XDP steering program under BPF_PROG_TEST_RUN: verdict and counter for
// every kind of frame, truncation at every length, IP options, VLAN.
// Needs root (BPF). An xsk_probe socket in xsks_map makes redirects real.
#define BOOST_TEST_MODULE xdp_prog
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>

#include <cstring>
#include <set>
#include <vector>

#include "dataplane/bpf/xdp_steer.hpp"
#include "dataplane/bpf/xsk_probe.hpp"
#include "dataplane/proto/frame.hpp"
#include "dataplane/proto/parse.hpp"

using namespace railgate;
using bytes = std::vector<std::uint8_t>;

namespace {

constexpr std::uint32_t rail_ip = 0xc6120001;   // 198.18.0.1
constexpr std::uint32_t worker_ip = 0xc612000a; // 198.18.0.10
constexpr std::uint16_t rg_port = 47000;

frame::endpoint worker() { return {{{2, 0, 0, 0, 0, 10}}, worker_ip, 40000}; }
frame::endpoint rail() { return {{{2, 0, 0, 0, 0, 1}}, rail_ip, rg_port}; }

// A CONTRIB of `count` fp32 elements, as a worker sends it.
bytes contrib(std::uint16_t count = 4) {
    wire::header h;
    h.type = wire::msg_type::contrib;
    h.job_id = 1;
    h.world_size = 2;
    h.count = count;
    const std::size_t payload = wire::header_bytes + count * 4u;
    bytes f(frame::udp_frame_overhead + payload, 0x5a);
    frame::write_udp_headers(f.data(), worker(), rail(), payload);
    wire::encode_header(h, f.data() + frame::udp_frame_overhead);
    return f;
}

void put16(bytes& f, std::size_t at, std::uint16_t v) {
    f[at] = static_cast<std::uint8_t>(v >> 8);
    f[at + 1] = static_cast<std::uint8_t>(v);
}
std::uint16_t get16(const bytes& f, std::size_t at) { return static_cast<std::uint16_t>(f[at] << 8 | f[at + 1]); }

constexpr std::size_t ip_at = frame::eth_bytes;
constexpr std::size_t udp_at = ip_at + frame::ipv4_bytes;

// Inserts `n` bytes of IP options (NOPs) after the base IPv4 header.
bytes with_ip_options(bytes f, std::size_t n) {
    f.insert(f.begin() + static_cast<long>(udp_at), n, std::uint8_t{1});
    f[ip_at] = static_cast<std::uint8_t>(0x40 | (frame::ipv4_bytes + n) / 4);
    put16(f, ip_at + 2, static_cast<std::uint16_t>(get16(f, ip_at + 2) + n));
    return f;
}

struct fixture {
    xdp::object prog{xdp::default_object_path()};
    xdp::maps& m = prog.program_maps();
    xdp::xsk_probe xsk;

    fixture() { m.configure(rail_ip, rg_port, wire::protocol_version); }

    void bind_socket() { xsk.bind_to(m.xsk_fd()); }

    // Runs one frame; checks the action and that exactly `reason` counted it.
    void expect(const bytes& f, std::uint32_t action, unsigned reason, std::size_t len = SIZE_MAX) {
        const std::size_t n = std::min(len, f.size());
        const xdp::counters before = m.read();
        const auto r = prog.run(f.data(), n, 1, xsk.ifindex(), 0);
        const xdp::counters after = m.read();
        BOOST_TEST(r.action == action, "length " << n << ": action " << r.action << ", want " << action);
        for (unsigned i = 0; i < RG_XDP_REASONS; ++i)
            BOOST_TEST(after[i] - before[i] == (i == reason ? 1u : 0u),
                       "length " << n << ": counter " << xdp::reason_name(i) << " moved by " << after[i] - before[i]);
    }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(xdp_prog, fixture)

BOOST_AUTO_TEST_CASE(unconfigured_passes_everything) {
    m.configure(rail_ip, rg_port, wire::protocol_version, false);
    bind_socket();
    expect(contrib(), XDP_PASS, RG_XDP_PASS_UNCONFIGURED);
}

BOOST_AUTO_TEST_CASE(railgate_packet_is_redirected_once_a_socket_is_bound) {
    expect(contrib(), XDP_PASS, RG_XDP_PASS_NO_XSK);
    bind_socket();
    expect(contrib(), XDP_REDIRECT, RG_XDP_REDIRECT);
    expect(contrib(1), XDP_REDIRECT, RG_XDP_REDIRECT);
    bytes join = contrib(0);
    expect(join, XDP_REDIRECT, RG_XDP_REDIRECT); // a bare 40-byte header is a valid length
}

BOOST_AUTO_TEST_CASE(host_traffic_goes_to_the_kernel) {
    bind_socket();
    bytes f = contrib();
    put16(f, udp_at + 2, 22);
    expect(f, XDP_PASS, RG_XDP_PASS_OTHER_PORT);
    f = contrib();
    put16(f, udp_at + 2, rg_port + 1);
    expect(f, XDP_PASS, RG_XDP_PASS_OTHER_PORT);
    f = contrib();
    f[ip_at + 19] = 2; // 198.18.0.2
    expect(f, XDP_PASS, RG_XDP_PASS_OTHER_ADDR);
    f = contrib();
    f[ip_at + 9] = 6;
    expect(f, XDP_PASS, RG_XDP_PASS_TCP);
    f[ip_at + 9] = 1;
    expect(f, XDP_PASS, RG_XDP_PASS_ICMP);
    f[ip_at + 9] = 47;
    expect(f, XDP_PASS, RG_XDP_PASS_OTHER_L4);
    f = contrib();
    put16(f, ip_at + 6, 0x2000); // MF
    expect(f, XDP_PASS, RG_XDP_PASS_FRAGMENT);
    put16(f, ip_at + 6, 0x0010); // offset 128, DF clear
    expect(f, XDP_PASS, RG_XDP_PASS_FRAGMENT);
    f = contrib();
    put16(f, 12, 0x86dd);
    expect(f, XDP_PASS, RG_XDP_PASS_OTHER_L3);

    bytes arp(frame::arp_frame_bytes);
    frame::write_arp_request(arp.data(), worker(), rail_ip);
    expect(arp, XDP_PASS, RG_XDP_PASS_ARP);
}

BOOST_AUTO_TEST_CASE(vlan_tagged_frames_go_to_the_kernel) {
    bind_socket();
    for (std::uint16_t tpid : {0x8100, 0x88a8}) {
        bytes f = contrib();
        const std::uint8_t tag[4] = {static_cast<std::uint8_t>(tpid >> 8), static_cast<std::uint8_t>(tpid), 0, 5};
        f.insert(f.begin() + 12, tag, tag + 4);
        expect(f, XDP_PASS, RG_XDP_PASS_VLAN);
    }
}

BOOST_AUTO_TEST_CASE(truncation_at_every_length) {
    bind_socket();
    const bytes f = contrib(4);
    constexpr std::size_t rg_end = frame::udp_frame_overhead + wire::header_bytes;
    for (std::size_t len = 0; len < frame::eth_bytes; ++len) {
        // The kernel never runs XDP on less than an Ethernet header; the
        // program would pass such a frame as malformed.
        BOOST_CHECK_THROW(prog.run(f.data(), len, 1, xsk.ifindex(), 0), std::runtime_error);
    }
    for (std::size_t len = frame::eth_bytes; len <= f.size(); ++len) {
        if (len < frame::udp_frame_overhead)
            expect(f, XDP_PASS, RG_XDP_PASS_MALFORMED, len);
        else if (len < rg_end)
            expect(f, XDP_DROP, RG_XDP_DROP_SHORT, len);
        else if (len < f.size())
            expect(f, XDP_DROP, RG_XDP_DROP_BAD_LENGTH, len);
        else
            expect(f, XDP_REDIRECT, RG_XDP_REDIRECT, len);
    }
}

BOOST_AUTO_TEST_CASE(ip_options_are_parsed_not_refused) {
    bind_socket();
    for (std::size_t n : {4u, 8u, 40u}) {
        const bytes f = with_ip_options(contrib(), n);
        expect(f, XDP_REDIRECT, RG_XDP_REDIRECT);
        // Cut inside the UDP header that now sits after the options.
        expect(f, XDP_PASS, RG_XDP_PASS_MALFORMED, udp_at + n + 4);
        expect(f, XDP_DROP, RG_XDP_DROP_SHORT, udp_at + n + frame::udp_bytes + 1);
    }
    bytes f = contrib();
    f[ip_at] = 0x44; // IHL 16 bytes: not IPv4
    expect(f, XDP_PASS, RG_XDP_PASS_MALFORMED);
    f[ip_at] = 0x65; // version 6 in an IPv4 ethertype
    expect(f, XDP_PASS, RG_XDP_PASS_MALFORMED);
}

BOOST_AUTO_TEST_CASE(invalid_railgate_packets_are_dropped_early) {
    bind_socket();
    bytes f = contrib();
    f[frame::udp_frame_overhead] = wire::protocol_version + 1;
    expect(f, XDP_DROP, RG_XDP_DROP_BAD_VERSION);
    f = contrib();
    put16(f, udp_at + 4, static_cast<std::uint16_t>(get16(f, udp_at + 4) - 1)); // UDP length short by one
    expect(f, XDP_DROP, RG_XDP_DROP_BAD_LENGTH);
    f = contrib();
    put16(f, ip_at + 2, static_cast<std::uint16_t>(get16(f, ip_at + 2) + 1)); // IP length beyond the frame
    expect(f, XDP_DROP, RG_XDP_DROP_BAD_LENGTH);
    f = contrib();
    f.push_back(0); // Ethernet padding after the datagram is fine
    expect(f, XDP_REDIRECT, RG_XDP_REDIRECT);
}

BOOST_AUTO_TEST_CASE(counters_accumulate_across_runs) {
    bind_socket();
    const bytes f = contrib();
    const auto r = prog.run(f.data(), f.size(), 1000, xsk.ifindex(), 0);
    BOOST_TEST(r.action == XDP_REDIRECT);
    BOOST_TEST(m.read()[RG_XDP_REDIRECT] == 1000u);
}

// A railgate program left by a dead railgated is removed; one owned by a
// live process, or any foreign program, is refused and stays.
BOOST_AUTO_TEST_CASE(clear_stale_removes_only_what_a_dead_railgated_left) {
    const int lo = static_cast<int>(xsk.ifindex());
    BOOST_TEST(!xdp::clear_stale("lo"));
    BOOST_CHECK_THROW(xdp::clear_stale("no-such-if0"), std::runtime_error);

    // Foreign: a two-instruction XDP_PASS program.
    const bpf_insn pass[] = {
        {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, XDP_PASS},
        {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
    };
    const int foreign = bpf_prog_load(BPF_PROG_TYPE_XDP, "other_prog", "GPL", pass, 2, nullptr);
    BOOST_TEST_REQUIRE(foreign >= 0);
    BOOST_TEST_REQUIRE(bpf_xdp_attach(lo, foreign, XDP_FLAGS_SKB_MODE, nullptr) == 0);
    BOOST_CHECK_THROW(xdp::clear_stale("lo"), std::runtime_error);
    BOOST_TEST(xdp::has_program(xsk.ifindex()));
    BOOST_TEST(!xdp::attached::find(xsk.ifindex()));
    BOOST_TEST_REQUIRE(bpf_xdp_detach(lo, XDP_FLAGS_SKB_MODE, nullptr) == 0);
    close(foreign);

    // Ours, owned by a live process (pid 1): refused.
    BOOST_TEST_REQUIRE(bpf_xdp_attach(lo, prog.prog_fd(), XDP_FLAGS_SKB_MODE, nullptr) == 0);
    auto found = xdp::attached::find(xsk.ifindex());
    BOOST_TEST_REQUIRE(found);
    found->program_maps().configure(rail_ip, rg_port, wire::protocol_version, true, 1);
    BOOST_CHECK_THROW(xdp::clear_stale("lo"), std::runtime_error);
    BOOST_TEST(xdp::has_program(xsk.ifindex()));

    // Ours, owner gone: removed.
    const pid_t child = fork();
    if (child == 0) _exit(0);
    BOOST_TEST_REQUIRE(waitpid(child, nullptr, 0) == child);
    found->program_maps().configure(rail_ip, rg_port, wire::protocol_version, true,
                                    static_cast<std::uint32_t>(child));
    BOOST_TEST(xdp::clear_stale("lo"));
    BOOST_TEST(!xdp::has_program(xsk.ifindex()));
}

BOOST_AUTO_TEST_CASE(reason_names_are_unique_and_complete) {
    std::set<std::string_view> seen;
    for (unsigned i = 0; i < RG_XDP_REASONS; ++i) BOOST_TEST(seen.insert(xdp::reason_name(i)).second);
    BOOST_TEST(!seen.count("?"));
    BOOST_TEST(xdp::reason_name(RG_XDP_REASONS) == "?");
}

BOOST_AUTO_TEST_SUITE_END()
