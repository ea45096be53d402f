// libFuzzer target: railgated's receive path without DPDK. The input is a
// sequence of records [kind][len][bytes]: kind 0 is a raw frame for
// frame::classify; any other kind is a railgate message that the harness
// wraps in valid Ethernet/IPv4/UDP headers, so that the fuzzer spends its
// time in message validation and in the aggregator. Frames classified for
// the gateway go through the route table and the ICMP errors railgated
// would send about them. Invariants checked: no crash or sanitizer report,
// every ICMP error it writes has valid checksums, and every buffer the
// aggregator accepted is released exactly once (by the aggregator, or by
// the caller for the spares it hands out when the input's first byte is
// odd).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "dataplane/agg/aggregator.hpp"
#include "dataplane/net/fib.hpp"
#include "dataplane/proto/frame.hpp"
#include "dataplane/proto/parse.hpp"
#include "dataplane/reduce/reduce_variants.hpp"

using namespace railgate;

namespace {

std::map<void*, int>& released() {
    static std::map<void*, int> m;
    return m;
}
struct release {
    void operator()(void* p) const noexcept { ++released()[p]; }
};

const reduce::kernels scalar{reduce::isa::scalar,
                             "scalar",
                             {reduce::detail::sum_fp32_scalar, reduce::detail::sum_bf16_scalar,
                              reduce::detail::sum_fp16_scalar, reduce::detail::sum_int32_scalar}};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    released().clear();
    frame::endpoint self;
    self.ip = 0xC6120001;
    self.udp_port = wire::default_udp_port;
    agg::limits lim;
    lim.max_jobs = 2;
    lim.max_pool = 4;
    lim.default_pool = 2;
    lim.job_chunk_bytes = 64;
    lim.n_rails = 2;
    lim.rail_index = 1;
    std::vector<std::vector<std::uint8_t>> accepted; // stands in for held mbufs
    accepted.reserve(4096);
    std::size_t accepted_count = 0;
    // A gateway's table: a default route, nested prefixes, a host route.
    const net::lpm_table routes({{0, 0, 0}, {0x0A000000, 8, 1}, {0x0A020000, 16, 2}, {0x0A020300, 24, 3}, {0x0A020305, 32, 4}});
    {
        agg::rail_aggregator<release> a(lim);
        a.keep_spares(size && (data[0] & 1));
        agg::lifecycle life;
        life.stall = 1000;
        life.assemble = 5000;
        life.idle = 20000;
        life.max_pending = 2;
        a.set_lifecycle(life);
        std::uint64_t now = 0; // the lifecycle's clock: moved by the input
        std::size_t i = 0;
        while (i + 2 <= size && accepted.size() < 4000) {
            const std::uint8_t kind = data[i];
            const std::size_t len = std::min<std::size_t>(data[i + 1] * 8u + (kind & 7u), size - i - 2);
            const std::uint8_t* rec = data + i + 2;
            i += 2 + len;
            now += kind & 0x30u ? 100 : 1;
            a.jobs_table().expire(now, [&](agg::job& j, const agg::end_event&) { a.release(j); });
            // Four senders (the top bits of the record kind).
            frame::endpoint src;
            src.ip = 0xC612000A + (kind >> 6);
            src.udp_port = 4000;
            const std::uint64_t addr = std::uint64_t{src.ip} << 16 | src.udp_port;
            std::vector<std::uint8_t> f;
            if (kind == 0) {
                f.assign(rec, rec + len);
            } else {
                f.resize(frame::udp_frame_overhead + len);
                frame::write_udp_headers(f.data(), src, self, len);
                std::memcpy(f.data() + frame::udp_frame_overhead, rec, len);
            }
            const frame::info fi = frame::classify(f.data(), f.size(), self);
            if (fi.k == frame::kind::forward) {
                if (fi.l3_offset + 20 > f.size() || fi.l3_offset + fi.l4_len > f.size()) std::abort();
                const std::uint8_t* ip = f.data() + fi.l3_offset;
                const std::uint32_t dst = std::uint32_t{ip[16]} << 24 | ip[17] << 16 | ip[18] << 8 | ip[19];
                if (const auto hop = routes.lookup(dst); !hop || *hop > 4) std::abort(); // the default route matches all
                std::uint8_t icmp[frame::icmp_error_max];
                const std::size_t n = frame::write_icmp_error(icmp, self, frame::mac_addr{}, ip, f.size() - fi.l3_offset,
                                                              ip[8] <= 1 ? 11 : 3, ip[8] <= 1 ? 0 : 4, 1500);
                if (n > frame::icmp_error_max || (n && (frame::inet_checksum(icmp + 14, 20) != 0 ||
                                                        frame::inet_checksum(icmp + 34, n - 34) != 0)))
                    std::abort();
                continue;
            }
            if (fi.k != frame::kind::udp) continue;
            wire::header h;
            std::span<const std::uint8_t> payload;
            if (wire::parse_worker_message(f.data() + fi.msg_offset, fi.l4_len, h, payload) != drop_reason::none)
                continue;
            if (h.type == wire::msg_type::join) {
                const wire::join_body b = wire::decode_join_body(payload.data());
                const agg::peer who{addr, src.ip, b.nonce};
                agg::join_result r = a.join(h, b, fi.src, who, now);
                if (r.st == agg::join_status::takeover) {
                    a.release(agg::rail_aggregator<release>::table::as(r.j));
                    r = a.join(h, b, fi.src, who, now);
                    if (r.st == agg::join_status::takeover) std::abort(); // the old job is gone
                }
            } else if (h.type == wire::msg_type::leave) {
                a.leave(h, addr);
            } else if (h.type == wire::msg_type::error) {
                if (agg::job* j = a.find(h.job_id); j && a.jobs_table().check_sender(*j, h, addr) == drop_reason::none)
                    a.release(*j);
            } else if (h.type == wire::msg_type::contrib) {
                accepted.emplace_back(payload.begin(), payload.end());
                auto& buf = accepted.back();
                const agg::outcome o = a.contribute(h, buf.data(), &buf, scalar, now, addr);
                if (o.act == agg::action::stored || o.act == agg::action::completed) ++accepted_count;
                for (void* sp : a.spares()) release{}(sp); // railgated sends results in them
                if (o.act != agg::action::completed && !a.spares().empty()) std::abort();
            }
        }
    }
    std::size_t total = 0;
    for (auto& [p, n] : released()) {
        if (n != 1) std::abort(); // released twice
        ++total;
    }
    if (total != accepted_count) std::abort(); // leaked or released a non-accepted buffer
    return 0;
}
