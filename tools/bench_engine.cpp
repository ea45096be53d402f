// Large-block reduce: the engine's parallel reduce (one arena, all of this
// machine's cores) against the single-thread kernel, W = 4 inputs, from
// 16 KiB to 64 MiB per input, median of 7. The crossover sets the engine's
// threshold (below it, blocks stay inline on their lcore).
//
//   build/tools/bench_engine
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "dataplane/engine/engine.hpp"
#include "tools/bench_flags.hpp"

using namespace railgate;
using clk = std::chrono::steady_clock;

int main(int argc, char** argv) {
    railgate::bench::flags args(argc, argv, "usage: bench_engine (no flags: fp32 and bf16, 16 KiB to 64 MiB an input)");
    for (std::string a; args.next(a);) args.unknown();
    const engine::topology topo = engine::topology::load();
    const engine::engine eng(topo, 0); // threshold 0: always parallel, to measure it
    const reduce::kernels& k = reduce::best();
    std::printf("# engine: %s; kernels %s\n", eng.describe().c_str(), std::string(k.name).c_str());
    std::printf("# %12s %6s %14s %14s %8s\n", "bytes/input", "dtype", "1 thread GB/s", "engine GB/s", "speedup");
    for (wire::dtype dt : {wire::dtype::fp32, wire::dtype::bf16})
        for (std::size_t bytes = 16 << 10; bytes <= (64u << 20); bytes *= 4) {
            const std::size_t n = bytes / wire::dtype_size(dt);
            std::vector<std::vector<std::uint8_t>> in(4, std::vector<std::uint8_t>(bytes, 1));
            std::vector<std::uint8_t> dst(bytes);
            const void* src[4] = {in[0].data(), in[1].data(), in[2].data(), in[3].data()};
            const unsigned reps = static_cast<unsigned>(std::max<std::size_t>(1, (256u << 20) / (bytes * 5)));
            auto time = [&](auto&& f) {
                std::vector<double> v;
                for (int r = 0; r < 7; ++r) {
                    const auto t0 = clk::now();
                    for (unsigned i = 0; i < reps; ++i) f();
                    v.push_back(std::chrono::duration<double>(clk::now() - t0).count() / reps);
                }
                std::sort(v.begin(), v.end());
                return static_cast<double>(bytes) * 5 / v[3] / 1e9; // 4 inputs read + 1 written
            };
            const double one = time([&] { k[dt](dst.data(), src, 4, n); });
            const double par = time([&] { eng.reduce(k, dt, dst.data(), src, 4, n, 0); });
            std::printf("  %12zu %6s %14.1f %14.1f %8.2f\n", bytes, std::string(wire::dtype_name(dt)).c_str(), one, par,
                        par / one);
        }
    return 0;
}
