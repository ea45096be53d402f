// One job lifecycle for every transport: who is in a job, what its slots'
// generations are, when it has stalled or expired, and how it ends.
//
// railgated's DPDK rails (agg::rail_aggregator) and its verbs rails
// (verbs::plane) each keep a job_table per rail and add only their own
// transport data (`Extra`: mbuf owners and member endpoints; registered
// regions and connections). Every rule about membership and time lives here:
//
//   - The first JOIN creates the job and fixes its token, world size, dtype,
//     max_count, pool and excluded rails; later JOINs must agree.
//   - A rank is bound to who joined it (a `peer`: the transport's address
//     of the sender and the worker's per-process nonce). Messages for the
//     rank from anyone else are not the rank's (check_sender). A JOIN for a
//     bound rank from the same peer is a repeat; from another peer it is
//     refused (rank_taken) while the binding is live, and replaces the old
//     job (takeover: the old one is ended first) when the old peer has been
//     silent for the stall time or is the same address with a new nonce (a
//     restarted process). A JOIN asking for another world, dtype,
//     max_count, pool or excluded rails is refused, except that it takes
//     over the same way (or when every member of the job is silent that
//     long): a rank's new run must not wait out the idle time behind its
//     old run's part on a rail the LEAVE never reached. Before the job has
//     completed a chunk, a live binding claimed from elsewhere is a clash:
//     the same id and token started twice at once, whose members could
//     interleave (A's rank 0 with B's rank 1) and sum each other's data.
//     Nothing tells the two apart, so the job ends for both (rank_claimed),
//     and JOINs of that id and token are refused for the assembly time (the
//     runs' late ranks).
//   - A job ends by LEAVE of its last rank, by an abort, or by expire():
//     a slot that some ranks have contributed to and others not for the
//     stall time (the missing ranks are named), a job whose ranks have not
//     all joined within the assembly time, or one no rank has spoken in for
//     the idle time.
//   - Why a job ended (the ERROR its members were sent) is remembered for
//     the assembly time: a member whose copy was lost asks again with its
//     next message and is told the same (remember_end, ended).
//   - Admission: the table size is fixed at construction; a source host may
//     have at most max_pending jobs assembling.
//
// Times are in the caller's ticks (the TSC on an lcore, nanoseconds in the
// unit tests' manual clock); every timeout 0 is off.
//
// Threading: one table per rail, used by the thread that serves the rail
// only. Nothing allocates after construction; every call is noexcept.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "dataplane/proto/drop_reason.hpp"
#include "dataplane/proto/wire.hpp"

namespace railgate::agg {

// Who sent a message, as far as the job table can tell.
struct peer {
    std::uint64_t addr = 0;  // the transport's identity of the sender (UDP: ip << 16 | port)
    std::uint32_t host = 0;  // the sending host (per-host admission limits)
    std::uint64_t nonce = 0; // the worker process's JOIN nonce
};

// Whether two peers are the same worker process: its address and its nonce.
inline bool same_process(const peer& a, const peer& b) noexcept { return a.addr == b.addr && a.nonce == b.nonce; }

struct lifecycle {
    std::uint64_t stall = 0;    // ticks a partly contributed slot may wait for the other ranks
    std::uint64_t assemble = 0; // ticks from a job's first JOIN until every rank has joined
    std::uint64_t idle = 0;     // ticks without a message from any rank
    unsigned max_pending = 0;   // jobs still assembling one host may have created (0: no limit)
};

struct slot {
    std::uint64_t bitmap = 0;     // ranks that contributed to generation `gen`
    std::uint64_t offset = 0;     // chunk of the generation in progress
    std::uint32_t gen = 0;        // generation accepting contributions
    std::uint32_t count = 0;      // elements (DPDK) or bytes (verbs) of the generation in progress
    std::uint64_t started = 0;    // tick of the generation's first contribution
    // Ranks whose contribution to the generation came marked ECN CE (the
    // transport sets and clears it; results echo it per rank).
    std::uint64_t ce = 0;
    // The last completed generation's result, kept for retransmission
    // (DPDK rails; verbs rails keep results in the job's region).
    void* result_owner = nullptr;
    const void* result_payload = nullptr;
    std::uint64_t result_offset = 0;
    std::uint32_t result_count = 0;
    std::uint16_t result_valid = 0;
    // The result's ones' sum (frame::ones_sum16), when the reduce that
    // made it computed one (a slot whose contributions were checked).
    std::uint16_t result_sum = 0;
    bool result_summed = false;
    // On a shaped rail, where the result last queued for a rank waits:
    // its traffic class and the scheduler's ticket (qos::scheduler::holds);
    // ticket 0: none. A rank asking for the kept result while it waits is
    // answered HELD, not sent a second copy behind it.
    std::uint8_t result_tc = 0;
    std::uint32_t result_ticket = 0;
};

enum class job_state : std::uint8_t {
    free,
    active,
    draining, // ended, but its transport still holds memory in flight (verbs)
};

// What the rail gives a job when it is created.
struct job_shape {
    std::uint32_t chunk_elems = 0;          // elements per chunk (all rails), for the dtype
    std::uint32_t stripe_n = 1, stripe_index = 0;
    bool lag = false;
    // The rails the job's first rail listed to its workers (its JOIN_ACK's
    // n_rails): what its striping, and under LAG its home member, are
    // computed over, whatever rails are added or removed while it runs.
    std::uint8_t rails = 1;
    // The JOIN named the chunk and policy (wire::shape_word, from the job's
    // first rail): a job already here must have them, or the JOIN is
    // refused (shape_mismatch); and the rails too, when it names them.
    bool asked = false;
    bool asked_rails = false;
};

template <class Extra>
struct job_entry {
    job_state st = job_state::free;
    std::uint32_t id = 0;
    std::uint64_t token = 0;
    std::uint16_t world = 0;
    wire::dtype dt = wire::dtype::fp32;
    std::uint16_t pool = 0;
    std::uint64_t max_count = 0;
    std::uint32_t excluded = 0;     // rails the job stripes around
    std::uint16_t op = 0;           // the operation its ranks joined at
    // This incarnation of the job id: JOIN_ACK and every ERROR about the
    // job carry it (header gen), so that a worker tells a late ERROR of a
    // job it has left from one about the job it is in. Top bit set.
    std::uint32_t instance = 0;
    std::uint32_t chunk_elems = 0;  // elements per chunk, all rails
    std::uint32_t chunk_bytes() const noexcept { return chunk_elems * static_cast<std::uint32_t>(wire::dtype_size(dt)); }
    // Striping fixed at creation: chunk i is on this rail when
    // i % stripe_n == stripe_index (LAG: 1 / 0, the whole stream on one member).
    std::uint32_t stripe_n = 1, stripe_index = 0;
    bool lag = false;
    std::uint8_t rails = 1;         // the rails it spans (job_shape::rails)
    std::uint64_t joined = 0;       // ranks joined on this rail
    std::uint64_t created = 0;      // tick of the first JOIN
    std::uint64_t assembled = 0;    // tick every rank had joined (0: not yet)
    std::uint32_t creator_host = 0; // who created it (admission)
    unsigned partial = 0;           // slots with some but not all contributions
    peer peers[wire::max_world];
    // The process that left each rank (its LEAVE): a late copy of a JOIN it
    // sent before is not a rank one operation behind (below, join()).
    peer left[wire::max_world];
    std::uint64_t heard[wire::max_world] = {}; // per rank: tick of its last message
    slot* slots = nullptr;          // [pool]
    Extra x{};

    std::uint64_t all_ranks() const noexcept {
        return world == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << world) - 1;
    }
    bool assembling() const noexcept { return joined != all_ranks() && !assembled; }
};

enum class join_status : std::uint8_t {
    joined,   // a new member (or a new job)
    again,    // the same peer joined the same rank again (a repeated JOIN)
    refused,  // err says why
    takeover, // the JOIN replaces the job: end `j` (its members are told), then join again;
              // err op_mismatch: the JOIN is one operation behind (detail: its operation)
    clash,    // err rank_claimed: end `j` (its members are told) and refuse the JOIN
};

struct join_result {
    join_status st = join_status::refused;
    wire::error_code err = wire::error_code::none;
    std::uint64_t detail = 0; // rank_taken: the rank's silence in ticks; rails_mismatch: the job's rails
    bool created = false;
    void* j = nullptr;        // the job (typed by job_table::as)
};

enum class end_reason : std::uint8_t { stalled, assemble_timeout, idle_timeout };

// Why expire() ends a job: for a stall, the slot that waited and the ranks
// it waited for.
struct end_event {
    end_reason why = end_reason::stalled;
    unsigned slot = 0;
    std::uint64_t missing = 0; // ranks (stalled: that had not contributed; assembly: not joined)
    std::uint64_t waited = 0;  // ticks
};

// Why a job ended, kept for a while after its entry is free: a member whose
// copy of the ERROR was lost (a lossy rail) asks again with its next
// message, and is told that reason again, not only that the job is gone.
struct ended_job {
    std::uint32_t id = 0;
    std::uint64_t token = 0;
    std::uint32_t instance = 0; // the incarnation that ended (the ERROR's gen)
    std::uint16_t world = 0;
    wire::dtype dt = wire::dtype::fp32;
    std::uint64_t told = 0;     // the ranks the ERROR went to
    wire::error_code code = wire::error_code::none;
    std::uint64_t detail = 0;
    std::uint64_t at = 0;       // tick it ended (0: unused)
    std::uint8_t text_len = 0;
    char text_buf[wire::max_error_text] = {};
    std::string_view text() const noexcept { return {text_buf, text_len}; }
};

template <class Extra>
class job_table {
public:
    using job_t = job_entry<Extra>;

    job_table(unsigned max_jobs, unsigned max_pool)
        : max_jobs_(max_jobs), max_pool_(max_pool), max_ended_(std::max(max_jobs, 16u)), jobs_(new job_t[max_jobs]),
          slots_(new slot[std::size_t{max_jobs} * max_pool]), ended_(new ended_job[max_ended_]) {
        for (unsigned i = 0; i < max_jobs; ++i) jobs_[i].slots = &slots_[std::size_t{i} * max_pool];
    }
    job_table(const job_table&) = delete;
    job_table& operator=(const job_table&) = delete;

    void set_lifecycle(const lifecycle& l) noexcept { life_ = l; }
    const lifecycle& life() const noexcept { return life_; }
    unsigned capacity() const noexcept { return max_jobs_; }
    unsigned max_pool() const noexcept { return max_pool_; }
    std::span<job_t> all() noexcept { return {jobs_.get(), max_jobs_}; }
    std::span<const job_t> all() const noexcept { return {jobs_.get(), max_jobs_}; }
    unsigned index_of(const job_t& j) const noexcept { return static_cast<unsigned>(&j - jobs_.get()); }
    static job_t& as(void* p) noexcept { return *static_cast<job_t*>(p); }

    unsigned active() const noexcept {
        unsigned n = 0;
        for (unsigned i = 0; i < max_jobs_; ++i) n += jobs_[i].st == job_state::active;
        return n;
    }
    job_t* find(std::uint32_t id) noexcept {
        for (unsigned i = 0; i < max_jobs_; ++i)
            if (jobs_[i].st == job_state::active && jobs_[i].id == id) return &jobs_[i];
        return nullptr;
    }
    const job_t* find(std::uint32_t id) const noexcept { return const_cast<job_table*>(this)->find(id); }

    // A JOIN for rank h.rank of job h.job_id from `who`. `shape` is what a
    // new job gets; `pool` the slots it asks for (already defaulted) and
    // `rails_down` the rails the rail knows are down now. `admit` is asked
    // before a job is created (false: no_buffers).
    template <class Admit>
    join_result join(const wire::header& h, const wire::join_body& b, std::uint16_t pool, const peer& who,
                     std::uint64_t now, const job_shape& shape, std::uint32_t rails_down, Admit&& admit) noexcept {
        join_result r;
        if (b.max_count == 0 || b.max_count > wire::max_tensor_elems || pool == 0 || pool > max_pool_ ||
            h.rank >= h.world_size)
            return refuse(r, wire::error_code::bad_request);
        job_t* j = find(h.job_id);
        if (j) {
            if (!wire::token_equal(j->token, h.job_token)) return refuse(r, wire::error_code::job_in_use);
            // A JOIN of other parameters takes the job over when the
            // process it would replace is gone, as a JOIN of the same ones
            // does below: otherwise a run's part left on a rail its LEAVEs
            // never reached would refuse the job's next run (another
            // count, say) for the idle time, 10 minutes by default.
            if (!fits(*j, h, b, pool) && gone(*j, h.rank, who, now)) {
                r.st = join_status::takeover;
                r.j = j;
                return r;
            }
            if (j->world != h.world_size) return refuse(r, wire::error_code::world_mismatch);
            if (j->dt != h.dt) return refuse(r, wire::error_code::dtype_mismatch);
            if (j->max_count != b.max_count) return refuse(r, wire::error_code::max_count_mismatch);
            if (j->pool != pool) return refuse(r, wire::error_code::pool_mismatch);
            if (b.excluded_rails & ~j->excluded) {
                r.detail = j->excluded;
                return refuse(r, wire::error_code::rails_mismatch);
            }
            const std::uint64_t bit = std::uint64_t{1} << h.rank;
            const bool repeated =
                (j->joined & bit) && same_process(j->peers[h.rank], who);
            if (b.op != j->op && !repeated) {
                // A rank one operation behind did not get that operation's
                // result (railgated restarted while delivering it): the
                // job starts again at its operation, and the ranks ahead,
                // refused below, replay theirs (the worker keeps its last
                // input). Any other gap cannot be bridged.
                r.detail = j->op;
                // Not from the process that has left the rank: what it sends
                // now is a late copy (a JOIN retried, or held in a queue)
                // from before its last operation, and taking the job over
                // for it ended the job under the ranks still in it.
                const bool late_copy = who.addr && same_process(j->left[h.rank], who);
                if (static_cast<std::uint16_t>(b.op + 1) == j->op && !late_copy) {
                    r.st = join_status::takeover;
                    r.err = wire::error_code::op_mismatch;
                    r.detail = b.op;
                    r.j = j;
                    return r;
                }
                return refuse(r, wire::error_code::op_mismatch);
            }
            if (j->joined & bit) {
                if (repeated) {
                    j->heard[h.rank] = now;
                    r.st = join_status::again;
                    r.j = j;
                    return r;
                }
                if (gone(*j, h.rank, who, now)) {
                    r.st = join_status::takeover;
                    r.j = j;
                    return r;
                }
                r.detail = now - j->heard[h.rank];
                if (!started(*j)) {
                    clashes_[next_clash_++ % max_clashes] = {j->id, j->token, now, true};
                    r.st = join_status::clash;
                    r.err = wire::error_code::rank_claimed;
                    r.j = j;
                    return r;
                }
                return refuse(r, wire::error_code::rank_taken);
            }
            // A new member's JOIN that names the job's shape (its first
            // rail's) must find it here: one chunk, policy and rail count
            // on every rail.
            if (shape.asked && (j->chunk_elems != shape.chunk_elems || j->lag != shape.lag ||
                                (shape.asked_rails && j->rails != shape.rails))) {
                r.detail = wire::shape_word(j->chunk_bytes(), j->lag, j->rails);
                return refuse(r, wire::error_code::shape_mismatch);
            }
        } else {
            // A late rank of a run that clashed: refused like the others,
            // never made the first member of a new job.
            if (const std::uint64_t age = clash_age(h.job_id, h.job_token, now); age != no_clash) {
                r.detail = age;
                return refuse(r, wire::error_code::rank_claimed);
            }
            if (life_.max_pending && pending_from(who.host) >= life_.max_pending)
                return refuse(r, wire::error_code::too_many_pending);
            j = alloc();
            if (!j) return refuse(r, wire::error_code::job_table_full);
            if (!admit(pool, h.world_size, h.dt)) return refuse(r, wire::error_code::no_buffers);
            const std::uint32_t excluded = b.excluded_rails | rails_down;
            j->st = job_state::active;
            j->id = h.job_id;
            j->token = h.job_token;
            j->world = h.world_size;
            j->dt = h.dt;
            j->max_count = b.max_count;
            j->pool = pool;
            j->excluded = excluded;
            j->op = b.op;
            j->instance = 0x80000000u | ((static_cast<std::uint32_t>(b.nonce) ^ static_cast<std::uint32_t>(b.nonce >> 32) ^
                                          (++instances_ * 0x9e3779b9u)) &
                                         0x7fffffffu);
            j->chunk_elems = shape.chunk_elems;
            j->stripe_n = shape.stripe_n;
            j->stripe_index = shape.stripe_index;
            j->lag = shape.lag;
            j->rails = shape.rails;
            j->joined = 0;
            j->created = now;
            j->assembled = 0;
            j->creator_host = who.host;
            j->partial = 0;
            j->x = Extra{};
            for (peer& p : j->left) p = peer{};
            for (unsigned s = 0; s < pool; ++s) j->slots[s] = slot{};
            r.created = true;
        }
        j->joined |= std::uint64_t{1} << h.rank;
        j->peers[h.rank] = who;
        j->heard[h.rank] = now;
        if (!j->assembled && j->joined == j->all_ranks()) j->assembled = now;
        r.st = join_status::joined;
        r.j = j;
        return r;
    }

    // Whether `h` (any message but JOIN) is rank h.rank's of job j, sent by
    // its peer (`addr`; 0: the caller has checked where it came from).
    drop_reason check_sender(const job_t& j, const wire::header& h, std::uint64_t addr) const noexcept {
        if (!wire::token_equal(j.token, h.job_token)) return drop_reason::bad_token;
        if (j.world != h.world_size) return drop_reason::world_mismatch;
        if (h.rank >= j.world || !(j.joined >> h.rank & 1)) return drop_reason::rank_not_joined;
        if (addr && j.peers[h.rank].addr != addr) return drop_reason::not_member;
        return drop_reason::none;
    }
    static void heard(job_t& j, unsigned rank, std::uint64_t now) noexcept { j.heard[rank] = now; }
    // Whether a LEAVE's or an abort's gen names job j as its sender knows
    // it: the incarnation (its JOIN_ACK's gen), or the JOIN that bound the
    // rank (its nonce's low 32 bits): a worker that gives up a join before
    // a rail's JOIN_ACK came leaves the part its JOIN may have made there.
    // Anything else is about an earlier incarnation, arriving late.
    static bool names(const job_t& j, const wire::header& h) noexcept {
        return h.gen == j.instance || (h.rank < j.world && (j.joined >> h.rank & 1) &&
                                       h.gen == static_cast<std::uint32_t>(j.peers[h.rank].nonce));
    }
    // Whether any chunk of the job has completed (a result went out).
    static bool started(const job_t& j) noexcept {
        for (unsigned s = 0; s < j.pool; ++s)
            if (j.slots[s].gen) return true;
        return false;
    }

    // Slot bookkeeping shared by the transports: a contribution of `rank`
    // to s (already checked), and a slot's completion.
    // mark() returns true when every rank has contributed.
    static bool mark(job_t& j, slot& s, unsigned rank, std::uint64_t now) noexcept {
        if (s.bitmap == 0) {
            s.started = now;
            ++j.partial;
        }
        s.bitmap |= std::uint64_t{1} << rank;
        return s.bitmap == j.all_ranks();
    }
    static void completed(job_t& j, slot& s) noexcept {
        s.bitmap = 0;
        ++s.gen;
        --j.partial;
    }

    // A rank leaves: it is unbound and its partial contributions forgotten
    // (`forget(slot index, rank)` lets the transport release what it held).
    // Returns true when it was the last rank: the caller then ends the job.
    template <class Forget>
    bool leave(job_t& j, unsigned rank, Forget&& forget) noexcept {
        const std::uint64_t bit = std::uint64_t{1} << rank;
        for (unsigned si = 0; si < j.pool; ++si) {
            slot& s = j.slots[si];
            if (!(s.bitmap & bit)) continue;
            forget(si, rank);
            s.bitmap &= ~bit;
            if (!s.bitmap) --j.partial;
        }
        j.joined &= ~bit;
        j.left[rank] = j.peers[rank];
        j.peers[rank] = peer{};
        return j.joined == 0;
    }

    // Ends a job: its entry is free again (or draining, until reclaim(),
    // when the transport still has its memory in flight).
    void end(job_t& j, bool drain = false) noexcept {
        j.st = drain ? job_state::draining : job_state::free;
        j.joined = 0;
        j.partial = 0;
    }
    void reclaim(job_t& j) noexcept {
        if (j.st == job_state::draining) j.st = job_state::free;
    }

    // Keeps why j ended (its ERROR to the ranks `told`: code, detail and
    // text) for ended(): for the assembly time (the stall time without
    // one), or until max(jobs, 16) later ends have taken its place.
    void remember_end(const job_t& j, std::uint64_t told, wire::error_code code, std::uint64_t detail,
                      std::string_view text, std::uint64_t now) noexcept {
        ended_job& e = ended_[next_ended_++ % max_ended_];
        e.id = j.id;
        e.token = j.token;
        e.instance = j.instance;
        e.world = j.world;
        e.dt = j.dt;
        e.told = told;
        e.code = code;
        e.detail = detail;
        e.at = now ? now : 1;
        e.text_len = static_cast<std::uint8_t>(std::min(text.size(), sizeof e.text_buf));
        std::copy_n(text.data(), e.text_len, e.text_buf);
    }
    // The latest remembered end of the job h names that told h's rank (same
    // token and world), or null. `instance`: the incarnation h belongs to
    // where the message says (a PING's gen); 0 when it does not.
    const ended_job* ended(const wire::header& h, std::uint32_t instance, std::uint64_t now) const noexcept {
        const std::uint64_t hold = life_.assemble ? life_.assemble : life_.stall;
        const ended_job* best = nullptr;
        for (unsigned i = 0; i < max_ended_; ++i) {
            const ended_job& e = ended_[i];
            if (!e.at || e.id != h.job_id || (now > e.at && now - e.at >= hold)) continue;
            if (!wire::token_equal(e.token, h.job_token) || e.world != h.world_size || h.rank >= e.world ||
                !(e.told >> h.rank & 1) || (instance && instance != e.instance))
                continue;
            if (!best || e.at > best->at) best = &e;
        }
        return best;
    }

    // railgated was away for `ticks`, up to `now`: the thread that serves
    // this table did not run (the host took its CPU, the process was
    // stopped, a device call hung), and what the ranks sent meanwhile is
    // still in its receive queues. The clocks the lifecycle judges (a
    // job's creation and assembly, each rank's last word, each slot's
    // first contribution) move on by it, never past `now`, so that no rank
    // is judged silent, stalled or idle for railgated's own absence; a
    // rank silent before it is still found, that much later.
    void absent(std::uint64_t ticks, std::uint64_t now) noexcept {
        const auto later = [ticks, now](std::uint64_t& t) {
            if (t && t < now) t = std::min(t + ticks, now);
        };
        for (unsigned i = 0; i < max_jobs_; ++i) {
            job_t& j = jobs_[i];
            if (j.st != job_state::active) continue;
            later(j.created);
            later(j.assembled);
            for (unsigned r = 0; r < j.world; ++r) later(j.heard[r]);
            for (unsigned si = 0; si < j.pool; ++si) later(j.slots[si].started);
        }
    }

    // The jobs that must end now, one call of on_end(job, event) each; the
    // callback ends them (tells the members, releases, end()).
    template <class OnEnd>
    void expire(std::uint64_t now, OnEnd&& on_end) noexcept {
        for (unsigned i = 0; i < max_jobs_; ++i) {
            job_t& j = jobs_[i];
            if (j.st != job_state::active) continue;
            end_event e;
            if (j.assembling()) {
                if (life_.assemble && now - j.created >= life_.assemble) {
                    e.why = end_reason::assemble_timeout;
                    e.missing = j.all_ranks() & ~j.joined;
                    e.waited = now - j.created;
                    on_end(j, e);
                }
                continue;
            }
            if (life_.stall && j.partial && stalled(j, now, e)) {
                on_end(j, e);
                continue;
            }
            if (life_.idle) {
                std::uint64_t last = j.assembled;
                for (unsigned r = 0; r < j.world; ++r) last = std::max(last, j.heard[r]);
                if (now - last >= life_.idle) {
                    e.why = end_reason::idle_timeout;
                    e.waited = now - last;
                    on_end(j, e);
                }
            }
        }
    }

private:
    // The oldest slot waiting past the stall time for ranks that have been
    // silent as long: a rank still sending (retransmits on a lossy rail,
    // PINGs) is slow, not gone. A slot that began before the job assembled
    // waits from the assembly: a rank that starts late has not stalled.
    bool stalled(const job_t& j, std::uint64_t now, end_event& e) const noexcept {
        for (unsigned si = 0; si < j.pool; ++si) {
            const slot& s = j.slots[si];
            if (!s.bitmap) continue;
            const std::uint64_t since = std::max(s.started, j.assembled);
            if (now - since < life_.stall || now - since <= e.waited) continue;
            std::uint64_t silent = 0;
            for (std::uint64_t m = j.all_ranks() & ~s.bitmap; m; m &= m - 1) {
                const unsigned r = static_cast<unsigned>(std::countr_zero(m));
                if (now - j.heard[r] >= life_.stall) silent |= std::uint64_t{1} << r;
            }
            if (!silent) continue;
            e.why = end_reason::stalled;
            e.slot = si;
            e.missing = silent;
            e.waited = now - since;
        }
        return e.waited != 0;
    }

    // Whether a JOIN asks for what job j is (world, dtype, max_count, pool,
    // and no rail the job stripes over excluded).
    static bool fits(const job_t& j, const wire::header& h, const wire::join_body& b, std::uint16_t pool) noexcept {
        return j.world == h.world_size && j.dt == h.dt && j.max_count == b.max_count && j.pool == pool &&
               !(b.excluded_rails & ~j.excluded);
    }

    // Whether job j's process for `rank` is gone as takeovers judge it: the
    // same address with a new nonce (restarted), or silent for the stall
    // time. For a rank the job has not bound: every rank it has is silent
    // that long. Never for the binding's own process.
    bool gone(const job_t& j, unsigned rank, const peer& who, std::uint64_t now) const noexcept {
        const auto silent = [&](unsigned r) { return life_.stall && now - j.heard[r] >= life_.stall; };
        if (rank < j.world && (j.joined >> rank & 1)) {
            const peer& p = j.peers[rank];
            if (p.addr == who.addr) return p.nonce != who.nonce;
            return silent(rank);
        }
        if (!j.joined) return false;
        for (std::uint64_t m = j.joined; m; m &= m - 1)
            if (!silent(static_cast<unsigned>(std::countr_zero(m)))) return false;
        return true;
    }

    unsigned pending_from(std::uint32_t host) const noexcept {
        unsigned n = 0;
        for (unsigned i = 0; i < max_jobs_; ++i)
            n += jobs_[i].st == job_state::active && jobs_[i].creator_host == host && jobs_[i].assembling();
        return n;
    }

    job_t* alloc() noexcept {
        for (unsigned i = 0; i < max_jobs_; ++i)
            if (jobs_[i].st == job_state::free) return &jobs_[i];
        return nullptr;
    }

    // How long ago job `id` with `token` clashed, while its JOINs are still
    // refused (for the assembly time, or the stall time without one).
    static constexpr std::uint64_t no_clash = ~std::uint64_t{0};
    std::uint64_t clash_age(std::uint32_t id, std::uint64_t token, std::uint64_t now) const noexcept {
        const std::uint64_t hold = life_.assemble ? life_.assemble : life_.stall;
        for (const clash& c : clashes_)
            if (c.used && c.id == id && now - c.at < hold && wire::token_equal(c.token, token)) return now - c.at;
        return no_clash;
    }

    static join_result& refuse(join_result& r, wire::error_code e) noexcept {
        r.st = join_status::refused;
        r.err = e;
        return r;
    }

    unsigned max_jobs_, max_pool_, max_ended_;
    std::uint32_t instances_ = 0;
    // The last clashes (join_status::clash), so that the late ranks of both
    // runs are refused too.
    struct clash {
        std::uint32_t id = 0;
        std::uint64_t token = 0;
        std::uint64_t at = 0;
        bool used = false;
    };
    static constexpr unsigned max_clashes = 16;
    clash clashes_[max_clashes];
    unsigned next_clash_ = 0;
    lifecycle life_;
    std::unique_ptr<job_t[]> jobs_;
    std::unique_ptr<slot[]> slots_;
    std::unique_ptr<ended_job[]> ended_; // [max_ended_], a ring
    unsigned next_ended_ = 0;
};

} // namespace railgate::agg
