// railgated's packet handlers (internal to dataplane/net): what a rail's
// lcore does with each received frame (JOIN, contributions and results,
// LEAVE, aborts, PING, RTT reports, ARP, ping, routed datagrams) and how a
// job ends (its members told why). Every function runs on the lcore that
// serves `rs`, is noexcept and allocates nothing but mbufs.
#pragma once

#include "dataplane/net/rail_state.hpp"

namespace railgate::net::detail {

// One received frame; m is consumed (sent on, kept, or freed and counted).
void handle(rail_state& rs, rte_mbuf* m) noexcept;
// The job lifecycle's clock: ends the jobs that stalled, did not assemble
// or went idle (agg::job_table::expire), telling their members why.
void expire_jobs(rail_state& rs, std::uint64_t now_tsc) noexcept;
// Advertised rails (bits by stripe) went down: every job striped over one
// of them ends, its members told which (they re-join around them).
void end_jobs_on_rails(rail_state& rs, std::uint32_t down) noexcept;
// railctl job abort: job `id`, if the rail holds it, ends; its members are
// told `text` (operator_abort). Returns the ranks told (0: no such job).
unsigned end_job_for_operator(rail_state& rs, std::uint32_t id, std::string_view text) noexcept;

} // namespace railgate::net::detail
