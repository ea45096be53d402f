// A job as one rail holds it (railctl job list), read from the rail's
// job_table by the thread that serves the rail: who joined, and what its
// oldest unfinished slot waits for. DPDK rails (net::daemon, between an
// lcore's passes) and verbs rails (verbs::plane, between a rail thread's
// passes) both describe their jobs with describe_jobs(). Times are
// milliseconds before the snapshot.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/agg/job_table.hpp"
#include "dataplane/proto/wire.hpp"

namespace railgate::agg {

struct job_view {
    std::string rail;
    std::string transport;         // "dpdk" or "verbs"
    std::uint32_t id = 0;
    std::uint32_t instance = 0;    // its incarnation (JOIN_ACK's and ERRORs' gen)
    std::uint16_t world = 0;
    std::uint64_t joined = 0;      // ranks joined on this rail (bits)
    std::uint16_t op = 0;          // the operation its ranks joined at
    wire::dtype dt = wire::dtype::fp32;
    std::uint32_t chunk_bytes = 0;
    std::uint16_t pool = 0;
    bool lag = false;
    unsigned rails = 0;            // the rails it spans
    std::uint32_t excluded = 0;    // rails it stripes around (bits)
    double age_ms = 0;             // since its first JOIN here
    bool assembled = false;        // every rank has joined
    unsigned partial = 0;          // slots holding some ranks' contributions, not all
    // Its oldest partial slot (-1: none): its generation, chunk offset
    // (where the rail knows it: a verbs rail's WRITE names the slot and
    // generation only), how long it has waited, and the ranks it waits for.
    int oldest_slot = -1;
    std::uint32_t oldest_gen = 0;
    bool offset_known = true;
    std::uint64_t oldest_offset = 0;
    double oldest_wait_ms = 0;
    std::uint64_t waiting_for = 0;
    std::vector<double> heard_ms;  // per rank: since its last message (-1: not joined)
};

// The active jobs of `t` as they stand at `now` (the table's ticks,
// `ticks_per_ms` of them a millisecond), appended to out; `offsets`: the
// rail keeps each slot's chunk offset. For the thread that serves the table.
template <class Extra>
void describe_jobs(const job_table<Extra>& t, std::string_view rail, std::string_view transport, bool offsets,
                   std::uint64_t now, double ticks_per_ms, std::vector<job_view>& out) {
    const auto ms_before = [&](std::uint64_t tick) {
        return tick && tick < now ? static_cast<double>(now - tick) / ticks_per_ms : 0.0;
    };
    for (const auto& j : t.all()) {
        if (j.st != job_state::active) continue;
        job_view v;
        v.rail = rail;
        v.transport = transport;
        v.id = j.id;
        v.instance = j.instance;
        v.world = j.world;
        v.joined = j.joined;
        v.op = j.op;
        v.dt = j.dt;
        v.chunk_bytes = j.chunk_bytes();
        v.pool = j.pool;
        v.lag = j.lag;
        v.rails = j.rails;
        v.excluded = j.excluded;
        v.age_ms = ms_before(j.created);
        v.assembled = j.assembled != 0;
        for (unsigned si = 0; si < j.pool; ++si) {
            const slot& sl = j.slots[si];
            if (!sl.bitmap || sl.bitmap == j.all_ranks()) continue;
            ++v.partial;
            if (v.oldest_slot < 0 || sl.started < j.slots[v.oldest_slot].started) v.oldest_slot = static_cast<int>(si);
        }
        if (v.oldest_slot >= 0) {
            const slot& sl = j.slots[v.oldest_slot];
            v.oldest_gen = sl.gen;
            v.offset_known = offsets;
            v.oldest_offset = offsets ? sl.offset : 0;
            v.oldest_wait_ms = ms_before(sl.started);
            v.waiting_for = j.all_ranks() & ~sl.bitmap;
        }
        for (unsigned r = 0; r < j.world; ++r) v.heard_ms.push_back(j.joined >> r & 1 ? ms_before(j.heard[r]) : -1.0);
        out.push_back(std::move(v));
    }
}

} // namespace railgate::agg
