// Reduction kernel bandwidth against memcpy, measured in the same run.
//   bench_reduce [--reps N]
// For W inputs of n bytes reduced in place into input 0 (as the data plane
// does), bytes moved = (W + 1) * n (W reads, 1 write); memcpy of n bytes
// moves 2 * n. Sizes: L2-resident (W inputs fit in 1 MiB) and DRAM (64 MiB
// per input). Then the compressed allreduce's conversions (narrow: divide
// and round to a 16-bit type; widen: back to fp32), per variant.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "dataplane/reduce/reduce.hpp"
#include "tools/bench_common.hpp"
#include "tools/bench_flags.hpp"

using namespace railgate;

namespace {

using clk = std::chrono::steady_clock;

template <class F>
double best_seconds(unsigned reps, F&& f) {
    double best = 1e30;
    for (unsigned r = 0; r < reps; ++r) {
        const auto t0 = clk::now();
        f();
        best = std::min(best, std::chrono::duration<double>(clk::now() - t0).count());
    }
    return best;
}

} // namespace

int main(int argc, char** argv) {
    unsigned reps = 10;
    bench::flags args(argc, argv, "usage: bench_reduce [--reps N]");
    for (std::string a; args.next(a);) {
        if (a == "--reps") reps = args.number<unsigned>(1, 1000000);
        else args.unknown();
    }
    std::printf("# bench_reduce: best of %u, GB/s = bytes moved / s; ratio = kernel GB/s / memcpy GB/s\n", reps);
    std::printf("# %-8s %-18s %-6s %3s %10s %10s %10s %7s\n", "size", "variant", "dtype", "W", "bytes/in", "GB/s",
                "memcpy", "ratio");
    struct size_case {
        const char* name;
        std::size_t bytes_for_w(unsigned w) const { return dram ? (64u << 20) : (1u << 20) / (w + 1); }
        bool dram;
    };
    for (const size_case sc : {size_case{"L2", false}, size_case{"DRAM", true}}) {
        for (unsigned w : {2u, 4u, 8u}) {
            const std::size_t bytes = sc.bytes_for_w(w) & ~std::size_t{63};
            std::vector<std::vector<std::uint8_t>> in(w, std::vector<std::uint8_t>(bytes));
            for (unsigned r = 0; r < w; ++r) bench::fill_input(in[r].data(), bytes / 4, wire::dtype::fp32, r, 1);
            std::vector<const void*> ptrs;
            for (auto& v : in) ptrs.push_back(v.data());
            std::vector<std::uint8_t> dst(bytes), src(bytes, 1);
            // memcpy baseline on the same per-input size, same run.
            const std::size_t iters = sc.dram ? 1 : std::max<std::size_t>(1, (256u << 20) / bytes);
            const double tm = best_seconds(reps, [&] {
                for (std::size_t i = 0; i < iters; ++i) std::memcpy(dst.data(), src.data(), bytes);
            });
            const double memcpy_gbs = 2.0 * static_cast<double>(bytes) * static_cast<double>(iters) / tm / 1e9;
            for (unsigned l = 0; l < reduce::isa_count; ++l) {
                const reduce::kernels* k = reduce::get(static_cast<reduce::isa>(l));
                if (!k) continue;
                // Each kernel plain, then with its inputs' checksum words
                // summed on the way (what railgated's data plane runs).
                for (wire::dtype dt : {wire::dtype::fp32, wire::dtype::bf16})
                    for (bool words : {false, true}) {
                        const std::size_t n = bytes / wire::dtype_size(dt);
                        std::uint64_t sums[wire::max_world + 1] = {};
                        const double t = best_seconds(reps, [&] {
                            for (std::size_t i = 0; i < iters; ++i)
                                if (words) k->with_words(dt)(in[0].data(), ptrs.data(), w, n, sums);
                                else (*k)[dt](in[0].data(), ptrs.data(), w, n);
                        });
                        const double gbs = static_cast<double>(w + 1) * static_cast<double>(bytes) *
                                           static_cast<double>(iters) / t / 1e9;
                        const std::string name = std::string(k->name) + (words ? "+words" : "");
                        std::printf("  %-8s %-18s %-6s %3u %10zu %10.2f %10.2f %7.2f\n", sc.name, name.c_str(),
                                    std::string(wire::dtype_name(dt)).c_str(), w, bytes, gbs, memcpy_gbs,
                                    gbs / memcpy_gbs);
                    }
            }
        }
    }
    // The compressed allreduce's conversions (the DDP hooks' float32
    // buckets on a 16-bit wire, and the fp32 division), 16 Mi elements from
    // DRAM: bytes moved = what they read plus what they write.
    std::printf("# conversions, %s: GB/s = bytes moved / s; ratio = against memcpy in the same run\n", "DRAM 16 Mi elements");
    std::printf("# %-8s %-18s %-12s %10s %10s %7s\n", "size", "variant", "op", "GB/s", "memcpy", "ratio");
    const std::size_t n = std::size_t{16} << 20;
    std::vector<float> f(n);
    bench::fill_input(f.data(), n, wire::dtype::fp32, 0, 1);
    std::vector<std::uint16_t> h(n);
    std::vector<std::uint8_t> cdst(4 * n), csrc(4 * n, 1);
    const double tm = best_seconds(reps, [&] { std::memcpy(cdst.data(), csrc.data(), 4 * n); });
    const double memcpy_gbs = 8.0 * static_cast<double>(n) / tm / 1e9;
    for (unsigned l = 0; l < reduce::isa_count; ++l) {
        const reduce::kernels* k = reduce::get(static_cast<reduce::isa>(l));
        if (!k) continue;
        auto row = [&](const char* op, double bytes_per_elem, auto&& fn) {
            const double gbs = bytes_per_elem * static_cast<double>(n) / best_seconds(reps, fn) / 1e9;
            std::printf("  %-8s %-18s %-12s %10.2f %10.2f %7.2f\n", "CVT", std::string(k->name).c_str(), op, gbs,
                        memcpy_gbs, gbs / memcpy_gbs);
        };
        row("div-fp32", 8, [&] { k->narrow[0](f.data(), f.data(), 1.0f, n); });
        row("narrow-bf16", 6, [&] { k->narrow[1](h.data(), f.data(), 2.0f, n); });
        row("widen-bf16", 6, [&] { k->widen[1](f.data(), h.data(), n); });
        row("narrow-fp16", 6, [&] { k->narrow[2](h.data(), f.data(), 2.0f, n); });
        row("widen-fp16", 6, [&] { k->widen[2](f.data(), h.data(), n); });
    }
    return 0;
}
