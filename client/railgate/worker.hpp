// railgate's worker library: join a job on railgated, then allreduce
// tensors in place through it over every rail.
//
//   railgate::client::worker w(transport, opts);
//   if (auto err = w.join(); !err.empty()) ...;
//   w.allreduce(ptr, count, wire::dtype::fp32);   // blocking
//
// The tensor is cut into chunks of the job's chunk size; chunk i goes to
// rail i % R (rail policy), and the k-th chunk of a rail to slot k % pool,
// so at most pool chunks are in flight per rail. A chunk's result
// overwrites it in place. Contributions without a result after `rto` are
// sent again (railgated answers a retransmit of a completed chunk with its
// kept result).
//
// Threading: one thread per worker. start()/progress() let one thread drive
// several workers (railbench --embedded does). With options.engine,
// allreduce() runs one pipeline per rail on the engine's threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "client/railgate/transport.hpp"

namespace railgate::engine {
class engine;
}
#include "dataplane/stats/histogram.hpp"

namespace railgate::client {

struct worker_options {
    std::uint32_t job_id = 1;
    std::uint64_t job_token = 0;
    std::uint16_t rank = 0;
    std::uint16_t world = 1;
    wire::dtype dt = wire::dtype::fp32;
    std::uint64_t max_count = 0;   // largest tensor (elements) this job reduces
    std::uint16_t pool_size = 0;   // 0: railgated's default
    // Retransmit timeout floor; the worker raises it to its smoothed round
    // trip + 4 deviations and doubles it per retransmit of a chunk.
    std::chrono::microseconds rto{20000};
    std::chrono::milliseconds join_timeout{5000};
    std::chrono::milliseconds op_timeout{60000};  // no progress for this long fails the op
    // Per-chunk round trips into chunk_rtt() (a clock read per chunk). Off,
    // over a reliable transport (verbs), the worker reads no clock on the
    // latency path: raillat times whole operations itself.
    bool chunk_rtt = true;
    // Pacing: each rail's contributions leave at most at this rate (bits/s
    // on the wire; 0: as fast as the pool allows), in bursts up to
    // pace_burst_bytes (at least 16 KiB). A worker paces its traffic class
    // to what the fabric gives it, so its pool does not queue at a shaped
    // rail past the retransmit timeout.
    std::uint64_t pace_bps = 0;
    std::uint64_t pace_burst_bytes = 0;
    // One pipeline per rail on this engine's arena for `numa` (null: the
    // calling thread drives every rail). Used by allreduce() when the
    // transport's rails may run on separate threads (UDP).
    const engine::engine* engine = nullptr;
    int numa = -1;
};

class worker {
public:
    worker(transport& t, const worker_options& o);
    ~worker();
    worker(const worker&) = delete;
    worker& operator=(const worker&) = delete;

    // JOINs the job on rail 0, learns the rails, then JOINs on every other
    // rail. Returns "" or a clear error (e.g. railgated's ERROR text).
    std::string join();
    // Leaves the job on every rail (best effort, short timeout).
    void leave();
    // Tells railgated to abort the job (the other workers get an ERROR).
    void abort();

    // Blocking in-place allreduce; returns "" or the error.
    std::string allreduce(void* data, std::size_t count, wire::dtype dt);

    // Non-blocking form: start, then call progress() until it returns true.
    // error() is non-empty if the operation failed.
    void start(void* data, std::size_t count, wire::dtype dt);
    bool progress();
    // Between progress() calls that found nothing: sleeps until a result
    // may have arrived, at most `max` (kernel transports; poll-mode ones
    // return at once). complete() does this after a short spin.
    void wait(std::chrono::microseconds max);
    const std::string& error() const noexcept;

    const wire::join_ack_body& job_info() const noexcept;
    std::uint32_t chunk_elems() const noexcept;
    // Per-chunk round trips (contribution sent -> its result received), ns.
    stats::histogram& chunk_rtt() noexcept;
    std::uint64_t retransmits() const noexcept;
    // Results accepted since join (progress is visible as this moving).
    std::uint64_t results() const noexcept;

    struct state;

private:
    void report_rtt();
    void send_pending(unsigned rail);
    bool progress_rail(unsigned rail);
    void finish();
    void run_pipelines();
    transport& t_;
    worker_options o_;
    std::unique_ptr<state> s_;
};

// Drives operations already start()ed on workers that this thread owns to
// completion. It spins while results flow, and when they pause it sleeps in
// the transport (a single kernel-transport worker) or yields (several), so
// that workers sharing cores with each other or with railgated do not hold
// a core for a whole scheduler tick while the others wait.
void complete(std::span<worker* const> ws);

} // namespace railgate::client
