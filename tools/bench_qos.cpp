// The TC scheduler's cost per packet: enqueue + dequeue of 2^22 items
// spread over 8 TCs (two strict, six ETS; every TC and the rail shaped at
// rates that never hold a packet back, so the shaper arithmetic runs but
// never waits), against a plain FIFO of the same items in the same run
// (the unshaped path queues nothing). steady_clock is read once per burst
// of 32, as the rail loop would. Median of 7 rounds.
//
//   build/tools/bench_qos
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <vector>

#include "dataplane/qos/scheduler.hpp"
#include "tools/bench_flags.hpp"

using namespace railgate::qos;
using clk = std::chrono::steady_clock;

int main(int argc, char** argv) {
    railgate::bench::flags args(argc, argv, "usage: bench_qos (no flags: 2^22 packets over 8 TCs, 7 rounds)");
    for (std::string a; args.next(a);) args.unknown();
    constexpr unsigned n = 1u << 22, burst = 32;
    std::vector<unsigned> tcs(n);
    for (unsigned i = 0; i < n; ++i) tcs[i] = (i * 2654435761u) >> 29; // 0..7, scattered
    std::vector<double> sched_ns, fifo_ns;
    std::uint64_t sink = 0;
    for (int round = 0; round < 7; ++round) {
        scheduler<unsigned, clk>::options o;
        o.tcs[6].strict = o.tcs[7].strict = true;
        for (unsigned t = 0; t < tc_count; ++t) {
            o.tcs[t].weight = t + 1;
            o.tcs[t].rate_bps = 400'000'000'000ull; // 400 Gbit/s: never binding here
        }
        o.rail_rate_bps = 800'000'000'000ull;
        o.queue_items = burst;
        scheduler<unsigned, clk> s(o, clk::now());
        auto t0 = clk::now();
        for (unsigned i = 0; i < n; i += burst) {
            for (unsigned k = 0; k < burst; ++k) s.enqueue(tcs[i + k], i + k, 1500);
            const auto now = clk::now();
            while (auto x = s.dequeue(now)) sink += x->item;
        }
        sched_ns.push_back(std::chrono::duration<double, std::nano>(clk::now() - t0).count() / n);
        std::deque<unsigned> q;
        t0 = clk::now();
        for (unsigned i = 0; i < n; i += burst) {
            for (unsigned k = 0; k < burst; ++k) q.push_back(i + k);
            while (!q.empty()) {
                sink += q.front();
                q.pop_front();
            }
        }
        fifo_ns.push_back(std::chrono::duration<double, std::nano>(clk::now() - t0).count() / n);
    }
    std::sort(sched_ns.begin(), sched_ns.end());
    std::sort(fifo_ns.begin(), fifo_ns.end());
    std::printf("tc scheduler: %.1f ns/packet, plain FIFO: %.1f ns/packet, difference %.1f ns (median of 7; sink %llu)\n",
                sched_ns[3], fifo_ns[3], sched_ns[3] - fifo_ns[3], static_cast<unsigned long long>(sink % 10));
    return 0;
}
