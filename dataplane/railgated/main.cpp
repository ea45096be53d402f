// railgated: the poll-mode aggregation data plane.
//
//   railgated [OPTIONS] [-- EAL-OPTIONS]
//
// The rails come from --config FILE, or from --rail flags, or, with
// neither, from the embedded default (config/embedded.toml: two af_packet
// rails on veth pairs railgated makes, dataplane/net/veth.hpp).
// The EAL's options come from the config's [eal] table; EAL options after
// "--" replace them. Only the embedded default and the tests run the EAL
// without hugepages and PCI.
//
// af_xdp rails get railgate's XDP program (dataplane/bpf/railgate_xdp.c)
// unless their devargs name another xdp_prog or --no-xdp-steer is given: the
// kernel then keeps the interface's other traffic.
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include <cctype>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "control/cli.hpp"
#include "control/config.hpp"
#include "control/metrics.hpp"
#include "control/server.hpp"
#include "control/version.hpp"
#include "dataplane/bpf/xdp_steer.hpp"
#include "dataplane/engine/engine.hpp"
#include "dataplane/fault/injector.hpp"
#include "dataplane/log/log.hpp"
#include "dataplane/net/daemon.hpp"
#include "dataplane/net/eal.hpp"
#include "dataplane/net/kernel_if.hpp"
#include "dataplane/net/topology.hpp"
#include "dataplane/net/veth.hpp"
#include "dataplane/railgated/control.hpp"
#include "dataplane/railgated/host_check.hpp"
#include "dataplane/railgated/liveness.hpp"
#include "dataplane/railgated/stop_signal.hpp"
#include "dataplane/railgated/verbs_control.hpp"
#include "dataplane/verbs/plane.hpp"

using namespace railgate;

namespace {

void usage(std::FILE* f) {
    std::fprintf(f,
                 "usage: railgated [OPTIONS] [-- EAL-OPTIONS]\n"
                 "  --config FILE       rails, pools, policy, EAL, control socket and metrics from a TOML file\n"
                 "                      (railgated.toml(5); examples in config/ and share/railgate); without\n"
                 "                      it and without --rail: the embedded default (config/embedded.toml),\n"
                 "                      two rails at 198.18.0.1 and 198.18.1.1 for workers on this host,\n"
                 "                      on an EAL without hugepages or PCI.\n"
                 "                      Verbs rails (transport = \"verbs\") are served through rdma-core with\n"
                 "                      rdma_cm on the rail's address and udp_port; with verbs rails only,\n"
                 "                      no EAL starts\n"
                 "  --check             validate the configuration and the host (hugepages, lcores, each\n"
                 "                      rail's device and driver), print both, and exit: 0 ready, 1 the\n"
                 "                      host is not, 2 the configuration is invalid\n"
                 "  --log-level L       %s (default info); DPDK's own log levels are\n"
                 "                      EAL options ([eal] log_levels, or --log-level after --)\n"
                 "  -V, --version       the version, the commit, and what it was built with\n"
                 "  -h, --help          this text\n"
                 "  --rail DEVARGS      instead of a file: a DPDK vdev (net_af_packet0,iface=eth1) or PCI\n"
                 "                      address, or udp[,interface=IF] (the kernel's UDP socket on --ip,\n"
                 "                      put on IF if no interface has it); repeatable. Then per rail:\n"
                 "    --ip A.B.C.D      the rail's IPv4 address\n"
                 "    --mtu N           the rail's MTU, %u..%u (default 1500)\n"
                 "    --lcore L         serve the rail from lcore L instead of the NUMA-local choice\n"
                 "  --port P            UDP port for every rail (default %u)\n"
                 "  --pool N            default slots per job per rail (default 64)\n"
                 "  --max-jobs N        concurrent jobs per rail (default 8)\n"
                 "  --mbufs N           mbufs per rail (default 8192)\n"
                 "  --socket PATH|off   the control socket (default: the config's, %s)\n"
                 "  --metrics HOST:PORT|off  the Prometheus endpoint (default: the config's, 127.0.0.1:9477)\n"
                 "  --metrics-public    let --metrics listen on a non-loopback address (0.0.0.0: all)\n"
                 "  --stats-interval S  print counters every S seconds (default: only at exit)\n"
                 "  --idle spin|yield|sleep  when the rails are idle, spin (isolated cores), yield the core\n"
                 "                      to the kernel (default for af_xdp/af_packet/tap rails, whose packets\n"
                 "                      the kernel moves on the same cores), or yield and, after 50 quiet\n"
                 "                      ms (at once while a busy task shares the core and traffic is\n"
                 "                      light, and weighing then as [daemon] shared_nice, -10 by default,\n"
                 "                      against that task), sleep on the sockets (lcores of udp rails\n"
                 "                      only; their default). A yielding lcore naps instead (50 us,\n"
                 "                      growing to 1 ms while idle, and weighing as shared_nice too)\n"
                 "                      while a busy task shares its core and traffic is light\n"
                 "  --no-xdp-steer      af_xdp rails take every packet of their interface (the PMD's own\n"
                 "                      XDP program) instead of only railgate's (railgate_xdp.o)\n"
                 "  --fault SPEC        inject faults on every rail, received and sent frames alike:\n"
                 "                      drop=P,dup=P,reorder=P,corrupt=P,seed=S (P a fraction), and\n"
                 "                      optionally rank=N, type=T or dir=rx|tx: one rank's messages,\n"
                 "                      one message type such as result or leave_ack, one way\n"
                 "                      (railctl fault set/clear changes it live)\n"
                 "  --stall-ms N        a slot waits N ms for its missing ranks before the job ends naming\n"
                 "                      them (default: the config's [jobs] stall_ms, 1000)\n"
                 "  --client-timeout MS a control client silent this long mid-request, not reading its\n"
                 "                      answers, or no longer asking about its capture is dropped\n"
                 "                      (default: the config's [daemon] client_timeout_ms, 5000)\n"
                 "EAL-OPTIONS (after --) replace the config's [eal] table, e.g.\n"
                 "  railgated --rail 0000:3b:00.0 --ip 10.0.0.1 -- -l 0-1 --in-memory\n"
                 "Under systemd (Type=notify) railgated tells the service manager when it is ready.\n"
                 "At exit railgated checks that every buffer of every rail's pools came back; a leak is\n"
                 "reported and the exit status is 3.\n",
                 std::string(log::level_names).c_str(), wire::min_mtu, wire::max_mtu, wire::default_udp_port,
                 control::default_socket);
}

// railgated's options that take a value; the others are flags. Both lists
// also tell a misplaced option on either side of "--".
constexpr const char* valued_options[] = {"--config", "--log-level", "--rail", "--ip", "--mtu", "--lcore", "--port",
                                          "--pool", "--max-jobs", "--mbufs", "--socket", "--metrics",
                                          "--stats-interval", "--idle", "--fault", "--stall-ms",
                                          "--client-timeout"};
constexpr const char* flag_options[] = {"--check", "--metrics-public", "--no-xdp-steer", "--version", "--help"};
// Common EAL options, to say where they go when given before "--".
constexpr const char* eal_options[] = {"-l", "-c", "-n", "-m", "-a", "-b", "--lcores", "--main-lcore", "--vdev",
                                       "--no-huge", "--no-pci", "--in-memory", "--no-shconf", "--no-telemetry",
                                       "--socket-mem", "--huge-dir", "--file-prefix", "--iova-mode", "--proc-type",
                                       "--legacy-mem", "--single-file-segments", "--allow", "--block"};

bool in(const std::string& a, const auto& list) {
    return std::any_of(std::begin(list), std::end(list), [&](const char* o) { return a == o; });
}

[[noreturn]] void die(const std::string& m) {
    std::fprintf(stderr, "railgated: %s\n", m.c_str());
    std::exit(2);
}

unsigned long num(const std::string& flag, const std::string& v, unsigned long lo, unsigned long hi) {
    std::uint64_t x = 0;
    if (!parse_unsigned(v, x) || x < lo || x > hi)
        die(flag + " " + v + " out of range " + std::to_string(lo) + ".." + std::to_string(hi));
    return static_cast<unsigned long>(x);
}

// af_xdp rails: clear a railgate program a killed railgated left on the
// interface, and give the PMD railgate's steering program.
void prepare_af_xdp(std::string& d, bool steer) {
    const std::string iface = config::devarg(d, "iface");
    if (iface.empty()) die("--rail " + d + ": af_xdp needs iface=");
    try {
        if (xdp::clear_stale(iface))
            log::notice("removed a stale railgate XDP program from %s", iface.c_str());
    } catch (const std::exception& e) {
        die(e.what());
    }
    if (!steer || !config::devarg(d, "xdp_prog").empty()) return;
    const std::string obj = xdp::default_object_path();
    if (obj.empty()) die("railgate_xdp.o not found (set RAILGATE_XDP_OBJ, or use --no-xdp-steer)");
    d += ",xdp_prog=" + obj;
}

void print_config(const config::appliance& a) {
    std::printf("railgated: configuration %s is valid: %zu rail(s), policy %s, control socket %s, metrics %s\n",
                a.source.c_str(), a.rails.size(), std::string(config::name(a.policy)).c_str(),
                a.control_socket.c_str(), a.metrics.empty() ? "off" : a.metrics.c_str());
    std::printf("  lcores beside a busy task: %s\n",
                a.shared_nice ? ("nice " + std::to_string(a.shared_nice) + " while idle").c_str() : "their own nice");
    std::printf("  jobs: stall %u ms, assembly %u ms, idle %s, %u assembling per address, faults %s\n", a.stall_ms,
                a.assemble_ms, a.idle_ms ? (std::to_string(a.idle_ms) + " ms").c_str() : "never", a.max_pending_joins,
                a.fault.c_str());
    for (const config::rail& r : a.rails)
        std::printf("  rail %-8s %-5s %-40s ip %s mtu %u\n", r.name.c_str(), std::string(config::name(r.transport)).c_str(),
                    r.transport == config::transport::dpdk  ? r.devargs.c_str()
                    : r.transport == config::transport::udp ? (r.interface.empty() ? "kernel socket" : ("kernel socket, address on " + r.interface).c_str())
                                                            : (r.device + ":" + std::to_string(r.port)).c_str(),
                    net::format_ipv4(r.ip).c_str(), r.mtu);
    for (const config::rail& r : a.rails) {
        if (!r.rate_bps && r.tcs.empty()) continue;
        std::printf("  rail %-8s shaped: rate %.3f Gbit/s%s", r.name.c_str(), static_cast<double>(r.rate_bps) / 1e9,
                    r.tcs.empty() ? "\n" : ", TCs");
        for (const auto& t : r.tcs)
            std::printf(" %u:%s%s", t.id, t.strict ? "strict" : ("w" + std::to_string(t.weight)).c_str(),
                        t.rate_bps ? ("@" + std::to_string(t.rate_bps / 1000000) + "Mbit").c_str() : "");
        if (!r.tcs.empty()) std::printf("\n");
    }
    for (const config::route& r : a.routes)
        std::printf("  route %-18s -> rail %s %s\n", r.prefix_text.c_str(), r.rail.c_str(),
                    r.via ? ("via " + net::format_ipv4(r.via)).c_str() : "(on-link)");
}

} // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0); // reports and log lines in order in one file
    config::appliance app;
    std::string config_file, socket_override, metrics_override, fault_override;
    unsigned stall_override = 0, client_timeout_override = 0;
    bool check_only = false, xdp_steer = true, idle_set = false, cli_rails = false, metrics_public = false;
    net::idle_policy idle = net::idle_policy::spin;
    std::uint16_t udp_port = wire::default_udp_port;
    bool udp_port_set = false;
    std::vector<std::string> eal_cli; // after "--"
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--") {
            for (++i; i < argc; ++i) {
                const std::string e = argv[i];
                if (e != "--log-level" && (in(e, valued_options) || in(e, flag_options)))
                    die("'" + e + "' is railgated's option, not the EAL's: give it before --");
                eal_cli.push_back(e);
            }
            break;
        }
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) die(a + " needs a value");
            return argv[++i];
        };
        auto last = [&]() -> config::rail& {
            if (app.rails.empty()) die(a + " must follow a --rail");
            return app.rails.back();
        };
        if (a == "-h" || a == "--help") {
            usage(stdout);
            return 0;
        } else if (a == "-V" || a == "--version") {
            std::fputs(version_text("railgated").c_str(), stdout);
            return 0;
        } else if (a == "--config") {
            config_file = val();
        } else if (a == "--check") {
            check_only = true;
        } else if (a == "--log-level") {
            const std::string v = val();
            log::level l{};
            if (!log::parse(v, l))
                die("--log-level: '" + v + "' is not one of " + std::string(log::level_names) +
                    (v.find_first_of(":.") != std::string::npos || std::isdigit(static_cast<unsigned char>(v[0]))
                         ? " (DPDK's log levels are EAL options: [eal] log_levels, or --log-level after --)"
                         : ""));
            log::set_level(l);
        } else if (a == "--rail") {
            config::rail r;
            r.devargs = val();
            r.name = "r" + std::to_string(app.rails.size());
            if (r.devargs.substr(0, r.devargs.find(',')).empty()) die("--rail: empty device");
            if (std::string e; net::udp_rail_devargs(r.devargs, r.interface, e)) { // the kernel's socket on --ip
                if (!e.empty()) die("--rail " + r.devargs + ": " + e);
                r.transport = config::transport::udp;
                r.devargs.clear();
            }
            app.rails.push_back(r);
            cli_rails = true;
        } else if (a == "--ip") {
            const std::string v = val();
            if (!net::parse_ipv4(v, last().ip)) die("--ip: '" + v + "' is not an IPv4 address");
        } else if (a == "--mtu") {
            const std::string v = val();
            if (const std::string e = wire::parse_mtu(v, last().mtu); !e.empty()) die("--mtu: " + e);
        } else if (a == "--lcore") {
            last().lcore = static_cast<int>(num(a, val(), 0, RTE_MAX_LCORE - 1));
        } else if (a == "--port") {
            udp_port = static_cast<std::uint16_t>(num(a, val(), 1, 65535));
            udp_port_set = true;
        } else if (a == "--pool") {
            app.default_slots = static_cast<unsigned>(num(a, val(), 1, 65535));
            app.max_slots = std::max(app.max_slots, app.default_slots);
        } else if (a == "--max-jobs") {
            app.max_jobs = static_cast<unsigned>(num(a, val(), 1, 1024));
        } else if (a == "--mbufs") {
            app.mbufs_per_rail = static_cast<unsigned>(num(a, val(), 1024, 1u << 22));
        } else if (a == "--socket") {
            socket_override = val();
        } else if (a == "--metrics") {
            metrics_override = val();
        } else if (a == "--metrics-public") {
            metrics_public = true;
        } else if (a == "--stats-interval") {
            app.stats_interval = static_cast<unsigned>(num(a, val(), 1, 86400));
        } else if (a == "--idle") {
            const std::string v = val();
            if (v == "spin") idle = net::idle_policy::spin;
            else if (v == "yield") idle = net::idle_policy::yield;
            else if (v == "sleep") idle = net::idle_policy::sleep;
            else die("--idle: '" + v + "' is not spin, yield or sleep");
            idle_set = true;
        } else if (a == "--no-xdp-steer") {
            xdp_steer = false;
        } else if (a == "--fault") {
            fault_override = val();
            fault::spec f;
            if (std::string e = fault::parse(fault_override, f); !e.empty()) die("--fault: " + e);
        } else if (a == "--stall-ms") {
            stall_override = static_cast<unsigned>(num(a, val(), 10, 3600000));
        } else if (a == "--client-timeout") {
            client_timeout_override = static_cast<unsigned>(num(a, val(), 1000, 3600000));
        } else if (in(a, eal_options)) {
            die("'" + a + "' is an EAL option: give it after -- (railgated [OPTIONS] -- EAL-OPTIONS), or in the "
                "config's [eal] table");
        } else {
            die("unknown option '" + a + "' (railgated --help lists them)");
        }
    }

    // Where the configuration comes from: a file, the flags, or the default.
    if (!config_file.empty() && cli_rails) die("give --config or --rail, not both");
    if (!config_file.empty()) {
        const config::result r = config::load(config_file);
        for (const config::error& e : r.errors) std::fprintf(stderr, "railgated: %s\n", e.text().c_str());
        if (!r.ok()) die(std::to_string(r.errors.size()) + " error(s) in " + config_file + "; nothing started");
        app = r.cfg;
    } else if (cli_rails) {
        app.source = "(command line)";
        app.eal = {}; // a real EAL: hugepages, PCI for PCI rails (EAL options after -- replace it)
        for (const config::rail& r : app.rails)
            if (!r.ip) die("rail " + r.name + " (" + (r.devargs.empty() ? "udp" : r.devargs) + "): --ip missing");
        for (config::rail& r : app.rails) r.mtu_max = r.mtu;
        if (udp_port_set) app.udp_port = udp_port;
    } else {
        app = config::embedded_default();
    }
    if (!socket_override.empty()) app.control_socket = socket_override == "off" ? "" : socket_override;
    if (metrics_public) app.metrics_public = true;
    if (!metrics_override.empty()) app.metrics = metrics_override == "off" ? "" : metrics_override;
    if (!app.metrics.empty())
        if (std::string e = config::check_metrics(app.metrics, app.metrics_public); !e.empty()) die("--metrics: " + e);
    if (!fault_override.empty()) app.fault = fault_override;
    if (stall_override) app.stall_ms = stall_override;
    if (client_timeout_override) app.client_timeout_ms = client_timeout_override;
    // The EAL's flags: after "--", else the config's [eal] table.
    std::vector<std::string> eal_args{argv[0]};
    if (!eal_cli.empty()) {
        eal_args.insert(eal_args.end(), eal_cli.begin(), eal_cli.end());
        // What the host check needs to know of them: hugepages, memory, CPUs.
        app.eal = {};
        for (std::size_t k = 0; k < eal_cli.size(); ++k) {
            const bool more = k + 1 < eal_cli.size();
            if (eal_cli[k] == "--no-huge") app.eal.hugepages = false;
            else if (eal_cli[k] == "-l" && more) app.eal.lcores = eal_cli[++k];
            else if (eal_cli[k] == "-m" && more) app.eal.memory_mb = static_cast<unsigned>(std::strtoul(eal_cli[++k].c_str(), nullptr, 10));
            else if (eal_cli[k] == "--socket-mem" && more) app.eal.socket_mem = eal_cli[++k];
        }
    }
    else for (std::string& e : config::eal_arguments(app)) eal_args.push_back(std::move(e));

    // Can this host run it? --check says and exits; a start logs the
    // problems and goes on (the EAL or the device then says why it fails).
    const std::vector<host::finding> findings = host::check(app, "", net::interface_with);
    const auto problems = std::count_if(findings.begin(), findings.end(), [](const host::finding& f) { return f.problem; });
    if (check_only) {
        print_config(app);
        std::string joined;
        for (std::size_t k = 1; k < eal_args.size(); ++k) joined += (k > 1 ? " " : "") + eal_args[k];
        const bool dpdk_rails = std::any_of(app.rails.begin(), app.rails.end(),
                                            [](const config::rail& r) { return r.transport != config::transport::verbs; });
        std::printf("  eal: %s\n", dpdk_rails ? joined.c_str() : "(none: verbs rails only)");
        for (const host::finding& f : findings) std::printf("  host: %s: %s\n", f.problem ? "problem" : "ok", f.what.c_str());
        if (problems) {
            std::printf("railgated: the host is not ready for %s: %ld problem(s)\n", app.source.c_str(), static_cast<long>(problems));
            return 1;
        }
        std::printf("railgated: the host is ready for %s\n", app.source.c_str());
        return 0;
    }
    for (const host::finding& f : findings)
        if (f.problem) log::warning("host: %s", f.what.c_str());
    // Verbs rails go to the verbs plane; the DPDK daemon (and the EAL) run
    // only when there are DPDK rails.
    verbs::plane_config vcfg;
    vcfg.max_jobs = app.max_jobs;
    vcfg.default_pool = std::min(app.default_slots, wire::verbs_max_pool);
    vcfg.max_pool = std::min(app.max_slots, wire::verbs_max_pool);
    vcfg.stall_ms = app.stall_ms;
    vcfg.assemble_ms = app.assemble_ms;
    vcfg.idle_ms = app.idle_ms;
    vcfg.max_pending_joins = app.max_pending_joins;
    vcfg.eager_rings = app.verbs_eager_rings;
    vcfg.spin_passes = (idle_set ? idle : app.idle == config::idle_mode::spin ? net::idle_policy::spin
                                                                              : net::idle_policy::yield) ==
                               net::idle_policy::spin
                           ? 0
                           : vcfg.spin_passes;
    for (const config::rail& r : app.rails) {
        if (r.transport != config::transport::verbs) continue;
        verbs::rail_config v;
        v.name = r.name;
        v.device = r.device;
        v.port = r.port;
        v.ip = r.ip;
        v.cm_port = app.udp_port;
        v.qp.gid_index = r.gid_index ? static_cast<int>(*r.gid_index) : -1;
        v.qp.prefer_roce_v2 = r.gid_type != config::gid_type::roce_v1;
        v.qp.path_mtu = r.path_mtu;
        v.qp.traffic_class = static_cast<std::uint8_t>(r.traffic_class);
        v.qp.service_level = static_cast<std::uint8_t>(r.service_level);
        v.qp.ack_timeout = r.ack_timeout ? static_cast<std::uint8_t>(r.ack_timeout)
                                         : verbs::default_ack_timeout(std::chrono::milliseconds(app.stall_ms),
                                                                      r.retry_count);
        v.qp.retry_count = static_cast<std::uint8_t>(r.retry_count);
        v.qp.rnr_retry = static_cast<std::uint8_t>(r.rnr_retry);
        v.qp.min_rnr_timer = static_cast<std::uint8_t>(r.min_rnr_timer);
        v.chunk_bytes = r.chunk_bytes;
        v.numa = r.numa;
        v.cpu = r.lcore;
        qos::tc_map sl_map = qos::tc_map::defaults();
        for (const auto& [sl, tc] : r.sl_tc) sl_map.set("sl", sl, tc); // validated by config::parse
        v.tc = sl_map.from_sl(static_cast<std::uint8_t>(r.service_level));
        vcfg.rails.push_back(v);
    }
    std::erase_if(app.rails, [](const config::rail& r) { return r.transport == config::transport::verbs; });

    net::daemon_config cfg;
    cfg.max_jobs = app.max_jobs;
    cfg.max_pool = app.max_slots;
    cfg.default_pool = app.default_slots;
    cfg.mbufs_per_rail = app.mbufs_per_rail;
    cfg.neighbour_reachable_ms = app.neighbour_reachable * 1000;
    cfg.stall_ms = app.stall_ms;
    cfg.assemble_ms = app.assemble_ms;
    cfg.idle_ms = app.idle_ms;
    cfg.max_pending_joins = app.max_pending_joins;
    fault::parse(app.fault, cfg.fault); // checked by config::parse and --fault
    cfg.policy = app.policy == config::policy_mode::lag ? wire::rail_policy::lag : wire::rail_policy::rail;
    cfg.hash = app.hash == config::lag_hash::l2 ? wire::lag_hash::l2 : wire::lag_hash::l3l4;
    if (app.idle == config::idle_mode::spin) cfg.idle = net::idle_policy::spin;
    if (app.idle == config::idle_mode::yield) cfg.idle = net::idle_policy::yield;
    if (app.idle == config::idle_mode::sleep) cfg.idle = net::idle_policy::sleep;
    cfg.shared_nice = app.shared_nice;
    for (config::rail& r : app.rails) {
        std::string& d = r.devargs;
        net::rail_config rc;
        if (r.transport == config::transport::udp) {
            rc.udp = true;
            rc.udp_interface = r.interface;
            // The kernel's UDP work for its socket runs on the lcore's core
            // too, and the kernel wakes a loop sleeping on the socket.
            if (!idle_set && app.idle == config::idle_mode::automatic && cfg.idle == net::idle_policy::spin)
                cfg.idle = net::idle_policy::sleep;
        } else {
            if (d.rfind("net_af_xdp", 0) == 0) prepare_af_xdp(d, xdp_steer);
            // Kernel-backed rails need the kernel's packet work on the lcore's core.
            for (const char* k : {"net_af_xdp", "net_af_packet", "net_tap"})
                if (!idle_set && app.idle == config::idle_mode::automatic && d.rfind(k, 0) == 0)
                    cfg.idle = net::idle_policy::yield; // (a loop of udp rails beside them sleeps: it polls)
            // vdevs go to the EAL as --vdev, PCI devices as -a.
            eal_args.push_back(d.rfind("net_", 0) == 0 ? "--vdev" : "-a");
            eal_args.push_back(d);
            rc.port_name = d.substr(0, d.find(','));
        }
        rc.name = r.name;
        rc.ip = r.ip;
        rc.mtu = static_cast<std::uint16_t>(r.mtu);
        rc.mtu_max = static_cast<std::uint16_t>(r.mtu_max);
        rc.udp_port = app.udp_port;
        rc.lcore = r.lcore;
        rc.numa = r.numa;
        rc.host_ip = r.host_ip;
        rc.host_prefix = r.host_prefix;
        rc.host_if = r.veth_peer;
        rc.traffic_class = r.traffic_class;
        rc.rate_bps = r.rate_bps;
        rc.burst_bytes = r.burst_bytes;
        rc.ecn_mark_items = r.ecn_mark;
        for (const config::rail::traffic_class_cfg& t : r.tcs)
            rc.tcs[t.id] = {t.strict, t.weight, t.rate_bps, t.burst_bytes};
        // validated by config::parse
        for (const auto& [d, tc] : r.dscp_tc) rc.tc_map.set("dscp", d, tc);
        for (const auto& [p, tc] : r.pcp_tc) rc.tc_map.set("pcp", p, tc);
        cfg.rails.push_back(rc);
    }
    for (const config::route& r : app.routes) cfg.routes.push_back({r.prefix, r.len, r.rail, r.via});
    if (idle_set) cfg.idle = idle;

    // From here railgated changes the host: a stop signal, even one during
    // the start-up, takes the clean stop (stop_signal.hpp).
    stop::install();
    try {
        // The TBB engine: an arena per NUMA node for heavy per-rail work.
        const engine::engine eng(engine::topology::load());
        log::info("engine: %s", eng.describe().c_str());
        vcfg.eng = &eng;
        std::unique_ptr<verbs::plane> vp;
        if (!vcfg.rails.empty()) vp = std::make_unique<verbs::plane>(vcfg);
        // Veth pairs to make before the EAL probes their ports (deleted
        // after the daemon and the EAL are gone).
        std::vector<net::veth_pair> veths;
        for (const config::rail& r : app.rails) {
            if (r.veth_peer.empty()) continue;
            veths.emplace_back(config::devarg(r.devargs, "iface"), r.veth_peer, r.mtu);
            log::info("rail %s: veth %s (port) / %s (host)%s", r.name.c_str(), veths.back().port_end().c_str(),
                      r.veth_peer.c_str(), veths.back().taken_over() ? ", taken over from an earlier railgated" : "");
        }
        std::optional<net::eal> eal;
        std::unique_ptr<net::daemon> d;
        if (!cfg.rails.empty()) {
            net::route_dpdk_log();
            eal.emplace(eal_args);
            net::print_topology(stdout);
            d = std::make_unique<net::daemon>(cfg);
            d->print_placement(stdout);
        }
        if (vp) vp->print_placement(stdout);
        if (d) d->launch();
        if (vp) vp->launch();
        std::unique_ptr<control_plane> cp;
        if (d) {
            cp = std::make_unique<control_plane>(*d, app);
            cp->attach_verbs(vp.get());
            cp->register_telemetry();
        }
        const auto started = std::chrono::steady_clock::now();
        std::unique_ptr<control::server> ctl;
        // The control thread's last tick (at least every 200 ms between
        // requests): the liveness check below watches it with the loops.
        const auto steady_ns = [] {
            return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
                .count();
        };
        std::atomic<std::int64_t> control_beat{steady_ns()};
        if (!app.control_socket.empty()) {
            control::socket_options so;
            so.path = app.control_socket;
            so.mode = app.socket_mode;
            so.owner = app.socket_owner;
            so.group = app.socket_group;
            so.incomplete_timeout = std::chrono::milliseconds(app.client_timeout_ms);
            ctl = std::make_unique<control::server>(
                so,
                [&](const control::request& r) { return cp ? cp->handle(r) : verbs_only_handle(*vp, app, started, r); },
                [&] {
                    control_beat.store(steady_ns(), std::memory_order_relaxed);
                    if (cp) cp->tick();
                });
            log::info("control socket %s (mode %04o)", ctl->path().c_str(), app.socket_mode);
        }
        std::unique_ptr<control::metrics_server> metrics;
        if (!app.metrics.empty()) {
            metrics = std::make_unique<control::metrics_server>(
                app.metrics, [&cp, &vp] { return cp ? cp->prometheus() : verbs_prometheus(*vp, true); });
            log::info("metrics on http://%s/metrics", app.metrics.c_str());
        }
        std::fflush(stdout);
        const bool stop_in_startup = stop::requested() != 0; // then not ready: stopping
        if (!stop_in_startup) {
            log::notice("ready: %zu rail(s) from %s", cfg.rails.size() + vcfg.rails.size(), app.source.c_str());
            // systemd (Type=notify): started. Nothing happens without $NOTIFY_SOCKET.
            sd_notifyf(0, "READY=1\nSTATUS=serving %zu rail(s) from %s\nMAINPID=%ld",
                       cfg.rails.size() + vcfg.rails.size(), app.source.c_str(), static_cast<long>(getpid()));
        }
        auto print_stats = [&] {
            if (d) d->print_stats(stdout);
            if (vp) vp->print_stats(stdout);
            std::fflush(stdout);
        };
        // Every loop's passes, every 100 ms: one that stopped going round is
        // logged, and systemd's watchdog (WatchdogSec=) is told railgated is
        // alive only while none has.
        std::uint64_t watchdog_usec = 0;
        if (sd_watchdog_enabled(0, &watchdog_usec) <= 0) watchdog_usec = 0;
        live::liveness liveness{std::chrono::microseconds(watchdog_usec)};
        if (watchdog_usec)
            log::info("systemd's watchdog: told every %.1f s while every lcore, verbs rail and the control thread goes "
                      "round its loop (stuck after %.1f s)",
                      static_cast<double>(watchdog_usec) / 2e6, static_cast<double>(liveness.stuck_after().count()) / 1e3);
        std::vector<live::loop> loops;
        auto look_at_loops = [&] {
            loops.clear();
            if (d)
                for (const net::lcore_pass& p : d->passes())
                    loops.push_back({"lcore " + std::to_string(p.lcore), std::chrono::nanoseconds(p.since_ns)});
            if (vp)
                for (const verbs::rail_pass& p : vp->passes())
                    loops.push_back({"verbs rail " + p.rail, std::chrono::nanoseconds(p.since_ns)});
            if (ctl)
                loops.push_back({"the control thread",
                                 std::chrono::nanoseconds(std::max<std::int64_t>(
                                     0, steady_ns() - control_beat.load(std::memory_order_relaxed)))});
            const live::liveness::verdict v = liveness.step(std::chrono::steady_clock::now(), loops);
            for (const std::string& s : v.stuck) log::error("%s", s.c_str());
            for (const std::string& s : v.back) log::warning("%s", s.c_str());
            if (v.ping) sd_notify(0, "WATCHDOG=1");
        };
        unsigned ticks = 0;
        while (!stop::requested()) {
            look_at_loops();
            usleep(100000);
            if (app.stats_interval && ++ticks % (app.stats_interval * 10) == 0) print_stats();
        }
        log::notice("stopping (SIG%s%s)", sigabbrev_np(stop::requested()), stop_in_startup ? " during the start-up" : "");
        sd_notify(0, "STOPPING=1");
        metrics.reset();
        ctl.reset();
        if (d) d->stop();
        if (vp) vp->stop();
        print_stats();
        // Every buffer a port, a ring or a job held must be back.
        if (d) {
            const std::vector<std::string> leaks = d->close();
            for (const std::string& l : leaks) log::error("leak: %s", l.c_str());
            if (!leaks.empty()) return 3;
            log::info("every rail's buffers came back");
        }
    } catch (const std::exception& e) {
        log::error("%s", e.what());
        sd_notifyf(0, "STATUS=failed: %s", e.what());
        return 1;
    }
    return 0;
}
