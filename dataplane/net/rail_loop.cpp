// railgated's rail loop: each worker lcore polls its rails in bursts
// (DPDK l3fwd's loop), runs the job lifecycle's clock, and picks up the
// control plane's commands between bursts.
#include <fcntl.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <utility>

#include <rte_cycles.h>
#include <rte_prefetch.h>
#include <rte_ring.h>

#include "dataplane/net/daemon_impl.hpp"
#include "dataplane/net/gateway.hpp"
#include "dataplane/net/handlers.hpp"
#include "dataplane/net/shared_core.hpp"
#include "dataplane/net/shared_weight.hpp"
#include "dataplane/net/tx.hpp"

namespace railgate::net {
using namespace detail;

namespace detail {

// Returns whether any packet was received.
bool poll_rail(rail_state& rs) noexcept {
    const bool routed = rs.routes && pull_routed(rs);
    // Room for the fault injector's duplicates.
    rte_mbuf* pkts[rx_burst * 2];
    unsigned n;
    if (rs.s.udp) {
        udp_port::rx_tally t;
        n = rs.s.udp->rx(rs.s.pool, rs.s.self, pkts, rx_burst, t);
        if (t.coalesced) bump(rs.ctr.udp_coalesced, t.coalesced);
        if (t.copied) bump(rs.ctr.udp_copied, t.copied);
        if (t.oversize) [[unlikely]]
            bump(rs.ctr.drops[static_cast<unsigned>(drop_reason::udp_rail_oversize)], t.oversize);
        if (t.no_mbuf) [[unlikely]]
            bump(rs.ctr.drops[static_cast<unsigned>(drop_reason::udp_rail_no_mbuf)], t.no_mbuf);
    } else {
        n = port_rx(rs.s.port, 0, pkts, rx_burst);
    }
    // A frame the fault injector holds back (reordered) leaves at the next
    // poll, even an empty one: a network reorders within a bounded time.
    if (n == 0 && !rs.late[0]) {
        // A shaped rail keeps sending what its TCs hold while nothing arrives.
        if (rs.sched && rs.sched->queued()) drain(rs);
        flush(rs);
        return routed;
    }
    rs.burst_tsc = rte_rdtsc();
    if (rs.hooks) [[unlikely]] {
        // What the port delivered, before the fault injector changes it.
        if (rs.hooks & rail_state::hook_cap_rx) mirror_burst(rs, pkts, n, capture_dir::rx);
        if (rs.faulty) inject_faults(rs, pkts, n, rx_burst * 2, fault_side::rx);
    }
    // Two stages: every mbuf header of the burst at once (their addresses
    // are known, so the misses overlap), then each packet's first line a
    // few packets ahead (its address is in the header).
    for (unsigned i = 0; i < n; ++i) rte_prefetch0(pkts[i]);
    // A contribution's railgate header (bytes 42..81) spans two lines.
    auto lines = [](const rte_mbuf* m) {
        const auto* p = rte_pktmbuf_mtod(m, const char*);
        rte_prefetch0(p);
        rte_prefetch0(p + RTE_CACHE_LINE_SIZE);
    };
    for (unsigned i = 0; i < n && i < 4; ++i) lines(pkts[i]);
    for (unsigned i = 0; i < n; ++i) {
        if (i + 4 < n) lines(pkts[i + 4]);
        handle(rs, pkts[i]);
    }
    if (rs.nrouted) flush_routed(rs);
    if (rs.sched) drain(rs);
    flush(rs);
    return true;
}

// A lowered MTU reaches the port once no job's chunk is too big for it.
void maybe_apply_pending_mtu(rail_state& rs) noexcept {
    if (rs.agg.max_job_chunk_bytes() > wire::chunk_bytes_for_mtu(rs.pending_mtu)) return;
    apply_port_mtu(rs.s, rs.pending_mtu);
    rs.pending_mtu = 0;
}

// The rail's jobs as they stand (railctl job list), appended to out.
void describe_jobs(const rail_state& rs, std::vector<job_view>& out) {
    agg::describe_jobs(rs.agg.jobs_table(), rs.s.cfg.name, "dpdk", true, rte_rdtsc(), static_cast<double>(rs.ms_tsc), out);
}

void run_command(rail_state& rs, lcore_command& c) {
    switch (c.k) {
    case lcore_command::kind::jobs:
        if (c.jobs) describe_jobs(rs, *c.jobs);
        return;
    case lcore_command::kind::snapshot: {
        auto take = [&c](auto* h) {
            if (!h) return;
            ++c.found;
            c.out->merge(*h);
            if (c.reset) h->reset();
        };
        if (c.tc < 0 && c.job) return take(rs.job_lat.find(*c.job, c.worker));
        return take(c.tc >= 0 ? (rs.tc_wait ? &(*rs.tc_wait)[static_cast<unsigned>(c.tc)] : nullptr)
                    : c.worker ? &rs.worker_rtt
                               : &rs.lat);
    }
    case lcore_command::kind::adopt: {
        rs.ack = c.ack;
        rs.policy = c.policy;
        rs.agg.set_job_chunk_bytes(c.job_chunk_bytes);
        const int stripe = c.stripe[rs.index];
        rs.stripe = stripe;
        rs.closing = stripe < 0;
        rs.holding_joins = c.hold_joins;
        if (stripe >= 0) rs.agg.set_stripe(c.ack.n_rails, static_cast<unsigned>(stripe));
        return;
    }
    case lcore_command::kind::attach:
    case lcore_command::kind::detach:
    case lcore_command::kind::freeze: return; // handled by the loop, which owns the rail list and its passes
    case lcore_command::kind::shaping: {
        tx_scheduler::options o = scheduler_options(rs.s);
        o.rail_rate_bps = c.rate_bps;
        o.rail_burst_bytes = c.burst_bytes;
        o.tcs = c.tcs;
        // A scheduler, once there, stays (unshaped it passes everything at
        // once): frames it holds keep their order.
        if (rs.sched) rs.sched->configure(o, rs.tx_now());
        else if (tx_scheduler::shapes(o)) rs.make_scheduler(o);
        return;
    }
    case lcore_command::kind::routes:
        rs.routes = c.routes;
        if (!rs.routes) { // no longer a gateway: what waits to leave is dropped
            rs.drop_held();
            rte_mbuf* m;
            while (ring_get(rs.s.fwd, &m, 1)) free_drop(rs, m, drop_reason::no_route);
        }
        return;
    case lcore_command::kind::port_mtu:
        if (c.mtu >= rs.s.mtu_now.load(std::memory_order_relaxed)) {
            rs.pending_mtu = 0;
            c.err = apply_port_mtu(rs.s, c.mtu);
        } else {
            rs.pending_mtu = c.mtu;
            maybe_apply_pending_mtu(rs);
        }
        return;
    case lcore_command::kind::fault:
        rs.set_fault(c.fault_spec);
        // What waits to be reordered a way the faults no longer go (off, or
        // the other way only) leaves now.
        if (rs.late[0] && !(rs.faulty && rs.dice.current().on_rx())) handle(rs, std::exchange(rs.late[0], nullptr));
        if (rs.late[1] && !(rs.faulty && rs.dice.current().on_tx())) queue_tx(rs, std::exchange(rs.late[1], nullptr));
        flush(rs);
        return;
    case lcore_command::kind::capture:
        rs.set_capture(c.ring, c.filter);
        return;
    case lcore_command::kind::rails_down:
        end_jobs_on_rails(rs, c.down);
        flush(rs);
        return;
    case lcore_command::kind::abort_job:
        if (const unsigned told = end_job_for_operator(rs, c.abort_id, c.abort_text)) {
            c.told += told;
            if (c.ended_on) c.ended_on->push_back(rs.s.cfg.name);
            flush(rs);
        }
        return;
    }
}

} // namespace detail

// The rail's state, built on its lcore so that it lives on its NUMA node.
std::unique_ptr<rail_state> daemon::impl::make_rail_state(std::size_t i, unsigned lcore) {
    rail_static& rs = *rails[i];
    agg::limits lim;
    lim.max_jobs = cfg.max_jobs;
    lim.max_pool = cfg.max_pool;
    lim.default_pool = cfg.default_pool;
    lim.rail_index = static_cast<unsigned>(std::max(rs.stripe, 0));
    lim.n_rails = ack.n_rails;
    lim.job_chunk_bytes = job_chunk_bytes;
    // What jobs may hold of the pool: all of it but the receive ring's,
    // a transmit burst's and the per-lcore caches' share (at least half).
    const std::uint64_t reserve = std::uint64_t{cfg.rx_desc} + tx_cap + 2 * 256;
    lim.buffer_budget = std::max<std::uint64_t>(cfg.mbufs_per_rail / 2,
                                                cfg.mbufs_per_rail > reserve ? cfg.mbufs_per_rail - reserve : 0);
    auto st = std::make_unique<rail_state>(rs, lim, ack, policy);
    rs.served_by = st.get();
    st->neigh.reachable_tsc = std::uint64_t{cfg.neighbour_reachable_ms} * rte_get_tsc_hz() / 1000;
    st->lcore_slot = static_cast<unsigned>(std::find(lcores.begin(), lcores.end(), lcore) - lcores.begin());
    st->index = i;
    st->routes = fib_now.get();
    st->stripe = rs.stripe;
    agg::lifecycle life;
    life.stall = std::uint64_t{cfg.stall_ms} * st->ms_tsc;
    life.assemble = std::uint64_t{cfg.assemble_ms} * st->ms_tsc;
    life.idle = std::uint64_t{cfg.idle_ms} * st->ms_tsc;
    life.max_pending = cfg.max_pending_joins;
    st->agg.set_lifecycle(life);
    st->stall_ms = static_cast<std::uint16_t>(std::min<unsigned>(cfg.stall_ms, 65535));
    st->rails_down = &rails_down;
    return st;
}

namespace {

// A loop whose rails are all udp rails has nothing to poll that the kernel
// would not wake it for: after a quiet stretch (quiet_ms) it sleeps on their
// sockets (and the control plane's eventfd) until a datagram, a command or
// the lifecycle's next tick; the core goes to whatever else runs there (the
// workers, the kernel's UDP work). A loop with a DPDK port polls on.
// 50 ms: longer than the pauses inside a bulk run (railbench's check of a
// 64 MiB result; sleeping after 1 ms cost those runs 7-15%, after 50 ms
// 1.6%), shorter than a training step's forward pass (bench_ddp: the same
// step times with 1 and 50 ms, 4-18% under polling).
// While a busy task shares the core, it sleeps at once (shared_core.hpp).
constexpr unsigned quiet_ms = 50;

// How long this thread has run and waited on a run queue for a core, in
// ns, and how many times it got one (the fields of
// /proc/thread-self/schedstat; 0 where the kernel does not keep them).
// Opened on the thread it measures.
class runq_delay {
public:
    struct sample {
        std::uint64_t ran_ns = 0, waited_ns = 0, runs = 0;
    };
    runq_delay() : fd_(::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC)) {}
    ~runq_delay() {
        if (fd_ >= 0) ::close(fd_);
    }
    runq_delay(const runq_delay&) = delete;
    runq_delay& operator=(const runq_delay&) = delete;
    sample now() const noexcept {
        char b[96];
        const ssize_t n = fd_ >= 0 ? ::pread(fd_, b, sizeof b - 1, 0) : -1;
        if (n <= 0) return {};
        b[n] = 0;
        char* p = nullptr;
        sample s;
        s.ran_ns = std::strtoull(b, &p, 10);
        if (p == b) return {};
        s.waited_ns = std::strtoull(p, &p, 10);
        s.runs = std::strtoull(p, nullptr, 10);
        return s;
    }

private:
    int fd_;
};

// The time other tasks took on the one CPU this thread is pinned to, for
// shared_core's probe: the CPU's busy time in /proc/stat less this
// thread's own. Unavailable (ok() false) on a thread that may run on more
// than one CPU, or without /proc/stat. Opened on the thread it measures.
class cpu_others {
public:
    explicit cpu_others(std::uint64_t ms_tsc) : ms_tsc_(ms_tsc), tick_ns_(1000000000 / std::max(::sysconf(_SC_CLK_TCK), 1L)) {
        cpu_set_t set;
        CPU_ZERO(&set);
        if (::sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) != 1) return;
        for (unsigned c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &set)) cpu_ = c;
        // Its line and those before it: "cpu" and each CPU's, up to ~240
        // bytes apiece.
        buf_.resize((cpu_ + 2) * 256 + 256);
        fd_ = ::open("/proc/stat", O_RDONLY | O_CLOEXEC);
        std::uint64_t t;
        if (fd_ >= 0 && !ticks(t)) {
            ::close(fd_);
            fd_ = -1;
        }
    }
    ~cpu_others() {
        if (fd_ >= 0) ::close(fd_);
    }
    cpu_others(const cpu_others&) = delete;
    cpu_others& operator=(const cpu_others&) = delete;
    bool ok() const noexcept { return fd_ >= 0; }
    // Whether other tasks took the CPU (shared_core::others_busy) since the
    // last call at `now`, this thread having run `own_ns` in all; false on
    // a first call or one after a gap of over two probes (no base).
    bool busy(std::uint64_t now, std::uint64_t own_ns) noexcept {
        std::uint64_t t = 0;
        if (!ticks(t)) return false;
        const bool based = at_ != 0 && now - at_ <= 2 * shared_core::probe_every_ms * ms_tsc_ && t >= ticks_;
        const std::uint64_t cpu_ns = (t - ticks_) * tick_ns_, own = own_ns - own_ns_,
                            since_ns = (now - at_) * 1000000 / ms_tsc_;
        at_ = now;
        ticks_ = t;
        own_ns_ = own_ns;
        return based && shared_core::others_busy(cpu_ns > own ? cpu_ns - own : 0, since_ns);
    }

private:
    bool ticks(std::uint64_t& out) noexcept {
        const ssize_t n = ::pread(fd_, buf_.data(), buf_.size(), 0);
        if (n <= 0) return false;
        std::string_view text(buf_.data(), static_cast<std::size_t>(n));
        text = text.substr(0, text.rfind('\n') + 1); // whole lines only
        return cpu_busy_ticks(text, cpu_, out);
    }

    std::uint64_t ms_tsc_, tick_ns_;
    unsigned cpu_ = 0;
    int fd_ = -1;
    std::vector<char> buf_;
    std::uint64_t at_ = 0, ticks_ = 0, own_ns_ = 0;
};

class sleeper {
public:
    explicit sleeper(int wake_fd) : wake_fd_(wake_fd) {}
    ~sleeper() {
        if (ep_ >= 0) ::close(ep_);
    }
    sleeper(const sleeper&) = delete;
    sleeper& operator=(const sleeper&) = delete;

    // The rails changed: sleep only if each is a udp rail.
    void watch(const std::vector<std::unique_ptr<rail_state>>& rails) {
        if (ep_ >= 0) ::close(ep_);
        ep_ = -1;
        if (rails.empty() || wake_fd_ < 0) return;
        for (const auto& r : rails)
            if (!r->s.udp) return;
        ep_ = ::epoll_create1(EPOLL_CLOEXEC);
        if (ep_ < 0) return;
        auto add = [&](int fd) {
            epoll_event e{};
            e.events = EPOLLIN;
            e.data.fd = fd;
            return ::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &e) == 0;
        };
        bool ok = add(wake_fd_);
        for (const auto& r : rails) ok = ok && add(r->s.udp->fd());
        if (!ok) {
            ::close(ep_);
            ep_ = -1;
        }
    }
    bool armed() const noexcept { return ep_ >= 0; }
    // Sleeps up to `ms` (at least 1) unless something is already waiting.
    void sleep(int ms) noexcept {
        epoll_event ev[8];
        const int n = ::epoll_wait(ep_, ev, 8, std::max(ms, 1));
        for (int i = 0; i < n; ++i)
            if (ev[i].data.fd == wake_fd_) {
                std::uint64_t v;
                if (::read(wake_fd_, &v, sizeof v) < 0) {
                    // Already read: nothing pending.
                }
            }
    }

private:
    int wake_fd_;
    int ep_ = -1;
};

// A loop with a DPDK port (or udp rails under --idle yield) beside a busy
// task: naps instead of yields. The timer's end wakes the loop ahead of
// the busy task (which ran while the loop slept), so a packet waits at
// most about a nap, not the busy task's 4 ms tick. The `k`th nap in a row
// lasts nap_us << k, up to max_nap_us: 50 us naps alone took 18% of the
// busy task's CPU (14000 wake-ups a second), while a ping-pong's next
// request comes within the first.
constexpr long nap_us = 50, max_nap_us = 1000;
void nap(unsigned k) noexcept {
    const timespec ts{0, std::min(nap_us << std::min(k, 5u), max_nap_us) * 1000};
    ::clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, nullptr);
}

// Nothing waits to leave or to be applied on the rail: sleeping is safe.
bool quiet(const rail_state& r) noexcept {
    return r.ntx == 0 && !r.pending_mtu && !(r.sched && r.sched->queued()) && !r.neigh.waiting;
}

} // namespace

int daemon::impl::lcore_main(void* arg) {
    auto* c = static_cast<lcore_ctx*>(arg);
    // Destroyed last, after the rail states below (see lcore_ctx::ended).
    struct end_mark {
        std::atomic<bool>& ended;
        ~end_mark() { ended.store(true, std::memory_order_release); }
    } mark{c->ended};
    impl& d = *c->self;
    std::vector<std::unique_ptr<rail_state>> mine;
    std::vector<rail_state*> bond;
    auto rebond = [&] {
        bond.assign(wire::max_rails, nullptr);
        for (auto& r : mine) {
            r->bond = &bond;
            if (r->stripe >= 0 && r->stripe < static_cast<int>(bond.size())) bond[static_cast<std::size_t>(r->stripe)] = r.get();
        }
    };
    try {
        for (std::size_t i = 0; i < d.rails.size(); ++i)
            if (d.rails[i]->lcore == c->lcore && d.rails[i]->active) mine.push_back(d.make_rail_state(i, c->lcore));
    } catch (const std::exception& e) {
        // Out of memory for a rail's state (its histograms, tables): the
        // loop does not start, and launch() says why instead of waiting.
        for (auto& r : d.rails)
            if (r->lcore == c->lcore) r->served_by = nullptr; // a state built and then not kept too
        c->setup_error = e.what();
        c->ready.store(true, std::memory_order_release);
        return -1;
    }
    rebond();
    c->ready.store(true, std::memory_order_release); // daemon::launch waits for it
    // The lifecycle's clock runs every 10 ms: stalls are judged in seconds.
    const std::uint64_t expire_every = rte_get_tsc_hz() / 100;
    const std::uint64_t ms_tsc = rte_get_tsc_hz() / 1000;
    sleeper zzz(c->wake_fd);
    if (d.cfg.idle == idle_policy::sleep) zzz.watch(mine);
    // A nap's timer fires within 1 us of its end, not the 50 us a thread's
    // timers may otherwise be late by.
    ::prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    std::uint64_t last_busy = rte_rdtsc();
    // The thread's run-queue wait: published every expire_every, and
    // looked at every 10 ms while idle to see a busy task on its core.
    const runq_delay runq;
    auto sample = [&runq, &mine] {
        const runq_delay::sample w = runq.now();
        shared_core::sample s{w.waited_ns, w.runs, 0};
        for (const auto& r : mine) s.rx_bytes += r->ctr.rx_bytes.load(std::memory_order_relaxed);
        return s;
    };
    const std::uint64_t runq_start = runq.now().waited_ns;
    std::uint64_t runq_at = last_busy;
    shared_core shared(ms_tsc, last_busy, sample(), c->ctr);
    unsigned naps = 0; // in a row, since a pass last found work
    shared_weight weight(d.cfg.shared_nice);
    cpu_others others(ms_tsc);
    if (others.ok()) shared.keep_by_probes();
    auto all_quiet = [&mine] { return std::all_of(mine.begin(), mine.end(), [](const auto& r) { return quiet(*r); }); };
    // The loop's last read of the clock. A gap of 100 ms or more since (its
    // longest sleep is 10 ms) is time the loop did not run: what the ranks
    // sent meanwhile waits in the queues, so the jobs' clocks skip it, and
    // nobody is judged stalled for railgated's own absence. Looked at at
    // each pass's start, and before each rail's lifecycle tick: the thread
    // may lose its CPU inside a pass.
    const std::uint64_t away_tsc = 100 * ms_tsc;
    const double ns_per_tsc = 1e9 / static_cast<double>(rte_get_tsc_hz());
    std::uint64_t seen = rte_rdtsc();
    auto look = [&](std::uint64_t now) {
        if (now - seen >= away_tsc) [[unlikely]] {
            for (auto& r : mine) r->agg.jobs_table().absent(now - seen, now);
            bump(c->ctr.absences);
            bump(c->ctr.absent_ns, static_cast<std::uint64_t>(static_cast<double>(now - seen) * ns_per_tsc));
        }
        seen = now;
    };
    while (!d.stop.load(std::memory_order_relaxed)) {
        bool busy = false;
        std::uint64_t t0 = rte_rdtsc(); // one read per rail: its end is the next one's start
        look(t0);
        for (auto& r : mine) {
            const bool found = poll_rail(*r);
            const std::uint64_t t1 = rte_rdtsc();
            bump(r->ctr.poll_cycles, t1 - t0);
            if (found) bump(r->ctr.busy_cycles, t1 - t0);
            t0 = t1;
            busy |= found;
            if (r->pending_mtu) maybe_apply_pending_mtu(*r);
            if (t1 >= r->expire_tsc) [[unlikely]] {
                look(t1);
                r->expire_tsc = t1 + expire_every;
                expire_jobs(*r, t1);
                flush(*r);
            }
        }
        if (lcore_command* cmd = c->cmd.load(std::memory_order_acquire)) {
            // A freeze is taken after the answer (below), without touching cmd again.
            const std::uint32_t freeze_ms = cmd->k == lcore_command::kind::freeze ? cmd->freeze_ms : 0;
            if (cmd->k == lcore_command::kind::attach) {
                try {
                    mine.push_back(d.make_rail_state(static_cast<std::size_t>(cmd->rail), c->lcore));
                } catch (const std::exception& e) {
                    d.rails[static_cast<std::size_t>(cmd->rail)]->served_by = nullptr;
                    cmd->err = std::string("lcore ") + std::to_string(c->lcore) + " cannot serve the rail: " + e.what();
                }
            } else if (cmd->k == lcore_command::kind::detach) {
                for (auto it = mine.begin(); it != mine.end(); ++it)
                    if ((*it)->index == static_cast<std::size_t>(cmd->rail)) {
                        flush(**it);
                        (*it)->s.served_by = nullptr;
                        mine.erase(it); // releases every mbuf the rail held
                        break;
                    }
            } else {
                for (auto& r : mine)
                    if (cmd->rail < 0 || r->index == static_cast<std::size_t>(cmd->rail)) run_command(*r, *cmd);
            }
            rebond();
            if (d.cfg.idle == idle_policy::sleep) zzz.watch(mine);
            c->cmd.store(nullptr, std::memory_order_release);
            // railctl fault freeze: no pass until it ends (or railgated stops).
            const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(freeze_ms);
            for (auto t = std::chrono::steady_clock::now(); t < until && !d.stop.load(std::memory_order_relaxed);
                 t = std::chrono::steady_clock::now())
                std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(until - t, std::chrono::milliseconds(10)));
        }
        if (lcore_guest* g = c->guest.load(std::memory_order_acquire)) [[unlikely]] {
            if (!busy && g->step(g->ctx)) {
                c->guest.store(nullptr, std::memory_order_relaxed);
                g->done.store(true, std::memory_order_release);
            }
            busy = true; // neither yield nor sleep under a guest
        }
        if (t0 - runq_at >= expire_every) [[unlikely]] {
            runq_at = t0;
            c->beat.store(t0, std::memory_order_relaxed);
            c->ctr.runq_wait_ns.store(runq.now().waited_ns - runq_start, std::memory_order_relaxed);
        }
        const bool polite = d.cfg.idle != idle_policy::spin;
        if (!busy && polite && shared.due(t0)) {
            shared.look(t0, sample());
            weight.raise(shared.sleep_at_once(t0));
        }
        if (busy) {
            last_busy = t0;
            naps = 0;
        } else if (zzz.armed() && (t0 - last_busy > quiet_ms * ms_tsc || shared.sleep_at_once(t0)) && all_quiet()) {
            if (shared.probe_due(t0)) shared.probed(t0, others.ok() && others.busy(t0, runq.now().ran_ns));
            // Until the next lifecycle tick at the latest; a datagram wakes
            // the loop at once, ahead of whatever else has the core.
            std::uint64_t next = UINT64_MAX;
            for (const auto& r : mine) next = std::min(next, r->expire_tsc);
            zzz.sleep(next > t0 ? static_cast<int>(std::min<std::uint64_t>((next - t0) / ms_tsc, 10)) : 1);
        } else if (polite && !zzz.armed() && shared.sleep_at_once(t0)) {
            // A DPDK port has no socket to sleep on: a short nap, whose end
            // takes the core from the busy task, instead of a yield that
            // waits for its tick.
            const bool probe = shared.probe_due(t0);
            if (probe && others.ok()) shared.probed(t0, others.busy(t0, runq.now().ran_ns));
            if (probe && !others.ok()) { // no CPU time to read: see probe_every_ms
                sched_yield();
                shared.probed(t0, shared.yield_lost(rte_rdtsc() - t0));
            } else if (all_quiet()) {
                nap(naps++);
            } else {
                nap(0); // frames wait to leave (a shaped rail's queue, ARP): the shortest
            }
        } else if (polite) {
            sched_yield();
        }
    }
    if (lcore_guest* g = c->guest.exchange(nullptr, std::memory_order_acquire)) g->done.store(true, std::memory_order_release);
    for (auto& r : mine) {
        flush(*r);
        r->s.served_by = nullptr;
    }
    return 0; // rail_state destructors release every held mbuf
}

} // namespace railgate::net
