// railgated's configuration file (TOML, parsed with toml++) and its
// validation. The whole file is checked before anything starts; every
// problem is reported, each as FILE:LINE:COL: FIELD: why. Pure: no DPDK.
//
// Schema (see config/*.toml for complete examples):
//   [daemon]  udp_port, control_socket, socket_mode, socket_owner,
//             socket_group, metrics, metrics_public, stats_interval, idle,
//             shared_nice (an idle lcore's weight beside a busy task),
//             neighbour_reachable (gateway: seconds a next hop's MAC is trusted)
//   [eal]     lcores, main_lcore, memory_mb, socket_mem, hugepages, huge_dir,
//             pci, in_memory, telemetry, iova_mode, file_prefix, log_levels,
//             args (DPDK's EAL; eal_arguments() makes its flags)
//   [pools]   max_jobs, default_slots, max_slots, mbufs_per_rail
//   [jobs]    stall_ms, assemble_ms, idle_ms, max_pending_joins (the job
//             lifecycle: agg::job_table), fault (the fault injector, labs)
//   [policy]  mode = "rail" | "lag", hash = "l2" | "l3l4" (lag only)
//   [[rail]]  name, transport = "dpdk" | "verbs" | "udp", devargs (dpdk)
//             or device + port (verbs), ip, host_ip, mtu, mtu_max, numa,
//             lcore, traffic_class; udp: the kernel's UDP socket on ip
//             (interface: where railgated puts ip if no interface has it);
//             dpdk and udp: rate, burst, [[rail.tc]]
//             (id, strict | weight, rate, burst), dscp = { DSCP = TC, ... },
//             pcp = { PCP = TC, ... }; verbs only: gid_index | gid_type,
//             path_mtu, service_level, chunk_bytes, sl = { SL = TC, ... },
//             ack_timeout, retry_count, rnr_retry, min_rnr_timer (the QPs'
//             RC timers, IB encodings: verbs::qp_settings)
//   [[route]] prefix = "A.B.C.D/N", rail, via (gateway forwarding)
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace railgate::config {

enum class transport : std::uint8_t { dpdk, verbs, udp };
enum class policy_mode : std::uint8_t { rail, lag };
enum class lag_hash : std::uint8_t { l2, l3l4 };
enum class gid_type : std::uint8_t { ib, roce_v1, roce_v2 };
enum class idle_mode : std::uint8_t { automatic, spin, yield, sleep };

std::string_view name(transport) noexcept;
std::string_view name(policy_mode) noexcept;
std::string_view name(lag_hash) noexcept;
std::string_view name(gid_type) noexcept;
bool parse_policy_mode(std::string_view s, policy_mode& out) noexcept;
bool parse_lag_hash(std::string_view s, lag_hash& out) noexcept;

// Valid ranges, shared by the file, railctl and the control socket.
inline constexpr unsigned mtu_min = 576, mtu_max = 9216;
inline constexpr unsigned gid_index_max = 255;

// The value of key=... in a DPDK devargs string ("net_af_packet0,iface=x"), or "".
std::string devarg(const std::string& devargs, const std::string& key);

struct rail {
    std::string name;
    config::transport transport = transport::dpdk;
    std::string devargs;           // dpdk
    // udp: the interface railgated adds ip to (as /32, removed at exit)
    // when no interface has it ("lo" for workers on this host). Empty: an
    // interface must have it.
    std::string interface;
    std::string device;            // verbs: HCA name (mlx5_0, rxe0)
    unsigned port = 1;             // verbs: HCA port
    std::uint32_t ip = 0;          // host order
    std::uint32_t host_ip = 0;     // tap rails: the kernel side's address (0 = leave the interface alone)
    // af_packet/af_xdp rails: railgated makes a veth pair, the devargs'
    // iface for the port and this peer for the host's workers (host_ip
    // goes on it), and deletes it at exit. Empty: the interface exists.
    std::string veth_peer;
    unsigned host_prefix = 24;
    unsigned mtu = 1500;
    unsigned mtu_max = 0;          // largest MTU `railctl rail set R mtu` may set (0: max(mtu, 9000))
    int numa = -1;                 // override; -1 = the NIC's node
    int lcore = -1;                // override; -1 = chosen by placement
    std::optional<unsigned> gid_index;
    std::optional<config::gid_type> gid_type;
    unsigned traffic_class = 0;    // IPv4 TOS / GRH traffic class byte
    unsigned path_mtu = 0;         // verbs: 256..4096; 0 = the port's active MTU
    unsigned service_level = 0;    // verbs: IB SL / RoCE priority, 0..15
    unsigned chunk_bytes = 32768;  // verbs: bytes per chunk (one WRITE_WITH_IMM)
    // verbs: the QPs' RC timers (verbs::qp_settings): ack_timeout 1..31
    // (4.096 us x 2^n; 0: verbs::default_ack_timeout of [jobs] stall_ms),
    // retry_count and rnr_retry 0..7, min_rnr_timer 0..31 (12: 0.64 ms).
    unsigned ack_timeout = 0, retry_count = 7, rnr_retry = 7, min_rnr_timer = 12;
    // dpdk: transmit shaping (dataplane/qos). rate = "10Gbit" shapes the
    // rail; [[rail.tc]] tables set traffic classes (id 0..7, strict or an
    // ETS weight 1..100, an optional rate cap and burst).
    std::uint64_t rate_bps = 0;
    std::uint64_t burst_bytes = 0;
    // ecn_mark = N: ECN-capable frames joining a TC queue of N or more are
    // marked CE (a shaped rail's queue, as a switch marks; 0 = never).
    unsigned ecn_mark = 0;
    struct traffic_class_cfg {
        unsigned id = 0;
        bool strict = false;
        unsigned weight = 1;
        std::uint64_t rate_bps = 0;
        std::uint64_t burst_bytes = 0;
    };
    std::vector<traffic_class_cfg> tcs;
    // dscp = { 26 = 6, 46 = 5 }: DSCP -> TC entries over the default DSCP >> 3;
    // pcp (dpdk, 802.1Q-tagged frames) and sl (verbs) likewise over PCP = TC
    // and SL & 7.
    std::vector<std::pair<unsigned, unsigned>> dscp_tc, pcp_tc, sl_tc;
};

// [[route]]: gateway forwarding of a prefix by a dpdk rail.
struct route {
    std::string prefix_text; // as written
    std::uint32_t prefix = 0;
    unsigned len = 0;
    std::string rail;
    std::uint32_t via = 0;   // next hop; 0: the destination is on the rail's link
};

// [eal]: DPDK's EAL options as keys. With no [eal] table a file gets a real
// EAL (hugepages, PCI when a rail names a PCI device, telemetry); only the
// embedded default and the tests turn hugepages and PCI off.
struct eal_options {
    std::string lcores;                  // -l "0-3,8"; "": every CPU railgated may run on
    int main_lcore = -1;                 // --main-lcore; -1: the first of lcores
    unsigned memory_mb = 0;              // -m; 0: as needed from hugepages (512 without them)
    std::string socket_mem;              // --socket-mem "1024,1024" (per NUMA node)
    bool hugepages = true;               // false: --no-huge (anonymous memory; tests, demos)
    std::string huge_dir;                // --huge-dir
    std::optional<bool> pci;             // false: --no-pci; unset: whether a rail names a PCI device
    bool in_memory = true;               // --in-memory (--no-shconf without hugepages): no files under
                                         // /var/run/dpdk, no secondary processes
    bool telemetry = true;               // false: --no-telemetry
    std::string iova_mode;               // --iova-mode va|pa; "": DPDK chooses
    std::string file_prefix;             // --file-prefix (with in_memory = false)
    std::vector<std::string> log_levels; // --log-level each: "lib.eal:error", "pmd.net.mlx5:debug"
    std::vector<std::string> args;       // any other EAL flags, appended as written
};

struct appliance {
    std::string source = "(embedded default)"; // file name for messages
    std::uint16_t udp_port = 47000;
    std::string control_socket = "/run/railgate/railgated.sock";
    unsigned socket_mode = 0660;
    std::string socket_owner, socket_group; // empty: the daemon's own
    std::string metrics = "127.0.0.1:9477"; // Prometheus; empty disables
    unsigned stats_interval = 0;
    unsigned neighbour_reachable = 30; // seconds; the gateway then confirms a next hop again
    idle_mode idle = idle_mode::automatic;
    // Verbs rails that busy-poll take the eager rings workers offer
    // (dataplane/verbs/ll_ring.hpp); false keeps every chunk a WRITE_WITH_IMM.
    bool verbs_eager_rings = true;
    // The nice an lcore that sleeps or naps takes while a busy task shares
    // its CPU and traffic is light (net::shared_weight); 0: keep its own.
    int shared_nice = -10;
    // A control client silent this long mid-request, not reading its
    // answers, or no longer asking about its capture is dropped.
    unsigned client_timeout_ms = 5000;
    bool metrics_public = false;            // metrics may listen on a non-loopback address
    eal_options eal;
    unsigned max_jobs = 8, default_slots = 64, max_slots = 256, mbufs_per_rail = 8192;
    policy_mode policy = policy_mode::rail;
    lag_hash hash = lag_hash::l3l4;
    // [jobs]: a slot waits stall_ms for its missing ranks before the job
    // ends naming them; a job must assemble within assemble_ms and expires
    // after idle_ms without a message (0: never); an address may have
    // max_pending_joins jobs assembling.
    unsigned stall_ms = 1000, assemble_ms = 30000, idle_ms = 600000, max_pending_joins = 4;
    std::string fault = "off";               // every rail's fault injector (fault::parse)
    std::vector<config::rail> rails;
    std::vector<config::route> routes;
};

// One problem, located.
struct error {
    std::string file;
    unsigned line = 0, column = 0;
    std::string field; // "rail[1].mtu"
    std::string what;  // "70000 out of range 576..9216"
    std::string text() const;
};

struct result {
    appliance cfg;
    std::vector<error> errors; // empty: cfg is valid
    bool ok() const noexcept { return errors.empty(); }
};

// Parses and validates TOML text; `file` names it in errors.
result parse(std::string_view toml_text, const std::string& file);
// Reads and parses a file, a pipe or a device (a read error, a directory
// or more than max_config_bytes is reported as an error).
inline constexpr std::size_t max_config_bytes = 4u << 20;
result load(const std::string& path);
// The configuration railgated runs with when given none: two virtual rails
// on tap interfaces (config/embedded.toml, compiled in).
std::string_view embedded_default_text() noexcept;
appliance embedded_default();
// Every key the parser knows, as "table.key" ("daemon.udp_port",
// "rail.tc.weight"): what railgated.toml(5) must document.
std::set<std::string> known_keys();

// Field validators, shared with the control socket: empty string = valid.
std::string check_mtu(long long v, unsigned max = mtu_max);
std::string check_gid_index(long long v);
std::string check_rail_name(std::string_view s);
// The Prometheus endpoint, HOST:PORT with HOST an IPv4 address or
// "localhost": on loopback (127.0.0.0/8) unless allow_public (the file's
// metrics_public = true, railgated's --metrics-public), which takes any
// IPv4 address (0.0.0.0: every interface). Checked the same way from the
// file, railgated's --metrics and --check.
std::string check_metrics(std::string_view v, bool allow_public = false);

// Whether a dpdk rail's devargs name a PCI device (0000:3b:00.0, 3b:00.0)
// rather than a vdev (net_*).
bool is_pci(const rail& r);
// The EAL's flags for this configuration, without argv[0] and without the
// rails' devices (railgated adds --vdev / -a for each).
std::vector<std::string> eal_arguments(const appliance& a);

} // namespace railgate::config
