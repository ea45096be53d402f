#include "client/railgate/verbs_transport.hpp"

#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "dataplane/proto/ipv4.hpp"
#include "dataplane/proto/parse.hpp"
#include "dataplane/verbs/ll_ring.hpp"

namespace railgate::client {
namespace {

using verbs::ctl_bytes;
using verbs::ctl_sends;
using verbs::index_of;
using verbs::kind_of;
using verbs::make_wr_id;
using verbs::rq_depth;
using verbs::sq_depth;
using verbs::wr_kind;

// What a connect attempt ran into: the reason, and whether it was only
// silence (no event in time, or the CM's own -ETIMEDOUT), which a new
// attempt may get past; anything else (a REJ from railgated, no device)
// another attempt would meet again.
struct connect_failure : std::runtime_error {
    bool no_answer;
    connect_failure(const std::string& what, bool silence) : std::runtime_error(what), no_answer(silence) {}
};

// One connect attempt's time: `window` from `start`.
struct attempt_clock {
    std::chrono::steady_clock::time_point start;
    std::chrono::milliseconds window;
    std::chrono::steady_clock::time_point deadline() const { return start + window; }
    int left_ms() const {
        return static_cast<int>(std::max<std::int64_t>(
            1, std::chrono::duration_cast<std::chrono::milliseconds>(deadline() - std::chrono::steady_clock::now()).count()));
    }
};

// Waits until the attempt's deadline for a CM event of type `want`; throws
// connect_failure if another came or none. Calls `meanwhile` (if set)
// every 50 ms of the wait.
void expect_event(rdma_event_channel* ch, rdma_cm_event_type want, const attempt_clock& clock,
                  const std::string& where, const std::function<void()>& meanwhile, const char* hint = "",
                  verbs::cm_hello* peer = nullptr) {
    const auto deadline = clock.deadline();
    rdma_cm_event* e = nullptr;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        e = verbs::next_event(ch, meanwhile ? std::min(left, std::chrono::milliseconds(50)) : left);
        if (e || !meanwhile) break;
        meanwhile();
    }
    if (!e) throw connect_failure(where + ": no answer within " + std::to_string(clock.window.count()) + " ms" + hint, true);
    const rdma_cm_event_type got = e->event;
    const int status = e->status;
    if (peer) *peer = verbs::decode_cm_private(e->param.conn.private_data, e->param.conn.private_data_len);
    rdma_ack_cm_event(e);
    if (got == want) return;
    if (got == RDMA_CM_EVENT_REJECTED)
        throw connect_failure(where + ": railgated refused the connection (is the address a verbs rail, and the port right?)",
                              false);
    throw connect_failure(where + ": " + rdma_event_str(got) + " (status " + std::to_string(status) + ")" + hint,
                          status == -ETIMEDOUT);
}

} // namespace

// One rail: members in creation order, so the QP goes first on teardown.
struct verbs_transport::rail {
    verbs::cm_channel_ptr ch;
    verbs::cm_id_ptr id;
    verbs::pd_ptr pd;
    verbs::comp_channel_ptr comp;
    verbs::region_memory ctl; // rq_depth receive buffers, then ctl_sends send buffers
    verbs::mr_ptr ctl_mr;
    verbs::region_memory data; // pool slots: contributions leave from here, results land here
    verbs::mr_ptr data_mr;
    verbs::eager_rings eager; // on() when railgated took the offer: small chunks both ways
    std::unique_ptr<verbs::queue_pair> qp;
    bool connected = false;

    bool have_peer = false;
    std::uint64_t regions = 0; // REGIONs received
    wire::region_body peer{};
    std::uint16_t pool = 0;
    std::uint32_t chunk = 0;
    struct slot_state {
        bool busy = false;
        wire::header h; // the contribution in flight: the result's header
    };
    std::vector<slot_state> slots;
    verbs::send_ledger sends{sq_depth};
    unsigned ctl_next = 0, ctl_busy = 0;
    std::vector<std::uint32_t> repost; // receive buffers handed out by the last recv()
    std::vector<ibv_wc> stash;         // completions wait() polled after arming the CQ
    std::string failed;                // a completion error: the rail is dead
    bool failure_told = false;
    wire::header last_join{};          // for an ERROR about a dead rail

    ~rail() {
        if (connected) rdma_disconnect(id.get());
    }
    std::uint8_t* recv_buf(std::size_t i) const noexcept { return static_cast<std::uint8_t*>(ctl.p) + i * ctl_bytes; }
    std::uint8_t* send_buf(std::size_t i) const noexcept { return recv_buf(rq_depth + i); }
    std::uint8_t* slot_buf(std::size_t s) const noexcept { return static_cast<std::uint8_t*>(data.p) + s * chunk; }

    bool post_recv(std::uint32_t i) noexcept {
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(recv_buf(i)), static_cast<std::uint32_t>(ctl_bytes), ctl_mr->lkey};
        ibv_recv_wr wr{};
        wr.wr_id = make_wr_id(wr_kind::recv, i);
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        return ibv_post_recv(qp->qp(), &wr, &bad) == 0;
    }

    bool post(std::uint64_t wr_id, ibv_wr_opcode op, const void* local, std::uint32_t len, std::uint32_t lkey,
              std::uint64_t raddr = 0, std::uint32_t imm = 0, std::uint32_t rkey = 0) noexcept {
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(local), len, lkey};
        ibv_send_wr wr{};
        wr.wr_id = make_wr_id(wr_kind::send, sends.next_seq());
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = op;
        wr.send_flags = (sends.signal_next(kind_of(wr_id) == wr_kind::ctl_send) ? IBV_SEND_SIGNALED : 0) |
                        (len <= qp->max_inline() ? IBV_SEND_INLINE : 0);
        if (op != IBV_WR_SEND) {
            wr.imm_data = htonl(imm);
            wr.wr.rdma.remote_addr = raddr;
            wr.wr.rdma.rkey = op == IBV_WR_RDMA_WRITE ? rkey : peer.rkey;
        }
        ibv_send_wr* bad = nullptr;
        if (ibv_post_send(qp->qp(), &wr, &bad)) return false;
        sends.posted(wr_id);
        return true;
    }

    // The next entry of the eager stream: imm, a length word of `len` and
    // `bytes` bytes of payload (len == bytes but in write_raw_eager).
    bool post_eager(std::uint32_t imm, const void* payload, std::uint32_t len, std::uint32_t bytes) noexcept {
        const verbs::eager_rings::staged e = eager.stage(imm, payload, bytes);
        if (len != bytes) e.words[1] = verbs::ll::word(len, verbs::ll::flag_of(eager.out_seq));
        if (!post(make_wr_id(wr_kind::data, 0), IBV_WR_RDMA_WRITE, e.words, e.bytes, eager.out_mr->lkey, e.raddr, 0,
                  eager.peer_rkey))
            return false;
        eager.sent();
        return true;
    }

    // Railgated's eager entries, in order, as results (or counted drops).
    unsigned poll_eager(rx_msg* out, unsigned max, std::uint64_t& dropped) noexcept {
        unsigned got = 0;
        while (got < max) {
            verbs::ll::entry en;
            std::uint8_t payload[verbs::ll::max_payload];
            const verbs::ll::status st = eager.take(en, payload);
            if (st == verbs::ll::status::empty) break;
            const unsigned s = wire::verbs_imm_slot(en.imm);
            if (st == verbs::ll::status::bad || s >= pool || !slots[s].busy ||
                wire::verbs_imm_gen(en.imm) != (slots[s].h.gen & 0xffffu) ||
                en.len != std::size_t{slots[s].h.count} * wire::dtype_size(slots[s].h.dt)) {
                ++dropped;
                continue;
            }
            std::memcpy(slot_buf(s), payload, en.len);
            rx_msg& m = out[got++];
            m = rx_msg{};
            m.h = slots[s].h;
            m.h.type = wire::msg_type::result;
            m.h.flags = 0;
            m.frag[0] = slot_buf(s);
            m.frag_len[0] = en.len;
            slots[s].busy = false;
        }
        return got;
    }

    bool send_ctl(const wire::header& h, const void* body, std::size_t len) noexcept {
        if (ctl_busy >= ctl_sends || sends.full() || wire::header_bytes + len > ctl_bytes) return false;
        std::uint8_t* b = send_buf(ctl_next);
        wire::encode_header(h, b);
        if (len) std::memcpy(b + wire::header_bytes, body, len);
        if (!post(make_wr_id(wr_kind::ctl_send, ctl_next), IBV_WR_SEND, b,
                  static_cast<std::uint32_t>(wire::header_bytes + len), ctl_mr->lkey))
            return false;
        ctl_next = (ctl_next + 1) % ctl_sends;
        ++ctl_busy;
        return true;
    }

    // After JOIN_ACK: the slot buffer the results land in, announced to
    // railgated with REGION (again for a repeated JOIN_ACK).
    bool set_up_region(const wire::header& ack_h, const wire::join_ack_body& ack) {
        const std::size_t bytes = std::size_t{ack.pool_size} * ack.chunk_bytes;
        if (!data_mr || data.bytes != bytes) {
            data_mr.reset();
            data = verbs::region_memory(bytes, -1);
            data_mr.reset(ibv_reg_mr(pd.get(), data.p, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
            if (!data_mr) return false;
            pool = ack.pool_size;
            chunk = ack.chunk_bytes;
            slots.assign(pool, {});
        }
        wire::header h = last_join;
        h.type = wire::msg_type::region;
        h.job_id = ack_h.job_id;
        std::uint8_t b[wire::region_body_bytes];
        wire::encode_region_body({reinterpret_cast<std::uintptr_t>(data.p), data_mr->rkey,
                                  static_cast<std::uint32_t>(bytes)},
                                 b);
        return send_ctl(h, b, sizeof b);
    }
};

namespace {

// One attempt, of at most `window`.
std::unique_ptr<verbs_transport::rail> connect_once(std::uint32_t ip, std::uint16_t port, const verbs_options& o,
                                                    std::chrono::milliseconds window, const std::string& where,
                                                    const std::function<void()>& meanwhile) {
    const attempt_clock clock{std::chrono::steady_clock::now(), window};
    auto r = std::make_unique<verbs_transport::rail>();
    r->ch.reset(rdma_create_event_channel());
    if (!r->ch)
        throw std::runtime_error(where + ": no RDMA CM (" + std::strerror(errno) +
                                 "): is rdma_ucm loaded and /dev/infiniband/rdma_cm present?");
    rdma_cm_id* id = nullptr;
    if (rdma_create_id(r->ch.get(), &id, nullptr, RDMA_PS_TCP))
        throw std::runtime_error(where + ": rdma_create_id: " + std::strerror(errno));
    r->id.reset(id);
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(port);
    dst.sin_addr.s_addr = htonl(ip);
    if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), clock.left_ms()))
        throw std::runtime_error(where + ": rdma_resolve_addr: " + std::strerror(errno));
    expect_event(r->ch.get(), RDMA_CM_EVENT_ADDR_RESOLVED, clock, where, meanwhile,
                 " (address resolution: is there an RDMA device with a route there?)");
    if (rdma_resolve_route(id, clock.left_ms()))
        throw std::runtime_error(where + ": rdma_resolve_route: " + std::strerror(errno));
    expect_event(r->ch.get(), RDMA_CM_EVENT_ROUTE_RESOLVED, clock, where, meanwhile);
    // A GID index given must be one of the address this connection is
    // made at (on RoCE): otherwise railgated's QP drops every packet and
    // the connection fails only when its retries run out.
    if (const sockaddr* src = rdma_get_local_addr(id); o.qp.gid_index >= 0 && src && src->sa_family == AF_INET)
        if (std::string e = verbs::check_gid(id->verbs, id->port_num, o.qp.gid_index,
                                             ntohl(reinterpret_cast<const sockaddr_in*>(src)->sin_addr.s_addr));
            !e.empty())
            throw std::runtime_error(where + ": " + e + " (RAILGATE_IB_GID_INDEX, --gid-index, gid_index)");
    r->pd.reset(ibv_alloc_pd(id->verbs));
    r->comp.reset(ibv_create_comp_channel(id->verbs));
    if (!r->pd || !r->comp) throw std::runtime_error(where + ": cannot allocate a PD or completion channel");
    verbs::set_nonblocking(r->comp->fd);
    r->ctl = verbs::region_memory((rq_depth + ctl_sends) * ctl_bytes, -1);
    r->ctl_mr.reset(ibv_reg_mr(r->pd.get(), r->ctl.p, r->ctl.bytes, verbs::local_write));
    if (!r->ctl_mr) throw std::runtime_error(where + ": ibv_reg_mr: " + std::strerror(errno));
    verbs::qp_settings s = o.qp;
    s.sq_depth = sq_depth;
    s.rq_depth = rq_depth;
    r->qp = std::make_unique<verbs::queue_pair>(id, r->pd.get(), r->comp.get(), s);
    if (std::string e = r->qp->move_to(IBV_QPS_INIT); !e.empty()) throw std::runtime_error(where + ": " + e);
    for (std::uint32_t i = 0; i < rq_depth; ++i)
        if (!r->post_recv(i)) throw std::runtime_error(where + ": ibv_post_recv failed");
    verbs::cm_hello hello;
    hello.path_mtu = verbs::port_path_mtu(id, o.qp.path_mtu);
    if (o.eager_rings) {
        try {
            r->eager.open(r->pd.get(), -1, hello);
        } catch (const std::exception& e) {
            throw std::runtime_error(where + ": " + e.what());
        }
    }
    std::uint8_t priv[verbs::cm_private_ll_bytes];
    rdma_conn_param p{};
    p.private_data = priv;
    p.private_data_len = static_cast<std::uint8_t>(verbs::encode_cm_private(hello, priv));
    p.qp_num = r->qp->qp()->qp_num;
    p.retry_count = o.qp.retry_count;
    p.rnr_retry_count = o.qp.rnr_retry;
    if (rdma_connect(id, &p)) throw std::runtime_error(where + ": rdma_connect: " + std::strerror(errno));
    // railgated answers with the path MTU both ends use, and its eager ring
    // when it takes ours.
    verbs::cm_hello theirs;
    expect_event(r->ch.get(), RDMA_CM_EVENT_CONNECT_RESPONSE, clock, where, meanwhile, "", &theirs);
    if (!theirs.path_mtu) throw std::runtime_error(where + ": the peer is not railgated (no RGV1 connection data)");
    r->qp->cap_path_mtu(theirs.path_mtu);
    if (theirs.ll && r->eager.on()) r->eager.attach(theirs);
    else r->eager.close(); // declined (a railgated that sleeps, or older)
    std::string e = r->qp->move_to(IBV_QPS_RTR);
    if (e.empty()) e = r->qp->move_to(IBV_QPS_RTS);
    if (!e.empty()) throw std::runtime_error(where + ": " + e);
    if (rdma_establish(id)) throw std::runtime_error(where + ": rdma_establish: " + std::strerror(errno));
    r->connected = true;
    return r;
}

// A rail's connection, in as many attempts as connect_attempts() makes of
// the connect timeout: each that got no answer is told (o.on_connect_retry)
// and dropped for a new one. Throws std::runtime_error with the reason.
std::unique_ptr<verbs_transport::rail> connect_rail(std::uint32_t ip, std::uint16_t port, const verbs_options& o,
                                                    const std::function<void()>& meanwhile = {}) {
    const std::string where = "verbs connect to " + net::format_ipv4(ip) + ":" + std::to_string(port);
    const std::vector<std::chrono::milliseconds> w = verbs::connect_attempts(o.connect_timeout, o.connect_attempt);
    for (std::size_t i = 0;; ++i) {
        try {
            return connect_once(ip, port, o, w[i], where, meanwhile);
        } catch (const connect_failure& e) {
            if (!e.no_answer) throw;
            if (i + 1 == w.size()) {
                if (w.size() == 1) throw;
                throw std::runtime_error(std::string(e.what()) + ", the last of " + std::to_string(w.size()) +
                                         " attempts in " + std::to_string(o.connect_timeout.count()) + " ms");
            }
            if (o.on_connect_retry)
                o.on_connect_retry(std::string(e.what()) + "; connecting again (attempt " + std::to_string(i + 2) +
                                   " of " + std::to_string(w.size()) + ", " + std::to_string(w[i + 1].count()) + " ms)");
        }
    }
}

} // namespace

verbs_transport::verbs_transport(std::uint32_t server_ip, std::uint16_t port, const verbs_options& o) : o_(o) {
    if (const char* e = std::getenv("RAILGATE_VERBS_LL"); e && std::strcmp(e, "0") == 0) o_.eager_rings = false;
    if (std::string e = verbs::settings_from_env(o_.qp); !e.empty()) throw std::runtime_error("verbs transport: " + e);
    if (!o_.qp.ack_timeout) o_.qp.ack_timeout = verbs::default_ack_timeout(o_.peer_timeout, o_.qp.retry_count);
    rails_.push_back(connect_rail(server_ip, port, o_));
    addrs_.push_back({server_ip, port});
}

std::string verbs_transport::reconnect() {
    std::string errs;
    unsigned up = 0;
    for (std::size_t i = 0; i < rails_.size(); ++i) {
        const wire::header join = rails_[i]->last_join;
        rails_[i].reset(); // the old QP first: its MRs with it
        try {
            rails_[i] = connect_rail(addrs_[i].ip, addrs_[i].port, o_);
            ++up;
        } catch (const std::exception& e) {
            rails_[i] = std::make_unique<rail>();
            rails_[i]->failed = e.what();
            errs += (errs.empty() ? "" : "; ") + std::string(e.what());
        }
        rails_[i]->last_join = join;
    }
    return up ? std::string() : errs;
}

verbs_transport::~verbs_transport() = default;

unsigned verbs_transport::n_rails() const noexcept { return static_cast<unsigned>(rails_.size()); }

std::string verbs_transport::open_rails(std::span<const wire::rail_entry> rails, const std::function<void()>& meanwhile) {
    try {
        for (std::size_t i = rails_.size(); i < rails.size(); ++i) {
            rails_.push_back(connect_rail(rails[i].ip, rails[i].udp_port, o_, meanwhile));
            rails_.back()->last_join = rails_[0]->last_join;
            addrs_.push_back({rails[i].ip, rails[i].udp_port});
        }
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

unsigned verbs_transport::send(unsigned ri, const tx_msg* msgs, unsigned n) noexcept {
    if (ri >= rails_.size()) return 0;
    rail& r = *rails_[ri];
    if (!r.failed.empty()) return n; // dead: recv() reports it
    unsigned i = 0;
    for (; i < n; ++i) {
        const tx_msg& m = msgs[i];
        if (m.h.type != wire::msg_type::contrib) {
            if (m.h.type == wire::msg_type::join) r.last_join = m.h;
            if (!r.send_ctl(m.h, m.payload, m.bytes)) break;
            continue;
        }
        // RC delivers: a retransmit would only be a duplicate.
        if (m.h.flags & wire::flag_retransmit) continue;
        if (!r.have_peer || !r.data_mr || r.sends.full()) break;
        const unsigned s = m.h.slot;
        if (s >= r.pool || m.bytes > r.chunk) {
            ++dropped_;
            continue;
        }
        if (r.eager.on() && m.bytes <= verbs::ll::max_payload) {
            if (!r.post_eager(wire::verbs_imm(m.h.slot, m.h.gen), m.payload, m.bytes, m.bytes)) break;
            r.slots[s].busy = true;
            r.slots[s].h = m.h;
            continue;
        }
        std::memcpy(r.slot_buf(s), m.payload, m.bytes);
        if (!r.post(make_wr_id(wr_kind::data, s), IBV_WR_RDMA_WRITE_WITH_IMM, r.slot_buf(s), m.bytes,
                    r.data_mr->lkey, r.peer.addr + std::uint64_t{s} * r.chunk, wire::verbs_imm(m.h.slot, m.h.gen)))
            break;
        r.slots[s].busy = true;
        r.slots[s].h = m.h;
    }
    return i;
}

unsigned verbs_transport::recv(unsigned ri, rx_msg* out, unsigned max) noexcept {
    if (ri >= rails_.size()) return 0;
    rail& r = *rails_[ri];
    for (std::uint32_t b : r.repost) r.post_recv(b);
    r.repost.clear();
    if (!r.failed.empty()) {
        // Tell the worker once, as railgated would: an ERROR for its job.
        if (r.failure_told || max == 0) return 0;
        r.failure_told = true;
        rx_msg& m = out[0];
        m = rx_msg{};
        // The rail is gone for this worker (its QP failed): as railgated
        // would say it, rail_down naming this rail.
        m.h = wire::error_header(r.last_join, wire::error_code::rail_down, std::uint64_t{1} << ri, transport_error_gen);
        m.frag[0] = reinterpret_cast<const std::uint8_t*>(r.failed.data());
        m.frag_len[0] = static_cast<std::uint32_t>(r.failed.size());
        return 1;
    }
    ibv_wc wc[32];
    int n = 0;
    if (!r.stash.empty()) {
        n = static_cast<int>(std::min<std::size_t>({r.stash.size(), max, 32}));
        std::copy_n(r.stash.begin(), n, wc);
        r.stash.erase(r.stash.begin(), r.stash.begin() + n);
    } else {
        n = ibv_poll_cq(r.qp->cq(), static_cast<int>(std::min(max, 32u)), wc);
    }
    unsigned got = 0;
    for (int k = 0; k < n; ++k) {
        const ibv_wc& c = wc[k];
        const std::uint64_t idx = index_of(c.wr_id);
        if (kind_of(c.wr_id) == wr_kind::send)
            r.sends.complete(idx, [&](std::uint64_t tag) {
                if (kind_of(tag) == wr_kind::ctl_send) --r.ctl_busy;
            });
        if (c.status != IBV_WC_SUCCESS) {
            if (r.failed.empty()) r.failed = "verbs rail " + std::to_string(ri) + " failed: " + verbs::describe(c);
            continue;
        }
        if (kind_of(c.wr_id) != wr_kind::recv) continue;
        const auto b = static_cast<std::uint32_t>(idx);
        if (c.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
            const std::uint32_t imm = ntohl(c.imm_data);
            const unsigned s = wire::verbs_imm_slot(imm);
            r.post_recv(b); // no data in the receive buffer
            if (s >= r.pool || !r.slots[s].busy || wire::verbs_imm_gen(imm) != (r.slots[s].h.gen & 0xffffu) ||
                c.byte_len != std::size_t{r.slots[s].h.count} * wire::dtype_size(r.slots[s].h.dt)) {
                ++dropped_;
                continue;
            }
            rx_msg& m = out[got++];
            m = rx_msg{};
            m.h = r.slots[s].h;
            m.h.type = wire::msg_type::result;
            m.h.flags = 0;
            m.frag[0] = r.slot_buf(s);
            m.frag_len[0] = c.byte_len;
            r.slots[s].busy = false;
            continue;
        }
        wire::header h;
        std::span<const std::uint8_t> body;
        if (const drop_reason why = wire::parse_server_message(r.recv_buf(b), c.byte_len, h, body);
            why != drop_reason::none) {
            note_foreign(r.recv_buf(b), c.byte_len, why);
            ++dropped_;
            r.post_recv(b);
            continue;
        }
        if (h.type == wire::msg_type::region) {
            r.peer = wire::decode_region_body(body.data());
            r.have_peer = true;
            ++r.regions;
            r.post_recv(b);
            continue;
        }
        if (h.type == wire::msg_type::join_ack) {
            wire::join_ack_body ack;
            if (!wire::decode_join_ack_body(body, ack) || ack.pool_size > wire::verbs_max_pool ||
                !r.set_up_region(h, ack)) {
                ++dropped_;
                r.post_recv(b);
                continue;
            }
        }
        rx_msg& m = out[got++];
        m = rx_msg{};
        m.h = h;
        m.frag[0] = body.data();
        m.frag_len[0] = static_cast<std::uint32_t>(body.size());
        r.repost.push_back(b);
    }
    if (r.eager.on()) got += r.poll_eager(out + got, max - got, dropped_);
    return got;
}

std::uint64_t verbs_transport::dropped() const noexcept { return dropped_; }

// Arms every rail's CQ, then polls once more: completions that slipped in
// before the arming would raise no event, so they are stashed for recv().
// With eager rings a result raises no completion: poll, yielding the CPU.
void verbs_transport::wait(std::chrono::microseconds max) noexcept {
    if (std::any_of(rails_.begin(), rails_.end(), [](const auto& r) { return r->eager.on() && r->failed.empty(); })) {
        sched_yield();
        return;
    }
    std::vector<pollfd> fds;
    for (auto& r : rails_) {
        if (!r->qp) continue; // a rail that could not be reconnected
        ibv_req_notify_cq(r->qp->cq(), 0);
        ibv_wc wc[16];
        const int n = ibv_poll_cq(r->qp->cq(), 16, wc);
        if (n > 0) r->stash.insert(r->stash.end(), wc, wc + n);
        if (!r->stash.empty() || !r->failed.empty()) return;
        fds.push_back({r->comp->fd, POLLIN, 0});
    }
    poll(fds.data(), fds.size(), static_cast<int>(std::max<long>(1, max.count() / 1000)));
    for (auto& r : rails_) {
        if (!r->comp) continue;
        ibv_cq* cq;
        void* ctx;
        while (ibv_get_cq_event(r->comp.get(), &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
    }
}

bool verbs_transport::write_raw(unsigned ri, unsigned slot, std::uint32_t imm, std::uint32_t bytes) noexcept {
    if (ri >= rails_.size()) return false;
    rail& r = *rails_[ri];
    if (!r.have_peer || !r.data_mr || slot >= r.pool || bytes > r.chunk || r.sends.full()) return false;
    return r.post(make_wr_id(wr_kind::data, slot), IBV_WR_RDMA_WRITE_WITH_IMM, r.slot_buf(slot), bytes,
                  r.data_mr->lkey, r.peer.addr + std::uint64_t{slot} * r.chunk, imm);
}

bool verbs_transport::write_raw_eager(unsigned ri, unsigned slot, std::uint32_t imm, std::uint32_t len,
                                      std::uint32_t bytes) noexcept {
    if (ri >= rails_.size()) return false;
    rail& r = *rails_[ri];
    if (!r.eager.on() || !r.data_mr || slot >= r.pool || bytes > verbs::ll::max_payload || bytes > r.chunk ||
        r.sends.full())
        return false;
    return r.post_eager(imm, r.slot_buf(slot), len, bytes);
}

bool verbs_transport::peer_memory(unsigned ri, bool ring, wire::region_body& out) const noexcept {
    if (ri >= rails_.size()) return false;
    const rail& r = *rails_[ri];
    if (ring) {
        if (!r.eager.on()) return false;
        out = {r.eager.peer_addr, r.eager.peer_rkey, static_cast<std::uint32_t>(verbs::ll::ring_bytes)};
        return true;
    }
    out = r.peer;
    return r.have_peer;
}

std::uint64_t verbs_transport::regions_received(unsigned ri) const noexcept {
    return ri < rails_.size() ? rails_[ri]->regions : 0;
}

bool verbs_transport::own_memory(unsigned ri, wire::region_body& out) const noexcept {
    if (ri >= rails_.size() || !rails_[ri]->data_mr) return false;
    const rail& r = *rails_[ri];
    out = {reinterpret_cast<std::uintptr_t>(r.data.p), r.data_mr->rkey, static_cast<std::uint32_t>(r.data.bytes)};
    return true;
}

bool verbs_transport::write_raw_to(unsigned ri, const wire::region_body& to, std::uint32_t bytes) noexcept {
    if (ri >= rails_.size()) return false;
    rail& r = *rails_[ri];
    if (!r.data_mr || bytes > std::size_t{r.pool} * r.chunk || r.sends.full()) return false;
    return r.post(make_wr_id(wr_kind::data, 0), IBV_WR_RDMA_WRITE, r.slot_buf(0), bytes, r.data_mr->lkey, to.addr, 0,
                  to.rkey);
}

std::string verbs_transport::describe(unsigned ri) const {
    if (ri >= rails_.size()) return "";
    const rail& r = *rails_[ri];
    const auto out = std::count_if(r.slots.begin(), r.slots.end(), [](const rail::slot_state& x) { return x.busy; });
    std::string t = (r.have_peer ? "REGION had (" + std::to_string(r.regions) + ")" : std::string("no REGION yet")) +
                    ", " + std::to_string(out) + " of " + std::to_string(r.pool) + " slots out, " +
                    std::to_string(r.sends.in_flight()) + " sends posted and not yet completed, " +
                    std::to_string(r.ctl_busy) + " control sends in flight";
    if (r.qp) {
        static constexpr const char* states[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
        ibv_qp_attr a{};
        ibv_qp_init_attr ia{};
        if (ibv_query_qp(r.qp->qp(), &a, IBV_QP_STATE, &ia) == 0)
            t += std::string(", QP ") + (a.qp_state <= IBV_QPS_ERR ? states[a.qp_state] : "UNKNOWN");
    }
    if (!r.failed.empty()) t += ", " + r.failed;
    return t;
}

bool verbs_transport::eager(unsigned ri) const noexcept { return ri < rails_.size() && rails_[ri]->eager.on(); }

verbs::qp_timers verbs_transport::qp_timers() const noexcept {
    return rails_[0]->qp ? rails_[0]->qp->timers() : verbs::qp_timers{};
}
int verbs_transport::gid_index() const noexcept { return rails_[0]->qp ? rails_[0]->qp->gid_index() : -1; }
unsigned verbs_transport::path_mtu() const noexcept { return rails_[0]->qp ? rails_[0]->qp->path_mtu() : 0; }

} // namespace railgate::client
