// raillat: latency study through railgated, transport by transport, in the
// terms of perftest's ib_write_lat.
//
//   raillat --transport verbs --server 198.18.0.1 -s 4 -n 1000
//   raillat --compare udp,dpdk,verbs --udp-server 198.18.5.1 --verbs-server 198.18.0.1
//
// Each iteration is a ping-pong: a job of one worker sends one chunk of
// SIZE bytes to railgated, railgated "reduces" it (a world of one) and sends
// it back. Like ib_write_lat, the reported latency is half the round trip.
// dpdk runs railgated embedded in this process over in-process DPDK rings
// (the DPDK worker transport has no other backend yet); udp and verbs go to
// a running railgated. A second phase streams --bw-size allreduces for the
// bandwidth column.
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "control/cli.hpp"
#include "control/version.hpp"
#include "client/railgate/embedded.hpp"
#include "client/railgate/udp_transport.hpp"
#include "client/railgate/verbs_transport.hpp"
#include "client/railgate/worker.hpp"
#include "dataplane/net/eal.hpp"
#include "dataplane/proto/ipv4.hpp"
#include "dataplane/stats/clock.hpp"
#include "dataplane/stats/stall_period.hpp"
#include "tools/bench_common.hpp"

using namespace railgate;

namespace {

struct options {
    std::vector<std::string> transports{"udp"};
    bool compare = false;
    std::string server, udp_server, verbs_server;
    std::uint16_t port = wire::default_udp_port;
    std::uint64_t bytes = 4;
    bool sweep = false; // -a: every size, 4 .. max_bytes in powers of two (as perftest's -a)
    unsigned iters = 1000, warmup = 100;
    std::uint64_t bw_bytes = 1 << 20;
    unsigned bw_iters = 10;
    std::string dump;
    bool json = false;
    static constexpr std::uint64_t max_bytes = 32768;
    int gid_index = -1;
    unsigned join_timeout_ms = 5000; // the worker library's default
    unsigned connect_timeout_ms = 5000; // verbs: the worker library's default
    std::uint32_t job = 4242;
    std::uint64_t token = 0; // --token or RAILGATE_TOKEN; random otherwise (a one-worker job)
    bool events = false; // sleep in the transport between results instead of spinning
    double stalls_s = 0; // --stalls: the machine's own stalls, no transport
    bool transport_given = false;
};

[[noreturn]] void die(const std::string& m) {
    std::fprintf(stderr, "raillat: %s\n", m.c_str());
    std::exit(2);
}

void usage(std::FILE* f) {
    std::fprintf(f,
                 "usage: raillat [options]\n"
                 "  -V, --version         the version, the commit, and what it was built with\n"
                 "  --transport T         udp|dpdk|verbs (default udp)\n"
                 "                        or a floor to judge them by, measured without railgated:\n"
                 "                        floor-udp (kernel UDP ping-pong on loopback), floor-ring\n"
                 "                        (cache-line ping-pong between two threads)\n"
                 "  --compare T,T,...     run several transports and print them side by side\n"
                 "  --server IP           railgated's rail-0 address (udp and verbs)\n"
                 "  --udp-server IP       for udp only (overrides --server)\n"
                 "  --verbs-server IP     for verbs only (overrides --server)\n"
                 "  --port P              railgated's UDP / rdma_cm port (default %u)\n"
                 "  -s, --size BYTES      message size, a multiple of 4 up to 32768 (default 4)\n"
                 "  -a, --all             every size from 4 to 32768 bytes in powers of two, a row each (as\n"
                 "                        perftest's -a); the bandwidth phase once, after the last\n"
                 "  -n, --iters N         timed ping-pongs (default 1000)\n"
                 "  -w, --warmup N        untimed ping-pongs first (default 100)\n"
                 "  --bw-size BYTES       allreduce size of the bandwidth phase (default 1M; 0 skips it)\n"
                 "  --bw-iters N          allreduces in the bandwidth phase (default 10)\n"
                 "  --dump FILE           every sample, one per line (transport, usec)\n"
                 "  --json                results as JSON\n"
                 "  --gid-index N         verbs: the local GID index (default: RAILGATE_IB_GID_INDEX, else the RoCEv2 IPv4 GID)\n"
                 "  --job ID              job id to use (default 4242)\n"
                 "  --join-timeout MS     how long to wait for railgated's JOIN_ACK (default 5000)\n"
                 "  --connect-timeout MS  verbs: how long a rail's connect may take, in attempts of 1 s,\n"
                 "                        then each twice the last (default 5000)\n"
                 "  --token T             the job's token (default $RAILGATE_TOKEN, else a random one)\n"
                 "  -e, --events          sleep on completion events / sockets between results (perftest's -e);\n"
                 "                        default: busy-poll, as perftest does\n"
                 "  --stalls SECONDS      no transport: spin a thread on each CPU this process may use and\n"
                 "                        count the times its CPU was taken from it (interrupts, other\n"
                 "                        tasks, the hypervisor), as sysjitter does: the floor under any\n"
                 "                        tail latency measured here; whether they come at a period (a\n"
                 "                        tick: a hypervisor's or the kernel's); and what a system call\n"
                 "                        and a yield cost, and the kernel's clocksource\n"
                 "Latencies are half round trips, as ib_write_lat reports them.\n",
                 wire::default_udp_port);
}

// A job token: what railbench takes (decimal, or 0x and hex), not 0.
std::uint64_t parse_token(const std::string& flag, const std::string& v) {
    std::uint64_t t = 0;
    if (!parse_unsigned(v, t) || t == 0) die(flag + ": '" + v + "' is not a token (an integer in 1..2^64-1)");
    return t;
}

std::uint64_t parse_num(const std::string& flag, const std::string& v, std::uint64_t max) {
    std::uint64_t x = 0;
    if (!bench::parse_size(v, x) || x > max) die(flag + ": '" + v + "' is not a number up to " + std::to_string(max));
    return x;
}

options parse(int argc, char** argv) {
    options o;
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
            std::fputs(version_text("raillat").c_str(), stdout);
            std::exit(0);
        } else if (a == "--transport" || a == "--compare") {
            o.compare = a == "--compare";
            o.transport_given = true;
            o.transports.clear();
            std::string v = val();
            for (std::size_t s = 0; s <= v.size();) {
                const std::size_t c = std::min(v.find(',', s), v.size());
                o.transports.push_back(v.substr(s, c - s));
                s = c + 1;
            }
            for (const std::string& t : o.transports)
                if (t != "udp" && t != "dpdk" && t != "verbs" && t != "floor-udp" && t != "floor-ring")
                    die(a + ": '" + t + "' is not udp, dpdk, verbs, floor-udp or floor-ring");
        } else if (a == "--server") {
            o.server = val();
        } else if (a == "--udp-server") {
            o.udp_server = val();
        } else if (a == "--verbs-server") {
            o.verbs_server = val();
        } else if (a == "--port") {
            o.port = static_cast<std::uint16_t>(parse_num(a, val(), 65535));
        } else if (a == "-s" || a == "--size") {
            o.bytes = parse_num(a, val(), options::max_bytes);
        } else if (a == "-a" || a == "--all") {
            o.sweep = true;
        } else if (a == "-n" || a == "--iters") {
            o.iters = static_cast<unsigned>(parse_num(a, val(), 100000000));
        } else if (a == "-w" || a == "--warmup") {
            o.warmup = static_cast<unsigned>(parse_num(a, val(), 100000000));
        } else if (a == "--bw-size") {
            o.bw_bytes = parse_num(a, val(), std::uint64_t{1} << 32);
        } else if (a == "--bw-iters") {
            o.bw_iters = static_cast<unsigned>(parse_num(a, val(), 1000000));
        } else if (a == "--dump") {
            o.dump = val();
        } else if (a == "--json") {
            o.json = true;
        } else if (a == "--gid-index") {
            o.gid_index = static_cast<int>(parse_num(a, val(), 255));
        } else if (a == "--stalls") {
            const std::string v = val();
            char* end = nullptr;
            o.stalls_s = std::strtod(v.c_str(), &end);
            if (v.empty() || *end || !(o.stalls_s >= 0.01 && o.stalls_s <= 3600))
                die("--stalls: '" + v + "' is not a number of seconds from 0.01 to 3600");
        } else if (a == "-e" || a == "--events") {
            o.events = true;
        } else if (a == "--connect-timeout") {
            o.connect_timeout_ms = static_cast<unsigned>(parse_num(a, val(), 3600000));
            if (!o.connect_timeout_ms) die("--connect-timeout: 0 ms leaves no time to connect (1..3600000)");
        } else if (a == "--join-timeout") {
            o.join_timeout_ms = static_cast<unsigned>(parse_num(a, val(), 3600000));
            if (!o.join_timeout_ms) die("--join-timeout: 0 ms leaves no time for a JOIN_ACK (1..3600000)");
        } else if (a == "--job") {
            o.job = static_cast<std::uint32_t>(parse_num(a, val(), UINT32_MAX));
        } else if (a == "--token") {
            o.token = parse_token(a, trim_blanks(val())); // "$(od ...)" keeps od's blanks
        } else {
            usage(stderr);
            die("unknown option '" + a + "'");
        }
    }
    if (!o.token)
        if (const char* t = std::getenv("RAILGATE_TOKEN"); t && *t) o.token = parse_token("RAILGATE_TOKEN", trim_blanks(t));
    if (!o.token) o.token = client::random_token();
    if (o.stalls_s > 0) {
        if (o.transport_given || o.sweep || !o.dump.empty())
            die("--stalls measures the machine alone: it takes no --transport, --compare, -a or --dump");
        return o;
    }
    if (o.bytes == 0 || o.bytes % 4) die("--size must be a positive multiple of 4 (fp32 elements)");
    if (o.bw_bytes % 4) die("--bw-size must be a multiple of 4");
    if (o.iters == 0) die("--iters must be at least 1");
    if (o.sweep && o.compare) die("-a and --compare: give -a one --transport, or --compare one --size");
    for (const std::string& t : o.transports) {
        if (t == "udp" && o.udp_server.empty() && o.server.empty()) die("udp needs --server or --udp-server");
        if (t == "verbs" && o.verbs_server.empty() && o.server.empty()) die("verbs needs --server or --verbs-server");
    }
    return o;
}

struct result {
    std::string transport;
    std::uint64_t bytes = 0;    // message size
    std::string error;          // non-empty: the transport could not run
    std::vector<double> us;     // half round trips, sorted
    double bw_gbs = 0;          // algorithm bandwidth of the bandwidth phase
    double at(double q) const { // the q-quantile, nearest rank
        const auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(us.size())));
        return us[std::min(us.size() - 1, k ? k - 1 : 0)];
    }
    double avg() const {
        double s = 0;
        for (double x : us) s += x;
        return s / static_cast<double>(us.size());
    }
    double stdev() const {
        const double m = avg();
        double s = 0;
        for (double x : us) s += (x - m) * (x - m);
        return std::sqrt(s / static_cast<double>(us.size()));
    }
};

// Time stamps as perftest takes them: the TSC (stats::tsc_now_ns, one
// calibration against steady_clock), where the kernel trusts it across
// CPUs. Where it does not, the kernel's clock where a read of it is cheap
// (a kvm-clock guest's vDSO: 28 ns a read), the thread left to run where
// the scheduler puts it. Only where that clock costs a system call per
// read (an emulated guest's HPET: 0.7 us, which would land in every
// sample) is it the TSC again, and the measuring thread stays on one CPU
// while it samples (tsc_cpu). Kept there on a kvm-clock host, raillat
// stayed on the CPU it started on, railgated's lcore's in 5 of 5 runs
// against the embedded default: the two took turns and a ping-pong read
// 13-16 us, against 9-11 unpinned.
double us_of(std::uint64_t ns) noexcept { return static_cast<double>(ns) / 1000; }
bool tsc_pinned() noexcept {
    static const bool pinned = [] {
        if (stats::tsc_trusted()) return false;
        const std::uint64_t t0 = stats::fast_now_ns();
        for (int i = 0; i < 255; ++i) stats::fast_now_ns();
        return stats::fast_now_ns() - t0 > 256 * 150; // over 150 ns a read
    }();
    return pinned;
}
std::uint64_t sample_ns() noexcept { return tsc_pinned() ? stats::tsc_now_ns() : stats::fast_now_ns(); }

// Keeps the calling thread on the CPU it runs on, for its lifetime, where
// tsc_pinned(); then puts its affinity back.
class tsc_cpu {
public:
    tsc_cpu() noexcept {
        if (!tsc_pinned() || pthread_getaffinity_np(pthread_self(), sizeof old_, &old_) != 0) return;
        const int cpu = sched_getcpu();
        if (cpu < 0) return;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        held_ = pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
    }
    ~tsc_cpu() {
        if (held_) pthread_setaffinity_np(pthread_self(), sizeof old_, &old_);
    }
    tsc_cpu(const tsc_cpu&) = delete;
    tsc_cpu& operator=(const tsc_cpu&) = delete;

private:
    cpu_set_t old_{};
    bool held_ = false;
};

// The ping-pongs, then the bandwidth phase, through one transport.
void measure(client::transport& t, const options& o, result& r, std::vector<double>& raw) {
    client::worker_options wo;
    wo.job_id = o.job;
    wo.job_token = o.token;
    wo.world = 1;
    wo.max_count = std::max(o.bytes, o.bw_bytes) / 4;
    wo.chunk_rtt = false;
    wo.join_timeout = std::chrono::milliseconds(o.join_timeout_ms);
    client::worker w(t, wo);
    if (std::string e = w.join(); !e.empty()) {
        r.error = e;
        return;
    }
    if (o.bytes > w.job_info().chunk_bytes)
        std::fprintf(stderr, "raillat: %s: %llu bytes span %llu chunks (chunk %u B)\n", r.transport.c_str(),
                     static_cast<unsigned long long>(o.bytes),
                     static_cast<unsigned long long>((o.bytes + w.job_info().chunk_bytes - 1) / w.job_info().chunk_bytes),
                     w.job_info().chunk_bytes);
    std::vector<float> buf(o.bytes / 4, 1.0f);
    using clock = std::chrono::steady_clock;
    // One operation: busy-polled like perftest, or sleeping between results.
    auto op = [&](float* p, std::size_t n) -> std::string {
        if (o.events) return w.allreduce(p, n, wire::dtype::fp32);
        w.start(p, n, wire::dtype::fp32);
        while (!w.progress()) {
        }
        return w.error();
    };
    sample_ns(); // calibrated before the first sample
    const tsc_cpu stay;
    for (unsigned i = 0; i < o.warmup + o.iters; ++i) {
        const std::uint64_t t0 = sample_ns();
        if (std::string e = op(buf.data(), buf.size()); !e.empty()) {
            r.error = e;
            return;
        }
        const std::uint64_t t1 = sample_ns();
        if (i >= o.warmup) raw.push_back(us_of(t1 - t0) / 2);
    }
    r.us = raw;
    std::sort(r.us.begin(), r.us.end());
    if (o.bw_bytes && o.bw_iters) {
        std::vector<float> big(o.bw_bytes / 4, 0.5f);
        op(big.data(), big.size()); // warm-up
        const auto t0 = clock::now();
        for (unsigned i = 0; i < o.bw_iters; ++i)
            if (std::string e = op(big.data(), big.size()); !e.empty()) {
                r.error = "bandwidth phase: " + e;
                return;
            }
        const double s = std::chrono::duration<double>(clock::now() - t0).count();
        r.bw_gbs = static_cast<double>(o.bw_bytes) * o.bw_iters / s / 1e9;
    }
    w.leave();
}

// The floors railgate's transports are judged against, measured the same
// way in the same run (no railgated): floor-udp, a kernel UDP ping-pong
// between two busy-polling sockets on loopback (what the udp transport's
// two kernel crossings cost at least); floor-ring, a cache-line ping-pong
// between two threads (the cross-core hand-off that the embedded dpdk
// path makes twice, worker to railgated's lcore and back).
// The CPUs raillat may run on, as it started: the DPDK EAL (the dpdk
// transport) pins the calling thread to its main lcore, and a thread it
// starts inherits that one CPU, where a busy-polling ping-pong takes turns
// by the scheduler's tick (4 ms a sample) instead of running on two CPUs.
cpu_set_t start_cpus() {
    static const cpu_set_t set = [] {
        cpu_set_t s;
        CPU_ZERO(&s);
        if (sched_getaffinity(0, sizeof s, &s) != 0) CPU_ZERO(&s);
        return s;
    }();
    return set;
}
// A floor's two busy-polling threads, each on a CPU of its own: the
// calling thread on the CPU it runs on, its peer on another of the start
// set, where it has two. Left to the scheduler, both can share one CPU for
// a whole run, taking turns by its slices: beside a busy task on each CPU
// (tests/netns/raillat.sh), this machine's kernel (6.18) kept them
// together on one CPU for the whole 25 s run in 5 of 14 runs: floor-udp's
// p99 6.0 ms, against 6-25 us in the others. The calling thread's affinity
// is put back at the end. With one CPU, the peer runs where the start set
// lets it.
class floor_cpus {
public:
    floor_cpus() noexcept {
        const cpu_set_t s = start_cpus();
        peer_ = s;
        const int here = sched_getcpu();
        int other = -1;
        for (int c = 0; c < CPU_SETSIZE && other < 0; ++c)
            if (CPU_ISSET(c, &s) && c != here) other = c;
        if (here < 0 || other < 0 || pthread_getaffinity_np(pthread_self(), sizeof old_, &old_) != 0) return;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(here, &one);
        held_ = pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
        if (!held_) return;
        CPU_ZERO(&peer_);
        CPU_SET(other, &peer_);
    }
    ~floor_cpus() {
        if (held_) pthread_setaffinity_np(pthread_self(), sizeof old_, &old_);
    }
    floor_cpus(const floor_cpus&) = delete;
    floor_cpus& operator=(const floor_cpus&) = delete;
    // Run at the start of the peer thread.
    void place_peer() const noexcept {
        if (CPU_COUNT(&peer_) > 0) pthread_setaffinity_np(pthread_self(), sizeof peer_, &peer_);
    }

private:
    cpu_set_t old_{}, peer_{};
    bool held_ = false;
};

void measure_floor(const std::string& name, const options& o, result& r, std::vector<double>& raw) {
    sample_ns(); // calibrated before the first sample
    const floor_cpus cpus;
    const tsc_cpu stay;
    const unsigned total = o.warmup + o.iters;
    if (name == "floor-ring") {
        alignas(64) std::atomic<std::uint32_t> ball{0};
        std::thread peer([&] {
            cpus.place_peer();
            for (std::uint32_t want = 1; want < 2 * total; want += 2) {
                while (ball.load(std::memory_order_acquire) != want) {
                }
                ball.store(want + 1, std::memory_order_release);
            }
        });
        for (std::uint32_t i = 0; i < total; ++i) {
            const std::uint64_t t0 = sample_ns();
            ball.store(2 * i + 1, std::memory_order_release);
            while (ball.load(std::memory_order_acquire) != 2 * i + 2) {
            }
            if (i >= o.warmup) raw.push_back(us_of(sample_ns() - t0) / 2);
        }
        peer.join();
    } else {
        auto open = [](sockaddr_in& a) {
            const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
            a = {};
            a.sin_family = AF_INET;
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            socklen_t len = sizeof a;
            if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
                getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
                throw std::runtime_error(std::string("floor-udp: ") + std::strerror(errno));
            return fd;
        };
        sockaddr_in ea, pa;
        const int echo = open(ea), ping = open(pa);
        if (connect(ping, reinterpret_cast<sockaddr*>(&ea), sizeof ea) != 0 ||
            connect(echo, reinterpret_cast<sockaddr*>(&pa), sizeof pa) != 0)
            throw std::runtime_error(std::string("floor-udp: connect: ") + std::strerror(errno));
        std::vector<char> msg(std::max<std::uint64_t>(o.bytes, 1) + wire::header_bytes);
        std::thread peer([&] {
            cpus.place_peer();
            std::vector<char> b(msg.size());
            for (unsigned i = 0; i < total; ++i) {
                while (recv(echo, b.data(), b.size(), MSG_DONTWAIT) < 0) {
                }
                send(echo, b.data(), b.size(), 0);
            }
        });
        for (unsigned i = 0; i < total; ++i) {
            const std::uint64_t t0 = sample_ns();
            send(ping, msg.data(), msg.size(), 0);
            while (recv(ping, msg.data(), msg.size(), MSG_DONTWAIT) < 0) {
            }
            if (i >= o.warmup) raw.push_back(us_of(sample_ns() - t0) / 2);
        }
        peer.join();
        close(echo);
        close(ping);
    }
    r.us = raw;
    std::sort(r.us.begin(), r.us.end());
}

std::uint32_t server_ip(const options& o, const std::string& specific) {
    const std::string& s = specific.empty() ? o.server : specific;
    std::uint32_t ip = 0;
    if (!net::parse_ipv4(s, ip)) die("'" + s + "' is not an IPv4 address");
    return ip;
}

// One transport at every size in `sizes` (the bandwidth phase after the
// last), through one transport object: the embedded railgated (its rings
// are named) is made once per process run. Each size is its own job.
std::vector<result> run(const std::string& name, const options& o, const std::vector<std::uint64_t>& sizes,
                        std::vector<std::vector<double>>& raws) {
    std::vector<result> rs(sizes.size());
    raws.assign(sizes.size(), {});
    for (std::size_t k = 0; k < sizes.size(); ++k) {
        rs[k].transport = name;
        rs[k].bytes = sizes[k];
    }
    auto each = [&](auto&& measure_one) {
        for (std::size_t k = 0; k < sizes.size(); ++k) {
            options at = o;
            at.bytes = sizes[k];
            at.job = o.job + static_cast<std::uint32_t>(k);
            if (k + 1 < sizes.size()) at.bw_bytes = 0;
            measure_one(at, rs[k], raws[k]);
            if (!rs[k].error.empty()) break;
        }
    };
    try {
        if (name.rfind("floor-", 0) == 0) {
            each([&](const options& at, result& r, std::vector<double>& raw) { measure_floor(name, at, r, raw); });
        } else if (name == "udp") {
            auto t = client::make_udp_transport(server_ip(o, o.udp_server), o.port);
            each([&](const options& at, result& r, std::vector<double>& raw) { measure(*t, at, r, raw); });
        } else if (name == "verbs") {
            client::verbs_options vo;
            vo.qp.gid_index = o.gid_index;
            vo.connect_timeout = std::chrono::milliseconds(o.connect_timeout_ms);
            vo.on_connect_retry = [](const std::string& line) { std::fprintf(stderr, "raillat: %s\n", line.c_str()); };
            client::verbs_transport t(server_ip(o, o.verbs_server), o.port, vo);
            std::fprintf(stderr, "raillat: verbs QP timers: %s\n", verbs::describe(t.qp_timers()).c_str());
            std::fprintf(stderr, "raillat: verbs source GID index %d\n", t.gid_index());
            each([&](const options& at, result& r, std::vector<double>& raw) { measure(t, at, r, raw); });
        } else {
            // railgated embedded: one rail over in-process rings, on lcore 1.
            static std::optional<net::eal> eal; // rte_eal_init: once per process
            if (!eal) eal.emplace(net::embedded_eal_args("raillat"));
            client::embedded_fabric fabric(1, 1, 9000);
            net::daemon_config dc;
            dc.rails = fabric.daemon_rails();
            dc.mbufs_per_rail = 4096;
            net::daemon d(dc);
            d.launch();
            auto t = fabric.worker_transport(0);
            each([&](const options& at, result& r, std::vector<double>& raw) { measure(*t, at, r, raw); });
            d.stop();
        }
    } catch (const std::exception& e) {
        // The transport could not be made (or failed mid-way): the sizes not
        // measured report why.
        for (result& r : rs)
            if (r.us.empty() && r.error.empty()) r.error = e.what();
    }
    return rs;
}

// perftest's table: the header once per transport (with -a, before its
// first size), then a row per size.
void print_perftest(const result& r, const options& o, bool header) {
    if (header) {
        std::printf("# raillat: transport %s, %s, %zu iterations, latency = half round trip (as ib_write_lat)\n",
                    r.transport.c_str(),
                    o.sweep ? ("4.." + std::to_string(options::max_bytes) + " bytes").c_str()
                            : (std::to_string(o.bytes) + " bytes").c_str(),
                    r.us.size());
        std::printf(" #bytes #iterations  t_min[usec]  t_max[usec]  t_typical[usec]  t_avg[usec]  t_stdev[usec]  "
                    "99%% percentile[usec]  99.9%% percentile[usec]\n");
    }
    std::printf(" %-6llu %-11zu  %-11.2f  %-11.2f  %-15.2f  %-11.2f  %-13.2f  %-20.2f  %-.2f\n",
                static_cast<unsigned long long>(r.bytes), r.us.size(), r.us.front(), r.us.back(), r.at(0.5), r.avg(),
                r.stdev(), r.at(0.99), r.at(0.999));
    if (r.bw_gbs > 0)
        std::printf("# bandwidth: %.3f GB/s (allreduce of %llu bytes, %u iterations)\n", r.bw_gbs,
                    static_cast<unsigned long long>(o.bw_bytes), o.bw_iters);
}

void print_compare(const std::vector<result>& rs, const options& o) {
    double best_lat = 0, best_bw = 0;
    for (const result& r : rs)
        if (r.error.empty()) {
            best_lat = best_lat == 0 ? r.at(0.5) : std::min(best_lat, r.at(0.5));
            best_bw = std::max(best_bw, r.bw_gbs);
        }
    std::printf("# raillat --compare: %llu-byte ping-pong (half round trip, usec) and %llu-byte allreduce bandwidth\n",
                static_cast<unsigned long long>(o.bytes), static_cast<unsigned long long>(o.bw_bytes));
    std::printf("%-9s %8s %10s %10s %10s %10s %10s %10s %11s %10s\n", "transport", "samples", "t_min", "t_typical",
                "t_avg", "99%", "99.9%", "bw[GB/s]", "lat/best", "bw/best");
    for (const result& r : rs) {
        if (!r.error.empty()) {
            std::printf("%-9s unavailable: %s\n", r.transport.c_str(), r.error.c_str());
            continue;
        }
        std::printf("%-9s %8zu %10.2f %10.2f %10.2f %10.2f %10.2f %10.3f %10.2fx %9.2fx\n", r.transport.c_str(),
                    r.us.size(), r.us.front(), r.at(0.5), r.avg(), r.at(0.99), r.at(0.999), r.bw_gbs,
                    r.at(0.5) / best_lat, best_bw > 0 ? r.bw_gbs / best_bw : 0.0);
    }
}

void print_json(const std::vector<result>& rs, const options& o) {
    std::printf("{\"bytes\": %llu, \"bw_bytes\": %llu, \"results\": [", static_cast<unsigned long long>(o.bytes),
                static_cast<unsigned long long>(o.bw_bytes));
    for (std::size_t i = 0; i < rs.size(); ++i) {
        const result& r = rs[i];
        std::printf("%s{\"transport\": \"%s\", \"bytes\": %llu", i ? ", " : "", r.transport.c_str(),
                    static_cast<unsigned long long>(r.bytes));
        if (!r.error.empty()) {
            std::string e;
            for (char c : r.error) e += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
            std::printf(", \"error\": \"%s\"}", e.c_str());
            continue;
        }
        std::printf(", \"iterations\": %zu, \"t_min_us\": %.3f, \"t_max_us\": %.3f, \"t_typical_us\": %.3f, "
                    "\"t_avg_us\": %.3f, \"t_stdev_us\": %.3f, \"p99_us\": %.3f, \"p999_us\": %.3f, \"bw_GBps\": %.4f}",
                    r.us.size(), r.us.front(), r.us.back(), r.at(0.5), r.avg(), r.stdev(), r.at(0.99), r.at(0.999),
                    r.bw_gbs);
    }
    std::printf("]}\n");
}

// --stalls: a thread pinned to each CPU reads the clock as fast as it can
// for the given time; a gap between two reads over 10 us is a time the CPU
// was taken from it. What a poll-mode loop on that CPU would lose too.
struct cpu_stalls {
    int cpu = -1;
    bool pinned = false;
    std::uint64_t over[4] = {}; // gaps over 10, 40, 100 and 1000 us
    std::uint64_t lost_ns = 0, longest_ns = 0, span_ns = 0;
    std::vector<stats::stall> over_20us; // reserved before the spin: whether they come at a period
};
constexpr std::uint64_t period_stall_ns = 20'000;
constexpr std::size_t period_stalls_kept = 1 << 17;
constexpr std::uint64_t stall_bounds_ns[4] = {10'000, 40'000, 100'000, 1'000'000};

void spin_and_count(cpu_stalls& c, double seconds, const std::atomic<bool>& go) noexcept {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c.cpu, &one);
    c.pinned = pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
    while (!go.load(std::memory_order_acquire)) {
    }
    const std::uint64_t t0 = sample_ns(), end = t0 + static_cast<std::uint64_t>(seconds * 1e9);
    std::uint64_t prev = t0;
    for (;;) {
        const std::uint64_t t = sample_ns();
        const std::uint64_t gap = t - prev;
        prev = t;
        if (gap > stall_bounds_ns[0]) {
            c.lost_ns += gap;
            c.longest_ns = std::max(c.longest_ns, gap);
            for (unsigned k = 0; k < 4; ++k) c.over[k] += gap > stall_bounds_ns[k];
            if (gap > period_stall_ns && c.over_20us.size() < c.over_20us.capacity())
                c.over_20us.push_back({t - gap - t0, gap});
        }
        if (t >= end) break;
    }
    c.span_ns = prev - t0;
}

// What one kernel crossing costs here, on this thread: a system call that
// does nothing (getppid) and a sched_yield (with nothing else to run on the
// CPU, a system call too; beside a busy task, up to its slice). The median
// of runs of 200 each: at most 21 runs, and none begun after 50 ms. A poll
// loop that
// yields when idle and a kernel-UDP worker's sendmmsg and recvmmsg pay
// it; a guest whose hypervisor traps them (page-table isolation in a PVM
// guest: 1.0-1.3 us, commonly ten times what it costs without) pays it
// many times over, and figures taken on one kind of machine do not carry
// to the other.
struct crossing_costs {
    double syscall_us = 0, yield_us = 0;
};
crossing_costs measure_crossings() {
    auto median_us = [](auto&& op) {
        constexpr int most = 21, per_run = 200;
        constexpr std::uint64_t budget_ns = 50'000'000;
        std::vector<double> v;
        const std::uint64_t start = sample_ns();
        for (std::uint64_t t0 = start; v.size() < most && t0 - start < budget_ns;) {
            for (int i = 0; i < per_run; ++i) op();
            const std::uint64_t t1 = sample_ns();
            v.push_back(static_cast<double>(t1 - t0) / 1e3 / per_run);
            t0 = t1;
        }
        std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
        return v[v.size() / 2];
    };
    crossing_costs c;
    c.syscall_us = median_us([] { ::syscall(SYS_getppid); });
    c.yield_us = median_us([] { ::sched_yield(); });
    return c;
}

int run_stalls(const options& o) {
    sample_ns(); // calibrated before the threads start
    const crossing_costs x = measure_crossings();
    std::string clock = stats::clocksource(); // "tsc": fast_now_ns() reads the TSC; else clock_gettime
    if (clock.empty()) clock = "unknown";
    const cpu_set_t set = start_cpus();
    std::vector<cpu_stalls> cs;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) {
            cs.emplace_back();
            cs.back().cpu = c;
        }
    if (cs.empty()) die("--stalls: no CPU to run on");
    for (cpu_stalls& c : cs) c.over_20us.reserve(period_stalls_kept);
    std::atomic<bool> go{false};
    std::vector<std::thread> ts;
    for (cpu_stalls& c : cs) ts.emplace_back([&c, &o, &go] { spin_and_count(c, o.stalls_s, go); });
    go.store(true, std::memory_order_release);
    for (std::thread& t : ts) t.join();
    std::vector<stats::stall_period> period;
    for (const cpu_stalls& c : cs) period.push_back(stats::find_period(c.over_20us));
    auto per_s = [](const cpu_stalls& c, unsigned k) {
        return c.span_ns ? static_cast<double>(c.over[k]) * 1e9 / static_cast<double>(c.span_ns) : 0.0;
    };
    auto lost_pct = [](const cpu_stalls& c) {
        return c.span_ns ? 100.0 * static_cast<double>(c.lost_ns) / static_cast<double>(c.span_ns) : 0.0;
    };
    if (o.json) {
        std::printf("{\"seconds\": %.3f, \"cpus\": [", o.stalls_s);
        for (std::size_t i = 0; i < cs.size(); ++i) {
            const cpu_stalls& c = cs[i];
            std::printf("%s{\"cpu\": %d, \"pinned\": %s, \"over_10us_per_s\": %.2f, \"over_40us_per_s\": %.2f, "
                        "\"over_100us_per_s\": %.2f, \"over_1ms_per_s\": %.2f, \"lost_pct\": %.3f, \"longest_us\": %.1f, "
                        "\"period_us\": %.1f, \"period_stall_us\": %.1f, \"period_share\": %.3f}",
                        i ? ", " : "", c.cpu, c.pinned ? "true" : "false", per_s(c, 0), per_s(c, 1), per_s(c, 2),
                        per_s(c, 3), lost_pct(c), us_of(c.longest_ns), us_of(period[i].period_ns),
                        us_of(period[i].median_len_ns), period[i].share());
        }
        std::printf("], \"syscall_us\": %.3f, \"yield_us\": %.3f, \"clocksource\": \"%s\"}\n", x.syscall_us, x.yield_us,
                    clock.c_str());
        return 0;
    }
    std::printf("# raillat --stalls %.2f: a thread spun on each CPU reading the clock; each gap over 10 us is a\n"
                "# time the CPU was taken from it (an interrupt, another task, the hypervisor), per second\n",
                o.stalls_s);
    std::printf("# a system call (getppid) costs %.3f us here, a sched_yield %.3f us; the kernel's clocksource: %s\n",
                x.syscall_us, x.yield_us, clock.c_str());
    std::printf("%5s %12s %12s %12s %12s %8s %12s\n", "cpu", ">10us/s", ">40us/s", ">100us/s", ">1ms/s", "lost%",
                "longest(us)");
    for (const cpu_stalls& c : cs)
        std::printf("%5d %12.1f %12.1f %12.1f %12.1f %8.2f %12.1f%s\n", c.cpu, per_s(c, 0), per_s(c, 1), per_s(c, 2),
                    per_s(c, 3), lost_pct(c), us_of(c.longest_ns), c.pinned ? "" : "  (not pinned)");
    // A tick's stalls: whatever is in flight on that CPU when one comes
    // waits it out, whatever the code.
    for (std::size_t i = 0; i < cs.size(); ++i) {
        const stats::stall_period& p = period[i];
        if (p.period_ns)
            std::printf("# cpu %d: a stall every %.1f us, %.1f us long (the median), %zu of its %zu stalls over %.0f us: "
                        "a tick; anything in flight on this CPU then waits that long\n",
                        cs[i].cpu, us_of(p.period_ns), us_of(p.median_len_ns), p.members, p.of, us_of(period_stall_ns));
        else
            std::printf("# cpu %d: no period among its %zu stalls over %.0f us\n", cs[i].cpu, p.of,
                        us_of(period_stall_ns));
    }
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    start_cpus(); // before an EAL pins this thread
    const options o = parse(argc, argv);
    if (o.stalls_s > 0) return close_output(stdout, "raillat", "the results", run_stalls(o));
    std::vector<result> rs;
    std::FILE* dump = nullptr;
    if (!o.dump.empty() && !(dump = std::fopen(o.dump.c_str(), "w"))) die("--dump: cannot write " + o.dump);
    // -a: every power of two from 4 bytes up; the bandwidth phase once, after
    // the largest size.
    std::vector<std::uint64_t> sizes{o.bytes};
    if (o.sweep) {
        sizes.clear();
        for (std::uint64_t b = 4; b <= options::max_bytes; b *= 2) sizes.push_back(b);
    }
    for (const std::string& t : o.transports) {
        std::vector<std::vector<double>> raws;
        const std::vector<result> got = run(t, o, sizes, raws);
        for (std::size_t k = 0; k < got.size(); ++k) {
            if (got[k].us.empty() && got[k].error.empty()) continue; // not reached: an earlier size failed
            rs.push_back(got[k]);
            if (dump) {
                std::fprintf(dump, "# transport %s, %llu bytes, half round trip in usec, in sample order\n", t.c_str(),
                             static_cast<unsigned long long>(got[k].bytes));
                for (double x : raws[k]) std::fprintf(dump, "%s %.3f\n", t.c_str(), x);
            }
            if (!o.compare && !o.json) {
                if (!got[k].error.empty()) die(t + ": " + got[k].error);
                options at = o;
                at.bytes = got[k].bytes;
                if (k + 1 < got.size()) at.bw_bytes = 0;
                print_perftest(got[k], at, k == 0);
            }
        }
    }
    int rc = 0;
    if (dump) rc = close_output(dump, "raillat", "--dump " + o.dump, rc);
    if (o.json) print_json(rs, o);
    else if (o.compare) print_compare(rs, o);
    for (const result& r : rs)
        if (!r.error.empty()) rc = 1;
    return close_output(stdout, "raillat", "the results", rc);
}
