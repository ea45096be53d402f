// railgated: the poll-mode aggregation data plane.
//
//   railgated [EAL options] -- --rail DEVARGS --ip A.B.C.D [--mtu N] [--lcore L]
//                              [--rail ...] [--port P] [--pool N] [--max-jobs N]
//                              [--mbufs N] [--stats-interval S] [--no-xdp-steer]
//
// A rail's DEVARGS is a DPDK vdev (net_af_packet0,iface=eth1 / net_af_xdp0,
// iface=eth1 / net_memif0,...) or a PCI address; --ip, --mtu and --lcore
// apply to the rail named just before them.
//
// af_xdp rails get railgate's XDP program (dataplane/bpf/railgate_xdp.c)
// unless their devargs name another xdp_prog or --no-xdp-steer is given: the
// kernel then keeps the interface's other traffic.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "dataplane/bpf/xdp_steer.hpp"
#include "dataplane/net/daemon.hpp"
#include "dataplane/net/eal.hpp"
#include "dataplane/net/topology.hpp"

using namespace railgate;

namespace {

volatile std::sig_atomic_t stop_requested = 0;
extern "C" void on_signal(int) { stop_requested = 1; }

void usage(std::FILE* f) {
    std::fprintf(f,
                 "usage: railgated [EAL options] -- --rail DEVARGS --ip A.B.C.D [--mtu N] [--lcore L] [--rail ...]\n"
                 "                 [--port P] [--pool N] [--max-jobs N] [--mbufs N] [--stats-interval S]\n"
                 "                 [--idle spin|yield] [--no-xdp-steer]\n"
                 "  --rail DEVARGS      a DPDK vdev (net_af_packet0,iface=eth1) or PCI address; repeatable\n"
                 "  --ip A.B.C.D        the rail's IPv4 address (railgated answers ARP and ping for it)\n"
                 "  --mtu N             the rail's MTU, %u..%u (default 1500)\n"
                 "  --lcore L           serve the rail from lcore L instead of the NUMA-local choice\n"
                 "  --port P            UDP port for every rail (default %u)\n"
                 "  --pool N            default slots per job per rail (default 64)\n"
                 "  --max-jobs N        concurrent jobs per rail (default 8)\n"
                 "  --mbufs N           mbufs per rail (default 8192)\n"
                 "  --stats-interval S  print counters every S seconds (default: only at exit)\n"
                 "  --idle spin|yield   when the rails are idle, spin (isolated cores) or yield the core to\n"
                 "                      the kernel (default for af_xdp/af_packet/tap rails, whose packets\n"
                 "                      the kernel moves on the same cores)\n"
                 "  --no-xdp-steer      af_xdp rails take every packet of their interface (the PMD's own\n"
                 "                      XDP program) instead of only railgate's (railgate_xdp.o)\n",
                 wire::min_mtu, wire::max_mtu, wire::default_udp_port);
}

[[noreturn]] void die(const std::string& m) {
    std::fprintf(stderr, "railgated: %s\n", m.c_str());
    std::exit(2);
}

unsigned long num(const std::string& flag, const std::string& v, unsigned long lo, unsigned long hi) {
    std::size_t pos = 0;
    unsigned long x = 0;
    try {
        x = std::stoul(v, &pos, 10);
    } catch (...) {
        pos = 0;
    }
    if (pos == 0 || pos != v.size() || x < lo || x > hi)
        die(flag + " " + v + " out of range " + std::to_string(lo) + ".." + std::to_string(hi));
    return x;
}

// The value of key=... in a devargs string, or "".
std::string devarg(const std::string& d, const std::string& key) {
    std::size_t at = 0;
    while ((at = d.find(key + "=", at)) != std::string::npos) {
        if (at > 0 && d[at - 1] == ',') {
            const std::size_t v = at + key.size() + 1;
            return d.substr(v, d.find(',', v) - v);
        }
        ++at;
    }
    return {};
}

// af_xdp rails: clear a railgate program a killed railgated left on the
// interface, and give the PMD railgate's steering program.
void prepare_af_xdp(std::string& d, bool steer) {
    const std::string iface = devarg(d, "iface");
    if (iface.empty()) die("--rail " + d + ": af_xdp needs iface=");
    try {
        if (xdp::clear_stale(iface))
            std::fprintf(stderr, "railgated: removed a stale railgate XDP program from %s\n", iface.c_str());
    } catch (const std::exception& e) {
        die(e.what());
    }
    if (!steer || !devarg(d, "xdp_prog").empty()) return;
    const std::string obj = xdp::default_object_path();
    if (obj.empty()) die("railgate_xdp.o not found (set RAILGATE_XDP_OBJ, or use --no-xdp-steer)");
    d += ",xdp_prog=" + obj;
}

} // namespace

int main(int argc, char** argv) {
    std::vector<std::string> eal_args{argv[0]};
    int i = 1;
    for (; i < argc && std::strcmp(argv[i], "--") != 0; ++i) eal_args.push_back(argv[i]);
    if (i == argc) {
        if (argc > 1 && (!std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help"))) {
            usage(stdout);
            return 0;
        }
        usage(stderr);
        die("missing '--' before railgated options");
    }
    net::daemon_config cfg;
    std::vector<std::string> devargs;
    unsigned stats_interval = 0;
    bool xdp_steer = true, idle_set = false;
    std::uint16_t udp_port = wire::default_udp_port;
    for (++i; i < argc; ++i) {
        const std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) die(a + " needs a value");
            return argv[++i];
        };
        auto last = [&]() -> net::rail_config& {
            if (cfg.rails.empty()) die(a + " must follow a --rail");
            return cfg.rails.back();
        };
        if (a == "-h" || a == "--help") {
            usage(stdout);
            return 0;
        } else if (a == "--rail") {
            net::rail_config r;
            const std::string d = val();
            r.name = "r" + std::to_string(cfg.rails.size());
            r.port_name = d.substr(0, d.find(','));
            if (r.port_name.empty()) die("--rail: empty device");
            devargs.push_back(d);
            cfg.rails.push_back(r);
        } else if (a == "--ip") {
            const std::string v = val();
            if (!net::parse_ipv4(v, last().ip)) die("--ip: '" + v + "' is not an IPv4 address");
        } else if (a == "--mtu") {
            last().mtu = static_cast<std::uint16_t>(num(a, val(), wire::min_mtu, wire::max_mtu));
        } else if (a == "--lcore") {
            last().lcore = static_cast<int>(num(a, val(), 0, RTE_MAX_LCORE - 1));
        } else if (a == "--port") {
            udp_port = static_cast<std::uint16_t>(num(a, val(), 1, 65535));
        } else if (a == "--pool") {
            cfg.default_pool = static_cast<unsigned>(num(a, val(), 1, 65535));
            cfg.max_pool = std::max(cfg.max_pool, cfg.default_pool);
        } else if (a == "--max-jobs") {
            cfg.max_jobs = static_cast<unsigned>(num(a, val(), 1, 1024));
        } else if (a == "--mbufs") {
            cfg.mbufs_per_rail = static_cast<unsigned>(num(a, val(), 1024, 1u << 22));
        } else if (a == "--idle") {
            const std::string v = val();
            if (v == "spin") cfg.idle = net::idle_policy::spin;
            else if (v == "yield") cfg.idle = net::idle_policy::yield;
            else die("--idle: '" + v + "' is not spin or yield");
            idle_set = true;
        } else if (a == "--no-xdp-steer") {
            xdp_steer = false;
        } else if (a == "--stats-interval") {
            stats_interval = static_cast<unsigned>(num(a, val(), 1, 86400));
        } else {
            usage(stderr);
            die("unknown option '" + a + "'");
        }
    }
    if (cfg.rails.empty()) {
        usage(stderr);
        die("no --rail given");
    }
    for (auto& r : cfg.rails) r.udp_port = udp_port;
    // vdevs go to the EAL as --vdev, PCI devices as -a.
    for (std::string& d : devargs) {
        if (d.rfind("net_af_xdp", 0) == 0) prepare_af_xdp(d, xdp_steer);
        // Kernel-backed rails need the kernel's packet work on the lcore's core.
        for (const char* k : {"net_af_xdp", "net_af_packet", "net_tap"})
            if (!idle_set && d.rfind(k, 0) == 0) cfg.idle = net::idle_policy::yield;
        eal_args.push_back(d.rfind("net_", 0) == 0 ? "--vdev" : "-a");
        eal_args.push_back(d);
    }
    try {
        net::eal eal(eal_args);
        net::print_topology(stdout);
        net::daemon d(cfg);
        d.print_placement(stdout);
        std::signal(SIGINT, on_signal);
        std::signal(SIGTERM, on_signal);
        d.launch();
        std::printf("railgated: ready\n");
        std::fflush(stdout);
        unsigned ticks = 0;
        while (!stop_requested) {
            usleep(100000);
            if (stats_interval && ++ticks % (stats_interval * 10) == 0) {
                d.print_stats(stdout);
                std::fflush(stdout);
            }
        }
        std::printf("railgated: stopping\n");
        d.stop();
        d.print_stats(stdout);
        std::fflush(stdout);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "railgated: %s\n", e.what());
        return 1;
    }
    return 0;
}
