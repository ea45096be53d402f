// The per-rail streaming aggregator of railgated's DPDK rails: a job_table
// (membership, generations, lifecycle) plus the received buffers of each
// slot and where to send each rank's results, in the SwitchML style.
// Transport-agnostic: a received contribution is a payload pointer plus an
// opaque owner (an rte_mbuf* in railgated, anything in tests) that is
// released through `Release`.
//
// Threading: one instance per rail, used only by the lcore that polls that
// rail (shared-nothing), so nothing here is atomic or locked.
//
// Ownership: when contribute() returns action::stored or action::completed,
// the aggregator owns the buffer and will release it exactly once (or keep
// it as the slot's result). For any other outcome the caller still owns it.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <type_traits>

#include "dataplane/agg/footprint.hpp"
#include "dataplane/agg/job_table.hpp"
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
    // Buffers the rail can lend to jobs (0: no limit). A job may hold up to
    // pool * world of them (every rank's contribution to every slot, the
    // results kept among them), so a JOIN that would let the admitted jobs
    // hold more is refused (no_buffers) rather than starve the rail.
    std::uint64_t buffer_budget = 0;
};

// What a DPDK rail keeps per job besides the table's.
struct rail_job_data {
    frame::endpoint members[wire::max_world]; // where each rank's results go
    // LAG: the bond member (stripe index) each rank's flow arrives on; the
    // daemon answers there. Unused under the rail policy.
    std::uint8_t via[wire::max_world] = {};
    // Its entry in the rail's latency histograms (net::job_latency).
    std::uint32_t lat = ~0u;
};

using job = job_entry<rail_job_data>;

// held: a rank's RETRANSMIT of the contribution the slot already holds
// from it (the slot waits for other ranks: a slow rank, not a loss).
enum class action : std::uint8_t { dropped, stored, completed, resend, held };

struct outcome {
    action act = action::dropped;
    drop_reason reason = drop_reason::none;
    job* j = nullptr;
    slot* s = nullptr;
    // Stored contributions found corrupted when the slot was to complete
    // (released; the slot waits for those ranks to send them again), and
    // rank 0's, intact, released with them (the reduce wrote into it).
    unsigned corrupted = 0, discarded = 0;
};

// A contribution's integrity, as the caller checks it when its slot is
// reduced: verified(owner) is true when it needs no check of the payload
// (railgated: the NIC verified its UDP checksum); otherwise ok(owner,
// payload_sum) checks it given the ones' sum of its payload
// (frame::ones_sum16), which the reduce computes as it reads the payload.
// The default takes every contribution as intact.
// whole(owner) checks a stored one entirely (it reads its payload): asked
// only when a later contribution disagrees with the slot's chunk.
struct always_intact {
    bool verified(void*) const noexcept { return true; }
    bool ok(void*, std::uint16_t) const noexcept { return true; }
    bool whole(void*) const noexcept { return true; }
};

template <class Release>
class rail_aggregator {
public:
    using table = job_table<rail_job_data>;

    explicit rail_aggregator(const limits& l)
        : lim_(l), t_(l.max_jobs, l.max_pool),
          owners_(new void*[std::size_t{l.max_jobs} * l.max_pool * wire::max_world]()),
          payloads_(new const void*[std::size_t{l.max_jobs} * l.max_pool * wire::max_world]()),
          arrived_(new std::uint64_t[std::size_t{l.max_jobs} * l.max_pool * wire::max_world]()) {}
    ~rail_aggregator() {
        for (job& j : t_.all())
            if (j.st == job_state::active) release(j);
    }
    rail_aggregator(const rail_aggregator&) = delete;
    rail_aggregator& operator=(const rail_aggregator&) = delete;

    const limits& lim() const noexcept { return lim_; }
    table& jobs_table() noexcept { return t_; }
    const table& jobs_table() const noexcept { return t_; }
    void set_lifecycle(const lifecycle& l) noexcept { t_.set_lifecycle(l); }
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
        for (const job& j : t_.all())
            if (j.st == job_state::active)
                m = std::max(m, j.chunk_bytes());
        return m;
    }
    // Jobs in the table created under LAG (their flows may arrive on
    // other members of the bond).
    unsigned lag_jobs() const noexcept { return lag_jobs_; }
    unsigned active_jobs() const noexcept { return t_.active(); }
    // The most rails any job in the table lists (stripes over, or finds its
    // LAG home among); 0: no job.
    unsigned most_job_rails() const noexcept {
        unsigned m = 0;
        for (const job& j : t_.all())
            if (j.st == job_state::active) m = std::max<unsigned>(m, j.rails);
        return m;
    }
    job* find(std::uint32_t id) noexcept { return t_.find(id); }
    const job* find(std::uint32_t id) const noexcept { return t_.find(id); }
    std::span<const job> jobs() const noexcept { return t_.all(); }
    // When rank's contribution to slot s of job j came (contribute's
    // `now`): with the completing one's, how long it waited for the others.
    std::uint64_t arrived(const job& j, const slot& s, unsigned rank) const noexcept {
        return arrived_[base(j, static_cast<unsigned>(&s - j.slots)) + rank];
    }
    // Buffers the admitted jobs may hold at most.
    std::uint64_t buffers_admitted() const noexcept { return admitted_; }

    // A worker joins job h.job_id on this rail (table rules). `from` is
    // where results for this rank go, `who` who it is. `lag`: a new job is
    // striped as one LAG member's whole stream. A JOIN whose aux names the
    // job's shape (wire::shape_word: the JOIN of a rail after the first)
    // gets that chunk and policy, or is refused (shape_mismatch) where the
    // job here has others or `carry` (the most this rail's port carries
    // now; 0: no bound) is smaller. On join_status::takeover the caller
    // ends the old job (abort()) and joins again.
    join_result join(const wire::header& h, const wire::join_body& b, const frame::endpoint& from, const peer& who,
                     std::uint64_t now, bool lag = false, std::uint32_t rails_down = 0,
                     std::uint32_t carry = 0) noexcept {
        const std::uint16_t pool = b.pool_size ? b.pool_size : static_cast<std::uint16_t>(lim_.default_pool);
        const auto elem = static_cast<std::uint32_t>(wire::dtype_size(h.dt));
        job_shape shape;
        shape.chunk_elems = lim_.job_chunk_bytes / elem;
        shape.lag = lag;
        shape.rails = static_cast<std::uint8_t>(lim_.n_rails);
        if (h.aux) {
            const std::uint32_t bytes = wire::shape_chunk(h.aux);
            join_result r;
            r.err = wire::error_code::bad_request;
            if (!wire::shape_valid(h.aux)) return r;
            if (carry && bytes > carry) {
                r.err = wire::error_code::shape_mismatch;
                return r;
            }
            shape.chunk_elems = bytes / elem;
            shape.lag = wire::shape_lag(h.aux);
            shape.asked = true;
            if (const unsigned n = wire::shape_rails(h.aux)) {
                shape.rails = static_cast<std::uint8_t>(n);
                shape.asked_rails = true;
            }
        }
        // A rail the job's first rail did not list (rails were removed or
        // added while its ranks joined): its part here would stripe, or
        // find its home, over other rails than its workers do.
        if (lim_.rail_index >= shape.rails) {
            join_result r;
            r.err = wire::error_code::shape_mismatch;
            return r;
        }
        if (shape.lag) {
            shape.stripe_n = 1;
            shape.stripe_index = 0;
        } else {
            // Striped over the rails the job does not exclude.
            const wire::stripe_pos p = wire::stripe_of(lim_.rail_index, shape.rails, b.excluded_rails | rails_down);
            if (p.index < 0) {
                join_result r;
                r.err = wire::error_code::rails_mismatch;
                r.detail = b.excluded_rails | rails_down;
                return r;
            }
            shape.stripe_n = p.count;
            shape.stripe_index = static_cast<std::uint32_t>(p.index);
        }
        auto admit = [this](std::uint16_t p, std::uint16_t world, wire::dtype) {
            const std::uint64_t need = std::uint64_t{p} * world;
            return !lim_.buffer_budget || admitted_ + need <= lim_.buffer_budget;
        };
        join_result r = t_.join(h, b, pool, who, now, shape, rails_down, admit);
        if (r.st != join_status::joined) return r;
        job& j = table::as(r.j);
        if (r.created) {
            lag_jobs_ += j.lag;
            admitted_ += std::uint64_t{j.pool} * j.world;
        }
        j.x.members[h.rank] = from;
        return r;
    }

    // A rank leaves; the job is freed when its last rank has left. Returns
    // the drop reason (none: left).
    drop_reason leave(const wire::header& h, std::uint64_t addr) noexcept {
        job* j = find(h.job_id);
        if (!j) return drop_reason::leave_unknown;
        if (const drop_reason r = t_.check_sender(*j, h, addr); r != drop_reason::none) return r;
        if (!table::names(*j, h)) return drop_reason::leave_unknown; // for an earlier incarnation
        const bool last = t_.leave(*j, h.rank, [&](unsigned si, unsigned rank) {
            Release{}(owners_[base(*j, si) + rank]);
        });
        if (last) release(*j);
        return drop_reason::none;
    }

    // Ends the whole job now (an abort, a stall, an expiry), releasing its
    // buffers. The caller tells the members first (j.x.members, j.joined).
    void release(job& j) noexcept {
        for (unsigned si = 0; si < j.pool; ++si) {
            slot& s = j.slots[si];
            const std::size_t b = base(j, si);
            for (unsigned r = 0; r < j.world; ++r)
                if (s.bitmap & (std::uint64_t{1} << r)) Release{}(owners_[b + r]);
            if (s.result_valid) Release{}(s.result_owner);
            s = slot{};
        }
        lag_jobs_ -= j.lag;
        admitted_ -= std::uint64_t{j.pool} * j.world;
        t_.end(j);
    }

    // Whether slot s keeps the result of generation `gen` (its previous
    // one) for the chunk h names: a rank that lost it gets it again.
    static bool keeps_result(const slot& s, std::uint32_t gen, const wire::header& h) noexcept {
        return gen == s.gen - 1 && s.result_valid && h.offset == s.result_offset && h.count == s.result_count;
    }

    // What a PING naming a chunk of member `h.rank` asks (its timeout ran
    // out; PROTOCOL.md, "Loss"): slot h.slot, generation h.aux, the chunk
    // at h.offset of h.count elements. action::held when the slot holds the
    // rank's contribution of it (waiting for other ranks), action::resend
    // when that generation completed and its result is kept (the result
    // was lost, or is on its way), action::dropped otherwise: the
    // contribution is not here, and the rank sends it again. Changes
    // nothing.
    outcome query(job& j, const wire::header& h) noexcept {
        outcome o;
        o.j = &j;
        if (h.slot >= j.pool || h.rank >= j.world) return o;
        slot& s = j.slots[h.slot];
        o.s = &s;
        if (h.aux == s.gen && (s.bitmap >> h.rank & 1) && s.offset == h.offset && s.count == h.count)
            o.act = action::held;
        else if (keeps_result(s, h.aux, h))
            o.act = action::resend;
        return o;
    }

    // Accepts one contribution from `addr` (0: the caller checked who sent
    // it). On action::completed the slot's result has been reduced in rank
    // order into rank 0's payload (s->result_payload, owned by
    // s->result_owner) and every other contribution released (or handed
    // out as spares). On action::resend the rank retransmitted a
    // contribution whose result is kept in s: send it again to that rank.
    // On action::held it retransmitted a contribution s holds, waiting for
    // other ranks': tell it so.
    // `now` is kept in s.started by the first contribution of a generation
    // (aggregation latency, stall detection).
    // `intact` checks every contribution of a slot when the slot is reduced
    // (see always_intact): when some need their payload's sum, the reduce
    // computes it on its way (one pass over the data for both). If any
    // fails, the slot is not complete: the ones that failed, and rank 0's
    // (the reduce wrote into it), are released (the arriving one, if among
    // them, is dropped as udp_checksum and stays the caller's), and the
    // slot waits for those ranks to send them again.
    template <class Intact = always_intact>
    outcome contribute(const wire::header& h, const void* payload, void* owner, const reduce::kernels& k,
                       std::uint64_t now = 0, std::uint64_t addr = 0, Intact&& intact = {}) noexcept {
        outcome o;
        nspare_ = 0;
        job* j = find(h.job_id);
        if (!j) return drop(o, drop_reason::unknown_job);
        o.j = j;
        if (const drop_reason r = t_.check_sender(*j, h, addr); r != drop_reason::none) return drop(o, r);
        if (j->dt != h.dt) return drop(o, drop_reason::dtype_mismatch);
        if (h.slot >= j->pool) return drop(o, drop_reason::slot_range);
        if (h.count > j->chunk_elems) return drop(o, drop_reason::count_range);
        if (h.offset + h.count > j->max_count) return drop(o, drop_reason::job_offset_range);
        // The chunk must be one that the striping puts on this rail and slot;
        // otherwise a misdirected chunk could claim a slot and stall the job.
        if (h.offset % j->chunk_elems) return drop(o, drop_reason::chunk_misaligned);
        const std::uint64_t chunk = h.offset / j->chunk_elems;
        if (chunk % j->stripe_n != j->stripe_index || (chunk / j->stripe_n) % j->pool != h.slot)
            return drop(o, drop_reason::wrong_rail_or_slot);
        table::heard(*j, h.rank, now);

        slot& s = j->slots[h.slot];
        o.s = &s;
        if (h.gen != s.gen) {
            // The previous generation, sent again: the rank missed the
            // result. A copy that was not sent again (a duplicate on the
            // wire) gets nothing: the result is on its way.
            if (keeps_result(s, h.gen, h)) {
                if (!(h.flags & wire::flag_retransmit)) return drop(o, drop_reason::duplicate);
                o.act = action::resend;
                return o;
            }
            return drop(o, h.gen == s.gen - 1 ? drop_reason::stale_no_result : drop_reason::bad_generation);
        }
        if (s.bitmap != 0 && (s.offset != h.offset || s.count != h.count)) {
            // A header damaged on the wire passes every check above but its
            // checksum, which is read when the slot reduces: the slot's
            // first contribution may be one, its chunk wrong, and every
            // rank's real one would then be refused. The stored ones that
            // fail a whole check go (their ranks send them again); then
            // this one is taken if it now fits.
            if (!evict_damaged(*j, s, base(*j, h.slot), intact, o) ||
                (s.bitmap != 0 && (s.offset != h.offset || s.count != h.count)))
                return drop(o, drop_reason::chunk_mismatch);
        }
        if (s.bitmap >> h.rank & 1) {
            // Sent again, the copy here still waiting for the others': the
            // rank is told (HELD), so that it waits rather than sends again.
            // A copy on the wire (no flag) gets nothing.
            if (!(h.flags & wire::flag_retransmit)) return drop(o, drop_reason::duplicate);
            o.act = action::held;
            return o;
        }
        if (s.bitmap == 0) {
            s.offset = h.offset;
            s.count = h.count;
        }
        const std::size_t b = base(*j, h.slot);
        owners_[b + h.rank] = owner;
        payloads_[b + h.rank] = payload;
        arrived_[b + h.rank] = now;
        if (!table::mark(*j, s, h.rank, now)) {
            o.act = action::stored;
            return o;
        }
        std::uint64_t unverified = 0;
        if constexpr (!std::is_same_v<std::decay_t<Intact>, always_intact>)
            for (unsigned r = 0; r < j->world; ++r)
                if (!intact.verified(owners_[b + r])) unverified |= std::uint64_t{1} << r;
        if (!unverified) complete(*j, s, b, k);
        else if (!checked_complete(*j, s, b, k, h.rank, unverified, intact, o))
            return o; // stored or dropped, the slot still waiting
        o.act = action::completed;
        return o;
    }

private:
    static outcome& drop(outcome& o, drop_reason r) noexcept {
        o.act = action::dropped;
        o.reason = r;
        return o;
    }

    std::size_t base(const job& j, unsigned si) const noexcept {
        return (std::size_t{t_.index_of(j)} * lim_.max_pool + si) * wire::max_world;
    }

    // Releases the slot's stored contributions that nothing verified and
    // that fail a whole check; true when any went.
    template <class Intact>
    bool evict_damaged(job& j, slot& s, std::size_t b, Intact& intact, outcome& o) noexcept {
        if constexpr (std::is_same_v<std::decay_t<Intact>, always_intact>) {
            return false;
        } else {
            bool any = false;
            for (std::uint64_t m = s.bitmap; m; m &= m - 1) {
                const unsigned r = static_cast<unsigned>(std::countr_zero(m));
                void* owner = owners_[b + r];
                if (intact.verified(owner) || intact.whole(owner)) continue;
                s.bitmap &= ~(std::uint64_t{1} << r);
                Release{}(owner);
                ++o.corrupted;
                any = true;
            }
            if (any && !s.bitmap) --j.partial;
            return any;
        }
    }

    // Reduces the slot, summing every input's words on the way (one pass
    // over the data for both), then checks the integrity of the unverified
    // contributions: true when all are intact (the slot completed), else the
    // slot is put back to waiting (see contribute()) and o says what became
    // of the arriving one.
    template <class Intact>
    bool checked_complete(job& j, slot& s, std::size_t b, const reduce::kernels& k, unsigned arriving,
                          std::uint64_t unverified, Intact& intact, outcome& o) noexcept {
        const void** payloads = &payloads_[b];
        void* dst = const_cast<void*>(payloads[0]);
        std::uint64_t words[wire::max_world + 1] = {};
        k.with_words(j.dt)(dst, payloads, j.world, s.count, words);
        std::uint64_t bad = 0;
        for (std::uint64_t m = unverified; m; m &= m - 1) {
            const unsigned r = static_cast<unsigned>(std::countr_zero(m));
            if (!intact.ok(owners_[b + r], frame::fold_words(words[r]))) bad |= std::uint64_t{1} << r;
        }
        if (!bad) {
            finish(j, s, b, dst);
            s.result_sum = frame::fold_words(words[j.world]);
            s.result_summed = true;
            return true;
        }
        // Rank 0's buffer holds a sum of something wrong: it goes too.
        const std::uint64_t gone = bad | 1;
        for (std::uint64_t m = gone; m; m &= m - 1) {
            const unsigned r = static_cast<unsigned>(std::countr_zero(m));
            s.bitmap &= ~(std::uint64_t{1} << r);
            if (r == arriving) continue; // the caller's to count and free
            Release{}(owners_[b + r]);
            ++(bad >> r & 1 ? o.corrupted : o.discarded);
        }
        if (!s.bitmap) --j.partial;
        if (gone >> arriving & 1) {
            o.act = action::dropped;
            o.reason = bad >> arriving & 1 ? drop_reason::udp_checksum : drop_reason::checksum_partner;
        } else {
            o.act = action::stored;
        }
        return false;
    }

    // Reduce into rank 0's buffer, in rank order; release ranks 1..W-1 and the
    // previous result; keep rank 0's buffer as the new result.
    void complete(job& j, slot& s, std::size_t b, const reduce::kernels& k) noexcept {
        const void** payloads = &payloads_[b];
        void* dst = const_cast<void*>(payloads[0]);
        k[j.dt](dst, payloads, j.world, s.count);
        finish(j, s, b, dst);
    }

    void finish(job& j, slot& s, std::size_t b, void* dst) noexcept {
        void** owners = &owners_[b];
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
        s.result_summed = false;
        table::completed(j, s);
    }

    limits lim_;
    table t_;
    unsigned lag_jobs_ = 0;
    std::uint64_t admitted_ = 0;
    bool keep_spares_ = false;
    unsigned nspare_ = 0;
    void* spare_[wire::max_world];
    std::unique_ptr<void*[]> owners_;
    std::unique_ptr<const void*[]> payloads_;
    std::unique_ptr<std::uint64_t[]> arrived_; // when each stored contribution came (contribute's `now`)
};

} // namespace railgate::agg
