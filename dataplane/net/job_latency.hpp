#pragma once
// Each job's aggregation latency and worker round trips, per rail
// (railctl latency --job).

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>

#include "dataplane/agg/aggregator.hpp"
#include "dataplane/stats/histogram.hpp"

namespace railgate::net {

// Jobs' aggregation latency, per rail: an entry for each job it may run
// at once and for its last `ended` ones, reused least-recently-joined
// first among those whose job is not running (a job's entry lasts as long
// as the job). Allocated with the rail's state, so that a JOIN on the
// lcore allocates nothing; a running job finds its entry by the index it
// keeps (job::x.lat), not by a search.
struct job_latency {
    static constexpr unsigned ended = 8;
    struct entry {
        std::uint32_t job = 0;
        std::uint64_t joined = 0;     // order of its job's last JOIN; 0: unused
        stats::job_histogram h[2];    // aggregation, worker round trip
    };
    explicit job_latency(unsigned max_jobs)
        : n(max_jobs + ended), e(new entry[n]), held(new std::uint64_t[(n + 63) / 64]) {}
    unsigned n;
    std::unique_ptr<entry[]> e;
    std::unique_ptr<std::uint64_t[]> held; // open()'s scratch: entries of running jobs
    std::uint64_t clock = 0;

    stats::job_histogram* find(std::uint32_t job, bool worker = false) noexcept {
        for (unsigned i = 0; i < n; ++i)
            if (e[i].joined && e[i].job == job) return &e[i].h[worker];
        return nullptr;
    }
    // The running job j's: by the index it keeps, or (a job whose JOINs
    // another rail's state took) by its id; null if it has none.
    stats::job_histogram* of(const agg::job& j, bool worker = false) noexcept {
        if (j.x.lat < n && e[j.x.lat].joined && e[j.x.lat].job == j.id) return &e[j.x.lat].h[worker];
        return find(j.id, worker);
    }
    // A JOIN of job j: its entry (the one of its id if any, kept across
    // its incarnations), else the least recently joined of those no job in
    // `jobs` (the rail's table) holds. O(jobs + entries), on JOINs only.
    void open(agg::job& j, std::span<const agg::job> jobs) noexcept {
        entry* victim = nullptr;
        for (unsigned i = 0; i < n && !victim; ++i)
            if (e[i].joined && e[i].job == j.id) victim = &e[i];
        if (!victim) {
            std::fill_n(held.get(), (n + 63) / 64, 0);
            for (const agg::job& r : jobs)
                if (r.st == agg::job_state::active && r.x.lat < n && e[r.x.lat].job == r.id)
                    held[r.x.lat / 64] |= std::uint64_t{1} << (r.x.lat % 64);
            for (unsigned i = 0; i < n; ++i) {
                if (!e[i].joined) {
                    victim = &e[i];
                    break;
                }
                if (!(held[i / 64] >> (i % 64) & 1) && (!victim || e[i].joined < victim->joined)) victim = &e[i];
            }
            if (!victim) return; // every entry a running job's: cannot be (max_jobs + ended of them)
            for (auto& h : victim->h) h.reset();
            victim->job = j.id;
        }
        victim->joined = ++clock;
        j.x.lat = static_cast<std::uint32_t>(victim - e.get());
    }
};

} // namespace railgate::net
