// Clocks that cost no system call where that can be had.
//
// fast_now_ns() is the TSC (as DPDK's rte_rdtsc and perftest's get_cycles
// read it), converted with a rate calibrated once per process against
// steady_clock, where the kernel keeps time by the TSC itself (its
// clocksource is "tsc": it found the TSC invariant and in step across CPUs).
// Elsewhere it is steady_clock. The QEMU guest the verbs tests run in is
// such a place: its kernel marks the TSC unstable ("TSCs unsynchronized") and
// keeps time by the HPET, which costs 0.7 us a read (0.01 us for the TSC);
// with the raw TSC there, workers twice reckoned railgated silent for
// 2.8 s and 6.3 s a few seconds into a job and gave it up.
//
// coarse_now_ns() is CLOCK_MONOTONIC_COARSE (the same epoch, to the kernel's
// tick): a vDSO read everywhere, for timers judged in milliseconds that a
// hot loop checks often.
//
// tsc_now_ns() is the TSC, converted, whatever the kernel thinks of it: for
// intervals one thread measures on one CPU (raillat pins its measuring
// thread while it does, as perftest's users pin theirs). Elsewhere than
// x86-64 all three are steady_clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace railgate::stats {

// Nanoseconds on steady_clock's epoch. The first call calibrates the TSC
// (10 ms of spinning): call it once at start-up, off the latency path.
std::uint64_t fast_now_ns() noexcept;
// Whether fast_now_ns() reads the TSC.
bool tsc_trusted() noexcept;
// The kernel's clocksource ("tsc", "kvm-clock", "hpet"; "" where it cannot
// be read): the TSC is trusted only where it is "tsc".
std::string clocksource();
std::uint64_t coarse_now_ns() noexcept;
std::uint64_t tsc_now_ns() noexcept;

} // namespace railgate::stats
