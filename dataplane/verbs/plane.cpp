#include "dataplane/verbs/plane.hpp"

#include <arpa/inet.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <stdexcept>

#include "dataplane/agg/job_table.hpp"
#include "dataplane/proto/ipv4.hpp"
#include "dataplane/proto/parse.hpp"
#include "dataplane/reduce/reduce.hpp"
#include "dataplane/stats/clock.hpp"
#include "dataplane/stats/histogram.hpp"
#include "dataplane/log/log.hpp"
#include "dataplane/verbs/ll_ring.hpp"
#include "dataplane/verbs/pass_clock.hpp"

namespace railgate::verbs {
namespace {

// Times are stats::coarse_now_ns() (CLOCK_MONOTONIC_COARSE, a vDSO read
// to the kernel's tick): every deadline here is judged in milliseconds or
// seconds (joins, stalls, idle jobs, disconnects), and a contribution's
// arrival is stamped on the latency path, where a precise clock read is a
// system call in an emulated guest (its HPET: 0.7 us a read). reap() reads
// none unless a connection has a deadline running.
constexpr std::uint64_t join_deadline_ns = 10'000'000'000;  // connected, never joined: disconnected
constexpr std::uint64_t close_deadline_ns = 2'000'000'000;  // disconnecting: destroyed anyway
constexpr unsigned cm_poll_passes = 256;                  // a CM poll is a syscall: not every pass

void bump(std::atomic<std::uint64_t>& c) noexcept { c.fetch_add(1, std::memory_order_relaxed); }

// A send waiting for room in its QP's send queue.
struct pending_send {
    std::uint64_t wr_id;
    ibv_wr_opcode op;
    std::uint64_t laddr;
    std::uint32_t len, lkey;
    std::uint64_t raddr;
    std::uint32_t rkey, imm;
};

} // namespace

// One worker's QP on this rail. Members are declared in creation order and
// so torn down in reverse: the QP first, then the memory it used.
//
// Each connection has a protection domain of its own: an rkey is valid
// only on QPs of its MR's PD, so a worker's WRITEs can reach its own
// contribution region and eager ring and nothing else, whatever rkeys it
// guesses (one PD per rail would let any worker of the rail write into
// another's, of any tenant). Its job's result memory is registered in it
// too (vjob_data::lkey_in), the source of the result WRITEs to it.
struct conn {
    enum class state : std::uint8_t { accepting, up, closing };
    cm_id_ptr id;
    std::shared_ptr<ibv_pd> pd; // shared with its job's registration of the results (vjob_data)
    region_memory ctl;    // rq_depth receive buffers, then ctl_sends send buffers
    mr_ptr ctl_mr;
    region_memory contrib; // this rank's contributions: pool slots of the job's chunk
    mr_ptr contrib_mr;
    // The eager rings when the worker offered its ring and the rail
    // busy-polls: its small chunks land there, and so do their results.
    eager_rings eager;
    std::unique_ptr<queue_pair> qp;

    state st = state::accepting;
    std::uint64_t since_ns = stats::coarse_now_ns();
    std::uint64_t conn_id = 0; // the job table's address of this worker: unique per rail
    std::uint32_t host = 0;    // the worker's IPv4 address (admission limits)
    bool ever_joined = false;
    int job = -1;              // index in the rail's job table
    std::uint16_t rank = 0;
    bool have_region = false;  // the worker's REGION (where results go)
    // The JOIN last answered here (its nonce, in the job incarnation it
    // joined): RC delivers that answer, so the same JOIN sent again while
    // it is on its way (a worker resends every 100 ms until answered) is
    // not answered twice.
    std::uint64_t answered_nonce = 0;
    std::uint32_t answered_instance = 0;
    std::uint32_t results_lkey = 0; // its job's result memory in this PD
    // The job this connection left (its LEAVE): a LEAVE repeated for it is
    // acknowledged again, as on the UDP rails.
    struct left_job {
        bool any = false;
        std::uint32_t id = 0, gen = 0;
        std::uint64_t token = 0;
        std::uint16_t rank = 0;
    } left;
    wire::region_body peer{};
    send_ledger sends{sq_depth};
    std::deque<pending_send> backlog;
    unsigned ctl_next = 0, ctl_busy = 0;

    std::uint8_t* recv_buf(std::size_t i) const noexcept { return static_cast<std::uint8_t*>(ctl.p) + i * ctl_bytes; }
    std::uint8_t* send_buf(std::size_t i) const noexcept { return recv_buf(rq_depth + i); }
};

// What a verbs rail keeps per job besides the job table's (agg::job_table:
// membership, generations, lifecycle). A slot's `count` is its chunk's bytes.
struct vjob_data {
    conn* members[wire::max_world] = {};
    // When each slot's first contribution came (stats::tsc_now_ns): its
    // aggregation latency runs from there to the result's WRITEs.
    std::uint64_t first_ns[wire::verbs_max_pool] = {};
    region_memory results; // the reduced chunks, pool slots
    // `results` registered in each member's PD (the source of the result
    // WRITEs on its QP), kept while the connection lives: a WRITE from a
    // member that left may still be in flight on its QP. One per PD that
    // joined and is still connected (forget_pd() when its QP is gone).
    struct registration {
        std::shared_ptr<ibv_pd> pd;
        mr_ptr mr;
    };
    std::vector<registration> regs;
    unsigned outstanding = 0; // result WRITEs in flight from `results`

    // The lkey of `results` in `pd`, registered on first use; false when
    // the HCA refuses.
    bool lkey_in(const std::shared_ptr<ibv_pd>& pd, std::uint32_t& lkey) {
        for (const registration& r : regs)
            if (r.pd == pd) return lkey = r.mr->lkey, true;
        mr_ptr mr(ibv_reg_mr(pd.get(), results.p, results.bytes, local_write));
        if (!mr) return false;
        lkey = mr->lkey;
        regs.push_back({pd, std::move(mr)});
        return true;
    }
    void free_results() noexcept {
        regs.clear(); // the registrations before their memory
        results = {};
    }
    // A connection's QP is destroyed: nothing can WRITE from its PD's
    // registration any more, which then only held the PD.
    void forget_pd(const std::shared_ptr<ibv_pd>& pd) noexcept {
        std::erase_if(regs, [&](const registration& r) { return r.pd == pd; });
    }
};
using vtable = agg::job_table<vjob_data>;
using vjob = vtable::job_t;

struct plane::rail_state {
    rail_config cfg;
    const plane_config lim;
    unsigned index;
    cm_channel_ptr ch;
    cm_id_ptr listen;
    comp_channel_ptr comp;
    int numa = -1;
    bool soft = false; // a software device: enter the kernel on idle passes (software_device())
    std::string placement;
    unsigned path_mtu = 0;
    std::uint32_t job_chunk = 0;
    wire::join_ack_body ack{};
    const reduce::kernels* k = &reduce::best();
    rail_counters ctr;
    std::atomic<unsigned> n_conns{0}, n_jobs{0};
    std::atomic<unsigned> n_result_mrs{0}; // the jobs' registrations of their results (count_result_mrs())
    // The last connection's QP timers as the HCA took them (qp_timers
    // packed a byte each, bit 31 set once a QP has connected).
    std::atomic<std::uint32_t> timers_seen{0};
    // The source GID index new connections take (-1: automatic), set by
    // the control plane (set_gid_index), and the last connection's QP's
    // (-1: none yet), with gid_given when it was set, not found.
    std::atomic<int> gid_index{-1}, gid_seen{-1};
    static constexpr int gid_given = 1 << 16;
    vtable jobs;
    std::vector<std::unique_ptr<conn>> conns;
    unsigned pass = 0;
    std::uint64_t next_conn_id = 1;
    std::uint64_t next_expire_ns = now_ns();
    pass_clock looks{next_expire_ns}; // when the thread looks (expire()), and its last look
    std::atomic<std::uint64_t> beat_ns{looks.looked()}; // the same, for plane::passes()
    // railctl latency: aggregation latency (first contribution to the
    // result's WRITEs posted, ns) and the round trips its workers report
    // (RTT_REPORT). The rail's thread writes them; the control plane reads
    // them through a request.
    stats::histogram lat, worker_rtt;
    // The control plane's request (plane::jobs, plane::latency,
    // plane::abort_job), answered by the rail's thread in expire(): taken
    // (exchanged for null) before it is carried out; `answered` is set after.
    struct request {
        std::vector<agg::job_view>* jobs = nullptr; // list the jobs into it; else:
        stats::histogram* latency = nullptr;        // merge a histogram into it (worker: the workers'), reset after; else:
        bool worker = false, reset = false;
        std::uint32_t abort = 0;                    // end this job for the operator
        std::string text;
        unsigned told = 0;                          // the members told
    };
    std::atomic<request*> asked{nullptr};
    std::atomic<bool> answered{false};
    void answer(request& q);
    // From the control plane's thread: q carried out by the rail's thread
    // (or here, with the rail's thread not running). "" or why not.
    std::string ask(request& q, bool running, unsigned wait_ms);

    // Members above are declared in creation order: the connections (their
    // QPs, CQs and MRs) go first, then the jobs' MRs, the PD, the channels.
    rail_state(const rail_config& c, const plane_config& l, unsigned i)
        : cfg(c), lim(l), index(i), gid_index(c.qp.gid_index),
          jobs(l.max_jobs, std::min(l.max_pool, wire::verbs_max_pool)) {
        agg::lifecycle life;
        life.stall = std::uint64_t{l.stall_ms} * 1000000;
        life.assemble = std::uint64_t{l.assemble_ms} * 1000000;
        life.idle = std::uint64_t{l.idle_ms} * 1000000;
        life.max_pending = l.max_pending_joins;
        jobs.set_lifecycle(life);
    }
    // See the deadlines above.
    static std::uint64_t now_ns() noexcept { return stats::coarse_now_ns(); }
    vjob& job_at(int j) noexcept { return jobs.all()[static_cast<std::size_t>(j)]; }
    // n_result_mrs after a registration came or went (max_jobs entries).
    void count_result_mrs() noexcept {
        unsigned n = 0;
        for (const vjob& x : jobs.all()) n += static_cast<unsigned>(x.x.regs.size());
        n_result_mrs.store(n, std::memory_order_relaxed);
    }

    void run(const std::atomic<bool>& stop);

    // --- connections
    bool poll_cm();
    void on_connect_request(rdma_cm_id* id, const rdma_conn_param& peer);
    int poll_cq(conn& c);
    bool poll_conn(conn& c);
    bool poll_ring(conn& c);
    void handle_wc(conn& c, const ibv_wc& wc);
    void fail_conn(conn& c, const std::string& why);
    void destroy_conn(conn& c);
    void reap();
    void sleep();
    void post_recv(conn& c, std::size_t i);
    void post_send(conn& c, const pending_send& s);
    void post_now(conn& c, const pending_send& s);
    void send_done(conn& c, std::uint64_t wr_id);
    void flush_backlog(conn& c);

    // --- protocol
    void on_control(conn& c, const std::uint8_t* msg, std::size_t len);
    void on_join(conn& c, const wire::header& h, std::span<const std::uint8_t> body);
    void on_region(conn& c, const wire::header& h, std::span<const std::uint8_t> body);
    void on_leave(conn& c, const wire::header& h);
    void ack_leave(conn& c, const wire::header& h);
    void on_ping(conn& c, const wire::header& h);
    void on_chunk(conn& c, std::uint32_t imm, std::uint32_t len, std::uint64_t now, const void* eager = nullptr);
    void complete_slot(vjob& x, unsigned slot);
    void send_ctl(conn& c, const wire::header& h, const void* body, std::size_t len);
    void send_error(conn& c, const wire::header& req, wire::error_code code, const std::string& text,
                    std::uint64_t detail = 0, std::uint32_t gen = 0);
    void detach(conn& c);
    void abort_job(vjob& x, wire::error_code code, std::uint64_t detail, const std::string& why, const conn* skip);
    void release_job(vjob& x);
    void maybe_free(vjob& x);
    void expire();
};

// ---------------------------------------------------------------- set-up

plane::plane(const plane_config& cfg) {
    if (cfg.rails.empty()) throw std::runtime_error("no verbs rails");
    std::uint32_t job_chunk = UINT32_MAX;
    for (unsigned i = 0; i < cfg.rails.size(); ++i) {
        const rail_config& rc = cfg.rails[i];
        auto rs = std::make_unique<rail_state>(rc, cfg, i);
        const std::string where = "verbs rail " + rc.name + " (" + net::format_ipv4(rc.ip) + ")";
        rs->ch.reset(rdma_create_event_channel());
        if (!rs->ch)
            throw std::runtime_error(where + ": no RDMA CM (" + std::strerror(errno) +
                                     "): is rdma_ucm loaded and /dev/infiniband/rdma_cm present?");
        rdma_cm_id* id = nullptr;
        if (rdma_create_id(rs->ch.get(), &id, nullptr, RDMA_PS_TCP))
            throw std::runtime_error(where + ": rdma_create_id: " + std::strerror(errno));
        rs->listen.reset(id);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(rc.cm_port);
        a.sin_addr.s_addr = htonl(rc.ip);
        if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&a)))
            throw std::runtime_error(where + ": cannot bind port " + std::to_string(rc.cm_port) + ": " +
                                     std::strerror(errno));
        if (!id->verbs) throw std::runtime_error(where + ": the address is not on an RDMA device");
        const std::string dev = ibv_get_device_name(id->verbs->device);
        if (!rc.device.empty() && dev != rc.device)
            throw std::runtime_error(where + ": the address is on " + dev + ", not on " + rc.device);
        rs->cfg.device = dev;
        if (rc.port && id->port_num != rc.port)
            throw std::runtime_error(where + ": the address is on port " + std::to_string(id->port_num) +
                                     " of " + dev + ", not port " + std::to_string(rc.port));
        rs->cfg.port = id->port_num;
        ibv_port_attr pa{};
        if (ibv_query_port(id->verbs, id->port_num, &pa))
            throw std::runtime_error(where + ": ibv_query_port: " + std::strerror(errno));
        if (rc.qp.gid_index >= 0)
            if (const std::string e = check_gid(id->verbs, id->port_num, rc.qp.gid_index, rc.ip); !e.empty())
                throw std::runtime_error(where + ": " + e);
        if (rc.qp.path_mtu && !mtu_enum(rc.qp.path_mtu))
            throw std::runtime_error(where + ": path MTU " + std::to_string(rc.qp.path_mtu) +
                                     " is not 256, 512, 1024, 2048 or 4096");
        rs->path_mtu = mtu_bytes(pa.active_mtu);
        if (rc.qp.path_mtu) rs->path_mtu = std::min(rs->path_mtu, rc.qp.path_mtu);
        rs->comp.reset(ibv_create_comp_channel(id->verbs));
        if (!rs->comp) throw std::runtime_error(where + ": cannot create a completion channel");
        set_nonblocking(rs->comp->fd);
        set_nonblocking(rs->ch->fd);
        rs->numa = rc.numa >= 0 ? rc.numa : hca_numa_node(id->verbs);
        rs->soft = software_device(id->verbs);
        if (rdma_listen(id, 64)) throw std::runtime_error(where + ": rdma_listen: " + std::strerror(errno));
        job_chunk = std::min(job_chunk, rc.chunk_bytes);
        rails_.push_back(std::move(rs));
    }
    // Every rail announces all of them, so a worker's JOIN on rail 0
    // learns where to connect the others.
    wire::join_ack_body ack{};
    ack.policy = wire::rail_policy::rail;
    ack.n_rails = static_cast<std::uint8_t>(rails_.size());
    ack.chunk_bytes = job_chunk;
    for (unsigned i = 0; i < rails_.size(); ++i) {
        wire::rail_entry& e = ack.rails[i];
        e.ip = rails_[i]->cfg.ip;
        e.udp_port = rails_[i]->cfg.cm_port;
        e.mtu = static_cast<std::uint16_t>(rails_[i]->path_mtu);
        e.chunk_bytes = rails_[i]->cfg.chunk_bytes;
    }
    for (auto& rs : rails_) {
        rs->ack = ack;
        rs->job_chunk = job_chunk;
    }
}

plane::~plane() { stop(); }

void plane::launch() {
    for (auto& rs : rails_) {
        rs->beat_ns.store(stats::coarse_now_ns(), std::memory_order_relaxed); // passes() from now on
        threads_.emplace_back([this, r = rs.get()] {
            r->placement = bind_this_thread(r->cfg.cpu, r->numa);
            r->run(stop_);
        });
    }
}

void plane::stop() {
    stop_.store(true);
    for (std::thread& t : threads_) t.join();
    threads_.clear();
}

std::size_t plane::rail_count() const noexcept { return rails_.size(); }

std::vector<rail_pass> plane::passes() const {
    std::vector<rail_pass> out;
    if (threads_.empty()) return out;
    const std::uint64_t now = stats::coarse_now_ns();
    for (const auto& rs : rails_) {
        const std::uint64_t b = rs->beat_ns.load(std::memory_order_relaxed);
        out.push_back({rs->cfg.name, now > b ? now - b : 0});
    }
    return out;
}
const rail_counters& plane::counters(std::size_t i) const noexcept { return rails_[i]->ctr; }

std::vector<rail_status> plane::status() const {
    std::vector<rail_status> v;
    for (const auto& rs : rails_) {
        rail_status s;
        s.name = rs->cfg.name;
        s.device = rs->cfg.device;
        s.port = rs->cfg.port;
        s.ip = rs->cfg.ip;
        s.cm_port = rs->cfg.cm_port;
        s.numa = rs->numa;
        s.cpu = rs->cfg.cpu;
        s.gid_index = rs->gid_index.load(std::memory_order_relaxed);
        s.gid_index_configured = rs->cfg.qp.gid_index;
        if (const int g = rs->gid_seen.load(std::memory_order_relaxed); g >= 0) {
            s.gid_seen = g & (rail_state::gid_given - 1);
            s.gid_seen_given = g & rail_state::gid_given;
            check_gid(rs->listen->verbs, rs->cfg.port, s.gid_seen, rs->cfg.ip, &s.gid_seen_text);
        }
        s.path_mtu = rs->path_mtu;
        s.chunk_bytes = rs->cfg.chunk_bytes;
        s.traffic_class = rs->cfg.qp.traffic_class;
        s.service_level = rs->cfg.qp.service_level;
        s.tc = rs->cfg.tc;
        s.connections = rs->n_conns.load(std::memory_order_relaxed);
        s.jobs = rs->n_jobs.load(std::memory_order_relaxed);
        s.result_mrs = rs->n_result_mrs.load(std::memory_order_relaxed);
        s.qp = rs->cfg.qp;
        if (const std::uint32_t t = rs->timers_seen.load(std::memory_order_relaxed); t >> 31)
            s.timers_seen = qp_timers{t >> 24 & 0x7f, t >> 16 & 0xff, t >> 8 & 0xff, t & 0xff};
        v.push_back(s);
    }
    return v;
}

void plane::rail_state::answer(request& q) {
    if (q.jobs) return agg::describe_jobs(jobs, cfg.name, "verbs", false, now_ns(), 1e6, *q.jobs);
    if (q.latency) {
        stats::histogram& h = q.worker ? worker_rtt : lat;
        q.latency->merge(h);
        if (q.reset) h.reset();
        return;
    }
    vjob* x = jobs.find(q.abort);
    if (!x) return;
    q.told = static_cast<unsigned>(std::popcount(x->joined));
    bump(ctr.operator_aborts);
    abort_job(*x, wire::error_code::operator_abort, 0, q.text, nullptr);
}

std::string plane::rail_state::ask(request& q, bool running, unsigned wait_ms) {
    if (!running) { // not launched (or stopped): nobody else touches the rail
        answer(q);
        return {};
    }
    answered.store(false, std::memory_order_relaxed);
    asked.store(&q, std::memory_order_release);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    while (!answered.load(std::memory_order_acquire)) {
        if (std::chrono::steady_clock::now() >= until) {
            request* expected = &q;
            // Not taken: withdrawn. Taken: being carried out, done shortly.
            if (asked.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel))
                return "verbs rail " + cfg.name + "'s thread did not answer within " + std::to_string(wait_ms) +
                       " ms (it has not looked at its jobs for " +
                       std::to_string((stats::coarse_now_ns() - beat_ns.load(std::memory_order_relaxed)) / 1000000) +
                       " ms)";
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return {};
}

std::string plane::jobs(int rail, std::vector<agg::job_view>& out, unsigned wait_ms) const {
    const std::lock_guard lk(ask_m_);
    for (std::size_t i = 0; i < rails_.size(); ++i) {
        if (rail >= 0 && i != static_cast<std::size_t>(rail)) continue;
        rail_state::request q;
        std::vector<agg::job_view> mine;
        q.jobs = &mine;
        if (std::string e = rails_[i]->ask(q, !threads_.empty(), wait_ms); !e.empty()) return e;
        for (agg::job_view& v : mine) out.push_back(std::move(v));
    }
    return {};
}

std::string plane::latency(int rail, bool worker, bool reset, stats::histogram& out, unsigned wait_ms) const {
    const std::lock_guard lk(ask_m_);
    for (std::size_t i = 0; i < rails_.size(); ++i) {
        if (rail >= 0 && i != static_cast<std::size_t>(rail)) continue;
        rail_state::request q;
        q.latency = &out;
        q.worker = worker;
        q.reset = reset;
        if (std::string e = rails_[i]->ask(q, !threads_.empty(), wait_ms); !e.empty()) return e;
    }
    return {};
}

std::string plane::abort_job(std::uint32_t id, const std::string& text, std::vector<std::string>& ended_on,
                             unsigned& told, unsigned wait_ms) const {
    const std::lock_guard lk(ask_m_);
    for (const auto& rs : rails_) {
        rail_state::request q;
        q.abort = id;
        q.text = text;
        if (std::string e = rs->ask(q, !threads_.empty(), wait_ms); !e.empty()) return e;
        if (q.told) ended_on.push_back(rs->cfg.name);
        told += q.told;
    }
    return {};
}

std::string plane::set_gid_index(std::size_t rail, int index, std::string& note) {
    rail_state& rs = *rails_.at(rail);
    std::string what;
    if (index >= 0)
        if (std::string e = check_gid(rs.listen->verbs, rs.cfg.port, index, rs.cfg.ip, &what); !e.empty()) return e;
    const int was = rs.gid_index.exchange(index, std::memory_order_relaxed);
    const auto text = [](int i) { return i < 0 ? std::string("automatic (RoCEv2 IPv4)") : "index " + std::to_string(i); };
    const unsigned conns = rs.n_conns.load(std::memory_order_relaxed);
    note = "source GID " + text(index) + (what.empty() ? "" : " (" + what + ")") + " for new connections, " +
           text(was) + " before";
    if (conns) note += "; the " + std::to_string(conns) + " connected keep their QPs'";
    return "";
}

void plane::print_placement(std::FILE* f) const {
    for (const auto& rs : rails_)
        std::fprintf(f,
                     "railgated: verbs rail %s -> %s port %u (%s:%u) -> NUMA node %d -> thread %s; GID %s, path MTU "
                     "%u, chunk %u B, tc %u, sl %u; %s\n",
                     rs->cfg.name.c_str(), rs->cfg.device.c_str(), rs->cfg.port, net::format_ipv4(rs->cfg.ip).c_str(),
                     rs->cfg.cm_port, rs->numa, rs->cfg.cpu >= 0 ? ("cpu " + std::to_string(rs->cfg.cpu)).c_str()
                     : rs->numa >= 0 ? "on the node's cpus" : "unpinned (no NUMA node)",
                     rs->cfg.qp.gid_index >= 0 ? ("index " + std::to_string(rs->cfg.qp.gid_index)).c_str()
                                               : "automatic (RoCEv2 IPv4)",
                     rs->path_mtu, rs->cfg.chunk_bytes, rs->cfg.qp.traffic_class, rs->cfg.qp.service_level,
                     describe_timers(rs->cfg.qp).c_str());
}

void plane::print_stats(std::FILE* f) const {
    for (const auto& rs : rails_) {
        const rail_counters& c = rs->ctr;
        auto v = [](const std::atomic<std::uint64_t>& a) {
            return static_cast<unsigned long long>(a.load(std::memory_order_relaxed));
        };
        std::fprintf(f,
                     "verbs rail %s: connects %llu disconnects %llu rejected %llu joins %llu join_errors %llu leaves "
                     "%llu aborts %llu contributions %llu results %llu qp_errors %llu backlogged %llu eager "
                     "connections %llu contributions %llu results %llu\n",
                     rs->cfg.name.c_str(), v(c.connects), v(c.disconnects), v(c.rejected), v(c.joins),
                     v(c.join_errors), v(c.leaves), v(c.aborts), v(c.contributions), v(c.results), v(c.qp_errors),
                     v(c.backlogged), v(c.eager_conns), v(c.eager_contributions), v(c.eager_results));
        for (unsigned r = 0; r < drop_reason_count; ++r)
            if (const auto n = v(c.drops[r]))
                std::fprintf(f, "  drop %-24s %llu\n", std::string(drop_reason_name(static_cast<drop_reason>(r))).c_str(),
                             n);
    }
}

// ---------------------------------------------------------------- the loop

void plane::rail_state::run(const std::atomic<bool>& stop) {
    // The clock from the thread's start, not the plane's construction.
    looks.look(now_ns());
    unsigned idle = 0;
    while (!stop.load(std::memory_order_relaxed)) {
        bool work = false;
        if (++pass % cm_poll_passes == 0 || (idle && soft)) {
            work |= poll_cm();
            reap();
        }
        for (std::size_t i = 0; i < conns.size(); ++i) work |= poll_conn(*conns[i]);
        if (looks.due(pass, work, now_ns)) expire();
        if (work) {
            idle = 0;
        } else if (lim.spin_passes && ++idle >= lim.spin_passes) {
            sleep();
            idle = 0;
        }
    }
}

// Arms every CQ, looks once more (a completion may have slipped in before
// the arming), then sleeps on the completion and CM channels.
void plane::rail_state::sleep() {
    for (auto& c : conns) ibv_req_notify_cq(c->qp->cq(), 0);
    bool work = false;
    for (std::size_t i = 0; i < conns.size(); ++i) work |= poll_conn(*conns[i]);
    if (!work) {
        pollfd fds[2] = {{comp->fd, POLLIN, 0}, {ch->fd, POLLIN, 0}};
        poll(fds, 2, 100);
        poll_cm();
        reap();
        expire();
    }
    ibv_cq* cq;
    void* ctx;
    while (ibv_get_cq_event(comp.get(), &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
}

bool plane::rail_state::poll_cm() {
    bool any = false;
    rdma_cm_event* e = nullptr;
    while (rdma_get_cm_event(ch.get(), &e) == 0) {
        any = true;
        const rdma_cm_event_type type = e->event;
        rdma_cm_id* id = e->id;
        auto* c = static_cast<conn*>(id->context);
        if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
            on_connect_request(id, e->param.conn);
            c = static_cast<conn*>(id->context);
            rdma_ack_cm_event(e);
            if (!c) rdma_destroy_id(id); // rejected
            continue;
        }
        rdma_ack_cm_event(e);
        if (!c) continue;
        switch (type) {
        case RDMA_CM_EVENT_ESTABLISHED:
            c->st = conn::state::up;
            break;
        case RDMA_CM_EVENT_DISCONNECTED:
        case RDMA_CM_EVENT_CONNECT_ERROR:
        case RDMA_CM_EVENT_UNREACHABLE:
        case RDMA_CM_EVENT_REJECTED:
        case RDMA_CM_EVENT_DEVICE_REMOVAL:
            fail_conn(*c, std::string("connection ") + rdma_event_str(type));
            destroy_conn(*c);
            break;
        default: break;
        }
    }
    return any;
}

void plane::rail_state::on_connect_request(rdma_cm_id* id, const rdma_conn_param& peer) {
    id->context = nullptr;
    if (conns.size() >= lim.max_conns || id->verbs != listen->verbs) {
        rdma_reject(id, nullptr, 0);
        bump(ctr.rejected);
        return;
    }
    auto c = std::make_unique<conn>();
    try {
        ibv_pd* pd = ibv_alloc_pd(id->verbs);
        if (!pd) throw std::runtime_error(std::string("ibv_alloc_pd: ") + std::strerror(errno));
        c->pd.reset(pd, pd_deleter{});
        c->ctl = region_memory((rq_depth + ctl_sends) * ctl_bytes, numa);
        c->ctl_mr.reset(ibv_reg_mr(pd, c->ctl.p, c->ctl.bytes, local_write));
        if (!c->ctl_mr) throw std::runtime_error(std::string("ibv_reg_mr: ") + std::strerror(errno));
        qp_settings s = cfg.qp;
        s.gid_index = gid_index.load(std::memory_order_relaxed);
        s.sq_depth = sq_depth;
        s.rq_depth = rq_depth;
        // Both ends use the smaller path MTU: ours, or the worker's.
        s.path_mtu = path_mtu;
        const cm_hello theirs = decode_cm_private(peer.private_data, peer.private_data_len);
        if (!theirs.path_mtu) throw std::runtime_error("not a railgate worker (no RGV1 connection data)");
        cm_hello ours;
        if (theirs.ll && lim.eager_rings && lim.spin_passes == 0) {
            c->eager.open(pd, numa, ours);
            c->eager.attach(theirs);
        }
        c->qp = std::make_unique<queue_pair>(id, pd, comp.get(), s);
        c->qp->cap_path_mtu(theirs.path_mtu);
        std::string e = c->qp->move_to(IBV_QPS_INIT);
        for (std::size_t i = 0; e.empty() && i < rq_depth; ++i) post_recv(*c, i);
        if (e.empty()) e = c->qp->move_to(IBV_QPS_RTR);
        if (e.empty()) e = c->qp->move_to(IBV_QPS_RTS);
        if (!e.empty()) throw std::runtime_error(e);
        gid_seen.store(c->qp->gid_index() | (s.gid_index >= 0 ? gid_given : 0), std::memory_order_relaxed);
        const qp_timers& t = c->qp->timers();
        if (!(timers_seen.exchange(1u << 31 | t.ack_timeout << 24 | t.retry_count << 16 | t.rnr_retry << 8 |
                                       t.min_rnr_timer,
                                   std::memory_order_relaxed) >> 31) &&
            ack_timeout_us(t.ack_timeout) >= 1e3 * lim.stall_ms)
            // Once per rail: a packet the fabric drops is resent only
            // after the job has been called stalled.
            log::warning("verbs rail %s: its QPs took %s; that ACK timeout is not under the jobs' stall time (%u ms), "
                         "so a packet lost on the fabric would end its job before it is resent: set the rail's "
                         "ack_timeout (14: 67 ms)",
                         cfg.name.c_str(), describe(t).c_str(), lim.stall_ms);
        std::uint8_t priv[cm_private_ll_bytes];
        ours.path_mtu = c->qp->path_mtu();
        rdma_conn_param p{};
        p.private_data = priv;
        p.private_data_len = static_cast<std::uint8_t>(encode_cm_private(ours, priv));
        p.qp_num = c->qp->qp()->qp_num;
        p.rnr_retry_count = s.rnr_retry;
        p.retry_count = s.retry_count;
        if (rdma_accept(id, &p)) throw std::runtime_error(std::string("rdma_accept: ") + std::strerror(errno));
    } catch (const std::exception& ex) {
        log::warning("verbs rail %s: connection refused: %s", cfg.name.c_str(), ex.what());
        c->qp.reset();
        rdma_reject(id, nullptr, 0);
        bump(ctr.rejected);
        return;
    }
    c->id.reset(id);
    c->conn_id = next_conn_id++;
    if (c->eager.on()) bump(ctr.eager_conns);
    if (const sockaddr* pa = rdma_get_peer_addr(id); pa && pa->sa_family == AF_INET)
        c->host = ntohl(reinterpret_cast<const sockaddr_in*>(pa)->sin_addr.s_addr);
    id->context = c.get();
    bump(ctr.connects);
    conns.push_back(std::move(c));
    n_conns.store(static_cast<unsigned>(conns.size()), std::memory_order_relaxed);
}

void plane::rail_state::post_recv(conn& c, std::size_t i) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(c.recv_buf(i)), static_cast<std::uint32_t>(ctl_bytes),
                c.ctl_mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = make_wr_id(wr_kind::recv, i);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_recv(c.qp->qp(), &wr, &bad)) fail_conn(c, std::string("ibv_post_recv: ") + std::strerror(errno));
}

// Sends are accounted (control buffer busy, result memory in flight) when
// queued; send_done releases them when the send completes or is dropped.
void plane::rail_state::post_send(conn& c, const pending_send& s) {
    if (c.st == conn::state::closing) return send_done(c, s.wr_id);
    if (c.sends.full() || !c.backlog.empty()) {
        bump(ctr.backlogged);
        c.backlog.push_back(s);
        return;
    }
    post_now(c, s);
}

void plane::rail_state::post_now(conn& c, const pending_send& s) {
    ibv_sge sge{s.laddr, s.len, s.lkey};
    ibv_send_wr wr{};
    wr.wr_id = make_wr_id(wr_kind::send, c.sends.next_seq());
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = s.op;
    wr.send_flags = (c.sends.signal_next(kind_of(s.wr_id) == wr_kind::ctl_send) ? IBV_SEND_SIGNALED : 0) |
                    (s.len <= c.qp->max_inline() ? IBV_SEND_INLINE : 0);
    if (s.op != IBV_WR_SEND) {
        wr.imm_data = htonl(s.imm);
        wr.wr.rdma.remote_addr = s.raddr;
        wr.wr.rdma.rkey = s.rkey;
    }
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(c.qp->qp(), &wr, &bad)) {
        send_done(c, s.wr_id);
        fail_conn(c, std::string("ibv_post_send: ") + std::strerror(errno));
        return;
    }
    c.sends.posted(s.wr_id);
}

void plane::rail_state::send_done(conn& c, std::uint64_t wr_id) {
    const std::uint64_t idx = index_of(wr_id);
    if (kind_of(wr_id) == wr_kind::ctl_send) {
        --c.ctl_busy;
    } else if (kind_of(wr_id) == wr_kind::data) {
        vjob& x = job_at(static_cast<int>(idx));
        --x.x.outstanding;
        maybe_free(x);
    }
}

void plane::rail_state::flush_backlog(conn& c) {
    while (!c.backlog.empty() && !c.sends.full() && c.st != conn::state::closing) {
        const pending_send s = c.backlog.front();
        c.backlog.pop_front();
        post_now(c, s);
    }
}

int plane::rail_state::poll_cq(conn& c) {
    ibv_wc wc[16];
    const int n = std::max(ibv_poll_cq(c.qp->cq(), 16, wc), 0);
    for (int i = 0; i < n; ++i) handle_wc(c, wc[i]);
    if (n > 0 && !c.backlog.empty()) flush_backlog(c);
    return n;
}

bool plane::rail_state::poll_conn(conn& c) {
    int n = poll_cq(c);
    if (!c.eager.on()) return n > 0;
    // A ring entry lands after all the worker posted before it on the QP,
    // whose completions are then in the CQ, but perhaps not yet when it was
    // polled above, or past its first 16: an entry that finds the
    // connection without its job or its REGION (a worker's REGION, then at
    // once the barrier's 4-byte chunk) has the CQ read to its end first.
    // Dropped, the chunk would never come again over RC, and the rank would
    // be judged stalled. Bounded: the completions before the entry fit in
    // the CQ, and a worker flooding SENDs cannot hold the loop here.
    if ((c.job < 0 || !c.have_region) && c.st != conn::state::closing && c.eager.pending())
        for (unsigned k = 0, m = 16; m == 16 && k < (rq_depth + sq_depth) / 16 + 1 && c.st != conn::state::closing; ++k)
            n += static_cast<int>(m = static_cast<unsigned>(poll_cq(c)));
    return poll_ring(c) || n > 0;
}

// The worker's eager entries, in order: a few a pass (as many as a CQ
// poll takes), each handled as a WRITE_WITH_IMM of its payload would be.
bool plane::rail_state::poll_ring(conn& c) {
    std::uint8_t payload[ll::max_payload];
    unsigned k = 0;
    for (; k < 16 && c.st != conn::state::closing; ++k) {
        ll::entry en;
        const ll::status st = c.eager.take(en, payload);
        if (st == ll::status::empty) break;
        bump(ctr.eager_contributions);
        if (st == ll::status::bad) {
            bump(ctr.contributions);
            ctr.drop(drop_reason::verbs_length);
            continue;
        }
        on_chunk(c, en.imm, en.len, now_ns(), payload);
    }
    return k > 0;
}

void plane::rail_state::handle_wc(conn& c, const ibv_wc& wc) {
    const wr_kind kind = kind_of(wc.wr_id);
    const std::uint64_t idx = index_of(wc.wr_id);
    // Send-side accounting holds whatever the status (flushed WRs included).
    if (kind == wr_kind::send) c.sends.complete(idx, [&](std::uint64_t tag) { send_done(c, tag); });
    if (wc.status != IBV_WC_SUCCESS) {
        if (c.st != conn::state::closing) {
            bump(ctr.qp_errors);
            // Told to its job's ranks too, but a connection without a job
            // (or alone in its one) has nobody to tell: a WRITE outside its
            // own memory shows here, and in qp_errors.
            log::warning("verbs rail %s: the QP of the worker at %s failed: %s", cfg.name.c_str(),
                         net::format_ipv4(c.host).c_str(), describe(wc).c_str());
            fail_conn(c, "completion error: " + describe(wc));
        }
        return;
    }
    if (kind != wr_kind::recv || c.st == conn::state::closing) return;
    if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) on_chunk(c, ntohl(wc.imm_data), wc.byte_len, now_ns());
    else on_control(c, c.recv_buf(idx), wc.byte_len);
    if (c.st != conn::state::closing) post_recv(c, idx);
}

// A broken or disconnected QP: its job is aborted for everyone, the
// connection is disconnected and destroyed once the CM says so (or soon).
void plane::rail_state::fail_conn(conn& c, const std::string& why) {
    if (c.st == conn::state::closing) return;
    c.st = conn::state::closing;
    c.since_ns = now_ns();
    bump(ctr.disconnects);
    if (c.job >= 0) {
        vjob& x = job_at(c.job);
        const unsigned rank = c.rank;
        const std::string text = "rank " + std::to_string(rank) + " failed on rail " + cfg.name + ": " + why;
        bump(ctr.aborts);
        detach(c);
        abort_job(x, wire::error_code::rank_failed, rank, text, &c);
    }
    for (const pending_send& s : c.backlog) send_done(c, s.wr_id);
    c.backlog.clear();
    rdma_disconnect(c.id.get());
}

void plane::rail_state::destroy_conn(conn& c) {
    if (c.job >= 0) detach(c);
    // Let the QP's in-flight sends flush (their completions release what
    // they reference), briefly; then account whatever did not come back.
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    ibv_modify_qp(c.qp->qp(), &a, IBV_QP_STATE);
    c.st = conn::state::closing;
    const std::uint64_t until = now_ns() + 50'000'000;
    while (c.sends.in_flight() > 0 && now_ns() < until) {
        ibv_wc wc[16];
        const int n = ibv_poll_cq(c.qp->cq(), 16, wc);
        for (int i = 0; i < n; ++i) handle_wc(c, wc[i]);
    }
    c.sends.drop_all([&](std::uint64_t id) { send_done(c, id); });
    const std::shared_ptr<ibv_pd> pd = c.pd;
    auto it = std::find_if(conns.begin(), conns.end(), [&](const auto& p) { return p.get() == &c; });
    if (it != conns.end()) {
        std::swap(*it, conns.back());
        conns.pop_back(); // its QP destroyed
        // Then the registrations of results in its PD, in the job it was
        // in and in any it left that lives on (a rank that LEAVEs and
        // another connection that takes its place, over and over, kept one
        // each until the job ended), and with the last of them the PD.
        for (vjob& x : jobs.all()) x.x.forget_pd(pd);
        count_result_mrs();
    }
    n_conns.store(static_cast<unsigned>(conns.size()), std::memory_order_relaxed);
}

void plane::rail_state::reap() {
    // No clock read unless a connection has a deadline running (a software
    // device reaps on every idle pass).
    if (std::none_of(conns.begin(), conns.end(),
                     [](const auto& c) { return c->st == conn::state::closing || !c->ever_joined; }))
        return;
    const std::uint64_t now = now_ns();
    for (std::size_t i = conns.size(); i-- > 0;) {
        conn& c = *conns[i];
        if (c.st == conn::state::closing && now - c.since_ns > close_deadline_ns) {
            destroy_conn(c);
        } else if (c.st != conn::state::closing && !c.ever_joined && now - c.since_ns > join_deadline_ns) {
            fail_conn(c, "no JOIN");
        }
    }
}

// ---------------------------------------------------------------- protocol

void plane::rail_state::send_ctl(conn& c, const wire::header& h, const void* body, std::size_t len) {
    if (c.ctl_busy >= ctl_sends || wire::header_bytes + len > ctl_bytes) {
        ctr.drop(drop_reason::tx_full);
        return;
    }
    const unsigned i = c.ctl_next;
    c.ctl_next = (c.ctl_next + 1) % ctl_sends;
    ++c.ctl_busy;
    std::uint8_t* b = c.send_buf(i);
    wire::encode_header(h, b);
    if (len) std::memcpy(b + wire::header_bytes, body, len);
    post_send(c, {make_wr_id(wr_kind::ctl_send, i), IBV_WR_SEND, reinterpret_cast<std::uintptr_t>(b),
                  static_cast<std::uint32_t>(wire::header_bytes + len), c.ctl_mr->lkey, 0, 0, 0});
}

void plane::rail_state::send_error(conn& c, const wire::header& req, wire::error_code code, const std::string& text,
                                   std::uint64_t detail, std::uint32_t gen) {
    const std::string_view t = wire::error_text(text, code);
    send_ctl(c, wire::error_header(req, code, detail, gen), t.data(), t.size());
}

// A control message on c is its rank's when c joined the job as that rank:
// a connection speaks only for itself.
void plane::rail_state::on_control(conn& c, const std::uint8_t* msg, std::size_t len) {
    wire::header h;
    std::span<const std::uint8_t> body;
    const drop_reason r = wire::parse_worker_message(msg, len, h, body);
    if (r == drop_reason::rg_version && msg[1] == static_cast<std::uint8_t>(wire::msg_type::join)) {
        // A worker of another protocol version: told in this one (as a
        // UDP rail tells it), so that it can name both.
        char t[wire::max_error_text];
        wire::foreign_join_text(t, sizeof t, cfg.name.c_str(), msg[0]);
        wire::header q;
        q.type = wire::msg_type::join;
        q.world_size = 1;
        send_error(c, q, wire::error_code::protocol_version, t, msg[0]);
    }
    if (r != drop_reason::none) return ctr.drop(r);
    if (h.type == wire::msg_type::join) return on_join(c, h, body);
    if (h.type == wire::msg_type::ping && (c.job < 0 || job_at(c.job).instance != h.gen)) {
        send_error(c, h, wire::error_code::unknown_job,
                   "railgated has no job " + std::to_string(h.job_id) + " on this connection (rail " + cfg.name + ")", 0,
                   h.gen);
        return ctr.drop(drop_reason::unknown_job);
    }
    if (c.job < 0 && h.type == wire::msg_type::leave && c.left.any && c.left.id == h.job_id &&
        c.left.rank == h.rank && c.left.gen == h.gen && wire::token_equal(c.left.token, h.job_token)) {
        // Leaving is idempotent: the worker asked again before the
        // LEAVE_ACK reached it (a reliable connection loses nothing, but a
        // busy host can hold the answer past the worker's wait).
        bump(ctr.leaves_again);
        return ack_leave(c, h);
    }
    if (c.job < 0 || job_at(c.job).id != h.job_id || c.rank != h.rank)
        return ctr.drop(h.type == wire::msg_type::region ? drop_reason::rank_not_joined : drop_reason::leave_unknown);
    vjob& x = job_at(c.job);
    if (const drop_reason why = jobs.check_sender(x, h, c.conn_id); why != drop_reason::none) return ctr.drop(why);
    vtable::heard(x, h.rank, now_ns());
    switch (h.type) {
    case wire::msg_type::region: return on_region(c, h, body);
    case wire::msg_type::leave:
        if (!vtable::names(x, h)) return ctr.drop(drop_reason::leave_unknown);
        return on_leave(c, h);
    case wire::msg_type::ping: return on_ping(c, h);
    case wire::msg_type::error: {
        if (!vtable::names(x, h)) return ctr.drop(drop_reason::leave_unknown);
        bump(ctr.aborts);
        std::string why;
        for (std::uint8_t ch : body) why += ch >= 0x20 && ch < 0x7f ? static_cast<char>(ch) : '?';
        const auto code = wire::relayed_abort(static_cast<wire::error_code>(h.aux));
        detach(c);
        abort_job(x, code, code == wire::error_code::aborted ? h.rank : h.offset,
                  "rank " + std::to_string(h.rank) + " aborted the job" + (why.empty() ? "" : ": " + why), &c);
        return;
    }
    case wire::msg_type::rtt_report: {
        // The worker's chunk round trips, a bucket and its count an entry.
        // (check_sender took the member; a report carries no instance.)
        if (!wire::take_rtt_entries(body, h.count, stats::histogram::bucket_count,
                                    [&](std::uint16_t b, std::uint32_t n) { worker_rtt.add_to_bucket(b, n); }))
            return ctr.drop(drop_reason::rtt_bucket);
        bump(ctr.rtt_reports);
        return;
    }
    default: return ctr.drop(drop_reason::rg_type); // chunks travel as WRITE_WITH_IMM only
    }
}

void plane::rail_state::on_join(conn& c, const wire::header& h, std::span<const std::uint8_t> body) {
    // A JOIN taken is answered with a JOIN_ACK and a REGION, both or
    // neither: a worker with the JOIN_ACK alone has joined, but has nowhere
    // to WRITE its chunks (over verbs it sends nothing until it has the
    // REGION) and would sit silent until the job ended as stalled. Control
    // buffers come back as their sends complete, which a burst of queued
    // JOINs (a worker sends one every 100 ms until answered) outruns:
    // without two free, the JOIN is dropped (tx_full) and answered when it
    // comes again.
    const wire::join_body b = wire::decode_join_body(body.data());
    // Under a slow peer or a paused railgated, a worker's repeats queue
    // behind its first JOIN. Each was answered in full before, and a dozen
    // of them ran the control buffers out (tx_full drops, as in CI's TCG
    // guest after its rail thread was away): one answer is enough on RC.
    const bool answered = c.job >= 0 && c.answered_nonce == b.nonce && c.rank == h.rank &&
                          job_at(c.job).id == h.job_id && job_at(c.job).instance == c.answered_instance;
    if (!answered && c.ctl_busy + 2 > ctl_sends) return ctr.drop(drop_reason::tx_full);
    const unsigned pool = b.pool_size ? b.pool_size : std::min(lim.default_pool, wire::verbs_max_pool);
    auto refuse = [&](wire::error_code code, drop_reason why, const std::string& text, std::uint64_t detail = 0) {
        bump(ctr.join_errors);
        ctr.drop(why);
        send_error(c, h, code, text, detail, static_cast<std::uint32_t>(b.nonce));
    };
    if (pool > std::min(lim.max_pool, wire::verbs_max_pool))
        return refuse(wire::error_code::bad_request, drop_reason::join_refused,
                      "pool " + std::to_string(pool) + " above this rail's " +
                          std::to_string(std::min(lim.max_pool, wire::verbs_max_pool)));
    // A JOIN after a worker's first rail names the job's shape there (its
    // chunk, policy and rails: wire::shape_word). Every verbs job has the
    // plane's: its chunk, rail striping, and the rails it listed, fixed at
    // start. A word that disagrees is a worker whose first rail was not
    // this plane's (its chunks would land in other slots than its peers').
    if (h.aux && !wire::shape_valid(h.aux)) {
        char t[160];
        std::snprintf(t, sizeof t, "JOIN names a malformed job shape 0x%08x (a chunk of 64..%u bytes in steps of 64, at most %u rails)",
                      h.aux, wire::max_chunk_bytes, wire::max_rails);
        return refuse(wire::error_code::bad_request, drop_reason::join_refused, t);
    }
    if (const unsigned rails = wire::shape_rails(h.aux);
        h.aux && (wire::shape_chunk(h.aux) != job_chunk || wire::shape_lag(h.aux) || (rails && rails != ack.n_rails))) {
        char t[240];
        std::snprintf(t, sizeof t,
                      "job %u runs %u B chunks under policy rail over %u rails on verbs rail %s; its first rail gave "
                      "this rank %u B under %s over %u rails: the job cannot run here",
                      h.job_id, job_chunk, ack.n_rails, cfg.name.c_str(), wire::shape_chunk(h.aux),
                      wire::policy_name(wire::shape_lag(h.aux) ? wire::rail_policy::lag : wire::rail_policy::rail), rails);
        return refuse(wire::error_code::shape_mismatch, drop_reason::join_refused, t,
                      wire::shape_word(job_chunk, false, ack.n_rails));
    }
    if (c.job >= 0 && (job_at(c.job).id != h.job_id || c.rank != h.rank))
        return refuse(wire::error_code::bad_request, drop_reason::join_refused,
                      "this connection has joined as another job or rank");
    const std::size_t region_bytes = std::size_t{pool} * job_chunk;
    const agg::peer who{c.conn_id, c.host, b.nonce};
    const std::uint64_t now = now_ns();
    agg::job_shape shape;
    shape.chunk_elems = job_chunk / static_cast<std::uint32_t>(wire::dtype_size(h.dt));
    shape.rails = static_cast<std::uint8_t>(ack.n_rails); // every verbs job spans the plane's rails (job list shows it)
    // A job's result memory is mapped before it is admitted: a JOIN that
    // cannot get it is refused and leaves nothing behind.
    region_memory results;
    std::string no_memory;
    auto admit = [&](std::uint16_t, std::uint16_t, wire::dtype) {
        try {
            results = region_memory(region_bytes, numa);
        } catch (const std::exception& ex) {
            no_memory = ex.what();
        }
        return no_memory.empty();
    };
    agg::join_result jr = jobs.join(h, b, static_cast<std::uint16_t>(pool), who, now, shape, 0, admit);
    if (jr.st == agg::join_status::takeover) {
        bump(ctr.takeovers);
        if (jr.err == wire::error_code::op_mismatch)
            abort_job(vtable::as(jr.j), wire::error_code::op_mismatch, b.op,
                      "rank " + std::to_string(h.rank) + " of job " + std::to_string(h.job_id) + " is at operation " +
                          std::to_string(b.op) + ", one behind the ranks joined (it lost that operation's result): "
                          "the job restarts at operation " + std::to_string(b.op),
                      &c);
        else
            abort_job(vtable::as(jr.j), wire::error_code::rank_failed, h.rank,
                      "rank " + std::to_string(h.rank) + " re-joined job " + std::to_string(h.job_id) + " on rail " +
                          cfg.name + " as a new process; the job restarts",
                      &c);
        jr = jobs.join(h, b, static_cast<std::uint16_t>(pool), who, now, shape, 0, admit);
    }
    if (jr.st == agg::join_status::clash) {
        // Two live connections claim the rank before the job has completed
        // a chunk: the same id and token started twice. Both are told.
        const std::string text = "two connections claim rank " + std::to_string(h.rank) + " of job " +
                                 std::to_string(h.job_id) + " on rail " + cfg.name +
                                 " before it started: the same job id and token run twice? the job ends; give each "
                                 "run its own token";
        abort_job(vtable::as(jr.j), wire::error_code::rank_claimed, h.rank, text, nullptr);
        return refuse(jr.err, drop_reason::join_refused, text, h.rank);
    }
    if (jr.st != agg::join_status::joined && jr.st != agg::join_status::again) {
        std::string text(wire::error_name(jr.err));
        if (jr.err == wire::error_code::no_buffers && !no_memory.empty()) text = no_memory;
        if (jr.err == wire::error_code::rank_taken)
            text = "rank " + std::to_string(h.rank) + " of job " + std::to_string(h.job_id) +
                   " is joined on another connection (heard " + std::to_string(jr.detail / 1000000) + " ms ago)";
        if (jr.err == wire::error_code::op_mismatch)
            text = "job " + std::to_string(h.job_id) + "'s ranks joined at operation " + std::to_string(jr.detail) +
                   "; this rank is at " + std::to_string(b.op) + ": they cannot be summed together";
        if (jr.err == wire::error_code::rank_claimed)
            text = "job " + std::to_string(h.job_id) + " with this token ended " + std::to_string(jr.detail / 1000000) +
                   " ms ago because two connections claimed one rank (the same id and token run twice?): give each "
                   "run its own token";
        if (jr.err == wire::error_code::job_in_use)
            text = "job " + std::to_string(h.job_id) + " is in use by another job (its token differs): choose another job id";
        return refuse(jr.err, jr.err == wire::error_code::job_table_full ? drop_reason::job_table_full
                                                                          : drop_reason::join_refused,
                      text, jr.detail);
    }
    vjob& x = vtable::as(jr.j);
    if (jr.created) {
        x.x.results = std::move(results);
        n_jobs.fetch_add(1, std::memory_order_relaxed);
    }
    if (c.job < 0) {
        if (c.contrib.bytes != region_bytes) {
            c.contrib_mr.reset();
            try {
                c.contrib = region_memory(region_bytes, numa);
            } catch (const std::exception& ex) {
                c.contrib = {};
            }
            if (c.contrib.p)
                c.contrib_mr.reset(ibv_reg_mr(c.pd.get(), c.contrib.p, region_bytes,
                                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
        }
        if (!c.contrib_mr || !x.x.lkey_in(c.pd, c.results_lkey)) {
            jobs.leave(x, h.rank, [](unsigned, unsigned) {});
            if (x.joined == 0) release_job(x);
            return refuse(wire::error_code::no_buffers, drop_reason::join_refused,
                          c.contrib_mr ? "cannot register result memory" : "cannot register contribution memory");
        }
        count_result_mrs();
        c.job = static_cast<int>(jobs.index_of(x));
        c.rank = h.rank;
        c.have_region = false;
        c.ever_joined = true;
        x.x.members[h.rank] = &c;
        bump(ctr.joins);
    }
    if (answered && jr.st == agg::join_status::again) {
        bump(ctr.joins_again); // heard (jobs.join), already answered
        return;
    }
    // JOIN_ACK then REGION (again for a new nonce: a worker's new join,
    // or the same rank in the job's next incarnation).
    wire::join_ack_body ab = ack;
    ab.pool_size = x.pool;
    ab.stall_ms = static_cast<std::uint16_t>(std::min(lim.stall_ms, 65535u));
    ab.excluded_rails = x.excluded;
    std::uint8_t buf[wire::join_ack_fixed_bytes + wire::max_rails * wire::rail_entry_bytes];
    const std::size_t n = wire::encode_join_ack_body(ab, buf);
    wire::header a = h;
    a.type = wire::msg_type::join_ack;
    a.flags = 0;
    a.gen = x.instance;
    a.aux = index;
    send_ctl(c, a, buf, n);
    a.type = wire::msg_type::region;
    a.aux = 0;
    std::uint8_t rb[wire::region_body_bytes];
    wire::encode_region_body({reinterpret_cast<std::uintptr_t>(c.contrib.p), c.contrib_mr->rkey,
                              static_cast<std::uint32_t>(region_bytes)},
                             rb);
    send_ctl(c, a, rb, sizeof rb);
    c.answered_nonce = b.nonce;
    c.answered_instance = x.instance;
}

void plane::rail_state::on_region(conn& c, const wire::header& h, std::span<const std::uint8_t> body) {
    const wire::region_body rb = wire::decode_region_body(body.data());
    if (rb.bytes < std::uint64_t{job_at(c.job).pool} * job_chunk) {
        send_error(c, h, wire::error_code::bad_request, "REGION smaller than pool * chunk");
        return ctr.drop(drop_reason::region_small);
    }
    c.peer = rb;
    c.have_region = true;
}

void plane::rail_state::on_leave(conn& c, const wire::header& h) {
    c.left = {true, h.job_id, h.gen, h.job_token, h.rank};
    detach(c);
    bump(ctr.leaves);
    ack_leave(c, h);
}

void plane::rail_state::ack_leave(conn& c, const wire::header& h) {
    wire::header a = h;
    a.type = wire::msg_type::leave_ack;
    a.flags = 0;
    a.count = 0;
    send_ctl(c, a, nullptr, 0);
}

void plane::rail_state::on_ping(conn& c, const wire::header& h) {
    wire::header a = h;
    a.type = wire::msg_type::pong;
    a.flags = 0;
    a.count = 0;
    a.aux = 0;
    bump(ctr.pongs);
    send_ctl(c, a, nullptr, 0);
}

// The rank leaves its job: its partial contributions are discarded (their
// memory goes with the connection), and the job is freed with its last rank.
void plane::rail_state::detach(conn& c) {
    vjob& x = job_at(c.job);
    x.x.members[c.rank] = nullptr;
    const bool last = jobs.leave(x, c.rank, [](unsigned, unsigned) {});
    c.job = -1;
    c.have_region = false;
    if (last) release_job(x);
}

// Ends the job for everyone still in it (but `skip`), telling them why.
void plane::rail_state::abort_job(vjob& x, wire::error_code code, std::uint64_t detail, const std::string& why,
                                  const conn* skip) {
    if (x.st != agg::job_state::active) return;
    log::notice("verbs rail %s: job %u ends: %s", cfg.name.c_str(), x.id, why.c_str());
    for (unsigned r = 0; r < x.world; ++r) {
        conn* m = x.x.members[r];
        if (!m) continue;
        if (m != skip) {
            wire::header h;
            h.job_id = x.id;
            h.job_token = x.token;
            h.rank = static_cast<std::uint16_t>(r);
            h.world_size = x.world;
            h.dt = x.dt;
            send_error(*m, h, code, why, detail, x.instance);
        }
        m->job = -1;
        m->have_region = false;
        x.x.members[r] = nullptr;
    }
    release_job(x);
}

void plane::rail_state::release_job(vjob& x) {
    if (x.st != agg::job_state::active) return;
    jobs.end(x, true);
    n_jobs.fetch_sub(1, std::memory_order_relaxed);
    maybe_free(x);
}

// A released job's result memory is deregistered once no WRITE from it is
// in flight on any QP; then its entry is free for another job.
void plane::rail_state::maybe_free(vjob& x) {
    if (x.st != agg::job_state::draining || x.x.outstanding) return;
    x.x.free_results();
    count_result_mrs();
    jobs.reclaim(x);
}

// The lifecycle's clock: jobs that stalled, did not assemble or went idle.
void plane::rail_state::expire() {
    // Every pass_clock::tick_ns, 10 ms (the coarse clock: a tick late at most).
    const std::uint64_t t = now_ns();
    // Looked at every 256 passes, 10 ms after the last look on a pass with
    // work, and after each sleep (100 ms at most): a gap of 250 ms or more
    // is time the thread did not run, and what the ranks sent meanwhile
    // waits in the queues. The jobs' clocks skip it, so that nobody is
    // judged stalled for railgated's own absence (pass_clock.hpp).
    if (const std::uint64_t gap = looks.look(t)) [[unlikely]] {
        jobs.absent(gap, t);
        bump(ctr.absences);
    }
    beat_ns.store(t, std::memory_order_relaxed);
    if (request* q = asked.exchange(nullptr, std::memory_order_acquire)) [[unlikely]] {
        answer(*q);
        answered.store(true, std::memory_order_release);
    }
    if (t < next_expire_ns) return;
    next_expire_ns = t + pass_clock::tick_ns;
    jobs.expire(t, [&](vjob& x, const agg::end_event& e) {
        std::string who;
        for (unsigned r = 0; r < 64; ++r)
            if (e.missing >> r & 1) who += (who.empty() ? "" : ",") + std::to_string(r);
        const std::string ms = std::to_string(e.waited / 1000000);
        switch (e.why) {
        case agg::end_reason::stalled:
            bump(ctr.stalls);
            return abort_job(x, wire::error_code::rank_failed, static_cast<std::uint64_t>(std::countr_zero(e.missing)),
                             "rank" + std::string(std::popcount(e.missing) > 1 ? "s " : " ") + who +
                                 " sent nothing to slot " + std::to_string(e.slot) + " of job " + std::to_string(x.id) +
                                 " on rail " + cfg.name + " for " + ms +
                                 " ms while the other ranks did (stopped, dead or cut off)",
                             nullptr);
        case agg::end_reason::assemble_timeout:
            bump(ctr.expirations);
            return abort_job(x, wire::error_code::expired, 0,
                             "job " + std::to_string(x.id) + " expired on rail " + cfg.name + ": rank(s) " + who +
                                 " did not join within " + ms + " ms",
                             nullptr);
        case agg::end_reason::idle_timeout:
            bump(ctr.expirations);
            return abort_job(x, wire::error_code::expired, 0,
                             "job " + std::to_string(x.id) + " expired on rail " + cfg.name + ": no rank spoke for " + ms +
                                 " ms",
                             nullptr);
        }
    });
}

// `eager`: the payload of a ring entry, copied where a WRITE would have put
// it once the chunk is accepted (a refused one overwrites nothing).
void plane::rail_state::on_chunk(conn& c, std::uint32_t imm, std::uint32_t len, std::uint64_t now, const void* eager) {
    bump(ctr.contributions);
    if (c.job < 0) return ctr.drop(drop_reason::rank_not_joined);
    vjob& x = job_at(c.job);
    const unsigned slot = wire::verbs_imm_slot(imm);
    if (slot >= x.pool) return ctr.drop(drop_reason::slot_range);
    if (!c.have_region) return ctr.drop(drop_reason::region_missing);
    agg::slot& s = x.slots[slot];
    if (wire::verbs_imm_gen(imm) != (s.gen & 0xffffu)) return ctr.drop(drop_reason::bad_generation);
    const std::size_t esize = wire::dtype_size(x.dt);
    if (len == 0 || len % esize || len > job_chunk) return ctr.drop(drop_reason::verbs_length);
    if (s.bitmap >> c.rank & 1) return ctr.drop(drop_reason::duplicate);
    if (s.bitmap != 0 && s.count != len) return ctr.drop(drop_reason::chunk_mismatch);
    if (s.bitmap == 0) s.count = len;
    if (eager) std::memcpy(static_cast<std::uint8_t*>(c.contrib.p) + std::size_t{slot} * job_chunk, eager, len);
    vtable::heard(x, c.rank, now);
    if (s.bitmap == 0) x.x.first_ns[slot] = stats::tsc_now_ns();
    if (vtable::mark(x, s, c.rank, now)) complete_slot(x, slot);
}

// All W contributions are in: reduce them in rank order into the slot's
// result buffer, then WRITE it to every rank's region.
void plane::rail_state::complete_slot(vjob& x, unsigned slot) {
    agg::slot& s = x.slots[slot];
    const std::size_t off = std::size_t{slot} * job_chunk;
    const void* src[wire::max_world];
    for (unsigned r = 0; r < x.world; ++r) src[r] = static_cast<const std::uint8_t*>(x.x.members[r]->contrib.p) + off;
    auto* dst = static_cast<std::uint8_t*>(x.x.results.p) + off;
    const std::uint32_t bytes = s.count;
    const std::size_t count = bytes / wire::dtype_size(x.dt);
    if (lim.eng) {
        // Above the engine's threshold the block is split over the arena.
        if (bytes >= lim.eng->threshold_bytes()) bump(ctr.engine_reductions);
        lim.eng->reduce(*k, x.dt, dst, src, x.world, count, numa);
    } else {
        (*k)[x.dt](dst, src, x.world, count);
    }
    const std::uint32_t imm = wire::verbs_imm(static_cast<std::uint16_t>(slot), s.gen);
    vtable::completed(x, s);
    bump(ctr.results);
    // The TSC of the thread's CPU (10 ns a read, where a guest's clock
    // source costs 0.7 us); the thread may have moved between the two
    // reads, onto a CPU whose TSC is behind (a guest's, unsynchronized).
    const std::uint64_t t = stats::tsc_now_ns();
    lat.record(t > x.x.first_ns[slot] ? t - x.x.first_ns[slot] : 0);
    const unsigned j = jobs.index_of(x);
    for (unsigned r = 0; r < x.world; ++r) {
        conn& m = *x.x.members[r];
        if (m.eager.on() && bytes <= ll::max_payload) {
            const eager_rings::staged e = m.eager.stage(imm, dst, bytes);
            m.eager.sent(); // post_send posts or backlogs: never refuses
            bump(ctr.eager_results);
            post_send(m, {make_wr_id(wr_kind::ll, 0), IBV_WR_RDMA_WRITE, reinterpret_cast<std::uintptr_t>(e.words),
                          e.bytes, m.eager.out_mr->lkey, e.raddr, m.eager.peer_rkey, 0});
            continue;
        }
        ++x.x.outstanding;
        post_send(m, {make_wr_id(wr_kind::data, j), IBV_WR_RDMA_WRITE_WITH_IMM, reinterpret_cast<std::uintptr_t>(dst),
                      bytes, m.results_lkey, m.peer.addr + off, m.peer.rkey, imm});
    }
}

} // namespace railgate::verbs
