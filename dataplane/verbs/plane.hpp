// railgated's verbs rails: RoCE/InfiniBand ports driven through rdma-core.
//
// Each rail listens with rdma_cm on its IPv4 address; every worker connects
// one RC QP per rail. Control messages (JOIN, JOIN_ACK, REGION, LEAVE,
// ERROR) are SEND/RECV in the UDP protocol's layout; chunks are RDMA
// WRITE_WITH_IMM into the peer's registered region, the immediate naming
// slot and generation (dataplane/proto/PROTOCOL.md, "Verbs rails").
//
// Per rail, one thread (pinned to the HCA's NUMA node, like an lcore) polls
// the rail's CM channel and its QPs' CQs, reduces a slot when its W
// contributions are in (the same kernels, rank order, bit for bit the DPDK
// path's result) into the job's registered result buffer, and WRITEs the
// result to every worker's region. Memory is allocated on the HCA's node.
//
// Flow control is by slot credits: a worker has at most pool chunks in
// flight per rail and each one holds a receive that both sides post up
// front (verbs_max_pool + control), so no WRITE_WITH_IMM ever meets an
// empty receive queue; sends beyond a QP's send queue wait in a backlog.
//
// Chunks of at most ll::max_payload bytes take the eager rings instead when
// the worker offered one and the rail busy-polls (ll_ring.hpp): a plain
// RDMA WRITE into the peer's ring, read by polling memory, with no receive
// or completion on either side's latency path.
//
// Failure: a completion in error or a disconnect of a joined worker aborts
// its job; the other workers get an ERROR saying which rank failed, the
// job's slots and memory are reclaimed (after its in-flight WRITEs have
// completed or flushed), and the daemon keeps serving.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/agg/job_view.hpp"
#include "dataplane/engine/engine.hpp"
#include "dataplane/proto/drop_reason.hpp"
#include "dataplane/proto/wire.hpp"
#include "dataplane/stats/histogram.hpp"
#include "dataplane/verbs/rdma.hpp"

namespace railgate::verbs {

struct rail_config {
    std::string name;
    std::string device;        // the HCA the address must be on ("" = any)
    unsigned port = 1;
    std::uint32_t ip = 0;      // host order; rdma_cm listens here
    std::uint16_t cm_port = wire::default_udp_port;
    qp_settings qp;
    std::uint32_t chunk_bytes = wire::verbs_default_chunk_bytes;
    int numa = -1;             // override of the HCA's node
    int cpu = -1;              // override of the thread's CPU
    unsigned tc = 0;           // the traffic class its SL maps to (reported)
};

struct plane_config {
    std::vector<rail_config> rails;
    unsigned max_jobs = 8;
    unsigned default_pool = 64;
    unsigned max_pool = wire::verbs_max_pool;
    unsigned max_conns = 256;      // per rail
    // After this many empty polling passes the rail thread sleeps on the
    // completion and CM channels (0: never, a dedicated core spins).
    unsigned spin_passes = 2000;
    // Small chunks through eager rings (ll_ring.hpp) with workers that
    // offer one: only while the rail busy-polls (spin_passes 0), since an
    // entry raises no completion to wake a sleeping thread.
    bool eager_rings = true;
    // Large slots are reduced across the rail's NUMA arena (null: inline).
    const engine::engine* eng = nullptr;
    // Job lifecycle (agg::job_table), as net::daemon_config has it.
    unsigned stall_ms = 1000, assemble_ms = 30000, idle_ms = 600000, max_pending_joins = 4;
};

struct rail_counters {
    std::atomic<std::uint64_t> connects{0}, disconnects{0}, rejected{0}, joins{0}, join_errors{0}, leaves{0},
        aborts{0}, contributions{0}, results{0}, qp_errors{0}, rtt_reports{0}, backlogged{0},
        engine_reductions{0}, // slots reduced across the NUMA arena (large chunks)
        stalls{0}, expirations{0}, takeovers{0}, pongs{0}, // job lifecycle, as on DPDK rails
        leaves_again{0}, // LEAVEs repeated by a rank that had left, acknowledged again
        joins_again{0},  // JOINs repeated while their answer was on its way (RC delivers it): not answered twice
        operator_aborts{0}, // jobs railctl job abort ended
        absences{0},     // times the rail's thread did not run for 250 ms or more (the jobs' clocks skip it)
        eager_conns{0}, eager_contributions{0}, eager_results{0}; // connections, chunks in and results out on eager rings
    std::atomic<std::uint64_t> drops[drop_reason_count]{};
    void drop(drop_reason r) noexcept { drops[static_cast<unsigned>(r)].fetch_add(1, std::memory_order_relaxed); }
};

// What the control plane shows of a rail.
struct rail_status {
    std::string name, device;
    unsigned port = 0;
    std::uint32_t ip = 0;
    std::uint16_t cm_port = 0;
    int numa = -1, cpu = -1;
    int gid_index = -1;        // what new connections take (railctl rail set), or -1 automatic
    int gid_index_configured = -1; // the config file's
    int gid_seen = -1;         // the last connection's QP's source GID index (-1: none yet)
    bool gid_seen_given = false; // that index was set (config, railctl), not found for the rail's address
    std::string gid_seen_text; // that entry ("::ffff:198.18.0.1, RoCE v2")
    unsigned path_mtu = 0;     // bytes: what QPs get (configured or the port's active MTU)
    std::uint32_t chunk_bytes = 0;
    unsigned traffic_class = 0, service_level = 0, tc = 0;
    unsigned connections = 0, jobs = 0;
    unsigned result_mrs = 0; // the jobs' result memory registered in their members' PDs (one per connection a job holds)
    qp_settings qp;                         // as configured (its timers: 0 ack_timeout is rdma_cm's)
    std::optional<qp_timers> timers_seen;   // the last connection's QP, as the HCA took them
};

// How long ago a rail's thread last looked at its jobs' clocks: every 256
// passes, and after each sleep of at most 100 ms (plane::passes).
struct rail_pass {
    std::string rail;
    std::uint64_t since_ns = 0;
};

class plane {
public:
    // Binds and listens on every rail; throws with a message naming the
    // rail when an address, device or port does not fit.
    explicit plane(const plane_config& cfg);
    ~plane();
    plane(const plane&) = delete;
    plane& operator=(const plane&) = delete;

    void launch();
    void stop();

    std::size_t rail_count() const noexcept;
    // Each running rail thread's rail_pass. For the thread that launches
    // and stops the plane.
    std::vector<rail_pass> passes() const;
    const rail_counters& counters(std::size_t rail) const noexcept;
    std::vector<rail_status> status() const;
    // The jobs every rail (rail < 0) or rail `rail` holds as they stand
    // (railctl job list), appended to out: each rail's thread describes its
    // own between passes (within 100 ms: its longest sleep). "" or why not
    // (a rail thread that did not answer within `wait_ms`). Callers on
    // several threads take turns.
    std::string jobs(int rail, std::vector<agg::job_view>& out, unsigned wait_ms = 2000) const;
    // railctl latency: every rail's (rail < 0) or rail `rail`'s
    // aggregation latency (a slot's first contribution to its result's
    // WRITEs posted), or with `worker` the round trips its workers report,
    // merged into out; `reset` empties them after. Each rail's thread
    // answers as above. "" or why not.
    std::string latency(int rail, bool worker, bool reset, stats::histogram& out, unsigned wait_ms = 2000) const;
    // railctl job abort: job `id` ends on every rail that holds it, its
    // members told `text` (operator_abort), by each rail's thread as above.
    // The rails it ended on are appended to ended_on; `told` grows by the
    // members told. "" or why not.
    std::string abort_job(std::uint32_t id, const std::string& text, std::vector<std::string>& ended_on,
                          unsigned& told, unsigned wait_ms = 2000) const;
    // railctl rail set R gid-index: the source GID index (-1: automatic,
    // the RoCEv2 GID of the rail's address) of the rail's connections from
    // now on; those connected keep their QPs'. Checked against the port's
    // GID table (check_gid). "" or why not; `note` says what changed.
    std::string set_gid_index(std::size_t rail, int index, std::string& note);
    void print_placement(std::FILE* f) const;
    void print_stats(std::FILE* f) const;

    struct rail_state;

private:
    std::vector<std::unique_ptr<rail_state>> rails_;
    // One request at a time on the rails (jobs, abort_job, latency): the
    // control thread's and the metrics endpoint's.
    mutable std::mutex ask_m_;
    std::atomic<bool> stop_{false};
    std::vector<std::thread> threads_;
};

} // namespace railgate::verbs
