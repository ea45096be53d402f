// The control socket's view of verbs rails: their status and counters in
// the JSON shapes railctl prints, and the whole command set of a railgated
// that runs verbs rails only (no EAL, no DPDK daemon).
#pragma once

#include <chrono>
#include <string>

#include "control/config.hpp"
#include "control/protocol.hpp"
#include "dataplane/verbs/plane.hpp"

namespace railgate {

control::json verbs_rails_json(const verbs::plane& p);
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

// The verbs rails' Prometheus metrics (text format 0.0.4). With
// `standalone` (a verbs-only railgated) they begin with build_info.
std::string verbs_prometheus(const verbs::plane& p, bool standalone = false);

// status and stats for a verbs-only daemon; other commands are refused with
// the reason.
control::json verbs_only_handle(const verbs::plane& p, const config::appliance& cfg,
                                std::chrono::steady_clock::time_point started, const control::request& r);

} // namespace railgate
