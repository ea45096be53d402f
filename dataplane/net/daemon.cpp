#include "dataplane/net/daemon.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <sched.h>
#include <net/if.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <new>
#include <array>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <stdexcept>

#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_ring.h>
#include <rte_errno.h>

#include "dataplane/agg/aggregator.hpp"
#include "dataplane/bpf/xdp_steer.hpp"
#include "dataplane/engine/placement.hpp"
#include "dataplane/net/eal.hpp"
#include "dataplane/net/fib.hpp"
#include "dataplane/net/gateway.hpp"
#include "dataplane/net/rail_state.hpp"
#include "dataplane/net/topology.hpp"
#include "dataplane/proto/frame.hpp"
#include "dataplane/proto/parse.hpp"
#include "dataplane/reduce/reduce.hpp"

namespace railgate::net {
using namespace detail;
namespace {

// A request from the control plane to one lcore, run between bursts.
struct lcore_command {
    enum class kind : std::uint8_t { snapshot, adopt, port_mtu, attach, detach, shaping, routes } k = kind::snapshot;
    int rail = -1;                      // rail index; -1: every rail of the lcore
    // snapshot
    std::optional<std::uint32_t> job;
    bool worker = false;                // the workers' round trips instead of aggregation
    int tc = -1;                        // a traffic class's wait in the scheduler instead
    bool reset = false;
    stats::histogram* out = nullptr;    // merged into
    // adopt: what JOIN_ACKs advertise and new jobs use from now on
    wire::join_ack_body ack{};
    std::uint32_t job_chunk_bytes = 0;
    wire::rail_policy policy = wire::rail_policy::rail;
    std::array<std::int8_t, wire::max_rails * 2> stripe{}; // by rail index; -1: not advertised
    // port_mtu
    std::uint16_t mtu = 0;
    // shaping
    std::uint64_t rate_bps = 0, burst_bytes = 0;
    std::array<qos::tc_config, qos::tc_count> tcs{};
    // routes: the table from now on (null: no gateway)
    const fib* routes = nullptr;
    std::string err;                    // filled by the lcore
};

// Resets m to hold one UDP datagram of msg_len bytes to `dst`; returns the
// message area or nullptr when the buffer is too small.
std::uint8_t* reuse_as_reply(rail_state& rs, rte_mbuf* m, const frame::endpoint& dst,
                             std::size_t msg_len) noexcept {
    const std::size_t len = frame::udp_frame_overhead + msg_len;
    if (m->buf_len < RTE_PKTMBUF_HEADROOM + len) return nullptr;
    if (m->nb_segs > 1) {
        rte_pktmbuf_free(m->next);
        m->next = nullptr;
        m->nb_segs = 1;
    }
    m->data_off = RTE_PKTMBUF_HEADROOM;
    m->data_len = static_cast<std::uint16_t>(len);
    m->pkt_len = static_cast<std::uint32_t>(len);
    std::uint8_t* p = rte_pktmbuf_mtod(m, std::uint8_t*);
    frame::write_udp_headers(p, rs.s.self, dst, msg_len);
    return p + frame::udp_frame_overhead;
}

void send_error(rail_state& rs, rte_mbuf* m, const frame::endpoint& dst, const wire::header& req,
                wire::error_code code) noexcept {
    const std::string_view text = wire::error_name(code);
    std::uint8_t* msg = reuse_as_reply(rs, m, dst, wire::header_bytes + text.size());
    if (!msg) return free_drop(rs, m, drop_reason::no_mbuf);
    wire::header h = req;
    h.type = wire::msg_type::error;
    h.flags = 0;
    h.count = 0;
    h.aux = static_cast<std::uint32_t>(code);
    wire::encode_header(h, msg);
    std::memcpy(msg + wire::header_bytes, text.data(), text.size());
    queue_tx(rs, m);
}

void handle_join(rail_state& rs, rte_mbuf* m, const wire::header& h, std::span<const std::uint8_t> body,
                 const frame::endpoint& from) noexcept {
    if (rs.closing) return free_drop(rs, m, drop_reason::join_refused);
    const wire::join_body b = wire::decode_join_body(body.data());
    // Results go back in the worker's DSCP (its traffic class), or the
    // rail's traffic_class when the worker sends 0.
    frame::endpoint member = from;
    if (!member.tos) member.tos = rs.s.self.tos;
    const agg::join_outcome jo = rs.agg.join(h, b, member, rs.policy == wire::rail_policy::lag);
    if (jo.err != wire::error_code::none) {
        bump(rs.ctr.join_errors);
        rs.ctr.drop(jo.err == wire::error_code::job_table_full ? drop_reason::job_table_full
                                                                : drop_reason::join_refused);
        return send_error(rs, m, from, h, jo.err);
    }
    bump(rs.ctr.joins);
    rs.job_lat.open(h.job_id);
    rs.s.active_jobs.store(rs.agg.active_jobs(), std::memory_order_relaxed);
    wire::join_ack_body ack = rs.ack;
    ack.pool_size = jo.j->pool;
    ack.policy = rs.policy;
    std::uint8_t body_buf[wire::join_ack_fixed_bytes + wire::max_rails * wire::rail_entry_bytes];
    const std::size_t blen = wire::encode_join_ack_body(ack, body_buf);
    std::uint8_t* msg = reuse_as_reply(rs, m, from, wire::header_bytes + blen);
    if (!msg) return free_drop(rs, m, drop_reason::no_mbuf);
    wire::header a = h;
    a.type = wire::msg_type::join_ack;
    a.flags = 0;
    a.aux = rs.agg.lim().rail_index;
    wire::encode_header(a, msg);
    std::memcpy(msg + wire::header_bytes, body_buf, blen);
    queue_tx(rs, m);
}

// Sends slot s's kept result to one member. In `carrier` (a spare
// contribution buffer of the slot) when given: a copy of the payload, one
// segment, no allocation. Otherwise sharing the payload mbuf (an indirect
// clone) when the port can transmit chains, or a copy in a new mbuf.
void send_result(rail_state& rs, const agg::job& j, const agg::slot& s, unsigned rank,
                 const frame::endpoint& dst, rte_mbuf* carrier = nullptr) noexcept {
    auto* payload = static_cast<rte_mbuf*>(s.result_owner);
    const std::uint32_t bytes = s.result_count * static_cast<std::uint32_t>(wire::dtype_size(j.dt));
    const std::size_t hdr_len = frame::udp_frame_overhead + wire::header_bytes;
    rte_mbuf* m;
    std::uint8_t* p;
    if (carrier) {
        std::uint8_t* msg = reuse_as_reply(rs, carrier, dst, wire::header_bytes + bytes);
        if (!msg) {
            rte_pktmbuf_free(carrier);
            return send_result(rs, j, s, rank, dst);
        }
        m = carrier;
        p = msg - frame::udp_frame_overhead;
        std::memcpy(msg + wire::header_bytes, rte_pktmbuf_mtod(payload, const void*), bytes);
    } else if (rs.s.multiseg_tx) {
        m = rte_pktmbuf_alloc(rs.s.hdr_pool);
        rte_mbuf* c = m ? rte_pktmbuf_clone(payload, rs.s.hdr_pool) : nullptr;
        if (!c) {
            if (m) rte_pktmbuf_free(m);
            rs.ctr.drop(drop_reason::no_mbuf);
            return;
        }
        p = reinterpret_cast<std::uint8_t*>(rte_pktmbuf_append(m, static_cast<std::uint16_t>(hdr_len)));
        rte_pktmbuf_chain(m, c);
    } else {
        m = rte_pktmbuf_alloc(rs.s.pool);
        p = m ? reinterpret_cast<std::uint8_t*>(rte_pktmbuf_append(m, static_cast<std::uint16_t>(hdr_len + bytes)))
              : nullptr;
        if (!p) {
            if (m) rte_pktmbuf_free(m);
            rs.ctr.drop(drop_reason::no_mbuf);
            return;
        }
        std::memcpy(p + hdr_len, rte_pktmbuf_mtod(payload, const void*), bytes);
    }
    if (!carrier) frame::write_udp_headers(p, rs.s.self, dst, wire::header_bytes + bytes);
    wire::header h;
    h.type = wire::msg_type::result;
    h.dt = j.dt;
    h.job_id = j.id;
    h.job_token = j.token;
    h.rank = static_cast<std::uint16_t>(rank);
    h.world_size = j.world;
    h.slot = static_cast<std::uint16_t>(&s - j.slots);
    h.count = s.result_count;
    h.offset = s.result_offset;
    h.gen = s.gen - 1;
    wire::encode_header(h, p + frame::udp_frame_overhead);
    bump(rs.ctr.results_sent);
    queue_tx(rs, m);
}

// Under LAG a job's flows come in on several members of the bond; its
// aggregation lives on the home member, and each rank is answered on the
// member its flow uses, at the address it joined there with.
rail_state* lag_home(rail_state& rs, const wire::header& h) noexcept {
    if (!rs.agg.lag_jobs() || !rs.bond) return &rs; // the rail policy's per-packet path
    const agg::job* local = rs.agg.find(h.job_id);
    if (!local || !local->lag) return &rs;
    const unsigned home = wire::lag_member(h.job_id, h.job_token, rs.ack.n_rails);
    return home < rs.bond->size() ? (*rs.bond)[home] : nullptr;
}

void answer(rail_state& home, const agg::job& j, const agg::slot& s, unsigned rank,
            rte_mbuf* carrier = nullptr) noexcept {
    if (!j.lag || !home.bond) return send_result(home, j, s, rank, j.members[rank], carrier);
    rail_state* tx = j.via[rank] < home.bond->size() ? (*home.bond)[j.via[rank]] : nullptr;
    const agg::job* there = tx ? tx->agg.find(j.id) : nullptr;
    if (!there) return send_result(home, j, s, rank, j.members[rank], carrier);
    send_result(*tx, j, s, rank, there->members[rank], carrier);
}

void handle_contrib(rail_state& rs, rte_mbuf* m, const wire::header& h,
                    std::span<const std::uint8_t> payload) noexcept {
    rail_state* home = lag_home(rs, h);
    if (!home) return free_drop(rs, m, drop_reason::wrong_rail_or_slot);
    const agg::outcome o = home->agg.contribute(h, payload.data(), m, rs.k, rs.burst_tsc);
    if (o.act != agg::action::dropped && o.j->lag && rs.stripe >= 0)
        o.j->via[h.rank] = static_cast<std::uint8_t>(rs.stripe);
    switch (o.act) {
    case agg::action::dropped: return free_drop(rs, m, o.reason);
    case agg::action::stored:
        bump(rs.ctr.contributions);
        // Its payload is read when the slot completes, a few packets on:
        // start bringing it in now (small chunks; the hardware streams
        // large ones).
        if (payload.size() <= 4096)
            for (std::size_t off = 0; off < payload.size(); off += RTE_CACHE_LINE_SIZE)
                rte_prefetch1(payload.data() + off);
        return;
    case agg::action::resend:
        bump(rs.ctr.results_resent);
        answer(*home, *o.j, *o.s, h.rank);
        rte_pktmbuf_free(m);
        return;
    case agg::action::completed: {
        bump(rs.ctr.contributions);
        bump(home->ctr.aggregations);
        // Trim rank 0's frame to the reduced payload: it is the result now.
        auto* r = static_cast<rte_mbuf*>(o.s->result_owner);
        const auto off = static_cast<std::uint16_t>(static_cast<const std::uint8_t*>(o.s->result_payload) -
                                                    rte_pktmbuf_mtod(r, const std::uint8_t*));
        rte_pktmbuf_adj(r, off);
        const auto bytes = static_cast<std::uint16_t>(o.s->result_count * wire::dtype_size(o.j->dt));
        r->data_len = bytes;
        r->pkt_len = bytes;
        // Ranks 1..W-1 get the result in their own contribution buffers (the
        // slot's spares: a copy of the cache-hot payload each, no allocation;
        // W indirect clones would share one reference count that every
        // member's TX completion updates atomically: bench_dataplane MTU 1500
        // 31 -> 41 Gbit/s, MTU 9000 80 -> 102). Rank 0's buffer stays as the
        // kept result and goes out as a clone.
        const std::span<void* const> spares = home->agg.spares();
        answer(*home, *o.j, *o.s, 0);
        for (unsigned w = 1; w < o.j->world; ++w) answer(*home, *o.j, *o.s, w, static_cast<rte_mbuf*>(spares[w - 1]));
        // Burst granularity: the time a burst arrived, not each packet.
        const auto ns = static_cast<std::uint64_t>(static_cast<double>(rs.burst_tsc - o.s->started) * rs.ns_per_tsc);
        home->lat.record(ns);
        if (stats::histogram* jh = home->job_lat.find(o.j->id)) jh->record(ns);
        return;
    }
    }
}

void handle_abort(rail_state& rs, rte_mbuf* m, const wire::header& h) noexcept {
    frame::endpoint who[wire::max_world];
    const std::uint64_t members = rs.agg.abort(h, who);
    if (!members) return free_drop(rs, m, drop_reason::leave_unknown);
    bump(rs.ctr.aborts);
    rs.s.active_jobs.store(rs.agg.active_jobs(), std::memory_order_relaxed);
    rte_pktmbuf_free(m);
    for (unsigned r = 0; r < h.world_size; ++r) {
        if (!(members >> r & 1) || r == h.rank) continue;
        rte_mbuf* e = rte_pktmbuf_alloc(rs.s.pool);
        if (!e) {
            rs.ctr.drop(drop_reason::no_mbuf);
            continue;
        }
        wire::header eh = h;
        eh.rank = static_cast<std::uint16_t>(r);
        send_error(rs, e, who[r], eh, wire::error_code::aborted);
    }
}

// A worker's round-trip histogram (part of it): merged into the rail's and
// the job's, after the whole message checks out.
void handle_rtt_report(rail_state& rs, rte_mbuf* m, const wire::header& h,
                       std::span<const std::uint8_t> body) noexcept {
    agg::job* j = rs.agg.find(h.job_id);
    if (!j) return free_drop(rs, m, drop_reason::unknown_job);
    if (j->token != h.job_token) return free_drop(rs, m, drop_reason::bad_token);
    if (!(j->joined >> h.rank & 1)) return free_drop(rs, m, drop_reason::rank_not_joined);
    for (std::size_t i = 0; i < h.count; ++i) {
        std::uint16_t b;
        std::uint32_t n;
        wire::decode_rtt_entry(body.data() + i * wire::rtt_entry_bytes, b, n);
        if (b >= stats::histogram::bucket_count) return free_drop(rs, m, drop_reason::rtt_bucket);
    }
    stats::histogram* jh = rs.job_lat.find(h.job_id, true);
    for (std::size_t i = 0; i < h.count; ++i) {
        std::uint16_t b;
        std::uint32_t n;
        wire::decode_rtt_entry(body.data() + i * wire::rtt_entry_bytes, b, n);
        rs.worker_rtt.add_to_bucket(b, n);
        if (jh) jh->add_to_bucket(b, n);
    }
    bump(rs.ctr.rtt_reports);
    rte_pktmbuf_free(m);
}

void handle(rail_state& rs, rte_mbuf* m) noexcept {
    bump(rs.ctr.rx_packets);
    bump(rs.ctr.rx_bytes, m->pkt_len);
    if (m->nb_segs != 1) return free_drop(rs, m, drop_reason::rx_segmented);
    auto* p = rte_pktmbuf_mtod(m, std::uint8_t*);
    const frame::info fi = frame::classify(p, m->data_len, rs.s.self);
    switch (fi.k) {
    case frame::kind::drop: return free_drop(rs, m, fi.reason);
    case frame::kind::forward: return route(rs, m, fi);
    case frame::kind::arp_reply:
        if (!rs.neigh.find(fi.src.ip)) return free_drop(rs, m, drop_reason::arp_reply_ignored);
        learn_neighbour(rs, fi.src.ip, fi.src.mac, false);
        rte_pktmbuf_free(m);
        return;
    case frame::kind::arp_request:
        // A gateway learns who asks (RFC 826): it will route to them.
        if (rs.routes) learn_neighbour(rs, fi.src.ip, fi.src.mac, true);
        frame::arp_reply_in_place(p, rs.s.self);
        m->data_len = static_cast<std::uint16_t>(frame::arp_frame_bytes);
        m->pkt_len = m->data_len;
        bump(rs.ctr.arp_replies);
        return queue_tx(rs, m);
    case frame::kind::icmp_echo:
        frame::icmp_echo_reply_in_place(p, fi);
        m->data_len = static_cast<std::uint16_t>(fi.l4_offset + fi.l4_len);
        m->pkt_len = m->data_len;
        bump(rs.ctr.icmp_replies);
        return queue_tx(rs, m);
    case frame::kind::udp: break;
    }
    wire::header h;
    std::span<const std::uint8_t> payload;
    const drop_reason r = wire::parse_worker_message(p + fi.msg_offset, fi.l4_len, h, payload);
    if (r != drop_reason::none) return free_drop(rs, m, r);
    switch (h.type) {
    case wire::msg_type::contrib: return handle_contrib(rs, m, h, payload);
    case wire::msg_type::join: return handle_join(rs, m, h, payload, fi.src);
    case wire::msg_type::leave:
        if (!rs.agg.leave(h)) return free_drop(rs, m, drop_reason::leave_unknown);
        bump(rs.ctr.leaves);
        rs.s.active_jobs.store(rs.agg.active_jobs(), std::memory_order_relaxed);
        if (std::uint8_t* msg = reuse_as_reply(rs, m, fi.src, wire::header_bytes)) {
            wire::header a = h;
            a.type = wire::msg_type::leave_ack;
            wire::encode_header(a, msg);
            return queue_tx(rs, m);
        }
        return free_drop(rs, m, drop_reason::no_mbuf);
    case wire::msg_type::error: return handle_abort(rs, m, h);
    case wire::msg_type::rtt_report: return handle_rtt_report(rs, m, h, payload);
    default: return free_drop(rs, m, drop_reason::rg_type);
    }
}

// Returns whether any packet was received.
bool poll_rail(rail_state& rs) noexcept {
    const bool routed = rs.routes && pull_routed(rs);
    rte_mbuf* pkts[rx_burst];
    const std::uint16_t n = rte_eth_rx_burst(rs.s.port, 0, pkts, rx_burst);
    if (n == 0) {
        // A shaped rail keeps sending what its TCs hold while nothing arrives.
        if (rs.sched && rs.sched->queued()) drain(rs);
        flush(rs);
        return routed;
    }
    rs.burst_tsc = rte_rdtsc();
    // Two stages: every mbuf header of the burst at once (their addresses
    // are known, so the misses overlap), then each packet's first line a
    // few packets ahead (its address is in the header).
    for (std::uint16_t i = 0; i < n; ++i) rte_prefetch0(pkts[i]);
    // A contribution's railgate header (bytes 42..81) spans two lines.
    auto lines = [](const rte_mbuf* m) {
        const auto* p = rte_pktmbuf_mtod(m, const char*);
        rte_prefetch0(p);
        rte_prefetch0(p + RTE_CACHE_LINE_SIZE);
    };
    for (std::uint16_t i = 0; i < n && i < 4; ++i) lines(pkts[i]);
    for (std::uint16_t i = 0; i < n; ++i) {
        if (i + 4 < n) lines(pkts[i + 4]);
        handle(rs, pkts[i]);
    }
    if (rs.nrouted) flush_routed(rs);
    if (rs.sched) drain(rs);
    flush(rs);
    return true;
}

// The rte_device of a port name, for hot-unplug (before the port closes).
rte_device* device_of(const std::string& name) {
    std::uint16_t port;
    rte_eth_dev_info info;
    if (rte_eth_dev_get_port_by_name(name.c_str(), &port) == 0 && rte_eth_dev_info_get(port, &info) == 0)
        return info.device;
    return nullptr;
}

// An AF_INET socket and an ifreq naming one kernel interface, for its ioctls.
struct if_ioctl {
    int fd;
    ifreq ifr{};
    explicit if_ioctl(const std::string& ifname) : fd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
        std::snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname.c_str());
    }
    ~if_ioctl() {
        if (fd >= 0) close(fd);
    }
    if_ioctl(const if_ioctl&) = delete;
    if_ioctl& operator=(const if_ioctl&) = delete;
    bool operator()(unsigned long req) noexcept { return fd >= 0 && ioctl(fd, req, &ifr) == 0; }
};

// The MTU of a kernel interface (a tap's host side, an af_packet veth).
std::string set_kernel_mtu(const std::string& ifname, unsigned mtu) noexcept {
    if_ioctl io(ifname);
    io.ifr.ifr_mtu = static_cast<int>(mtu);
    if (io(SIOCSIFMTU)) return {};
    return "cannot set MTU " + std::to_string(mtu) + " on " + ifname + ": " + std::strerror(errno);
}

// Gives a kernel interface (the host side of a tap rail) an address and
// brings it up.
std::string set_kernel_address(const std::string& ifname, std::uint32_t ip, unsigned prefix) {
    if_ioctl io(ifname);
    auto set = [&](unsigned long req, std::uint32_t v) {
        auto* sin = reinterpret_cast<sockaddr_in*>(&io.ifr.ifr_addr);
        *sin = sockaddr_in{};
        sin->sin_family = AF_INET;
        sin->sin_addr.s_addr = htonl(v);
        return io(req);
    };
    std::string what;
    if (!set(SIOCSIFADDR, ip)) what = "address on ";
    else if (!set(SIOCSIFNETMASK, prefix ? ~std::uint32_t{0} << (32 - prefix) : 0)) what = "netmask on ";
    else if (!io(SIOCGIFFLAGS)) what = "flags of ";
    else {
        io.ifr.ifr_flags = static_cast<short>(io.ifr.ifr_flags | IFF_UP);
        if (!io(SIOCSIFFLAGS)) what = "bringing up ";
    }
    return what.empty() ? std::string() : "cannot set " + what + ifname + ": " + std::strerror(errno);
}

// Sets the port's MTU from its own lcore, between bursts.
std::string apply_port_mtu(rail_static& st, std::uint16_t mtu) noexcept {
    if (mtu <= st.pmd_max_mtu) {
        const int rc = rte_eth_dev_set_mtu(st.port, mtu);
        if (rc < 0 && rc != -ENOTSUP) return std::string("set MTU: ") + rte_strerror(-rc);
    } else if (st.ifname.empty()) {
        return st.driver + " takes MTU up to " + std::to_string(st.pmd_max_mtu);
    } else if (std::string e = set_kernel_mtu(st.ifname, mtu); !e.empty()) {
        return e;
    }
    st.mtu_now.store(mtu, std::memory_order_relaxed);
    return {};
}

// A lowered MTU reaches the port once no job's chunk is too big for it.
void maybe_apply_pending_mtu(rail_state& rs) noexcept {
    if (rs.agg.max_job_chunk_bytes() > wire::chunk_bytes_for_mtu(rs.pending_mtu)) return;
    apply_port_mtu(rs.s, rs.pending_mtu);
    rs.pending_mtu = 0;
}

void run_command(rail_state& rs, lcore_command& c) {
    switch (c.k) {
    case lcore_command::kind::snapshot: {
        stats::histogram* h = c.tc >= 0 ? (rs.tc_wait ? &(*rs.tc_wait)[static_cast<unsigned>(c.tc)] : nullptr)
                              : c.job ? rs.job_lat.find(*c.job, c.worker)
                              : c.worker ? &rs.worker_rtt : &rs.lat;
        if (!h) return;
        c.out->merge(*h);
        if (c.reset) h->reset();
        return;
    }
    case lcore_command::kind::adopt: {
        rs.ack = c.ack;
        rs.policy = c.policy;
        rs.agg.set_job_chunk_bytes(c.job_chunk_bytes);
        const int stripe = c.stripe[rs.index];
        rs.stripe = stripe;
        rs.closing = stripe < 0;
        if (stripe >= 0) rs.agg.set_stripe(c.ack.n_rails, static_cast<unsigned>(stripe));
        return;
    }
    case lcore_command::kind::attach:
    case lcore_command::kind::detach: return; // handled by the loop, which owns the rail list
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
            while (rte_ring_dequeue(rs.s.fwd, reinterpret_cast<void**>(&m)) == 0) free_drop(rs, m, drop_reason::no_route);
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
    }
}

} // namespace

struct daemon::impl {
    daemon_config cfg;
    std::vector<std::unique_ptr<rail_static>> rails;
    wire::join_ack_body ack{};
    std::uint32_t job_chunk_bytes = 0;
    std::vector<unsigned> lcores; // worker lcores that serve at least one rail
    std::atomic<bool> stop{false};
    bool launched = false;
    // The gateway's routes, and the table the lcores read (null: none).
    std::vector<route_config> routes;
    std::unique_ptr<fib> fib_now;
    bool ports_open = false;

    struct lcore_ctx {
        impl* self;
        unsigned lcore;
        std::atomic<lcore_command*> cmd{nullptr}; // control plane -> lcore, one at a time
        lcore_ctx(impl* s, unsigned l) : self(s), lcore(l) {}
    };
    std::deque<lcore_ctx> ctxs;
    wire::rail_policy policy = wire::rail_policy::rail;
    mutable std::mutex ctl; // serialises control-plane calls (never taken by lcores)

    // Runs c on the lcore serving `rail` (or on every lcore when rail < 0,
    // once per lcore with c.rail left as given). Returns "" or why not.
    std::string on_lcores(lcore_command& c, int rail);
    lcore_command adopt_command() const;
    std::string check_bond(wire::rail_policy pol) const;

    static int lcore_main(void* arg);
    void open_ports();
    std::unique_ptr<rail_static> open_rail(std::size_t i, const rail_config& rc);
    void rebuild_ack();
    unsigned place_rail(rail_static& rs, const std::vector<unsigned>& candidates, std::vector<unsigned>& load);
    void place();
    void attach_steering(rail_static& rs, unsigned ifindex);
    std::string build_fib(const std::vector<route_config>& rs, std::unique_ptr<fib>& out) const;
    std::string publish_routes(std::vector<route_config> next);
    // Stops and closes every open port and frees the rails' pools and rings.
    void close_all() noexcept;
};

// Checks routes against the rails and builds their table (null when there
// are none). "" or the first problem, naming the route.
std::string daemon::impl::build_fib(const std::vector<route_config>& list, std::unique_ptr<fib>& out) const {
    out.reset();
    if (list.size() > max_routes) return "too many routes (max " + std::to_string(max_routes) + ")";
    if (list.empty()) return {};
    auto f = std::make_unique<fib>();
    std::vector<lpm_table::entry> entries;
    std::set<std::pair<std::uint32_t, unsigned>> seen;
    for (const route_config& r : list) {
        const std::string where = "route " + format_prefix(r.prefix, r.len) + ": ";
        if (r.len > 32 || (r.prefix & ~prefix_mask(r.len))) return where + "host bits set or length above 32";
        if (!seen.insert({r.prefix, r.len}).second) return where + "routed twice";
        rail_static* out_rail = nullptr;
        for (const auto& x : rails)
            if (x->active && x->cfg.name == r.rail) out_rail = x.get();
        if (!out_rail) return where + "rail '" + r.rail + "' does not exist";
        for (const auto& x : rails)
            if (x->active && r.via && x->cfg.ip == r.via)
                return where + "via " + format_ipv4(r.via) + " is rail " + x->cfg.name + "'s own address";
        if (r.via && (r.via >> 28 >= 0xe || r.via == 0xffffffff))
            return where + "via " + format_ipv4(r.via) + " is not a unicast address";
        entries.push_back({r.prefix, r.len, static_cast<std::uint32_t>(f->hops.size())});
        f->hops.push_back({out_rail, r.via});
    }
    f->table = lpm_table(entries);
    f->size_hits(static_cast<unsigned>(lcores.size()));
    out = std::move(f);
    return {};
}

// Makes `next` the routes: every lcore switches to the new table between
// bursts, and the old one is freed once all have.
std::string daemon::impl::publish_routes(std::vector<route_config> next) {
    std::unique_ptr<fib> f;
    if (std::string e = build_fib(next, f); !e.empty()) return e;
    if (launched) {
        lcore_command c;
        c.k = lcore_command::kind::routes;
        c.routes = f.get();
        if (std::string e = on_lcores(c, -1); !e.empty()) return e;
    }
    // No lcore writes the old table any more: the routes that stay keep
    // their totals.
    if (f && fib_now)
        for (std::size_t i = 0; i < next.size(); ++i)
            for (std::size_t k = 0; k < routes.size(); ++k)
                if (next[i].prefix == routes[k].prefix && next[i].len == routes[k].len &&
                    next[i].rail == routes[k].rail && next[i].via == routes[k].via) {
                    f->base_packets[i] = fib_now->total(static_cast<std::uint32_t>(k), 0);
                    f->base_bytes[i] = fib_now->total(static_cast<std::uint32_t>(k), 1);
                }
    fib_now = std::move(f);
    routes = std::move(next);
    if (!routes.empty())
        for (const auto& r : rails)
            if (r->active && r->steering)
                std::fprintf(stderr,
                             "railgated: warning: rail %s: its XDP program passes everything but railgate's UDP to "
                             "the kernel, so the gateway never sees traffic to route that arrives there; start "
                             "railgated with --no-xdp-steer for gateway rails\n",
                             r->cfg.name.c_str());
    return {};
}

int daemon::impl::lcore_main(void* arg) {
    auto* c = static_cast<lcore_ctx*>(arg);
    impl& d = *c->self;
    std::vector<std::unique_ptr<rail_state>> mine;
    // Built here, on the lcore, so that the state lives on its NUMA node.
    auto make = [&d, c](std::size_t i) {
        rail_static& rs = *d.rails[i];
        agg::limits lim;
        lim.max_jobs = d.cfg.max_jobs;
        lim.max_pool = d.cfg.max_pool;
        lim.default_pool = d.cfg.default_pool;
        lim.rail_index = static_cast<unsigned>(std::max(rs.stripe, 0));
        lim.n_rails = d.ack.n_rails;
        lim.job_chunk_bytes = d.job_chunk_bytes;
        auto st = std::make_unique<rail_state>(rs, lim, d.ack, d.policy);
        rs.served_by = st.get();
        st->neigh.reachable_tsc = std::uint64_t{d.cfg.neighbour_reachable_ms} * rte_get_tsc_hz() / 1000;
        st->lcore_slot = static_cast<unsigned>(std::find(d.lcores.begin(), d.lcores.end(), c->lcore) - d.lcores.begin());
        st->index = i;
        st->routes = d.fib_now.get();
        st->stripe = rs.stripe;
        return st;
    };
    std::vector<rail_state*> bond;
    auto rebond = [&] {
        bond.assign(wire::max_rails, nullptr);
        for (auto& r : mine) {
            r->bond = &bond;
            if (r->stripe >= 0 && r->stripe < static_cast<int>(bond.size())) bond[static_cast<std::size_t>(r->stripe)] = r.get();
        }
    };
    for (std::size_t i = 0; i < d.rails.size(); ++i)
        if (d.rails[i]->lcore == c->lcore && d.rails[i]->active) mine.push_back(make(i));
    rebond();
    while (!d.stop.load(std::memory_order_relaxed)) {
        bool busy = false;
        std::uint64_t t0 = rte_rdtsc(); // one read per rail: its end is the next one's start
        for (auto& r : mine) {
            const bool found = poll_rail(*r);
            const std::uint64_t t1 = rte_rdtsc();
            bump(r->ctr.poll_cycles, t1 - t0);
            if (found) bump(r->ctr.busy_cycles, t1 - t0);
            t0 = t1;
            busy |= found;
            if (r->pending_mtu) maybe_apply_pending_mtu(*r);
        }
        if (lcore_command* cmd = c->cmd.load(std::memory_order_acquire)) {
            if (cmd->k == lcore_command::kind::attach) {
                mine.push_back(make(static_cast<std::size_t>(cmd->rail)));
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
            c->cmd.store(nullptr, std::memory_order_release);
        }
        if (!busy && d.cfg.idle == idle_policy::yield) sched_yield();
    }
    for (auto& r : mine) {
        flush(*r);
        r->s.served_by = nullptr;
    }
    return 0; // rail_state destructors release every held mbuf
}

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
    std::set<std::string> names;
    std::set<std::uint32_t> ips;
    for (const rail_config& r : cfg.rails) {
        const std::string where = "rail " + r.name + ": ";
        if (!names.insert(r.name).second) fail(where + "duplicate name");
        if (r.ip == 0) fail(where + "ip missing");
        if (!ips.insert(r.ip).second) fail(where + "ip " + format_ipv4(r.ip) + " used by another rail");
        if (r.mtu < wire::min_mtu || r.mtu > wire::max_mtu)
            fail(where + "mtu " + std::to_string(r.mtu) + " out of range " + std::to_string(wire::min_mtu) +
                 ".." + std::to_string(wire::max_mtu));
        if (r.mtu_max && (r.mtu_max < r.mtu || r.mtu_max > wire::max_mtu))
            fail(where + "mtu_max " + std::to_string(r.mtu_max) + " out of range " + std::to_string(r.mtu) + ".." +
                 std::to_string(wire::max_mtu));
        if (r.udp_port == 0) fail(where + "udp port 0");
        if (r.port_id < 0 && r.port_name.empty()) fail(where + "no port");
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

void daemon::impl::open_ports() {
    rails.reserve(wire::max_rails * 2); // rails added later never move the others
    for (std::size_t i = 0; i < cfg.rails.size(); ++i) rails.push_back(open_rail(i, cfg.rails[i]));
    ports_open = true;
    rebuild_ack();
}

// Opens, configures and starts one rail's port, with its pools.
std::unique_ptr<rail_static> daemon::impl::open_rail(std::size_t i, const rail_config& rcfg) {
    auto rs = std::make_unique<rail_static>();
    rs->cfg = rcfg;
    const std::string where = "rail " + rs->cfg.name + ": ";
    std::uint16_t port;
    if (rs->cfg.port_id >= 0) {
        port = static_cast<std::uint16_t>(rs->cfg.port_id);
        if (!rte_eth_dev_is_valid_port(port)) throw std::runtime_error(where + "invalid port id");
    } else if (rte_eth_dev_get_port_by_name(rs->cfg.port_name.c_str(), &port) != 0) {
        throw std::runtime_error(where + "no DPDK port named " + rs->cfg.port_name);
    }
    rs->port = port;
    rte_eth_dev_info info;
    if (rte_eth_dev_info_get(port, &info) != 0) throw std::runtime_error(where + "cannot read device info");
    rs->driver = info.driver_name ? info.driver_name : "?";
    rs->device = info.device;
    rs->socket = rs->cfg.numa >= 0 ? rs->cfg.numa : port_numa_node(port);
    // Some vdevs report a fixed 1518-byte max frame (af_packet in 22.11)
    // although they carry what the kernel interface carries (af_packet
    // with a large framesz). Others mean it (tap's TX refuses more).
    const std::uint32_t pmd_mtu = std::min<std::uint32_t>(
        info.max_mtu, info.max_rx_pktlen > RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN
                          ? info.max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN
                          : rs->cfg.mtu);
    const std::uint32_t carry_max = rs->driver == "net_af_packet" ? wire::max_mtu : pmd_mtu;
    if (rs->cfg.mtu > carry_max)
        throw std::runtime_error(where + "MTU " + std::to_string(rs->cfg.mtu) + " is more than " + rs->driver +
                                 " carries (" + std::to_string(carry_max) + ")");
    rs->cfg.mtu_max = static_cast<std::uint16_t>(
        std::clamp<std::uint32_t>(rs->cfg.mtu_max ? rs->cfg.mtu_max : rs->cfg.mtu, rs->cfg.mtu, carry_max));
    rs->chunk_bytes = wire::chunk_bytes_for_mtu(rs->cfg.mtu);

    // Jumbo rails get 1 KiB of slack so that kernel-backed PMDs with a
    // frame size rounded up (af_packet framesz=10240) still fit one mbuf.
    const unsigned frame = rs->cfg.mtu_max + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
    const unsigned room = RTE_PKTMBUF_HEADROOM + (frame <= 2048 ? 2048 : RTE_ALIGN_CEIL(frame + 1024, 1024));
    const int sock = rs->socket < 0 ? static_cast<int>(SOCKET_ID_ANY) : rs->socket;
    // On the NIC's node; where that node has no EAL memory (a --numa
    // override, a node without hugepages) anywhere, with a warning.
    auto pool_on_node = [&](const std::string& name, unsigned n, unsigned data_room) {
        try {
            return make_pktmbuf_pool(name, n, data_room, sock);
        } catch (const std::runtime_error& e) {
            if (sock == static_cast<int>(SOCKET_ID_ANY)) throw;
            std::fprintf(stderr, "railgated: warning: rail %s: %s on NUMA node %d; allocating on any node\n",
                         rs->cfg.name.c_str(), e.what(), sock);
            return make_pktmbuf_pool(name, n, data_room, SOCKET_ID_ANY);
        }
    };
    rs->pool = pool_on_node("rg_pool_" + std::to_string(i), cfg.mbufs_per_rail, room);
    rs->hdr_pool = pool_on_node("rg_hdr_" + std::to_string(i), cfg.mbufs_per_rail * 2, RTE_PKTMBUF_HEADROOM + 128);
    static std::atomic<unsigned> rings{0}; // names stay unique across daemons in one process
    rs->fwd = rte_ring_create(("rg_fwd_" + std::to_string(rings++)).c_str(), 1024, sock, RING_F_SC_DEQ);
    if (!rs->fwd) throw std::runtime_error(where + "forward ring: " + rte_strerror(rte_errno));

    rte_eth_conf conf{};
    // Beyond the stated limit (af_packet): configure the ethdev within
    // it and keep the rail MTU for railgate's own chunking.
    const bool mtu_beyond_pmd = rs->cfg.mtu > pmd_mtu;
    rs->pmd_max_mtu = pmd_mtu;
    conf.rxmode.mtu = mtu_beyond_pmd ? pmd_mtu : rs->cfg.mtu;
    if (mtu_beyond_pmd)
        std::fprintf(stderr,
                     "railgated: warning: rail %s: %s states max MTU %u; using MTU %u as set on the "
                     "kernel interface\n",
                     rs->cfg.name.c_str(), rs->driver.c_str(), pmd_mtu, rs->cfg.mtu);
    // net_ring passes mbuf pointers through untouched, so chains are fine
    // there even though it does not advertise the offload.
    rs->multiseg_tx = (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) || rs->driver == "net_ring";
    if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
        conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
    int rc = rte_eth_dev_configure(port, 1, 1, &conf);
    if (rc < 0) throw std::runtime_error(where + "configure: " + rte_strerror(-rc));
    std::uint16_t nrx = static_cast<std::uint16_t>(cfg.rx_desc), ntx = static_cast<std::uint16_t>(cfg.tx_desc);
    rte_eth_dev_adjust_nb_rx_tx_desc(port, &nrx, &ntx);
    rc = rte_eth_rx_queue_setup(port, 0, nrx, static_cast<unsigned>(sock), nullptr, rs->pool);
    if (rc < 0) throw std::runtime_error(where + "rx queue: " + rte_strerror(-rc));
    rte_eth_txconf txc = info.default_txconf;
    txc.offloads = conf.txmode.offloads;
    rc = rte_eth_tx_queue_setup(port, 0, ntx, static_cast<unsigned>(sock), &txc);
    if (rc < 0) throw std::runtime_error(where + "tx queue: " + rte_strerror(-rc));
    rc = mtu_beyond_pmd ? 0 : rte_eth_dev_set_mtu(port, rs->cfg.mtu);
    if (rc < 0 && rc != -ENOTSUP)
        throw std::runtime_error(where + "mtu " + std::to_string(rs->cfg.mtu) + ": " + rte_strerror(-rc));
    rc = rte_eth_dev_start(port);
    if (rc < 0) throw std::runtime_error(where + "start: " + rte_strerror(-rc));
    if (info.if_index) {
        char name[IF_NAMESIZE] = {};
        if (if_indextoname(info.if_index, name)) rs->ifname = name;
    }
    if (rs->driver == "net_af_xdp" && info.if_index) attach_steering(*rs, info.if_index);
    if (rs->cfg.host_ip) {
        if (rs->ifname.empty()) throw std::runtime_error(where + "host_ip needs a port with a kernel interface (tap)");
        if (const std::string e = set_kernel_address(rs->ifname, rs->cfg.host_ip, rs->cfg.host_prefix); !e.empty())
            throw std::runtime_error(where + e);
    }
    rs->mtu_now.store(rs->cfg.mtu);
    rs->mtu_target.store(rs->cfg.mtu);
    rte_ether_addr mac;
    rte_eth_macaddr_get(port, &mac);
    std::memcpy(rs->self.mac.b, mac.addr_bytes, 6);
    rs->self.ip = rs->cfg.ip;
    rs->self.udp_port = rs->cfg.udp_port;
    rs->self.tos = static_cast<std::uint8_t>(rs->cfg.traffic_class);
    return rs;
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

namespace {

bool kernel_owns(const std::string& ifname, std::uint32_t ip) {
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return false;
    bool found = false;
    for (ifaddrs* a = list; a && !found; a = a->ifa_next)
        if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && a->ifa_name && ifname == a->ifa_name)
            found = ntohl(reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr) == ip;
    freeifaddrs(list);
    return found;
}

} // namespace

// The af_xdp PMD attached an XDP program when the rx queue was set up. If
// it is railgate's, point it at this rail: from now on only railgate
// packets reach the socket, and the kernel keeps ARP, ICMP and host traffic
// for the address, which it must therefore own.
void daemon::impl::attach_steering(rail_static& rs, unsigned ifindex) {
    rs.steering = xdp::attached::find(ifindex);
    if (!rs.steering) return;
    rs.steering->program_maps().configure(rs.cfg.ip, rs.cfg.udp_port, wire::protocol_version);
    if (!kernel_owns(rs.ifname, rs.cfg.ip))
        std::fprintf(stderr,
                     "railgated: warning: rail %s: XDP steering leaves ARP to the kernel, but %s does not "
                     "own %s; add it (ip addr add %s/N dev %s) or workers cannot resolve the rail\n",
                     rs.cfg.name.c_str(), rs.ifname.c_str(), format_ipv4(rs.cfg.ip).c_str(),
                     format_ipv4(rs.cfg.ip).c_str(), rs.ifname.c_str());
}

// Chooses the lcore of one rail among `candidates` (engine::place: its
// override, else the least loaded on its NIC's NUMA node; never another
// node silently) and counts it in `load`.
unsigned daemon::impl::place_rail(rail_static& rs, const std::vector<unsigned>& candidates,
                                  std::vector<unsigned>& load) {
    std::vector<engine::cpu_slot> slots;
    for (unsigned l : candidates) slots.push_back({l, static_cast<int>(rte_lcore_to_socket_id(l))});
    // The loads so far, as rails already placed on those lcores.
    std::vector<engine::rail_need> needs;
    for (unsigned l : candidates)
        for (unsigned i = 0; i < load[l]; ++i) needs.push_back({"(placed)", -1, static_cast<int>(l)});
    needs.push_back({rs.cfg.name, rs.socket, rs.cfg.lcore});
    std::vector<engine::rail_place> out;
    if (rs.cfg.lcore >= 0 &&
        std::find(candidates.begin(), candidates.end(), static_cast<unsigned>(rs.cfg.lcore)) == candidates.end())
        throw std::runtime_error("rail " + rs.cfg.name + ": lcore " + std::to_string(rs.cfg.lcore) +
                                 " is not a worker lcore serving rails");
    if (std::string e = engine::place(slots, needs, out); !e.empty()) throw std::runtime_error(e);
    const engine::rail_place& p = out.back();
    if (!p.warning.empty()) std::fprintf(stderr, "railgated: warning: %s\n", p.warning.c_str());
    rs.lcore = p.cpu;
    ++load[rs.lcore];
    return rs.lcore;
}

void daemon::impl::place() {
    std::vector<unsigned> workers;
    unsigned l;
    RTE_LCORE_FOREACH_WORKER(l) workers.push_back(l);
    if (workers.empty()) throw std::runtime_error("no worker lcore: give EAL at least 2 lcores (-l 0-1)");
    std::vector<unsigned> load(RTE_MAX_LCORE, 0);
    for (auto& rs : rails) {
        const unsigned lc = place_rail(*rs, workers, load);
        if (std::find(lcores.begin(), lcores.end(), lc) == lcores.end()) lcores.push_back(lc);
    }
}

namespace {

void drain_ring(rail_static& rs) noexcept {
    rte_mbuf* m;
    while (rs.fwd && rte_ring_dequeue(rs.fwd, reinterpret_cast<void**>(&m)) == 0) rte_pktmbuf_free(m);
}

// A closed rail's ring and pools. Rings hold other rails' mbufs: drain
// every ring before freeing any pool.
void free_memory(rail_static& rs) noexcept {
    drain_ring(rs);
    rte_ring_free(rs.fwd);
    rte_mempool_free(rs.pool);
    rte_mempool_free(rs.hdr_pool);
    rs.fwd = nullptr;
    rs.pool = rs.hdr_pool = nullptr;
}

} // namespace

void daemon::impl::close_all() noexcept {
    for (auto& rs : rails)
        if (!rs->closed) {
            rte_eth_dev_stop(rs->port);
            rte_eth_dev_close(rs->port);
            rs->closed = true;
        }
    for (auto& rs : rails) drain_ring(*rs);
    for (auto& rs : rails) free_memory(*rs);
}

daemon::~daemon() {
    stop();
    p_->close_all();
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
                     rs->multiseg_tx ? ", zero-copy results" : ", copied results");
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
        p_->launched = true;
    }
}

void daemon::stop() {
    if (!p_->launched) return;
    p_->stop.store(true);
    for (auto& c : p_->ctxs) rte_eal_wait_lcore(c.lcore);
    p_->launched = false;
}

std::size_t daemon::rail_count() const noexcept {
    std::lock_guard lock(p_->ctl);
    return p_->rails.size();
}
const rail_config& daemon::rail(std::size_t i) const noexcept { return p_->rails[i]->cfg; }
const rail_counters& daemon::counters(std::size_t i) const noexcept { return p_->rails[i]->ctr; }

void daemon::print_stats(std::FILE* out) const {
    std::lock_guard lock(p_->ctl);
    auto v = [](const counter& c) { return c.load(std::memory_order_relaxed); };
    for (auto& rs : p_->rails) {
        const rail_counters& c = rs->ctr;
        std::fprintf(out,
                     "rail %s: rx %" PRIu64 " pkts %" PRIu64 " B, tx %" PRIu64 " pkts %" PRIu64
                     " B, contributions %" PRIu64 ", aggregations %" PRIu64 ", results %" PRIu64
                     " (resent %" PRIu64 "), joins %" PRIu64 " (refused %" PRIu64 "), leaves %" PRIu64
                     ", aborts %" PRIu64 ", arp %" PRIu64 ", icmp %" PRIu64 ", drops %" PRIu64 "\n",
                     rs->cfg.name.c_str(), v(c.rx_packets), v(c.rx_bytes), v(c.tx_packets), v(c.tx_bytes),
                     v(c.contributions), v(c.aggregations), v(c.results_sent), v(c.results_resent), v(c.joins),
                     v(c.join_errors), v(c.leaves), v(c.aborts), v(c.arp_replies), v(c.icmp_replies),
                     c.total_drops());
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
}

std::string daemon::impl::on_lcores(lcore_command& c, int rail) {
    if (!launched) return "the rail loops are not running";
    for (lcore_ctx& x : ctxs) {
        if (rail >= 0 && x.lcore != rails[static_cast<std::size_t>(rail)]->lcore) continue;
        x.cmd.store(&c, std::memory_order_release);
        // The loops look at their mailbox every pass (microseconds).
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (x.cmd.load(std::memory_order_acquire)) {
            if (std::chrono::steady_clock::now() > deadline) {
                // Leave the command posted: c must outlive it, so wait on.
                while (x.cmd.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                return "lcore " + std::to_string(x.lcore) + " took over 2 s to answer";
            }
            std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
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
        return "MTU " + std::to_string(mtu) + " out of range " + std::to_string(wire::min_mtu) + ".." +
               std::to_string(rs.cfg.mtu_max) + " (the rail's mtu_max)";
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
    lcore_command adopt = p_->adopt_command();
    if (std::string e = p_->on_lcores(adopt, -1); !e.empty()) {
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
    lcore_command adopt = p_->adopt_command();
    if (std::string e = p_->on_lcores(adopt, -1); !e.empty()) {
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
    return p_->on_lcores(c, rail);
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
    if (rc.mtu < wire::min_mtu || rc.mtu > wire::max_mtu) return "MTU " + std::to_string(rc.mtu) + " out of range";
    if (devargs.rfind("net_af_xdp", 0) == 0)
        return "af_xdp rails are set up at start-up (their XDP program is prepared then); add it to the config";
    const std::string dev = devargs.substr(0, devargs.find(','));
    std::uint16_t existing;
    if (rte_eth_dev_get_port_by_name(dev.c_str(), &existing) == 0) return "device " + dev + " is already in use";
    if (const int r = rte_dev_probe(devargs.c_str()); r != 0)
        return "cannot probe " + devargs + ": " + rte_strerror(-r);
    rail_config c = rc;
    c.port_name = dev;
    c.port_id = -1;
    const std::size_t i = p_->rails.size();
    std::unique_ptr<rail_static> rs;
    rte_device* device = device_of(dev);
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
            rte_eth_dev_stop(rs->port);
            rte_eth_dev_close(rs->port);
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
    if (std::string e = p_->on_lcores(attach, static_cast<int>(i)); !e.empty()) return e;
    lcore_command adopt = p_->adopt_command();
    if (std::string e = p_->on_lcores(adopt, -1); !e.empty()) return e;
    index = i;
    return {};
}

std::vector<route_status> daemon::routes() const {
    std::lock_guard lock(p_->ctl);
    std::vector<route_status> out;
    for (std::size_t i = 0; i < p_->routes.size(); ++i) {
        route_status s;
        static_cast<route_config&>(s) = p_->routes[i];
        if (p_->fib_now) {
            s.packets = p_->fib_now->total(static_cast<std::uint32_t>(i), 0);
            s.bytes = p_->fib_now->total(static_cast<std::uint32_t>(i), 1);
        }
        out.push_back(s);
    }
    return out;
}

std::string daemon::add_route(const route_config& r) {
    std::lock_guard lock(p_->ctl);
    for (const route_config& x : p_->routes)
        if (x.prefix == r.prefix && x.len == r.len)
            return "route " + format_prefix(r.prefix, r.len) + " exists (by rail " + x.rail + "); delete it first";
    std::vector<route_config> next = p_->routes;
    next.push_back(r);
    return p_->publish_routes(std::move(next));
}

std::string daemon::remove_route(std::uint32_t prefix, unsigned len) {
    std::lock_guard lock(p_->ctl);
    std::vector<route_config> next = p_->routes;
    const auto it = std::find_if(next.begin(), next.end(), [&](const route_config& x) { return x.prefix == prefix && x.len == len; });
    if (it == next.end()) return "no route " + format_prefix(prefix, len);
    next.erase(it);
    return p_->publish_routes(std::move(next));
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
    auto busy = [&] {
        const unsigned n = rs.active_jobs.load();
        return n ? "rail " + rs.cfg.name + " carries " + std::to_string(n) + " job(s); remove it between jobs" : std::string();
    };
    if (std::string e = busy(); !e.empty()) return e;
    // Stop advertising it and refuse JOINs on it, then make sure no job
    // slipped in meanwhile; if one did, put the rail back.
    rs.active = false;
    p_->rebuild_ack();
    lcore_command adopt = p_->adopt_command();
    std::string e = p_->on_lcores(adopt, -1);
    if (e.empty()) e = busy();
    if (!e.empty()) {
        rs.active = true;
        p_->rebuild_ack();
        lcore_command back = p_->adopt_command();
        p_->on_lcores(back, -1);
        return e;
    }
    lcore_command detach;
    detach.k = lcore_command::kind::detach;
    detach.rail = static_cast<int>(i);
    if (std::string d = p_->on_lcores(detach, static_cast<int>(i)); !d.empty()) return d;
    rte_eth_dev_stop(rs.port);
    rte_eth_dev_close(rs.port);
    drain_ring(rs);
    // Datagrams it received may still wait on other rails (routed): then
    // its pools stay until railgated ends.
    if (rte_mempool_full(rs.pool) && rte_mempool_full(rs.hdr_pool)) free_memory(rs);
    rs.closed = true;
    // Rails that came from --vdev at start-up stay known to the EAL; hot-
    // plugged ones are unplugged (a tap's interface disappears).
    if (rs.hotplugged && rs.device) rte_dev_remove(rs.device);
    return {};
}

} // namespace railgate::net
