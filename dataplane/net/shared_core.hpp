// Whether an lcore's CPU is shared with a busy task, from the run-queue
// delay its thread reads (rail_loop.cpp reads /proc/thread-self/schedstat).
// Pure (a caller's clock in TSC cycles, no DPDK), so that the rule is
// unit-tested on a manual clock.
//
// Another task busy on the loop's core: a yielding loop gets the core back
// only when that task's slice ends (a 4 ms tick, which every datagram would
// wait for: raillat's udp round trip went from 5 us to 4 ms beside a busy
// task on each CPU), a sleeping one as soon as a datagram wakes it (9-16
// us). On a core of its own sleeping costs more than yielding (9 against 5
// us), and beside a busy worker bulk traffic gets larger batches from
// yielding, so an idle loop of udp rails sleeps at once (not after its
// quiet stretch) only while its core is shared and its traffic is
// latency-bound.
//
// It looks every every_ms while idle. The core is shared when the loop
// waited for it (the kernel's run-queue delay, which a hypervisor's steal
// is not part of) at least contended_us and a twentieth of the time since
// the last look, and more than slice_us on average each time it got the
// core back (a task that runs briefly there, such as a worker woken by its
// result, makes many short waits: yielding to it is faster), at
// contended_looks looks in a row (a process starting there, raillat for
// one, takes the core for 30-50 ms); it then counts as shared until
// contended_ms after the last look that still saw it wait that long, in
// pieces of any length (or, where the loop reads its CPU's time, while its
// probes see other tasks take the core: probe_every_ms): a loop that
// sleeps or naps takes the core back from the busy task many times a look,
// each after a short wait (a napping loop beside a busy task: ~15% of the
// time waited, 10-20 us a time; held to the time per wait it lost the busy
// task every 0.5 s and yielded 4 ms ticks until it saw it again). Traffic
// is latency-bound when the rails received less than small_bytes_per_ms
// since the last look.
// doc/performance.md has each variant measured.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <system_error>

#include "dataplane/net/rail_counters.hpp"

namespace railgate::net {

class shared_core {
public:
    static constexpr unsigned contended_us = 500, slice_us = 200, every_ms = 10, contended_looks = 8,
                              contended_ms = 500;
    static constexpr std::uint64_t small_bytes_per_ms = 50000;

    // What the loop read at a look: its thread's whole run-queue wait (ns)
    // and the times it got the CPU back, and its rails' received bytes.
    struct sample {
        std::uint64_t waited_ns = 0, runs = 0, rx_bytes = 0;
    };

    // Counts its episodes in ctr (shared, shared_ns). ms_tsc: TSC cycles a
    // millisecond; `now` and `first` the loop's start.
    shared_core(std::uint64_t ms_tsc, std::uint64_t now, const sample& first, lcore_counters& ctr) noexcept
        : ms_tsc_(ms_tsc), ctr_(ctr), then_(first), at_(now) {}

    // Whether an idle pass at `now` should look (every every_ms).
    bool due(std::uint64_t now) const noexcept { return now - at_ >= every_ms * ms_tsc_; }

    // A look at `now` (after due()).
    void look(std::uint64_t now, const sample& s) noexcept {
        const std::uint64_t waited = s.waited_ns - then_.waited_ns,
                            runs = std::max<std::uint64_t>(s.runs - then_.runs, 1),
                            since_ns = (now - at_) * 1000000 / ms_tsc_;
        const bool waited_long = waited >= std::max<std::uint64_t>(std::uint64_t{contended_us} * 1000, since_ns / 20),
                   busy_task = waited_long && waited > std::uint64_t{slice_us} * 1000 * runs;
        seen_ = busy_task ? seen_ + 1 : 0;
        if (at_ < until_) bump(ctr_.shared_ns, (std::min(now, until_) - at_) * 1000000 / ms_tsc_);
        const bool was = now < until_;
        if (seen_ >= contended_looks || (waited_long && was && !probes_keep_)) until_ = now + contended_ms * ms_tsc_;
        if (!was && now < until_) bump(ctr_.shared);
        small_rate_ = (s.rx_bytes - then_.rx_bytes) * ms_tsc_ / (now - at_) < small_bytes_per_ms;
        at_ = now;
        then_ = s;
    }

    // While the core is shared the loop weighs more than the busy task
    // (shared_weight.hpp) and takes the core back after each nap or sleep
    // at once: its waits no longer show the task (a sleeping loop beside
    // one on each CPU: 0.0 ms waited in 100 ms at nice 0 and at -10), and
    // the shared state lapsed 0.5 s after it was seen, even with the task
    // still there and a ping-pong running (CI read the lcore at nice 0
    // 0.8 s into one). So every probe_every_ms while shared the loop looks
    // at its CPU's time (cpu_busy_ticks): the core stays shared while other
    // tasks took at least others_share_pct of it since the last probe, and
    // then only so (keep_by_probes): the short waits that kept it shared
    // before also came from a process started there every 100 ms (a shell
    // loop running `sleep 0.1`: shared for as long as it ran) and from a
    // busy host taking the vCPU as the lcore woke.
    // Where it cannot read that (an lcore on several CPUs, no /proc/stat),
    // the waits keep it shared as before, and a napping loop yields once
    // instead, a yield that took more than slice_us (the busy task ran)
    // counting as seen.
    static constexpr unsigned probe_every_ms = 200, others_share_pct = 25;
    void keep_by_probes() noexcept { probes_keep_ = true; }
    bool probe_due(std::uint64_t now) const noexcept { return shared(now) && now - probed_at_ >= probe_every_ms * ms_tsc_; }
    // The probe at `now` saw another task take the core (busy_task) or not.
    void probed(std::uint64_t now, bool busy_task) noexcept {
        probed_at_ = now;
        if (shared(now) && busy_task) until_ = now + contended_ms * ms_tsc_;
    }
    // Whether other tasks took the core: `others_ns` of the `since_ns` since
    // the last probe.
    static bool others_busy(std::uint64_t others_ns, std::uint64_t since_ns) noexcept {
        return since_ns > 0 && others_ns * 100 >= since_ns * others_share_pct;
    }
    // Whether a probing yield that took `yield_tsc` lost the core.
    bool yield_lost(std::uint64_t yield_tsc) const noexcept { return yield_tsc > std::uint64_t{slice_us} * ms_tsc_ / 1000; }

    // Whether the core counts as shared at `now`.
    bool shared(std::uint64_t now) const noexcept { return now < until_; }
    // Whether an idle loop should sleep at once.
    bool sleep_at_once(std::uint64_t now) const noexcept { return shared(now) && small_rate_; }

private:
    std::uint64_t ms_tsc_;
    lcore_counters& ctr_;
    sample then_;
    std::uint64_t at_, until_ = 0, probed_at_ = 0;
    unsigned seen_ = 0;
    bool small_rate_ = true, probes_keep_ = false;
};

// The time CPU `cpu` spent running tasks (user, nice and system; not
// idle, iowait, irq, softirq or steal: an interrupt, the softirq of the
// lcore's own traffic among them, takes no turn on the run queue), in
// USER_HZ ticks, from the text of /proc/stat; false if it has no line for
// that CPU.
inline bool cpu_busy_ticks(std::string_view stat, unsigned cpu, std::uint64_t& out) noexcept {
    char name[16];
    const int k = std::snprintf(name, sizeof name, "cpu%u ", cpu);
    if (k <= 0 || static_cast<std::size_t>(k) >= sizeof name) return false;
    for (std::size_t at = 0; at < stat.size();) {
        const std::size_t eol = std::min(stat.find('\n', at), stat.size());
        const std::string_view line = stat.substr(at, eol - at);
        at = eol + 1;
        if (!line.starts_with(name)) continue;
        std::uint64_t field[4] = {};
        std::size_t i = 0, p = static_cast<std::size_t>(k);
        for (; i < 4 && p < line.size(); ++i) {
            while (p < line.size() && line[p] == ' ') ++p;
            const auto r = std::from_chars(line.data() + p, line.data() + line.size(), field[i]);
            if (r.ec != std::errc{}) return false;
            p = static_cast<std::size_t>(r.ptr - line.data());
        }
        if (i < 4) return false; // user nice system idle, at the least
        out = field[0] + field[1] + field[2];
        return true;
    }
    return false;
}

} // namespace railgate::net
