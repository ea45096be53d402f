// The embedded topology: railgated's rails and W workers' ports in one
// process, joined by in-process rings (net_ring) and a tiny virtual switch.
//
//   worker w, rail r  --tx-->  up[r] (MP ring)  --rx-->  railgated rail r
//   railgated rail r  --tx-->  down[r]  --pump()-->  worker w's rx ring,
//                                                    by destination IPv4
//
// With one worker there is no switch: its port on rail r reads down[r]
// itself (a link), and what the pump does to each frame (the checksum
// offloads' marks, the fault injector's draws) is done as it receives.
//
// Addresses: railgated rail r is 198.18.r.1; worker w on rail r is
// 198.18.r.(10+w) (RFC 2544 benchmarking range; nothing leaves the process).
// Threading: each worker runs on one thread at a time, but different
// workers may run on different threads (railbench drives some on
// railgated's lcore: net::daemon::host). pump() is one thread's at a time
// (another thread's call returns at once: the switch is being pumped);
// the fault injector's draws to railgated are taken under a lock.
// railgated's lcores touch only their own ports.
//
// Checksums: by default the switch is a wire between ports that offload
// UDP checksums, as Linux's lo and veths are (their frames never leave
// memory, so the kernel neither computes nor checks one): the sender's
// port leaves the sum to the wire (DPDK's TX offload flags), and the
// switch hands the frame on marked verified (RX L4 GOOD), computing only
// the 20-byte IPv4 header checksum the sender's port would have. A frame
// the fault injector corrupts gets its real checksums first and loses the
// marks (net::before_corruption), so that the receiver checks it in
// software and drops it. With checksum_offload off, every frame carries
// its checksums computed in software and each receiver checks them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "client/railgate/dpdk_transport.hpp"
#include "dataplane/fault/injector.hpp"
#include "dataplane/net/daemon.hpp"
#include "dataplane/net/fault.hpp"

struct rte_ring;
struct rte_mempool;

namespace railgate::client {

class embedded_fabric {
public:
    // Needs an initialised EAL. Creates the rings, the railgated ports and
    // W x R worker ports, and a worker mbuf pool sized for `mtu`.
    embedded_fabric(unsigned rails, unsigned workers, std::uint16_t mtu, bool checksum_offload = true);
    ~embedded_fabric();
    embedded_fabric(const embedded_fabric&) = delete;
    embedded_fabric& operator=(const embedded_fabric&) = delete;

    // railgated's rail configuration over the ring ports.
    std::vector<net::rail_config> daemon_rails() const;
    // The slots per rail railgated should grant a job that asks for none
    // here (its default_pool): 64 KiB of chunks in flight per rail (16 of
    // 4 KiB at MTU 4200), 4 to 64 slots; 64 chunks under 2 KiB (MTU 1500:
    // 88 KiB of 1408-byte chunks); 4 jumbo chunks of 8 KiB or more (MTU
    // 9000). In one process the round trip is a few microseconds of ring
    // and poll, so a deeper window only queues:
    // with 2 workers at MTU 9000, 64 slots gave a per-chunk round trip of
    // 364 us (p50) and 192 spurious retransmits where 8 gave 25 us and
    // none, and 4 MiB allreduces 0.65x the throughput (64 MiB: 0.92x). One
    // thread drives the workers, so at an operation's start each sends its
    // whole window before the others' first chunk: with jumbo chunks, 4
    // slots against 7 made 256 KiB allreduces 1.07-1.28x faster and 4-64
    // MiB ones 0.95-0.99x (doc/performance.md); at MTU 1500, 23 slots
    // against 46 gained nothing and lost 4% at 64 MiB, and 64 against 46
    // gained (2 workers, medians of 5 alternated runs) 4% at 256 KiB, 2% at
    // 4 MiB and 9% at 64 MiB (4 workers: 6% at 256 KiB, even above): with
    // 46, railgated's lcore polled idle for 40% of a 64 MiB operation and
    // the window sat at the pool. 80 lost 64 MiB's gain; at MTU 4200, 22
    // slots against 16 lost 2-5%.
    unsigned default_pool() const noexcept;
    // Worker w's transport (its R ports, pumping the switch on recv); its
    // frames carry `tos` (DSCP << 2: the traffic class).
    std::unique_ptr<transport> worker_transport(unsigned w, std::uint8_t tos = 0);
    // Moves railgated's output to the workers; returns frames moved (0 when
    // another thread is pumping).
    unsigned pump() noexcept;
    std::uint64_t switch_drops() const noexcept { return drops_; }
    // The switch's fault injector, both ways (railbench --embedded --fault):
    // frames to railgated as the workers send them, frames to the workers
    // as it moves them. What it did, per direction.
    void set_fault(const fault::spec& f) noexcept;
    const net::fault_tally& faults_up() const noexcept { return up_tally_; }
    const net::fault_tally& faults_down() const noexcept { return down_tally_; }
    // Frees every frame still in the switch's rings (before railgated's
    // pools are checked for leaks).
    void drain() noexcept;

    static std::uint32_t rail_ip(unsigned r) noexcept { return 0xC6120001u | (r << 8); }
    static std::uint32_t worker_ip(unsigned r, unsigned w) noexcept { return 0xC6120000u | (r << 8) | (10 + w); }

private:
    unsigned rails_, workers_;
    std::uint16_t mtu_;
    bool offload_;
    bool direct_; // one worker: a link, no switch (its ports read railgated's rings)
    void fault_down(unsigned rail, rte_mbuf** v, unsigned& n, unsigned cap) noexcept;
    rte_mempool* pool_ = nullptr;
    std::vector<rte_ring*> up_, down_, wdown_; // wdown_[w * rails + r]
    std::vector<std::uint16_t> daemon_ports_, worker_ports_;
    std::uint64_t drops_ = 0;
    fault::dice up_dice_, down_dice_;
    bool faulty_ = false;
    std::vector<rte_mbuf*> late_up_, late_down_; // reordered frames waiting: [w * rails + r], [r]
    net::fault_tally up_tally_, down_tally_;
    std::atomic_flag pumping_, up_faults_, down_faults_; // pump(); the draws to railgated; a link's to the worker
};

} // namespace railgate::client
