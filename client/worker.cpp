#include "client/railgate/worker.hpp"

#include <sys/random.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <future>
#include <stdexcept>
#include <thread>
#include <utility>

#include "dataplane/engine/engine.hpp"
#include "dataplane/proto/frame.hpp"
#include "dataplane/proto/ipv4.hpp"
#include "dataplane/proto/parse.hpp"
#include "dataplane/qos/token_bucket.hpp"
#include "dataplane/stats/clock.hpp"

namespace railgate::client {
namespace {

using clock = std::chrono::steady_clock;

// Round trips, timeouts and windows: the TSC, not a clock read that can be
// a system call (an emulated guest's HPET: 0.7 us, four per verbs round
// trip). Pacing keeps steady_clock (its own time points).
#ifdef RAILGATE_WORKER_MANUAL_CLOCK
// tests/unit/test_worker_clock.cpp compiles this file again with a clock
// that only the test moves.
} // namespace
namespace manual_clock {
extern std::uint64_t now_ns;
}
namespace {
std::uint64_t now_ns() noexcept { return manual_clock::now_ns; }
#else
std::uint64_t now_ns() noexcept { return stats::fast_now_ns(); }
#endif
template <class D>
std::uint64_t ns(D d) noexcept {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

constexpr unsigned rx_batch = 64;

// A rail's retransmit timeout before any backoff: its smoothed round trip
// plus four deviations (20 ms before the first is measured), at least
// `floor`, at most `cap`.
std::uint64_t rail_rto(std::uint64_t srtt, std::uint64_t rttvar, std::uint64_t floor, std::uint64_t cap) noexcept {
    return std::min(cap, std::max(floor, srtt ? srtt + 4 * rttvar : std::uint64_t{20'000'000}));
}
// The retransmit and liveness scan runs at most this often.
constexpr std::uint64_t scan_every_ns = 200'000;

// What a contribution costs the pacer: on the wire with its railgate
// header, UDP/IPv4/Ethernet headers, preamble, FCS and gap.
std::uint32_t wire_bytes(const tx_msg& m) noexcept {
    return m.bytes + static_cast<std::uint32_t>(wire::header_bytes + frame::udp_frame_overhead + 24);
}

// An ERROR's reason, printable; false when the message was corrupted (it
// is then ignored, as if lost).
bool text_of(const rx_msg& m, std::string& t) {
    t.assign(m.bytes(), '\0');
    if (!m.copy_to(t.data())) return false;
    for (char& c : t)
        if (c < 0x20 || c > 0x7e) c = '?';
    return true;
}

// What railgated's ERROR code says happened to the job.
failure failure_of(wire::error_code c) noexcept {
    switch (c) {
    case wire::error_code::rank_failed: return failure::rank_failed;
    case wire::error_code::unknown_job: return failure::daemon_gone;
    case wire::error_code::expired: return failure::expired;
    case wire::error_code::rail_down: return failure::rail_down;
    // Another run of the same id and token: re-joining would clash again.
    case wire::error_code::rank_claimed: return failure::refused;
    // The operator's word is final: no retry joins the job again.
    case wire::error_code::operator_abort: return failure::stopped;
    default: return failure::aborted;
    }
}

// A JOIN_ACK's rails are where this worker will send its data: each must be
// a unicast address and port, with an MTU a rail can have. The job's chunk
// is not judged by the MTUs listed: they are the rails' MTUs for new jobs,
// and a job created before one was lowered keeps its larger chunks while
// the rail's port drains. Each rail's port checks the chunk the JOIN names
// (wire::shape_word) instead, and refuses one it cannot carry.
std::string check_rails(const wire::join_ack_body& a) {
    for (unsigned r = 0; r < a.n_rails; ++r) {
        const wire::rail_entry& e = a.rails[r];
        if (e.ip == 0 || e.ip == 0xffffffffu || e.ip >> 28 >= 0xe || e.udp_port == 0 || e.mtu < 256 ||
            e.mtu > wire::max_mtu)
            return "railgated's JOIN_ACK lists an unusable rail " + std::to_string(r) + " (" +
                   net::format_ipv4(e.ip) + ":" + std::to_string(e.udp_port) + ", MTU " + std::to_string(e.mtu) + ")";
    }
    return {};
}

// Whether the JOIN_ACK `a` that rail r sent (`index`: its header's aux,
// the rail's index at railgated) gives the job what its first JOIN_ACK,
// rail `first`'s, gave: one chunk and policy, and the same rails, this one
// at r. Empty when it does, else why not: the job could not run with two
// chunk sizes or policies, nor stripe (or find its LAG home) over other
// rails here.
std::string ack_disagrees(const wire::join_ack_body& job, const wire::join_ack_body& a, std::uint32_t index, unsigned r,
                          unsigned first, std::uint32_t job_id) {
    if (a.chunk_bytes != job.chunk_bytes || a.policy != job.policy)
        return "railgated runs job " + std::to_string(job_id) + " with " + std::to_string(a.chunk_bytes) +
               " B chunks under policy " + wire::policy_name(a.policy) + " on rail " + std::to_string(r) + ", and " +
               std::to_string(job.chunk_bytes) + " B under " + wire::policy_name(job.policy) + " on rail " +
               std::to_string(first) + " (an MTU or policy change came between the JOINs): join it again";
    bool same = a.n_rails == job.n_rails && index == r;
    for (unsigned i = 0; same && i < a.n_rails; ++i)
        same = a.rails[i].ip == job.rails[i].ip && a.rails[i].udp_port == job.rails[i].udp_port;
    if (same) return {};
    return "railgated lists " + std::to_string(a.n_rails) + " rails to job " + std::to_string(job_id) + " on rail " +
           std::to_string(r) + " (its rail " + std::to_string(index) + "), against " + std::to_string(job.n_rails) +
           " on the first (a rail was added or removed between the JOINs): join it again";
}

// A quarter of the job's stall time (250 ms when railgated names none):
// how often a rank with nothing else to send PINGs, and the cap on its
// retransmit timeout, so that railgated never finds it silent that long.
std::uint64_t quarter_stall_ns(const wire::join_ack_body& a) noexcept {
    return a.stall_ms ? std::uint64_t{a.stall_ms} * 1'000'000 / 4 : 250'000'000;
}

} // namespace

std::uint64_t random_token() {
    std::uint64_t t = 0;
    while (t == 0)
        if (getrandom(&t, sizeof t, 0) != sizeof t) t = 0;
    return t;
}

std::string_view failure_name(failure f) noexcept {
    switch (f) {
    case failure::none: return "none";
    case failure::usage: return "usage";
    case failure::refused: return "refused";
    case failure::rank_failed: return "rank_failed";
    case failure::aborted: return "aborted";
    case failure::rail_down: return "rail_down";
    case failure::daemon_gone: return "daemon_gone";
    case failure::expired: return "expired";
    case failure::timeout: return "timeout";
    case failure::stopped: return "stopped";
    }
    return "?";
}

namespace {
// Whether a message's checksum holds, from the ones' sums of its headers
// and of its payload's two pieces (RFC 1071 2B: the second, at an odd
// offset, sums swapped).
bool sums_hold(std::uint16_t head, std::uint16_t first, std::uint32_t first_len, std::uint16_t rest) noexcept {
    if (first_len & 1) rest = __builtin_bswap16(rest);
    return frame::add_sums(frame::add_sums(head, first), rest) == 0xffff;
}
} // namespace

bool rx_msg::copy_to(void* dst) const noexcept {
    auto* d = static_cast<std::uint8_t*>(dst);
    if (!unchecked) {
        if (frag_len[0]) std::memcpy(d, frag[0], frag_len[0]);
        if (frag_len[1]) std::memcpy(d + frag_len[0], frag[1], frag_len[1]);
        return true;
    }
    const std::uint16_t first = frag_len[0] ? frame::copy_and_sum(d, frag[0], frag_len[0]) : 0;
    const std::uint16_t rest = frag_len[1] ? frame::copy_and_sum(d + frag_len[0], frag[1], frag_len[1]) : 0;
    return sums_hold(head_sum, first, frag_len[0], rest);
}

bool rx_msg::intact() const noexcept {
    if (!unchecked) return true;
    const std::uint16_t first = frag_len[0] ? frame::ones_sum16(frag[0], frag_len[0]) : 0;
    const std::uint16_t rest = frag_len[1] ? frame::ones_sum16(frag[1], frag_len[1]) : 0;
    return sums_hold(head_sum, first, frag_len[0], rest);
}

namespace {
// Forgets what failed (the state's or a rail's err, why, down and detail):
// an operation starts or resumes.
template <class Failure> void clear_failure(Failure& f) noexcept {
    f.err.clear();
    f.why = failure::none;
    f.down = 0;
    f.detail = 0;
}
} // namespace

struct worker::state {
    struct slot_state {
        std::uint32_t gen = 0;     // persists across operations of the job
        bool busy = false;
        // The last chunk of this slot that RACK sent again, until railgated
        // tells that its first copy had arrived (a second result for it),
        // and its gen's low 16 bits (a slot's gens name its chunks; a result
        // 65536 chunks stale would only be counted spurious). In padding:
        // the slot stays 32 bytes.
        bool rack_untold = false;
        // The rail's HELD answers taken when the last one for this chunk
        // came (rail_run::helds' low 16 bits; in padding too): which held
        // chunk railgated confirmed longest ago (see scan_rail).
        std::uint16_t held_seq = 0;
        std::uint64_t k = 0;       // rail-local chunk in flight
        std::uint64_t sent_ns = 0;
        unsigned retries = 0;      // retransmits of the chunk in flight (backoff; Karn)
        bool queued = false;       // waiting in `pending` (not sent: no timeout runs)
        // What railgated said of the chunk since it was last sent: HELD (its
        // slot holds it), or a PONG naming it (not there: lost).
        enum class told : std::uint8_t { nothing, held, missing } said = told::nothing;
        bool held() const noexcept { return said == told::held; }
        std::uint16_t rack_gen = 0;
    };
    // One rail's pipeline: everything progress_rail touches, so that rails
    // can run on threads of their own (worker_options::engine).
    struct rail_run {
        std::vector<slot_state> slots;
        std::vector<std::uint16_t> asks; // the slots a silence's PINGs name (scan_rail), up to pool
        std::uint64_t n_chunks = 0, done = 0;
        std::uint64_t made = 0;    // chunks made so far (0..made-1 have left or wait to, but the owed)
        std::uint64_t owed = 0;    // chunks below `made` not made yet: their slot was busy (congestion control)
        std::uint64_t lo = 0;      // no chunk below it is in flight
        std::uint64_t rack_ns = 0; // the latest send time of a chunk whose result came back out of order
        // RACK's reordering window, adapted (RFC 8985 6.2, with railgated's
        // second result for a chunk RACK sent again as the DSACK): reo_mult
        // times the base window, at most the round trip, grown by one at
        // most once a round trip for each resend found spurious, back to 1
        // after 16 losses found with none between. It lasts the job (a path
        // that reorders goes on). Only where a loss RACK finds halves the
        // window (congestion control's delay mode): there a reordering taken
        // for a loss costs the window, elsewhere one chunk sent twice, while
        // a wider window makes a real loss wait longer (the queue mode, 5%
        // loss, duplication and reordering each way: 0.5-1.7x, median about
        // 0.9x, over 10 pairs). HELD for a resend does not count: it says
        // another rank's copy is missing, not that this path reorders.
        unsigned reo_mult = 1, reo_persist = 0;
        std::uint64_t reo_grown_ns = 0;
        std::uint64_t spurious = 0; // RACK resends railgated showed spurious
        std::vector<tx_msg> pending;
        std::vector<rx_msg> rx = std::vector<rx_msg>(rx_batch);
        std::string err;
        failure why = failure::none;
        std::uint32_t down = 0;    // rails found down (rail_down)
        std::uint64_t detail = 0;  // rank_failed: the rank railgated named
        std::uint64_t last_progress_ns = 0, last_scan_ns = 0;
        unsigned polls_since_clock = 0;
        stats::histogram rtt;   // merged into state::rtt when an operation ends
        stats::histogram rtt_own; // the same, less railgated's wait for the other ranks
        std::uint64_t retransmits = 0, results = 0;
        std::uint64_t timeouts = 0; // of the retransmits: after their timeout ran out
        // Smoothed chunk round trip and its variation (Jacobson/Karels), from
        // chunks that were not retransmitted (Karn): the retransmit timeout
        // follows the queueing a shaped or slow rail adds.
        std::uint64_t srtt_ns = 0, rttvar_ns = 0;
        // Karn's backoff, for the rail: each timeout doubles the timeout of
        // every chunk until a chunk comes back without having been sent
        // again (otherwise a queue that grew past the timeout would have
        // every chunk resent, and no clean sample would ever raise srtt).
        unsigned backoff = 0;
        // Timers run out only on a rail that delivered nothing for a timeout
        // (delivered_ns). The timeout first asks railgated with a PING
        // naming the probe's chunk (probe::pinged; the oldest not answered
        // HELD, see scan_rail), nothing sent again: on a busy host a timeout
        // is most often a railgated whose core was taken for a few ms, or a
        // late peer rank, with nothing lost. railgated answers a rail's
        // messages in order, so its answer comes after the results of every
        // chunk it had before the PING: results (of chunks sent once) end
        // the silence with no chunk resent (a quiet timeout); so does a
        // HELD (the slot holds the chunk, waiting for a late rank); the
        // kept result, sent again, brings back a result that was lost (and
        // the others whose timers run out then go together). With it go
        // PINGs naming the chunks answered HELD before, asked again in the
        // same round trip, not one per backed-off round: the slot of one
        // may have completed since (its result lost: the kept result comes)
        // or let it go (a PONG naming it: lost, slot_state::told::missing,
        // and it goes). A rank whose lost result sat behind ten held chunks
        // asked about them one by one for seconds (live_changes.sh seed
        // 617, a 30 s job). Not every chunk out: one whose result is only
        // queued (a shaped rail) would be answered with its kept result
        // again, the queue doubled (tests/e2e/paced.sh without pacing: 1.38
        // links, 4224 results sent again, against 1.85 and a few). A PONG
        // naming the probe's chunk (probe::ponged) says the chunk is not
        // there: lost (or railgated too old to look). Only then does the
        // chunk go as the probe (probe::out, as RFC 6298 sends one
        // segment), with those a PONG named; a late rank or a paused
        // railgated (SIGSTOP) is not answered by resending the window for
        // every doubling of the timeout. An unanswered PING goes again on
        // the probe's backed-off timeout, the chunk waiting (what would
        // answer the chunk answers the PING), until the peer timeout finds
        // the rail silent. The probe goes with a PING of its own (its result
        // may wait on another rank's chunk, held back by that rank's
        // probe); while neither is answered only the probe is sent again,
        // on its own backed-off timeout. railgated answers a probe it
        // already holds with HELD (the slot waits for a late rank; see
        // held_ns); otherwise, once it answers the PING or the probe, the
        // chunks whose timers ran out are lost and go together. A result of
        // a chunk sent once ends it (probe::none).
        enum class probe : std::uint8_t { none, pinged, ponged, out, answered } probing = probe::none;
        // A timeout's PING is out (or answered PONG), no chunk resent yet.
        bool asking() const noexcept { return probing == probe::pinged || probing == probe::ponged; }
        std::uint64_t timeouts_ns = 0; // the last round's time
        std::uint64_t probe_ns = 0;    // the last probe's (or its PING's)
        std::uint64_t asked_ns = 0;    // when PINGs last named the chunks (a PONG to one sent before is stale)
        std::size_t probe_slot = 0;
        unsigned probe_pings = 0;     // PINGs the silence sent unanswered (their backoff)
        std::uint64_t quiet_timeouts = 0; // silences a PING settled: results or HELD came, nothing resent
        // The next round after the probe's answer is the one that ends the
        // probe (see scan_rail: the window's rule of silences).
        bool probe_unended = false;
        // When the last result came: the time its burst was read, which
        // chunks made then left at. Every timer of the rail restarts then
        // (as TCP's on an acknowledgment, RFC 6298 5.3): a rail that
        // delivers is slow, not lossy (RACK finds the chunks it lost).
        std::uint64_t delivered_ns = 0;
        // helds' low 16 bits when the last result came: a chunk answered
        // HELD at or before then (slot_state::held_seq) has seen results
        // come since its HELD (see scan_rail).
        std::uint16_t helds_delivered = 0;
        // HELD: railgated holds a chunk this rail sent again, its slot
        // waiting for another rank's; the chunks are not lost. Every timer
        // of the rail restarts then (held_ns), and each HELD after a new
        // round doubles them (holds, as a backoff, to 6), without resending
        // the window or shrinking it, until a result comes.
        std::uint64_t held_ns = 0;
        unsigned holds = 0;
        std::uint64_t helds = 0; // HELD answers taken
        std::uint64_t pongs = 0; // PONGs of the job's incarnation (what an operation timeout reports)
        // The tail loss probe (worker::tail_probe): when it went, one per
        // silence (0: none this operation); the chunk its PING named (slot,
        // pool: none) and whether a PONG naming it came (the chunk goes).
        std::uint64_t tlp_ns = 0;
        std::size_t tlp_slot = 0;
        std::uint64_t tlp_k = 0;
        bool tlp_ponged = false;
        std::uint64_t tail_probes = 0;
        // Pacing (worker_options::pace_bps): contributions leave no faster.
        qos::token_bucket<clock> pacer;
        // Congestion control (worker_options::congestion_control): chunks
        // are made in order while fewer than the window are in flight.
        bool cc = false;
        qos::delay_window cw;
        // Liveness: whether railgated spoke on the rail since the last scan,
        // when it last did (read by the other rails' pipelines), and when
        // this rail last asked it (PING).
        bool heard = false;
        std::atomic<std::uint64_t> heard_ns{0};
        std::uint64_t ping_ns = 0;
        // railgated fell silent (every rail past the peer timeout) and this
        // rail asks again (resume()): silent until the join timeout, not
        // the peer timeout. `silent`: this rail found railgated gone.
        bool resuming = false, silent = false;
    };

    wire::join_ack_body ack{};
    bool joined = false;
    std::uint32_t excluded = 0; // rails the job stripes around
    std::uint64_t nonce = 0;
    std::uint64_t ops = 0;      // operations completed in this job (JOIN's op)
    unsigned rails = 1;            // rails the data stripes over
    std::vector<unsigned> tr;      // transport rail of each stripe
    std::vector<unsigned> joined_on; // transport rails joined (LEAVE goes there)
    // Per transport rail: the job's incarnation there (JOIN_ACK's gen). Only
    // ERRORs carrying it (or the transport's own, all ones) are this job's.
    std::vector<std::uint32_t> inst = std::vector<std::uint32_t>(wire::max_rails, 0);
    std::uint16_t pool = 0;
    std::uint32_t chunk_elems = 0;
    std::uint64_t rto_cap_ns = 250'000'000;
    std::vector<rail_run> run;
    std::vector<rx_msg> rx = std::vector<rx_msg>(rx_batch); // join and leave

    std::uint8_t* data = nullptr;
    std::size_t count = 0;
    // Operations read no precise time (a reliable transport without
    // per-chunk round trips; fixed at construction): their timers, the peer
    // and operation timeouts in milliseconds, go by the coarse clock, and
    // the latency path reads no clock that is a system call where the TSC
    // is not trusted (an emulated guest's HPET: 0.7 us a read).
    bool coarse = false;
    wire::dtype dt = wire::dtype::fp32;
    std::size_t esize = 4;
    bool active = false;
    std::atomic<bool> failed{false}; // a rail failed: the others stop
    std::string err;
    failure why = failure::none;
    std::uint32_t down = 0;
    std::uint64_t detail = 0;
    stats::histogram rtt, rtt_own;
    std::uint64_t recoveries = 0;
    std::uint64_t replays = 0;
    std::uint64_t resumes = 0;
    // An operation that may be resumed (allreduce with retries left): when
    // railgated falls silent on every rail, finish() leaves the job as it
    // is (no abort) and allreduce() asks it again (see resume()).
    bool keep_job = false;
    bool gone_silent = false; // the failure: every rail silent past the peer timeout
    std::vector<std::uint8_t> backup; // the input, while an operation with retries runs
    std::uint64_t backup_op = ~std::uint64_t{0};
    // The previous operation's input (retries): a rank one operation ahead
    // replays it for a rank that lost its result in a railgated restart.
    std::vector<std::uint8_t> prev;
    std::uint64_t prev_op = ~std::uint64_t{0};
    wire::dtype backup_dt = wire::dtype::fp32, prev_dt = wire::dtype::fp32;
    wire::error_code refusal = wire::error_code::none; // the last JOIN refusal's code (detail: its offset)

    // Where rail r's k-th chunk starts in the tensor (elements).
    std::uint64_t chunk_offset(unsigned r, std::uint64_t k) const noexcept { return (k * rails + r) * chunk_elems; }
    // railgated showed that the first copy of the chunk RACK sent again in
    // slot `sl` (named by its gen) had arrived: a second result for it. The
    // resend was spurious: where RACK's losses cut the window, the rail's
    // reordering window grows, at most once a round trip, to 4 times its
    // base (which reaches the round trip: the window's cap).
    [[gnu::cold, gnu::noinline]] static void rack_told(rail_run& rr, slot_state& sl, const rx_msg& m) noexcept {
        if (!sl.rack_untold || static_cast<std::uint16_t>(m.h.gen) != sl.rack_gen) return;
        if (!m.intact()) return; // corrupted (a DPDK port leaves the checksum to us): says nothing
        sl.rack_untold = false;
        ++rr.spurious;
        if (!rr.cc || !rr.cw.params().loss) return;
        rr.reo_persist = 16;
        const std::uint64_t now = now_ns();
        if (rr.reo_mult < 4 && now - rr.reo_grown_ns >= rr.srtt_ns) {
            ++rr.reo_mult;
            rr.reo_grown_ns = now;
        }
    }
    // The contribution of rail r's k-th chunk; marks its slot busy.
    tx_msg contrib(const worker_options& o, unsigned r, std::uint64_t k, std::uint8_t flags,
                   std::uint64_t t) noexcept {
        const std::uint64_t off = chunk_offset(r, k);
        const auto n = static_cast<std::uint32_t>(std::min<std::uint64_t>(chunk_elems, count - off));
        slot_state& sl = run[r].slots[k % pool];
        sl.busy = true;
        sl.k = k;
        sl.sent_ns = t;
        sl.retries = flags & wire::flag_retransmit ? sl.retries + 1 : 0;
        sl.queued = !(flags & wire::flag_retransmit); // new chunks go through `pending`
        sl.said = slot_state::told::nothing;
        tx_msg m;
        m.h.type = wire::msg_type::contrib;
        m.h.dt = dt;
        m.h.flags = flags;
        m.h.job_id = o.job_id;
        m.h.job_token = o.job_token;
        m.h.rank = o.rank;
        m.h.world_size = o.world;
        m.h.slot = static_cast<std::uint16_t>(k % pool);
        m.h.count = n;
        m.h.offset = off;
        m.h.gen = sl.gen;
        m.payload = data + off * esize;
        m.bytes = static_cast<std::uint32_t>(n * esize);
        if (!(flags & wire::flag_retransmit)) prefetch(r, k + prefetch_ahead);
        return m;
    }
    // The rail's chunk `prefetch_ahead` places on, into the cache while
    // this one is sent: the transport's copy of a chunk otherwise waits on
    // memory line by line (the hardware prefetcher barely starts within a
    // 1408-byte chunk). Embedded, MTU 1500, 2 workers: up to 1.3x at 4 MiB
    // and 1.5x at 64 MiB where the copy waits on memory, the same elsewhere;
    // 1, 2 and 4 places measured alike (doc/performance.md). Not a jumbo
    // chunk (prefetch_below): its 140 lines asked for at once fill the line
    // fill buffers, as in progress_rail (MTU 9000, 6 rounds alternated: 256
    // KiB 1.07x, 4 MiB 1.02x, 64 MiB 1.03x without; 4 workers 4 and 64 MiB
    // 1.03-1.05x).
    static constexpr std::uint64_t prefetch_ahead = 2;
    // The chunks and results the worker asks the cache for ahead of their
    // copies: smaller than this (MTU 1500 and 4200's); the hardware streams
    // jumbo ones (MTU 9000's 8896 bytes).
    static constexpr std::uint64_t prefetch_below = 8192;
    static_assert(sizeof(slot_state) == 32, "a slot's state is half a cache line");
    void prefetch(unsigned r, std::uint64_t k) const noexcept {
        const std::uint64_t off = chunk_offset(r, k);
        if (off >= count) return;
        const std::uint8_t* p = data + off * esize;
        const std::uint64_t bytes = std::min<std::uint64_t>(chunk_elems, count - off) * esize;
        if (bytes >= prefetch_below) return;
        for (std::uint64_t i = 0; i < bytes; i += 64) __builtin_prefetch(p + i, 0, 3);
    }
    bool in_flight(const rail_run& rr, std::uint64_t k) const noexcept {
        const slot_state& sl = rr.slots[k % pool];
        return sl.busy && sl.k == k;
    }
};

namespace {
// A header-only control message (JOIN, LEAVE, abort, PING) of this worker;
// `instance`: the job's incarnation on the rail it goes to.
wire::header control_header(const worker_options& o, wire::msg_type t, std::uint32_t instance = 0) noexcept {
    wire::header h;
    h.type = t;
    h.gen = instance;
    h.dt = o.dt;
    h.job_id = o.job_id;
    h.job_token = o.job_token;
    h.rank = o.rank;
    h.world_size = o.world;
    return h;
}
} // namespace

worker::worker(transport& t, const worker_options& o) : t_(t), o_(o), s_(std::make_unique<state>()) {
    if (o_.max_count == 0) o_.max_count = wire::max_tensor_elems;
    s_->coarse = !o_.chunk_rtt && t_.reliable();
    now_ns(); // the clock's one calibration (10 ms), here rather than in an operation
}
worker::~worker() = default;

const std::string& worker::error() const noexcept { return s_->err; }
failure worker::failed_with() const noexcept { return s_->why; }
const wire::join_ack_body& worker::job_info() const noexcept { return s_->ack; }
std::uint32_t worker::instance(unsigned rail) const noexcept {
    return rail < s_->inst.size() ? s_->inst[rail] : 0;
}
std::uint32_t worker::chunk_elems() const noexcept { return s_->chunk_elems; }
std::span<const unsigned> worker::stripe_rails() const noexcept { return s_->tr; }
stats::histogram& worker::chunk_rtt() noexcept {
    merge_rtt();
    return s_->rtt;
}
stats::histogram& worker::chunk_rtt_own() noexcept {
    merge_rtt();
    return s_->rtt_own;
}

// Each rail records its round trips in its own histogram (its pipeline may
// run on a thread of its own); they join chunk_rtt() when it is read, never
// per operation: a histogram is 35,840 buckets (280 KiB), and merging and
// clearing one per rail after every operation cost small messages 3-13x
// their latency (commit 8523a2a).
void worker::merge_rtt() noexcept {
    for (auto& rr : s_->run)
        if (rr.rtt.count()) {
            s_->rtt.merge(rr.rtt);
            rr.rtt.reset();
            s_->rtt_own.merge(rr.rtt_own);
            rr.rtt_own.reset();
        }
}
std::uint64_t worker::recoveries() const noexcept { return s_->recoveries; }
std::uint64_t worker::replays() const noexcept { return s_->replays; }
std::uint64_t worker::resumes() const noexcept { return s_->resumes; }
std::vector<worker::window_info> worker::windows() const {
    std::vector<window_info> w;
    for (const auto& rr : s_->run) {
        if (rr.cc)
            w.push_back({rr.cw.exact(), rr.cw.target(), rr.cw.base(), rr.cw.decreases(), rr.cw.marks(), rr.cw.deep()});
        else w.push_back({static_cast<double>(s_->pool)}); // off: the pool is the window
    }
    return w;
}

namespace {
template <class Run, class Counter> std::uint64_t sum_rails(const std::vector<Run>& runs, Counter c) noexcept {
    std::uint64_t n = 0;
    for (const auto& r : runs) n += r.*c;
    return n;
}
// The same for a count of the rails' congestion windows (rails without
// congestion control count nothing).
template <class Run> std::uint64_t sum_windows(const std::vector<Run>& runs,
                                               std::uint64_t (qos::delay_window::*of)() const noexcept) noexcept {
    std::uint64_t n = 0;
    for (const auto& r : runs)
        if (r.cc) n += (r.cw.*of)();
    return n;
}
} // namespace

std::uint64_t worker::retransmits() const noexcept { return sum_rails(s_->run, &state::rail_run::retransmits); }
std::uint64_t worker::timeout_retransmits() const noexcept { return sum_rails(s_->run, &state::rail_run::timeouts); }
std::uint64_t worker::tail_probes() const noexcept { return sum_rails(s_->run, &state::rail_run::tail_probes); }
std::uint64_t worker::helds() const noexcept { return sum_rails(s_->run, &state::rail_run::helds); }
std::uint64_t worker::quiet_timeouts() const noexcept { return sum_rails(s_->run, &state::rail_run::quiet_timeouts); }
std::uint64_t worker::spurious_retransmits() const noexcept { return sum_rails(s_->run, &state::rail_run::spurious); }
std::uint64_t worker::window_decreases() const noexcept { return sum_windows(s_->run, &qos::delay_window::decreases); }
std::uint64_t worker::ecn_marks() const noexcept { return sum_windows(s_->run, &qos::delay_window::marks); }
void worker::keepalive() {
    state& s = *s_;
    if (!s.joined || s.active || s.failed.load(std::memory_order_relaxed)) return;
    for (unsigned i = 0; i < s.rails && i < s.tr.size(); ++i) {
        const tx_msg p{control_header(o_, wire::msg_type::ping, s.inst[s.tr[i]]), nullptr, 0};
        t_.send(s.tr[i], &p, 1);
    }
}

std::uint64_t worker::results() const noexcept {
    std::uint64_t n = 0;
    for (const auto& r : s_->run) n += r.results;
    return n;
}

std::string worker::join() {
    state& s = *s_;
    std::string e = join_once();
    if (e.empty() || !o_.retries || !recoverable(s.why)) return e;
    // The job ended before every rank had joined it (a rank that gave up on
    // a railgated paused past its peer timeout aborted it, a rail went
    // down): its ranks are retrying too, so a fresh one assembles.
    const std::string failed = e;
    const failure why = s.why;
    for (unsigned attempt = 0; attempt < o_.retries; ++attempt) {
        s.err = e;
        retrying(e, attempt);
        e = recover_while_retries(attempt);
        if (e.empty()) {
            ++s.recoveries;
            s.err.clear();
            tell("joined again");
            return e;
        }
        if (!recoverable(s.why) && s.why != failure::timeout) return failed + "; recovering: " + e;
    }
    s.why = why;
    return failed + "; recovering: " + e;
}

std::string worker::join_once() {
    state& s = *s_;
    s.why = failure::none;
    s.refusal = wire::error_code::none;
    if (o_.world == 0 || o_.world > wire::max_world) {
        s.why = failure::usage;
        return "world size must be 1.." + std::to_string(wire::max_world);
    }
    if (o_.rank >= o_.world) {
        s.why = failure::usage;
        return "rank " + std::to_string(o_.rank) + " not below world " + std::to_string(o_.world);
    }
    // The first rail not excluded (rail 0 unless it went down).
    unsigned first = 0;
    while (first < t_.n_rails() && (s.excluded >> first & 1)) ++first;
    if (first >= t_.n_rails()) first = 0;
    std::string e = join_on(first, s.excluded);
    if (!e.empty() && s.why == failure::none) s.why = failure::refused;
    return e;
}

// JOINs rail `first` (which tells the rails), then every other rail the job
// stripes over, all at once.
std::string worker::join_on(unsigned first, std::uint32_t excluded, unsigned adoptions) {
    state& s = *s_;
    s.nonce = random_token();
    s.joined = false;
    s.joined_on.clear();
    wire::header h = control_header(o_, wire::msg_type::join);
    wire::join_body b;
    b.max_count = o_.max_count;
    b.pool_size = o_.pool_size;
    b.excluded_rails = excluded;
    b.nonce = s.nonce;
    b.op = static_cast<std::uint16_t>(s.ops);
    std::uint8_t body[wire::join_body_bytes];
    wire::encode_join_body(b, body);
    tx_msg msg{h, body, wire::join_body_bytes};

    const auto deadline = clock::now() + o_.join_timeout;
    // What another version's railgated said before this JOIN is not this
    // railgated's (it may have been upgraded since).
    t_.forget_foreign_version();
    std::string last_refusal;
    // The rails disagree on the job's chunk or policy: no rank can run it.
    bool misshapen = false;
    // Once rail `first` has answered, the rank joins the job's other rails
    // (over verbs it connects each first) and sends nothing there until it
    // has joined them all, while ranks done sooner may be at work there:
    // railgated would take the silence past its stall time for a stopped
    // rank (the official CI of 759823f: "rank 0 sent nothing to slot 0 of
    // job 6 on rail v0 for 1064 ms", in the SoftRoCE guest). So a PING goes
    // there every quarter of the stall time meanwhile, as keepalive() does
    // between operations; await() reads what comes back there.
    auto next_ping = clock::time_point::max();
    auto keep_first = [&] {
        if (clock::now() < next_ping) return;
        next_ping = clock::now() + std::chrono::nanoseconds(quarter_stall_ns(s.ack));
        const tx_msg p{control_header(o_, wire::msg_type::ping, s.inst[first]), nullptr, 0};
        t_.send(first, &p, 1);
    };
    // Waits for a JOIN_ACK on every rail in `want`, sending JOINs every
    // 100 ms. A refusal that may pass (the rank's old process still bound)
    // keeps the JOIN going until the deadline; any other ends it. With
    // `joined`, rail `first` is listened to as well, as acked: an ERROR
    // there is the job's end while this rank joined the others.
    auto await = [&](std::vector<unsigned> want, bool joined) -> std::string {
        std::vector<bool> acked(want.size(), false);
        if (joined) {
            want.insert(want.begin(), first);
            acked.insert(acked.begin(), true);
        }
        auto next_send = clock::now();
        while (std::find(acked.begin(), acked.end(), false) != acked.end()) {
            if (joined) keep_first();
            if (clock::now() > deadline) {
                s.why = last_refusal.empty() ? failure::timeout : failure::refused;
                if (!last_refusal.empty()) return last_refusal;
                // railgated answered in a version this library does not
                // speak (its answer cannot be read, nor its nonce checked:
                // only said once the JOIN went unanswered, so that a forged
                // one cannot end a join). No retry would mend it.
                if (const int v = t_.foreign_version(); v >= 0) {
                    s.why = failure::refused;
                    return "railgated speaks railgate protocol version " + std::to_string(v) + ", this library " +
                           std::to_string(wire::protocol_version) +
                           ": no JOIN_ACK it can read (upgrade the workers or railgated so that they match)";
                }
                std::string silent;
                for (std::size_t i = 0; i < want.size(); ++i)
                    if (!acked[i])
                        silent += (silent.empty() ? "" : ", ") + std::to_string(want[i]) +
                                  (s.joined ? " (" + net::format_ipv4(s.ack.rails[want[i]].ip) + ")" : "");
                return "join timed out after " + std::to_string(o_.join_timeout.count()) +
                       " ms: no JOIN_ACK from railgated on rail " + silent;
            }
            if (clock::now() >= next_send) {
                for (std::size_t i = 0; i < want.size(); ++i)
                    if (!acked[i]) t_.send(want[i], &msg, 1);
                next_send = clock::now() + std::chrono::milliseconds(100);
            }
            bool any = false;
            for (std::size_t i = 0; i < want.size(); ++i) {
                const unsigned r = want[i];
                const unsigned n = t_.recv(r, s.rx.data(), rx_batch);
                for (unsigned k = 0; k < n; ++k) {
                    const rx_msg& m = s.rx[k];
                    any = true;
                    if (m.h.job_id != o_.job_id || !wire::token_equal(m.h.job_token, o_.job_token) ||
                        m.h.rank != o_.rank)
                        continue;
                    if (m.h.type == wire::msg_type::error) {
                        // The transport lost the rail (a verbs QP failed,
                        // e.g. railgated restarting under it): no JOIN can
                        // pass there; recover() reconnects and joins again.
                        if (m.h.gen == transport_error_gen) {
                            s.why = failure::rail_down;
                            return "rail " + std::to_string(r) + "'s connection failed during the join";
                        }
                        const auto code = static_cast<wire::error_code>(m.h.aux);
                        std::string why;
                        // The job this JOIN just joined on the rail (its
                        // incarnation) ended before the join finished.
                        if (acked[i] && m.h.gen == s.inst[r] && m.h.gen != static_cast<std::uint32_t>(s.nonce)) {
                            if (!text_of(m, why)) continue;
                            s.why = failure_of(code);
                            return "railgated ended the job on rail " + std::to_string(r) + ": " + why;
                        }
                        // A refusal answers this JOIN (gen: its nonce); any
                        // other ERROR is about a job this worker has left.
                        if (m.h.gen != static_cast<std::uint32_t>(s.nonce)) continue;
                        if (!text_of(m, why)) continue;
                        const std::string text = "railgated refused the join on rail " + std::to_string(r) + ": " + why;
                        s.refusal = code;
                        s.detail = m.h.offset;
                        // Refusals that pass with time: the rank's old
                        // process still bound, this host's JOINs still
                        // assembling (forged ones expire), or railgated's
                        // rails taking a new advertisement: JOINed again
                        // until the deadline.
                        if (code == wire::error_code::rank_taken || code == wire::error_code::too_many_pending ||
                            code == wire::error_code::rails_changing) {
                            last_refusal = text;
                            // railgated holds JOINs for the milliseconds its
                            // lcores take to change: asked again sooner.
                            if (code == wire::error_code::rails_changing)
                                next_send = std::min(next_send, clock::now() + std::chrono::milliseconds(10));
                            continue;
                        }
                        // The job on this rail has another chunk or policy
                        // than its first rail's (an MTU or policy change
                        // came between the JOINs): no rank can run it. The
                        // others are told at once (abort, below) and every
                        // rank may join a fresh one.
                        if (code == wire::error_code::shape_mismatch) {
                            s.why = failure::aborted;
                            misshapen = true;
                            return text;
                        }
                        if (code == wire::error_code::rails_mismatch && m.h.offset != excluded &&
                            m.h.offset <= UINT32_MAX && adoptions < 2) {
                            // The job's rails are the job's, and this worker
                            // goes along: around rails it has not seen go
                            // down, and over one it has (when railgated
                            // restarts, a rank may see one rail's queue pair
                            // fail before it sees railgated gone, and the
                            // other ranks' new job has every rail). A rail
                            // really down then fails the job for every rank,
                            // naming it, and every rank's next job leaves it out.
                            s.excluded = static_cast<std::uint32_t>(m.h.offset);
                            return "\x01";
                        }
                        s.why = failure::refused;
                        return text;
                    }
                    if (m.h.type != wire::msg_type::join_ack || m.h.world_size != o_.world || m.h.dt != o_.dt) continue;
                    std::vector<std::uint8_t> buf(m.bytes());
                    if (!m.copy_to(buf.data())) continue; // corrupted: as if lost
                    wire::join_ack_body a;
                    if (!wire::decode_join_ack_body(buf, a)) continue;
                    if (!s.joined) {
                        if (std::string bad = check_rails(a); !bad.empty()) {
                            s.why = failure::refused;
                            return bad;
                        }
                        if (wire::header_bytes + std::size_t{a.chunk_bytes} > t_.max_message_bytes()) {
                            s.why = failure::refused;
                            const std::string why = t_.message_limit(wire::header_bytes + std::size_t{a.chunk_bytes});
                            return "railgated's JOIN_ACK gives " + std::to_string(a.chunk_bytes) + " B chunks; the " +
                                   t_.name() + " transport carries messages of at most " +
                                   std::to_string(t_.max_message_bytes()) + " B (" +
                                   std::to_string(wire::header_bytes) + " B of header)" +
                                   (why.empty() ? "" : ": " + why);
                        }
                        s.ack = a;
                        s.joined = true;
                    }
                    if (!acked[i]) s.joined_on.push_back(r);
                    acked[i] = true;
                    s.inst[r] = m.h.gen;
                    if (std::string bad = ack_disagrees(s.ack, a, m.h.aux, r, first, o_.job_id); !bad.empty()) {
                        // An MTU, policy or rail change came between the
                        // JOINs, and railgated did not refuse it (one
                        // before 2026-12-01, or a verbs rail).
                        s.why = failure::aborted;
                        misshapen = true;
                        return bad;
                    }
                }
            }
            if (!any) std::this_thread::yield();
        }
        return "";
    };
    std::string e = await({first}, false);
    if (e == "\x01") return join_on(first, s.excluded, adoptions + 1); // once more, on the job's rails
    if (!e.empty()) return e;
    next_ping = clock::now() + std::chrono::nanoseconds(quarter_stall_ns(s.ack));
    s.excluded = s.ack.excluded_rails;
    if (t_.n_rails() < s.ack.n_rails)
        if (e = t_.open_rails({s.ack.rails, s.ack.n_rails}, keep_first); !e.empty()) {
            s.why = failure::refused;
            leave();
            return e;
        }
    // LAG: the whole stream on the member the job hashes to (railgated
    // computes the same); rail policy: stripe over every rail not excluded.
    s.tr.clear();
    const bool lag = s.ack.policy == wire::rail_policy::lag;
    if (lag) {
        s.tr.push_back(wire::lag_flow_member(s.ack.hash, o_.job_id, o_.job_token, o_.rank, s.ack.n_rails));
    } else {
        for (unsigned r = 0; r < s.ack.n_rails; ++r)
            if (!(s.excluded >> r & 1)) s.tr.push_back(r);
    }
    s.rails = static_cast<unsigned>(s.tr.size());
    s.pool = s.ack.pool_size;
    s.chunk_elems = s.ack.chunk_bytes / static_cast<std::uint32_t>(wire::dtype_size(o_.dt));
    s.rto_cap_ns = quarter_stall_ns(s.ack);
    if (s.pool == 0 || s.chunk_elems == 0 || s.rails == 0) {
        s.why = failure::refused;
        leave();
        return "JOIN_ACK with pool 0, chunk 0 or no rail to stripe over";
    }
    std::vector<unsigned> others;
    for (unsigned r = 0; r < s.ack.n_rails; ++r)
        if (r != first && !(s.excluded >> r & 1)) others.push_back(r);
    // The other rails run the job as the first does: its chunk and policy.
    msg.h.aux = wire::shape_word(s.ack.chunk_bytes, lag, s.ack.n_rails);
    if (e = await(others, true); !e.empty()) {
        // Refused part-way: what was joined is left, so nothing stays behind;
        // a job whose rails disagree on its shape is ended for every rank.
        // (Only that one: a job that ended while this rank joined it is
        // left, or this rank's abort would end the next one its peers join,
        // and theirs the one after.)
        if (e == "\x01") e = "railgated's rails disagree on the rails job " + std::to_string(o_.job_id) + " stripes around";
        // And so is what a JOIN not yet answered made (its JOIN_ACK late,
        // or lost, or the JOIN itself late), named by the JOIN's nonce:
        // left behind, it held the rank, and the rank's next process was
        // refused as a second claim on it (rank_claimed) for 30 s.
        for (unsigned r : others)
            if (std::find(s.joined_on.begin(), s.joined_on.end(), r) == s.joined_on.end()) {
                s.joined_on.push_back(r);
                s.inst[r] = static_cast<std::uint32_t>(s.nonce);
            }
        if (misshapen) abort(e);
        else leave();
        return e;
    }
    merge_rtt(); // the last job's round trips stay in chunk_rtt()
    s.run = std::vector<state::rail_run>(s.rails);
    for (auto& r : s.run) {
        r.slots.assign(s.pool, {});
        r.asks.reserve(s.pool);
        r.cw = qos::delay_window(o_.cc);
    }
    return "";
}

// Tells railgated this worker's chunk round trips (its histogram's
// non-empty buckets), on the first rail its data used. Best effort: a lost
// report only leaves railctl latency --worker without it.
void worker::report_rtt() {
    merge_rtt();
    const stats::histogram& rtt = s_->rtt;
    if (rtt.count() == 0 || s_->tr.empty()) return;
    std::vector<std::uint8_t> body(wire::rtt_entries_per_msg * wire::rtt_entry_bytes);
    wire::header h = control_header(o_, wire::msg_type::rtt_report);
    unsigned n = 0;
    auto flush = [&] {
        if (!n) return;
        h.count = static_cast<std::uint16_t>(n);
        const tx_msg m{h, body.data(), static_cast<std::uint32_t>(n * wire::rtt_entry_bytes)};
        t_.send(s_->tr[0], &m, 1);
        n = 0;
    };
    for (std::size_t i = 0; i < stats::histogram::bucket_count; ++i)
        if (std::uint64_t c = rtt.bucket(i))
            while (c) {
                const auto part = static_cast<std::uint32_t>(std::min<std::uint64_t>(c, UINT32_MAX));
                wire::encode_rtt_entry(static_cast<std::uint16_t>(i), part, body.data() + n * wire::rtt_entry_bytes);
                c -= part;
                if (++n == wire::rtt_entries_per_msg) flush();
            }
    flush();
}

void worker::leave() {
    state& s = *s_;
    if (s.joined_on.empty()) return;
    if (s.joined) report_rtt();
    const std::vector<unsigned> rails = s.joined_on;
    std::vector<bool> acked(rails.size(), false);
    // A LEAVE unanswered for the slowest of its rails' retransmit timeout,
    // at least 10 ms (a LEAVE_ACK late behind a burst of results draws no
    // second LEAVE), is sent again, the wait doubling up to 100 ms, for
    // 500 ms in all: railgated acknowledges a repeated LEAVE, so a lost
    // LEAVE_ACK costs about that timeout, not the whole wait. A reliable
    // transport loses nothing: it waits 100 ms at a time, for a railgated
    // that went away.
    constexpr std::uint64_t most = 100'000'000;
    std::uint64_t wait = t_.reliable() ? most : 0;
    for (unsigned r : rails)
        if (r < s.run.size())
            wait = std::max(wait, rail_rto(s.run[r].srtt_ns, s.run[r].rttvar_ns,
                                           std::max({ns(o_.rto), ns(t_.min_rto()), std::uint64_t{10'000'000}}), most));
    if (!wait) wait = 20'000'000; // left before its first operation

    const auto give_up = clock::now() + std::chrono::milliseconds(500);
    for (; clock::now() < give_up && std::find(acked.begin(), acked.end(), false) != acked.end();
         wait = std::min(2 * wait, most)) {
        for (std::size_t i = 0; i < rails.size(); ++i)
            if (!acked[i]) {
                const tx_msg msg{control_header(o_, wire::msg_type::leave, s.inst[rails[i]]), nullptr, 0};
                t_.send(rails[i], &msg, 1);
            }
        const auto until = std::min(give_up, clock::now() + std::chrono::nanoseconds(wait));
        while (clock::now() < until && std::find(acked.begin(), acked.end(), false) != acked.end()) {
            for (std::size_t i = 0; i < rails.size(); ++i) {
                const unsigned n = t_.recv(rails[i], s.rx.data(), rx_batch);
                for (unsigned k = 0; k < n; ++k)
                    if (s.rx[k].h.type == wire::msg_type::leave_ack && s.rx[k].h.job_id == o_.job_id &&
                        wire::token_equal(s.rx[k].h.job_token, o_.job_token) && s.rx[k].intact_without_payload())
                        acked[i] = true;
            }
            std::this_thread::yield();
        }
    }
    s.joined = false;
    s.joined_on.clear();
}

void worker::abort(const std::string& why, wire::error_code code, std::uint64_t detail) {
    state& s = *s_;
    if (s.joined_on.empty()) return;
    const std::string t = why.substr(0, wire::max_error_text);
    // Twice: an abort is not acknowledged, and a lost one costs the others
    // the stall time.
    for (int i = 0; i < 2; ++i)
        for (unsigned r : s.joined_on) {
            wire::header h = control_header(o_, wire::msg_type::error, s.inst[r]);
            h.aux = static_cast<std::uint32_t>(code);
            h.offset = detail;
            const tx_msg msg{h, t.data(), static_cast<std::uint32_t>(t.size())};
            t_.send(r, &msg, 1);
        }
    s.joined = false;
    s.joined_on.clear();
}

void worker::start(void* data, std::size_t count, wire::dtype dt) {
    state& s = *s_;
    clear_failure(s);
    s.active = false;
    if (!s.joined) {
        s.err = "not joined";
        s.why = failure::usage;
        return;
    }
    if (dt != o_.dt) {
        s.err = "dtype " + std::string(wire::dtype_name(dt)) + " differs from the job's " +
                std::string(wire::dtype_name(o_.dt));
        s.why = failure::usage;
        return;
    }
    if (count > o_.max_count) {
        s.err = "count " + std::to_string(count) + " above the job's max_count " + std::to_string(o_.max_count);
        s.why = failure::usage;
        return;
    }
    s.data = static_cast<std::uint8_t*>(data);
    s.count = count;
    s.dt = dt;
    s.esize = wire::dtype_size(dt);
    const std::uint64_t chunks = (count + s.chunk_elems - 1) / s.chunk_elems;
    // Untimed (no per-chunk RTT over a reliable transport): no clock read
    // on the latency path; the op timeout is armed at the first scan.
    const std::uint64_t now = s.coarse ? 0 : now_ns();
    s.active = true;
    const auto t0 = o_.pace_bps ? clock::now() : clock::time_point{};
    for (unsigned r = 0; r < s.rails; ++r) {
        state::rail_run& rr = s.run[r];
        rr.n_chunks = chunks > r ? (chunks - r + s.rails - 1) / s.rails : 0;
        rr.done = rr.made = rr.owed = rr.lo = rr.rack_ns = 0;
        rr.probing = state::rail_run::probe::none;
        rr.tlp_ns = 0;
        rr.tlp_slot = s.pool;
        rr.tlp_ponged = false;
        rr.delivered_ns = now;
        rr.helds_delivered = static_cast<std::uint16_t>(rr.helds);
        rr.held_ns = 0;
        rr.holds = 0;
        rr.pending.clear();
        clear_failure(rr);
        rr.last_progress_ns = rr.last_scan_ns = now;
        rr.heard = false;
        rr.heard_ns.store(now, std::memory_order_relaxed);
        rr.ping_ns = now;
        rr.resuming = rr.silent = false;
        for (auto& sl : rr.slots) sl.busy = false;
        // The window goes on from the job's last operation on this rail.
        rr.cc = o_.congestion_control && !t_.reliable();
        if (rr.cc) rr.cw.start(s.pool, now, true);
        // A pool's worth of burst: the first window leaves at once.
        if (o_.pace_bps) rr.pacer.set(o_.pace_bps, std::max<std::uint64_t>(o_.pace_burst_bytes, 16 * 1024), t0);
    }
    s.failed = false;
    for (unsigned r = 0; r < s.rails; ++r) {
        state::rail_run& rr = s.run[r];
        const std::uint64_t window = rr.cc ? rr.cw.window() : s.pool;
        for (; rr.made < std::min<std::uint64_t>(window, rr.n_chunks); ++rr.made)
            rr.pending.push_back(s.contrib(o_, r, rr.made, 0, now));
    }
    if (chunks == 0) {
        s.active = false;
        ++s.ops;
    }
    progress();
}

// Sends what rail r has pending, as far as its pacer lets it.
void worker::send_pending(unsigned r) {
    state::rail_run& rr = s_->run[r];
    std::size_t n = rr.pending.size();
    std::uint64_t t = 0; // paced and timed: when these leave
    if (rr.pacer.shaped()) {
        const auto now = clock::now();
        if (rr.slots[rr.pending[0].h.slot].sent_ns) t = now_ns();
        n = 0;
        while (n < rr.pending.size()) {
            const std::uint32_t bytes = wire_bytes(rr.pending[n]);
            if (!rr.pacer.conforms(bytes, now)) break;
            rr.pacer.consume(bytes);
            ++n;
        }
        if (n == 0) return;
    }
    const unsigned sent = t_.send(s_->tr[r], rr.pending.data(), static_cast<unsigned>(n));
    // Round trips and timeouts count from when a chunk left, not from when
    // it was queued behind the pacer or behind the copies of a burst (the
    // transport copies a burst's chunks, then sends them together: an
    // operation's first window). A chunk sent alone leaves as it is made
    // and keeps the time contrib() gave it (no extra clock read).
    if (!t && sent > 1 && rr.slots[rr.pending[0].h.slot].sent_ns) t = now_ns();
    for (unsigned i = 0; i < sent; ++i) {
        state::slot_state& sl = rr.slots[rr.pending[i].h.slot];
        sl.queued = false;
        if (t) sl.sent_ns = t;
    }
    rr.pending.erase(rr.pending.begin(), rr.pending.begin() + sent);
}

void worker::fail(unsigned r, failure f, std::string text, std::uint32_t down) {
    state::rail_run& rr = s_->run[r];
    rr.err = std::move(text);
    rr.why = f;
    rr.down = down;
    s_->failed = true;
}

// One pass over rail r: its results, its sends, and (every 200 us) its
// retransmits, PINGs and timeouts. True when the rail is done or failed.
bool worker::progress_rail(unsigned r) {
    state& s = *s_;
    state::rail_run& rr = s.run[r];
    // A rail whose chunks are all back still listens, now and then, while
    // the others work: railgated may end the job there, and its PONGs tell
    // a rail that went silent from railgated gone.
    if (rr.done == rr.n_chunks) {
        if (++rr.polls_since_clock < 64) return true;
        rr.polls_since_clock = 0;
    }
    const unsigned n = t_.recv(s.tr[r], rr.rx.data(), rx_batch);
    bool ooo = false;
    // The results of a burst arrived together: one clock read for their
    // round trips (when the first needs it), taken before any is copied
    // out, so that the later ones' do not count this worker's copies.
    std::uint64_t arrived = 0;
    for (unsigned i = 0; i < n; ++i) {
        const rx_msg& m = rr.rx[i];
        // The next result's payload into the cache while this one is
        // handled (railgated wrote it on another core, and the copy out
        // otherwise waits on it line by line: MTU 1500 1.10-1.17x), and the
        // tensor's lines it goes to, for writing (where the tensor outgrows
        // the cache: MTU 1500 64 MiB 1.05-1.09x). Not a jumbo result's: its
        // 2 x 140 lines asked for at once fill the core's line fill buffers,
        // and the thread waits on them there instead of in the copy, which
        // the hardware streams by itself (MTU 9000, 6 rounds alternated:
        // 256 KiB 1.05x, 4 MiB 1.04x, 64 MiB 1.03x without; 4 workers
        // 1.02-1.07x). 4 KiB results still gain from it (MTU 4200 64 MiB:
        // 0.95x without).
        if (i + 1 < n && rr.rx[i + 1].bytes() < state::prefetch_below) {
            const rx_msg& next = rr.rx[i + 1];
            next.prefetch();
            if (next.h.offset < s.count) {
                const std::uint8_t* d = s.data + next.h.offset * s.esize;
                const std::size_t len = std::min<std::size_t>(next.bytes(), (s.count - next.h.offset) * s.esize);
                for (std::size_t b = 0; b < len; b += 64) __builtin_prefetch(d + b, 1, 3);
            }
        }
        if (m.h.job_id != o_.job_id || !wire::token_equal(m.h.job_token, o_.job_token)) continue;
        // A PONG whose checksum fails (a DPDK port leaves it to us) is as
        // if lost, as a HELD or a LEAVE_ACK is.
        if (m.h.type == wire::msg_type::pong && m.h.gen == s.inst[s.tr[r]] && m.intact_without_payload()) {
            rr.heard = true;
            ++rr.pongs;
            // The timeout's PING is answered PONG, its chunk still out (a
            // PONG naming it: the chunk is not in railgated's slot): the next
            // pass sends the chunk as the probe. The PING sent with a probe
            // is answered: railgated is there, and the chunks still out are
            // lost; the next pass sends them. A PONG naming another chunk
            // the timeout asked about: it is lost, and goes with the probe
            // (or, the probe answered otherwise, with the next pass).
            // A PONG naming the tail probe's chunk: it goes with the next scan.
            using enum state::rail_run::probe;
            const auto names = [&](std::size_t slot) {
                if (slot >= s.pool) return false;
                const state::slot_state& sl = rr.slots[slot];
                return m.h.count && m.h.slot == slot && sl.busy && m.h.offset == s.chunk_offset(r, sl.k);
            };
            bool scan = false; // the timers looked at on the next pass
            if (rr.probing == none && names(rr.tlp_slot)) {
                rr.tlp_ponged = true;
                rr.tlp_slot = s.pool;
                rr.polls_since_clock = 32;
            } else if (names(m.h.slot) && !rr.slots[m.h.slot].queued && rr.slots[m.h.slot].sent_ns < rr.asked_ns) {
                rr.slots[m.h.slot].said = state::slot_state::told::missing;
                scan = true;
            }
            if ((rr.probing == pinged && names(rr.probe_slot)) || rr.probing == out) {
                rr.probing = rr.probing == pinged ? ponged : answered;
                scan = true;
            }
            if (scan) {
                rr.last_scan_ns = 0;
                rr.polls_since_clock = 32;
            }
        }
        if (m.h.type == wire::msg_type::error) {
            // Only this job's (its incarnation on the rail, or the
            // transport's own): a late ERROR of a job left behind is not.
            if (m.h.gen != s.inst[s.tr[r]] && m.h.gen != transport_error_gen) continue;
            std::string why;
            if (!text_of(m, why)) continue;
            rr.heard = true;
            const auto code = static_cast<wire::error_code>(m.h.aux);
            const std::uint32_t down =
                code == wire::error_code::rail_down && m.h.offset <= UINT32_MAX ? static_cast<std::uint32_t>(m.h.offset) : 0;
            std::string text = "railgated ended the job on rail " + std::to_string(s.tr[r]) + ": " + why;
            // Blamed itself (railgated heard nothing from this rank on a
            // slot the others had filled), it says what it held on the
            // rail then: never made, made and not sent, or sent and not
            // delivered are three different failures.
            if (code == wire::error_code::rank_failed && m.h.offset == o_.rank) {
                const std::string held = t_.describe(s.tr[r]);
                text += " [this rank on the rail then: " + stalled_text(r) + (held.empty() ? "" : "; " + held) + "]";
            }
            fail(r, failure_of(code), text, down);
            rr.detail = m.h.offset;
            return true;
        }
        if (m.h.type == wire::msg_type::held) {
            held(r, m);
            continue;
        }
        if (m.h.type != wire::msg_type::result || m.h.slot >= s.pool || rr.done == rr.n_chunks) continue;
        state::slot_state& sl = rr.slots[m.h.slot];
        const std::uint64_t i_global = sl.k * s.rails + r;
        const std::uint64_t off = i_global * s.chunk_elems;
        // Stale or duplicate results (after a retransmit) are ignored; a
        // second result for a chunk RACK sent again says it was not lost.
        if (!sl.busy || m.h.gen != sl.gen || m.h.offset != off || m.h.dt != s.dt ||
            m.bytes() != std::size_t{m.h.count} * s.esize ||
            m.h.count != std::min<std::uint64_t>(s.chunk_elems, s.count - off)) {
            state::rack_told(rr, sl, m);
            continue;
        }
        // A corrupted result is as good as lost: the chunk stays in flight
        // (RACK or its timeout bring it again) and what was copied is
        // overwritten then; railgated keeps the result until it comes.
        if (sl.sent_ns && !arrived) arrived = now_ns();
        if (!m.copy_to(s.data + off * s.esize)) continue;
        rr.heard = true;
        rr.holds = 0;
        if (rr.probing == state::rail_run::probe::out) rr.probing = state::rail_run::probe::answered;
        // Sent again by railgated, asked for it (a PING naming the chunk,
        // or a RETRANSMIT): its round trip includes a timeout (Karn). The
        // PING's answer was a lost result: railgated is there, and the
        // chunks whose timers run out are lost too and go together, as
        // after a probe's answer.
        const bool resent = m.h.flags & wire::flag_retransmit;
        const bool pinged = rr.asking();
        if (resent && pinged) rr.probing = state::rail_run::probe::answered;
        const std::uint64_t sent = sl.sent_ns;
        const std::uint64_t t = sl.sent_ns ? arrived : 0;
        if (t) {
            rr.delivered_ns = t;
            rr.helds_delivered = static_cast<std::uint16_t>(rr.helds);
            const std::uint64_t sample = t - sl.sent_ns;
            rr.rtt.record(sample);
            if (sl.retries == 0 && !resent) {
                rr.backoff = 0;
                if (pinged) ++rr.quiet_timeouts;
                rr.probing = state::rail_run::probe::none;
                // railgated's echo: how long this rank's contribution waited
                // there for the other ranks' (not a queue: taken off), the
                // depth of its queue ahead of the result, and whether the
                // contribution came marked CE.
                const std::uint64_t waited = std::uint64_t{m.h.aux & wire::result_wait_us_mask} * 1000;
                const std::uint64_t own = sample - std::min(sample, waited);
                rr.rtt_own.record(own);
                if (rr.cc) rr.cw.on_sample(own, t, m.ce || (m.h.aux & wire::result_ce), wire::result_depth(m.h.aux));
                if (!rr.srtt_ns) {
                    rr.srtt_ns = sample;
                    rr.rttvar_ns = sample / 2;
                } else {
                    const std::uint64_t dev = sample > rr.srtt_ns ? sample - rr.srtt_ns : rr.srtt_ns - sample;
                    rr.rttvar_ns = (3 * rr.rttvar_ns + dev) / 4;
                    rr.srtt_ns = (7 * rr.srtt_ns + sample) / 8;
                }
            }
        }
        rr.last_progress_ns = t; // 0: progress, timed from the next scan
        ++rr.results;
        sl.busy = false;
        ++sl.gen;
        ++rr.done;
        const std::uint64_t k = sl.k;
        if (rr.cc) {
            // In order, while the window has room. A chunk whose slot still
            // holds the chunk one pool back (lost, on its way again) is owed
            // to that slot and goes when it comes back, here: the chunks
            // after it go on through the other slots (stopping at it held the
            // whole rail behind one loss: 5% loss ran 25x slower than
            // without the window).
            if (k + s.pool < rr.made) {
                --rr.owed;
                rr.pending.push_back(s.contrib(o_, r, k + s.pool, 0, t));
                rr.lo = std::min(rr.lo, k + s.pool); // in flight below `lo` again: RACK's scan sees it
            }
            const std::uint64_t window = rr.cw.window();
            for (; rr.made < rr.n_chunks && rr.made - rr.done - rr.owed < window; ++rr.made) {
                if (rr.slots[rr.made % s.pool].busy)
                    ++rr.owed;
                else
                    rr.pending.push_back(s.contrib(o_, r, rr.made, 0, t));
            }
        } else if (const std::uint64_t next = k + s.pool; next < rr.n_chunks) {
            // Same slot: (k + pool) % pool == k % pool.
            rr.pending.push_back(s.contrib(o_, r, next, 0, t));
            rr.made = std::max(rr.made, next + 1);
        }
        // Out of order: an older chunk is still in flight (RACK below).
        while (rr.lo < rr.made && !s.in_flight(rr, rr.lo)) ++rr.lo;
        if (t && rr.lo < k) {
            rr.rack_ns = std::max(rr.rack_ns, sent);
            ooo = true;
        }
    }
    // Loss (RACK, RFC 8985): a chunk in flight that left well before a
    // chunk whose result is back was lost on its way, or its result was:
    // sent again now, about a round trip after it left, instead of after a
    // timeout. Its send time moves on, so it is judged again only against
    // chunks sent after its retransmit. Only scanned when results came out
    // of order (never without loss or reordering: railgated answers a
    // rail's chunks in the order it completes them).
    if (ooo && !t_.reliable()) {
        const std::uint64_t now = now_ns();
        // A quarter of the round trip (at least 20 us), times the rail's
        // multiplier, at most the round trip (RFC 8985): wider, a real loss
        // would wait for the tail probe or the timeout (on a lossy path that
        // also reorders, 5% of each, a window of up to 250 us halved busbw).
        const std::uint64_t base = std::max<std::uint64_t>(rr.srtt_ns / 4, 20'000);
        const std::uint64_t reo = std::min(base * rr.reo_mult, std::max(base, rr.srtt_ns));
        bool lost = false;
        for (std::size_t si = 0; si < s.pool; ++si) {
            state::slot_state& sl = rr.slots[si];
            if (!sl.busy || sl.queued || sl.sent_ns + reo >= rr.rack_ns) continue;
            const tx_msg c = s.contrib(o_, r, sl.k, wire::flag_retransmit, now);
            sl.rack_untold = true;
            sl.rack_gen = static_cast<std::uint16_t>(c.h.gen);
            ++rr.retransmits;
            rr.pacer.consume(wire_bytes(c));
            t_.send(s.tr[r], &c, 1);
            lost = true;
        }
        if (lost) {
            if (rr.reo_persist && --rr.reo_persist == 0) rr.reo_mult = 1;
            if (rr.cc) rr.cw.on_loss(now);
        }
    }
    if (!rr.pending.empty()) send_pending(r);
    if (rr.done == rr.n_chunks) {
        scan_rail(r, scan_now());
        return true;
    }
    // The clock is read every 32 polls (a clock read is a system call where
    // the TSC is not usable, as in emulated guests).
    if (++rr.polls_since_clock < 32) return false;
    rr.polls_since_clock = 0;
    return scan_rail(r, scan_now());
}

// The tail loss probe (RACK-TLP, RFC 8985): once every chunk of the
// operation has left, a loss among the last ones has no later result to
// reveal it and would wait for its timeout. After two smoothed round trips
// without a result (at least 50 us, and half the transport's timeout
// floor: kernel UDP's covers a scheduler tick) a PING names the newest
// chunk in flight, once per silence; railgated answers it as the chunk's
// RETRANSMIT (HELD, or its kept result, which tells RACK the older ones
// are lost), or with a PONG naming it: not there, and the chunk goes again.
// Not a timeout: no backoff, the window stays.
void worker::tail_probe(unsigned r, std::uint64_t now) {
    state& s = *s_;
    state::rail_run& rr = s.run[r];
    const bool ponged = std::exchange(rr.tlp_ponged, false);
    if (!o_.tail_probes || rr.made != rr.n_chunks || rr.done == rr.n_chunks || !rr.srtt_ns || t_.reliable() ||
        rr.probing != state::rail_run::probe::none || rr.holds)
        return;
    if (ponged) {
        const std::size_t slot = rr.tlp_k % s.pool;
        const state::slot_state& sl = rr.slots[slot];
        if (sl.busy && !sl.queued && sl.k == rr.tlp_k) {
            ++rr.tail_probes;
            resend(r, slot, now);
        }
        return;
    }
    const std::uint64_t heard = rr.heard_ns.load(std::memory_order_relaxed);
    if (rr.tlp_ns >= heard) return; // one probe per silence
    const std::uint64_t pto = std::max({2 * rr.srtt_ns, ns(t_.min_rto()) / 2, std::uint64_t{50'000}});
    if (now - heard < pto) return;
    std::size_t newest = s.pool;
    for (std::size_t si = 0; si < s.pool; ++si) {
        const state::slot_state& sl = rr.slots[si];
        if (sl.busy && !sl.queued && (newest == s.pool || sl.sent_ns > rr.slots[newest].sent_ns)) newest = si;
    }
    if (newest == s.pool || now - rr.slots[newest].sent_ns < pto) return;
    rr.tlp_ns = now;
    rr.tlp_slot = newest;
    rr.tlp_k = rr.slots[newest].k;
    send_ping(r, now, newest);
}

// A chunk sent again (its timeout ran out, or as a tail probe); its round
// trip counts from now.
void worker::resend(unsigned r, std::size_t slot, std::uint64_t now) {
    state& s = *s_;
    state::rail_run& rr = s.run[r];
    const tx_msg c = s.contrib(o_, r, rr.slots[slot].k, wire::flag_retransmit, now);
    ++rr.retransmits;
    rr.pacer.consume(wire_bytes(c));
    t_.send(s.tr[r], &c, 1);
}

// HELD: a chunk rail r sent again is in railgated's slot, which waits for
// another rank's. Taken when it names a chunk in flight (slot, generation
// and offset) and its checksum holds. The rail's timers restart, doubled
// once per round of resends (see rail_run::held_ns), and the probe is
// answered: the PING's PONG then says nothing more. Not the rail heard: a
// rail that only holds stays silent, and its next timeout is a probe again.
void worker::held(unsigned r, const rx_msg& m) {
    state& s = *s_;
    state::rail_run& rr = s.run[r];
    if (m.h.slot >= s.pool || rr.done == rr.n_chunks) return;
    const state::slot_state& sl = rr.slots[m.h.slot];
    if (!sl.busy || sl.queued || m.h.gen != sl.gen || m.h.offset != s.chunk_offset(r, sl.k) ||
        !m.intact_without_payload())
        return;
    ++rr.helds;
    rr.slots[m.h.slot].said = state::slot_state::told::held;
    rr.slots[m.h.slot].held_seq = static_cast<std::uint16_t>(rr.helds);
    // Once per round: the HELDs answering one round's PINGs double once.
    if (!rr.held_ns || rr.held_ns < std::max(rr.timeouts_ns, rr.probe_ns)) rr.holds = std::min(rr.holds + 1, 6u);
    rr.held_ns = now_ns();
    using enum state::rail_run::probe;
    if (rr.asking()) ++rr.quiet_timeouts; // the PING's answer: nothing resent
    if (rr.probing != none && rr.probing != answered) rr.probing = none;
}

// A PING; one naming the chunk in flight in `slot` (< pool) asks railgated
// whether it holds it (PROTOCOL.md, "Loss").
void worker::send_ping(unsigned r, std::uint64_t now, std::size_t slot) {
    const auto one = static_cast<std::uint16_t>(std::min<std::size_t>(slot, s_->pool));
    send_pings(r, now, {&one, 1});
}

// PINGs naming the chunks in flight in `slots` (a slot of pool: a PING
// naming none), handed to the transport 32 at a time: a silence's asks
// cost the kernel-UDP worker one sendmmsg per 32, not a sendto each.
void worker::send_pings(unsigned r, std::uint64_t now, std::span<const std::uint16_t> slots) {
    state& s = *s_;
    state::rail_run& rr = s.run[r];
    rr.ping_ns = now;
    std::array<tx_msg, 32> burst;
    for (std::size_t i = 0; i < slots.size();) {
        unsigned n = 0;
        for (; n < burst.size() && i < slots.size(); ++n, ++i) {
            wire::header h = control_header(o_, wire::msg_type::ping, s.inst[s.tr[r]]);
            if (const std::size_t slot = slots[i]; slot < s.pool) {
                const state::slot_state& sl = rr.slots[slot];
                h.slot = static_cast<std::uint16_t>(slot);
                h.offset = s.chunk_offset(r, sl.k);
                h.count = static_cast<std::uint32_t>(std::min<std::uint64_t>(s.chunk_elems, s.count - h.offset));
                h.aux = sl.gen;
            }
            burst[n] = tx_msg{h, nullptr, 0};
        }
        // What the transport cannot take now is lost, as any PING may be.
        for (unsigned sent = 0, k = 1; sent < n && k; sent += k) k = t_.send(s.tr[r], burst.data() + sent, n - sent);
    }
}

std::uint64_t worker::scan_now() const noexcept { return s_->coarse ? stats::coarse_now_ns() : now_ns(); }

// Where rail r's operation stands when it made no progress for the
// operation timeout: what a user (or a bug report) needs to tell a peer
// that never sent from a chunk railgated refuses, or a result that never
// comes: the oldest chunk still out, how often it went, and what railgated
// said about it.
std::string worker::stalled_text(unsigned r) const {
    const state& s = *s_;
    const state::rail_run& rr = s.run[r];
    std::size_t oldest = s.pool;
    for (std::size_t si = 0; si < s.pool; ++si) {
        const state::slot_state& sl = rr.slots[si];
        if (sl.busy && (oldest == s.pool || sl.k < rr.slots[oldest].k)) oldest = si;
    }
    std::string t = std::to_string(rr.done) + " of " + std::to_string(rr.n_chunks) + " chunks back, " +
                    std::to_string(rr.made) + " made, " + std::to_string(rr.owed) + " owed, " +
                    std::to_string(rr.pending.size()) + " queued";
    if (rr.cc) t += ", window " + std::to_string(rr.cw.window());
    if (oldest < s.pool) {
        const state::slot_state& sl = rr.slots[oldest];
        t += "; oldest out: chunk " + std::to_string(sl.k) + " (slot " + std::to_string(oldest) + ", generation " +
             std::to_string(sl.gen) + ", offset " + std::to_string(s.chunk_offset(r, sl.k)) + "), sent again " +
             std::to_string(sl.retries) + " times" + (sl.held() ? ", HELD by railgated" : "") +
             (sl.said == state::slot_state::told::missing ? ", not in railgated (PONG)" : "") +
             (sl.queued ? ", queued" : "");
    }
    static constexpr const char* probes[] = {"none", "pinged", "ponged", "out", "answered"};
    t += "; rail: " + std::to_string(rr.retransmits) + " resent, " + std::to_string(rr.timeouts) + " timeouts, " +
         std::to_string(rr.helds) + " HELD, " + std::to_string(rr.pongs) + " PONGs, probe " +
         probes[static_cast<unsigned>(rr.probing)];
    return t;
}

// Rail r's timers: retransmits of chunks whose timeout ran out, PINGs when
// railgated has been silent, and the verdicts on a silent rail (down),
// silent railgated (gone) and an operation without progress (timeout).
bool worker::scan_rail(unsigned r, std::uint64_t now) {
    state& s = *s_;
    state::rail_run& rr = s.run[r];
    if (!rr.last_progress_ns) rr.last_progress_ns = rr.last_scan_ns = now;
    if (!rr.heard_ns.load(std::memory_order_relaxed)) rr.heard_ns.store(now, std::memory_order_relaxed);
    if (rr.heard) {
        rr.heard = false;
        rr.resuming = false;
        rr.heard_ns.store(now, std::memory_order_relaxed);
    }
    tail_probe(r, now);
    if (now - rr.last_scan_ns < scan_every_ns) return false;
    rr.last_scan_ns = now;
    const bool done = rr.done == rr.n_chunks;
    // The timeout: the configured floor (or the transport's, if longer:
    // kernel UDP's covers a scheduler tick) or the rail's smoothed round
    // trip plus four deviations, doubled for each retransmit of the same chunk,
    // and never near railgated's stall time (it would end the job first).
    // Before the first round trip is measured: 20 ms (a first window may
    // queue behind a slow rail for a while).
    const std::uint64_t rto =
        rail_rto(rr.srtt_ns, rr.rttvar_ns, std::max(ns(o_.rto), ns(t_.min_rto())), s.rto_cap_ns);
    // A chunk's timer runs from when it left, or from the rail's last
    // result or HELD; an unanswered probe's alone runs.
    const std::uint64_t restarted = std::max(rr.delivered_ns, rr.held_ns);
    using enum state::rail_run::probe;
    const unsigned doubled = std::max(rr.backoff, rr.holds);
    const auto expired = [&](std::size_t si) {
        const state::slot_state& sl = rr.slots[si];
        if (!sl.busy || sl.queued || (rr.probing != none && rr.probing != answered && si != rr.probe_slot))
            return false;
        const unsigned doublings = std::min(std::max(sl.retries, doubled), 6u);
        return now - std::max(sl.sent_ns, restarted) >= std::min(s.rto_cap_ns, rto << doublings);
    };
    // The chunks railgated answered it does not have (a PONG naming them,
    // told::missing) are lost and go now, a round of timeouts; while the
    // probe's answer is awaited they wait for it, and go with the probe.
    const auto resend_missing = [&] {
        bool any = false;
        for (std::size_t si = 0; si < s.pool; ++si) {
            const state::slot_state& sl = rr.slots[si];
            if (sl.busy && !sl.queued && sl.said == state::slot_state::told::missing) {
                ++rr.timeouts;
                resend(r, si, now);
                any = true;
            }
        }
        return any;
    };
    const bool missing_went =
        !done && !t_.reliable() && (rr.probing == none || rr.probing == answered) && resend_missing();
    // The oldest chunk whose timer ran out (while a probe is out, only its
    // chunk's runs), and the chunk a silence asks about: the oldest of
    // those railgated has not answered HELD. Asking again only about one it
    // holds (its slot waiting for another rank's chunk) would leave a lost
    // chunk of this rank behind it unasked, which the other rank's slot may
    // wait for in turn: each rank's oldest held, for ever (CI, a0e541c: two
    // embedded workers under 5% loss, 2 runs of 80 here). When all were
    // answered HELD, the one railgated confirmed longest ago: a chunk whose
    // result was lost, or one railgated let go (a partner's copy failed its
    // checksum in the reduce, which had written into this rank's), is
    // confirmed no more, and each ask confirms the others again. Asking
    // always about the oldest (until 2026-11-30) found a lost result at
    // once but never a chunk let go: its slot waited for this rank while
    // the oldest's waited for the others (live_changes.sh seed 407: rank
    // 0 asked about one slot for 60 s, answered HELD each time).
    std::size_t oldest = s.pool, ask = s.pool;
    const auto before = [&](std::size_t si, std::size_t than) {
        return than == s.pool || rr.slots[si].sent_ns < rr.slots[than].sent_ns;
    };
    for (std::size_t si = 0; si < s.pool && !t_.reliable() && !done; ++si)
        if (expired(si)) {
            if (before(si, oldest)) oldest = si;
            if (!rr.slots[si].held() && before(si, ask)) ask = si;
        }
    if (ask == s.pool && oldest != s.pool && rr.probing == none) {
        std::uint16_t stalest = 0;
        for (std::size_t si = 0; si < s.pool; ++si)
            if (expired(si)) {
                const auto age = static_cast<std::uint16_t>(static_cast<std::uint16_t>(rr.helds) - rr.slots[si].held_seq);
                if (ask == s.pool || age > stalest) ask = si, stalest = age;
            }
    }
    // The rail stalls (a late rank, a paused railgated, a window lost
    // whole): a PING naming the probe's chunk first, and one naming each
    // other chunk whose timer ran out, then, once railgated answers that
    // it does not have the probe's chunk, the chunk as the probe, and those
    // it named missing with it (see rail_run::probing). Every expired chunk
    // is asked about in one round trip, not one per backed-off round: a
    // lost result or chunk behind others is found at once. A kept result
    // that still waits in a shaped rail's queue is answered HELD, not sent
    // twice (railgated up to 0ee7b5b sent it twice: the worker then
    // asked again only about the chunks answered HELD).
    // A chunk answered HELD is asked about again (beyond the probe's turn)
    // only once results came after its HELD: its slot then most likely
    // completed (the late rank came) and its result was lost, or railgated
    // let its copy go. While nothing comes, a late rank is still late, and
    // asking again about every held chunk each round cost a header each
    // way per chunk per round (faults.sh 3c, rank 1 paused 0.3 s: 1282
    // HELD answers, against 274 asking again only after results; the
    // first round asks about each chunk once).
    const auto ask_again = [&](std::size_t si) {
        const state::slot_state& sl = rr.slots[si];
        return !sl.held() || static_cast<std::int16_t>(static_cast<std::uint16_t>(rr.helds_delivered - sl.held_seq)) >= 0;
    };
    const auto ping_probe = [&](std::size_t chunk) {
        rr.probe_ns = now;
        if (chunk != s.pool) rr.asked_ns = now;
        send_ping(r, now, chunk);
    };
    bool timed_out = false;
    if (rr.probing == none && ask != s.pool) {
        ping_probe(ask);
        rr.asks.clear();
        for (std::size_t si = 0; si < s.pool; ++si)
            if (si != ask && expired(si) && ask_again(si)) rr.asks.push_back(static_cast<std::uint16_t>(si));
        if (!rr.asks.empty()) send_pings(r, now, rr.asks);
        rr.probing = pinged;
        rr.probe_slot = ask;
        rr.probe_pings = 0;
    } else if (rr.probing == pinged) {
        if (done || oldest == s.pool) {
            rr.probing = none; // its timer restarted (a result, a HELD), or it went back to the queue
        } else if (now - rr.probe_ns >=
                   std::min(s.rto_cap_ns, rto << std::min(std::max(rr.probe_pings + 1, doubled), 6u))) {
            ++rr.probe_pings;
            ping_probe(oldest);
        }
    } else if (rr.probing == ponged) {
        if (done || oldest == s.pool) {
            rr.probing = none;
        } else {
            rr.probing = out;
            rr.probe_slot = oldest;
            rr.probe_unended = true;
            ++rr.timeouts;
            resend(r, oldest, now);
            // The others named missing go with it: a round of timeouts,
            // the one that ends the probe.
            timed_out = resend_missing();
            ping_probe(s.pool); // a plain PING: its PONG says the others still out are lost
        }
    } else if (oldest != s.pool) {
        for (std::size_t si = 0; si < s.pool; ++si)
            if (expired(si)) {
                ++rr.timeouts;
                resend(r, si, now);
            }
        timed_out = true;
    }
    timed_out |= missing_went;
    // A round of timeouts (a probe is not one: a pause is not congestion)
    // backs the rail off and shrinks its window. For the window, timeouts
    // are in a row only across a silence: the rail said nothing since the
    // last round, or it is the backed-off round that ends a probe (railgated
    // comes back from a pause to a backlog). A rail that answered since
    // the last round delivers, and its timeouts are chunks lost one by one
    // (at 20% loss each way the window otherwise sat at one chunk, its
    // losses all timeouts). Only the first round after the probe's answer
    // ends it: every round comes after a probe, and counting all of them
    // (as 03c6ca1 to f28a5ff did) made every third round a collapse of the
    // window, on a rail that delivered in between.
    if (timed_out) {
        const bool ends_probe = (rr.probing == state::rail_run::probe::answered || rr.probing == out) &&
                                std::exchange(rr.probe_unended, false);
        const bool silence = (ends_probe && rr.backoff > 0) ||
                             rr.heard_ns.load(std::memory_order_relaxed) <= rr.timeouts_ns;
        rr.timeouts_ns = now;
        if (rr.cc) rr.cw.on_loss(now, silence ? rr.backoff : 0);
        rr.backoff = std::min(rr.backoff + 1, 6u);
    }
    // Liveness: railgated answers a PING even while the job waits for a
    // peer, so silence means the rail (or railgated) is gone.
    // A rail asked again after railgated fell silent (resume()) has until
    // the join timeout, as a re-join would.
    const std::uint64_t peer = ns(o_.peer_timeout);
    const std::uint64_t timeout = rr.resuming ? std::max(peer, ns(o_.join_timeout)) : peer;
    const std::uint64_t silent = now - rr.heard_ns.load(std::memory_order_relaxed);
    // Under heavy loss a PING or its PONG may be lost too: past half the
    // timeout the rail is asked four times as often (a rail is declared
    // down only after some 10 unanswered PINGs).
    if (silent >= peer / 8 && now - rr.ping_ns >= (silent >= peer / 2 ? peer / 32 : peer / 8))
        send_ping(r, now, s.pool);
    if (done) return false; // it is the others' silence that counts now
    if (timeout && silent >= timeout) {
        // Another rail heard well within the timeout (PONGs come every
        // eighth of it): only this rail is gone. Every rail about as silent
        // as this one: railgated is.
        bool others = false;
        for (unsigned q = 0; q < s.rails; ++q)
            others |= q != r && now - std::min(now, s.run[q].heard_ns.load(std::memory_order_relaxed)) < timeout / 2;
        const std::string ms = std::to_string(silent / 1'000'000);
        if (others) {
            fail(r, failure::rail_down,
                 "rail " + std::to_string(s.tr[r]) + " (" + net::format_ipv4(s.ack.rails[s.tr[r]].ip) +
                     ") stopped answering for " + ms + " ms while the other rails answer",
                 1u << s.tr[r]);
        } else {
            rr.silent = true;
            fail(r, failure::daemon_gone, "railgated stopped answering on every rail for " + ms + " ms (rail " +
                                              std::to_string(s.tr[r]) + ": " + net::format_ipv4(s.ack.rails[s.tr[r]].ip) +
                                              ")");
        }
        return true;
    }
    if (now - rr.last_progress_ns > ns(o_.op_timeout)) {
        fail(r, failure::timeout,
             "allreduce timed out: no result on rail " + std::to_string(s.tr[r]) + " for " +
                 std::to_string(o_.op_timeout.count()) + " ms (" + stalled_text(r) + ")");
        return true;
    }
    return false;
}

// The operation has ended on every rail: its round trips join chunk_rtt()
// and the first rail's error is the operation's. A failure this worker
// found itself (a rail or railgated silent, no progress) ends the job for
// the other ranks too, so that they fail now rather than at the stall time.
void worker::finish() {
    state& s = *s_;
    s.active = false;
    if (!s.failed) ++s.ops;
    s.gone_silent = false;
    for (auto& rr : s.run) {
        if (s.err.empty() && !rr.err.empty()) {
            s.err = rr.err;
            s.why = rr.why;
            s.detail = rr.detail;
            s.gone_silent = rr.silent;
        }
        s.down |= rr.down;
    }
    // A failed operation ends the job everywhere: railgated ended it on one
    // rail (a rank failed, the job expired, a rail went down), or this
    // worker found a rail or railgated silent. Its other rails are told now
    // (an abort carrying the reason), so that the job's entries and buffers
    // go at once there too and the other ranks fail at once.
    // Not when railgated fell silent and the operation may be resumed: a
    // railgated that was only paused still holds the job, and its other
    // ranks (one may have finished and left) need it (see resume()).
    if (s.why != failure::none && s.why != failure::usage && !s.joined_on.empty() && !(s.gone_silent && s.keep_job)) {
        // The operator's abort is passed on as such: a rank that reads the
        // other rails' word first must not take it for a rank's abort, and
        // re-join (wire::relayed_abort).
        const wire::error_code code = s.why == failure::rail_down     ? wire::error_code::rail_down
                                      : s.why == failure::rank_failed ? wire::error_code::rank_failed
                                      : s.why == failure::stopped     ? wire::error_code::operator_abort
                                                                      : wire::error_code::aborted;
        abort(s.err, code, s.why == failure::rail_down ? s.down | s.excluded : s.detail);
    }
}

bool worker::progress() {
    state& s = *s_;
    if (!s.active) return true;
    bool all_done = true;
    for (unsigned r = 0; r < s.rails && !s.failed; ++r) all_done &= progress_rail(r);
    if (!all_done && !s.failed) return false;
    for (auto& rr : s.run) rr.polls_since_clock = 0;
    finish();
    return true;
}

bool worker::step_rail(unsigned r) {
    state& s = *s_;
    if (!s.active || s.failed) return true;
    return progress_rail(r) || s.failed;
}

unsigned worker::op_rails() const noexcept { return s_->active ? s_->rails : 0; }

bool worker::rails_in_parallel() const noexcept { return t_.parallel_rails(); }

void worker::wait(std::chrono::microseconds max) {
    for (auto& rr : s_->run) {
        if (rr.pending.empty()) continue;
        // Sends wait for room (poll on) or for the pacer (sleep until then).
        if (!rr.pacer.shaped()) return;
        const auto w = rr.pacer.wait(wire_bytes(rr.pending.front()), clock::now());
        max = std::min(max, std::chrono::duration_cast<std::chrono::microseconds>(w));
    }
    if (max.count() > 0) t_.wait(max);
}

// One pipeline per rail on the engine's arena (as many threads as it has;
// rails share them round robin beyond that). Each polls its rails until
// they are done, yielding between bursts. (Sleeping in the transport on its
// own rail instead, as complete() does, freed no time for a training
// step's compute and cost 256 KiB allreduces 5-35% on kernel UDP.)
void worker::run_pipelines() {
    state& s = *s_;
    const unsigned threads =
        std::min<unsigned>(s.rails, static_cast<unsigned>(std::max(1, o_.engine->arena_concurrency(o_.engine->arena_of(o_.numa)))));
    o_.engine->run_each(threads, o_.numa, [&](unsigned t) {
        unsigned idle = 0;
        for (;;) {
            bool done = true;
            std::uint64_t before = 0, after = 0;
            for (unsigned r = t; r < s.rails; r += threads) {
                before += s.run[r].results;
                done &= progress_rail(r);
                after += s.run[r].results;
            }
            if (done || s.failed) return;
            if (after != before) idle = 0;
            else if (++idle >= 64) {
                idle = 0;
                std::this_thread::yield();
            }
        }
    });
    finish();
}

bool worker::recoverable(failure f) noexcept {
    return f == failure::rank_failed || f == failure::aborted || f == failure::rail_down ||
           f == failure::daemon_gone || f == failure::expired;
}

std::string worker::recover() {
    state& s = *s_;
    // The job as it was is over for everyone (finish() told railgated).
    if (!s.joined_on.empty()) abort(s.err);
    s.joined = false;
    if (s.why == failure::rail_down) s.excluded |= s.down;
    else if (s.why == failure::daemon_gone) s.excluded = 0; // a new railgated: every rail again
    if (wire::stripe_of(0, std::max(1u, unsigned{s.ack.n_rails}), s.excluded).count == 0) s.excluded = 0;
    // Slot generations start afresh with the new job.
    for (auto& rr : s.run)
        for (auto& sl : rr.slots) sl = {};
    // railgated may take a moment to come back: the transport is made
    // whole again and the JOIN tried until the join timeout.
    const auto until = clock::now() + o_.join_timeout;
    std::string e;
    do {
        e = t_.reconnect();
        if (!e.empty()) s.why = failure::timeout; // railgated not reachable (yet): as a JOIN unanswered
        else e = join_once();
        if (e.empty() || s.why == failure::refused) return e;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } while (clock::now() < until);
    return e;
}

// No JOIN_ACK within the join timeout: railgated is not back yet (a
// restart that takes long: a loaded machine, a slow EAL start). The
// re-join goes on while retries last, each a join timeout more (join()
// and allreduce() alike).
std::string worker::recover_while_retries(unsigned& attempt) {
    std::string e = recover();
    while (!e.empty() && s_->why == failure::timeout && attempt + 1 < o_.retries) {
        ++attempt;
        retrying("re-join: " + e, attempt);
        e = recover();
    }
    return e;
}

void worker::tell(const std::string& what) const {
    if (o_.on_retry) o_.on_retry(what);
}

void worker::retrying(const std::string& failed, unsigned attempt) const {
    tell(failed + "; re-joining (retry " + std::to_string(attempt + 1) + " of " + std::to_string(o_.retries) + ")");
}

void worker::run(void* data, std::size_t count, wire::dtype dt) {
    start(data, count, dt);
    drive();
}

void worker::drive() {
    if (o_.engine && s_->active && t_.parallel_rails()) {
        run_pipelines();
    } else {
        worker* self = this;
        complete({&self, 1});
    }
}

// The operation railgated fell silent in, on every rail past the peer
// timeout, taken up again where it stood (allreduce with retries left):
// a paused railgated (SIGSTOP, a machine that took its core for seconds)
// still holds the job, its slots and the results it kept, and the rank's
// PINGs, sent now, find them; every chunk still out is asked about as after
// a timeout (HELD, the kept result, or a PONG: sent again). The rails have
// until the join timeout to answer. A railgated that restarted answers that
// it has no such job, and the worker re-joins (recover()); one still silent
// fails the operation again. Without this, a pause at an operation's end
// parted the ranks: one had its results and left, the other ended the job
// and re-joined a new one alone, which expired at each retry.
void worker::resume() {
    state& s = *s_;
    clear_failure(s);
    s.gone_silent = false;
    s.failed = false;
    s.active = true;
    const std::uint64_t now = scan_now();
    for (unsigned r = 0; r < s.rails; ++r) {
        state::rail_run& rr = s.run[r];
        clear_failure(rr);
        rr.silent = false;
        rr.resuming = true;
        rr.heard = false;
        rr.heard_ns.store(now, std::memory_order_relaxed);
        rr.last_progress_ns = rr.last_scan_ns = now;
        rr.probing = state::rail_run::probe::none;
        rr.holds = 0;
        send_ping(r, now, s.pool);
    }
    drive();
}

// The re-join was refused because the job is at the operation before this
// worker's: a rank lost that operation's result when railgated restarted
// (every rank but it had it). This worker runs it once more from the input
// it kept, throws the result away and is then joined at its own operation.
std::string worker::replay() {
    state& s = *s_;
    const std::uint64_t op = s.ops;
    s.ops = s.prev_op;
    std::string e = join_once();
    if (e.empty()) {
        std::vector<std::uint8_t> scratch(s.prev);
        run(scratch.data(), scratch.size() / wire::dtype_size(s.prev_dt), s.prev_dt);
        e = s.err;
    }
    if (!e.empty()) {
        s.ops = op;
        return "replaying operation " + std::to_string(s.prev_op) + " for a rank that lost its result: " + e;
    }
    ++s.replays;
    return {};
}

bool worker::can_replay() const noexcept {
    const state& s = *s_;
    return s.refusal == wire::error_code::op_mismatch && s.prev_op + 1 == s.ops && !s.prev.empty() &&
           s.detail == static_cast<std::uint16_t>(s.prev_op);
}

std::string worker::allreduce(void* data, std::size_t count, wire::dtype dt) {
    state& s = *s_;
    const bool keep = o_.retries > 0 && count && s.joined;
    if (keep) {
        // Last operation's input becomes the previous one (no copy).
        if (s.backup_op + 1 == s.ops) {
            std::swap(s.prev, s.backup);
            s.prev_op = s.backup_op;
            s.prev_dt = s.backup_dt;
        } else {
            s.prev_op = ~std::uint64_t{0};
        }
        s.backup.resize(count * wire::dtype_size(dt));
        std::memcpy(s.backup.data(), data, s.backup.size());
        s.backup_op = s.ops;
        s.backup_dt = dt;
    }
    bool resuming = false;
    const std::uint64_t op_no = s.ops; // for on_retry's lines (built only on a failure)
    const auto op = [op_no] { return "operation " + std::to_string(op_no); };
    for (unsigned attempt = 0;; ++attempt) {
        s.keep_job = keep && attempt < o_.retries;
        if (resuming) resume();
        else run(data, count, dt);
        if (s.err.empty() || !s.keep_job || !recoverable(s.why)) {
            if (s.err.empty() && resuming) {
                ++s.resumes;
                tell("railgated answered: " + op() + " went on where it stood");
            }
            s.keep_job = false;
            return s.err;
        }
        // railgated fell silent: first asked again, the job as it was (once
        // per failure; a resume does not use up a retry).
        if (!resuming && s.gone_silent && s.joined) {
            tell(op() + ": " + s.err + "; asking railgated again for the job as it was");
            resuming = true;
            --attempt;
            continue;
        }
        resuming = false;
        s.keep_job = false; // a replay that fails ends its job
        const std::string failed = s.err;
        const failure why = s.why;
        retrying(op() + ": " + failed, attempt);
        std::string e = recover_while_retries(attempt);
        if (!e.empty() && can_replay()) {
            tell(e + "; replaying operation " + std::to_string(s.prev_op) + " for a rank that lost its result");
            e = replay();
        }
        if (!e.empty()) {
            s.err = failed + "; recovering: " + e;
            s.why = why;
            tell("giving up: " + e);
            return s.err;
        }
        ++s.recoveries;
        tell("joined again; running " + op() + " again");
        std::memcpy(data, s.backup.data(), s.backup.size());
    }
}

void complete(std::span<worker* const> ws) {
    // About 100 us of polling at ~1 us a pass; the 1 ms sleep bound keeps
    // the retransmit scan on time.
    constexpr unsigned spin_passes = 64;
    unsigned idle = 0;
    std::uint64_t seen = 0;
    for (;;) {
        bool done = true;
        std::uint64_t results = 0;
        for (worker* w : ws) {
            done &= w->progress();
            results += w->results();
        }
        if (done) return;
        if (results != seen) {
            seen = results;
            idle = 0;
        } else if (++idle >= spin_passes) {
            idle = 0;
            if (ws.size() == 1) ws[0]->wait(std::chrono::microseconds(1000));
            else std::this_thread::yield();
        }
    }
}

shared_rails::shared_rails(std::span<worker* const> ws, std::size_t guest_rails) {
    for (worker* w : ws) {
        if (!w->rails_in_parallel())
            throw std::logic_error("shared_rails: a worker whose transport serves its rails one thread at a time");
        for (unsigned r = 0; r < w->op_rails(); ++r) units_.push_back({w, r});
    }
    first_guest_ = units_.size() - std::min(guest_rails, units_.size());
    left_.store(units_.size(), std::memory_order_relaxed);
}

bool shared_rails::pass(bool guest) noexcept {
    const std::size_t from = guest ? first_guest_ : 0, to = guest ? units_.size() : first_guest_;
    for (std::size_t u = from; u < to; ++u) {
        unit& x = units_[u];
        if (x.done || !x.w->step_rail(x.rail)) continue;
        x.done = true;
        left_.fetch_sub(1, std::memory_order_release); // what the rail did, for complete()'s thread
    }
    return left_.load(std::memory_order_acquire) == 0;
}

void shared_rails::drive(const std::atomic<bool>& guest_left) noexcept {
    for (unsigned spins = 0;;) {
        const bool left = guest_left.load(std::memory_order_acquire);
        bool all = pass(false);
        if (!all && left) all = pass(true);
        if (all && left) return;
        if (++spins % 64 == 0) std::this_thread::yield();
    }
}

void alive_while(std::span<worker* const> ws, const std::function<void()>& work) {
    // The shortest stall time of the workers' jobs (0: not joined, or a
    // railgated without one).
    unsigned stall = 0;
    for (const worker* w : ws)
        if (const unsigned st = w->job_info().stall_ms; st && (!stall || st < stall)) stall = st;
    if (!stall) return work();
    const auto every = std::chrono::milliseconds(std::max(10u, stall / 4));
    std::future<void> done = std::async(std::launch::async, work);
    while (done.wait_for(every) != std::future_status::ready)
        for (worker* w : ws) w->keepalive();
    done.get();
}

} // namespace railgate::client
