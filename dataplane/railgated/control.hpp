// railgated's control plane: the control-socket commands, the Prometheus
// text exposition and the DPDK telemetry commands, all over one daemon.
#pragma once

#include <chrono>
#include <string>

#include "control/config.hpp"
#include "control/protocol.hpp"
#include "dataplane/net/daemon.hpp"
#include "dataplane/railgated/capture.hpp"
#include "dataplane/verbs/plane.hpp"

namespace railgate {

class control_plane {
public:
    control_plane(net::daemon& d, const config::appliance& cfg);

    // One control-socket request -> its response.
    control::json handle(const control::request& r);
    // The metrics endpoint's body (Prometheus text format 0.0.4).
    std::string prometheus();
    // Registers /railgate/* commands on DPDK's telemetry socket (if the EAL
    // runs it). Call once, after the daemon is up.
    void register_telemetry();

    // For telemetry callbacks (they cannot carry a pointer).
    static control_plane* instance;
    net::daemon& daemon() noexcept { return d_; }
    // Verbs rails served beside the DPDK ones: status, stats, job list and
    // abort show them, rail list, show and set (gid-index) take them.
    void attach_verbs(verbs::plane* p) noexcept { verbs_ = p; }
    // Timers, on the control socket's thread (capture leases).
    void tick() { capture_.reap(); }

private:
    control::json rail_json(const net::rail_status& r) const;
    control::json counters_json(std::size_t rail) const;
    // A rail's shaping and its traffic classes with their counters.
    control::json tc_json(std::size_t rail) const;
    static bool shaped(const net::rail_config& rc);
    // Resolves args.rail; returns "" or the error naming the known rails.
    std::string find_rail(const control::json& args, int& index, bool required) const;
    static const net::rail_status* status_of(const std::vector<net::rail_status>& st, std::size_t index);
    // One log line per change a client made, naming it (uid, pid).
    static void log_change(const control::request& r, const std::string& what);
    control::json capture(const control::request& r);

    net::daemon& d_;
    verbs::plane* verbs_ = nullptr;
    config::appliance cfg_;
    config::lag_hash hash_;
    std::chrono::steady_clock::time_point started_;
    capture_sessions capture_{d_, capture_sessions::writer::thread, std::chrono::milliseconds(cfg_.client_timeout_ms)};
};

} // namespace railgate
