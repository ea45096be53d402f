// Per-rail counters. One writer (the rail's lcore) updates them with relaxed
// load+store (a plain add on x86); any thread may read them.
#pragma once

#include <atomic>
#include <cstdint>

#include "dataplane/proto/drop_reason.hpp"
#include "dataplane/qos/classify.hpp"

namespace railgate::net {

using counter = std::atomic<std::uint64_t>;

inline void bump(counter& c, std::uint64_t n = 1) noexcept {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

struct alignas(64) rail_counters {
    counter rx_packets{0}, rx_bytes{0};
    counter tx_packets{0}, tx_bytes{0};
    counter contributions{0};   // accepted into a slot
    counter aggregations{0};    // slots completed and reduced
    counter results_sent{0};
    counter results_resent{0};  // answered a retransmitted contribution (or a PING naming its chunk)
    counter held{0};            // retransmits of a contribution held (or PINGs naming it), answered HELD
    counter held_queued{0};     // of those, a kept result asked for while it waits in a TC queue (HELD, aux 0)
    counter queried{0};         // PINGs naming a chunk railgated has, answered HELD or with the kept result
    counter ecn_marked{0};      // frames marked CE joining a standing TC queue (rail_config::ecn_mark_items)
    counter joins{0}, join_errors{0}, leaves{0}, aborts{0};
    counter operator_aborts{0}; // jobs railctl job abort ended here
    counter leaves_again{0};    // LEAVEs of a rank that had left, acknowledged again (its LEAVE_ACK was lost)
    // Job lifecycle: jobs ended because a slot waited for a rank too long,
    // because they did not assemble or went idle, and replaced by a rank's
    // restarted process; PINGs answered; a job's end told again to a
    // member that sent after it (its ERROR then was lost).
    counter stalls{0}, expirations{0}, takeovers{0}, pongs{0}, ends_retold{0};
    // The fault injector: frames it duplicated, reordered and corrupted
    // (the ones it dropped are drops, fault_injected).
    counter fault_dups{0}, fault_reorders{0}, fault_corrupts{0};
    counter arp_replies{0}, icmp_replies{0};
    counter rtt_reports{0};     // RTT_REPORT messages merged
    // udp rails: datagrams that arrived in coalesced (GRO) messages, and
    // those copied out because they did not land alone in an mbuf.
    counter udp_coalesced{0}, udp_copied{0};
    // Gateway: datagrams routed out of this rail, ARP requests it sent for
    // next hops, neighbours it learnt, ICMP time-exceeded it sent.
    counter fwd_packets{0}, fwd_bytes{0}, arp_requests{0}, neighbours{0}, icmp_errors{0};
    // TSC cycles the lcore spent polling this rail, and of those the polls
    // that found work: busy / poll is the rail's share of a busy core, as
    // DPDK's lcore busyness telemetry reports it.
    counter poll_cycles{0}, busy_cycles{0};
    // Capture (railctl capture): packets mirrored, and packets skipped
    // because the capture ring was full.
    counter capture_packets{0}, capture_overruns{0};
    counter drops[drop_reason_count]{};
    // Shaped rails: what each traffic class sent, and refused (queue full).
    counter tc_packets[qos::tc_count]{}, tc_bytes[qos::tc_count]{}, tc_drops[qos::tc_count]{};

    void drop(drop_reason r) noexcept { bump(drops[static_cast<unsigned>(r)]); }
    std::uint64_t total_drops() const noexcept {
        std::uint64_t t = 0;
        for (const counter& d : drops) t += d.load(std::memory_order_relaxed);
        return t;
    }
};

// Per-lcore counters: how the lcore's thread shared its CPU. One writer
// (the lcore), as above.
struct alignas(64) lcore_counters {
    // Time the thread waited on a run queue while another task had its CPU
    // (the kernel's schedstat, read every 10 ms; a hypervisor's steal is
    // not part of it). A poll-mode lcore on a CPU of its own waits ~0.
    counter runq_wait_ns{0};
    // A loop that does not spin: times it began to count its CPU as shared
    // with a busy task (and so sleeps or naps at once when idle,
    // rail_loop.cpp), and how long it counted so.
    counter shared{0}, shared_ns{0};
    // Times the loop did not run for 100 ms or more (its longest sleep is
    // 10 ms: the host took its CPU, the process was stopped, a device call
    // hung), and for how long in all. The jobs' clocks skip that time
    // (job_table::absent): the ranks' messages waited in the queues.
    counter absences{0}, absent_ns{0};
};

} // namespace railgate::net
