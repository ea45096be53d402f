// railctl: railgated's control CLI.
//
//   railctl [--socket PATH] [--json] COMMAND ...
//
// Exit status: 0 success, 1 the daemon refused or failed, 2 bad usage, 3 the
// daemon not reachable.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "control/cli.hpp"
#include "control/client.hpp"
#include "control/gids.hpp"
#include "control/plot.hpp"
#include "control/protocol.hpp"
#include "control/version.hpp"
#include "dataplane/stats/report.hpp"

using namespace railgate;
using control::json;

namespace {

struct usage_error {
    std::string msg;
};
struct daemon_error {
    std::string msg;
};

bool json_out = false;
std::string socket_path;

const char* const help_main =
    "usage: railctl [--socket PATH] [--json] COMMAND ...\n"
    "  status                              the daemon, its policy and rails\n"
    "  rail list | show R                  rails; one rail with its counters\n"
    "  rail set R mtu N | gid-index N|auto change a rail while it runs\n"
    "  rail add NAME DEVARGS IP [--mtu N] [--host-ip A/N] [--lcore L] | remove R\n"
    "  gid list [R]                        GID tables, like show_gids; DPDK rails' MAC and IPv4\n"
    "  policy show | set rail | set lag [--hash l2|l3l4]\n"
    "  tc list [--rail R] | set R [tc N] rate RATE [burst B] | set R tc N weight W | set R tc N strict\n"
    "  route list | add PREFIX R [via IP] | del PREFIX   the gateway's routes\n"
    "  stats [--rail R] [--watch [S]] [--count N]   packets, bytes, aggregations, drops by reason; each lcore's wait for its CPU\n"
    "  job list [--rail R]                 the jobs each rail holds: ranks joined, the oldest unfinished slot\n"
    "  job abort J [--why TEXT]            end job J on every rail: its workers fail and do not re-join\n"
    "  latency [--rail R] [--job J] [--worker] [--tc N] [--reset] [--plot FILE.svg]   latency histograms\n"
    "  fault show [R] | set R SPEC | clear R | freeze R MS   the rails' fault injector (tests, labs)\n"
    "  capture R[,R..]|all [--rx] [--tx] [--drops] [--count N] [--seconds S] [--snaplen B] [--job J] -w FILE.pcapng\n"
    "  nccl-env                            NCCL environment matching the rails\n"
    "  --socket PATH   control socket (default $RAILGATE_SOCKET or /run/railgate/railgated.sock)\n"
    "  -j, --json      machine-readable output on every command (errors too)\n"
    "  -V, --version   the version, the commit, and what railctl was built with\n"
    "Every command takes --help. Exit status: 0 ok, 1 refused or failed, 2 bad usage, 3 railgated not reachable.\n";

const std::map<std::string, const char*> help_cmd = {
    {"status", "usage: railctl status\n  The daemon (pid, uptime, config, kernels, policy) and a table of its rails.\n"},
    {"rail", "usage: railctl rail list\n       railctl rail show R\n       railctl rail set R mtu N\n"
             "       railctl rail set R gid-index N|auto\n"
             "  set mtu: raising applies now; lowering applies to new jobs now and to the port once\n"
             "  the jobs with larger chunks have left. Workers learn the new chunk at their next job.\n"
             "       railctl rail add NAME DEVARGS IP [--mtu N] [--host-ip A.B.C.D/N] [--lcore L]\n"
             "       railctl rail remove R\n"
             "  gid-index: a verbs rail's source GID (0..255, an entry of railctl gid list, or auto: the\n"
             "  RoCEv2 GID of its address) for the connections that come from now on; those connected\n"
             "  keep their QPs'. An IPv4 GID of another address than the rail's is refused.\n"
             "  list and show take verbs rails too (show: its QPs' timers, last source GID, counters,\n"
             "  and its RDMA port's own counters from sysfs: resends, sequence errors, ...).\n"
             "  add: live; hot-plugs the DPDK device (vdev or PCI) onto a running lcore, or opens a udp\n"
             "  rail (DEVARGS udp or udp,interface=lo: the kernel's UDP socket on IP); jobs that join\n"
             "  from now on stripe over it (--host-ip: address for a tap's kernel side).\n"
             "  remove: between jobs (none may be using the rail); the first rail stays.\n"},
    {"gid", "usage: railctl gid list [R]\n  Reads /sys/class/infiniband like show_gids ($RAILGATE_SYSFS_IB overrides the\n"
            "  root): device, port, index, GID, IPv4, RoCE version, netdev. Adds railgated's DPDK\n"
            "  rails (MAC, IPv4) when the daemon is reachable. R filters by rail, device or netdev.\n"},
    {"tc", "usage: railctl tc list [--rail R]\n"
           "       railctl tc set R rate RATE [burst BYTES]        the rail's shaper (a link speed); rate 0: none\n"
           "       railctl tc set R tc N rate RATE [burst BYTES]   cap traffic class N (0..7)\n"
           "       railctl tc set R tc N weight W                  ETS share, 1..100 (a minimum under contention)\n"
           "       railctl tc set R tc N strict                    strict priority (cap it)\n"
           "  DPDK rails only; frames are classified by VLAN PCP when tagged, else IPv4 DSCP >> 3\n"
           "  (the config's dscp and pcp tables override). Applies at once; queued frames stay.\n"},
    {"route", "usage: railctl route list\n"
              "       railctl route add PREFIX R [via IP]   e.g. route add 10.2.0.0/24 r1 via 10.2.0.254\n"
              "       railctl route del PREFIX\n"
              "  Gateway forwarding: IPv4 sent to a rail's MAC for another address leaves by the rail\n"
              "  of the longest matching prefix (TTL - 1, through that rail's traffic classes), to the\n"
              "  next hop `via` or, without it, to the destination on the rail's link. railgated\n"
              "  resolves next hops with ARP and sends ICMP time exceeded / unreachable / frag needed.\n"
              "  Applies at once on every lcore.\n"},
    {"policy", "usage: railctl policy show\n       railctl policy set rail\n       railctl policy set lag [--hash l2|l3l4]\n"
               "  Applies to jobs that join from now on; running jobs keep theirs.\n"},
    {"stats", "usage: railctl stats [--rail R] [--watch [S]] [--count N]\n"
              "  Per rail: packets, bytes, contributions, aggregations, results, drops by reason, and\n"
              "  the XDP program's verdicts on af_xdp rails. Per lcore: how long it waited for its CPU\n"
              "  while another task had it, and how often and how long it counted its CPU as shared\n"
              "  with a busy task (it then sleeps or naps when idle). --watch repeats every\n"
              "  S seconds (1) with rates, --count stops after N (at least 1) rounds.\n"},
    {"job", "usage: railctl job list [--rail R] | abort J [--why TEXT]\n"
            "  The jobs each rail, DPDK or verbs (or rail R), holds now: id, world, the ranks joined\n"
            "  there, the operation they joined at, the rails and policy it spans, its chunk, its age;\n"
            "  its oldest partly contributed slot (generation, offset on DPDK rails, how long it has\n"
            "  waited, the ranks it waits for) and how long ago each rank was last heard. What to read\n"
            "  when a job does not progress: a rank that never contributed, or one not heard from.\n"
            "  abort: ends job J on every rail that holds it; each worker's operation fails with\n"
            "  'the operator ended job J (railctl job abort): TEXT' and is not retried.\n"},
    {"latency", "usage: railctl latency [--rail R] [--job J] [--worker] [--tc N] [--reset] [--plot FILE.svg]\n"
                "  --tc N: how long traffic class N's frames waited in a shaped rail's scheduler.\n"
                "  railgated's aggregation latency (first contribution to result sent) per chunk, or\n"
                "  with --worker the chunk round trips workers reported when they left their job:\n"
                "  min, p50, p90, p99, p99.9, p99.99, max, a perftest-style summary and a bar chart.\n"
                "  --job: a job running on the rail, or one of the 8 joined last of those that ended\n"
                "  there (to 1/64 of a value, where the rail's own are to 1/1024). --reset: clear after\n"
                "  reading. A verbs rail keeps its own and its workers' (not each job's; no TC): without\n"
                "  --rail (and --job) they count with the others.\n"
                "  --plot: an SVG with the histogram and the CDF.\n"},
    {"fault", "usage: railctl fault show [R]\n       railctl fault set R SPEC\n       railctl fault clear R\n"
              "       railctl fault freeze R MS\n"
              "  The rail's fault injector, for tests and labs: SPEC is drop=P,dup=P,reorder=P,corrupt=P,seed=S\n"
              "  (P a fraction 0..1; any subset), optionally rank=N (only rank N's messages),\n"
              "  type=T (only messages of type T: join, join_ack, contrib, result, error, leave,\n"
              "  leave_ack, rtt_report, region, ping, pong, held; T+T.. for several) and\n"
              "  dir=rx|tx (only what railgated receives or sends). It acts on the rail's received and\n"
              "  sent frames alike unless dir says;\n"
              "  what it dropped is counted as drop reason fault_injected.\n"
              "  freeze: the lcore serving R stops going round its loop for MS ms (1..60000), as a\n"
              "  hung device call would stop it, then goes on: its rails' frames wait in their\n"
              "  queues, railgated logs the loop as stuck after 5 s (or half systemd's WatchdogSec)\n"
              "  and stops telling the watchdog it is alive, and the jobs' clocks skip the time;\n"
              "  a command that needs that lcore (fault set, latency, rail set) waits for it (railctl\n"
              "  gives up after 10 s; the lcore still applies it when back).\n"},
    {"capture", "usage: railctl capture R[,R...]|all [--rx] [--tx] [--drops] [--count N] [--seconds S]\n"
                "                       [--snaplen B] [--job J] -w FILE.pcapng\n"
                "  Mirrors DPDK rails' packets to a pcapng file (-w - writes to stdout: pipe it into\n"
                "  `tshark -r -` or `wireshark -k -i -`): what the rail received (--rx), sent (--tx)\n"
                "  and dropped (--drops, the reason in the packet's comment). Without any of the three,\n"
                "  rx and tx. One interface per rail; the direction is in each packet's flags.\n"
                "  --snaplen: bytes kept of each packet (128: the railgate header and some payload;\n"
                "  up to 16384). --job: only that job's railgate datagrams. Stops after --count\n"
                "  packets, --seconds S, or Ctrl-C. The rail never waits for the capture: packets it\n"
                "  could not hand over are counted as capture_overruns (and reported at the end).\n"
                "  Verbs rails bypass railgated's lcores: capture them with tcpdump on their netdev.\n"
                "  Decode with tools/wireshark/railgate.lua (installed in share/railgate/wireshark).\n"},
    {"nccl-env", "usage: railctl nccl-env\n  export lines for NCCL matching the rails: NCCL_IB_HCA (device:port), "
                 "NCCL_IB_GID_INDEX,\n  NCCL_IB_TC, NCCL_SOCKET_IFNAME.\n"},
};

[[noreturn]] void usage(const std::string& m) { throw usage_error{m}; }

// A response's result, or its refusal thrown.
json result_of(const json& r) {
    if (!r["ok"].get<bool>()) throw daemon_error{r.value("error", std::string("railgated refused"))};
    return r["result"];
}

json call(const std::string& cmd, const json& args = json::object()) {
    control::client c(socket_path);
    return result_of(c.call(cmd, args));
}

void print_json(const json& j) { std::printf("%s\n", j.dump(2).c_str()); }

// The kernel interface the host's workers reach a DPDK rail by: the veth
// peer railgated made for it, else the port's own interface (a tap's).
std::string host_side(const json& rail) {
    const std::string h = rail.value("host_ifname", std::string());
    return h.empty() ? rail.value("ifname", std::string()) : h;
}

std::string num_arg(const std::string& what, const std::string& v) {
    if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos || v.size() > 9)
        usage(what + " '" + v + "' is not a number");
    return v;
}

// A job id: 32 bits, so up to 10 digits (the PyTorch hook's ids reach
// 2^30 + 4; num_arg's 9 digits refused a tenth of them).
std::uint64_t job_arg(const std::string& v) {
    std::uint64_t j = 0;
    if (v.find_first_not_of("0123456789") != std::string::npos || !parse_unsigned(v, j) || j > UINT32_MAX)
        usage("job '" + v + "' is not a job id (0.." + std::to_string(UINT32_MAX) + ")");
    return j;
}

void print_rails_table(const json& rails) {
    std::printf("%-8s %-14s %-13s %-7s %4s %5s %-15s %-17s %5s %6s %5s %4s\n", "RAIL", "DEVICE", "DRIVER", "IFNAME", "NUMA",
                "LCORE", "IP", "MAC", "MTU", "CHUNK", "JOBS", "LINK");
    for (const json& r : rails) {
        std::string mtu = std::to_string(r["mtu"].get<unsigned>());
        if (r["mtu_target"] != r["mtu"]) mtu += "->" + std::to_string(r["mtu_target"].get<unsigned>());
        std::printf("%-8s %-14s %-13s %-7s %4d %5u %-15s %-17s %5s %6u %5u %4s\n", r["name"].get<std::string>().c_str(),
                    r["device"].get<std::string>().c_str(), r["driver"].get<std::string>().c_str(),
                    r["ifname"].get<std::string>().empty() ? "-" : r["ifname"].get<std::string>().c_str(),
                    r["numa"].get<int>(), r["lcore"].get<unsigned>(), r["ip"].get<std::string>().c_str(),
                    r["mac"].get<std::string>().c_str(), mtu.c_str(), r["chunk_bytes"].get<unsigned>(),
                    r["active_jobs"].get<unsigned>(), r.value("link", std::string("up")).c_str());
    }
}

// A verbs rail's RC timers: its last QP's, and the configuration when it differs.
std::string qp_timers_text(const json& t) {
    const std::string conf = t.value("configured_text", std::string("?"));
    if (!t.contains("seen_text")) return conf + " (configured; no connection yet)";
    const std::string seen = t["seen_text"].get<std::string>();
    return seen == conf ? seen : seen + " (configured: " + conf + ")";
}

// The GID index new connections take ("auto" or N) and the last QP's
// ("last QP's 2 (::ffff:198.18.1.1, RoCE v2, automatic)").
std::string gid_text(const json& v) {
    std::string t = v["gid_index"].is_string() ? "auto" : std::to_string(v["gid_index"].get<int>());
    if (v.contains("gid_seen"))
        t += ", last QP's " + std::to_string(v["gid_seen"]["index"].get<int>()) + " (" +
             v["gid_seen"]["gid"].get<std::string>() + ", " + v["gid_seen"].value("chosen", std::string("?")) + ")";
    return t;
}

// A status or rail list answer's rails: the DPDK-side table, then the verbs
// rails' with their QPs' timers and GIDs.
void print_all_rails(const json& s) {
    if (!s["rails"].empty()) print_rails_table(s["rails"]);
    if (!s.contains("verbs_rails") || s["verbs_rails"].empty()) return;
    std::printf("%s%-8s %-10s %-4s %-16s %-6s %-5s %-8s %-6s %-4s %-4s %-5s %-4s %-4s\n", s["rails"].empty() ? "" : "\n",
                "VERBS", "DEVICE", "PORT", "IP", "GID", "NUMA", "PATH_MTU", "CHUNK", "TC", "SL", "CONNS", "JOBS", "MRS");
    for (const json& v : s["verbs_rails"])
        std::printf("%-8s %-10s %-4u %-16s %-6s %-5d %-8u %-6u %-4u %-4u %-5u %-4u %-4u\n", v["name"].get<std::string>().c_str(),
                    v["device"].get<std::string>().c_str(), v["port"].get<unsigned>(), v["ip"].get<std::string>().c_str(),
                    v["gid_index"].is_string() ? "auto" : std::to_string(v["gid_index"].get<int>()).c_str(),
                    v["numa"].get<int>(), v["path_mtu"].get<unsigned>(), v["chunk_bytes"].get<unsigned>(),
                    v["traffic_class"].get<unsigned>(), v["service_level"].get<unsigned>(),
                    v["connections"].get<unsigned>(), v["active_jobs"].get<unsigned>(), v.value("result_mrs", 0u));
    for (const json& v : s["verbs_rails"]) {
        if (v.contains("qp_timers"))
            std::printf("%-8s QP timers: %s\n", v["name"].get<std::string>().c_str(), qp_timers_text(v["qp_timers"]).c_str());
        if (v.contains("gid_seen"))
            std::printf("%-8s source GID: %s\n", v["name"].get<std::string>().c_str(), gid_text(v).c_str());
    }
}

int cmd_status(const std::vector<std::string>& a) {
    if (!a.empty()) usage("status takes no arguments");
    const json s = call("status");
    if (json_out) return print_json(s), 0;
    const json& d = s["daemon"];
    std::printf("railgated %s, pid %d, up %.1f s, config %s\n", d["version"].get<std::string>().c_str(),
                d["pid"].get<int>(), d["uptime_s"].get<double>(), d["config"].get<std::string>().c_str());
    std::printf("kernels %s, policy %s (lag hash %s), job chunk %u B\n", d["kernels"].get<std::string>().c_str(),
                d["policy"].get<std::string>().c_str(), d["hash"].get<std::string>().c_str(),
                d["job_chunk_bytes"].get<unsigned>());
    std::printf("control %s, metrics %s\n\n", d["control_socket"].get<std::string>().c_str(),
                d["metrics"].get<std::string>().empty() ? "off" : d["metrics"].get<std::string>().c_str());
    print_all_rails(s);
    return 0;
}

void print_counters(const json& c) {
    if (c.value("transport", "dpdk") == "verbs") {
        std::printf("  connects %llu, disconnects %llu (refused %llu), qp errors %llu\n",
                    c["connects"].get<unsigned long long>(), c["disconnects"].get<unsigned long long>(),
                    c["rejected"].get<unsigned long long>(), c["qp_errors"].get<unsigned long long>());
        std::printf("  contributions %llu, aggregations %llu, joins %llu (refused %llu), leaves %llu, aborts %llu, "
                    "drops %llu\n",
                    c["contributions"].get<unsigned long long>(), c["aggregations"].get<unsigned long long>(),
                    c["joins"].get<unsigned long long>(), c["join_errors"].get<unsigned long long>(),
                    c["leaves"].get<unsigned long long>(), c["aborts"].get<unsigned long long>(),
                    c["drops_total"].get<unsigned long long>());
        if (const auto again = c.value("joins_again", 0ull))
            std::printf("  joins repeated while their answer was on its way: %llu (not answered twice)\n", again);
        for (const auto& [reason, n] : c["drops"].items())
            std::printf("    drop %-28s %llu\n", reason.c_str(), n.get<unsigned long long>());
        return;
    }
    std::printf("  rx %llu pkts %llu B, tx %llu pkts %llu B\n", c["rx_packets"].get<unsigned long long>(),
                c["rx_bytes"].get<unsigned long long>(), c["tx_packets"].get<unsigned long long>(),
                c["tx_bytes"].get<unsigned long long>());
    std::printf("  contributions %llu, aggregations %llu, results %llu (resent %llu), held %llu (%llu of them queued "
                "results), queried %llu\n",
                c["contributions"].get<unsigned long long>(), c["aggregations"].get<unsigned long long>(),
                c["results_sent"].get<unsigned long long>(), c["results_resent"].get<unsigned long long>(),
                c.value("held", 0ull), c.value("held_queued", 0ull), c.value("queried", 0ull));
    std::printf("  joins %llu (refused %llu), leaves %llu, aborts %llu, arp %llu, icmp %llu, drops %llu\n",
                c["joins"].get<unsigned long long>(), c["join_errors"].get<unsigned long long>(),
                c["leaves"].get<unsigned long long>(), c["aborts"].get<unsigned long long>(),
                c["arp_replies"].get<unsigned long long>(), c["icmp_replies"].get<unsigned long long>(),
                c["drops_total"].get<unsigned long long>());
    for (const auto& [reason, n] : c["drops"].items())
        std::printf("    drop %-28s %llu\n", reason.c_str(), n.get<unsigned long long>());
    if (const unsigned long long la = c.value("leaves_again", 0ull); la)
        std::printf("  leaves: %llu acknowledged again (their LEAVE_ACK lost)\n", la);
    if (const unsigned long long st = c.value("stalls", 0ull), ex = c.value("expirations", 0ull),
        to = c.value("takeovers", 0ull), rt = c.value("ends_retold", 0ull);
        st || ex || to || rt)
        std::printf("  jobs ended: %llu stalled, %llu expired, %llu taken over; %llu ends told again\n", st, ex, to, rt);
    if (c.value("udp_coalesced", 0ull))
        std::printf("  udp: %llu datagrams arrived coalesced (GRO), %llu copied\n",
                    c["udp_coalesced"].get<unsigned long long>(), c.value("udp_copied", 0ull));
    if (c.contains("xdp")) {
        std::printf("  xdp:");
        for (const auto& [reason, n] : c["xdp"].items())
            if (n.get<unsigned long long>()) std::printf(" %s %llu", reason.c_str(), n.get<unsigned long long>());
        std::printf("\n");
    }
}

std::string rate_text(std::uint64_t bps) {
    if (!bps) return "-";
    char b[32];
    if (bps >= 1000000000ull) std::snprintf(b, sizeof b, "%.3gGbit", static_cast<double>(bps) / 1e9);
    else if (bps >= 1000000ull) std::snprintf(b, sizeof b, "%.3gMbit", static_cast<double>(bps) / 1e6);
    else std::snprintf(b, sizeof b, "%.3gkbit", static_cast<double>(bps) / 1e3);
    return b;
}

void print_tc(const json& r) {
    std::printf("rail %s: %s, rate %s, burst %s\n", r["rail"].get<std::string>().c_str(),
                r["shaped"].get<bool>() ? "shaped" : "not shaped", rate_text(r["rate_bps"].get<std::uint64_t>()).c_str(),
                r["burst_bytes"].get<std::uint64_t>() ? (std::to_string(r["burst_bytes"].get<std::uint64_t>()) + " B").c_str()
                                                        : "default");
    for (const char* f : {"dscp", "pcp"}) {
        if (!r.contains(f) || r[f].empty()) continue;
        std::printf("  %s -> TC (besides the default):", f[0] == 'd' ? "DSCP" : "PCP");
        for (const auto& [d, tc] : r[f].items()) std::printf(" %s->%u", d.c_str(), tc.get<unsigned>());
        std::printf("\n");
    }
    std::printf("  %-3s %-7s %-10s %-12s %-12s %-14s %s\n", "TC", "MODE", "RATE", "BURST", "PACKETS", "BYTES", "DROPS");
    for (const json& t : r["tcs"])
        std::printf("  %-3u %-7s %-10s %-12s %-12llu %-14llu %llu\n", t["tc"].get<unsigned>(),
                    t["strict"].get<bool>() ? "strict" : ("ets:" + std::to_string(t["weight"].get<unsigned>())).c_str(),
                    rate_text(t["rate_bps"].get<std::uint64_t>()).c_str(),
                    t["burst_bytes"].get<std::uint64_t>() ? std::to_string(t["burst_bytes"].get<std::uint64_t>()).c_str() : "-",
                    t["packets"].get<unsigned long long>(), t["bytes"].get<unsigned long long>(),
                    t["drops"].get<unsigned long long>());
}

// "WHAT [--rail R]" (a[0] is WHAT): the request's arguments.
json rail_option(const std::vector<std::string>& a, const std::string& what) {
    json args = json::object();
    for (std::size_t i = 1; i < a.size(); ++i) {
        if (a[i] == "--rail" && i + 1 < a.size()) args["rail"] = a[++i];
        else usage(what + ": unexpected '" + a[i] + "'");
    }
    return args;
}

int cmd_tc(const std::vector<std::string>& a) {
    if (a.empty()) usage("tc needs list or set");
    if (a[0] == "list") {
        const json r = call("tc.list", rail_option(a, "tc list"));
        if (json_out) return print_json(r), 0;
        for (const json& x : r["rails"]) print_tc(x);
        return 0;
    }
    if (a[0] != "set" || a.size() < 3) usage("tc set needs R and a setting");
    json args = {{"rail", a[1]}};
    for (std::size_t i = 2; i < a.size(); ++i) {
        const std::string& k = a[i];
        if (k == "strict") {
            args["strict"] = true;
            continue;
        }
        if (i + 1 >= a.size()) usage("tc set: '" + k + "' needs a value");
        const std::string& v = a[++i];
        if (k == "tc") args["tc"] = std::stoull(num_arg("tc", v));
        else if (k == "rate") args["rate"] = v;
        else if (k == "burst") args["burst"] = std::stoull(num_arg("burst", v));
        else if (k == "weight") args["weight"] = std::stoull(num_arg("weight", v));
        else usage("tc set: unknown setting '" + k + "' (tc, rate, burst, weight, strict)");
    }
    const json r = call("tc.set", args);
    if (json_out) return print_json(r), 0;
    print_tc(r);
    return 0;
}

// "0,2,5" (none: "-").
std::string rank_list(const json& l) {
    std::string t;
    for (const json& r : l) t += (t.empty() ? "" : ",") + std::to_string(r.get<unsigned>());
    return t.empty() ? "-" : t;
}

int cmd_job(const std::vector<std::string>& a) {
    if (!a.empty() && a[0] == "abort") {
        if (a.size() != 2 && !(a.size() == 4 && a[2] == "--why")) usage("job abort J [--why TEXT]");
        json args = {{"job", job_arg(a[1])}};
        if (a.size() == 4) args["why"] = a[3];
        const json r = call("job.abort", args);
        if (json_out) return print_json(r), 0;
        std::string rails;
        for (const json& x : r["rails"]) rails += (rails.empty() ? "" : ", ") + x.get<std::string>();
        const unsigned told = r["members_told"].get<unsigned>();
        std::printf("job %u ended on %s: %u member%s told; they do not re-join\n", r["job"].get<unsigned>(), rails.c_str(),
                    told, told == 1 ? "" : "s");
        return 0;
    }
    if (a.empty() || a[0] != "list") usage("job needs list or abort");
    const json r = call("job.list", rail_option(a, "job list"));
    if (json_out) return print_json(r), 0;
    if (r["jobs"].empty()) {
        std::printf("no jobs\n");
        return 0;
    }
    std::printf("%-8s %-10s %-5s %-12s %-5s %-5s %-6s %-9s %-10s %s\n", "RAIL", "JOB", "WORLD", "JOINED", "OP",
                "RAILS", "POLICY", "CHUNK", "AGE", "OLDEST PARTIAL SLOT");
    for (const json& j : r["jobs"]) {
        std::string oldest = "-";
        if (j.contains("oldest_partial")) {
            const json& o = j["oldest_partial"];
            // A verbs rail's slots name no offset (its WRITEs carry slot and generation).
            const std::string at = o.contains("offset") ? " offset " + std::to_string(o["offset"].get<unsigned long long>()) : "";
            char t[160];
            std::snprintf(t, sizeof t, "slot %u gen %u%s: %.0f ms for ranks %s (%u partial)", o["slot"].get<unsigned>(),
                          o["gen"].get<unsigned>(), at.c_str(), o["waited_ms"].get<double>(),
                          rank_list(o["waiting_for"]).c_str(), j["partial_slots"].get<unsigned>());
            oldest = t;
        }
        std::printf("%-8s %-10u %-5u %-12s %-5u %-5u %-6s %-9s %-10s %s\n", j["rail"].get<std::string>().c_str(),
                    j["job"].get<unsigned>(), j["world"].get<unsigned>(), rank_list(j["joined"]).c_str(),
                    j["op"].get<unsigned>(), j["rails"].get<unsigned>(), j["policy"].get<std::string>().c_str(),
                    (std::to_string(j["chunk_bytes"].get<unsigned>()) + " B").c_str(),
                    (std::to_string(static_cast<unsigned long long>(j["age_ms"].get<double>())) + " ms").c_str(),
                    oldest.c_str());
        std::string heard;
        unsigned rank = 0;
        for (const json& h : j["heard_ms"]) {
            const double ms = h.get<double>();
            heard += (rank ? ", " : "") + std::to_string(rank) + ": " +
                     (ms < 0 ? std::string("not joined") : std::to_string(static_cast<unsigned long long>(ms)) + " ms");
            ++rank;
        }
        std::printf("         instance 0x%08x%s, last heard from each rank: %s\n", j["instance"].get<unsigned>(),
                    j["assembled"].get<bool>() ? "" : ", assembling", heard.c_str());
    }
    return 0;
}

int cmd_route(const std::vector<std::string>& a) {
    if (a.empty()) usage("route needs list, add or del");
    if (a[0] == "list") {
        if (a.size() != 1) usage("route list takes no arguments");
        const json r = call("route.list");
        if (json_out) return print_json(r), 0;
        std::printf("%-20s %-10s %-16s %14s %16s\n", "PREFIX", "RAIL", "VIA", "PACKETS", "BYTES");
        for (const json& x : r["routes"])
            std::printf("%-20s %-10s %-16s %14llu %16llu\n", x["prefix"].get<std::string>().c_str(),
                        x["rail"].get<std::string>().c_str(), x["via"].get<std::string>().c_str(),
                        x.value("packets", 0ull), x.value("bytes", 0ull));
        return 0;
    }
    json args = json::object();
    if (a[0] == "add") {
        if (a.size() != 3 && !(a.size() == 5 && a[3] == "via")) usage("route add PREFIX R [via IP]");
        args = {{"prefix", a[1]}, {"rail", a[2]}};
        if (a.size() == 5) args["via"] = a[4];
        const json r = call("route.add", args);
        if (json_out) return print_json(r), 0;
        std::printf("route %s by rail %s via %s\n", r["added"].get<std::string>().c_str(),
                    r["rail"].get<std::string>().c_str(), r["via"].get<std::string>().c_str());
        return 0;
    }
    if (a[0] == "del") {
        if (a.size() != 2) usage("route del PREFIX");
        const json r = call("route.del", {{"prefix", a[1]}});
        if (json_out) return print_json(r), 0;
        std::printf("route %s deleted\n", r["deleted"].get<std::string>().c_str());
        return 0;
    }
    usage("route: unknown '" + a[0] + "' (list, add, del)");
}

int cmd_fault(const std::vector<std::string>& a) {
    if (a.empty()) usage("fault needs show, set or clear");
    json r;
    if (a[0] == "show" && a.size() <= 2) {
        r = call("fault.show", a.size() == 2 ? json{{"rail", a[1]}} : json::object());
    } else if (a[0] == "set" && a.size() == 3) {
        r = call("fault.set", {{"rail", a[1]}, {"spec", a[2]}});
    } else if (a[0] == "clear" && a.size() == 2) {
        r = call("fault.set", {{"rail", a[1]}, {"spec", "off"}});
    } else if (a[0] == "freeze" && a.size() == 3) {
        r = call("fault.freeze", {{"rail", a[1]}, {"ms", std::stoull(num_arg("MS", a[2]))}});
        if (json_out) return print_json(r), 0;
        std::printf("rail %s: lcore %u frozen for %llu ms\n", r["rail"].get<std::string>().c_str(),
                    r["lcore"].get<unsigned>(), r["ms"].get<unsigned long long>());
        return 0;
    } else {
        usage("fault show [R] | set R SPEC | clear R | freeze R MS");
    }
    if (json_out) return print_json(r), 0;
    for (const json& x : r["rails"])
        std::printf("rail %-8s faults %s (dropped %llu, duplicated %llu, reordered %llu, corrupted %llu)\n",
                    x["rail"].get<std::string>().c_str(), x["spec"].get<std::string>().c_str(),
                    x.value("dropped", 0ull), x.value("duplicated", 0ull), x.value("reordered", 0ull),
                    x.value("corrupted", 0ull));
    return 0;
}

// A verbs rail's RDMA port counters (sysfs), those not 0.
void print_port_counters(const json& pc) {
    std::printf("port counters  %s port %u (sysfs; those not 0)\n", pc["device"].get<std::string>().c_str(),
                pc["port"].get<unsigned>());
    unsigned shown = 0;
    for (const char* group : {"hw_counters", "counters"})
        for (const auto& [name, n] : pc[group].items())
            if (n.get<unsigned long long>()) std::printf("  %-30s %llu\n", name.c_str(), n.get<unsigned long long>()), ++shown;
    if (!shown) std::printf("  (none)\n");
}

int cmd_rail(const std::vector<std::string>& a) {
    if (a.empty()) usage("rail needs list, show, set, add or remove");
    if (a[0] == "list") {
        if (a.size() != 1) usage("rail list takes no arguments");
        const json r = call("rail.list");
        if (json_out) return print_json(r), 0;
        print_all_rails(r);
        return 0;
    }
    if (a[0] == "show") {
        if (a.size() != 2) usage("rail show needs one rail");
        const json r = call("rail.show", {{"rail", a[1]}});
        if (json_out) return print_json(r), 0;
        for (const auto& [k, v] : r.items()) {
            if (k == "counters" || k == "gid_seen" || k == "port_counters") continue;
            const std::string t = k == "qp_timers" ? qp_timers_text(v) : k == "gid_index" ? gid_text(r)
                                  : v.is_string()  ? v.get<std::string>()
                                                   : v.dump();
            std::printf("%-14s %s\n", k.c_str(), t.c_str());
        }
        std::printf("counters\n");
        print_counters(r["counters"]);
        if (r.contains("port_counters")) print_port_counters(r["port_counters"]);
        return 0;
    }
    if (a[0] == "set") {
        if (a.size() != 4) usage("rail set needs: R mtu N | R gid-index N|auto");
        json args = {{"rail", a[1]}};
        if (a[2] == "mtu") args["mtu"] = std::stoull(num_arg("MTU", a[3]));
        else if (a[2] == "gid-index" && a[3] == "auto") args["gid_index"] = "auto";
        else if (a[2] == "gid-index") args["gid_index"] = std::stoull(num_arg("GID index", a[3]));
        else usage("rail set: unknown setting '" + a[2] + "' (mtu, gid-index)");
        const json r = call("rail.set", args);
        if (json_out) return print_json(r), 0;
        if (r.value("transport", "") == "verbs") {
            std::printf("rail %s: %s\n", r["name"].get<std::string>().c_str(), r["state"].get<std::string>().c_str());
            return 0;
        }
        std::printf("rail %s: mtu %u (target %u), chunk %u B: %s\n", r["name"].get<std::string>().c_str(),
                    r["mtu"].get<unsigned>(), r["mtu_target"].get<unsigned>(), r["chunk_bytes"].get<unsigned>(),
                    r["state"].get<std::string>().c_str());
        return 0;
    }
    if (a[0] == "add") {
        if (a.size() < 4) usage("rail add needs: NAME DEVARGS IP [--mtu N] [--host-ip A.B.C.D/N] [--lcore L]");
        json args = {{"rail", a[1]}, {"devargs", a[2]}, {"ip", a[3]}};
        for (std::size_t i = 4; i < a.size(); ++i) {
            if (a[i] == "--mtu" && i + 1 < a.size()) args["mtu"] = std::stoull(num_arg("MTU", a[++i]));
            else if (a[i] == "--host-ip" && i + 1 < a.size()) args["host_ip"] = a[++i];
            else if (a[i] == "--lcore" && i + 1 < a.size()) args["lcore"] = std::stoull(num_arg("lcore", a[++i]));
            else usage("rail add: unexpected '" + a[i] + "'");
        }
        const json r = call("rail.add", args);
        if (json_out) return print_json(r), 0;
        std::printf("rail %s added: %s (%s) on lcore %u, %s mtu %u; jobs that join from now on stripe over it\n",
                    r["name"].get<std::string>().c_str(), r["device"].get<std::string>().c_str(),
                    r["driver"].get<std::string>().c_str(), r["lcore"].get<unsigned>(),
                    r["ip"].get<std::string>().c_str(), r["mtu"].get<unsigned>());
        return 0;
    }
    if (a[0] == "remove") {
        if (a.size() != 2) usage("rail remove needs one rail");
        const json r = call("rail.remove", {{"rail", a[1]}});
        if (json_out) return print_json(r), 0;
        std::printf("rail %s removed\n", r["removed"].get<std::string>().c_str());
        return 0;
    }
    usage("rail: unknown subcommand '" + a[0] + "'");
}

int cmd_policy(const std::vector<std::string>& a) {
    if (a.empty()) usage("policy needs show or set");
    json r;
    if (a[0] == "show" && a.size() == 1) {
        r = call("policy.show");
    } else if (a[0] == "set" && a.size() >= 2) {
        json args = {{"mode", a[1]}};
        if (a[1] != "rail" && a[1] != "lag") usage("policy set: '" + a[1] + "' is not rail or lag");
        for (std::size_t i = 2; i < a.size(); ++i) {
            if (a[i] == "--hash" && i + 1 < a.size() && a[1] == "lag") args["hash"] = a[++i];
            else usage("policy set: unexpected '" + a[i] + "' (--hash l2|l3l4 goes with lag)");
        }
        r = call("policy.set", args);
    } else {
        usage("policy show | set rail | set lag [--hash l2|l3l4]");
    }
    if (json_out) return print_json(r), 0;
    std::printf("policy %s", r["mode"].get<std::string>().c_str());
    if (r["mode"] == "lag") std::printf(" (hash %s)", r["hash"].get<std::string>().c_str());
    if (r.contains("applies")) std::printf(", applies %s", r["applies"].get<std::string>().c_str());
    std::printf("\n");
    return 0;
}

volatile std::sig_atomic_t interrupted = 0;
extern "C" void on_int(int) { interrupted = 1; }

int cmd_stats(const std::vector<std::string>& a) {
    json args = json::object();
    double watch = 0;
    long count = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (a[i] == "--rail" && i + 1 < a.size()) args["rail"] = a[++i];
        else if (a[i] == "--watch") {
            watch = 1;
            if (i + 1 < a.size() && a[i + 1].find_first_not_of("0123456789.") == std::string::npos) watch = std::atof(a[++i].c_str());
            if (watch <= 0) usage("--watch needs a positive interval");
        } else if (a[i] == "--count" && i + 1 < a.size()) {
            count = std::stol(num_arg("--count", a[++i]));
            if (count < 1) usage("--count needs at least 1 round"); // 0 would mean no limit, silently
        } else usage("stats: unexpected '" + a[i] + "'");
    }
    std::signal(SIGINT, on_int);
    json prev;
    for (long round = 1; !interrupted; ++round) {
        const json r = call("stats", args);
        if (json_out) {
            std::printf("%s\n", r.dump().c_str());
        } else {
            for (std::size_t k = 0; k < r["rails"].size(); ++k) {
                const json& c = r["rails"][k];
                std::printf("rail %s\n", c["rail"].get<std::string>().c_str());
                print_counters(c);
                if (!prev.is_null()) {
                    const json& p = prev["rails"][k];
                    auto rate = [&](const char* f) {
                        return static_cast<double>(c[f].get<unsigned long long>() - p[f].get<unsigned long long>()) / watch;
                    };
                    std::printf("  rate: rx %.0f pkt/s %.1f Mbit/s, tx %.0f pkt/s %.1f Mbit/s, %.0f aggregations/s\n",
                                rate("rx_packets"), rate("rx_bytes") * 8 / 1e6, rate("tx_packets"),
                                rate("tx_bytes") * 8 / 1e6, rate("aggregations"));
                }
            }
            // How each lcore shared its CPU: a poll-mode lcore on a CPU of
            // its own waits ~0 s.
            for (const json& l : r.value("lcores", json::array()))
                stats::print_lcore_sharing(stdout, l["lcore"].get<unsigned>(), l["rails"].get<std::vector<std::string>>(),
                                           {l["runq_wait_seconds"].get<double>(), l.value("core_shared", 0ull),
                                            l.value("core_shared_seconds", 0.0), l.value("absences", 0ull),
                                            l.value("absent_seconds", 0.0)});
        }
        // The reader went away (railctl stats --watch | head): done, as at
        // the count (SIGPIPE is ignored: see main).
        if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
            if (errno == EPIPE) clearerr(stdout); // not lost: unread by choice
            break;
        }
        if (watch == 0 || (count && round >= count)) break;
        prev = r;
        std::this_thread::sleep_for(std::chrono::duration<double>(watch));
    }
    return 0;
}

int cmd_capture(const std::vector<std::string>& a) {
    json args = json::object();
    std::string file;
    double seconds = 0;
    json rails = json::array();
    for (std::size_t i = 0; i < a.size(); ++i) {
        auto value = [&]() -> const std::string& {
            if (i + 1 >= a.size()) usage("capture: " + a[i] + " needs a value");
            return a[++i];
        };
        if (a[i] == "--rx" || a[i] == "--tx" || a[i] == "--drops") args[a[i].substr(2)] = true;
        else if (a[i] == "--count") args["count"] = std::stoull(num_arg("--count", value()));
        else if (a[i] == "--snaplen") args["snaplen"] = std::stoull(num_arg("--snaplen", value()));
        else if (a[i] == "--job") args["job"] = job_arg(value());
        else if (a[i] == "--seconds") {
            const std::string& v = value();
            char* end = nullptr;
            seconds = std::strtod(v.c_str(), &end);
            if (v.empty() || *end || !(seconds > 0) || seconds > 1e6) usage("--seconds '" + v + "' is not a positive number");
        } else if (a[i] == "-w") file = value();
        else if (!a[i].empty() && a[i][0] == '-') usage("capture: unexpected '" + a[i] + "'");
        else if (!rails.empty() || args.contains("rails")) usage("capture: one rail list (R,R,... or all)");
        else if (a[i] == "all") args["rails"] = "all";
        else {
            std::size_t from = 0;
            for (;;) {
                const std::size_t comma = a[i].find(',', from);
                const std::string name = a[i].substr(from, comma - from); // npos - from: the rest
                if (name.empty()) usage("capture: empty rail name in '" + a[i] + "'");
                rails.push_back(name);
                if (comma == std::string::npos) break;
                from = comma + 1;
            }
        }
    }
    if (!rails.empty()) args["rails"] = rails;
    if (!args.contains("rails")) usage("capture needs a rail (R, R,R... or all)");
    if (file.empty()) usage("capture needs -w FILE.pcapng (or -w - for stdout)");
    const bool to_stdout = file == "-";
    // railctl opens the file (with its caller's rights) and hands it to
    // railgated, whose control thread writes the pcapng into it.
    control::client c(socket_path); // first: an unreachable daemon leaves no empty file behind
    const bool existed = !to_stdout && access(file.c_str(), F_OK) == 0;
    const int fd = to_stdout ? STDOUT_FILENO : open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw daemon_error{"cannot write " + file + ": " + std::strerror(errno)};
    std::signal(SIGINT, on_int);
    std::signal(SIGTERM, on_int);
    auto checked = [&](const std::string& cmd, const json& x, int pass = -1) {
        return result_of(c.call_with_fd(cmd, x, pass));
    };
    json started;
    try {
        started = checked("capture.start", args, fd);
    } catch (...) {
        if (!to_stdout) close(fd);
        if (!to_stdout && !existed) unlink(file.c_str()); // refused: no new file left behind
        throw;
    }
    if (!to_stdout) close(fd);
    const json id = {{"id", started["id"]}};
    std::string names;
    for (const json& n : started["rails"]) names += (names.empty() ? "" : ",") + n.get<std::string>();
    std::fprintf(stderr, "railctl: capturing %s (snaplen %u) to %s; Ctrl-C stops\n", names.c_str(),
                 started["snaplen"].get<unsigned>(), to_stdout ? "stdout" : file.c_str());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    bool stopping = false;
    json r;
    for (;;) {
        if (!stopping && (interrupted || (seconds > 0 && std::chrono::steady_clock::now() >= deadline))) {
            checked("capture.stop", id);
            stopping = true;
        }
        r = checked("capture.status", id);
        if (r["done"].get<bool>()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(stopping ? 5 : 50));
    }
    r["rails"] = started["rails"];
    r["file"] = file;
    if (json_out && !to_stdout) print_json(r);
    std::fprintf(stderr, "railctl: %llu packets (rx %llu, tx %llu, drops %llu), %llu overruns\n",
                 r["packets"].get<unsigned long long>(), r["rx"].get<unsigned long long>(),
                 r["tx"].get<unsigned long long>(), r["drops"].get<unsigned long long>(),
                 r["overruns"].get<unsigned long long>());
    if (r.contains("error")) throw daemon_error{r["error"].get<std::string>()};
    return 0;
}

int cmd_latency(const std::vector<std::string>& a) {
    json args = json::object();
    std::string plot;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (a[i] == "--rail" && i + 1 < a.size()) args["rail"] = a[++i];
        else if (a[i] == "--job" && i + 1 < a.size()) args["job"] = job_arg(a[++i]);
        else if (a[i] == "--reset") args["reset"] = true;
        else if (a[i] == "--worker") args["worker"] = true;
        else if (a[i] == "--tc" && i + 1 < a.size()) args["tc"] = std::stoull(num_arg("tc", a[++i]));
        else if (a[i] == "--plot" && i + 1 < a.size()) plot = a[++i];
        else usage("latency: unexpected '" + a[i] + "'");
    }
    const json r = call("latency", args);
    stats::histogram h;
    if (const std::string e = control::histogram_from_json(r["histogram"], h); !e.empty()) throw daemon_error{e};
    const bool worker = r.value("worker", false);
    const std::string what = r.contains("tc") ? "traffic class " + std::to_string(r["tc"].get<unsigned>()) + " wait"
                             : worker        ? std::string("worker round trip")
                                             : std::string("railgated aggregation latency");
    const std::string title = what + ", rail " +
                              (r["rail"].is_string() ? r["rail"].get<std::string>() : std::string("all")) +
                              (r.contains("job") ? ", job " + std::to_string(r["job"].get<unsigned long long>()) : "");
    if (!plot.empty()) {
        std::ofstream f(plot);
        f << control::latency_svg(h, title);
        f.close(); // a full disk shows when the buffer is written
        if (!f) throw daemon_error{"cannot write " + plot};
    }
    if (json_out) {
        json out = r;
        out["summary"] = {{"count", h.count()},    {"min_ns", h.min()},
                          {"p50_ns", h.percentile(50)}, {"p90_ns", h.percentile(90)},
                          {"p99_ns", h.percentile(99)}, {"p99_9_ns", h.percentile(99.9)},
                          {"p99_99_ns", h.percentile(99.99)}, {"max_ns", h.max()},
                          {"mean_ns", h.mean()},   {"stdev_ns", h.stddev()}};
        return print_json(out), 0;
    }
    std::printf("%s (%s)%s\n", title.c_str(),
                r.contains("tc") ? "queued -> sent by the rail's scheduler"
                : worker         ? "contribution sent -> result received, as workers report it"
                                 : "first contribution -> result sent",
                r["reset"].get<bool>() ? ", reset" : "");
    if (h.count() == 0) {
        std::printf("no samples\n");
        return 0;
    }
    auto us = [](std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; };
    std::printf("  min %.2f  p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  p99.99 %.2f  max %.2f  (us)\n", us(h.min()),
                us(h.percentile(50)), us(h.percentile(90)), us(h.percentile(99)), us(h.percentile(99.9)),
                us(h.percentile(99.99)), us(h.max()));
    // #bytes: the chunk size jobs joining now get (perftest's message size).
    stats::print_perftest_summary(stdout, h, r.value("chunk_bytes", 0u));
    stats::print_latency(stdout, h, "buckets");
    if (!plot.empty()) std::printf("plot: %s\n", plot.c_str());
    return 0;
}

int cmd_gid(const std::vector<std::string>& a) {
    if (a.empty() || a[0] != "list" || a.size() > 2) usage("gid list [R]");
    const std::string filter = a.size() == 2 ? a[1] : "";
    const char* root = std::getenv("RAILGATE_SYSFS_IB");
    const auto gids = control::read_gids(root ? root : "/sys/class/infiniband");
    json rails = json::array();
    std::string daemon_note;
    try {
        rails = call("rail.list")["rails"];
    } catch (const std::exception& e) {
        daemon_note = e.what();
    } catch (const daemon_error& e) {
        daemon_note = e.msg;
    }
    json out = {{"gids", json::array()}, {"dpdk_rails", json::array()}};
    for (const auto& g : gids)
        if (filter.empty() || g.device == filter || g.netdev == filter)
            out["gids"].push_back({{"device", g.device}, {"port", g.port}, {"index", g.index}, {"gid", g.gid},
                                   {"ipv4", g.ipv4}, {"type", g.type}, {"version", control::gid_version(g.type)},
                                   {"netdev", g.netdev}});
    for (const json& r : rails)
        if (filter.empty() || r["name"] == filter || r["ifname"] == filter || host_side(r) == filter)
            out["dpdk_rails"].push_back({{"rail", r["name"]}, {"device", r["device"]}, {"driver", r.value("driver", "")}, {"mac", r["mac"]},
                                         {"ipv4", r["ip"]}, {"netdev", host_side(r)}});
    if (!filter.empty() && out["gids"].empty() && out["dpdk_rails"].empty())
        throw daemon_error{"no RDMA device, netdev or rail named '" + filter + "'"};
    // Nothing in sysfs and no daemon: nothing was listed, which is a failure.
    if (out["gids"].empty() && !daemon_note.empty())
        throw daemon_error{"no GIDs in sysfs, and railgated not reached: " + daemon_note};
    out["railgated"] = daemon_note.empty() ? json{{"reached", true}} : json{{"reached", false}, {"error", daemon_note}};
    if (json_out) return print_json(out), 0;
    std::printf("%-10s %-4s %-5s %-39s %-15s %-3s %s\n", "DEV", "PORT", "INDEX", "GID", "IPv4", "VER", "DEV");
    std::printf("%-10s %-4s %-5s %-39s %-15s %-3s %s\n", "---", "----", "-----", "---", "------------", "---", "---");
    for (const json& g : out["gids"])
        std::printf("%-10s %-4u %-5u %-39s %-15s %-3s %s\n", g["device"].get<std::string>().c_str(),
                    g["port"].get<unsigned>(), g["index"].get<unsigned>(), g["gid"].get<std::string>().c_str(),
                    g["ipv4"].get<std::string>().c_str(), g["version"].get<std::string>().c_str(),
                    g["netdev"].get<std::string>().c_str());
    for (const json& r : out["dpdk_rails"])
        std::printf("%-10s %-4s %-5s %-39s %-15s %-3s %s\n", r["rail"].get<std::string>().c_str(), "-", "-",
                    ((r.value("driver", "") == "udp" ? "(udp, no GID) mac " : "(DPDK, no GID) mac ") + r["mac"].get<std::string>()).c_str(),
                    r["ipv4"].get<std::string>().c_str(),
                    "-", r["netdev"].get<std::string>().c_str());
    std::printf("n_gids_found=%zu", out["gids"].size());
    if (!daemon_note.empty()) std::printf(" (railgated not reached: %s)", daemon_note.c_str());
    std::printf("\n");
    return 0;
}

int cmd_nccl_env(const std::vector<std::string>& a) {
    if (!a.empty()) usage("nccl-env takes no arguments");
    const json s = call("status");
    std::vector<std::string> hca, ifnames;
    std::set<unsigned> gid_idx, tcs;
    bool gid_auto = false;
    const auto add = [](std::vector<std::string>& v, const std::string& x) {
        if (!x.empty() && std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
    };
    for (const json& r : s["rails"]) {
        tcs.insert(r["traffic_class"].get<unsigned>());
        add(ifnames, host_side(r)); // two udp rails on lo are one interface to NCCL
    }
    // The verbs rails: their HCAs (two rails of one port are one HCA to
    // NCCL), the GID index their new connections take, their GRH class.
    for (const json& v : s.value("verbs_rails", json::array())) {
        add(hca, v["device"].get<std::string>() + ":" + std::to_string(v.value("port", 1)));
        if (v["gid_index"].is_number_integer()) gid_idx.insert(v["gid_index"].get<unsigned>());
        else gid_auto = true;
        tcs.insert(v["traffic_class"].get<unsigned>());
    }
    auto join = [](const std::vector<std::string>& v) {
        std::string o;
        for (const auto& x : v) o += (o.empty() ? "" : ",") + x;
        return o;
    };
    json env = json::object();
    if (!hca.empty()) env["NCCL_IB_HCA"] = "=" + join(hca); // '=' prefix: exact names, as NCCL documents
    if (gid_idx.size() == 1 && !gid_auto) env["NCCL_IB_GID_INDEX"] = std::to_string(*gid_idx.begin());
    if (tcs.size() == 1 && *tcs.begin() != 0) env["NCCL_IB_TC"] = std::to_string(*tcs.begin());
    if (!ifnames.empty()) env["NCCL_SOCKET_IFNAME"] = "=" + join(ifnames);
    if (json_out) return print_json(env), 0;
    std::printf("# NCCL settings matching railgated's rails (policy %s)\n",
                s["daemon"]["policy"].get<std::string>().c_str());
    if (hca.empty()) std::printf("# no verbs rails: NCCL_IB_HCA left unset\n");
    if (gid_idx.size() + gid_auto > 1)
        std::printf("# verbs rails use different GID indexes (or some automatic): NCCL_IB_GID_INDEX left unset\n");
    if (tcs.size() > 1) std::printf("# rails use different traffic classes: NCCL_IB_TC left unset\n");
    for (const auto& [k, v] : env.items()) std::printf("export %s=%s\n", k.c_str(), v.get<std::string>().c_str());
    return 0;
}

int run(int argc, char** argv) {
    // A reader that closes the pipe (railctl stats --watch | head) ends the
    // output, not railctl by signal (exit 141 under pipefail).
    std::signal(SIGPIPE, SIG_IGN);
    std::vector<std::string> args;
    const char* env = std::getenv("RAILGATE_SOCKET");
    socket_path = env && *env ? env : control::default_socket;
    bool help = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--json" || a == "-j") json_out = true;
        else if (a == "-V" || a == "--version") {
            std::fputs(version_text("railctl").c_str(), stdout);
            return 0;
        }
        else if (a == "--help" || a == "-h") help = true;
        else if (a == "--socket") {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "railctl: --socket needs a path\n");
                return 2;
            }
            socket_path = argv[++i];
        } else args.push_back(a);
    }
    if (args.empty()) {
        std::fputs(help_main, help ? stdout : stderr);
        return help ? 0 : 2;
    }
    const std::string cmd = args[0];
    args.erase(args.begin());
    if (help) {
        const auto it = help_cmd.find(cmd);
        std::fputs(it == help_cmd.end() ? help_main : it->second, stdout);
        return it == help_cmd.end() && cmd != "help" ? 2 : 0;
    }
    try {
        if (cmd == "status") return cmd_status(args);
        if (cmd == "rail") return cmd_rail(args);
        if (cmd == "policy") return cmd_policy(args);
        if (cmd == "tc") return cmd_tc(args);
        if (cmd == "route") return cmd_route(args);
        if (cmd == "job") return cmd_job(args);
        if (cmd == "fault") return cmd_fault(args);
        if (cmd == "stats") return cmd_stats(args);
        if (cmd == "latency") return cmd_latency(args);
        if (cmd == "capture") return cmd_capture(args);
        if (cmd == "gid") return cmd_gid(args);
        if (cmd == "nccl-env") return cmd_nccl_env(args);
        usage("unknown command '" + cmd + "'");
    } catch (const usage_error& e) {
        if (json_out) std::printf("%s\n", json({{"ok", false}, {"error", e.msg}, {"usage", true}}).dump().c_str());
        std::fprintf(stderr, "railctl: %s\n", e.msg.c_str());
        const auto it = help_cmd.find(cmd);
        std::fputs(it == help_cmd.end() ? help_main : it->second, stderr);
        return 2;
    } catch (const daemon_error& e) {
        if (json_out) std::printf("%s\n", json({{"ok", false}, {"error", e.msg}}).dump().c_str());
        std::fprintf(stderr, "railctl: %s\n", e.msg.c_str());
        return 1;
    } catch (const control::unreachable& e) {
        if (json_out) std::printf("%s\n", json({{"ok", false}, {"error", e.what()}, {"unreachable", true}}).dump().c_str());
        std::fprintf(stderr, "railctl: %s\n", e.what());
        return 3;
    } catch (const std::exception& e) {
        if (json_out) std::printf("%s\n", json({{"ok", false}, {"error", e.what()}}).dump().c_str());
        std::fprintf(stderr, "railctl: %s\n", e.what());
        return 1;
    }
}

} // namespace

int main(int argc, char** argv) {
    const int rc = run(argc, argv);
    return close_output(stdout, "railctl", json_out ? "the JSON answer" : "the answer", rc);
}
