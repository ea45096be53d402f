// railgated's data plane: rails (DPDK ports), their mbuf pools, and the
// poll-mode lcores that serve them. Used by the railgated binary and by
// railbench --embedded. Requires an initialised EAL (net::eal).
//
// Threading: construct, launch(), stop() and print_*() from the main lcore.
// Each rail is served by exactly one worker lcore, which owns all of its
// state; the main lcore only reads counters.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/net/rail_counters.hpp"
#include "dataplane/proto/wire.hpp"

namespace railgate::net {

struct rail_config {
    std::string name;          // "r0"
    std::string port_name;     // ethdev name (e.g. net_af_packet0), or
    int port_id = -1;          // an existing port id (embedded rings)
    std::uint32_t ip = 0;      // host order
    std::uint16_t mtu = 1500;
    std::uint16_t udp_port = wire::default_udp_port;
    int lcore = -1;            // override; -1 = chosen by NUMA placement
};

// What a rail lcore does when a pass over its rails found nothing. Spinning
// is right on isolated cores. Yielding lets the kernel's own work on that
// core run (ksoftirqd: the packet path of af_xdp/af_packet rails), which
// otherwise waits for the scheduler tick while the lcore spins.
enum class idle_policy : std::uint8_t { spin, yield };

struct daemon_config {
    std::vector<rail_config> rails;
    unsigned max_jobs = 8;
    unsigned max_pool = 256;
    unsigned default_pool = 64;
    unsigned mbufs_per_rail = 8192;
    unsigned rx_desc = 1024, tx_desc = 1024;
    wire::rail_policy policy = wire::rail_policy::rail;
    idle_policy idle = idle_policy::spin;
};

class daemon {
public:
    // Validates the configuration, opens and starts every port, creates the
    // pools on each port's NUMA node and plans the lcore placement.
    // Throws std::runtime_error naming the offending rail and field.
    explicit daemon(const daemon_config& cfg);
    ~daemon();
    daemon(const daemon&) = delete;
    daemon& operator=(const daemon&) = delete;

    void print_placement(std::FILE* out) const;
    // Starts the rail loops on their worker lcores.
    void launch();
    // Asks the loops to stop and waits for them. Idempotent.
    void stop();

    std::size_t rail_count() const noexcept;
    const rail_config& rail(std::size_t i) const noexcept;
    const rail_counters& counters(std::size_t i) const noexcept;
    void print_stats(std::FILE* out) const;

    struct impl;

private:
    std::unique_ptr<impl> p_;
};

// Parses dotted-quad IPv4 into host order; false on anything else.
bool parse_ipv4(const std::string& s, std::uint32_t& out) noexcept;
std::string format_ipv4(std::uint32_t ip);

} // namespace railgate::net
