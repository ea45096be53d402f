// Cost per packet of railgate's XDP steering program, from the kernel's own
// BPF_PROG_TEST_RUN timing (repeat N, mean ns per run), for each kind of
// frame it sees, against a 2-instruction XDP_PASS program measured in the
// same run. Root only (BPF). Prints the median of several rounds.
//
//   bench_xdp [--repeat N] [--rounds R]
#include <bpf/bpf.h>
#include <linux/bpf.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "dataplane/bpf/xdp_steer.hpp"
#include "dataplane/bpf/xsk_probe.hpp"
#include "dataplane/proto/frame.hpp"
#include "dataplane/proto/parse.hpp"
#include "tools/bench_flags.hpp"

using namespace railgate;

namespace {

using bytes = std::vector<std::uint8_t>;
constexpr std::uint32_t rail_ip = 0xc6120001, worker_ip = 0xc612000a;

bytes udp_frame(std::uint16_t dport, std::size_t payload, std::uint8_t proto = 17) {
    const frame::endpoint src{{{2, 0, 0, 0, 0, 10}}, worker_ip, 40000};
    const frame::endpoint dst{{{2, 0, 0, 0, 0, 1}}, rail_ip, dport};
    bytes f(frame::udp_frame_overhead + payload, 0);
    frame::write_udp_headers(f.data(), src, dst, payload);
    wire::header h;
    h.count = static_cast<std::uint16_t>((payload - wire::header_bytes) / 4);
    wire::encode_header(h, f.data() + frame::udp_frame_overhead);
    f[frame::eth_bytes + 9] = proto;
    return f;
}

// Mean ns of one run of prog_fd over frame f, as the kernel times it.
std::uint32_t time_run(int prog_fd, const bytes& f, unsigned ifindex, int repeat, std::uint32_t& action) {
    xdp_md ctx{};
    ctx.data_end = static_cast<__u32>(f.size());
    ctx.ingress_ifindex = ifindex;
    bpf_test_run_opts o{};
    o.sz = sizeof o;
    o.data_in = f.data();
    o.data_size_in = static_cast<__u32>(f.size());
    o.ctx_in = &ctx;
    o.ctx_size_in = sizeof ctx;
    o.repeat = repeat;
    if (bpf_prog_test_run_opts(prog_fd, &o) != 0) {
        std::perror("bench_xdp: BPF_PROG_TEST_RUN");
        std::exit(1);
    }
    action = o.retval;
    return o.duration;
}

const char* action_name(std::uint32_t a) {
    switch (a) {
    case XDP_PASS: return "pass";
    case XDP_DROP: return "drop";
    case XDP_REDIRECT: return "redirect";
    default: return "other";
    }
}

} // namespace

int main(int argc, char** argv) {
    int repeat = 1000000, rounds = 7;
    bench::flags args(argc, argv, "usage: bench_xdp [--repeat N] [--rounds R]");
    for (std::string a; args.next(a);) {
        if (a == "--repeat") repeat = args.number<int>(1, 1000000000);
        else if (a == "--rounds") rounds = args.number<int>(1, 1000);
        else args.unknown();
    }
    try {
        xdp::object prog(xdp::default_object_path());
        xdp::xsk_probe xsk;
        prog.program_maps().configure(rail_ip, wire::default_udp_port, wire::protocol_version);
        xsk.bind_to(prog.program_maps().xsk_fd());

        const bpf_insn pass[] = {
            {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, XDP_PASS},
            {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
        };
        const int baseline = bpf_prog_load(BPF_PROG_TYPE_XDP, "xdp_pass", "GPL", pass, 2, nullptr);
        if (baseline < 0) {
            std::perror("bench_xdp: loading the baseline program");
            return 1;
        }

        bytes arp(frame::arp_frame_bytes);
        frame::write_arp_request(arp.data(), {{{2, 0, 0, 0, 0, 10}}, worker_ip, 0}, rail_ip);
        bytes bad_version = udp_frame(wire::default_udp_port, wire::header_bytes + 1024);
        bad_version[frame::udp_frame_overhead] = wire::protocol_version + 1;
        struct bench_case {
            const char* name;
            bytes frame;
        };
        const std::vector<bench_case> cases = {
            {"railgate contrib 1 KiB", udp_frame(wire::default_udp_port, wire::header_bytes + 1024)},
            {"railgate contrib 3400 B", udp_frame(wire::default_udp_port, wire::header_bytes + 3400)},
            {"railgate bad version", bad_version},
            {"UDP other port", udp_frame(53, 512)},
            {"TCP to the rail", udp_frame(22, 512, 6)},
            {"ARP request", arp},
        };
        std::printf("# bench_xdp: BPF_PROG_TEST_RUN, repeat %d, median of %d rounds, ns per packet\n", repeat,
                    rounds);
        std::printf("# %-24s %-9s %10s %12s %12s\n", "frame", "verdict", "railgate", "xdp_pass", "difference");
        for (const bench_case& c : cases) {
            std::vector<std::uint32_t> ours, base;
            std::uint32_t action = 0, ignored = 0;
            for (int r = 0; r < rounds; ++r) {
                ours.push_back(time_run(prog.prog_fd(), c.frame, xsk.ifindex(), repeat, action));
                base.push_back(time_run(baseline, c.frame, xsk.ifindex(), repeat, ignored));
            }
            std::nth_element(ours.begin(), ours.begin() + rounds / 2, ours.end());
            std::nth_element(base.begin(), base.begin() + rounds / 2, base.end());
            const long o = ours[static_cast<std::size_t>(rounds / 2)], b = base[static_cast<std::size_t>(rounds / 2)];
            std::printf("  %-24s %-9s %10ld %12ld %+12ld\n", c.name, action_name(action), o, b, o - b);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_xdp: %s\n", e.what());
        return 1;
    }
    return 0;
}
