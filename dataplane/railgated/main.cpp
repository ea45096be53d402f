// railgated: the poll-mode aggregation data plane.
//
//   railgated [EAL options] -- --rail DEVARGS --ip A.B.C.D [--mtu N] [--lcore L]
//                              [--rail ...] [--port P] [--pool N] [--max-jobs N]
//                              [--mbufs N] [--stats-interval S]
//
// A rail's DEVARGS is a DPDK vdev (net_af_packet0,iface=eth1 / net_af_xdp0,
// iface=eth1 / net_memif0,...) or a PCI address; --ip, --mtu and --lcore
// apply to the rail named just before them.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

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
                 "  --rail DEVARGS      a DPDK vdev (net_af_packet0,iface=eth1) or PCI address; repeatable\n"
                 "  --ip A.B.C.D        the rail's IPv4 address (railgated answers ARP and ping for it)\n"
                 "  --mtu N             the rail's MTU, %u..%u (default 1500)\n"
                 "  --lcore L           serve the rail from lcore L instead of the NUMA-local choice\n"
                 "  --port P            UDP port for every rail (default %u)\n"
                 "  --pool N            default slots per job per rail (default 64)\n"
                 "  --max-jobs N        concurrent jobs per rail (default 8)\n"
                 "  --mbufs N           mbufs per rail (default 8192)\n"
                 "  --stats-interval S  print counters every S seconds (default: only at exit)\n",
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
    for (const std::string& d : devargs) {
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
