// librailgate's C ABI (railgate.h) over client::worker: a communicator
// holds a worker (and its own transport) per dtype it uses, and runs its
// allreduces one at a time in submission order, on the calling thread when
// nothing is queued, otherwise on its progress thread.
#include "client/railgate.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <thread>

#include <pthread.h>
#include <unistd.h>

#include "client/railgate/connect.hpp"
#include "client/railgate/worker.hpp"
#include "dataplane/proto/ipv4.hpp"
#include "dataplane/reduce/reduce.hpp"

#define RG_EXPORT extern "C" __attribute__((visibility("default")))

using namespace railgate;

namespace {

thread_local std::string create_error;

// Bumped in every child a fork makes. A communicator (and each request)
// remembers the value it was made under: in a forked child it is another
// process's, whose threads did not come along and whose job is not the
// child's, so the child gets RG_ERR_USAGE and its rg_destroy sends nothing
// (a LEAVE would end the parent's rank) and waits for nothing.
std::atomic<unsigned> fork_generation{0};
[[maybe_unused]] const int fork_watch = ::pthread_atfork(nullptr, nullptr, [] {
    fork_generation.fetch_add(1, std::memory_order_relaxed);
});
unsigned forks_now() noexcept {
    return fork_generation.load(std::memory_order_relaxed);
}
// config.peer_timeout_ms: the worker's own default, and at most an hour (as
// railbench --peer-timeout).
std::uint32_t default_peer_timeout_ms() noexcept {
    return static_cast<std::uint32_t>(client::worker_options{}.peer_timeout.count());
}
constexpr std::uint32_t max_peer_timeout_ms = 3'600'000;
// config.connect_timeout_ms: verbs_options' default, and at most an hour.
constexpr std::uint32_t default_connect_timeout_ms = 5000, max_connect_timeout_ms = 3'600'000;

rg_status status_of(client::failure f) noexcept {
    switch (f) {
    case client::failure::none: return RG_OK;
    case client::failure::usage: return RG_ERR_USAGE;
    case client::failure::refused: return RG_ERR_REFUSED;
    case client::failure::rank_failed: return RG_ERR_RANK_FAILED;
    case client::failure::aborted:
    case client::failure::stopped: return RG_ERR_ABORTED;
    case client::failure::rail_down: return RG_ERR_RAIL_DOWN;
    case client::failure::daemon_gone: return RG_ERR_DAEMON_GONE;
    case client::failure::expired: return RG_ERR_EXPIRED;
    case client::failure::timeout: return RG_ERR_TIMEOUT;
    }
    return RG_ERR_SYSTEM;
}

// An allreduce's status: written under the communicator's mutex, after the
// op's err, and read without it, so that a request can be tested, waited
// and read after rg_destroy (which finishes every queued op first) without
// touching the freed communicator.
class op_status {
public:
    op_status() = default;
    op_status(const op_status& o) : v_(o.v_.load(std::memory_order_acquire)) {}
    op_status& operator=(rg_status s) {
        v_.store(s, std::memory_order_release);
        return *this;
    }
    operator rg_status() const { return v_.load(std::memory_order_acquire); }

private:
    std::atomic<rg_status> v_{RG_IN_PROGRESS};
};

// One queued or running allreduce.
struct op {
    const void* send = nullptr;
    void* recv = nullptr;
    std::size_t count = 0;
    wire::dtype dt = wire::dtype::fp32;
    // Compressed: recv is a float buffer, divided by `divisor` and sent as dt.
    bool compressed = false;
    float divisor = 1.0f;
    op_status status;
    std::string err;
};

// The worker of one dtype's job, with the transport it owns (none when it
// borrows another member's: a process has one DPDK EAL, so every dtype's
// job of a dpdk communicator shares the first one's ports).
struct member {
    std::unique_ptr<client::connection> conn;
    std::unique_ptr<client::worker> w;
    bool joined = false;
};

} // namespace

struct rg_request {
    rg_comm* comm;
    std::shared_ptr<op> o;
    unsigned forks = forks_now();
};

struct rg_comm {
    unsigned forks = forks_now();
    pid_t pid = ::getpid();
    rg_config cfg{};
    std::string server, transport, rails;   // cfg's strings, owned
    client::connect_options co;
    std::array<member, wire::dtype_count> members;

    std::mutex m;
    std::condition_variable work, done;
    std::deque<std::shared_ptr<op>> queue;
    bool busy = false;        // an allreduce, join or leave runs (the workers are in use)
    // Between operations the progress thread PINGs the joined jobs this
    // often (a quarter of railgated's stall time), so that a rank that
    // computes longer than the stall time is not taken for dead.
    std::atomic<unsigned> keepalive_ms{250};
    bool stopping = false;
    rg_status broken = RG_OK; // the first failure: every later allreduce fails with it
    std::string broken_err;
    std::string last_error;
    rg_stats stats{};
    std::thread progress;
    std::vector<std::uint16_t> narrow;   // a compressed allreduce's wire copy (the running op's)

    // Every worker goes before any transport: one may use another member's.
    ~rg_comm() {
        for (member& mb : members) mb.w.reset();
    }

    // Runs fn with the workers to itself, after everything queued before.
    template <class F>
    rg_status exclusive(F&& fn) {
        std::unique_lock lk(m);
        done.wait(lk, [&] { return queue.empty() && !busy; });
        busy = true;
        lk.unlock();
        std::string err;
        rg_status st = RG_OK;
        try {
            st = fn(err);
        } catch (const std::exception& e) {
            st = RG_ERR_SYSTEM;
            err = e.what();
        }
        lk.lock();
        busy = false;
        if (st != RG_OK) last_error = err;
        work.notify_all();
        done.notify_all();
        return st;
    }

    // The worker for dt, made (its own transport) and joined on first use.
    rg_status joined(wire::dtype dt, member*& out, std::string& err) {
        member& mb = members[static_cast<unsigned>(dt)];
        out = &mb;
        if (mb.joined) return RG_OK;
        if (!mb.w) {
            // The transport: this dtype's own, or (dpdk: one EAL and one set
            // of ports per process) the one the communicator made first.
            // Its jobs take turns on it: one operation runs at a time, and
            // a worker passes over another job's messages.
            client::transport* t = mb.conn ? &mb.conn->get() : nullptr;
            if (!t && co.transport == "dpdk")
                for (member& other : members)
                    if (other.conn) {
                        t = &other.conn->get();
                        break;
                    }
            if (!t) {
                mb.conn = std::make_unique<client::connection>(co);
                t = &mb.conn->get();
            }
            client::worker_options wo;
            wo.job_id = cfg.job + static_cast<std::uint32_t>(dt);
            wo.job_token = cfg.token;
            wo.rank = static_cast<std::uint16_t>(cfg.rank);
            wo.world = static_cast<std::uint16_t>(cfg.world);
            wo.dt = dt;
            wo.max_count = cfg.max_count;
            wo.retries = cfg.retries;
            client::set_cc_mode(wo, cfg.congestion_control == RG_CC_OFF     ? client::cc_mode::off
                                    : cfg.congestion_control == RG_CC_DELAY ? client::cc_mode::delay
                                                                            : client::cc_mode::queue);
            wo.op_timeout = std::chrono::milliseconds(cfg.timeout_ms);
            wo.join_timeout = std::chrono::milliseconds(cfg.join_timeout_ms);
            wo.peer_timeout = std::chrono::milliseconds(cfg.peer_timeout_ms ? cfg.peer_timeout_ms : default_peer_timeout_ms());
            if (cfg.on_retry)
                wo.on_retry = [fn = cfg.on_retry, ctx = cfg.on_retry_ctx, rank = cfg.rank,
                               job = "job " + std::to_string(wo.job_id) + " (" + std::string(wire::dtype_name(dt)) +
                                     "): "](const std::string& line) { fn(ctx, rank, (job + line).c_str()); };
            mb.w = std::make_unique<client::worker>(*t, wo);
        }
        err = mb.w->join();
        if (!err.empty()) {
            err = "joining job " + std::to_string(cfg.job + static_cast<std::uint32_t>(dt)) + " (" +
                  std::string(wire::dtype_name(dt)) + ") as rank " + std::to_string(cfg.rank) + " of " +
                  std::to_string(cfg.world) + ": " + err;
            rg_status st = status_of(mb.w->failed_with());
            return st == RG_OK ? RG_ERR_SYSTEM : st;
        }
        mb.joined = true;
        if (const unsigned stall = mb.w->job_info().stall_ms; stall)
            keepalive_ms.store(std::min(keepalive_ms.load(), std::max(10u, stall / 4)));
        return RG_OK;
    }

    // Runs one allreduce (the caller holds busy). Returns its status.
    rg_status run(op& o) {
        {
            std::lock_guard lk(m);
            if (broken != RG_OK) {
                o.err = "an earlier operation failed: " + broken_err;
                last_error = o.err;
                return broken;
            }
        }
        rg_status st = RG_OK;
        try {
            member* mb = nullptr;
            st = joined(o.dt, mb, o.err);
            if (st == RG_OK && o.compressed) {
                o.err = compressed(*mb, o);
            } else if (st == RG_OK) {
                const std::size_t bytes = o.count * wire::dtype_size(o.dt);
                if (o.send && o.send != o.recv && bytes) std::memmove(o.recv, o.send, bytes);
                o.err = mb->w->allreduce(o.recv, o.count, o.dt);
            }
            if (st == RG_OK && !o.err.empty()) {
                st = status_of(mb->w->failed_with());
                if (st == RG_OK) st = RG_ERR_SYSTEM;
            }
        } catch (const std::exception& e) {
            st = RG_ERR_SYSTEM;
            o.err = e.what();
        }
        rg_stats now{};
        for (const member& mb : members) {
            if (!mb.w) continue;
            now.retransmits += mb.w->retransmits();
            now.recoveries += mb.w->recoveries();
            now.timeout_retransmits += mb.w->timeout_retransmits();
            now.tail_probes += mb.w->tail_probes();
            now.spurious_retransmits += mb.w->spurious_retransmits();
            now.window_decreases += mb.w->window_decreases();
            now.ecn_marks += mb.w->ecn_marks();
        }
        std::lock_guard lk(m);
        now.allreduces = stats.allreduces;
        now.bytes = stats.bytes;
        stats = now;
        if (st == RG_OK) {
            ++stats.allreduces;
            stats.bytes += o.count * wire::dtype_size(o.dt);
        } else {
            last_error = o.err;
            // A usage error (the job's max_count...) leaves the job as it was.
            if (st != RG_ERR_USAGE) {
                broken = st;
                broken_err = o.err;
            }
        }
        return st;
    }

    // Divides, narrows to the wire dtype, allreduces, widens back in place,
    // with the reduce library's SIMD conversions (the rounding of railgated's
    // own: nearest even, canonical NaN).
    std::string compressed(member& mb, op& o) {
        auto* f = static_cast<float*>(o.recv);
        const float div = o.divisor;
        const std::size_t n = o.count;
        const reduce::kernels& k = reduce::best();
        const auto d = static_cast<unsigned>(o.dt);
        if (o.dt == wire::dtype::fp32) {
            if (div != 1.0f) k.narrow[d](f, f, div, n);
            return mb.w->allreduce(f, n, o.dt);
        }
        narrow.resize(n);
        std::uint16_t* h = narrow.data();
        k.narrow[d](h, f, div, n);
        std::string err = mb.w->allreduce(h, n, o.dt);
        if (!err.empty()) return err;
        k.widen[d](f, h, n);
        return {};
    }

    void finish(op& o, rg_status st) {
        std::lock_guard lk(m);
        o.status = st;
        busy = false;
        done.notify_all();
        work.notify_all();
    }

    void progress_loop() {
        std::unique_lock lk(m);
        for (;;) {
            if (!work.wait_for(lk, std::chrono::milliseconds(keepalive_ms.load()),
                               [&] { return stopping || (!queue.empty() && !busy); })) {
                if (busy || broken != RG_OK) continue; // an operation speaks for itself
                busy = true;
                lk.unlock();
                for (member& mb : members)
                    if (mb.joined) mb.w->keepalive();
                lk.lock();
                busy = false;
                work.notify_all();
                done.notify_all();
                continue;
            }
            if (queue.empty()) return;   // stopping, nothing left
            std::shared_ptr<op> o = std::move(queue.front());
            queue.pop_front();
            busy = true;
            lk.unlock();
            const rg_status st = run(*o);
            finish(*o, st);
            lk.lock();
        }
    }
};

namespace {

rg_status usage(rg_comm* comm, const std::string& why) {
    if (comm) {
        std::lock_guard lk(comm->m);
        comm->last_error = why;
    } else {
        create_error = why;
    }
    return RG_ERR_USAGE;
}

// Made (a communicator, a request: its forks) in a process this one was
// forked from.
bool inherited(unsigned forks) noexcept {
    return forks != forks_now();
}

// RG_OK, or RG_ERR_USAGE (said in this thread's rg_last_error) for NULL and
// for an inherited communicator.
rg_status unusable(const rg_comm* comm) {
    if (!comm) return usage(nullptr, "comm is NULL");
    if (inherited(comm->forks))
        return usage(nullptr, "this communicator belongs to process " + std::to_string(comm->pid) +
                                  "; a process forked from it cannot use it (make one of its own)");
    return RG_OK;
}

// Checks an allreduce's arguments; "" or why not.
std::string check_args(const rg_comm* comm, const void* send, const void* recv, std::size_t count, int dtype) {
    if (dtype < 0 || static_cast<unsigned>(dtype) >= wire::dtype_count)
        return "dtype " + std::to_string(dtype) + " is not one of RG_FP32, RG_BF16, RG_FP16, RG_INT32";
    if (count && !recv) return "recv is NULL";
    const std::uint64_t max = comm->cfg.max_count ? comm->cfg.max_count : wire::max_tensor_elems;
    if (count > max) return "count " + std::to_string(count) + " is above the job's max_count " + std::to_string(max);
    const std::size_t bytes = count * wire::dtype_size(static_cast<wire::dtype>(dtype));
    if (send && send != recv) {
        const auto* s = static_cast<const std::uint8_t*>(send);
        const auto* r = static_cast<const std::uint8_t*>(recv);
        if (s < r + bytes && r < s + bytes) return "send and recv overlap without being the same buffer";
    }
    return {};
}

} // namespace

RG_EXPORT void rg_config_init(rg_config* c) {
    if (!c) return;
    *c = rg_config{};
    c->struct_size = sizeof(rg_config);
    c->port = wire::default_udp_port;
    c->dtype = RG_FP32;
    c->timeout_ms = 60000;
    c->join_timeout_ms = 5000;
    c->gid_index = -1;
    c->congestion_control = RG_CC_QUEUE;
    c->peer_timeout_ms = default_peer_timeout_ms();
    c->connect_timeout_ms = default_connect_timeout_ms;
}

#define RG_STRING_(x) #x
#define RG_STRING(x) RG_STRING_(x)
constexpr char version_text[] = RG_STRING(RAILGATE_VERSION_MAJOR) "." RG_STRING(RAILGATE_VERSION_MINOR) "." RG_STRING(
    RAILGATE_VERSION_PATCH);
static_assert(std::string_view(version_text) == RAILGATE_PROJECT_VERSION, "railgate.h's version is not meson's");

RG_EXPORT const char* rg_version(int* major, int* minor, int* patch) {
    if (major) *major = RAILGATE_VERSION_MAJOR;
    if (minor) *minor = RAILGATE_VERSION_MINOR;
    if (patch) *patch = RAILGATE_VERSION_PATCH;
    return version_text;
}

RG_EXPORT uint64_t rg_random_token(void) {
    try {
        return client::random_token();
    } catch (...) {
        return 0;
    }
}

RG_EXPORT const char* rg_status_name(rg_status s) {
    switch (s) {
    case RG_OK: return "RG_OK";
    case RG_IN_PROGRESS: return "RG_IN_PROGRESS";
    case RG_ERR_USAGE: return "RG_ERR_USAGE";
    case RG_ERR_SYSTEM: return "RG_ERR_SYSTEM";
    case RG_ERR_REFUSED: return "RG_ERR_REFUSED";
    case RG_ERR_RANK_FAILED: return "RG_ERR_RANK_FAILED";
    case RG_ERR_ABORTED: return "RG_ERR_ABORTED";
    case RG_ERR_RAIL_DOWN: return "RG_ERR_RAIL_DOWN";
    case RG_ERR_DAEMON_GONE: return "RG_ERR_DAEMON_GONE";
    case RG_ERR_EXPIRED: return "RG_ERR_EXPIRED";
    case RG_ERR_TIMEOUT: return "RG_ERR_TIMEOUT";
    }
    return "RG_ERR_UNKNOWN";
}

RG_EXPORT rg_status rg_create(const rg_config* c, rg_comm** out) {
    if (!out) return usage(nullptr, "out is NULL");
    *out = nullptr;
    create_error.clear();
    if (!c) return usage(nullptr, "config is NULL");
    // A caller built against an older railgate.h passes a shorter struct:
    // what it does not know keeps its default.
    if (c->struct_size == 0 || c->struct_size > sizeof(rg_config))
        return usage(nullptr, "config.struct_size " + std::to_string(c->struct_size) +
                                  " is not a railgate.h rg_config's (call rg_config_init first)");
    rg_config cfg;
    rg_config_init(&cfg);
    std::memcpy(&cfg, c, c->struct_size);
    cfg.struct_size = sizeof(rg_config);
    try {
        auto comm = std::make_unique<rg_comm>();
        if (!cfg.server || !*cfg.server) return usage(nullptr, "config.server is not set (railgated's rail-0 address)");
        comm->server = cfg.server;
        comm->transport = cfg.transport && *cfg.transport ? cfg.transport : "udp";
        comm->rails = cfg.rails ? cfg.rails : "";
        client::connect_options& co = comm->co;
        if (!net::parse_ipv4(comm->server, co.server_ip))
            return usage(nullptr, "config.server '" + comm->server + "' is not an IPv4 address");
        if (comm->transport != "udp" && comm->transport != "dpdk" && comm->transport != "verbs")
            return usage(nullptr, "config.transport '" + comm->transport + "' is not udp, dpdk or verbs");
        co.transport = comm->transport;
        co.port = cfg.port ? cfg.port : wire::default_udp_port;
        if (cfg.gid_index < -1 || cfg.gid_index > 255)
            return usage(nullptr, "config.gid_index " + std::to_string(cfg.gid_index) +
                                      " is not -1 (automatic) or a GID index 0..255");
        co.gid_index = cfg.gid_index;
        co.peer_timeout = std::chrono::milliseconds(cfg.peer_timeout_ms);
        if (cfg.connect_timeout_ms > max_connect_timeout_ms)
            return usage(nullptr, "config.connect_timeout_ms " + std::to_string(cfg.connect_timeout_ms) +
                                      " is above " + std::to_string(max_connect_timeout_ms) + " (1 h)");
        co.connect_timeout =
            std::chrono::milliseconds(cfg.connect_timeout_ms ? cfg.connect_timeout_ms : default_connect_timeout_ms);
        if (cfg.on_retry)
            co.on_connect_retry = [fn = cfg.on_retry, ctx = cfg.on_retry_ctx, rank = cfg.rank](const std::string& line) {
                fn(ctx, rank, line.c_str());
            };
        if (cfg.dscp > 63) return usage(nullptr, "config.dscp " + std::to_string(cfg.dscp) + " is above 63");
        co.tos = static_cast<std::uint8_t>(cfg.dscp << 2);
        if (cfg.congestion_control > RG_CC_QUEUE)
            return usage(nullptr, "config.congestion_control " + std::to_string(cfg.congestion_control) +
                                      " is not RG_CC_OFF, RG_CC_DELAY or RG_CC_QUEUE");
        if (cfg.congestion_control != RG_CC_OFF) co.tos |= wire::ecn_ect0;
        for (std::size_t at = 0; at < comm->rails.size();) {
            std::size_t end = comm->rails.find(';', at);
            if (end == std::string::npos) end = comm->rails.size();
            std::pair<std::string, std::uint32_t> rail;
            if (!client::parse_dpdk_rail(comm->rails.substr(at, end - at), rail))
                return usage(nullptr, "config.rails: '" + comm->rails.substr(at, end - at) +
                                          "' is not DEVARGS@IP (net_af_xdp0,iface=eth1@10.0.0.11)");
            co.dpdk_rails.push_back(rail);
            at = end + 1;
        }
        if (co.transport == "dpdk" && co.dpdk_rails.empty())
            return usage(nullptr, "config.rails: the dpdk transport needs DEVARGS@IP for every rail");
        if (co.transport != "dpdk" && !co.dpdk_rails.empty())
            return usage(nullptr, "config.rails is for the dpdk transport (the others learn the rails from railgated)");
        if (cfg.world == 0 || cfg.world > wire::max_world)
            return usage(nullptr, "config.world " + std::to_string(cfg.world) + " is not 1.." +
                                      std::to_string(wire::max_world));
        if (cfg.rank >= cfg.world)
            return usage(nullptr, "config.rank " + std::to_string(cfg.rank) + " is not below world " +
                                      std::to_string(cfg.world));
        if (cfg.token == 0) return usage(nullptr, "config.token is 0: give every rank one secret from rg_random_token()");
        if (static_cast<unsigned>(cfg.dtype) >= wire::dtype_count)
            return usage(nullptr, "config.dtype " + std::to_string(static_cast<int>(cfg.dtype)) + " is not an rg_dtype");
        if (cfg.max_count > wire::max_tensor_elems)
            return usage(nullptr, "config.max_count " + std::to_string(cfg.max_count) + " is above the protocol's " +
                                      std::to_string(wire::max_tensor_elems));
        if (cfg.timeout_ms == 0 || cfg.join_timeout_ms == 0)
            return usage(nullptr, "config.timeout_ms and join_timeout_ms must be above 0");
        if (cfg.peer_timeout_ms > max_peer_timeout_ms)
            return usage(nullptr, "config.peer_timeout_ms " + std::to_string(cfg.peer_timeout_ms) + " is above " +
                                      std::to_string(max_peer_timeout_ms) + " (1 h)");
        cfg.server = comm->server.c_str();
        cfg.transport = comm->transport.c_str();
        cfg.rails = comm->rails.c_str();
        comm->cfg = cfg;
        // The transport now: a socket or device that cannot be had fails here.
        member& first = comm->members[static_cast<unsigned>(cfg.dtype)];
        try {
            first.conn = std::make_unique<client::connection>(co);
        } catch (const std::exception& e) {
            create_error = "transport " + comm->transport + " to " + comm->server + ": " + e.what();
            return RG_ERR_SYSTEM;
        }
        rg_comm* p = comm.get();
        comm->progress = std::thread([p] { p->progress_loop(); });
        *out = comm.release();
        return RG_OK;
    } catch (const std::exception& e) {
        create_error = e.what();
        return RG_ERR_SYSTEM;
    }
}

RG_EXPORT rg_status rg_join(rg_comm* comm) {
    if (const rg_status st = unusable(comm); st != RG_OK) return st;
    return comm->exclusive([&](std::string& err) {
        member* mb = nullptr;
        return comm->joined(static_cast<wire::dtype>(comm->cfg.dtype), mb, err);
    });
}

RG_EXPORT rg_status rg_leave(rg_comm* comm) {
    if (const rg_status st = unusable(comm); st != RG_OK) return st;
    return comm->exclusive([&](std::string&) {
        for (member& mb : comm->members) {
            if (mb.w && mb.joined) mb.w->leave();
            mb.joined = false;
        }
        return RG_OK;
    });
}

RG_EXPORT rg_status rg_abort(rg_comm* comm, const char* why) {
    if (const rg_status st = unusable(comm); st != RG_OK) return st;
    const std::string text = why && *why ? why : "rank " + std::to_string(comm->cfg.rank) + " aborted the job";
    {
        // Queued allreduces never start.
        std::lock_guard lk(comm->m);
        for (auto& o : comm->queue) {
            o->err = "this rank aborted the job: " + text;
            o->status = RG_ERR_ABORTED;
        }
        comm->queue.clear();
        comm->broken = RG_ERR_ABORTED;
        comm->broken_err = "this rank aborted the job: " + text;
        comm->done.notify_all();
    }
    return comm->exclusive([&](std::string&) {
        for (member& mb : comm->members) {
            if (mb.w && mb.joined) mb.w->abort(text);
            mb.joined = false;
        }
        return RG_OK;
    });
}

RG_EXPORT void rg_destroy(rg_comm* comm) {
    if (!comm || inherited(comm->forks)) return;   // the parent's to end
    rg_leave(comm);
    {
        std::lock_guard lk(comm->m);
        comm->stopping = true;
        comm->work.notify_all();
    }
    if (comm->progress.joinable()) comm->progress.join();
    delete comm;
}

// A copy for the calling thread: the communicator's own string may be
// rewritten by its progress thread (or another caller) while this one reads.
RG_EXPORT const char* rg_last_error(const rg_comm* comm) {
    if (!comm || inherited(comm->forks)) return create_error.c_str();
    thread_local std::string seen;
    auto* c = const_cast<rg_comm*>(comm);
    std::lock_guard lk(c->m);
    try {
        seen = c->last_error;
    } catch (const std::bad_alloc&) {
        seen.clear();
    }
    return seen.c_str();
}

namespace {

rg_status queue_op(rg_comm* comm, op&& args, rg_request** req) {
    try {
        auto o = std::make_shared<op>(std::move(args));
        auto r = std::make_unique<rg_request>(rg_request{comm, o});
        std::lock_guard lk(comm->m);
        if (comm->broken != RG_OK) {
            o->err = "an earlier operation failed: " + comm->broken_err;
            o->status = comm->broken;
        } else {
            comm->queue.push_back(std::move(o));
            comm->work.notify_all();
        }
        *req = r.release();
        return RG_OK;
    } catch (const std::bad_alloc&) {
        std::lock_guard lk(comm->m);
        comm->last_error = "out of memory queueing an allreduce";
        return RG_ERR_SYSTEM;
    }
}

// Runs an allreduce to its end: on the calling thread when nothing is
// queued or running, else behind the queued ones.
rg_status run_op(rg_comm* comm, op&& o) {
    {
        std::unique_lock lk(comm->m);
        if (!comm->queue.empty() || comm->busy) {
            lk.unlock();
            rg_request* r = nullptr;
            if (rg_status st = queue_op(comm, std::move(o), &r); st != RG_OK) return st;
            const rg_status st = rg_wait(r);
            rg_request_free(r);
            return st;
        }
        comm->busy = true;
    }
    const rg_status st = comm->run(o);
    comm->finish(o, st);
    return st;
}

op make_op(const void* send, void* recv, size_t count, int dtype) {
    op o;
    o.send = send;
    o.recv = recv;
    o.count = count;
    o.dt = static_cast<wire::dtype>(dtype);
    return o;
}

op make_compressed(float* buf, size_t count, int wire, float divisor) {
    op o = make_op(nullptr, buf, count, wire);
    o.compressed = true;
    o.divisor = divisor;
    return o;
}

std::string check_compressed(const rg_comm* comm, const float* buf, size_t count, int wire, float divisor) {
    if (wire != RG_FP32 && wire != RG_BF16 && wire != RG_FP16)
        return "wire dtype " + std::to_string(wire) + " is not RG_FP32, RG_BF16 or RG_FP16";
    if (!(divisor != 0.0f && divisor - divisor == 0.0f)) return "divisor must be finite and not 0";
    return check_args(comm, nullptr, buf, count, wire);
}

} // namespace

RG_EXPORT rg_status rg_allreduce_start(rg_comm* comm, const void* send, void* recv, size_t count, rg_dtype dtype,
                                       rg_request** req) {
    if (const rg_status st = unusable(comm); st != RG_OK) return st;
    if (!req) return usage(comm, "req is NULL");
    *req = nullptr;
    if (std::string e = check_args(comm, send, recv, count, dtype); !e.empty()) return usage(comm, e);
    return queue_op(comm, make_op(send, recv, count, dtype), req);
}

RG_EXPORT rg_status rg_allreduce_compressed_start(rg_comm* comm, float* buf, size_t count, rg_dtype wire,
                                                  float divisor, rg_request** req) {
    if (const rg_status st = unusable(comm); st != RG_OK) return st;
    if (!req) return usage(comm, "req is NULL");
    *req = nullptr;
    if (std::string e = check_compressed(comm, buf, count, wire, divisor); !e.empty()) return usage(comm, e);
    return queue_op(comm, make_compressed(buf, count, wire, divisor), req);
}

RG_EXPORT rg_status rg_allreduce_compressed(rg_comm* comm, float* buf, size_t count, rg_dtype wire, float divisor) {
    if (const rg_status st = unusable(comm); st != RG_OK) return st;
    if (std::string e = check_compressed(comm, buf, count, wire, divisor); !e.empty()) return usage(comm, e);
    return run_op(comm, make_compressed(buf, count, wire, divisor));
}

namespace {

// A finished request does not touch its communicator (it may be gone); an
// unfinished one in a forked child never finishes there.
rg_status request_status(const rg_request* req) {
    if (!req) return RG_ERR_USAGE;
    const rg_status st = req->o->status;
    if (st == RG_IN_PROGRESS && inherited(req->forks))
        return usage(nullptr, "this request belongs to the process this one was forked from");
    return st;
}

} // namespace

RG_EXPORT rg_status rg_test(rg_request* req) {
    return request_status(req);
}

RG_EXPORT rg_status rg_wait(rg_request* req) {
    if (const rg_status st = request_status(req); st != RG_IN_PROGRESS) return st;
    std::unique_lock lk(req->comm->m);
    req->comm->done.wait(lk, [&] { return req->o->status != RG_IN_PROGRESS; });
    return req->o->status;
}

// "" while the request runs: its err is the running thread's until then.
RG_EXPORT const char* rg_request_error(const rg_request* req) {
    return req && req->o->status != RG_IN_PROGRESS ? req->o->err.c_str() : "";
}

RG_EXPORT void rg_request_free(rg_request* req) {
    delete req;   // a queued or running op stays alive in the queue's reference
}

RG_EXPORT rg_status rg_allreduce(rg_comm* comm, const void* send, void* recv, size_t count, rg_dtype dtype) {
    if (const rg_status st = unusable(comm); st != RG_OK) return st;
    if (std::string e = check_args(comm, send, recv, count, dtype); !e.empty()) return usage(comm, e);
    return run_op(comm, make_op(send, recv, count, dtype));
}

// rg_get_stats: the fields that fit in out->struct_size (0.2's first five
// at least), struct_size set to what was filled. The two versions' bodies
// have names of their own (not rg_*: the version script keeps them local)
// and are exported only as rg_get_stats at their versions.
RG_EXPORT rg_status railgate_get_stats_v0_2(const rg_comm* comm, rg_stats* out) {
    constexpr std::size_t least = offsetof(rg_stats, timeout_retransmits);
    if (const rg_status st = unusable(comm); st != RG_OK) return st;
    auto* c = const_cast<rg_comm*>(comm);
    if (!out) return usage(c, "rg_get_stats: out is NULL");
    if (out->struct_size < least)
        return usage(c, "rg_get_stats: out->struct_size " + std::to_string(out->struct_size) + " is below " +
                            std::to_string(least) + " (set it to sizeof(rg_stats), RG_STATS_INIT does)");
    rg_stats s;
    {
        std::lock_guard lk(c->m);
        s = c->stats; // as of the last finished allreduce
    }
    s.struct_size = std::min(out->struct_size, sizeof(rg_stats));
    std::memcpy(out, &s, s.struct_size);
    return RG_OK;
}
__asm__(".symver railgate_get_stats_v0_2, rg_get_stats@@RAILGATE_0.2");

// librailgate 0.1's rg_get_stats, for programs built against it: its
// rg_stats was the four counters, with no struct_size.
struct rg_stats_v0_1 {
    std::uint64_t allreduces, bytes, retransmits, recoveries;
};
RG_EXPORT rg_status railgate_get_stats_v0_1(const rg_comm* comm, rg_stats_v0_1* out) {
    if (!out || unusable(comm) != RG_OK) return RG_ERR_USAGE;
    auto* c = const_cast<rg_comm*>(comm);
    std::lock_guard lk(c->m);
    *out = {c->stats.allreduces, c->stats.bytes, c->stats.retransmits, c->stats.recoveries};
    return RG_OK;
}
__asm__(".symver railgate_get_stats_v0_1, rg_get_stats@RAILGATE_0");
