// railbench: allreduce benchmark and bit-exactness check through railgated,
// in the style of nccl-tests' all_reduce_perf.
//
//   railbench --embedded                       # railgated + 4 workers in-process, 2 rails
//   railbench --transport udp --server 198.18.0.1 --rank 0 --workers 3 ...
//   railbench --transport verbs --server 198.18.0.1 --rank 0 --workers 3 ...
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "control/cli.hpp"
#include "control/version.hpp"
#include "client/railgate/connect.hpp"
#include "client/railgate/dpdk_transport.hpp"
#include "client/railgate/embedded.hpp"
#include "client/railgate/worker.hpp"
#include "dataplane/engine/engine.hpp"
#include "dataplane/fault/injector.hpp"
#include "dataplane/net/daemon.hpp"
#include "dataplane/net/eal.hpp"
#include "dataplane/qos/classify.hpp"
#include "dataplane/reduce/numeric.hpp"
#include "dataplane/reduce/reduce.hpp"
#include "dataplane/stats/report.hpp"
#include "tools/bench_common.hpp"

using namespace railgate;

namespace {

struct options {
    std::uint64_t min_bytes = 1024, max_bytes = 64ull << 20;
    double factor = 2;
    unsigned iters = 20, warmup = 5;
    bool iters_set = false;
    double duration_s = 0; // -D: each size's timed iterations, as many as fit (0: -n of them)
    bool barrier = true; // --no-barrier: no one-element allreduce before each operation
    unsigned workers = 4, rails = 2;
    wire::dtype dt = wire::dtype::fp32;
    std::uint16_t mtu = 1500;
    std::string transport = "dpdk";
    bool embedded = false;
    int rank = -1;
    std::string server;
    std::uint16_t port = wire::default_udp_port;
    std::uint32_t job = 1;
    std::uint64_t token = 0;           // --token or RAILGATE_TOKEN; random in --embedded
    std::uint16_t pool = 0;
    unsigned retries = 0;              // --retry: re-joins and re-runs after a recoverable failure
    fault::spec fault;                 // --fault (embedded: the virtual switch)
    unsigned stall_ms = 0;             // --stall-ms (embedded railgated; 0: its default)
    unsigned peer_timeout_ms = 0;      // --peer-timeout (0: the library's)
    unsigned connect_timeout_ms = 0;   // --connect-timeout (0: the library's)
    unsigned join_timeout_ms = 0;      // --join-timeout (0: the library's)
    unsigned op_timeout_ms = 0;        // --op-timeout (0: the library's)
    std::uint64_t seed = 1;
    std::vector<std::uint64_t> counts; // explicit element counts (--count), overrides -b/-e
    int gid_index = -1;                // verbs: -1 automatic
    std::uint64_t rail_rate = 0;       // embedded: shape each rail to this many bit/s
    std::uint64_t pace = 0;            // each worker's contributions per rail, bit/s
    client::cc_mode cc = client::cc_mode::queue; // --cc delay|queue|off
    std::uint64_t cc_target_ns = 0;    // --cc-target (0: the rail's base delay + headroom)
    bool tail_probes = true;           // --tail-probes on|off
    unsigned ecn_mark = 0;             // embedded: railgated marks CE behind this many queued frames
    bool rail_threads = false;         // one pipeline per rail on the TBB engine
    enum class share { automatic, on, off } lcore_workers = share::automatic; // --lcore-workers
    bool fabric_offload = true; // --checksums offload|software (embedded)
    // --transport dpdk outside --embedded: per rail, a DPDK device (vdev
    // devargs or PCI address) and this worker's address on it.
    std::vector<std::pair<std::string, std::uint32_t>> dpdk_rails;
    std::string policy;                // embedded: rail|lag
    unsigned flows = 0;                // embedded: independent one-worker jobs
    bool lag_table = false;
    bool isolation = false;
    enum class format { table, json, csv } out = format::table; // --json, --csv: stdout is only the results
};

// Where the commentary goes: with the table, stdout (nccl-tests' "#" lines);
// with --json or --csv, stderr, so that stdout parses.
std::FILE* notes = stdout;

// nccl-tests' names for the types (-d float, the table's "type" column).
std::string_view nccl_type_name(wire::dtype d) {
    switch (d) {
    case wire::dtype::fp32: return "float";
    case wire::dtype::bf16: return "bfloat16";
    case wire::dtype::fp16: return "half";
    default: return "int32";
    }
}

bool parse_type(const std::string& v, wire::dtype& out) {
    for (wire::dtype d : {wire::dtype::fp32, wire::dtype::bf16, wire::dtype::fp16, wire::dtype::int32})
        if (v == nccl_type_name(d)) return out = d, true;
    return wire::dtype_from_name(v, out);
}

[[noreturn]] void die(const std::string& msg);

// The first of the launchers' rank (or size) variables that is set: Open
// MPI, MPICH/PMI (Slurm's too), Slurm.
int env_number(std::initializer_list<const char*> names) {
    for (const char* n : names)
        if (const char* v = std::getenv(n); v && *v) {
            char* end = nullptr;
            const long x = std::strtol(v, &end, 10);
            if (*end || x < 0 || x >= static_cast<long>(wire::max_world)) die(std::string(n) + "='" + v + "' is not a rank");
            return static_cast<int>(x);
        }
    return -1;
}

void usage(std::FILE* f) {
    std::fprintf(f,
                 "usage: railbench [options]\n"
                 "  -V, --version           the version, the commit, and what it was built with\n"
                 "  -b, --minbytes SIZE     smallest message (default 1K; K/M/G suffixes)\n"
                 "  -e, --maxbytes SIZE     largest message (default 64M)\n"
                 "  -f, --stepfactor F      size multiplier (default 2)\n"
                 "  -n, --iters N           timed iterations per size, 1 or more (default 20)\n"
                 "  -D, --duration SEC      instead of -n: each size's timed iterations for SEC seconds, as\n"
                 "                          many as fit (at least 1; ranks in other processes agree through\n"
                 "                          the barrier when to stop, so each runs the same number)\n"
                 "  -w, --warmup_iters N    warm-up iterations (default 5)\n"
                 "      --no-barrier        with ranks in other processes, no one-element allreduce before\n"
                 "                          each operation (untimed; it keeps a rank still checking the last\n"
                 "                          result from being timed against the rest): each operation alone\n"
                 "      --count N[,N...]    exact element counts instead of -b/-e/-f\n"
                 "      --workers W         world size (default 4)\n"
                 "      --rails R           rails in embedded mode (default 2)\n"
                 "  -d, --dtype T           float|bfloat16|half|int32, nccl-tests' names (or fp32|bf16|fp16|\n"
                 "                          int32; default float); the table prints nccl-tests' names\n"
                 "  -o, --op sum            the reduction (railgated sums)\n"
                 "      --json | --csv      the results only on stdout, as one JSON object or CSV rows; the\n"
                 "                          commentary (\"#\" lines, placement, latency) goes to stderr\n"
                 "      --mtu N             rail MTU in embedded mode (default 1500)\n"
                 "      --pool N            slots per rail to ask for (default: railgated's; --embedded:\n"
                 "                          64 KiB of chunks, 4 to 64 slots; 64 under 2 KiB;\n"
                 "                          4 jumbo chunks)\n"
                 "      --transport T       udp|dpdk|verbs (default dpdk)\n"
                 "      --embedded          railgated and the W workers in this process over\n"
                 "                          in-process DPDK rings (no privileges, no setup)\n"
                 "      --server IP         railgated's rail-0 address (udp, verbs)\n"
                 "      --port P            railgated's UDP port, also its rdma_cm port (default %u)\n"
                 "      --rank R            this process's rank (udp, verbs); without it, the launcher's:\n"
                 "                          OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID (and --workers\n"
                 "                          from OMPI_COMM_WORLD_SIZE, PMI_SIZE or SLURM_NTASKS)\n"
                 "      --gid-index N       verbs: the local GID index (default: RAILGATE_IB_GID_INDEX, else the RoCEv2 IPv4 GID)\n"
                 "      --job ID --token T  job id and its 64-bit secret token (every rank the same; default\n"
                 "                          $RAILGATE_TOKEN; --embedded makes a random one). Make one with\n"
                 "                          RAILGATE_TOKEN=$(od -An -N8 -tu8 /dev/urandom)\n"
                 "      --retry N           after a failure railgate can recover from (railgated restarted, a\n"
                 "                          rail down, a rank restarted, the job expired), re-join and run the\n"
                 "                          operation again, up to N times; a first join that fails so (the\n"
                 "                          job ended while it assembled) is tried again too. railgated\n"
                 "                          silent on every rail: first the job is asked again, kept, until\n"
                 "                          the join timeout (a pause: the operation resumes). A re-join\n"
                 "                          left unanswered for the join timeout (a slow restart) uses up\n"
                 "                          a retry and goes on. Each recovery is told on stderr, with the\n"
                 "                          time and the rank\n"
                 "      --peer-timeout MS   a rail silent this long is down, every rail silent is railgated\n"
                 "                          gone (default 1000)\n"
                 "      --join-timeout MS   how long a JOIN may take (default 5000)\n"
                 "      --connect-timeout MS  verbs: how long a rail's connect may take, in attempts of 1 s,\n"
                 "                          then each twice the last; each unanswered one is told on\n"
                 "                          stderr (default 5000)\n"
                 "      --op-timeout MS     an operation without a result this long fails, saying where each\n"
                 "                          rail stood (default 60000)\n"
                 "      --fault SPEC        embedded: the virtual switch drops, duplicates, reorders and\n"
                 "                          corrupts frames both ways: drop=P,dup=P,reorder=P,corrupt=P,seed=S\n"
                 "                          [,rank=N][,type=T][,dir=rx|tx] (one rank's messages; one message\n"
                 "                          type, e.g. result or leave_ack; one way)\n"
                 "      --stall-ms N        embedded: railgated's stall time (default 1000)\n"
                 "      --seed S            input seed (all ranks must agree)\n"
                 "      --pace RATE         each worker paces its contributions on each rail to RATE\n"
                 "                          (its traffic class's share: a shaped rail's rate / W)\n"
                 "      --cc delay|queue|off  congestion control: each rail's window of chunks in flight\n"
                 "                          follows the round trips it measures, railgated's queue depth\n"
                 "                          and ECN marks (delay), railgated's queue depth, marks and\n"
                 "                          timeouts only (queue, the default), or is the slot pool (off)\n"
                 "      --cc-target US      the round trip the window aims at (default: the rail's\n"
                 "                          smallest round trip plus max(100 us, itself))\n"
                 "      --tail-probes on|off  once an operation's chunks are all out, two round trips\n"
                 "                          without a result send the newest again (RACK-TLP; default\n"
                 "                          on); off: losses among the last chunks wait for a timeout\n"
                 "      --ecn-mark N        embedded, with --rail-rate: railgated marks ECN CE on results\n"
                 "                          queued behind N or more (what --cc delay and queue react to)\n"
                 "      --rail-threads      udp, dpdk: one pipeline per rail on the TBB engine's threads\n"
                 "      --lcore-workers auto|on|off  embedded: railgated's lcore drives some of the\n"
                 "                          workers' rails in its idle passes, this thread the others: half\n"
                 "                          with jumbo chunks, a quarter with small ones (on); or this\n"
                 "                          thread drives all (off); auto: operations of 8 windows or more\n"
                 "                          try half, a quarter and none on untimed trial operations and\n"
                 "                          keep the quickest (not under --fault)\n"
                 "      --checksums offload|software  embedded: the switch's ports offload UDP checksums, as\n"
                 "                          lo and veths do (offload, the default), or every frame's are\n"
                 "                          computed and checked in software\n"
                 "      --dpdk-rail DEVARGS@IP  dpdk outside --embedded: this worker's DPDK device for the\n"
                 "                          next rail and its address there, e.g. net_af_xdp0,iface=eth1@10.0.0.10\n"
                 "                          or net_af_packet0,iface=eth1@10.0.0.10 (repeat per rail, rail 0 first)\n"
                 "LAG versus rail (embedded):\n"
                 "      --rail-rate RATE    shape every rail to RATE (1Gbit, 250Mbit: a link speed)\n"
                 "      --policy rail|lag   railgated's policy: of the W-worker job, or with --flows or\n"
                 "                          --rail-rate of every flow\n"
                 "      --flows N           N one-worker jobs at once (N flows) instead of one W-worker job;\n"
                 "                          prints their total throughput against one link\n"
                 "      --lag-table         rail with 1 flow, lag with 1 flow, lag with --flows (default 4)\n"
                 "Traffic classes (embedded, one rail shaped to --rail-rate, default 2Gbit):\n"
                 "      --isolation         a 1 KiB ping-pong in strict TC 5 (DSCP 46) alone and against bulk\n"
                 "                          traffic in TC 0, then two bulk flows in TC 0 (ETS weight 3) and\n"
                 "                          TC 1 (weight 1): p99 and shares\n",
                 wire::default_udp_port);
}

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "railbench: %s\n", msg.c_str());
    std::exit(2);
}

std::uint64_t parse_uint(const std::string& flag, const std::string& v, std::uint64_t max) {
    std::uint64_t x = 0;
    if (!parse_unsigned(v, x) || x > max) die(flag + ": '" + v + "' is not an integer in 0.." + std::to_string(max));
    return x;
}

options parse(int argc, char** argv) {
    options o;
    bool workers_set = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) die(a + " needs a value");
            return argv[++i];
        };
        if (a == "-h" || a == "--help") {
            usage(stdout);
            std::exit(0);
        } else if (a == "-V" || a == "--version") {
            std::fputs(version_text("railbench").c_str(), stdout);
            std::exit(0);
        } else if (a == "-b" || a == "--minbytes") {
            if (!bench::parse_size(val(), o.min_bytes)) die(a + ": bad size");
        } else if (a == "-e" || a == "--maxbytes") {
            if (!bench::parse_size(val(), o.max_bytes)) die(a + ": bad size");
        } else if (a == "-f" || a == "--stepfactor") {
            const std::string v = val();
            try {
                o.factor = std::stod(v);
            } catch (...) {
                die(a + ": bad factor '" + v + "'");
            }
            if (!(o.factor > 1.0)) die(a + ": factor must be > 1");
        } else if (a == "-n" || a == "--iters") {
            o.iters = static_cast<unsigned>(parse_uint(a, val(), 1000000));
            if (o.iters == 0) die(a + " must be at least 1 (the timed iterations; -w sets the untimed ones)");
            o.iters_set = true;
        } else if (a == "-D" || a == "--duration") {
            const std::string v = val();
            try {
                std::size_t end = 0;
                o.duration_s = std::stod(v, &end);
                if (end != v.size()) throw std::invalid_argument(v);
            } catch (...) {
                die(a + ": '" + v + "' is not a number of seconds");
            }
            if (!(o.duration_s > 0 && o.duration_s <= 86400)) die(a + ": more than 0 and at most 86400 seconds");
        } else if (a == "-w" || a == "--warmup_iters") {
            o.warmup = static_cast<unsigned>(parse_uint(a, val(), 1000000));
        } else if (a == "--no-barrier") {
            o.barrier = false;
        } else if (a == "--count") {
            std::string v = val();
            std::size_t start = 0;
            while (start <= v.size()) {
                const std::size_t comma = v.find(',', start);
                o.counts.push_back(parse_uint(a, v.substr(start, comma - start), wire::max_tensor_elems));
                if (comma == std::string::npos) break;
                start = comma + 1;
            }
        } else if (a == "--workers" || a == "--nranks") {
            o.workers = static_cast<unsigned>(parse_uint(a, val(), wire::max_world));
            workers_set = true;
        } else if (a == "--rails") {
            o.rails = static_cast<unsigned>(parse_uint(a, val(), 8));
        } else if (a == "--dtype" || a == "-d" || a == "--datatype") {
            const std::string v = val();
            if (!parse_type(v, o.dt))
                die(a + ": unknown '" + v + "' (float|bfloat16|half|int32, or fp32|bf16|fp16|int32)");
        } else if (a == "-o" || a == "--op") {
            const std::string v = val();
            if (v != "sum") die(a + ": '" + v + "': railgated reduces with sum only");
        } else if (a == "--json") {
            o.out = options::format::json;
        } else if (a == "--csv") {
            o.out = options::format::csv;
        } else if (a == "--mtu") {
            unsigned mtu = 0;
            if (const std::string e = wire::parse_mtu(val(), mtu); !e.empty()) die("--mtu: " + e);
            o.mtu = static_cast<std::uint16_t>(mtu);
        } else if (a == "--pool") {
            o.pool = static_cast<std::uint16_t>(parse_uint(a, val(), 65535));
        } else if (a == "--transport") {
            o.transport = val();
            if (o.transport != "udp" && o.transport != "dpdk" && o.transport != "verbs")
                die("--transport: udp, dpdk or verbs");
        } else if (a == "--rail-rate") {
            const std::string v = val();
            if (!qos::parse_rate(v, o.rail_rate)) die("--rail-rate: '" + v + "' is not a rate like 1Gbit or 250Mbit");
        } else if (a == "--pace") {
            const std::string v = val();
            if (!qos::parse_rate(v, o.pace)) die("--pace: '" + v + "' is not a rate like 1Gbit or 250Mbit");
        } else if (a == "--cc") {
            const std::string v = val();
            if (v != "delay" && v != "queue" && v != "off") die("--cc: delay, queue or off, not '" + v + "'");
            o.cc = v == "off" ? client::cc_mode::off : v == "delay" ? client::cc_mode::delay : client::cc_mode::queue;
        } else if (a == "--tail-probes") {
            const std::string v = val();
            if (v != "on" && v != "off") die("--tail-probes: on or off, not '" + v + "'");
            o.tail_probes = v == "on";
        } else if (a == "--ecn-mark") {
            o.ecn_mark = static_cast<unsigned>(parse_uint(a, val(), 4096));
            if (!o.ecn_mark) die("--ecn-mark: 1..4096 queued frames");
        } else if (a == "--cc-target") {
            o.cc_target_ns = parse_uint(a, val(), 10'000'000) * 1000;
        } else if (a == "--dpdk-rail") {
            const std::string v = val();
            std::pair<std::string, std::uint32_t> rail;
            if (!client::parse_dpdk_rail(v, rail))
                die("--dpdk-rail: '" + v + "' is not DEVARGS@IP (net_af_xdp0,iface=eth1@10.0.0.10)");
            o.dpdk_rails.push_back(rail);
        } else if (a == "--rail-threads") {
            o.rail_threads = true;
        } else if (a == "--lcore-workers") {
            const std::string v = val();
            if (v == "auto") o.lcore_workers = options::share::automatic;
            else if (v == "on") o.lcore_workers = options::share::on;
            else if (v == "off") o.lcore_workers = options::share::off;
            else die("--lcore-workers: '" + v + "' is not auto, on or off");
        } else if (a == "--checksums") {
            const std::string v = val();
            if (v == "offload") o.fabric_offload = true;
            else if (v == "software") o.fabric_offload = false;
            else die("--checksums: '" + v + "' is not offload or software");
        } else if (a == "--policy") {
            o.policy = val();
            if (o.policy != "rail" && o.policy != "lag") die("--policy: rail or lag");
        } else if (a == "--flows") {
            o.flows = static_cast<unsigned>(parse_uint(a, val(), 64));
            if (o.flows == 0) die("--flows must be at least 1");
        } else if (a == "--lag-table") {
            o.lag_table = true;
        } else if (a == "--isolation") {
            o.isolation = true;
        } else if (a == "--gid-index") {
            o.gid_index = static_cast<int>(parse_uint(a, val(), 255));
        } else if (a == "--embedded") {
            o.embedded = true;
        } else if (a == "--server") {
            o.server = val();
        } else if (a == "--port") {
            o.port = static_cast<std::uint16_t>(parse_uint(a, val(), 65535));
        } else if (a == "--rank") {
            o.rank = static_cast<int>(parse_uint(a, val(), wire::max_world - 1));
        } else if (a == "--job") {
            o.job = static_cast<std::uint32_t>(parse_uint(a, val(), UINT32_MAX));
        } else if (a == "--token") {
            o.token = parse_uint(a, trim_blanks(val()), UINT64_MAX); // "$(od ...)" keeps od's blanks
            if (!o.token) die("--token: 0 is not a token");
        } else if (a == "--retry") {
            o.retries = static_cast<unsigned>(parse_uint(a, val(), 1000));
        } else if (a == "--peer-timeout") {
            o.peer_timeout_ms = static_cast<unsigned>(parse_uint(a, val(), 3600000));
        } else if (a == "--connect-timeout") {
            o.connect_timeout_ms = static_cast<unsigned>(parse_uint(a, val(), 3600000));
            if (!o.connect_timeout_ms) die("--connect-timeout: 0 ms");
        } else if (a == "--join-timeout") {
            o.join_timeout_ms = static_cast<unsigned>(parse_uint(a, val(), 3600000));
        } else if (a == "--op-timeout") {
            o.op_timeout_ms = static_cast<unsigned>(parse_uint(a, val(), 3600000));
            if (!o.op_timeout_ms) die("--op-timeout: 0 ms");
        } else if (a == "--stall-ms") {
            o.stall_ms = static_cast<unsigned>(parse_uint(a, val(), 3600000));
            if (o.stall_ms < 10) die("--stall-ms: at least 10");
        } else if (a == "--fault") {
            if (std::string e = fault::parse(val(), o.fault); !e.empty()) die("--fault: " + e);
        } else if (a == "--seed") {
            o.seed = parse_uint(a, val(), UINT64_MAX);
        } else {
            usage(stderr);
            die("unknown option '" + a + "'");
        }
    }
    // Under mpirun or srun the rank and world size come from the launcher.
    if (!o.embedded && o.rank < 0) o.rank = env_number({"OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"});
    if (!workers_set && !o.embedded)
        if (const int n = env_number({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}); n > 0) o.workers = static_cast<unsigned>(n);
    if (o.workers == 0) die("--workers must be at least 1");
    if (o.out != options::format::table && (o.lag_table || o.isolation))
        die("--json and --csv report the allreduce table; --lag-table and --isolation print their own");
    if (!o.token)
        if (const char* t = std::getenv("RAILGATE_TOKEN"); t && *t) o.token = parse_uint("RAILGATE_TOKEN", trim_blanks(t), UINT64_MAX);
    if (!o.token) {
        if (!o.embedded)
            die("a job token is needed: --token T or RAILGATE_TOKEN (the same random number on every rank, e.g. "
                "RAILGATE_TOKEN=$(od -An -N8 -tu8 /dev/urandom))");
        o.token = client::random_token();
    }
    if (!o.embedded && (o.fault.any() || o.stall_ms))
        die("--fault and --stall-ms apply to --embedded (railgated has --fault and --stall-ms of its own)");
    if (o.rails == 0) die("--rails must be at least 1");
    if (o.min_bytes == 0 || o.min_bytes > o.max_bytes) die("need 0 < minbytes <= maxbytes");
    if (o.embedded && o.transport != "dpdk") die("--embedded runs over in-process DPDK rings: use --transport dpdk");
    if (!o.embedded && (o.rail_rate || !o.policy.empty() || o.flows || o.lag_table || o.isolation))
        die("--rail-rate, --policy, --flows, --lag-table and --isolation apply to --embedded (shape railgated's rails "
            "in its config)");
    if (o.isolation && (o.lag_table || !o.policy.empty() || o.flows)) die("--isolation runs on its own");
    if (o.duration_s) {
        if (o.iters_set) die("-n and -D: one or the other (-D runs as many timed iterations as fit)");
        if (o.rail_rate || o.flows || o.lag_table || o.isolation)
            die("-D times the allreduce table; --rail-rate, --flows, --lag-table and --isolation run -n iterations");
        if (!o.embedded && o.workers > 1 && !o.barrier)
            die("-D with ranks in other processes needs the barrier (they agree through it when to stop): drop "
                "--no-barrier");
    }
    if (o.ecn_mark && !(o.embedded && o.rail_rate))
        die("--ecn-mark applies to --embedded with --rail-rate (a shaped rail's queue marks; railgated's own rails: "
            "ecn_mark in its config)");
    if (!o.dpdk_rails.empty() && (o.embedded || o.transport != "dpdk"))
        die("--dpdk-rail applies to --transport dpdk without --embedded");
    if (o.rail_threads && (o.embedded || o.transport == "verbs"))
        die("--rail-threads applies to workers over udp or dpdk outside --embedded (one socket or port per rail)");
    if (o.lag_table && !o.policy.empty()) die("--lag-table runs both policies: drop --policy");
    if (!o.embedded) {
        if (o.transport == "dpdk" && o.dpdk_rails.empty())
            die("--transport dpdk outside --embedded needs --dpdk-rail DEVARGS@IP, one per rail");
        if (o.server.empty()) die("--server IP is needed with --transport " + o.transport);
        if (o.rank < 0) die("--rank is needed with --transport " + o.transport);
        if (static_cast<unsigned>(o.rank) >= o.workers) die("--rank must be below --workers");
    }
    return o;
}

std::vector<std::uint64_t> counts_of(const options& o) {
    if (!o.counts.empty()) return o.counts;
    std::vector<std::uint64_t> v;
    const std::size_t es = wire::dtype_size(o.dt);
    for (double b = static_cast<double>(o.min_bytes); b <= static_cast<double>(o.max_bytes) * 1.0000001; b *= o.factor) {
        const auto c = static_cast<std::uint64_t>(b) / es;
        if (c && (v.empty() || v.back() != c)) v.push_back(c);
    }
    return v;
}

// The largest size's buffers: every rank's input (the reference is built
// here), the reference, and each local rank's own (embedded: every rank,
// or two per flow). Past 3/4 of this host's memory the run swapped for
// minutes (--embedded --count 2000000000: 40 GB on 2 workers): refused.
void check_memory(const options& o) {
    std::uint64_t max_count = 0;
    for (auto c : counts_of(o)) max_count = std::max(max_count, c);
    const double per_buffer = static_cast<double>(max_count) * static_cast<double>(wire::dtype_size(o.dt));
    const double buffers = o.flows ? 2.0 * o.flows : o.workers + 1.0 + (o.embedded ? o.workers : 1.0);
    const std::uint64_t bytes = net::host_memory_bytes();
    if (!bytes) return;
    const double host = static_cast<double>(bytes), gib = 1024.0 * 1024 * 1024;
    if (per_buffer * buffers <= host * 0.75) return;
    char t[256];
    std::snprintf(t, sizeof t,
                  "%" PRIu64 " elements of %s: %.0f buffers of %.1f GiB, over 3/4 of this host's %.1f GiB; lower --count "
                  "or -e",
                  max_count, wire::dtype_name(o.dt).data(), buffers, per_buffer / gib, host / gib);
    die(t);
}

// One size of the table.
struct row {
    std::uint64_t bytes, count;
    double time_us, algbw, busbw;
    std::uint64_t wrong;
    unsigned iters; // timed
};

// --json: one object (the run, then a row per size, nccl-tests' columns
// and units); --csv: a header and a row per size. Nothing else on stdout.
void print_machine(const options& o, const std::vector<unsigned>& ranks, const std::vector<row>& rows,
                   std::uint64_t wrong, double avg_busbw) {
    if (o.out == options::format::csv) {
        std::printf("size,count,type,redop,time_us,algbw_GBps,busbw_GBps,wrong\n");
        for (const row& r : rows)
            std::printf("%" PRIu64 ",%" PRIu64 ",%s,sum,%.3f,%.4f,%.4f,%" PRIu64 "\n", r.bytes, r.count,
                        std::string(nccl_type_name(o.dt)).c_str(), r.time_us, r.algbw, r.busbw, r.wrong);
        return;
    }
    if (o.out != options::format::json) return;
    std::printf("{\"tool\": \"railbench\", \"version\": \"%s\", \"git\": \"%s\", \"mode\": \"%s\", "
                "\"transport\": \"%s\", \"workers\": %u, \"ranks\": [",
                version(), git_describe(), o.embedded ? "embedded" : "remote", o.transport.c_str(), o.workers);
    for (std::size_t i = 0; i < ranks.size(); ++i) std::printf("%s%u", i ? ", " : "", ranks[i]);
    std::printf("], \"type\": \"%s\", \"redop\": \"sum\", ", std::string(nccl_type_name(o.dt)).c_str());
    if (o.duration_s) std::printf("\"duration_s\": %g, ", o.duration_s);
    else std::printf("\"iters\": %u, ", o.iters);
    std::printf("\"warmup_iters\": %u, \"results\": [", o.warmup);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const row& r = rows[i];
        std::printf("%s{\"size\": %" PRIu64 ", \"count\": %" PRIu64 ", \"time_us\": %.3f, \"algbw_GBps\": %.6g, "
                    "\"busbw_GBps\": %.6g, \"wrong\": %" PRIu64 ", \"iters\": %u}",
                    i ? ", " : "", r.bytes, r.count, r.time_us, r.algbw, r.busbw, r.wrong, r.iters);
    }
    std::printf("], \"wrong\": %" PRIu64 ", \"avg_busbw_GBps\": %.6g}\n", wrong, avg_busbw);
}

// Runs f, the long work between operations (allocating the buffers, making
// the inputs and the reference, checking a result). With ranks in other
// processes, a rank that starts the next operation first makes railgated
// wait for this one: work longer than the job's stall time (big counts, the
// sanitizers' slowdown) would look like a dead rank, so big work runs under
// client::alive_while. Small work runs here: no thread per iteration.
template <class F>
void between_ops(std::span<client::worker* const> ws, bool others, std::uint64_t bytes, F&& f) {
    if (!others || bytes < (std::uint64_t{1} << 20)) return f();
    client::alive_while(ws, f);
}

// -D: a rank's vote in the barrier's element, 1 (its time is up) or 0 in
// the job's type; the sum is nonzero once any rank's is.
void put_vote(void* p, wire::dtype dt, bool stop) noexcept {
    const float v = stop ? 1.0f : 0.0f;
    switch (dt) {
    case wire::dtype::fp32: std::memcpy(p, &v, sizeof v); return;
    case wire::dtype::int32: {
        const std::int32_t i = stop;
        std::memcpy(p, &i, sizeof i);
        return;
    }
    case wire::dtype::bf16:
    case wire::dtype::fp16: {
        const std::uint16_t h = dt == wire::dtype::bf16 ? reduce::f32_to_bf16(v) : reduce::f32_to_f16(v);
        std::memcpy(p, &h, sizeof h);
        return;
    }
    }
}

// Runs the table for `ranks` local workers (all W in embedded mode, one in
// udp mode). Returns the number of wrong elements (or errors).
std::uint64_t run_table(const options& o, std::vector<client::worker*>& ws, const std::vector<unsigned>& ranks,
                        stats::histogram& lat, stats::histogram& own, net::daemon* host) {
    const std::size_t es = wire::dtype_size(o.dt);
    const std::vector<std::uint64_t> counts = counts_of(o);
    std::uint64_t max_count = 0;
    for (auto c : counts) max_count = std::max(max_count, c);
    std::vector<std::vector<std::uint8_t>> in(o.workers), buf(ranks.size());
    std::vector<std::uint8_t> ref;
    const bool others = ranks.size() < o.workers;
    between_ops(ws, others, max_count * es * (ranks.size() + 1), [&] {
        ref.resize(max_count * es);
        for (auto& b : buf) b.resize(max_count * es);
    });
    // With `host` (embedded), railgated's lcore, in the passes where its
    // rails had nothing, drives some of the workers' rails and this thread
    // the others (client::shared_rails): the two cores share the workers'
    // copies. How many is measured (auto), per size, on trial operations
    // before the warm-up: none, a quarter and half of the rails, each
    // twice in turn, the quickest (its best) kept. It depends on the
    // chunks and the machine: with 1408-byte chunks railgated's core has
    // a frame every few hundred ns of its own, and half left an operation
    // as long as its own work plus a worker's (2 workers, 64 MiB: 1.69
    // against 1.86 GB/s for a quarter); with jumbo chunks half was best
    // (3.74 against 3.45). With the data in the cache an operation waits on
    // turnarounds, which the lcore's guest lengthens: 2 workers at MTU
    // 9000, 4 and 16 MiB, lost 7-18% with half on the runner with a 32 MiB
    // last-level cache, and gain 13-33% on this one (doc/performance.md).
    // Only operations of 8 windows (every rail's slots) or more share: a
    // shorter one is a few round trips, each quicker from one thread. `on`
    // skips the trials: half with jumbo chunks, a quarter with small ones.
    const std::size_t op_rails = ws.size() * std::max<std::size_t>(1, ws[0]->stripe_rails().size());
    const std::size_t quarter = std::max<std::size_t>(1, op_rails / 4), half = op_rails / 2;
    // What an operation of n elements tries, first to last (empty: this
    // thread drives every rail: off, too short, or not embedded).
    auto lcore_rails = [&](std::uint64_t n) -> std::vector<std::size_t> {
        if (!host || ws.size() < 2 || o.lcore_workers == options::share::off) return {};
        const auto& a = ws[0]->job_info();
        if (o.lcore_workers == options::share::on) return {a.chunk_bytes >= 4096 ? half : quarter};
        // Under injected faults the recoveries, not the placement, set an
        // operation's time (and trial operations would add to the counts
        // of resends that tests bound).
        if (o.fault.any()) return {};
        const std::uint64_t bytes = n * es;
        if (bytes < 8ull * a.pool_size * a.chunk_bytes * std::max<unsigned>(1, a.n_rails)) return {};
        // Alone last: the trials' first operation is the coldest.
        return half > quarter ? std::vector<std::size_t>{half, quarter, 0} : std::vector<std::size_t>{half, 0};
    };
    net::lcore_guest guest;
    guest.step = [](void* p) noexcept { return static_cast<client::shared_rails*>(p)->pass(true); };
    std::vector<std::string> shares; // what auto chose, per size

    std::fprintf(notes, "#\n# %12s %12s %8s %6s %12s %12s %12s %8s\n", "size", "count", "type", "redop", "time(us)",
                "algbw(GB/s)", "busbw(GB/s)", "#wrong");
    std::uint64_t total_wrong = 0;
    double busbw_sum = 0;
    std::vector<row> rows;
    for (std::uint64_t count : counts) {
        // Every rank's input, to build the rank-order reference locally.
        between_ops(ws, others, count * es * o.workers, [&] {
            std::vector<const void*> ptrs;
            for (unsigned r = 0; r < o.workers; ++r) {
                in[r].resize(count * es);
                bench::fill_input(in[r].data(), count, o.dt, r, o.seed + count);
                ptrs.push_back(in[r].data());
            }
            bench::reference_sum(ref.data(), ptrs, count, o.dt);
        });
        double total_s = 0;
        std::uint64_t wrong = 0;
        // The lcore's rails in this operation: with one candidate, it; with
        // more, each in turn over the trials, then the quickest.
        const std::vector<std::size_t> tries = lcore_rails(count);
        const unsigned trials = tries.size() > 1 ? 2 * static_cast<unsigned>(tries.size()) : 0;
        std::size_t k = tries.empty() ? 0 : tries[0];
        std::vector<double> best(tries.size(), 1e300);
        auto allreduce = [&](const std::vector<void*>& b, std::uint64_t n) {
            if (ws.size() == 1) { // one pipeline per rail with --rail-threads
                ws[0]->allreduce(b[0], n, o.dt);
                return;
            }
            for (std::size_t l = 0; l < ws.size(); ++l) ws[l]->start(b[l], n, o.dt);
            if (!k) return client::complete(ws);
            client::shared_rails rails(ws, k);
            guest.ctx = &rails;
            if (!host->host(guest)) return client::complete(ws);
            rails.drive(guest.done); // and the lcore's, if its loop stops first
            client::complete(ws);    // ends the operations
        };
        std::vector<void*> whole, one;
        std::vector<std::uint8_t> scratch(ws.size() * es);
        for (std::size_t l = 0; l < ws.size(); ++l) {
            whole.push_back(buf[l].data());
            one.push_back(scratch.data() + l * es);
        }
        // -D: from the first timed operation's start, until a rank's time
        // is up (at least one).
        const unsigned first_timed = trials + o.warmup;
        unsigned timed = 0;
        std::chrono::steady_clock::time_point timed_from{};
        for (unsigned it = 0; o.duration_s > 0 || it < first_timed + o.iters; ++it) {
            const bool up = o.duration_s > 0 && it > first_timed &&
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - timed_from).count() >=
                                o.duration_s;
            // Here, not under between_ops: a copy, short, and the timed
            // operation reads the buffer from this thread's caches.
            for (std::size_t l = 0; l < ranks.size(); ++l) bench::restore_input(buf[l].data(), in[ranks[l]].data(), count * es);
            // With ranks in other processes, a barrier first (a one-element
            // allreduce, untimed), as tools/gloo_allreduce.py has: a rank
            // still checking the last result is not timed against the rest.
            auto failed = [&] {
                for (auto* w : ws)
                    if (!w->error().empty()) {
                        std::fprintf(stderr, "railbench: allreduce failed: %s\n", w->error().c_str());
                        return true;
                    }
                return false;
            };
            if (others && o.barrier) {
                if (o.duration_s)
                    for (std::size_t l = 0; l < ws.size(); ++l) put_vote(one[l], o.dt, up);
                allreduce(one, 1);
                if (failed()) return UINT64_MAX;
                if (o.duration_s && std::any_of(scratch.begin(), scratch.end(), [](std::uint8_t b) { return b != 0; }))
                    break;
            } else if (up) {
                break;
            }
            if (it == first_timed)
                for (auto* w : ws) {
                    w->chunk_rtt().reset();
                    w->chunk_rtt_own().reset();
                }
            if (it < trials) k = tries[it % tries.size()];
            if (trials && it == trials) {
                const std::size_t i = static_cast<std::size_t>(std::min_element(best.begin(), best.end()) - best.begin());
                k = tries[i];
                std::string t = std::to_string(count * es) + " B: " + std::to_string(k) + " (";
                for (std::size_t j = 0; j < tries.size(); ++j)
                    t += (j ? ", " : "") + std::to_string(tries[j]) + " " + std::to_string(static_cast<long>(best[j] * 1e6)) + " us";
                shares.push_back(t + ")");
            }
            const auto t0 = std::chrono::steady_clock::now();
            if (it == first_timed) timed_from = t0;
            allreduce(whole, count);
            const auto t1 = std::chrono::steady_clock::now();
            if (failed()) return UINT64_MAX;
            if (it < trials) {
                double& b = best[it % tries.size()];
                b = std::min(b, std::chrono::duration<double>(t1 - t0).count());
            }
            if (it >= first_timed) {
                total_s += std::chrono::duration<double>(t1 - t0).count();
                ++timed;
            }
            between_ops(ws, others, count * es * ranks.size(), [&] {
                for (std::size_t l = 0; l < ranks.size(); ++l)
                    wrong += bench::count_wrong(buf[l].data(), ref.data(), count, o.dt);
            });
        }
        for (auto* w : ws) {
            lat.merge(w->chunk_rtt());
            own.merge(w->chunk_rtt_own());
        }
        const double t = total_s / timed;
        const double bytes = static_cast<double>(count * es);
        const double algbw = bytes / t / 1e9;
        const double busbw = algbw * 2.0 * (o.workers - 1) / o.workers;
        busbw_sum += busbw;
        total_wrong += wrong;
        rows.push_back({count * es, count, t * 1e6, algbw, busbw, wrong, timed});
        if (o.out == options::format::table) {
            std::printf("  %12" PRIu64 " %12" PRIu64 " %8s %6s %12.2f %12.3f %12.3f %8" PRIu64 "\n", count * es, count,
                        std::string(nccl_type_name(o.dt)).c_str(), "sum", t * 1e6, algbw, busbw, wrong);
            std::fflush(stdout);
        }
    }
    if (!shares.empty()) {
        std::fprintf(notes, "# rails of %zu railgated's lcore drove (auto: the quickest of trial operations):", op_rails);
        for (const std::string& x : shares) std::fprintf(notes, " %s;", x.c_str());
        std::fprintf(notes, "\n");
    }
    if (o.duration_s) {
        std::fprintf(notes, "# timed iterations per size in %g s:", o.duration_s);
        for (const row& r : rows) std::fprintf(notes, " %u", r.iters);
        std::fprintf(notes, "\n");
    }
    std::fprintf(notes, "# Out of bounds values : %" PRIu64 " %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
    std::fprintf(notes, "# Avg bus bandwidth    : %.3f GB/s\n#\n", busbw_sum / static_cast<double>(counts.size()));
    print_machine(o, ranks, rows, total_wrong, busbw_sum / static_cast<double>(counts.size()));
    return total_wrong;
}

// "# retransmits N (A after a timeout, T tail probes), Q quiet timeouts
// (...), S spurious (...)" over the workers, no newline: the line scripts
// parse (faults.sh, bench_loss.sh, bench_cc.sh, tests/e2e/tail_probes.sh,
// reorder_bound.sh); the caller appends its own counts.
void print_retransmits(FILE* notes, std::span<client::worker* const> ws) {
    std::uint64_t retx = 0, after_timeout = 0, tail = 0, quiet = 0, spurious = 0;
    for (const auto* w : ws) {
        retx += w->retransmits();
        after_timeout += w->timeout_retransmits();
        tail += w->tail_probes();
        quiet += w->quiet_timeouts();
        spurious += w->spurious_retransmits();
    }
    std::fprintf(notes,
                 "# retransmits %" PRIu64 " (%" PRIu64 " after a timeout, %" PRIu64 " tail probes), %" PRIu64
                 " quiet timeouts (a PING settled them), %" PRIu64 " spurious (RACK's, railgated had the first copy)",
                 retx, after_timeout, tail, quiet, spurious);
}

// Each rail's congestion window after the run, over the workers: the
// smallest and largest window, the target and how often it shrank.
void print_windows(FILE* notes, std::span<client::worker* const> ws) {
    std::vector<client::worker::window_info> all;
    for (auto* w : ws)
        for (const auto& i : w->windows()) all.push_back(i);
    if (all.empty() || !all[0].target_ns) return;
    double lo = all[0].window, hi = lo;
    std::uint64_t dec = 0, target = 0, marks = 0, deep = 0;
    for (const auto& i : all) {
        lo = std::min(lo, i.window);
        hi = std::max(hi, i.window);
        dec += i.decreases;
        marks += i.marks;
        deep += i.deep;
        target = std::max(target, i.target_ns);
    }
    std::fprintf(notes,
                 "# congestion windows: %.1f..%.1f chunks per rail, target %.1f us, %" PRIu64 " decreases, %" PRIu64
                 " ECN marks, %" PRIu64 " results queued deep\n",
                 lo, hi, static_cast<double>(target) / 1e3, dec, marks, deep);
}

// Each recovery as it happens, on the wall clock: a job's log then says
// what a rank did before it finished or gave up (a chaos test reads it
// beside its commands' times).
void tell(unsigned rank, const std::string& what) {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    tm t{};
    ::localtime_r(&ts.tv_sec, &t);
    std::fprintf(stderr, "railbench: %02d:%02d:%02d.%03ld rank %u: %s\n", t.tm_hour, t.tm_min, t.tm_sec,
                 ts.tv_nsec / 1000000, rank, what.c_str());
}

client::worker_options worker_opts(const options& o, unsigned rank) {
    client::worker_options wo;
    wo.job_id = o.job;
    wo.job_token = o.token;
    wo.rank = static_cast<std::uint16_t>(rank);
    wo.world = static_cast<std::uint16_t>(o.workers);
    wo.dt = o.dt;
    wo.pool_size = o.pool;
    wo.pace_bps = o.pace;
    client::set_cc_mode(wo, o.cc);
    wo.cc.target_ns = o.cc_target_ns;
    wo.tail_probes = o.tail_probes;
    wo.retries = o.retries;
    if (o.retries) wo.on_retry = [rank](const std::string& what) { tell(rank, what); };
    if (o.peer_timeout_ms) wo.peer_timeout = std::chrono::milliseconds(o.peer_timeout_ms);
    if (o.join_timeout_ms) wo.join_timeout = std::chrono::milliseconds(o.join_timeout_ms);
    if (o.op_timeout_ms) wo.op_timeout = std::chrono::milliseconds(o.op_timeout_ms);
    std::uint64_t mc = 0;
    for (auto c : counts_of(o)) mc = std::max(mc, c);
    wo.max_count = mc;
    return wo;
}

// N flows (one-worker jobs) at once under `policy`; returns their total
// goodput in bit/s, or a negative value on an error or a wrong result.
double run_flows(const options& o, net::daemon& d,
                 std::vector<std::unique_ptr<client::transport>>& ts, wire::rail_policy policy, unsigned n,
                 std::uint32_t job_base) {
    if (std::string e = d.set_policy(policy); !e.empty()) {
        std::fprintf(stderr, "railbench: %s\n", e.c_str());
        return -1;
    }
    const std::uint64_t count = o.counts.empty() ? o.max_bytes / wire::dtype_size(o.dt) : o.counts.back();
    const std::size_t es = wire::dtype_size(o.dt);
    std::vector<std::unique_ptr<client::worker>> owners;
    std::vector<client::worker*> ws;
    std::vector<std::vector<std::uint8_t>> in(n), buf(n);
    for (unsigned f = 0; f < n; ++f) {
        client::worker_options wo;
        wo.job_id = job_base + f;
        wo.job_token = o.token;
        wo.world = 1;
        wo.dt = o.dt;
        wo.pool_size = o.pool;
        wo.pace_bps = o.pace;
        client::set_cc_mode(wo, o.cc);
        wo.cc.target_ns = o.cc_target_ns;
        wo.tail_probes = o.tail_probes;
        wo.max_count = count;
        owners.push_back(std::make_unique<client::worker>(*ts[f], wo));
        if (std::string e = owners.back()->join(); !e.empty()) {
            std::fprintf(stderr, "railbench: flow %u: %s\n", f, e.c_str());
            return -1;
        }
        ws.push_back(owners.back().get());
        in[f].resize(count * es);
        buf[f].resize(count * es);
        bench::fill_input(in[f].data(), count, o.dt, f, o.seed);
    }
    double total_s = 0;
    for (unsigned it = 0; it < o.warmup + o.iters; ++it) {
        for (unsigned f = 0; f < n; ++f) std::memcpy(buf[f].data(), in[f].data(), count * es);
        const auto t0 = std::chrono::steady_clock::now();
        for (unsigned f = 0; f < n; ++f) ws[f]->start(buf[f].data(), count, o.dt);
        client::complete(ws);
        if (it >= o.warmup) total_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        for (unsigned f = 0; f < n; ++f)
            if (!ws[f]->error().empty() || bench::count_wrong(buf[f].data(), in[f].data(), count, o.dt)) {
                std::fprintf(stderr, "railbench: flow %u: %s\n", f,
                             ws[f]->error().empty() ? "wrong result" : ws[f]->error().c_str());
                return -1;
            }
    }
    print_windows(stderr, ws);
    // The queue the flows stand in: their round trips on the shaped rails.
    stats::histogram rtt;
    for (auto* w : ws) rtt.merge(w->chunk_rtt());
    std::fprintf(stderr, "# per-chunk round trip: p50 %.1f us, p99 %.1f us\n", static_cast<double>(rtt.percentile(50)) / 1e3,
                 static_cast<double>(rtt.percentile(99)) / 1e3);
    for (auto* w : ws) w->leave();
    return static_cast<double>(n) * static_cast<double>(count * es) * 8 * o.iters / total_s;
}

// The LAG-versus-rail measurement: rails shaped to --rail-rate, one or
// several flows under each policy, in one table.
int run_lag(const options& o) {
    net::eal eal(net::embedded_eal_args("railbench"));
    const unsigned n_flows = o.flows ? o.flows : 4;
    client::embedded_fabric fabric(o.rails, n_flows, o.mtu, o.fabric_offload);
    net::daemon_config dc;
    dc.rails = fabric.daemon_rails();
    for (auto& r : dc.rails) {
        r.rate_bps = o.rail_rate;
        r.ecn_mark_items = o.ecn_mark;
    }
    dc.mbufs_per_rail = 8192;
    net::daemon d(dc);
    d.launch();
    std::vector<std::unique_ptr<client::transport>> ts;
    // The delay-based window reads ECN marks too: ECN-capable frames.
    const std::uint8_t ect = o.cc != client::cc_mode::off ? wire::ecn_ect0 : 0; // what railgated echoes to
    for (unsigned f = 0; f < n_flows; ++f) ts.push_back(fabric.worker_transport(f, ect));
    struct row {
        wire::rail_policy p;
        unsigned flows;
    };
    std::vector<row> rows;
    if (o.lag_table) rows = {{wire::rail_policy::rail, 1}, {wire::rail_policy::lag, 1}, {wire::rail_policy::lag, n_flows}};
    else rows = {{o.policy == "lag" ? wire::rail_policy::lag : wire::rail_policy::rail, n_flows}};
    const std::uint64_t bytes = (o.counts.empty() ? o.max_bytes / wire::dtype_size(o.dt) : o.counts.back()) *
                                wire::dtype_size(o.dt);
    std::fprintf(notes, "# railbench: LAG versus rail, %u rails%s, %" PRIu64 "-byte allreduce per flow, %u iterations, "
                "flows are one-worker jobs (l3l4 hash)\n",
                o.rails, o.rail_rate ? (" shaped to " + std::to_string(o.rail_rate / 1e9).substr(0, 5) + " Gbit/s each").c_str() : " (unshaped)",
                bytes, o.iters);
    // Bytes on the wire per payload byte: each chunk travels with its
    // railgate, UDP, IPv4 and Ethernet headers and 24 bytes of preamble,
    // FCS and gap, which is what the shaper counts against the rate.
    const double chunk = wire::chunk_bytes_for_mtu(o.mtu);
    const double wire_per_byte = (chunk + static_cast<double>(wire::header_bytes + wire::l2l4_bytes) + 24) / chunk;
    std::fprintf(notes, "# %-7s %6s %12s %12s %14s %12s\n", "policy", "flows", "Gbit/s", "x one link", "wire Gbit/s",
                "wire/rate");
    int rc = 0;
    std::uint32_t job = o.job;
    for (const row& r : rows) {
        if (r.p == wire::rail_policy::lag) {
            // Where the hash puts the flows (each a one-worker job, rank
            // 0): LAG carries at most flows / (most flows on one member)
            // links, and a random token can put them all on one.
            std::vector<unsigned> on(o.rails, 0);
            for (unsigned f = 0; f < r.flows; ++f)
                ++on[wire::lag_flow_member(wire::lag_hash::l3l4, job + f, o.token, 0, o.rails)];
            std::string split;
            for (unsigned m = 0; m < o.rails; ++m) split += (m ? ":" : "") + std::to_string(on[m]);
            std::fprintf(notes, "# lag, %u flow%s: %s on the members (l3l4 hash of job id, token and rank)\n", r.flows,
                         r.flows == 1 ? "" : "s", split.c_str());
        }
        const double bps = run_flows(o, d, ts, r.p, r.flows, job);
        job += 100;
        if (bps < 0) {
            rc = 1;
            break;
        }
        const double rate = static_cast<double>(o.rail_rate);
        std::printf("  %-7s %6u %12.3f %12.2f %14.4f %12.4f\n", wire::policy_name(r.p), r.flows,
                    bps / 1e9, rate ? bps / rate : 0.0, bps * wire_per_byte / 1e9, rate ? bps * wire_per_byte / rate : 0.0);
        std::fflush(stdout);
    }
    d.stop();
    d.print_stats(notes);
    return rc;
}

// Isolation between traffic classes on one shaped rail: a strict TC's
// ping-pong latency alone and against a saturating bulk TC, then the ETS
// shares of two saturating bulk TCs. One thread drives every worker.
int run_isolation(const options& o) {
    net::eal eal(net::embedded_eal_args("railbench"));
    const std::uint64_t rate = o.rail_rate ? o.rail_rate : 2'000'000'000ull;
    client::embedded_fabric fabric(1, 3, o.mtu, o.fabric_offload);
    net::daemon_config dc;
    dc.rails = fabric.daemon_rails();
    net::rail_config& rc = dc.rails[0];
    rc.rate_bps = rate;
    // Strict and uncapped: a ping-pong has one chunk in flight, and a cap
    // would pace it (production strict TCs should be capped).
    rc.tcs[5].strict = true;
    rc.tcs[0].weight = 3;
    rc.tcs[1].weight = 1;
    dc.mbufs_per_rail = 8192;
    net::daemon d(dc);
    d.launch();
    // DSCP 46 (EF) -> TC 5; DSCP 0 -> TC 0; DSCP 8 (CS1) -> TC 1.
    auto probe_t = fabric.worker_transport(0, 46 << 2);
    auto bulk0_t = fabric.worker_transport(1, 0);
    auto bulk1_t = fabric.worker_transport(2, 8 << 2);
    const std::uint64_t probe_n = 256, bulk_n = (1u << 20) / 4; // 1 KiB, 1 MiB of fp32
    auto make = [&](client::transport& t, std::uint32_t job, std::uint64_t count) {
        client::worker_options wo;
        wo.job_id = job;
        wo.job_token = o.token;
        wo.world = 1;
        wo.max_count = count;
        auto w = std::make_unique<client::worker>(t, wo);
        if (std::string e = w->join(); !e.empty()) throw std::runtime_error("join: " + e);
        return w;
    };
    auto probe = make(*probe_t, o.job + 900, probe_n);
    auto bulk0 = make(*bulk0_t, o.job + 901, bulk_n);
    auto bulk1 = make(*bulk1_t, o.job + 902, bulk_n);
    std::vector<float> pbuf(probe_n, 1.0f), b0(bulk_n, 0.5f), b1(bulk_n, 0.25f);
    using clk = std::chrono::steady_clock;

    // `samples` probe round trips while the given bulk workers run
    // back to back; returns the sorted round trips in us.
    auto probe_run = [&](std::vector<client::worker*> bulk, std::vector<float*> bufs, unsigned samples) {
        std::vector<double> us;
        for (std::size_t i = 0; i < bulk.size(); ++i) bulk[i]->start(bufs[i], bulk_n, wire::dtype::fp32);
        auto t0 = clk::now();
        probe->start(pbuf.data(), probe_n, wire::dtype::fp32);
        while (us.size() < samples) {
            if (probe->progress()) {
                if (!probe->error().empty()) throw std::runtime_error("probe: " + probe->error());
                const auto t1 = clk::now();
                us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
                t0 = clk::now();
                probe->start(pbuf.data(), probe_n, wire::dtype::fp32);
            }
            for (std::size_t i = 0; i < bulk.size(); ++i)
                if (bulk[i]->progress()) {
                    if (!bulk[i]->error().empty()) throw std::runtime_error("bulk: " + bulk[i]->error());
                    bulk[i]->start(bufs[i], bulk_n, wire::dtype::fp32);
                }
        }
        client::worker* all[] = {probe.get()};
        client::complete(all);
        client::complete(bulk);
        std::sort(us.begin(), us.end());
        return us;
    };
    auto pct = [](const std::vector<double>& v, double q) {
        return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
    };
    const unsigned n = std::max(200u, o.iters);
    probe_run({}, {}, n / 10); // warm-up
    const auto idle = probe_run({}, {}, n);
    const auto loaded = probe_run({bulk0.get()}, {b0.data()}, n);
    std::fprintf(notes, "# railbench --isolation: one rail shaped to %.3f Gbit/s; TC 5 strict, TC 0 ETS weight 3, TC 1 weight 1\n",
                static_cast<double>(rate) / 1e9);
    std::fprintf(notes, "# %-34s %10s %10s %10s\n", "1 KiB ping-pong in TC 5 (round trip)", "p50 us", "p99 us", "p99.9 us");
    std::printf("  %-34s %10.2f %10.2f %10.2f\n", "alone", pct(idle, 0.5), pct(idle, 0.99), pct(idle, 0.999));
    std::printf("  %-34s %10.2f %10.2f %10.2f\n", "against bulk in TC 0", pct(loaded, 0.5), pct(loaded, 0.99),
                pct(loaded, 0.999));
    std::fprintf(notes, "# strict TC p99 loaded / idle: %.2f (goal <= 2)\n", pct(loaded, 0.99) / pct(idle, 0.99));

    // ETS: both bulk TCs saturating for about a second.
    const net::rail_counters& c = d.counters(0);
    const std::uint64_t a0 = c.tc_bytes[0].load(), a1 = c.tc_bytes[1].load();
    const auto end = clk::now() + std::chrono::milliseconds(1000);
    bulk0->start(b0.data(), bulk_n, wire::dtype::fp32);
    bulk1->start(b1.data(), bulk_n, wire::dtype::fp32);
    while (clk::now() < end) {
        if (bulk0->progress()) bulk0->start(b0.data(), bulk_n, wire::dtype::fp32);
        if (bulk1->progress()) bulk1->start(b1.data(), bulk_n, wire::dtype::fp32);
    }
    const double s0 = static_cast<double>(c.tc_bytes[0].load() - a0), s1 = static_cast<double>(c.tc_bytes[1].load() - a1);
    client::worker* both[] = {bulk0.get(), bulk1.get()};
    client::complete(both);
    std::fprintf(notes, "# ETS under contention: TC 0 %.1f%% (weight 3: 75%%), TC 1 %.1f%% (weight 1: 25%%), together %.3f "
                "Gbit/s of %.3f\n",
                100 * s0 / (s0 + s1), 100 * s1 / (s0 + s1), (s0 + s1) * 8 / 1e9, static_cast<double>(rate) / 1e9);
    for (auto* w : {probe.get(), bulk0.get(), bulk1.get()}) w->leave();
    d.stop();
    return 0;
}

int run_embedded(const options& o) {
    if (o.isolation) return run_isolation(o);
    if (o.rail_rate || o.flows || o.lag_table) return run_lag(o);
    net::eal eal(net::embedded_eal_args("railbench"));
    client::embedded_fabric fabric(o.rails, o.workers, o.mtu, o.fabric_offload);
    fabric.set_fault(o.fault);
    net::daemon_config dc;
    dc.rails = fabric.daemon_rails();
    dc.mbufs_per_rail = 4096;
    dc.default_pool = fabric.default_pool(); // --pool overrides it
    if (o.stall_ms) dc.stall_ms = o.stall_ms;
    net::daemon d(dc);
    d.print_placement(notes);
    d.launch();
    if (!o.policy.empty())
        if (std::string e = d.set_policy(o.policy == "lag" ? wire::rail_policy::lag : wire::rail_policy::rail);
            !e.empty())
            die(e);
    std::vector<std::unique_ptr<client::transport>> ts;
    std::vector<std::unique_ptr<client::worker>> owners;
    std::vector<client::worker*> ws;
    std::vector<unsigned> ranks;
    for (unsigned w = 0; w < o.workers; ++w) {
        ts.push_back(fabric.worker_transport(w, o.cc != client::cc_mode::off ? wire::ecn_ect0 : 0));
        owners.push_back(std::make_unique<client::worker>(*ts.back(), worker_opts(o, w)));
        if (std::string e = owners.back()->join(); !e.empty()) {
            std::fprintf(stderr, "railbench: worker %u: %s\n", w, e.c_str());
            return 1;
        }
        ws.push_back(owners.back().get());
        ranks.push_back(w);
    }
    const auto& ack = ws[0]->job_info();
    std::fprintf(notes, "# railbench: embedded railgated, %u rails%s, %u workers, dtype %s, mtu %u, chunk %u B, pool %u, "
                "transport dpdk (net_ring), checksums %s, kernels %s, memory %s\n",
                ack.n_rails, ack.policy == wire::rail_policy::lag ? " (LAG)" : "", o.workers,
                std::string(wire::dtype_name(o.dt)).c_str(), o.mtu, ack.chunk_bytes, ack.pool_size, o.fabric_offload ? "offloaded" : "software", std::string(reduce::best().name).c_str(),
                net::eal_memory_kind());
    stats::histogram lat, own;
    const std::uint64_t wrong = run_table(o, ws, ranks, lat, own, &d);
    stats::print_latency(notes, lat, "per-chunk round trip, all workers");
    stats::print_latency(notes, own, "per-chunk round trip less the wait for the other ranks, all workers");
    print_retransmits(notes, ws);
    std::fprintf(notes, ", virtual switch drops %" PRIu64 "\n", fabric.switch_drops());
    print_windows(notes, ws);
    if (o.fault.any())
        for (const auto& [dir, t] : {std::pair{"to railgated", fabric.faults_up()}, {"to the workers", fabric.faults_down()}})
            std::fprintf(notes, "# faults injected %s (%s): dropped %" PRIu64 ", duplicated %" PRIu64 ", reordered %" PRIu64
                        ", corrupted %" PRIu64 "\n",
                        dir, fault::format(o.fault).c_str(), t.drops, t.dups, t.reorders, t.corrupts);
    for (auto* w : ws) w->leave();
    d.stop();
    d.print_stats(notes);
    // Every buffer railgated lent must be back once the workers and the
    // switch let go of theirs.
    ws.clear();
    owners.clear();
    ts.clear();
    fabric.drain();
    const std::vector<std::string> leaks = d.close();
    for (const std::string& l : leaks) std::fprintf(stderr, "railbench: leak: %s\n", l.c_str());
    return wrong == 0 && leaks.empty() ? 0 : 1;
}

// One worker of a multi-process job, over kernel UDP or verbs.
int run_remote(const options& o) {
    std::uint32_t ip;
    if (!net::parse_ipv4(o.server, ip)) die("--server: '" + o.server + "' is not an IPv4 address");
    client::connect_options co;
    co.transport = o.transport;
    co.server_ip = ip;
    co.port = o.port;
    co.dpdk_rails = o.dpdk_rails;
    co.gid_index = o.gid_index;
    co.peer_timeout = std::chrono::milliseconds(o.peer_timeout_ms);
    co.connect_timeout = std::chrono::milliseconds(o.connect_timeout_ms);
    co.on_connect_retry = [rank = static_cast<unsigned>(o.rank)](const std::string& what) { tell(rank, what); };
    // The delay-based window also takes ECN marks: ECN-capable frames.
    if (o.cc != client::cc_mode::off) co.tos |= wire::ecn_ect0;
    std::unique_ptr<client::connection> conn;
    try {
        conn = std::make_unique<client::connection>(co);
    } catch (const std::exception& e) {
        die(std::string("--transport ") + o.transport + ": " + e.what());
    }
    client::transport* t = &conn->get();
    client::worker_options wo = worker_opts(o, static_cast<unsigned>(o.rank));
    std::unique_ptr<engine::engine> eng;
    if (o.rail_threads) {
        eng = std::make_unique<engine::engine>(engine::topology::load());
        wo.engine = eng.get();
    }
    client::worker w(*t, wo);
    if (std::string e = w.join(); !e.empty()) {
        std::fprintf(stderr, "railbench: rank %d: %s\n", o.rank, e.c_str());
        return 1;
    }
    const auto& ack = w.job_info();
    std::fprintf(notes,
                "# railbench: rank %d of %u, server %s, %u rails, dtype %s, chunk %u B, pool %u, transport %s, "
                "checksums %s\n",
                o.rank, o.workers, o.server.c_str(), ack.n_rails, std::string(wire::dtype_name(o.dt)).c_str(),
                ack.chunk_bytes, ack.pool_size, t->name(), t->checksums());
    if (ack.excluded_rails)
        std::fprintf(notes, "# striping over %zu of %u rails (0x%x excluded: down)\n", w.stripe_rails().size(), ack.n_rails,
                    ack.excluded_rails);
    if (wo.engine)
        std::fprintf(notes, "# one pipeline per rail: %u rails on %d engine threads (%s)\n", ack.n_rails,
                    eng->arena_concurrency(eng->arena_of(-1)), eng->describe().c_str());
    if (wo.pace_bps) std::fprintf(notes, "# paced: %.3f Gbit/s per rail\n", static_cast<double>(wo.pace_bps) / 1e9);
    std::vector<client::worker*> ws{&w};
    stats::histogram lat, own;
    const std::uint64_t wrong = run_table(o, ws, {static_cast<unsigned>(o.rank)}, lat, own, nullptr);
    stats::print_latency(notes, lat, "per-chunk round trip");
    stats::print_latency(notes, own, "per-chunk round trip less the wait for the other ranks");
    print_retransmits(notes, ws);
    std::fprintf(notes, ", dropped replies %" PRIu64 ", recoveries %" PRIu64 ", replays %" PRIu64 ", resumes %" PRIu64 "\n",
                 t->dropped(), w.recoveries(), w.replays(), w.resumes());
    if (o.transport == "udp")
        std::fprintf(notes, "# udp receive: %" PRIu64 " datagrams arrived coalesced (GRO)\n", t->coalesced());
    print_windows(notes, ws);
    if (w.recoveries() && w.job_info().excluded_rails)
        std::fprintf(notes, "# after recovering: striping over %zu of %u rails (0x%x excluded: down)\n", w.stripe_rails().size(),
                    w.job_info().n_rails, w.job_info().excluded_rails);
    w.leave();
    return wrong == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
    // Line by line even into a file or pipe: the table is a progress report.
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    const options o = parse(argc, argv);
    check_memory(o);
    if (o.out != options::format::table) notes = stderr;
    int rc = 1;
    try {
        rc = o.embedded ? run_embedded(o) : run_remote(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "railbench: %s\n", e.what());
    }
    return close_output(stdout, "railbench", "the results", rc);
}
