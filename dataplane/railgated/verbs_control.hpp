// The control socket's view of verbs rails: their status and counters in
// the JSON shapes railctl prints, and the whole command set of a railgated
// that runs verbs rails only (no EAL, no DPDK daemon). Also what that view
// shares with the DPDK rails' (control.cpp): status's daemon object and the
// counters both kinds of rail keep.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "control/config.hpp"
#include "control/protocol.hpp"
#include "dataplane/verbs/plane.hpp"

namespace railgate {

// A rail's counters that DPDK and verbs rails share, into `j`: the job
// lifecycle's (the same names on both) and the drops by reason, with their
// total. `Counters` is net::rail_counters or verbs::rail_counters.
template <class Counters>
void shared_counters_json(const Counters& c, control::json& j) {
    auto v = [](const std::atomic<std::uint64_t>& x) { return x.load(std::memory_order_relaxed); };
    const std::pair<const char*, const std::atomic<std::uint64_t>*> fields[] = {
        {"contributions", &c.contributions}, {"joins", &c.joins}, {"join_errors", &c.join_errors},
        {"leaves", &c.leaves}, {"leaves_again", &c.leaves_again}, {"aborts", &c.aborts},
        {"operator_aborts", &c.operator_aborts}, {"stalls", &c.stalls},
        {"expirations", &c.expirations}, {"takeovers", &c.takeovers}, {"pongs", &c.pongs},
        {"rtt_reports", &c.rtt_reports}};
    for (const auto& [name, x] : fields) j[name] = v(*x);
    control::json drops = control::json::object();
    std::uint64_t total = 0;
    for (unsigned r = 0; r < drop_reason_count; ++r)
        if (const std::uint64_t n = v(c.drops[r])) {
            drops[std::string(drop_reason_name(static_cast<drop_reason>(r)))] = n;
            total += n;
        }
    j["drops_total"] = total;
    j["drops"] = drops;
}

control::json verbs_rails_json(const verbs::plane& p);
// The index of the verbs rail named `name`, or -1.
int verbs_rail_index(const verbs::plane& p, const std::string& name);
// The verbs rails' names, comma-separated (for errors naming the rails).
std::string verbs_rail_names(const verbs::plane& p);
// rail show of verbs rail `rail` (an index): its status entry and counters.
control::json verbs_rail_show(const verbs::plane& p, int rail);
// rail set on verbs rail `rail`: gid_index (0..255 or "auto") for its new
// connections; mtu is refused (a verbs rail's path MTU is agreed per
// connection). Logged as the control plane logs changes.
control::json verbs_rail_set(verbs::plane& p, int rail, const control::request& r);
// railctl latency on verbs rails: the arguments checked (a job or a TC is
// refused, named: verbs rails keep neither), into worker and reset; ""
// or why not.
std::string verbs_latency_args(const control::json& args, bool& worker, bool& reset);
// latency's result (for control::ok), whatever rails the histogram is of
// ("all" or a name).
control::json latency_answer(bool worker, const control::json& rail, const stats::histogram& h, unsigned chunk_bytes,
                             bool reset);
// latency of verbs rail `rail` (an index; -1: all of them).
control::json verbs_latency(const verbs::plane& p, int rail, const control::json& args);
// job list's "jobs" array, whatever rails hold them.
control::json jobs_json(const std::vector<agg::job_view>& jobs);
// job abort's arguments (job, why) checked: the job id, and the text its
// members get ("the operator ended job J (railctl job abort): WHY").
// "" or why not.
std::string abort_args(const control::json& args, std::uint32_t& job, std::string& text);
// job abort's answer: the rails the job ended on and the members told, or
// that no rail holds the job.
control::json abort_answer(std::uint32_t job, std::vector<std::string> ended_on, unsigned told);
// Counters of every verbs rail, or of the one named `only`.
control::json verbs_counters_json(const verbs::plane& p, const std::string& only = "");

// status's "daemon" object, whatever rails railgated serves: what it is,
// how it was started, and the rail policy, LAG hash and job chunk size
// given.
control::json daemon_json(const config::appliance& cfg, std::chrono::steady_clock::time_point started,
                          const std::string& policy, const std::string& hash, unsigned job_chunk_bytes);

// railgate_build_info (its HELP, TYPE and sample): every endpoint's first
// series, whatever rails railgated serves.
std::string build_info_prometheus();

// railgate_aggregation_latency_seconds's HELP and TYPE lines, and one
// rail's samples of it: cumulative buckets at powers of two from 1 us to
// ~1 s, in seconds, with its sum and count.
extern const char* const latency_metric;
void latency_samples(std::string& o, const std::string& rail, const stats::histogram& h);
// Those samples of every verbs rail (through its thread: plane::latency).
void verbs_latency_samples(const verbs::plane& p, std::string& o);

// The verbs rails' Prometheus metrics (text format 0.0.4). With
// `standalone` (a verbs-only railgated) they begin with build_info and end
// with the aggregation latency (a railgated with DPDK-side rails puts the
// verbs rails' samples in its own family of it).
std::string verbs_prometheus(const verbs::plane& p, bool standalone = false);

// status, rail list, show and set, stats, job list and job abort for a
// verbs-only daemon; other commands are refused with the reason.
control::json verbs_only_handle(verbs::plane& p, const config::appliance& cfg,
                                std::chrono::steady_clock::time_point started, const control::request& r);

} // namespace railgate
