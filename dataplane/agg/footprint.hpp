#pragma once
// What a rail's aggregation tables take, against the host's memory.

#include <cstdint>
#include <cstdio>
#include <string>

#include "dataplane/agg/job_table.hpp"
#include "dataplane/proto/wire.hpp"

namespace railgate::agg {

// What a rail_aggregator allocates for max_jobs jobs of max_pool slots: a
// slot and the per-rank contribution arrays (its owners_, payloads_ and
// arrived_) of every job's every slot.
inline std::uint64_t table_bytes(unsigned max_jobs, unsigned max_pool) noexcept {
    return std::uint64_t{max_jobs} * max_pool *
           (sizeof(slot) + wire::max_world * (sizeof(void*) + sizeof(const void*) + sizeof(std::uint64_t)));
}

// Whether `rails` rails' tables fit in half of host_bytes: "" if so, else
// what they take. Before this check, valid arguments (--max-jobs 1024
// --pool 65535: 101 GiB a rail) made an lcore die of std::bad_alloc;
// railgated refuses them at start and on railctl rail add, and --check
// names them.
inline std::string tables_fit(unsigned max_jobs, unsigned max_pool, std::size_t rails, std::uint64_t host_bytes) {
    const double per_rail = static_cast<double>(table_bytes(max_jobs, max_pool));
    const double all = per_rail * static_cast<double>(rails), host = static_cast<double>(host_bytes);
    if (!host_bytes || all <= host / 2) return {};
    constexpr double gib = 1024.0 * 1024 * 1024;
    char t[320];
    std::snprintf(t, sizeof t,
                  "max_jobs %u x max_slots %u: the aggregation tables take %.1f GiB per rail, %.1f GiB for %zu "
                  "rail(s), over half this host's %.1f GiB of memory; lower max_jobs or max_slots",
                  max_jobs, max_pool, per_rail / gib, all / gib, rails, host / gib);
    return t;
}

} // namespace railgate::agg
