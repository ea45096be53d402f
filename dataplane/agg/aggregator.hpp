// The per-rail streaming aggregator: jobs, their slot pools and the
// contributor bitmaps, in the SwitchML style. Transport-agnostic: a received
// contribution is a payload pointer plus an opaque owner (an rte_mbuf* in
// railgated, anything in tests) that is released through `Release`.
//
// Threading: one instance per rail, used only by the lcore that polls that
// rail (shared-nothing), so nothing here is atomic or locked.
//
// Ownership: when contribute() returns action::stored or action::completed,
// the aggregator owns the buffer and will release it exactly once (or keep
// it as the slot's result). For any other outcome the caller still owns it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "dataplane/proto/drop_reason.hpp"
#include "dataplane/proto/frame.hpp"
#include "dataplane/proto/wire.hpp"
#include "dataplane/reduce/reduce.hpp"

namespace railgate::agg {

struct limits {
    unsigned max_jobs = 8;
    unsigned max_pool = 256;     // slots per job per rail, upper bound
    unsigned default_pool = 64;  // when the JOIN asks for 0
    // Striping: chunk i of a tensor goes to rail i % n_rails, and the k-th
    // chunk of a rail to slot k % pool. job_chunk_bytes is the chunk size
    // every rail uses (the smallest rail chunk), fixed when a job is created.
    unsigned rail_index = 0;
    unsigned n_rails = 1;
    std::uint32_t job_chunk_bytes = 1024;
};

struct slot {
    std::uint64_t bitmap = 0;     // ranks that contributed to generation `gen`
    std::uint64_t offset = 0;     // chunk of the generation in progress
    std::uint32_t gen = 0;        // generation accepting contributions
    std::uint16_t count = 0;
    std::uint64_t started = 0;    // caller's clock at the generation's first contribution
    // The last completed generation's result, kept for retransmission.
    void* result_owner = nullptr;
    const void* result_payload = nullptr;
    std::uint64_t result_offset = 0;
    std::uint16_t result_count = 0;
    std::uint16_t result_valid = 0;
};

struct job {
    bool used = false;
    std::uint32_t id = 0;
    std::uint64_t token = 0;
    std::uint16_t world = 0;
    wire::dtype dt = wire::dtype::fp32;
    std::uint16_t pool = 0;
    std::uint64_t max_count = 0;
    std::uint32_t chunk_elems = 0; // elements per chunk, all rails
    // Striping fixed at the job's creation: its chunk i is on this rail when
    // i % stripe_n == stripe_index (rail policy: n_rails / rail_index; LAG:
    // 1 / 0, the whole stream on one member).
    std::uint32_t stripe_n = 1, stripe_index = 0;
    bool lag = false;           // created under the LAG policy
    std::uint64_t joined = 0; // bitmap of ranks joined on this rail
    frame::endpoint members[wire::max_world];
    // LAG: the bond member (stripe index) each rank's flow arrives on; the
    // daemon answers there. Unused under the rail policy.
    std::uint8_t via[wire::max_world] = {};
    slot* slots = nullptr;         // [pool]
    void** owners = nullptr;       // [pool][max_world]
    const void** payloads = nullptr; // [pool][max_world]
};

enum class action : std::uint8_t { dropped, stored, completed, resend };

struct outcome {
    action act = action::dropped;
    drop_reason reason = drop_reason::none;
    job* j = nullptr;
    slot* s = nullptr;
};

struct join_outcome {
    wire::error_code err = wire::error_code::none;
    job* j = nullptr;
};

template <class Release>
class rail_aggregator {
public:
    explicit rail_aggregator(const limits& l)
        : lim_(l), jobs_(new job[l.max_jobs]),
          slots_(new slot[std::size_t{l.max_jobs} * l.max_pool]),
          owners_(new void*[std::size_t{l.max_jobs} * l.max_pool * wire::max_world]()),
          payloads_(new const void*[std::size_t{l.max_jobs} * l.max_pool * wire::max_world]()) {
        for (unsigned i = 0; i < l.max_jobs; ++i) {
            const std::size_t base = std::size_t{i} * l.max_pool;
            jobs_[i].slots = &slots_[base];
            jobs_[i].owners = &owners_[base * wire::max_world];
            jobs_[i].payloads = &payloads_[base * wire::max_world];
        }
    }
    ~rail_aggregator() {
        for (unsigned i = 0; i < lim_.max_jobs; ++i)
            if (jobs_[i].used) free_job(jobs_[i]);
    }
    rail_aggregator(const rail_aggregator&) = delete;
    rail_aggregator& operator=(const rail_aggregator&) = delete;

    const limits& lim() const noexcept { return lim_; }
    // With keep_spares, a completing slot hands ranks 1..W-1's buffers to
    // the caller (spares(), valid until the next contribute()) instead of
    // releasing them: railgated sends results in them. The caller then
    // releases or reuses each spare exactly once.
    void keep_spares(bool on) noexcept { keep_spares_ = on; }
    std::span<void* const> spares() const noexcept { return {spare_, nspare_}; }
    // The chunk size jobs that join from now on get (a live MTU change);
    // jobs already joined keep theirs.
    void set_job_chunk_bytes(std::uint32_t b) noexcept { lim_.job_chunk_bytes = b; }
    // The striping jobs that join from now on get (rails added or removed).
    void set_stripe(unsigned n_rails, unsigned rail_index) noexcept {
        lim_.n_rails = n_rails;
        lim_.rail_index = rail_index;
    }
    // The largest chunk, in bytes, of any job in the table (0: none).
    std::uint32_t max_job_chunk_bytes() const noexcept {
        std::uint32_t m = 0;
        for (unsigned i = 0; i < lim_.max_jobs; ++i)
            if (jobs_[i].used)
                m = std::max(m, jobs_[i].chunk_elems * static_cast<std::uint32_t>(wire::dtype_size(jobs_[i].dt)));
        return m;
    }
    // Jobs in the table created under LAG (their flows may arrive on
    // other members of the bond).
    unsigned lag_jobs() const noexcept { return lag_jobs_; }
    unsigned active_jobs() const noexcept {
        unsigned n = 0;
        for (unsigned i = 0; i < lim_.max_jobs; ++i) n += jobs_[i].used;
        return n;
    }
    job* find(std::uint32_t id) noexcept {
        for (unsigned i = 0; i < lim_.max_jobs; ++i)
            if (jobs_[i].used && jobs_[i].id == id) return &jobs_[i];
        return nullptr;
    }

    std::span<const job> jobs() const noexcept { return {jobs_.get(), lim_.max_jobs}; }

    // A worker joins (or re-joins, e.g. after a restart) job h.job_id on this
    // rail. The first JOIN fixes the token, world, dtype, max_count and pool;
    // later ones must agree. `from` is where results for this rank go.
    // `lag`: the job is created striped as one LAG member's whole stream.
    join_outcome join(const wire::header& h, const wire::join_body& b, const frame::endpoint& from,
                      bool lag = false) noexcept {
        const std::uint16_t pool = b.pool_size ? b.pool_size : static_cast<std::uint16_t>(lim_.default_pool);
        if (b.max_count == 0 || b.max_count > wire::max_tensor_elems || pool > lim_.max_pool)
            return {wire::error_code::bad_request, nullptr};
        job* j = find(h.job_id);
        if (j) {
            if (j->token != h.job_token) return {wire::error_code::bad_token, nullptr};
            if (j->world != h.world_size) return {wire::error_code::world_mismatch, nullptr};
            if (j->dt != h.dt) return {wire::error_code::dtype_mismatch, nullptr};
            if (j->max_count != b.max_count) return {wire::error_code::max_count_mismatch, nullptr};
            if (j->pool != pool) return {wire::error_code::pool_mismatch, nullptr};
        } else {
            j = alloc_job();
            if (!j) return {wire::error_code::job_table_full, nullptr};
            j->used = true;
            j->id = h.job_id;
            j->token = h.job_token;
            j->world = h.world_size;
            j->dt = h.dt;
            j->max_count = b.max_count;
            j->pool = pool;
            j->chunk_elems = lim_.job_chunk_bytes / static_cast<std::uint32_t>(wire::dtype_size(h.dt));
            j->lag = lag;
            lag_jobs_ += lag;
            j->stripe_n = lag ? 1 : lim_.n_rails;
            j->stripe_index = lag ? 0 : lim_.rail_index;
            j->joined = 0;
            for (unsigned s = 0; s < pool; ++s) j->slots[s] = slot{};
        }
        j->joined |= std::uint64_t{1} << h.rank;
        j->members[h.rank] = from;
        return {wire::error_code::none, j};
    }

    // A rank leaves; the job is freed when its last rank has left. Returns
    // false when the job or rank is unknown (or the token is wrong).
    bool leave(const wire::header& h) noexcept {
        job* j = find(h.job_id);
        if (!j || j->token != h.job_token || h.rank >= j->world) return false;
        j->joined &= ~(std::uint64_t{1} << h.rank);
        if (j->joined == 0) free_job(*j);
        return true;
    }

    // Frees the whole job now (a worker aborted it). Copies the members that
    // had joined into `notify` (bitmap returned) so the caller can tell them.
    std::uint64_t abort(const wire::header& h, frame::endpoint* notify) noexcept {
        job* j = find(h.job_id);
        if (!j || j->token != h.job_token) return 0;
        const std::uint64_t who = j->joined;
        for (unsigned r = 0; r < j->world; ++r) notify[r] = j->members[r];
        free_job(*j);
        return who;
    }

    // Accepts one contribution. On action::completed the slot's result has
    // been reduced in rank order into rank 0's payload (s->result_payload,
    // owned by s->result_owner) and every other contribution released.
    // On action::resend the rank retransmitted a contribution whose result
    // is kept in s: send it again to that rank.
    // `now` (any clock of the caller's) is kept in s.started by the first
    // contribution of a generation, for aggregation latency.
    outcome contribute(const wire::header& h, const void* payload, void* owner,
                       const reduce::kernels& k, std::uint64_t now = 0) noexcept {
        outcome o;
        nspare_ = 0;
        job* j = find(h.job_id);
        if (!j) return drop(o, drop_reason::unknown_job);
        o.j = j;
        if (j->token != h.job_token) return drop(o, drop_reason::bad_token);
        if (j->world != h.world_size) return drop(o, drop_reason::world_mismatch);
        if (j->dt != h.dt) return drop(o, drop_reason::dtype_mismatch);
        const std::uint64_t bit = std::uint64_t{1} << h.rank;
        if (!(j->joined & bit)) return drop(o, drop_reason::rank_not_joined);
        if (h.slot >= j->pool) return drop(o, drop_reason::slot_range);
        if (h.count > j->chunk_elems) return drop(o, drop_reason::count_range);
        if (h.offset + h.count > j->max_count) return drop(o, drop_reason::job_offset_range);
        // The chunk must be one that the striping puts on this rail and slot;
        // otherwise a misdirected chunk could claim a slot and stall the job.
        if (h.offset % j->chunk_elems) return drop(o, drop_reason::chunk_misaligned);
        const std::uint64_t chunk = h.offset / j->chunk_elems;
        if (chunk % j->stripe_n != j->stripe_index || (chunk / j->stripe_n) % j->pool != h.slot)
            return drop(o, drop_reason::wrong_rail_or_slot);

        slot& s = j->slots[h.slot];
        o.s = &s;
        if (h.gen != s.gen) {
            // The previous generation: the rank missed the result.
            if (h.gen == s.gen - 1 && s.result_valid && h.offset == s.result_offset &&
                h.count == s.result_count) {
                o.act = action::resend;
                return o;
            }
            return drop(o, h.gen == s.gen - 1 ? drop_reason::stale_no_result
                                               : drop_reason::bad_generation);
        }
        if (s.bitmap == 0) {
            s.offset = h.offset;
            s.count = h.count;
            s.started = now;
        } else if (s.offset != h.offset || s.count != h.count) {
            return drop(o, drop_reason::chunk_mismatch);
        }
        if (s.bitmap & bit) return drop(o, drop_reason::duplicate);

        const std::size_t base = std::size_t{h.slot} * wire::max_world;
        j->owners[base + h.rank] = owner;
        j->payloads[base + h.rank] = payload;
        s.bitmap |= bit;
        const std::uint64_t all = j->world == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << j->world) - 1;
        if (s.bitmap != all) {
            o.act = action::stored;
            return o;
        }
        complete(*j, s, base, k);
        o.act = action::completed;
        return o;
    }

private:
    static outcome& drop(outcome& o, drop_reason r) noexcept {
        o.act = action::dropped;
        o.reason = r;
        return o;
    }

    // Reduce into rank 0's buffer, in rank order; release ranks 1..W-1 and the
    // previous result; keep rank 0's buffer as the new result.
    void complete(job& j, slot& s, std::size_t base, const reduce::kernels& k) noexcept {
        void** owners = &j.owners[base];
        const void** payloads = &j.payloads[base];
        void* dst = const_cast<void*>(payloads[0]);
        k[j.dt](dst, payloads, j.world, s.count);
        for (unsigned r = 1; r < j.world; ++r) {
            if (keep_spares_) spare_[nspare_++] = owners[r];
            else Release{}(owners[r]);
        }
        if (s.result_valid) Release{}(s.result_owner);
        s.result_owner = owners[0];
        s.result_payload = dst;
        s.result_offset = s.offset;
        s.result_count = s.count;
        s.result_valid = 1;
        s.bitmap = 0;
        ++s.gen;
    }

    job* alloc_job() noexcept {
        for (unsigned i = 0; i < lim_.max_jobs; ++i)
            if (!jobs_[i].used) return &jobs_[i];
        return nullptr;
    }

    void free_job(job& j) noexcept {
        for (unsigned si = 0; si < j.pool; ++si) {
            slot& s = j.slots[si];
            const std::size_t base = std::size_t{si} * wire::max_world;
            for (unsigned r = 0; r < j.world; ++r)
                if (s.bitmap & (std::uint64_t{1} << r)) Release{}(j.owners[base + r]);
            if (s.result_valid) Release{}(s.result_owner);
            s = slot{};
        }
        lag_jobs_ -= j.lag;
        j.used = false;
        j.joined = 0;
    }

    limits lim_;
    unsigned lag_jobs_ = 0;
    bool keep_spares_ = false;
    unsigned nspare_ = 0;
    void* spare_[wire::max_world];
    std::unique_ptr<job[]> jobs_;
    std::unique_ptr<slot[]> slots_;
    std::unique_ptr<void*[]> owners_;
    std::unique_ptr<const void*[]> payloads_;
};

} // namespace railgate::agg
