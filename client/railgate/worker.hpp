// railgate's worker library: join a job on railgated, then allreduce
// tensors in place through it over every rail.
//
//   railgate::client::worker w(transport, opts);
//   if (auto err = w.join(); !err.empty()) ...;
//   w.allreduce(ptr, count, wire::dtype::fp32);   // blocking
//
// The tensor is cut into chunks of the job's chunk size; chunk i goes to
// the (i % R)-th rail the job stripes over (rail policy), and the k-th chunk
// of a rail to slot k % pool, so at most pool chunks are in flight per rail;
// over datagrams, at most the rail's congestion window (a delay-based
// controller, qos::delay_window), which follows the round trips it sees.
// A chunk's result overwrites it in place.
//
// Loss: a contribution or result lost on the way (or corrupted: it fails
// its UDP checksum) is sent again when a result of a chunk sent after it has
// come back (RACK: about a round trip), or at the latest after the
// retransmit timeout (the smoothed round trip plus four deviations;
// railgated answers a retransmit of a completed chunk with its kept result). Failures are noticed and named: railgated ends a job
// whose rank stops and says which; a rail that stops answering (PINGs
// unanswered for peer_timeout) or that railgated saw go down fails the
// operation with rail_down; railgated gone fails it with daemon_gone. With
// options.retries, allreduce() recovers from those by itself: it re-joins
// (striping around rails that went down) and runs the operation again from
// its input. A rank that lost an operation's last result in a railgated
// restart re-joins one operation behind the others: they replay that
// operation from the input they kept (two inputs kept, no extra copy) and
// the job goes on.
//
// Threading: one thread per worker. start()/progress() let one thread drive
// several workers (railbench --embedded does). With options.engine,
// allreduce() runs one pipeline per rail on the engine's threads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "client/railgate/transport.hpp"
#include "dataplane/qos/delay_window.hpp"

namespace railgate::engine {
class engine;
}
#include "dataplane/stats/histogram.hpp"

namespace railgate::client {

struct worker_options {
    std::uint32_t job_id = 1;
    // The job's secret: every rank of the job has the same one (its
    // rendezvous shares it); railgated keeps other jobs with the same id out
    // with it. Make it random (random_token()).
    std::uint64_t job_token = 0;
    std::uint16_t rank = 0;
    std::uint16_t world = 1;
    wire::dtype dt = wire::dtype::fp32;
    std::uint64_t max_count = 0;   // largest tensor (elements) this job reduces
    std::uint16_t pool_size = 0;   // 0: railgated's default
    // Retransmit timeout floor; the worker raises it to its smoothed round
    // trip + 4 deviations and doubles it per retransmit of a chunk, up to a
    // quarter of railgated's stall time.
    std::chrono::microseconds rto{500};
    // Tail loss probes (RACK-TLP, RFC 8985): once an operation's chunks
    // are all out, two round trips without a result send the newest one
    // again, so that a loss among the last chunks is found by its result
    // (RACK) rather than by its timeout. Off: timeouts only, as Linux's
    // tcp_early_retrans=0 (for A/B measurements).
    bool tail_probes = true;
    std::chrono::milliseconds join_timeout{5000};
    std::chrono::milliseconds op_timeout{60000};  // no progress for this long fails the op
    // A rail silent this long while chunks wait on it (its PINGs
    // unanswered) is down; every rail silent is railgated gone.
    std::chrono::milliseconds peer_timeout{1000};
    // Re-joins and re-runs of an operation after a failure it can recover
    // from (railgated restarted, a rail went down, a rank restarted, the job
    // expired). A re-join that railgated does not answer within the join
    // timeout (a restart that takes long) uses up a retry and goes on. Each
    // keeps a copy of the input: a memcpy per operation, and the last two
    // inputs' memory.
    unsigned retries = 0;
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
    // Congestion control over datagram transports: each rail's window of
    // chunks in flight, up to the slot pool, follows railgated's echoed
    // queue depth, ECN marks and timeouts (qos::delay_window: shrink in
    // proportion to the depth above its target, as DCTCP on marks, to the
    // minimum on timeouts in a row; grow otherwise), so a shaped rail's
    // queue stays near the target instead of a pool's worth. Off: the pool is the window. A
    // reliable transport (verbs) keeps the pool. Pacing, when set, applies
    // on top. railgated echoes to ECN-capable workers only: the transport's
    // TOS should carry ECT(0) (wire::ecn_ect0), as railbench's and
    // librailgate's do.
    // The default is the queue mode (cc.delay and cc.loss off). With them
    // on the window also shrinks when the round trip passes a target
    // (Swift) and halves on a single loss;
    // where workers and railgated share cores (this project's test
    // machines) that round trip is mostly waiting for a core, not a queue,
    // and the window shrinks for nothing (doc/performance.md: 0.81x
    // embedded, 0.20x with 4 kernel-UDP workers).
    bool congestion_control = true;
    qos::delay_window_params cc = qos::delay_window_params::queue_mode();
    // One pipeline per rail on this engine's arena for `numa` (null: the
    // calling thread drives every rail). Used by allreduce() when the
    // transport's rails may run on separate threads (UDP).
    const engine::engine* engine = nullptr;
    int numa = -1;
    // Called, on the calling thread, with a line about each failure the
    // worker recovers from (or tries to) as it happens: what failed, and
    // what it does (asks railgated again, re-joins: retry k of N), then how
    // that went. A job's log then says why an operation took seconds, or
    // what a rank did before it gave up (as NCCL's warnings do). Null: quiet.
    std::function<void(const std::string&)> on_retry;
};

// The congestion-control modes (railbench --cc, rg_config's RG_CC_*): the
// slot pool as the window; Swift's delay window with railgated's depth, ECN
// and every loss; or the queue mode (the default: depth, ECN and timeouts
// in a row). Sets o.congestion_control and o.cc's mode, keeping its target.
enum class cc_mode { off, delay, queue };
inline void set_cc_mode(worker_options& o, cc_mode m) noexcept {
    const std::uint64_t target = o.cc.target_ns;
    o.congestion_control = m != cc_mode::off;
    o.cc = m == cc_mode::delay ? qos::delay_window_params{} : qos::delay_window_params::queue_mode();
    o.cc.target_ns = target;
}

// A random 64-bit job token (from the kernel's random source), never 0.
std::uint64_t random_token();

// Why an operation or a join failed (error() says it in words).
enum class failure : std::uint8_t {
    none,
    usage,        // a bad argument (dtype, count, not joined)
    refused,      // railgated refused the JOIN (table full, another job's id, rank taken...)
    rank_failed,  // a rank of the job stopped, died or restarted (railgated named it)
    aborted,      // another rank aborted the job
    rail_down,    // a rail stopped answering or went down
    daemon_gone,  // railgated stopped answering, or restarted and no longer knows the job
    expired,      // railgated ended the job: it did not assemble, or went idle
    timeout,      // no progress for op_timeout, or no JOIN_ACK within join_timeout
    stopped,      // railgated's operator ended the job (railctl job abort): never re-joined
};
std::string_view failure_name(failure f) noexcept;

class worker {
public:
    worker(transport& t, const worker_options& o);
    ~worker();
    worker(const worker&) = delete;
    worker& operator=(const worker&) = delete;

    // JOINs the job on its first rail, learns the rails, then JOINs on every
    // other rail it stripes over. Returns "" or a clear error (e.g.
    // railgated's ERROR text); a JOIN refused part-way leaves the rails
    // already joined. With worker_options::retries, a join that fails as
    // an operation may (the job ended while it assembled: another rank gave
    // up on a railgated it had not heard from, a rail went down) is tried
    // again as recover() does, up to that many times.
    std::string join();
    // Leaves the job on every rail (best effort, short timeout).
    void leave();
    // Between operations: tells railgated this rank is alive (a PING on
    // every rail it stripes over), so that a rank computing for longer than
    // the stall time while the others already contribute is slow, not dead.
    // Call it about every stall_ms / 4 (job_info().stall_ms) while idle, or
    // run the work under alive_while() (below), which does.
    void keepalive();
    // Tells railgated to abort the job (the other workers get an ERROR with
    // `why`, and with code rail_down/rank_failed the rails or rank in `detail`).
    void abort(const std::string& why = {}, wire::error_code code = wire::error_code::aborted, std::uint64_t detail = 0);

    // Blocking in-place allreduce; returns "" or the error. With
    // options.retries, recovers from what recover() can.
    std::string allreduce(void* data, std::size_t count, wire::dtype dt);

    // Non-blocking form: start, then call progress() until it returns true.
    // error() is non-empty if the operation failed.
    void start(void* data, std::size_t count, wire::dtype dt);
    bool progress();
    // The same a rail at a time, for threads that share the workers' rails
    // (railbench --embedded: its thread and railgated's lcore): one step
    // of rail `rail`'s pipeline (0 to op_rails() - 1); true once its chunks
    // are all back or the operation failed. Threads may step different
    // rails at once where rails_in_parallel(), each rail one thread at a
    // time, handed from one to the next with release and acquire; once no
    // thread steps any, progress() (or complete()) ends the operation.
    bool step_rail(unsigned rail);
    unsigned op_rails() const noexcept;
    bool rails_in_parallel() const noexcept;
    // Between progress() calls that found nothing: sleeps until a result
    // may have arrived, at most `max` (kernel transports; poll-mode ones
    // return at once). complete() does this after a short spin.
    void wait(std::chrono::microseconds max);
    const std::string& error() const noexcept;
    failure failed_with() const noexcept;
    // After a failed operation or join: whether re-joining can help, and
    // the re-join itself (the old job aborted for everyone, the transport
    // reconnected, rails that went down left out). "" or why not.
    static bool recoverable(failure f) noexcept;
    std::string recover();

    const wire::join_ack_body& job_info() const noexcept;
    // The job's incarnation on transport rail r: the gen its control
    // messages (PING, LEAVE, ERROR) carry. 0 before the rail's JOIN_ACK.
    std::uint32_t instance(unsigned rail) const noexcept;
    std::uint32_t chunk_elems() const noexcept;
    // The transport rails the job stripes over, in stripe order.
    std::span<const unsigned> stripe_rails() const noexcept;
    // Per-chunk round trips (contribution sent -> its result received), ns.
    // Read it between operations: it gathers the rails' own histograms then.
    stats::histogram& chunk_rtt() noexcept;
    // The same less the time each contribution waited in railgated for the
    // other ranks' (its echo in the RESULT): the round trip railgate itself
    // gives, without the ranks' skew. Chunks sent once only (a resent
    // chunk's result carries no echo).
    stats::histogram& chunk_rtt_own() noexcept;
    // Chunks sent again: all of them; of those, the ones sent after their
    // timeout ran out (probes on a silent rail included), and the tail loss
    // probes (the newest chunk, once the operation's last chunks were out
    // two round trips without a result). The rest were found lost by RACK.
    // Timeouts and tail probes ask railgated first (a PING naming the
    // chunk): a chunk railgated holds, or whose result it kept, is not
    // sent again.
    std::uint64_t retransmits() const noexcept;
    std::uint64_t timeout_retransmits() const noexcept;
    std::uint64_t tail_probes() const noexcept;
    // HELD answers taken: a chunk sent again, or a PING naming one, that
    // railgated already held, its slot waiting for a slower rank (the
    // timeout was not a loss).
    std::uint64_t helds() const noexcept;
    // Timeouts a PING settled, no chunk sent again: the rail's results came
    // before its answer, or railgated answered it HELD (a railgated or a
    // peer rank late past the timeout, nothing lost).
    std::uint64_t quiet_timeouts() const noexcept;
    // Chunks RACK sent again that were not lost: railgated answered their
    // first copy and the second (a second result): the path reorders. In
    // congestion control's delay mode, where a loss RACK finds halves the
    // window, each widens the rail's reordering window (up to the round
    // trip, at most once a round trip).
    std::uint64_t spurious_retransmits() const noexcept;
    // Operations re-run after a recovered failure (allreduce with retries).
    std::uint64_t recoveries() const noexcept;
    // Operations run again for a rank that lost their result (in recoveries).
    std::uint64_t replays() const noexcept;
    // Operations taken up again where they stood after railgated fell
    // silent past the peer timeout and came back with the job (retries).
    std::uint64_t resumes() const noexcept;
    // Results accepted since join (progress is visible as this moving).
    std::uint64_t results() const noexcept;
    // Congestion control of each rail the job stripes over (in stripe
    // order): its window now and what it reacted to. Read between operations.
    struct window_info {
        double window = 0;       // chunks in flight allowed
        std::uint64_t target_ns = 0, base_ns = 0;
        std::uint64_t decreases = 0;
        std::uint64_t marks = 0;  // results that came (or whose chunk came) marked ECN CE
        std::uint64_t deep = 0;   // results railgated queued behind more than the depth target
    };
    std::vector<window_info> windows() const;
    // windows()' decreases and marks summed over the rails, without the
    // vector (librailgate reads them after every operation).
    std::uint64_t window_decreases() const noexcept;
    std::uint64_t ecn_marks() const noexcept;

    struct state;

private:
    void report_rtt();
    void merge_rtt() noexcept;
    void send_pending(unsigned rail);
    bool progress_rail(unsigned rail);
    bool scan_rail(unsigned rail, std::uint64_t now);
    void resend(unsigned rail, std::size_t slot, std::uint64_t now); // after its timeout, or a tail probe
    void send_ping(unsigned rail, std::uint64_t now, std::size_t slot); // railgated, are you there (and my chunk)?
    void send_pings(unsigned rail, std::uint64_t now, std::span<const std::uint16_t> slots); // the same, in bursts
    void held(unsigned rail, const rx_msg& m);                         // railgated holds a chunk sent again
    void tail_probe(unsigned rail, std::uint64_t now);                 // the last chunks lost?
    std::uint64_t scan_now() const noexcept; // the clock scan_rail() judges on
    std::string stalled_text(unsigned rail) const; // where an operation without progress stands
    void fail(unsigned rail, failure f, std::string text, std::uint32_t down = 0);
    void finish();
    void run_pipelines();
    void run(void* data, std::size_t count, wire::dtype dt);
    void drive();  // the operation started, to its end
    void resume(); // the operation railgated fell silent in, taken up again
    bool can_replay() const noexcept;
    std::string replay();
    // recover(), again while no JOIN_ACK answers (railgated not back yet)
    // and retries remain after `attempt`, each re-join one more.
    std::string recover_while_retries(unsigned& attempt);
    void tell(const std::string& what) const; // options.on_retry
    void retrying(const std::string& failed, unsigned attempt) const;
    std::string join_once();
    // adoptions: how many times this JOIN took the job's excluded rails.
    std::string join_on(unsigned first, std::uint32_t excluded, unsigned adoptions = 0);
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

// The rails of operations start()ed on workers `ws`, split between two
// threads that drive them together (railbench --embedded: its thread and
// railgated's lcore, in the passes where its rails had nothing): the
// guest steps the last `guest_rails` of the workers' rails (worker by
// worker, rail by rail), the caller the others. A split by rail rather
// than by worker lets the lcore take less than half when its own work is
// heavy (MTU 1500: a frame every few hundred ns). A split that moved
// each rail to whichever thread was free (a flag per rail) was slower
// than none: 64 MiB at MTU 1500 1.25 against 1.59 GB/s, each rail's
// state going from core to core. Every worker must have
// rails_in_parallel(). Once drive() has returned, complete(ws) ends the
// operations.
class shared_rails {
public:
    shared_rails(std::span<worker* const> ws, std::size_t guest_rails);
    // One step of each of the thread's rails not yet done; true once
    // every rail (both threads') is done.
    bool pass(bool guest) noexcept;
    // The caller's rails to their end, yielding now and then while they
    // wait, and the guest's too once `guest_left` says (acquire) that the
    // guest has left them for good (its host stopped: railgated shutting
    // down; they then end as railgated gone, not in a hang). Returns once
    // every rail is done and the guest has left.
    void drive(const std::atomic<bool>& guest_left) noexcept;
    std::size_t size() const noexcept { return units_.size(); }

private:
    struct unit {
        worker* w;
        unsigned rail;
        bool done = false; // its thread's own
    };
    std::vector<unit> units_;
    std::size_t first_guest_;
    std::atomic<std::size_t> left_;
};

// Runs work() on a thread while this one keeps the joined workers `ws`
// alive (keepalive() about every stall_ms / 4): how a caller does long work
// between operations (computing, a checkpoint, making the next inputs)
// without railgated taking its rank for dead when another rank starts the
// next operation first. work() must not use the workers; what it throws is
// rethrown here.
void alive_while(std::span<worker* const> ws, const std::function<void()>& work);

} // namespace railgate::client
