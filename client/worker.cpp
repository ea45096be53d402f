#include "client/railgate/worker.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "dataplane/engine/engine.hpp"
#include "dataplane/proto/frame.hpp"
#include "dataplane/proto/parse.hpp"
#include "dataplane/qos/token_bucket.hpp"

namespace railgate::client {
namespace {

using clock = std::chrono::steady_clock;

std::uint64_t ns_of(clock::time_point t) noexcept {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}
std::uint64_t now_ns() noexcept { return ns_of(clock::now()); }

constexpr unsigned rx_batch = 64;

// What a contribution costs the pacer: on the wire with its railgate
// header, UDP/IPv4/Ethernet headers, preamble, FCS and gap.
std::uint32_t wire_bytes(const tx_msg& m) noexcept {
    return m.bytes + static_cast<std::uint32_t>(wire::header_bytes + frame::udp_frame_overhead + 24);
}

} // namespace

void rx_msg::copy_to(void* dst) const noexcept {
    auto* d = static_cast<std::uint8_t*>(dst);
    if (frag_len[0]) std::memcpy(d, frag[0], frag_len[0]);
    if (frag_len[1]) std::memcpy(d + frag_len[0], frag[1], frag_len[1]);
}

struct worker::state {
    struct slot_state {
        std::uint32_t gen = 0;     // persists across operations of the job
        bool busy = false;
        std::uint64_t k = 0;       // rail-local chunk in flight
        std::uint64_t sent_ns = 0;
        unsigned retries = 0;      // retransmits of the chunk in flight (backoff; Karn)
        bool queued = false;       // waiting in `pending` (not sent: no timeout runs)
    };
    // One rail's pipeline: everything progress_rail touches, so that rails
    // can run on threads of their own (worker_options::engine).
    struct rail_run {
        std::vector<slot_state> slots;
        std::uint64_t n_chunks = 0, done = 0;
        std::vector<tx_msg> pending;
        std::vector<rx_msg> rx = std::vector<rx_msg>(rx_batch);
        std::string err;
        std::uint64_t last_progress_ns = 0, last_scan_ns = 0;
        unsigned polls_since_clock = 0;
        stats::histogram rtt;   // merged into state::rtt when an operation ends
        std::uint64_t retransmits = 0, results = 0;
        // Smoothed chunk round trip and its variation (Jacobson/Karels), from
        // chunks that were not retransmitted (Karn): the retransmit timeout
        // follows the queueing a shaped or slow rail adds.
        std::uint64_t srtt_ns = 0, rttvar_ns = 0;
        // Pacing (worker_options::pace_bps): contributions leave no faster.
        qos::token_bucket<clock> pacer;
    };

    wire::join_ack_body ack{};
    bool joined = false;
    unsigned rails = 1;     // rails the data stripes over
    unsigned rail_base = 0; // transport rail of stripe 0 (the LAG member)
    std::uint16_t pool = 0;
    std::uint32_t chunk_elems = 0;
    std::vector<rail_run> run;
    std::vector<rx_msg> rx = std::vector<rx_msg>(rx_batch); // join and leave

    std::uint8_t* data = nullptr;
    std::size_t count = 0;
    wire::dtype dt = wire::dtype::fp32;
    std::size_t esize = 4;
    bool active = false;
    std::atomic<bool> failed{false}; // a rail failed: the others stop
    std::string err;
    stats::histogram rtt;
    // The contribution of rail r's k-th chunk; marks its slot busy.
    tx_msg contrib(const worker_options& o, unsigned r, std::uint64_t k, std::uint8_t flags,
                   std::uint64_t t) noexcept {
        const std::uint64_t off = (k * rails + r) * chunk_elems;
        const auto n = static_cast<std::uint32_t>(std::min<std::uint64_t>(chunk_elems, count - off));
        slot_state& sl = run[r].slots[k % pool];
        sl.busy = true;
        sl.k = k;
        sl.sent_ns = t;
        sl.retries = flags & wire::flag_retransmit ? sl.retries + 1 : 0;
        sl.queued = !(flags & wire::flag_retransmit); // new chunks go through `pending`
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
        return m;
    }
};

namespace {
// A header-only control message (JOIN, LEAVE, abort) of this worker.
wire::header control_header(const worker_options& o, wire::msg_type t) noexcept {
    wire::header h;
    h.type = t;
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
}
worker::~worker() = default;

const std::string& worker::error() const noexcept { return s_->err; }
const wire::join_ack_body& worker::job_info() const noexcept { return s_->ack; }
std::uint32_t worker::chunk_elems() const noexcept { return s_->chunk_elems; }
stats::histogram& worker::chunk_rtt() noexcept { return s_->rtt; }
std::uint64_t worker::retransmits() const noexcept {
    std::uint64_t n = 0;
    for (const auto& r : s_->run) n += r.retransmits;
    return n;
}
std::uint64_t worker::results() const noexcept {
    std::uint64_t n = 0;
    for (const auto& r : s_->run) n += r.results;
    return n;
}

std::string worker::join() {
    if (o_.world == 0 || o_.world > wire::max_world) return "world size must be 1.." + std::to_string(wire::max_world);
    if (o_.rank >= o_.world) return "rank " + std::to_string(o_.rank) + " not below world " + std::to_string(o_.world);
    wire::header h = control_header(o_, wire::msg_type::join);
    wire::join_body b;
    b.max_count = o_.max_count;
    b.pool_size = o_.pool_size;
    std::uint8_t body[wire::join_body_bytes];
    wire::encode_join_body(b, body);
    const tx_msg msg{h, body, wire::join_body_bytes};

    // Rail 0 first (it tells us the rails), then all the others at once.
    std::vector<bool> acked(1, false);
    const auto deadline = clock::now() + o_.join_timeout;
    auto wait_acks = [&]() -> std::string {
        auto next_send = clock::now();
        while (std::find(acked.begin(), acked.end(), false) != acked.end()) {
            if (clock::now() > deadline)
                return "join timed out after " + std::to_string(o_.join_timeout.count()) +
                       " ms: no JOIN_ACK from railgated";
            if (clock::now() >= next_send) {
                for (unsigned r = 0; r < acked.size(); ++r)
                    if (!acked[r]) t_.send(r, &msg, 1);
                next_send = clock::now() + std::chrono::milliseconds(100);
            }
            bool any = false;
            for (unsigned r = 0; r < acked.size(); ++r) {
                const unsigned n = t_.recv(r, s_->rx.data(), rx_batch);
                for (unsigned i = 0; i < n; ++i) {
                    const rx_msg& m = s_->rx[i];
                    any = true;
                    if (m.h.job_id != o_.job_id) continue;
                    if (m.h.type == wire::msg_type::error) {
                        std::string text(m.bytes(), '\0');
                        m.copy_to(text.data());
                        return "railgated refused the join on rail " + std::to_string(r) + ": " + text;
                    }
                    if (m.h.type != wire::msg_type::join_ack) continue;
                    if (r == 0 && !s_->joined) {
                        std::vector<std::uint8_t> buf(m.bytes());
                        m.copy_to(buf.data());
                        if (!wire::decode_join_ack_body(buf, s_->ack)) return "malformed JOIN_ACK";
                        s_->joined = true;
                    }
                    acked[r] = true;
                }
            }
            if (!any) std::this_thread::yield();
        }
        return "";
    };
    if (std::string e = wait_acks(); !e.empty()) return e;
    if (std::string e = t_.open_rails({s_->ack.rails, s_->ack.n_rails}); !e.empty()) return e;
    // LAG: the whole stream on the member the job hashes to (railgated
    // computes the same); rail policy: stripe over every rail.
    const bool lag = s_->ack.policy == wire::rail_policy::lag;
    s_->rails = lag ? 1 : s_->ack.n_rails;
    s_->rail_base =
        lag ? wire::lag_flow_member(s_->ack.hash, o_.job_id, o_.job_token, o_.rank, s_->ack.n_rails) : 0;
    s_->pool = s_->ack.pool_size;
    s_->chunk_elems = s_->ack.chunk_bytes / static_cast<std::uint32_t>(wire::dtype_size(o_.dt));
    if (s_->pool == 0 || s_->chunk_elems == 0) return "JOIN_ACK with pool 0 or chunk 0";
    acked.assign(s_->ack.n_rails, false);
    acked[0] = true;
    if (std::string e = wait_acks(); !e.empty()) return e;
    s_->run.assign(s_->rails, {});
    for (auto& r : s_->run) r.slots.assign(s_->pool, {});
    return "";
}

// Tells railgated this worker's chunk round trips (its histogram's
// non-empty buckets), on the first rail its data used. Best effort: a lost
// report only leaves railctl latency --worker without it.
void worker::report_rtt() {
    const stats::histogram& rtt = s_->rtt;
    if (rtt.count() == 0 || t_.n_rails() <= s_->rail_base) return;
    std::vector<std::uint8_t> body(wire::rtt_entries_per_msg * wire::rtt_entry_bytes);
    wire::header h = control_header(o_, wire::msg_type::rtt_report);
    unsigned n = 0;
    auto flush = [&] {
        if (!n) return;
        h.count = static_cast<std::uint16_t>(n);
        const tx_msg m{h, body.data(), static_cast<std::uint32_t>(n * wire::rtt_entry_bytes)};
        t_.send(s_->rail_base, &m, 1);
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
    if (!s_->joined) return;
    report_rtt();
    wire::header h = control_header(o_, wire::msg_type::leave);
    const tx_msg msg{h, nullptr, 0};
    std::vector<bool> acked(t_.n_rails(), false);
    for (int attempt = 0; attempt < 5 && std::find(acked.begin(), acked.end(), false) != acked.end(); ++attempt) {
        for (unsigned r = 0; r < acked.size(); ++r)
            if (!acked[r]) t_.send(r, &msg, 1);
        const auto until = clock::now() + std::chrono::milliseconds(100);
        while (clock::now() < until && std::find(acked.begin(), acked.end(), false) != acked.end()) {
            for (unsigned r = 0; r < acked.size(); ++r) {
                const unsigned n = t_.recv(r, s_->rx.data(), rx_batch);
                for (unsigned i = 0; i < n; ++i)
                    if (s_->rx[i].h.type == wire::msg_type::leave_ack && s_->rx[i].h.job_id == o_.job_id)
                        acked[r] = true;
            }
            std::this_thread::yield();
        }
    }
    s_->joined = false;
}

void worker::abort() {
    if (!s_->joined) return;
    wire::header h = control_header(o_, wire::msg_type::error);
    h.aux = static_cast<std::uint32_t>(wire::error_code::aborted);
    const tx_msg msg{h, nullptr, 0};
    for (unsigned r = 0; r < t_.n_rails(); ++r) t_.send(r, &msg, 1);
    s_->joined = false;
}

void worker::start(void* data, std::size_t count, wire::dtype dt) {
    state& s = *s_;
    s.err.clear();
    s.active = false;
    if (!s.joined) {
        s.err = "not joined";
        return;
    }
    if (dt != o_.dt) {
        s.err = "dtype " + std::string(wire::dtype_name(dt)) + " differs from the job's " +
                std::string(wire::dtype_name(o_.dt));
        return;
    }
    if (count > o_.max_count) {
        s.err = "count " + std::to_string(count) + " above the job's max_count " + std::to_string(o_.max_count);
        return;
    }
    s.data = static_cast<std::uint8_t*>(data);
    s.count = count;
    s.dt = dt;
    s.esize = wire::dtype_size(dt);
    const std::uint64_t chunks = (count + s.chunk_elems - 1) / s.chunk_elems;
    // Untimed (no per-chunk RTT over a reliable transport): no clock read
    // on the latency path; the op timeout is armed at the first scan.
    const bool timed = o_.chunk_rtt || !t_.reliable();
    const std::uint64_t now = timed ? now_ns() : 0;
    s.active = true;
    const auto t0 = clock::now();
    for (unsigned r = 0; r < s.rails; ++r) {
        state::rail_run& rr = s.run[r];
        rr.n_chunks = chunks > r ? (chunks - r + s.rails - 1) / s.rails : 0;
        rr.done = 0;
        rr.pending.clear();
        rr.err.clear();
        rr.last_progress_ns = rr.last_scan_ns = now;
        for (auto& sl : rr.slots) sl.busy = false;
        // A pool's worth of burst: the first window leaves at once.
        if (o_.pace_bps) rr.pacer.set(o_.pace_bps, std::max<std::uint64_t>(o_.pace_burst_bytes, 16 * 1024), t0);
    }
    s.failed = false;
    for (unsigned r = 0; r < s.rails; ++r)
        for (std::uint64_t k = 0; k < std::min<std::uint64_t>(s.pool, s.run[r].n_chunks); ++k)
            s.run[r].pending.push_back(s.contrib(o_, r, k, 0, now));
    if (chunks == 0) s.active = false;
    progress();
}

// Sends what rail r has pending, as far as its pacer lets it.
void worker::send_pending(unsigned r) {
    state::rail_run& rr = s_->run[r];
    std::size_t n = rr.pending.size();
    std::uint64_t t = 0; // paced and timed: when these leave
    if (rr.pacer.shaped()) {
        const auto now = clock::now();
        if (rr.slots[rr.pending[0].h.slot].sent_ns) t = ns_of(now);
        n = 0;
        while (n < rr.pending.size()) {
            const std::uint32_t bytes = wire_bytes(rr.pending[n]);
            if (!rr.pacer.conforms(bytes, now)) break;
            rr.pacer.consume(bytes);
            ++n;
        }
        if (n == 0) return;
    }
    const unsigned sent = t_.send(s_->rail_base + r, rr.pending.data(), static_cast<unsigned>(n));
    // Round trips and timeouts count from when a chunk left, not from when
    // it was queued behind the pacer; unpaced chunks leave as they are made
    // and keep the time contrib() gave them (no extra clock read).
    for (unsigned i = 0; i < sent; ++i) {
        state::slot_state& sl = rr.slots[rr.pending[i].h.slot];
        sl.queued = false;
        if (t) sl.sent_ns = t;
    }
    rr.pending.erase(rr.pending.begin(), rr.pending.begin() + sent);
}

// One pass over rail r: its results, its sends, and (every millisecond) its
// retransmits and timeout. True when the rail is done or failed.
bool worker::progress_rail(unsigned r) {
    state& s = *s_;
    state::rail_run& rr = s.run[r];
    if (rr.done == rr.n_chunks) return true;
    const unsigned n = t_.recv(s.rail_base + r, rr.rx.data(), rx_batch);
    for (unsigned i = 0; i < n; ++i) {
        const rx_msg& m = rr.rx[i];
        if (m.h.job_id != o_.job_id || m.h.job_token != o_.job_token) continue;
        if (m.h.type == wire::msg_type::error) {
            std::string text(m.bytes(), '\0');
            m.copy_to(text.data());
            rr.err = "railgated aborted the job on rail " + std::to_string(r) + ": " + text;
            s.failed = true;
            return true;
        }
        if (m.h.type != wire::msg_type::result || m.h.slot >= s.pool) continue;
        state::slot_state& sl = rr.slots[m.h.slot];
        const std::uint64_t i_global = sl.k * s.rails + r;
        const std::uint64_t off = i_global * s.chunk_elems;
        // Stale or duplicate results (after a retransmit) are ignored.
        if (!sl.busy || m.h.gen != sl.gen || m.h.offset != off || m.h.dt != s.dt ||
            m.bytes() != std::size_t{m.h.count} * s.esize ||
            m.h.count != std::min<std::uint64_t>(s.chunk_elems, s.count - off))
            continue;
        m.copy_to(s.data + off * s.esize);
        const std::uint64_t t = sl.sent_ns ? now_ns() : 0;
        if (t) {
            const std::uint64_t sample = t - sl.sent_ns;
            rr.rtt.record(sample);
            if (sl.retries == 0) {
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
        const std::uint64_t next = sl.k + s.pool;
        // Same slot: (k + pool) % pool == k % pool.
        if (next < rr.n_chunks) rr.pending.push_back(s.contrib(o_, r, next, 0, t));
    }
    if (!rr.pending.empty()) send_pending(r);
    if (rr.done == rr.n_chunks) return true;
    // Retransmit timed-out contributions; checked every millisecond, the
    // clock read every 32 polls (a clock read is a system call where the
    // TSC is not usable, as in emulated guests).
    if (++rr.polls_since_clock < 32) return false;
    rr.polls_since_clock = 0;
    const std::uint64_t now = now_ns();
    if (!rr.last_progress_ns) rr.last_progress_ns = rr.last_scan_ns = now;
    if (now - rr.last_scan_ns <= 1000000) return false;
    rr.last_scan_ns = now;
    // The timeout: the configured floor or the rail's smoothed round trip
    // plus four deviations, doubled for each retransmit of the same chunk.
    const std::uint64_t rto = std::max<std::uint64_t>(
        static_cast<std::uint64_t>(std::chrono::nanoseconds(o_.rto).count()), rr.srtt_ns + 4 * rr.rttvar_ns);
    for (std::size_t si = 0; si < s.pool && !t_.reliable(); ++si) {
        state::slot_state& sl = rr.slots[si];
        if (!sl.busy || sl.queued || now - sl.sent_ns < rto << std::min(sl.retries, 6u)) continue;
        // RTT of a retransmitted chunk counts from the retransmit.
        const tx_msg c = s.contrib(o_, r, sl.k, wire::flag_retransmit, now);
        ++rr.retransmits;
        rr.pacer.consume(wire_bytes(c));
        t_.send(s.rail_base + r, &c, 1);
    }
    if (now - rr.last_progress_ns > static_cast<std::uint64_t>(std::chrono::nanoseconds(o_.op_timeout).count())) {
        rr.err = "allreduce timed out: no result on rail " + std::to_string(r) + " for " +
                 std::to_string(o_.op_timeout.count()) + " ms";
        s.failed = true;
        return true;
    }
    return false;
}

// The operation has ended on every rail: its round trips join chunk_rtt()
// and the first rail's error is the operation's.
void worker::finish() {
    state& s = *s_;
    s.active = false;
    for (auto& rr : s.run) {
        s.rtt.merge(rr.rtt);
        rr.rtt.reset();
        if (s.err.empty() && !rr.err.empty()) s.err = rr.err;
    }
}

bool worker::progress() {
    state& s = *s_;
    if (!s.active) return true;
    bool all_done = true;
    for (unsigned r = 0; r < s.rails && !s.failed; ++r) all_done &= progress_rail(r);
    if (!all_done && !s.failed) return false;
    finish();
    return true;
}

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
// they are done, then sleeps in the transport between bursts like
// complete() does.
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

std::string worker::allreduce(void* data, std::size_t count, wire::dtype dt) {
    start(data, count, dt);
    if (o_.engine && s_->active && t_.parallel_rails()) {
        run_pipelines();
        return s_->err;
    }
    worker* self = this;
    complete({&self, 1});
    return s_->err;
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

} // namespace railgate::client
