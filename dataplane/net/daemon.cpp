// railgated's data plane, its control API: construction (the rules a
// configuration must meet, checked once here), launching and stopping the
// rail loops, and every change the control plane makes while they run, each
// handed to the lcores as a command they pick up between bursts.
#include "dataplane/net/daemon.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstring>
#include <set>
#include <stdexcept>

#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_pause.h>

#include "dataplane/net/daemon_impl.hpp"
#include "dataplane/net/shared_weight.hpp"
#include "dataplane/proto/ipv4.hpp"
#include "dataplane/reduce/reduce.hpp"
#include "dataplane/log/log.hpp"
#include "dataplane/stats/report.hpp"

namespace railgate::net {
using namespace detail;

std::uint64_t host_memory_bytes() noexcept {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
}

std::string tables_fit(unsigned max_jobs, unsigned max_pool, std::size_t rails) {
    return agg::tables_fit(max_jobs, max_pool, rails, host_memory_bytes());
}

namespace {
// A rail no loop serves any more (removed, or refused by its lcore): its
// port closed, its buffers and, once they are all back, its pools freed.
void retire(rail_static& rs) {
    close_port(rs);
    drain_ring(rs);
    // Datagrams it received may still wait on other rails (routed): then
    // its pools stay until railgated ends.
    if (rte_mempool_full(rs.pool) && rte_mempool_full(rs.hdr_pool)) free_memory(rs);
    rs.closed = true;
    // Rails that came from --vdev at start-up stay known to the EAL; hot-
    // plugged ones are unplugged (a tap's interface disappears).
    if (rs.hotplugged && rs.device) rte_dev_remove(rs.device);
}
} // namespace

daemon::daemon(const daemon_config& cfg) : p_(std::make_unique<impl>()) {
    p_->cfg = cfg;
    p_->policy = cfg.policy;
    auto fail = [](const std::string& what) { throw std::runtime_error(what); };
    // Rules, checked once here; the loops trust the result.
    if (cfg.rails.empty()) fail("no rails configured");
    if (cfg.rails.size() > wire::max_rails) fail("too many rails (max " + std::to_string(wire::max_rails) + ")");
    if (cfg.max_jobs == 0 || cfg.max_jobs > 1024) fail("max_jobs must be 1..1024");
    if (cfg.max_pool == 0 || cfg.max_pool > 65535) fail("max_pool must be 1..65535");
    if (cfg.default_pool == 0 || cfg.default_pool > cfg.max_pool) fail("default pool must be 1..max_pool");
    if (cfg.stall_ms > 3600000 || cfg.assemble_ms > 86400000 || cfg.idle_ms > 604800000)
        fail("stall (max 1 h), assembly (max 1 day) and idle (max 1 week) times out of range");
    if (std::string e = tables_fit(cfg.max_jobs, cfg.max_pool, cfg.rails.size()); !e.empty()) fail(e);
    std::set<std::string> names;
    std::set<std::uint32_t> ips;
    for (const rail_config& r : cfg.rails) {
        const std::string where = "rail " + r.name + ": ";
        if (!names.insert(r.name).second) fail(where + "duplicate name");
        if (r.ip == 0) fail(where + "ip missing");
        if (!ips.insert(r.ip).second) fail(where + "ip " + format_ipv4(r.ip) + " used by another rail");
        if (r.mtu < wire::min_mtu || r.mtu > wire::max_mtu) fail(where + wire::mtu_range_error(r.mtu));
        if (r.mtu_max && (r.mtu_max < r.mtu || r.mtu_max > wire::max_mtu))
            fail(where + "mtu_max " + std::to_string(r.mtu_max) + " out of range " + std::to_string(r.mtu) + ".." +
                 std::to_string(wire::max_mtu));
        if (r.udp_port == 0) fail(where + "udp port 0");
        if (r.port_id < 0 && r.port_name.empty() && !r.udp) fail(where + "no port");
    }
    try {
        p_->open_ports();
        p_->ack.hash = cfg.hash;
        p_->place(); // before the routes: their counters have a block per lcore
        if (std::string e = p_->publish_routes(cfg.routes); !e.empty()) throw std::runtime_error(e);
        if (std::string e = p_->check_bond(cfg.policy); !e.empty()) throw std::runtime_error(e);
    } catch (...) {
        p_->close_all(); // the rails opened so far, their pools and rings
        throw;
    }
}

// What JOIN_ACKs advertise: the active rails in order, their MTU and chunk,
// and the job chunk (the smallest). Also numbers the active rails.
void daemon::impl::rebuild_ack() {
    job_chunk_bytes = UINT32_MAX;
    unsigned n = 0;
    for (auto& r : rails) {
        r->stripe = -1;
        if (!r->active) continue;
        r->stripe = static_cast<int>(n);
        wire::rail_entry& e = ack.rails[n++];
        e = wire::rail_entry{};
        e.ip = r->self.ip;
        e.udp_port = r->self.udp_port;
        e.mtu = r->mtu_target.load();
        std::memcpy(e.mac, r->self.mac.b, 6);
        e.chunk_bytes = static_cast<std::uint16_t>(r->chunk_bytes);
        job_chunk_bytes = std::min(job_chunk_bytes, r->chunk_bytes);
    }
    ack.n_rails = static_cast<std::uint8_t>(n);
    ack.chunk_bytes = static_cast<std::uint16_t>(job_chunk_bytes);
}

daemon::~daemon() {
    stop();
    p_->close_all();
}

std::vector<std::string> daemon::close() {
    stop();
    std::vector<std::string> leaks;
    std::lock_guard lock(p_->ctl);
    if (!p_->ports_open) return leaks;
    for (auto& rs : p_->rails) drain_ring(*rs);
    // The loops have let go of every buffer they held (their rail states
    // are gone); what the ports still hold is what they held when they
    // started (receive descriptors), once their sent frames are reaped.
    for (auto& rs : p_->rails) {
        if (rs->closed) continue;
        if (rs->cfg.udp) rs->udp.reset(); // its spare mbufs
        else rte_eth_tx_done_cleanup(rs->port, 0, 0);
        // af_xdp's PMD keeps a frame or so in its rings beyond its fill
        // ring (it refills ahead, and reaps sent frames on the next send).
        const unsigned slack = rs->driver == "net_af_xdp" ? rx_burst : 0;
        const struct {
            rte_mempool* mp;
            unsigned held;
        } pools[] = {{rs->pool, rs->pool_baseline + slack}, {rs->hdr_pool, 0}};
        for (const auto& [mp, held] : pools) {
            if (!mp) continue;
            const unsigned used = rte_mempool_in_use_count(mp);
            if (used > held)
                leaks.push_back("rail " + rs->cfg.name + ": pool " + mp->name + ": " + std::to_string(used - held) +
                                " of " + std::to_string(mp->size) + " mbufs still in use (the port holds " +
                                std::to_string(held) + ")");
        }
    }
    p_->close_all();
    return leaks;
}

void daemon::print_placement(std::FILE* out) const {
    std::fprintf(out, "railgated: kernels %s; %zu rail(s), job chunk %u bytes\n",
                 std::string(reduce::best().name).c_str(), p_->rails.size(), p_->job_chunk_bytes);
    for (auto& rs : p_->rails) {
        const auto& m = rs->self.mac.b;
        std::fprintf(out,
                     "  rail %-4s -> port %u (%s, %s) -> NUMA %d -> lcore %u | %s:%u mac "
                     "%02x:%02x:%02x:%02x:%02x:%02x mtu %u chunk %u B%s\n",
                     rs->cfg.name.c_str(), rs->port, rs->cfg.port_name.empty() ? "-" : rs->cfg.port_name.c_str(),
                     rs->driver.c_str(), rs->socket, rs->lcore, format_ipv4(rs->self.ip).c_str(),
                     rs->self.udp_port, m[0], m[1], m[2], m[3], m[4], m[5], rs->cfg.mtu, rs->chunk_bytes,
                     rs->multiseg_tx ? (", zero-copy results over " + std::to_string(detail::result_copybreak) + " B").c_str()
                                     : ", copied results");
        if (rs->steering)
            std::fprintf(out, "    xdp: railgate program id %u on %s steers UDP %s:%u to the rail; the kernel keeps "
                              "ARP, ICMP and other traffic\n",
                         rs->steering->prog_id(), rs->ifname.c_str(), format_ipv4(rs->self.ip).c_str(),
                         rs->self.udp_port);
        else if (rs->driver == "net_af_xdp")
            std::fprintf(out, "    xdp: not railgate's program on %s: every packet comes to the rail, which answers "
                              "ARP and ping itself\n",
                         rs->ifname.c_str());
    }
}

void daemon::launch() {
    if (p_->launched) return;
    p_->stop.store(false);
    p_->ctxs.clear();
    for (unsigned l : p_->lcores) p_->ctxs.emplace_back(p_.get(), l);
    for (auto& c : p_->ctxs) {
        const int rc = rte_eal_remote_launch(&impl::lcore_main, &c, c.lcore);
        if (rc != 0) {
            stop();
            throw std::runtime_error("cannot launch lcore " + std::to_string(c.lcore) + ": " + rte_strerror(-rc));
        }
        c.launched = true;
        p_->launched = true;
    }
    // Each loop has read the daemon's policy, JOIN_ACK and limits into its
    // rails' states before launch returns, so that a control command right
    // after (railctl policy set as railgated comes up; a test's set_policy)
    // changes them after the loops read them, never while: ThreadSanitizer
    // found set_policy racing make_rail_state (test_rail_loop
    // a_rail_added_while_a_job_runs_is_not_the_jobs). Changes after launch
    // reach the loops as commands.
    // Building a state allocates and nothing else, so this wait ends; a
    // failure ends it with the lcore's reason, and one that takes long says so.
    const auto t0 = std::chrono::steady_clock::now();
    auto said = t0;
    std::string failed;
    for (auto& c : p_->ctxs) {
        while (!c.ready.load(std::memory_order_acquire)) {
            std::this_thread::yield();
            const auto t = std::chrono::steady_clock::now();
            if (t - said >= std::chrono::seconds(5)) {
                said = t;
                log::warning("lcore %u has not built its rails' states after %lld s", c.lcore,
                             static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(t - t0).count()));
            }
        }
        if (!c.setup_error.empty() && failed.empty())
            failed = "lcore " + std::to_string(c.lcore) + " cannot build its rails' states: " + c.setup_error;
    }
    if (!failed.empty()) {
        stop();
        throw std::runtime_error(failed);
    }
    p_->monitor_stop = false;
    p_->monitor = std::thread([this] { p_->monitor_links(); });
    // Beside a busy task an lcore that sleeps or naps weighs as
    // shared_nice: say so when this process may not raise it.
    if (p_->cfg.idle != idle_policy::spin && p_->cfg.shared_nice < 0 && !can_raise_weight(p_->cfg.shared_nice))
        log::info("lcores keep their nice beside a busy task (raising it to %d needs CAP_SYS_NICE): a woken lcore may "
                  "wait for that task's slice",
                  p_->cfg.shared_nice);
}

bool daemon::host(lcore_guest& g) noexcept {
    if (!p_->launched || p_->ctxs.empty()) return false;
    g.done.store(false, std::memory_order_relaxed);
    lcore_guest* none = nullptr;
    return p_->ctxs.front().guest.compare_exchange_strong(none, &g, std::memory_order_release);
}

void daemon::stop() {
    if (!p_->launched) return;
    // The monitor first: it may be waiting for the lcores to answer.
    {
        std::lock_guard lock(p_->monitor_mu);
        p_->monitor_stop = true;
    }
    p_->monitor_cv.notify_all();
    if (p_->monitor.joinable()) p_->monitor.join();
    p_->stop.store(true);
    for (auto& c : p_->ctxs) c.wake();
    for (auto& c : p_->ctxs) {
        rte_eal_wait_lcore(c.lcore);
        while (c.launched && !c.ended.load(std::memory_order_acquire)) rte_pause();
        c.launched = false;
    }
    p_->launched = false;
}

void daemon::impl::monitor_links() {
    std::unique_lock lk(monitor_mu);
    while (!monitor_stop) {
        monitor_cv.wait_for(lk, std::chrono::milliseconds(100));
        if (monitor_stop) break;
        lk.unlock();
        check_links();
        lk.lock();
    }
}

// A rail whose link goes down: new jobs stripe around it (JOIN_ACK's
// excluded rails), and the jobs striped over it end now, their members told
// on the other rails, so that they re-join around it at once rather than
// notice the silence. A rail that comes back is used by jobs created after.
void daemon::impl::check_links() {
    std::lock_guard lock(ctl);
    std::uint32_t down = 0, went_down = 0;
    for (auto& r : rails) {
        if (!r->active || r->closed) continue;
        const bool up = link_is_up(*r);
        const bool was = r->link_up.exchange(up);
        if (up != was)
            log::write(up ? log::level::notice : log::level::warning, "rail %s: link %s%s", r->cfg.name.c_str(), up ? "up" : "down",
                         up ? ": jobs created from now on use it" : ": its jobs end, new jobs stripe around it");
        if (!up && r->stripe >= 0 && r->stripe < 32) {
            down |= 1u << r->stripe;
            if (was) went_down |= 1u << r->stripe;
        }
    }
    rails_down.store(down, std::memory_order_relaxed);
    if (!went_down || !launched) return;
    lcore_command c;
    c.k = lcore_command::kind::rails_down;
    c.down = went_down;
    on_lcores(c, -1);
}

std::string daemon::set_fault(std::size_t rail, const fault::spec& f) {
    std::lock_guard lock(p_->ctl);
    if (rail >= p_->rails.size() || !p_->rails[rail]->active) return "no rail " + std::to_string(rail);
    lcore_command c;
    c.k = lcore_command::kind::fault;
    c.rail = static_cast<int>(rail);
    c.fault_spec = f;
    if (std::string e = p_->on_lcores(c, static_cast<int>(rail)); !e.empty()) return e;
    p_->rails[rail]->fault_spec = f;
    return {};
}

std::string daemon::freeze(std::size_t rail, std::uint32_t ms, unsigned& lcore) {
    std::lock_guard lock(p_->ctl);
    if (rail >= p_->rails.size() || !p_->rails[rail]->active) return "no rail " + std::to_string(rail);
    if (ms == 0 || ms > max_freeze_ms) return "a freeze lasts 1.." + std::to_string(max_freeze_ms) + " ms";
    lcore = p_->rails[rail]->lcore;
    lcore_command c;
    c.k = lcore_command::kind::freeze;
    c.rail = static_cast<int>(rail);
    c.freeze_ms = ms;
    return p_->on_lcores(c, static_cast<int>(rail));
}

std::vector<lcore_pass> daemon::passes() const {
    std::vector<lcore_pass> out;
    if (!p_->launched) return out;
    const std::uint64_t now = rte_rdtsc();
    const double ns_per_tsc = 1e9 / static_cast<double>(rte_get_tsc_hz());
    for (const impl::lcore_ctx& c : p_->ctxs) {
        const std::uint64_t b = c.beat.load(std::memory_order_relaxed);
        out.push_back({c.lcore, now > b ? static_cast<std::uint64_t>(static_cast<double>(now - b) * ns_per_tsc) : 0});
    }
    return out;
}

std::string daemon::set_capture(std::size_t rail, capture_ring* ring, const capture_filter& f) {
    std::lock_guard lock(p_->ctl);
    if (rail >= p_->rails.size() || !p_->rails[rail]->active) return "no rail " + std::to_string(rail);
    lcore_command c;
    c.k = lcore_command::kind::capture;
    c.rail = static_cast<int>(rail);
    c.ring = ring;
    c.filter = f;
    c.filter.udp_port = p_->rails[rail]->cfg.udp_port;
    return p_->on_lcores(c, static_cast<int>(rail));
}

std::uint64_t daemon::clock_ns() noexcept {
    return static_cast<std::uint64_t>(static_cast<double>(rte_rdtsc()) * (1e9 / static_cast<double>(rte_get_tsc_hz())));
}

std::size_t daemon::rail_count() const noexcept {
    std::lock_guard lock(p_->ctl);
    return p_->rails.size();
}
const rail_config& daemon::rail(std::size_t i) const noexcept {
    std::lock_guard lock(p_->ctl);
    return p_->rails[i]->cfg;
}
const rail_counters& daemon::counters(std::size_t i) const noexcept {
    std::lock_guard lock(p_->ctl);
    return p_->rails[i]->ctr;
}

namespace {
// The active rails an lcore serves, by name.
std::vector<std::string> rails_of(const daemon::impl& p, unsigned lcore) {
    std::vector<std::string> out;
    for (const auto& rs : p.rails)
        if (rs->active && rs->lcore == lcore) out.push_back(rs->cfg.name);
    return out;
}
} // namespace

std::vector<lcore_status> daemon::lcores() const {
    std::lock_guard lock(p_->ctl);
    std::vector<lcore_status> out;
    if (!p_->launched) return out;
    const std::vector<lcore_pass> passed = passes();
    for (const impl::lcore_ctx& c : p_->ctxs) {
        lcore_status s;
        s.lcore = c.lcore;
        s.rails = rails_of(*p_, c.lcore);
        s.runq_wait_ns = c.ctr.runq_wait_ns.load(std::memory_order_relaxed);
        s.shared = c.ctr.shared.load(std::memory_order_relaxed);
        s.shared_ns = c.ctr.shared_ns.load(std::memory_order_relaxed);
        s.absences = c.ctr.absences.load(std::memory_order_relaxed);
        s.absent_ns = c.ctr.absent_ns.load(std::memory_order_relaxed);
        s.since_pass_ns = passed[out.size()].since_ns;
        out.push_back(std::move(s));
    }
    return out;
}

void daemon::print_stats(std::FILE* out) const {
    std::lock_guard lock(p_->ctl);
    auto v = [](const counter& c) { return c.load(std::memory_order_relaxed); };
    for (auto& rs : p_->rails) {
        const rail_counters& c = rs->ctr;
        std::fprintf(out,
                     "rail %s: rx %" PRIu64 " pkts %" PRIu64 " B, tx %" PRIu64 " pkts %" PRIu64
                     " B, contributions %" PRIu64 ", aggregations %" PRIu64 ", results %" PRIu64
                     " (resent %" PRIu64 "), joins %" PRIu64 " (refused %" PRIu64 "), leaves %" PRIu64
                     ", aborts %" PRIu64 ", arp %" PRIu64 ", icmp %" PRIu64 ", drops %" PRIu64 ", busy %.1f%% of its poll time\n",
                     rs->cfg.name.c_str(), v(c.rx_packets), v(c.rx_bytes), v(c.tx_packets), v(c.tx_bytes),
                     v(c.contributions), v(c.aggregations), v(c.results_sent), v(c.results_resent), v(c.joins),
                     v(c.join_errors), v(c.leaves), v(c.aborts), v(c.arp_replies), v(c.icmp_replies),
                     c.total_drops(), v(c.poll_cycles) ? 100.0 * double(v(c.busy_cycles)) / double(v(c.poll_cycles)) : 0.0);
        if (v(c.ecn_marked)) std::fprintf(out, "  ecn: %" PRIu64 " frames marked CE\n", v(c.ecn_marked));
        if (v(c.queried) || v(c.held))
            std::fprintf(out,
                         "  loss: %" PRIu64 " PINGs naming a chunk answered from its slot, %" PRIu64
                         " HELD (%" PRIu64 " of them a kept result still queued)\n",
                         v(c.queried), v(c.held), v(c.held_queued));
        if (v(c.leaves_again))
            std::fprintf(out, "  leaves: %" PRIu64 " acknowledged again (their LEAVE_ACK lost)\n", v(c.leaves_again));
        if (v(c.udp_coalesced))
            std::fprintf(out, "  udp: %" PRIu64 " datagrams arrived coalesced (GRO), %" PRIu64 " copied\n",
                         v(c.udp_coalesced), v(c.udp_copied));
        if (v(c.stalls) || v(c.expirations) || v(c.takeovers) || v(c.ends_retold))
            std::fprintf(out,
                         "  jobs ended: %" PRIu64 " stalled, %" PRIu64 " expired, %" PRIu64 " taken over; %" PRIu64
                         " ends told again\n",
                         v(c.stalls), v(c.expirations), v(c.takeovers), v(c.ends_retold));
        if (rs->fault_spec.any())
            std::fprintf(out, "  faults injected (%s): dropped %" PRIu64 ", duplicated %" PRIu64 ", reordered %" PRIu64
                              ", corrupted %" PRIu64 "\n",
                         fault::format(rs->fault_spec).c_str(), v(c.drops[static_cast<unsigned>(drop_reason::fault_injected)]),
                         v(c.fault_dups), v(c.fault_reorders), v(c.fault_corrupts));
        for (unsigned r = 0; r < drop_reason_count; ++r)
            if (const std::uint64_t n = v(c.drops[r]))
                std::fprintf(out, "  drop %-26s %12" PRIu64 "  (%s)\n",
                             std::string(drop_reason_name(static_cast<drop_reason>(r))).c_str(), n,
                             std::string(drop_reason_text(static_cast<drop_reason>(r))).c_str());
        if (!rs->steering) continue;
        const xdp::counters x = rs->steering->program_maps().read();
        std::fprintf(out, "  xdp %s:", rs->ifname.c_str());
        for (unsigned r = 0; r < RG_XDP_REASONS; ++r)
            if (x[r] || r == RG_XDP_REDIRECT)
                std::fprintf(out, " %s %" PRIu64, std::string(xdp::reason_name(r)).c_str(), x[r]);
        std::fprintf(out, "\n");
    }
    // How each lcore shared its CPU (kept after stop(): the last figures).
    for (const impl::lcore_ctx& c : p_->ctxs)
        stats::print_lcore_sharing(out, c.lcore, rails_of(*p_, c.lcore),
                                   {static_cast<double>(v(c.ctr.runq_wait_ns)) / 1e9, v(c.ctr.shared),
                                    static_cast<double>(v(c.ctr.shared_ns)) / 1e9, v(c.ctr.absences),
                                    static_cast<double>(v(c.ctr.absent_ns)) / 1e9});
}

daemon::impl::lcore_ctx::lcore_ctx(impl* s, unsigned l)
    : self(s), lcore(l), beat(rte_rdtsc()), wake_fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
daemon::impl::lcore_ctx::~lcore_ctx() {
    if (wake_fd >= 0) ::close(wake_fd);
}
void daemon::impl::lcore_ctx::wake() const noexcept {
    const std::uint64_t one = 1;
    if (wake_fd >= 0 && ::write(wake_fd, &one, sizeof one) < 0) {
        // Full (2^64 - 2 wakes pending) or closed: the loop wakes anyway.
    }
}

std::string daemon::impl::on_lcores(lcore_command& c, int rail) {
    if (!launched) return "the rail loops are not running";
    for (lcore_ctx& x : ctxs) {
        if (rail >= 0 && x.lcore != rails[static_cast<std::size_t>(rail)]->lcore) continue;
        x.cmd.store(&c, std::memory_order_release);
        x.wake();
        // The loops look at their mailbox every pass (microseconds). One
        // that does not go round (a hung device call, railctl fault freeze)
        // takes the command when it is back: c must outlive it, so this
        // waits on, and the command then counts as done (it was), with a
        // warning. (Before, it failed after 2 s while the lcore applied it
        // later: a fault spec shown was not the one applied.)
        const auto posted = std::chrono::steady_clock::now();
        const auto deadline = posted + std::chrono::seconds(2);
        bool late = false;
        while (x.cmd.load(std::memory_order_acquire)) {
            late = late || std::chrono::steady_clock::now() > deadline;
            std::this_thread::sleep_for(late ? std::chrono::microseconds(1000) : std::chrono::microseconds(20));
        }
        if (late)
            log::warning("lcore %u took %.1f s to take a control command: it was not going round its loop", x.lcore,
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - posted).count());
        if (!c.err.empty()) return c.err;
    }
    return {};
}

lcore_command daemon::impl::adopt_command() const {
    lcore_command c;
    c.k = lcore_command::kind::adopt;
    c.ack = ack;
    c.job_chunk_bytes = job_chunk_bytes;
    c.policy = policy;
    c.stripe.fill(-1);
    for (std::size_t i = 0; i < rails.size(); ++i) c.stripe[i] = static_cast<std::int8_t>(rails[i]->stripe);
    return c;
}

std::string daemon::impl::adopt(bool hold_joins) {
    lcore_command c = adopt_command();
    c.hold_joins = hold_joins;
    return on_lcores(c, -1);
}

std::string daemon::impl::advertise() {
    std::string held = adopt(true);
    std::string e = adopt(false);
    return held.empty() ? e : held;
}

std::vector<rail_status> daemon::status() const {
    std::lock_guard lock(p_->ctl);
    std::vector<rail_status> out;
    for (const auto& rs : p_->rails) {
        if (!rs->active) continue;
        rail_status x;
        x.name = rs->cfg.name;
        x.port_name = rs->cfg.port_name;
        x.driver = rs->driver;
        x.ifname = rs->ifname;
        x.host_ifname = rs->cfg.host_if;
        x.port = rs->port;
        x.numa = rs->socket;
        x.lcore = rs->lcore;
        x.ip = rs->self.ip;
        x.udp_port = rs->self.udp_port;
        std::memcpy(x.mac, rs->self.mac.b, 6);
        x.mtu = rs->mtu_now.load(std::memory_order_relaxed);
        x.mtu_target = rs->mtu_target.load(std::memory_order_relaxed);
        x.mtu_max = rs->cfg.mtu_max;
        x.chunk_bytes = rs->chunk_bytes;
        x.traffic_class = rs->cfg.traffic_class;
        x.active_jobs = rs->active_jobs.load(std::memory_order_relaxed);
        x.xdp_steering = rs->steering != nullptr;
        x.index = static_cast<std::size_t>(&rs - p_->rails.data());
        x.link_up = rs->link_up.load(std::memory_order_relaxed);
        x.fault = rs->fault_spec;
        out.push_back(std::move(x));
    }
    return out;
}

wire::rail_policy daemon::policy() const noexcept {
    std::lock_guard lock(p_->ctl);
    return p_->policy;
}

std::uint32_t daemon::job_chunk_bytes() const noexcept {
    std::lock_guard lock(p_->ctl);
    return p_->job_chunk_bytes;
}

std::string daemon::set_mtu(std::size_t rail, unsigned mtu, std::string& state) {
    std::lock_guard lock(p_->ctl);
    if (rail >= p_->rails.size()) return "no rail " + std::to_string(rail);
    rail_static& rs = *p_->rails[rail];
    if (mtu < wire::min_mtu || mtu > rs.cfg.mtu_max)
        return wire::mtu_range_error(mtu, rs.cfg.mtu_max) + " (the rail's mtu_max)";
    const auto old_target = rs.mtu_target.load();
    const bool raise = mtu > rs.mtu_now.load();
    lcore_command port;
    port.k = lcore_command::kind::port_mtu;
    port.rail = static_cast<int>(rail);
    port.mtu = static_cast<std::uint16_t>(mtu);
    // Raising: the port first, then the bigger chunks for new jobs.
    if (raise)
        if (std::string e = p_->on_lcores(port, static_cast<int>(rail)); !e.empty()) return e;
    rs.chunk_bytes = wire::chunk_bytes_for_mtu(mtu);
    rs.mtu_target.store(static_cast<std::uint16_t>(mtu));
    p_->rebuild_ack();
    if (std::string e = p_->advertise(); !e.empty()) {
        rs.mtu_target.store(old_target);
        return e;
    }
    // Lowering: new jobs already use the smaller chunks; the port follows
    // when the jobs with larger ones have left.
    if (!raise)
        if (std::string e = p_->on_lcores(port, static_cast<int>(rail)); !e.empty()) return e;
    const unsigned now = rs.mtu_now.load();
    state = now == mtu ? "applied"
                       : "draining: new jobs use " + std::to_string(rs.chunk_bytes) + " B chunks now; the port moves from MTU " +
                             std::to_string(now) + " when the " + std::to_string(rs.active_jobs.load()) +
                             " job(s) with larger chunks leave";
    return {};
}

std::string daemon::set_shaping(std::size_t rail, std::uint64_t rate_bps, std::uint64_t burst_bytes,
                                const std::array<qos::tc_config, qos::tc_count>& tcs) {
    std::lock_guard lock(p_->ctl);
    if (rail >= p_->rails.size() || !p_->rails[rail]->active) return "no rail " + std::to_string(rail);
    if (std::string e = qos::check(tcs); !e.empty()) return e;
    lcore_command c;
    c.k = lcore_command::kind::shaping;
    c.rail = static_cast<int>(rail);
    c.rate_bps = rate_bps;
    c.burst_bytes = burst_bytes;
    c.tcs = tcs;
    if (std::string e = p_->on_lcores(c, static_cast<int>(rail)); !e.empty()) return e;
    // The lcore built its scheduler from these at start; they are what the
    // control plane shows (and what a re-attached rail starts with).
    rail_static& rs = *p_->rails[rail];
    rs.cfg.rate_bps = rate_bps;
    rs.cfg.burst_bytes = burst_bytes;
    rs.cfg.tcs = tcs;
    return {};
}

std::string daemon::impl::check_bond(wire::rail_policy pol) const {
    if (pol != wire::rail_policy::lag) return {};
    const rail_static* first = nullptr;
    for (const auto& r : rails) {
        if (!r->active) continue;
        if (!first) first = r.get();
        else if (r->lcore != first->lcore)
            return "LAG needs every rail on one lcore (the bond is one poll loop): rail " + first->cfg.name +
                   " is on lcore " + std::to_string(first->lcore) + ", rail " + r->cfg.name + " on lcore " +
                   std::to_string(r->lcore);
    }
    return {};
}

std::string daemon::set_policy(wire::rail_policy pol, wire::lag_hash hash) {
    std::lock_guard lock(p_->ctl);
    if (std::string e = p_->check_bond(pol); !e.empty()) return e;
    const wire::rail_policy old = p_->policy;
    const wire::lag_hash old_hash = p_->ack.hash;
    p_->policy = pol;
    p_->ack.hash = hash;
    if (std::string e = p_->advertise(); !e.empty()) {
        p_->policy = old;
        p_->ack.hash = old_hash;
        return e;
    }
    return {};
}

std::string daemon::latency(int rail, const std::optional<std::uint32_t>& job, bool worker, bool reset,
                            stats::histogram& out) {
    std::lock_guard lock(p_->ctl);
    if (rail >= static_cast<int>(p_->rails.size())) return "no rail " + std::to_string(rail);
    lcore_command c;
    c.k = lcore_command::kind::snapshot;
    c.rail = rail;
    c.job = job;
    c.worker = worker;
    c.reset = reset;
    c.out = &out;
    if (std::string e = p_->on_lcores(c, rail); !e.empty()) return e;
    if (job && !c.found)
        return "job " + std::to_string(*job) + " neither runs on " +
               (rail < 0 ? "any rail" : "rail " + p_->rails[static_cast<std::size_t>(rail)]->cfg.name) +
               " nor is among the " + std::to_string(job_latency::ended) +
               " joined last of the jobs that ended there (a rail keeps the histograms of those; without --job, "
               "every job's)";
    return {};
}

std::string daemon::jobs(int rail, std::vector<job_view>& out) {
    std::lock_guard lock(p_->ctl);
    if (rail >= static_cast<int>(p_->rails.size())) return "no rail " + std::to_string(rail);
    lcore_command c;
    c.k = lcore_command::kind::jobs;
    c.rail = rail;
    c.jobs = &out;
    return p_->on_lcores(c, rail);
}

std::string daemon::abort_job(std::uint32_t id, const std::string& text, std::vector<std::string>& ended_on,
                              unsigned& told) {
    std::lock_guard lock(p_->ctl);
    lcore_command c;
    c.k = lcore_command::kind::abort_job;
    c.abort_id = id;
    c.abort_text = text;
    c.ended_on = &ended_on;
    std::string e = p_->on_lcores(c, -1);
    told = c.told;
    return e;
}

std::string daemon::tc_latency(int rail, unsigned tc, bool reset, stats::histogram& out) {
    std::lock_guard lock(p_->ctl);
    if (rail >= static_cast<int>(p_->rails.size())) return "no rail " + std::to_string(rail);
    if (tc >= qos::tc_count) return "tc " + std::to_string(tc) + " out of range 0..7";
    lcore_command c;
    c.k = lcore_command::kind::snapshot;
    c.rail = rail;
    c.tc = static_cast<int>(tc);
    c.reset = reset;
    c.out = &out;
    return p_->on_lcores(c, rail);
}

std::optional<xdp::counters> daemon::xdp_counters(std::size_t rail) const {
    if (rail >= p_->rails.size() || !p_->rails[rail]->steering) return std::nullopt;
    return p_->rails[rail]->steering->program_maps().read();
}

bool daemon::rail_active(std::size_t i) const noexcept {
    std::lock_guard lock(p_->ctl);
    return i < p_->rails.size() && p_->rails[i]->active;
}

bool udp_rail_devargs(const std::string& devargs, std::string& interface, std::string& error) {
    if (devargs != "udp" && devargs.rfind("udp,", 0) != 0) return false;
    constexpr std::string_view key = "udp,interface=";
    interface.clear();
    error.clear();
    if (devargs == "udp") return true;
    if (devargs.rfind(key, 0) != 0 || devargs.size() == key.size() || devargs.find(',', key.size()) != std::string::npos)
        error = "a udp rail takes only interface=IFNAME (udp or udp,interface=lo)";
    else
        interface = devargs.substr(key.size());
    return true;
}

std::string daemon::add_rail(const rail_config& rc, const std::string& devargs, std::size_t& index) {
    std::lock_guard lock(p_->ctl);
    if (!p_->launched) return "the rail loops are not running";
    unsigned n_active = 0;
    for (const auto& r : p_->rails) {
        if (!r->active) continue;
        ++n_active;
        if (r->cfg.name == rc.name) return "rail '" + rc.name + "' exists";
        if (r->cfg.ip == rc.ip) return "address " + format_ipv4(rc.ip) + " is rail " + r->cfg.name + "'s";
    }
    if (n_active >= wire::max_rails) return "already " + std::to_string(n_active) + " rails (max " + std::to_string(wire::max_rails) + ")";
    if (p_->rails.size() >= p_->rails.capacity()) return "no room for more rails in this run; restart railgated";
    if (rc.mtu < wire::min_mtu || rc.mtu > wire::max_mtu) return wire::mtu_range_error(rc.mtu);
    if (std::string e = tables_fit(p_->cfg.max_jobs, p_->cfg.max_pool, n_active + 1); !e.empty()) return e;
    if (devargs.rfind("net_af_xdp", 0) == 0)
        return "af_xdp rails are set up at start-up (their XDP program is prepared then); add it to the config";
    rail_config c = rc;
    c.port_id = -1;
    rte_device* device = nullptr;
    if (std::string e; udp_rail_devargs(devargs, c.udp_interface, e)) { // the kernel's socket on its address
        if (!e.empty()) return e;
        if (rc.host_ip) return "a udp rail has no host side: no host_ip";
        c.udp = true;
    } else {
        const std::string dev = devargs.substr(0, devargs.find(','));
        std::uint16_t existing;
        if (rte_eth_dev_get_port_by_name(dev.c_str(), &existing) == 0) return "device " + dev + " is already in use";
        if (const int r = rte_dev_probe(devargs.c_str()); r != 0)
            return "cannot probe " + devargs + ": " + rte_strerror(-r);
        c.port_name = dev;
        device = device_of(dev);
    }
    const std::size_t i = p_->rails.size();
    std::unique_ptr<rail_static> rs;
    try {
        rs = p_->open_rail(i, c);
        std::vector<unsigned> load(RTE_MAX_LCORE, 0);
        for (const auto& r : p_->rails)
            if (r->active) ++load[r->lcore];
        if (p_->policy == wire::rail_policy::lag)
            for (const auto& r : p_->rails)
                if (r->active) { // a LAG member joins the bond's loop
                    if (rs->cfg.lcore >= 0 && rs->cfg.lcore != static_cast<int>(r->lcore))
                        throw std::runtime_error("under LAG every rail is on lcore " + std::to_string(r->lcore));
                    rs->cfg.lcore = static_cast<int>(r->lcore);
                    break;
                }
        p_->place_rail(*rs, p_->lcores, load);
    } catch (const std::exception& e) {
        if (rs) {
            close_port(*rs);
            free_memory(*rs);
        }
        if (device) rte_dev_remove(device);
        return e.what();
    }
    rs->hotplugged = true;
    p_->rails.push_back(std::move(rs));
    p_->rebuild_ack();
    lcore_command attach;
    attach.k = lcore_command::kind::attach;
    attach.rail = static_cast<int>(i);
    if (std::string e = p_->on_lcores(attach, static_cast<int>(i)); !e.empty()) {
        // Its lcore could not build its state: no loop serves it, so it
        // is not advertised, and its port goes.
        p_->rails[i]->active = false;
        p_->rebuild_ack();
        retire(*p_->rails[i]);
        return e;
    }
    if (std::string e = p_->advertise(); !e.empty()) return e;
    index = i;
    return {};
}

std::string daemon::remove_rail(std::size_t i) {
    std::lock_guard lock(p_->ctl);
    if (!p_->launched) return "the rail loops are not running";
    if (i >= p_->rails.size() || !p_->rails[i]->active) return "no such rail";
    rail_static& rs = *p_->rails[i];
    if (rs.stripe == 0) return "rail " + rs.cfg.name + " is the one workers join first; it cannot be removed";
    for (const route_config& r : p_->routes)
        if (r.rail == rs.cfg.name)
            return "route " + format_prefix(r.prefix, r.len) + " leaves by rail " + rs.cfg.name + "; delete it first";
    // Busy while it carries a job, or a job on another rail lists it: the
    // job's first rail advertised it, and its ranks' JOINs there may be
    // on their way (they would find no rail, or, behind it, rails whose
    // stripe index moved).
    const int stripe = rs.stripe;
    auto busy = [&] {
        if (const unsigned n = rs.active_jobs.load())
            return "rail " + rs.cfg.name + " carries " + std::to_string(n) + " job(s); remove it between jobs";
        for (const auto& r : p_->rails)
            if (r.get() != &rs && r->active && r->job_rails.load() > static_cast<unsigned>(stripe))
                return "a job on rail " + r->cfg.name + " lists rail " + rs.cfg.name +
                       " (its ranks are joining it); remove it between jobs";
        return std::string();
    };
    if (std::string e = busy(); !e.empty()) return e;
    // Hold every JOIN, then make sure no job started listing it meanwhile;
    // the rail is advertised as it was until it goes (were it taken out and
    // put back, a job joining then would be given two rail lists).
    std::string e = p_->adopt(true);
    if (e.empty()) e = busy();
    if (!e.empty()) {
        p_->adopt(false);
        return e;
    }
    // Stop advertising it and refuse JOINs on it; the lcores still holding
    // JOINs let them through as each takes the new list.
    rs.active = false;
    p_->rebuild_ack();
    if (std::string a = p_->adopt(false); !a.empty()) return a;
    lcore_command detach;
    detach.k = lcore_command::kind::detach;
    detach.rail = static_cast<int>(i);
    if (std::string d = p_->on_lcores(detach, static_cast<int>(i)); !d.empty()) return d;
    retire(rs);
    return {};
}

} // namespace railgate::net
