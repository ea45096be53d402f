// railgated's data plane, private state (internal to dataplane/net): what
// daemon.cpp (the control API), rail_loop.cpp (the lcores), ports.cpp (ports
// and the kernel side) and routes.cpp share. Nothing outside dataplane/net
// includes it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/fault/injector.hpp"
#include "dataplane/net/daemon.hpp"
#include "dataplane/net/fib.hpp"
#include "dataplane/net/rail_state.hpp"

namespace railgate::net::detail {

// A request from the control plane to one lcore, run between bursts.
struct lcore_command {
    enum class kind : std::uint8_t {
        snapshot,  // copy (and maybe reset) a latency histogram
        adopt,     // what JOIN_ACKs advertise from now on
        port_mtu,  // set the port's MTU (now, or when larger-chunk jobs have left)
        attach,    // serve a new rail
        detach,    // stop serving a rail
        shaping,   // a shaped rail's rate and traffic classes
        routes,    // the gateway's table from now on
        fault,     // the fault injector's spec (all zero: off)
        rails_down, // end every job striped over a rail that went down
        capture,    // mirror packets into a capture ring (null: stop)
        freeze,     // stop going round the loop for freeze_ms (railctl fault freeze)
        jobs,       // append the rail's jobs to `jobs` (railctl job list)
        abort_job   // end job `abort_id`, its members told `abort_text` (railctl job abort)
    } k = kind::snapshot;
    int rail = -1;                      // rail index; -1: every rail of the lcore
    // snapshot
    std::optional<std::uint32_t> job;
    bool worker = false;                // the workers' round trips instead of aggregation
    int tc = -1;                        // a traffic class's wait in the scheduler instead
    bool reset = false;
    stats::histogram* out = nullptr;    // merged into
    unsigned found = 0;                 // rails that had the histogram asked for (a job's: among their recent jobs)
    // adopt: what JOIN_ACKs advertise and new jobs use from now on
    wire::join_ack_body ack{};
    std::uint32_t job_chunk_bytes = 0;
    wire::rail_policy policy = wire::rail_policy::rail;
    std::array<std::int8_t, wire::max_rails * 2> stripe{}; // by rail index; -1: not advertised
    bool hold_joins = false;            // refuse JOINs (rails_changing) until the next adopt
    // port_mtu
    std::uint16_t mtu = 0;
    // shaping
    std::uint64_t rate_bps = 0, burst_bytes = 0;
    std::array<qos::tc_config, qos::tc_count> tcs{};
    // routes: the table from now on (null: no gateway)
    const fib* routes = nullptr;
    // fault
    fault::spec fault_spec;
    // rails_down: stripes (bits) that went down
    std::uint32_t down = 0;
    // capture
    capture_ring* ring = nullptr;
    capture_filter filter;
    // freeze
    std::uint32_t freeze_ms = 0;
    // jobs
    std::vector<job_view>* jobs = nullptr;
    // abort_job: the job, the text its members get; the lcores add the
    // rails that ended it and the members they told
    std::uint32_t abort_id = 0;
    std::string abort_text;
    std::vector<std::string>* ended_on = nullptr;
    unsigned told = 0;
    std::string err;                    // filled by the lcore
};

// What the rail loop does per rail, between and within bursts.
bool poll_rail(rail_state& rs) noexcept;
void run_command(rail_state& rs, lcore_command& c);
// Sets the port's MTU from its own lcore, between bursts.
std::string apply_port_mtu(rail_static& st, std::uint16_t mtu) noexcept;
void maybe_apply_pending_mtu(rail_state& rs) noexcept;

// Ports and the kernel side (ports.cpp; kernel_if.hpp sets interfaces).
// The link as the kernel interface's carrier says, else as the PMD says.
bool link_is_up(const rail_static& rs) noexcept;
rte_device* device_of(const std::string& name);
// Stops and closes the DPDK port, or closes a udp rail's socket.
void close_port(rail_static& rs) noexcept;
void drain_ring(rail_static& rs) noexcept;
void free_memory(rail_static& rs) noexcept;

} // namespace railgate::net::detail

namespace railgate::net {

struct daemon::impl {
    daemon_config cfg;
    std::vector<std::unique_ptr<detail::rail_static>> rails;
    wire::join_ack_body ack{};
    std::uint32_t job_chunk_bytes = 0;
    std::vector<unsigned> lcores; // worker lcores that serve at least one rail
    std::atomic<bool> stop{false};
    bool launched = false;
    // The gateway's routes, and the table the lcores read (null: none).
    std::vector<route_config> routes;
    std::unique_ptr<detail::fib> fib_now;
    bool ports_open = false;
    // Advertised rails (bits by stripe) whose link is down: new jobs
    // stripe around them. Written by the link monitor, read by lcores at JOIN.
    std::atomic<std::uint32_t> rails_down{0};
    std::thread monitor;
    std::mutex monitor_mu;
    std::condition_variable monitor_cv;
    bool monitor_stop = false; // under monitor_mu

    struct lcore_ctx {
        impl* self;
        unsigned lcore;
        std::atomic<detail::lcore_command*> cmd{nullptr}; // control plane -> lcore, one at a time
        std::atomic<lcore_guest*> guest{nullptr};          // daemon::host
        // Launched, and then set by lcore_main as the last thing it does.
        // rte_eal_wait_lcore waits on an atomic inside the EAL, which
        // ThreadSanitizer does not see: stop() reads this flag after it, so
        // that the loop's end (its reads of the rails) visibly happens before
        // what follows (close() frees the rails' ports).
        bool launched = false;
        // Set by lcore_main once it has built its rails' states from the
        // daemon's (policy, JOIN_ACK, limits): launch() returns after.
        std::atomic<bool> ready{false};
        // Why it could not build them (its loop did not start), written
        // before `ready`; empty: it runs.
        std::string setup_error;
        std::atomic<bool> ended{false};
        // The TSC of the loop's last lifecycle tick (every 10 ms, idle or
        // busy): daemon::passes(), what railgated's liveness check reads.
        std::atomic<std::uint64_t> beat;
        // Wakes a loop that sleeps on its udp rails' sockets (an eventfd).
        int wake_fd = -1;
        lcore_counters ctr;
        lcore_ctx(impl* s, unsigned l);
        ~lcore_ctx();
        lcore_ctx(const lcore_ctx&) = delete;
        lcore_ctx& operator=(const lcore_ctx&) = delete;
        void wake() const noexcept;
    };
    std::deque<lcore_ctx> ctxs;
    wire::rail_policy policy = wire::rail_policy::rail;
    mutable std::mutex ctl; // serialises control-plane calls (never taken by lcores)

    // Runs c on the lcore serving `rail` (or on every lcore when rail < 0,
    // once per lcore with c.rail left as given). Returns "" or why not.
    std::string on_lcores(detail::lcore_command& c, int rail);
    detail::lcore_command adopt_command() const;
    // Every lcore takes what rebuild_ack() and `policy` say now, holding
    // JOINs (rails_changing) or letting them through.
    std::string adopt(bool hold_joins);
    // The same, in two passes: the lcores take it one after the other, so
    // first each takes it holding JOINs, then each lets them through; no
    // JOIN is answered while two rails advertise differently (a job's rails
    // would answer its ranks with two rail lists, chunks or policies).
    std::string advertise();
    std::string check_bond(wire::rail_policy pol) const;
    std::unique_ptr<detail::rail_state> make_rail_state(std::size_t i, unsigned lcore);

    static int lcore_main(void* arg);
    void open_ports();
    std::unique_ptr<detail::rail_static> open_rail(std::size_t i, const rail_config& rc);
    std::unique_ptr<detail::rail_static> open_udp_rail(std::size_t i, std::unique_ptr<detail::rail_static> rs);
    void make_pools(std::size_t i, detail::rail_static& rs);
    void finish_rail(detail::rail_static& rs);
    void rebuild_ack();
    unsigned place_rail(detail::rail_static& rs, const std::vector<unsigned>& candidates, std::vector<unsigned>& load);
    void place();
    void attach_steering(detail::rail_static& rs, unsigned ifindex);
    std::string build_fib(const std::vector<route_config>& rs, std::unique_ptr<detail::fib>& out) const;
    std::string publish_routes(std::vector<route_config> next);
    // The link monitor: every rail's link, every 100 ms; a rail that goes
    // down ends the jobs striped over it and is left out of new ones.
    void monitor_links();
    void check_links();
    // Stops and closes every open port and frees the rails' pools and rings.
    void close_all() noexcept;
};

} // namespace railgate::net
