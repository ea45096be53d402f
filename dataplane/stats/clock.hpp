// A monotonic nanosecond clock that costs no system call: the TSC (as
// DPDK's rte_rdtsc and perftest's get_cycles read it), converted with a rate
// calibrated once per process against steady_clock. steady_clock is a vDSO
// read where the kernel's clocksource is the TSC (about 20 ns here) but a
// system call where it is not: in the QEMU guest the verbs tests run in,
// its HPET costs 0.7 us a read, against 0.01 us for the TSC, and a verbs
// round trip made four of them. Like DPDK, it assumes the TSC runs at a
// constant rate and agrees across cores (invariant TSC); elsewhere than
// x86-64 it is steady_clock.
#pragma once

#include <chrono>
#include <cstdint>

namespace railgate::stats {

// Nanoseconds on steady_clock's epoch. The first call calibrates (10 ms of
// spinning): call it once at start-up, off the latency path.
std::uint64_t fast_now_ns() noexcept;

} // namespace railgate::stats
