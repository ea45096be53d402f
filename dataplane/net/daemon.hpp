// railgated's data plane: rails (DPDK ports), their mbuf pools, and the
// poll-mode lcores that serve them. Used by the railgated binary and by
// railbench --embedded. Requires an initialised EAL (net::eal).
//
// Threading: construct, launch(), stop() and print_*() from the main lcore.
// Each rail is served by exactly one worker lcore, which owns all of its
// state; the main lcore only reads counters.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/agg/job_view.hpp"
#include "dataplane/bpf/xdp_steer.hpp"
#include "dataplane/fault/injector.hpp"
#include "dataplane/net/capture.hpp"
#include "dataplane/net/rail_counters.hpp"
#include "dataplane/proto/wire.hpp"
#include "dataplane/proto/ipv4.hpp"
#include "dataplane/qos/scheduler.hpp"
#include "dataplane/stats/histogram.hpp"

namespace railgate::net {

struct rail_config {
    std::string name;          // "r0"
    std::string port_name;     // ethdev name (e.g. net_af_packet0), or
    int port_id = -1;          // an existing port id (embedded rings), or
    // a udp rail: the kernel's UDP socket on ip:udp_port is the port
    // (net::udp_port); udp_interface: where ip goes as /32 if no interface
    // has it (removed at close; empty: one must have it).
    bool udp = false;
    std::string udp_interface;
    std::uint32_t ip = 0;      // host order
    std::uint16_t mtu = 1500;
    std::uint16_t mtu_max = 0; // buffers are sized for it; set_mtu stays below (0: mtu)
    std::uint16_t udp_port = wire::default_udp_port;
    int lcore = -1;            // override; -1 = chosen by NUMA placement
    int numa = -1;             // override of the port's NUMA node
    std::uint32_t host_ip = 0; // tap rails: address for the kernel side (host order; 0 = none)
    unsigned host_prefix = 24;
    // The kernel interface host_ip goes on and MTU changes reach too (the
    // peer of a veth railgated made); empty: the port's own (a tap's).
    std::string host_if;
    unsigned traffic_class = 0;
    // Transmit shaping (dataplane/qos): the rail's rate (a link speed, or a
    // stand-in for one; 0: none) and the traffic classes. Frames are
    // classified by their IPv4 DSCP (tc_map); with neither a rate nor a
    // strict or capped TC, frames go straight to the port.
    std::uint64_t rate_bps = 0;
    std::uint64_t burst_bytes = 0; // 0: 16 frames
    // ECN: ECN-capable frames that join a TC queue holding at least this
    // many are marked CE (0: never), as a switch marks a standing queue.
    std::uint32_t ecn_mark_items = 0;
    std::array<qos::tc_config, qos::tc_count> tcs{};
    qos::tc_map tc_map = qos::tc_map::defaults();
    // Act as if the port offloaded the UDP checksums (trust its RX L4
    // checksum flags, leave the TX ones to it) although it does not
    // advertise it: the embedded switch's rails (client::embedded_fabric
    // marks what it hands on verified and completes what leaves, as a
    // NIC's PMD does), and bench_dataplane's generator, which sets the RX
    // flags on a net_ring rail and ignores the results' checksums.
    bool emulate_checksum_offload = false;
};

// A rail as the control plane sees it.
struct rail_status {
    std::size_t index = 0;   // the rail's index (daemon::rail, counters; stable while it lives)
    std::string name, port_name, driver, ifname;
    std::string host_ifname; // the veth peer railgated made for the host's workers, or ""
    std::uint16_t port = 0;
    int numa = -1;
    unsigned lcore = 0;
    std::uint32_t ip = 0;
    std::uint16_t udp_port = 0;
    std::uint8_t mac[6] = {};
    unsigned mtu = 0;        // the port runs at
    unsigned mtu_target = 0; // set, not yet applied (draining) when != mtu
    unsigned mtu_max = 0;
    unsigned chunk_bytes = 0;
    unsigned traffic_class = 0;
    unsigned active_jobs = 0;
    bool xdp_steering = false;
    bool link_up = true;
    fault::spec fault;       // the fault injector's (all zero: off)
};

// A job as one rail holds it (railctl job list).
using job_view = agg::job_view;

// What a rail lcore does when a pass over its rails found nothing. Spinning
// is right on isolated cores. Yielding lets the kernel's own work on that
// core run (ksoftirqd: the packet path of af_xdp/af_packet rails), which
// otherwise waits for the scheduler tick while the lcore spins. Sleeping
// (an lcore whose rails are all udp rails) yields, and after 50 quiet ms
// waits on the rails' sockets: the core is free for the
// workers between their bursts (a training step's compute).
enum class idle_policy : std::uint8_t { spin, yield, sleep };

// Gateway forwarding: IPv4 datagrams sent to a rail's MAC for another
// address leave by the rail of the longest matching prefix, through its
// traffic-class scheduler, to `via` or (0) the destination itself.
struct route_config {
    std::uint32_t prefix = 0; // host order, host bits zero
    unsigned len = 0;
    std::string rail;         // the out rail's name
    std::uint32_t via = 0;    // next hop; 0: on the out rail's link
};
inline constexpr std::size_t max_routes = 65536;

// A udp rail's devargs, on railgated's command line and in `railctl rail
// add`: "udp" or "udp,interface=IFNAME". Returns whether `devargs` names a
// udp rail; then `interface` is IFNAME (or "") and `error` says what is
// wrong with the rest, if anything.
bool udp_rail_devargs(const std::string& devargs, std::string& interface, std::string& error);
// This host's memory in bytes (sysconf; 0 if unknown).
std::uint64_t host_memory_bytes() noexcept;
// agg::tables_fit against this host's memory.
std::string tables_fit(unsigned max_jobs, unsigned max_pool, std::size_t rails);
// A route and what it carried (datagrams and bytes routed by it).
struct route_status : route_config {
    std::uint64_t packets = 0, bytes = 0;
};

struct daemon_config {
    std::vector<rail_config> rails;
    std::vector<route_config> routes;
    unsigned max_jobs = 8;
    unsigned max_pool = 256;
    unsigned default_pool = 64;
    unsigned mbufs_per_rail = 8192;
    unsigned rx_desc = 1024, tx_desc = 1024;
    wire::rail_policy policy = wire::rail_policy::rail;
    wire::lag_hash hash = wire::lag_hash::l3l4;
    idle_policy idle = idle_policy::spin;
    // The nice a sleeping or napping lcore takes beside a busy task while
    // traffic is light (shared_weight.hpp); 0: its own.
    int shared_nice = -10;
    // Gateway: how long a next hop's MAC is trusted without word from ARP
    // before it is confirmed again (Linux's base_reachable_time is 30 s).
    unsigned neighbour_reachable_ms = 30000;
    // Job lifecycle (agg::job_table): a slot some ranks contributed to
    // waits this long for the others before the job ends naming them; a job
    // must assemble (every rank joined) this soon after its first JOIN; a
    // job nobody speaks in this long expires (0: never); an address may
    // have this many jobs assembling (0: no limit).
    unsigned stall_ms = 1000;
    unsigned assemble_ms = 30000;
    unsigned idle_ms = 600000;
    unsigned max_pending_joins = 4;
    // Every rail's fault injector at start (railgated --fault).
    fault::spec fault;
};

// A task a rail lcore runs when a pass over its rails found nothing to do,
// until the task says it is done: railbench --embedded drives some of its
// workers there, so that railgated's core and the calling thread's share
// the workers as a host's cores would, instead of one thread carrying every
// worker's copies while railgated's core waits for them.
// A running lcore (daemon::lcores), its counters in ns.
struct lcore_status {
    unsigned lcore = 0;
    std::vector<std::string> rails; // the active rails it serves, by name
    std::uint64_t runq_wait_ns = 0; // lcore_counters
    std::uint64_t shared = 0, shared_ns = 0;
    std::uint64_t absences = 0, absent_ns = 0;
    std::uint64_t since_pass_ns = 0; // how long ago it last went round its loop (daemon::passes)
};

// How long ago a running lcore last went round its loop (daemon::passes).
struct lcore_pass {
    unsigned lcore = 0;
    std::uint64_t since_ns = 0;
};

struct lcore_guest {
    bool (*step)(void* ctx) noexcept = nullptr; // one step; true: done
    void* ctx = nullptr;
    std::atomic<bool> done{false};              // set by the lcore (release)
};

class daemon {
public:
    // Validates the configuration, opens and starts every port, creates the
    // pools on each port's NUMA node and plans the lcore placement.
    // Throws std::runtime_error naming the offending rail and field.
    explicit daemon(const daemon_config& cfg);
    ~daemon();
    daemon(const daemon&) = delete;
    daemon& operator=(const daemon&) = delete;

    void print_placement(std::FILE* out) const;
    // Starts the rail loops on their worker lcores.
    void launch();
    // Asks the loops to stop and waits for them. Idempotent.
    void stop();
    // Stops the loops, closes every port, and checks that every mbuf of
    // every rail's pools came back: returns one line per pool that still
    // lends some (a leak), empty when none. The daemon is done after it.
    std::vector<std::string> close();

    // Rails by index, removed ones included (status() skips them). A rail's
    // config and counters stay where they are while the daemon lives.
    std::size_t rail_count() const noexcept;
    const rail_config& rail(std::size_t i) const noexcept;
    const rail_counters& counters(std::size_t i) const noexcept;
    // The running lcores: each one's rails and how it shared its CPU.
    std::vector<lcore_status> lcores() const;
    void print_stats(std::FILE* out) const;

    // Control plane. Safe from one non-lcore thread at a time while the
    // loops run; changes reach each loop as a message it picks up between
    // bursts, so the packet path takes no lock.
    std::vector<rail_status> status() const;
    wire::rail_policy policy() const noexcept;
    std::uint32_t job_chunk_bytes() const noexcept;
    // The rail's MTU. Raising applies now; lowering applies to new jobs now
    // and to the port once the jobs with larger chunks have left. Returns
    // "" or why not; `state` says "applied" or what it waits for.
    std::string set_mtu(std::size_t rail, unsigned mtu, std::string& state);
    // Jobs that join from now on use the policy; running jobs keep theirs.
    // LAG needs every rail on one lcore (the bond is one poll loop).
    std::string set_policy(wire::rail_policy p, wire::lag_hash hash = wire::lag_hash::l3l4);
    // A rail's transmit shaping (rate, burst, traffic classes), applied by
    // its lcore between bursts; queued frames stay queued. "" or the error.
    std::string set_shaping(std::size_t rail, std::uint64_t rate_bps, std::uint64_t burst_bytes,
                            const std::array<qos::tc_config, qos::tc_count>& tcs);
    // Aggregation latency in ns (first contribution -> result sent), or with
    // `worker` the chunk round trips workers reported (RTT_REPORT), merged
    // over every rail (rail < 0) or one; for one job id if given. `reset`
    // clears what was read.
    // How long frames of traffic class `tc` waited in a shaped rail's
    // scheduler (every rail when rail < 0), ns; empty on unshaped rails.
    std::string tc_latency(int rail, unsigned tc, bool reset, stats::histogram& out);
    // The jobs every rail (rail < 0) or one holds now, appended to `out`:
    // what an operator or a test reads when a job does not progress.
    std::string jobs(int rail, std::vector<job_view>& out);
    // railctl job abort: ends job `id` on every rail that holds it, its
    // members told `text` (operator_abort); they do not re-join. The rails
    // it ended on are appended to ended_on, and `told` is the members told
    // (one per rank and rail). "" or why not.
    std::string abort_job(std::uint32_t id, const std::string& text, std::vector<std::string>& ended_on, unsigned& told);
    std::string latency(int rail, const std::optional<std::uint32_t>& job, bool worker, bool reset,
                        stats::histogram& out);
    // Adds a rail while the loops run: hot-plugs `devargs` (a vdev or PCI
    // device), opens its port, hands it to a running lcore, and advertises
    // it to jobs that join from now on. `index` receives its rail index.
    std::string add_rail(const rail_config& rc, const std::string& devargs, std::size_t& index);
    // Removes a rail between jobs (none may be using it, nor any route); the
    // first rail, where workers join, stays.
    std::string remove_rail(std::size_t rail);
    // The gateway's routes. add_route refuses a prefix already routed and a
    // rail that does not exist; both apply at once on every lcore.
    std::vector<route_status> routes() const;
    std::string add_route(const route_config& r);
    std::string remove_route(std::uint32_t prefix, unsigned len);
    // False for a removed rail (indices stay stable; status() skips them).
    bool rail_active(std::size_t rail) const noexcept;
    // The XDP program's counters on an af_xdp rail with steering.
    std::optional<xdp::counters> xdp_counters(std::size_t rail) const;
    // The rail's fault injector (railctl fault set/clear): applied by its
    // lcore between bursts, on receive and transmit. "" or the error.
    std::string set_fault(std::size_t rail, const fault::spec& f);
    // The lcore serving `rail` stops going round its loop for `ms` (1 ..
    // max_freeze_ms), as a hung device call would stop it, then goes on
    // (railctl fault freeze; tests and labs: how workers, railgated's own
    // liveness check and a supervisor take it). Returns once the lcore has
    // taken it, before the freeze ends; "" or the error. `lcore`: the one
    // frozen.
    static constexpr std::uint32_t max_freeze_ms = 60000;
    std::string freeze(std::size_t rail, std::uint32_t ms, unsigned& lcore);
    // How long ago each running lcore last went round its loop (it does
    // every 10 ms at most, idle or busy). Takes no lock: railgated's
    // liveness check calls it from the thread that launches and stops the
    // daemon (lcores() calls it too, under its lock).
    std::vector<lcore_pass> passes() const;
    // Capture: the rail's lcore mirrors what `f` selects into `ring` (the
    // caller's; null stops). Once it returns, the lcore has switched: after
    // set_capture(rail, nullptr) it no longer touches the old ring.
    std::string set_capture(std::size_t rail, capture_ring* ring, const capture_filter& f = {});
    // Hands `g` to the first lcore, which runs g.step when a pass over its
    // rails found nothing until it returns true, then sets g.done (also when
    // the loops stop first). False when the loops are not running or the
    // lcore hosts another guest. Leave `g` alone until g.done.
    bool host(lcore_guest& g) noexcept;
    // The clock capture records are stamped with, in ns (the TSC's).
    static std::uint64_t clock_ns() noexcept;

    struct impl;

private:
    std::unique_ptr<impl> p_;
};

} // namespace railgate::net
