#include "dataplane/net/handlers.hpp"

#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <optional>

#include <rte_prefetch.h>

#include "dataplane/net/gateway.hpp"
#include "dataplane/net/tx.hpp"
#include "dataplane/proto/ipv4.hpp"

namespace railgate::net::detail {
namespace {

using table = aggregator::table;

// Who sent a datagram, as the job table binds ranks: address and port
// (never 0: 0 means "checked already").
std::uint64_t peer_key(const frame::endpoint& e) noexcept {
    return std::uint64_t{1} << 48 | std::uint64_t{e.ip} << 16 | e.udp_port;
}

std::uint64_t ms_of(const rail_state& rs, std::uint64_t tsc) noexcept { return tsc / rs.ms_tsc; }

// "2" or "2,5,7" (at most 16 named, then "...").
void ranks_text(char* out, std::size_t n, std::uint64_t ranks) noexcept {
    std::size_t at = 0;
    unsigned shown = 0;
    out[0] = 0;
    for (unsigned r = 0; r < 64 && at < n; ++r) {
        if (!(ranks >> r & 1)) continue;
        const int w = shown == 16 ? std::snprintf(out + at, n - at, ",...")
                                  : std::snprintf(out + at, n - at, shown ? ",%u" : "%u", r);
        if (w < 0) break;
        at += static_cast<std::size_t>(w);
        if (++shown > 16) break;
    }
}

// What the control plane reads of the rail's jobs: how many, and the most
// rails one lists (a rail removal waits for none to list it).
void publish_jobs(rail_state& rs) noexcept {
    rs.s.active_jobs.store(rs.agg.active_jobs(), std::memory_order_relaxed);
    rs.s.job_rails.store(rs.agg.most_job_rails(), std::memory_order_relaxed);
}

// Tells every joined member of j (but `skip`) why the job ends, then frees
// it and everything it held.
// The reason is remembered (job_table::remember_end) for a member whose
// copy is lost: answer_unknown tells it again.
void end_job(rail_state& rs, agg::job& j, wire::error_code code, std::uint64_t detail, std::string_view text,
             int skip = -1) noexcept {
    const std::uint64_t told = j.joined & ~(skip >= 0 ? std::uint64_t{1} << skip : 0);
    rs.agg.jobs_table().remember_end(j, told, code, detail, text, rte_rdtsc());
    for (unsigned r = 0; r < j.world; ++r) {
        if (!(told >> r & 1)) continue;
        rte_mbuf* e = rte_pktmbuf_alloc(rs.s.pool);
        if (!e) {
            rs.ctr.drop(drop_reason::no_mbuf);
            continue;
        }
        wire::header h;
        h.dt = j.dt;
        h.job_id = j.id;
        h.job_token = j.token;
        h.rank = static_cast<std::uint16_t>(r);
        h.world_size = j.world;
        send_error(rs, e, j.x.members[r], h, code, text, detail, j.instance);
    }
    rs.agg.release(j);
    publish_jobs(rs);
}

// Whether this rail may answer a message it has no job for (an unknown
// job's ERROR, a repeated LEAVE's ACK): at most once a millisecond, so that
// forged traffic cannot turn railgated into a reflector. Answering takes
// the millisecond.
bool may_answer(rail_state& rs) noexcept {
    if (rs.burst_tsc - rs.unknown_tsc < rs.ms_tsc) return false;
    rs.unknown_tsc = rs.burst_tsc;
    return true;
}

// A message for a job (or rank) this rail does not have, from someone who
// may be a member of it: a job railgated ended, or one a restarted
// railgated never saw. It is told, at most once a millisecond per rail, so
// that its worker fails at once instead of timing out: why the job ended
// when this rail ended it lately and the sender was one of its members
// (its ERROR then was lost), else that the job is gone. `instance`: the
// incarnation the message names (a PING's), or 0.
void answer_unknown(rail_state& rs, rte_mbuf* m, const frame::endpoint& to, const wire::header& h, drop_reason why,
                    std::uint32_t instance = 0) noexcept {
    count_drop(rs, m, why);
    if (!may_answer(rs)) return rte_pktmbuf_free(m);
    if (const agg::ended_job* e = rs.agg.jobs_table().ended(h, instance, rs.burst_tsc)) {
        wire::header eh = h;
        eh.dt = e->dt;
        bump(rs.ctr.ends_retold);
        return send_error(rs, m, to, eh, e->code, e->text(), e->detail, e->instance);
    }
    char t[wire::max_error_text];
    std::snprintf(t, sizeof t, "railgated has no job %u with rank %u on rail %s (it restarted, or ended the job)",
                  h.job_id, h.rank, rs.s.cfg.name.c_str());
    wire::header eh = h;
    eh.dt = wire::dtype_valid(static_cast<std::uint8_t>(h.dt)) ? h.dt : wire::dtype::fp32;
    // gen echoes what the worker sent: a PING carries its job's instance.
    send_error(rs, m, to, eh, wire::error_code::unknown_job, t, 0, h.gen);
}

// One version's worker on another's railgated: a JOIN (byte 1 in every
// version) of a version this railgated does not speak is answered in its
// own, as answer_unknown is rate-limited, so that the worker can say what
// is wrong instead of "no JOIN_ACK". Nothing else of it is read.
void answer_version(rail_state& rs, rte_mbuf* m, const frame::endpoint& to, std::uint8_t version) noexcept {
    count_drop(rs, m, drop_reason::rg_version);
    if (!may_answer(rs)) return rte_pktmbuf_free(m);
    char t[wire::max_error_text];
    wire::foreign_join_text(t, sizeof t, rs.s.cfg.name.c_str(), version);
    wire::header q;
    q.type = wire::msg_type::join;
    q.world_size = 1;
    send_error(rs, m, to, q, wire::error_code::protocol_version, t, version);
}

// A header-only answer (PONG, HELD) to the message h: m was reused as
// the reply, its railgate header at msg.
void send_header_answer(rail_state& rs, rte_mbuf* m, std::uint8_t* msg, wire::header a, wire::msg_type type,
                        std::uint32_t aux) noexcept {
    a.type = type;
    a.flags = 0;
    a.aux = aux;
    wire::encode_header(a, msg);
    send_udp(rs, m);
}

// The port verified the frame's UDP checksum (mbuf flags, where it can),
// or it is checked here; absent is wrong too.
bool checksum_ok(bool hw, const rte_mbuf* m) noexcept {
    const auto* p = rte_pktmbuf_mtod(m, const std::uint8_t*);
    if (hw) {
        const std::uint64_t f = m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK;
        const std::size_t l4 = frame::eth_bytes + frame::ipv4_bytes;
        if (f == RTE_MBUF_F_RX_L4_CKSUM_GOOD) return m->data_len > l4 + 7 && (p[l4 + 6] | p[l4 + 7]);
        if (f == RTE_MBUF_F_RX_L4_CKSUM_BAD) return false;
    }
    return frame::udp_checksum_ok(p, m->data_len);
}

// A contribution's integrity, asked when its slot is reduced (see
// agg::always_intact): verified by the port (mbuf flags, where it can), or
// its checksum checked here given its payload's ones' sum (the reduce
// computed it): only its headers are summed here. What can be checked
// without the payload was on arrival (plausible).
struct contribution_check {
    bool hw;
    static const std::uint8_t* udp(const rte_mbuf* m) noexcept {
        return rte_pktmbuf_mtod(m, const std::uint8_t*) + frame::eth_bytes + frame::ipv4_bytes;
    }
    bool verified(void* owner) const noexcept {
        const auto* m = static_cast<const rte_mbuf*>(owner);
        return hw && (m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_GOOD &&
               (udp(m)[6] | udp(m)[7]);
    }
    // On arrival: a checksum is there (a railgate datagram always has
    // one), the port did not find it wrong, and the headers are where the
    // check below sums them.
    static bool plausible(bool hw, const rte_mbuf* m) noexcept {
        const auto* p = rte_pktmbuf_mtod(m, const std::uint8_t*);
        if (m->data_len < frame::udp_frame_overhead + wire::header_bytes || (p[frame::eth_bytes] & 0x0f) != 5 ||
            !(udp(m)[6] | udp(m)[7]))
            return false;
        return !hw || (m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) != RTE_MBUF_F_RX_L4_CKSUM_BAD;
    }
    bool whole(void* owner) const noexcept {
        const auto* m = static_cast<const rte_mbuf*>(owner);
        return m->nb_segs == 1 && frame::udp_checksum_ok(rte_pktmbuf_mtod(m, const std::uint8_t*), m->data_len);
    }
    bool ok(void* owner, std::uint16_t payload_sum) const noexcept {
        const auto* m = static_cast<const rte_mbuf*>(owner);
        const auto* p = rte_pktmbuf_mtod(m, const std::uint8_t*);
        const std::uint16_t head = frame::add_sums(frame::udp_header_sum(p),
                                                   frame::ones_sum16(p + frame::udp_frame_overhead, wire::header_bytes));
        return frame::add_sums(head, payload_sum) == 0xffff;
    }
};

// Why a JOIN was refused, for the worker (and whoever reads its error).
void refusal_text(char* t, std::size_t n, const rail_state& rs, const wire::header& h, const wire::join_body& b,
                  const agg::join_result& jr) noexcept {
    const agg::job* j = rs.agg.find(h.job_id);
    const agg::lifecycle& life = rs.agg.jobs_table().life();
    switch (jr.err) {
    case wire::error_code::bad_request:
        if (h.aux && !wire::shape_valid(h.aux))
            std::snprintf(t, n, "JOIN names a malformed job shape 0x%08x (a chunk of 64..%u bytes in steps of 64, and "
                          "bit 31 for LAG)", h.aux, wire::max_chunk_bytes);
        else
            std::snprintf(t, n, "JOIN out of range: max_count 1..2^40 and pool 1..%u (asked %" PRIu64 ", %u)",
                          rs.agg.lim().max_pool, b.max_count, b.pool_size);
        return;
    case wire::error_code::shape_mismatch: {
        auto policy = [](bool lag) { return wire::policy_name(lag ? wire::rail_policy::lag : wire::rail_policy::rail); };
        const auto word = static_cast<std::uint32_t>(jr.detail);
        const unsigned mtu = rs.s.mtu_now.load(std::memory_order_relaxed);
        // 0 rails named: a worker before 2026-12-01 (the rails not compared).
        if (word)
            std::snprintf(t, n,
                          "job %u runs %u B chunks under policy %s over %u rails on rail %s; its first rail gave "
                          "this rank %u B under %s over %u rails (an MTU, policy or rail change came between the "
                          "ranks' JOINs there): the job cannot run, join it again",
                          h.job_id, wire::shape_chunk(word), policy(wire::shape_lag(word)), wire::shape_rails(word),
                          rs.s.cfg.name.c_str(), wire::shape_chunk(h.aux), policy(wire::shape_lag(h.aux)),
                          wire::shape_rails(h.aux));
        else if (const unsigned listed = wire::shape_rails(h.aux); listed && rs.agg.lim().rail_index >= listed)
            std::snprintf(t, n,
                          "rail %s is rail %u now; job %u's first rail listed %u rails (a rail was added or removed "
                          "while the job joined): join it again",
                          rs.s.cfg.name.c_str(), rs.agg.lim().rail_index, h.job_id, listed);
        else
            std::snprintf(t, n,
                          "rail %s's MTU %u carries chunks of at most %u B; job %u's first rail gave it %u B chunks "
                          "(the MTU was lowered while the job joined): join it again",
                          rs.s.cfg.name.c_str(), mtu, wire::chunk_bytes_for_mtu(mtu), h.job_id, wire::shape_chunk(h.aux));
        return;
    }
    case wire::error_code::job_in_use:
        std::snprintf(t, n, "job %u is in use by another job on rail %s (its token differs): choose another job id",
                      h.job_id, rs.s.cfg.name.c_str());
        return;
    case wire::error_code::world_mismatch:
        std::snprintf(t, n, "job %u has world size %u; this JOIN says %u", h.job_id, j ? j->world : 0, h.world_size);
        return;
    case wire::error_code::dtype_mismatch:
        std::snprintf(t, n, "job %u reduces %s; this JOIN says %s", h.job_id, j ? wire::dtype_name(j->dt).data() : "?",
                      wire::dtype_name(h.dt).data());
        return;
    case wire::error_code::max_count_mismatch:
        std::snprintf(t, n, "job %u has max_count %" PRIu64 "; this JOIN says %" PRIu64, h.job_id,
                      j ? j->max_count : 0, b.max_count);
        return;
    case wire::error_code::pool_mismatch:
        std::snprintf(t, n, "job %u has pool %u; this JOIN asks %u", h.job_id, j ? j->pool : 0, b.pool_size);
        return;
    case wire::error_code::rails_mismatch:
        std::snprintf(t, n, "job %u stripes around rails 0x%" PRIx64 "; this JOIN excludes 0x%x", h.job_id, jr.detail,
                      b.excluded_rails);
        return;
    case wire::error_code::op_mismatch:
        std::snprintf(t, n,
                      "job %u's ranks joined at operation %" PRIu64 "; this rank is at %u: they cannot be summed "
                      "together (a restart lost some ranks' last results; one operation ahead replays it)",
                      h.job_id, jr.detail, b.op);
        return;
    case wire::error_code::rank_taken: {
        const frame::endpoint& e = j ? j->x.members[h.rank] : frame::endpoint{};
        std::snprintf(t, n,
                      "rank %u of job %u is joined from %s:%u (heard %" PRIu64
                      " ms ago); it is replaced when that process restarts or is silent for %" PRIu64 " ms",
                      h.rank, h.job_id, ipv4_text(e.ip).s, e.udp_port, ms_of(rs, jr.detail),
                      ms_of(rs, life.stall));
        return;
    }
    case wire::error_code::rank_claimed:
        std::snprintf(t, n,
                      "job %u with this token ended %" PRIu64 " ms ago because two processes claimed one rank (the same "
                      "id and token run twice?); refused for %" PRIu64 " ms: give each run its own token",
                      h.job_id, ms_of(rs, jr.detail), ms_of(rs, life.assemble ? life.assemble : life.stall));
        return;
    case wire::error_code::too_many_pending:
        std::snprintf(t, n, "this address has %u jobs still assembling on rail %s (the limit); they expire after %" PRIu64
                      " ms", life.max_pending, rs.s.cfg.name.c_str(), ms_of(rs, life.assemble));
        return;
    case wire::error_code::job_table_full:
        std::snprintf(t, n, "job table full on rail %s (%u jobs)", rs.s.cfg.name.c_str(), rs.agg.lim().max_jobs);
        return;
    case wire::error_code::no_buffers: {
        const unsigned pool = b.pool_size ? b.pool_size : rs.agg.lim().default_pool;
        std::snprintf(t, n,
                      "rail %s cannot lend job %u %u buffers (pool %u x world %u) next to the %" PRIu64
                      " its jobs may hold (of %" PRIu64 "): ask for a smaller pool",
                      rs.s.cfg.name.c_str(), h.job_id, pool * h.world_size, pool, h.world_size,
                      rs.agg.buffers_admitted(), rs.agg.lim().buffer_budget);
        return;
    }
    default: std::snprintf(t, n, "%s", wire::error_name(jr.err).data());
    }
}

void handle_join(rail_state& rs, rte_mbuf* m, const wire::header& h, std::span<const std::uint8_t> body,
                 const frame::endpoint& from) noexcept {
    if (rs.closing) return free_drop(rs, m, drop_reason::join_refused);
    const wire::join_body b = wire::decode_join_body(body.data());
    if (rs.holding_joins) {
        // The lcores are taking a new advertisement one after the other
        // (daemon::impl::advertise): answered, it might list other rails,
        // or another chunk or policy, than the job's other rails do.
        bump(rs.ctr.join_errors);
        count_drop(rs, m, drop_reason::join_refused);
        char t[wire::max_error_text];
        std::snprintf(t, sizeof t, "railgated is changing its rails (a rail added or removed, an MTU or the policy "
                      "set); rail %s holds JOINs until every rail has: join again", rs.s.cfg.name.c_str());
        return send_error(rs, m, from, h, wire::error_code::rails_changing, t, 0, static_cast<std::uint32_t>(b.nonce));
    }
    // Results go back in the worker's DSCP (its traffic class), or the
    // rail's traffic_class when the worker sends 0; ECN-capable (ECT(0))
    // when the worker's JOIN is (never CE: a mark is the JOIN's own).
    frame::endpoint member = from;
    const bool ect = (from.tos & wire::ecn_mask) != 0;
    member.tos = static_cast<std::uint8_t>(from.tos & ~wire::ecn_mask);
    if (!member.tos) member.tos = static_cast<std::uint8_t>(rs.s.self.tos & ~wire::ecn_mask);
    if (ect) member.tos |= wire::ecn_ect0;
    const agg::peer who{peer_key(from), from.ip, b.nonce};
    const std::uint32_t down = rs.rails_down ? rs.rails_down->load(std::memory_order_relaxed) : 0;
    const bool lag = rs.policy == wire::rail_policy::lag;
    // A chunk the job's first rail asks for must fit this rail's port as it
    // is now (a lowered MTU moves the port once its larger jobs have left).
    const std::uint32_t carry = wire::chunk_bytes_for_mtu(rs.s.mtu_now.load(std::memory_order_relaxed));
    agg::join_result jr = rs.agg.join(h, b, member, who, rs.burst_tsc, lag, down, carry);
    if (jr.st == agg::join_status::takeover) {
        // The rank's process restarted (or its old one went silent): the
        // job as it was cannot go on; its other members are told, and this
        // JOIN starts it afresh.
        char t[wire::max_error_text];
        const bool behind = jr.err == wire::error_code::op_mismatch;
        if (behind)
            std::snprintf(t, sizeof t,
                          "rank %u of job %u is at operation %u, one behind the ranks joined (it lost that "
                          "operation's result): the job restarts at operation %u",
                          h.rank, h.job_id, b.op, b.op);
        else
            std::snprintf(t, sizeof t, "rank %u re-joined job %u from %s:%u as a new process; the job restarts", h.rank,
                          h.job_id, ipv4_text(from.ip).s, from.udp_port);
        bump(rs.ctr.takeovers);
        end_job(rs, table::as(jr.j), behind ? wire::error_code::op_mismatch : wire::error_code::rank_failed,
                behind ? b.op : h.rank, t, h.rank);
        jr = rs.agg.join(h, b, member, who, rs.burst_tsc, lag, down, carry);
    }
    if (jr.st == agg::join_status::clash) {
        // Two live processes claim the rank before the job has completed a
        // chunk: the same id and token started twice. Both are told.
        const frame::endpoint& e = table::as(jr.j).x.members[h.rank];
        char t[wire::max_error_text];
        const ipv4_text held(e.ip), now_from(from.ip);
        std::snprintf(t, sizeof t,
                      "two processes claim rank %u of job %u (%s:%u and %s:%u) before it started: the same job id "
                      "and token run twice? the job ends; give each run its own token",
                      h.rank, h.job_id, held.s, e.udp_port, now_from.s, from.udp_port);
        end_job(rs, table::as(jr.j), wire::error_code::rank_claimed, h.rank, t);
        bump(rs.ctr.join_errors);
        count_drop(rs, m, drop_reason::join_refused);
        return send_error(rs, m, from, h, jr.err, t, h.rank, static_cast<std::uint32_t>(b.nonce));
    }
    if (jr.st == agg::join_status::refused || jr.st == agg::join_status::takeover) {
        bump(rs.ctr.join_errors);
        count_drop(rs, m, jr.err == wire::error_code::job_table_full ? drop_reason::job_table_full : drop_reason::join_refused);
        char t[wire::max_error_text];
        refusal_text(t, sizeof t, rs, h, b, jr);
        // gen: the JOIN's nonce, so that the worker knows the refusal answers it.
        return send_error(rs, m, from, h, jr.err, t, jr.detail, static_cast<std::uint32_t>(b.nonce));
    }
    const agg::job& j = table::as(jr.j);
    if (jr.st == agg::join_status::joined) {
        bump(rs.ctr.joins);
        rs.job_lat.open(table::as(jr.j), rs.agg.jobs_table().all());
        publish_jobs(rs);
    }
    wire::join_ack_body ack = rs.ack;
    ack.pool_size = j.pool;
    // The job's chunk and policy, fixed when it was created: a rank that
    // joins after an MTU or policy change runs it as the others do.
    ack.chunk_bytes = j.chunk_bytes();
    ack.policy = j.lag ? wire::rail_policy::lag : wire::rail_policy::rail;
    // And its rails: a rail added since is not the job's (rails are
    // appended; one removed since it was created cannot be: the job's
    // ranks then stripe over fewer, and their other JOINs are refused).
    ack.n_rails = std::min(ack.n_rails, j.rails);
    ack.stall_ms = rs.stall_ms;
    ack.excluded_rails = j.excluded;
    std::uint8_t body_buf[wire::join_ack_fixed_bytes + wire::max_rails * wire::rail_entry_bytes];
    const std::size_t blen = wire::encode_join_ack_body(ack, body_buf);
    std::uint8_t* msg = reuse_as_reply(rs, m, from, wire::header_bytes + blen);
    if (!msg) return free_drop(rs, m, drop_reason::no_mbuf);
    wire::header a = h;
    a.type = wire::msg_type::join_ack;
    a.flags = 0;
    a.gen = j.instance;
    a.aux = rs.agg.lim().rail_index;
    wire::encode_header(a, msg);
    std::memcpy(msg + wire::header_bytes, body_buf, blen);
    send_udp(rs, m);
}

// A slot's result's ones' sum (frame::ones_sum16): the reduce's when it
// computed one, else computed on first use: once for all the copies, never
// when every port computes checksums.
class result_sum {
public:
    result_sum(const agg::job& j, const agg::slot& s) noexcept
        : j_(j), s_(s), v_(s.result_sum), have_(s.result_summed) {}
    std::uint16_t get() noexcept {
        if (!have_) {
            v_ = frame::ones_sum16(s_.result_payload, std::size_t{s_.result_count} * wire::dtype_size(j_.dt));
            have_ = true;
        }
        return v_;
    }

private:
    const agg::job& j_;
    const agg::slot& s_;
    std::uint16_t v_;
    bool have_;
};

// Sends slot s's kept result to one member. In `carrier` (a spare
// contribution buffer of the slot) when given: a copy of the payload, one
// segment, no allocation. Otherwise sharing the payload mbuf (an indirect
// clone) when the port can transmit chains, or a copy in a new mbuf.
// `payload_sum` gives the payload's ones'-complement sum
// (frame::ones_sum16), computed once per slot: each copy adds only its
// headers' to checksum it; a port that computes checksums needs none.
// `echo`: the RESULT's aux (wire::result_echo), what railgated saw of this
// rank's contribution, for ranks that take it; the queue depth ahead of the
// result on this rail's traffic-class queue is added here. `flags`:
// wire::flag_retransmit on a result sent again (the rank asked for it).
// Returns where it waits to leave (a shaped rail's queue), if it does.
tx_place send_result(rail_state& rs, const agg::job& j, const agg::slot& s, unsigned rank, const frame::endpoint& dst,
                     result_sum& payload_sum, rte_mbuf* carrier = nullptr,
                     std::optional<std::uint32_t> echo = std::nullopt, std::uint8_t flags = 0) noexcept {
    auto* payload = static_cast<rte_mbuf*>(s.result_owner);
    const std::uint32_t bytes = s.result_count * static_cast<std::uint32_t>(wire::dtype_size(j.dt));
    const std::size_t hdr_len = frame::udp_frame_overhead + wire::header_bytes;
    rte_mbuf* m;
    std::uint8_t* p;
    std::uint16_t udp_sum = 0; // the pseudo-header's and UDP header's
    // A port that computes checksums gets the UDP one only: the pseudo
    // header's sum written from the values with the rest of the headers.
    const bool offload = rs.s.tx_udp_cksum;
    if (carrier) {
        std::uint8_t* msg = reuse_as_reply(rs, carrier, dst, wire::header_bytes + bytes, &udp_sum, offload);
        if (!msg) {
            rte_pktmbuf_free(carrier);
            return send_result(rs, j, s, rank, dst, payload_sum, nullptr, echo, flags);
        }
        m = carrier;
        p = msg - frame::udp_frame_overhead;
        std::memcpy(msg + wire::header_bytes, rte_pktmbuf_mtod(payload, const void*), bytes);
    } else if (rs.s.multiseg_tx && bytes > result_copybreak) {
        m = rte_pktmbuf_alloc(rs.s.hdr_pool);
        rte_mbuf* c = m ? rte_pktmbuf_clone(payload, rs.s.hdr_pool) : nullptr;
        if (!c) {
            if (m) rte_pktmbuf_free(m);
            rs.ctr.drop(drop_reason::no_mbuf);
            return {};
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
            return {};
        }
        std::memcpy(p + hdr_len, rte_pktmbuf_mtod(payload, const void*), bytes);
    }
    if (!carrier && offload) frame::write_udp_headers_offloaded(p, rs.s.self, dst, wire::header_bytes + bytes);
    else if (!carrier) udp_sum = frame::write_udp_headers(p, rs.s.self, dst, wire::header_bytes + bytes);
    wire::header h;
    h.type = wire::msg_type::result;
    h.flags = flags;
    h.dt = j.dt;
    h.job_id = j.id;
    h.job_token = j.token;
    h.rank = static_cast<std::uint16_t>(rank);
    h.world_size = j.world;
    h.slot = static_cast<std::uint16_t>(&s - j.slots);
    h.count = s.result_count;
    h.offset = s.result_offset;
    h.gen = s.gen - 1;
    h.aux = !echo ? 0
            : !rs.sched ? *echo
                        : wire::result_with_depth(*echo, rs.sched->queued(rs.s.cfg.tc_map.from_tos(dst.tos)));
    wire::encode_header(h, p + frame::udp_frame_overhead);
    if (offload) {
        m->l2_len = frame::eth_bytes;
        m->l3_len = frame::ipv4_bytes;
        m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_UDP_CKSUM;
    } else {
        frame::set_udp_checksum(p, udp_sum, frame::add_sums(wire::header_sum(h), payload_sum.get()));
    }
    bump(rs.ctr.results_sent);
    return queue_tx(rs, m);
}


// Under LAG a job's flows come in on several members of the bond; its
// aggregation lives on the home member, and each rank is answered on the
// member its flow uses, at the address it joined there with. The sender is
// checked against the rank's binding on the member it arrived on; `addr`
// becomes 0 (checked) when the contribution goes to another member.
rail_state* lag_home(rail_state& rs, const wire::header& h, std::uint64_t& addr, drop_reason& why) noexcept {
    if (!rs.agg.lag_jobs() || !rs.bond) return &rs; // the rail policy's per-packet path
    agg::job* local = rs.agg.find(h.job_id);
    if (!local || !local->lag) return &rs;
    why = rs.agg.jobs_table().check_sender(*local, h, addr);
    if (why != drop_reason::none) return nullptr;
    table::heard(*local, h.rank, rs.burst_tsc);
    addr = 0;
    // Over the job's rails: one added while it runs is not its member.
    const unsigned home = wire::lag_member(h.job_id, h.job_token, local->rails);
    why = drop_reason::wrong_rail_or_slot;
    return home < rs.bond->size() ? (*rs.bond)[home] : nullptr;
}

// The rail a rank's results leave by, and its address there: under LAG
// the member its flow uses (the home member's, when that one has gone).
struct result_path {
    rail_state* tx;
    const frame::endpoint* dst;
};
result_path path_of(rail_state& home, const agg::job& j, unsigned rank) noexcept {
    if (!j.lag || !home.bond) return {&home, &j.x.members[rank]};
    rail_state* tx = j.x.via[rank] < home.bond->size() ? (*home.bond)[j.x.via[rank]] : nullptr;
    const agg::job* there = tx ? tx->agg.find(j.id) : nullptr;
    if (!there) return {&home, &j.x.members[rank]};
    return {tx, &there->x.members[rank]};
}

tx_place answer(rail_state& home, const agg::job& j, const agg::slot& s, unsigned rank, result_sum& psum,
                rte_mbuf* carrier = nullptr, std::optional<std::uint32_t> echo = std::nullopt,
                std::uint8_t flags = 0) noexcept {
    const result_path to = path_of(home, j, rank);
    return send_result(*to.tx, j, s, rank, *to.dst, psum, carrier, echo, flags);
}

// Remembers where slot s's result just went, when it waits in a queue
// (see result_waits).
void keep_place(agg::slot& s, tx_place at) noexcept {
    if (!at.ticket) return;
    s.result_tc = at.tc;
    s.result_ticket = at.ticket;
}

// Whether slot s's kept result may still wait in a shaped rail's queue on
// its way to `rank`: a rank that asks for it then (its timer ran out while
// the queue held it) gets HELD with no rank waited for, not a second copy
// queued behind the first. The slot keeps the place of the result it
// queued last, so a rank whose own result already left may be told so
// until the others' leave too: it asks again a round later.
bool result_waits(rail_state& home, const agg::job& j, const agg::slot& s, unsigned rank) noexcept {
    if (!s.result_ticket) return false;
    const rail_state& tx = *path_of(home, j, rank).tx;
    return tx.sched && tx.sched->holds(s.result_tc, s.result_ticket);
}

// HELD to the address a rank asked from (as a PONG), about slot generation
// `gen`: its slot holds the rank's contribution and waits for `waiting`
// other ranks' (its timer stops taking a slow peer for a loss), or, with
// `waiting` 0, the slot completed and its result waits in this rail's
// queue on its way to the rank.
void send_held(rail_state& rs, rte_mbuf* m, const wire::header& asked, std::uint32_t gen, std::uint32_t waiting,
               const frame::endpoint& from) noexcept {
    std::uint8_t* msg = reuse_as_reply(rs, m, from, wire::header_bytes);
    if (!msg) return free_drop(rs, m, drop_reason::no_mbuf);
    wire::header a = asked;
    a.count = 0;
    a.gen = gen;
    bump(rs.ctr.held);
    send_header_answer(rs, m, msg, a, wire::msg_type::held, waiting);
}
std::uint32_t waiting_for(const agg::job& j, const agg::slot& s) noexcept {
    return j.world - static_cast<std::uint32_t>(std::popcount(s.bitmap));
}

// Slot s's kept result, asked for by `rank` (a RETRANSMIT, or a PING
// naming the chunk, came in m on rail rs, about slot generation `gen`):
// sent again, flagged, or HELD while the copy sent before still waits to
// leave (result_waits).
void answer_kept(rail_state& rs, rail_state& home, const agg::job& j, agg::slot& s, unsigned rank, rte_mbuf* m,
                 const wire::header& asked, std::uint32_t gen, const frame::endpoint& from) noexcept {
    if (result_waits(home, j, s, rank)) {
        bump(rs.ctr.held_queued);
        return send_held(rs, m, asked, gen, 0, from);
    }
    bump(rs.ctr.results_resent);
    result_sum psum{j, s};
    keep_place(s, answer(home, j, s, rank, psum, nullptr, std::nullopt, wire::flag_retransmit));
    rte_pktmbuf_free(m);
}

void handle_contrib(rail_state& rs, rte_mbuf* m, const wire::header& h, std::span<const std::uint8_t> payload,
                    const frame::endpoint& from) noexcept {
    std::uint64_t addr = peer_key(from);
    drop_reason why = drop_reason::none;
    rail_state* home = lag_home(rs, h, addr, why);
    if (!home) return free_drop(rs, m, why);
    // Its UDP checksum (and its slot's others') is checked when the slot
    // completes: the reduce sums the payloads' words as it reads them.
    const agg::outcome o = home->agg.contribute(h, payload.data(), m, rs.k, rs.burst_tsc, addr,
                                                contribution_check{rs.s.rx_udp_cksum});
    if (o.corrupted) bump(rs.ctr.drops[static_cast<unsigned>(drop_reason::udp_checksum)], o.corrupted);
    if (o.discarded) bump(rs.ctr.drops[static_cast<unsigned>(drop_reason::checksum_partner)], o.discarded);
    if (o.act != agg::action::dropped && o.j->lag && rs.stripe >= 0)
        o.j->x.via[h.rank] = static_cast<std::uint8_t>(rs.stripe);
    // ECN: the rank's contribution came marked; its result says so.
    const std::uint64_t rank_bit = std::uint64_t{1} << h.rank;
    const std::uint64_t ce = (from.tos & wire::ecn_mask) == wire::ecn_ce ? rank_bit : 0;
    if ((o.act == agg::action::stored || o.act == agg::action::completed) && (o.s->ce & rank_bit) != ce)
        o.s->ce ^= rank_bit;
    switch (o.act) {
    case agg::action::dropped:
        // A job it does not have, or a rank the job no longer has (a
        // member's token, so a member's worker): told, so it fails at once.
        if (o.reason == drop_reason::unknown_job || o.reason == drop_reason::rank_not_joined)
            return answer_unknown(rs, m, from, h, o.reason);
        return free_drop(rs, m, o.reason);
    case agg::action::stored:
        bump(rs.ctr.contributions);
        // Its payload is read when the slot completes, a few packets on
        // (the reduce, which sums its checksum on the way): start bringing
        // it in now (small chunks; the hardware streams large ones).
        if (payload.size() <= 4096)
            for (std::size_t off = 0; off < payload.size(); off += RTE_CACHE_LINE_SIZE)
                rte_prefetch1(payload.data() + off);
        return;
    case agg::action::held: return send_held(rs, m, h, h.gen, waiting_for(*o.j, *o.s), from);
    case agg::action::resend: return answer_kept(rs, *home, *o.j, *o.s, h.rank, m, h, h.gen, from);
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
        result_sum psum{*o.j, *o.s};
        // Ranks 1..W-1 get the result in their own contribution buffers (the
        // slot's spares: a copy of the cache-hot payload each, no allocation;
        // W indirect clones would share one reference count that every
        // member's TX completion updates atomically: bench_dataplane MTU 1500
        // 31 -> 41 Gbit/s, MTU 9000 80 -> 102). Rank 0's buffer stays as the
        // kept result and goes out as a clone.
        // Each rank's result echoes how long its contribution waited here
        // for the others', and whether it came marked CE: for ranks that
        // joined ECN-capable (workers with congestion control) only, so
        // that the others' results cost nothing more.
        const std::span<void* const> spares = home->agg.spares();
        const auto echo = [&](unsigned w) -> std::optional<std::uint32_t> {
            if (!(o.j->x.members[w].tos & wire::ecn_mask)) return std::nullopt;
            // Under 2^32 ticks (a second or more) in fixed point; beyond, it saturates.
            const std::uint64_t waited = rs.burst_tsc - std::min(rs.burst_tsc, home->agg.arrived(*o.j, *o.s, w));
            const std::uint64_t us = waited >> 32 ? ~std::uint64_t{0} : waited * rs.us_per_tsc_q32 >> 32;
            return wire::result_echo(us, o.s->ce >> w & 1);
        };
        // Where the last result queued waits (a shaped rail): see result_waits.
        o.s->result_ticket = 0;
        keep_place(*o.s, answer(*home, *o.j, *o.s, 0, psum, nullptr, echo(0)));
        for (unsigned w = 1; w < o.j->world; ++w)
            keep_place(*o.s, answer(*home, *o.j, *o.s, w, psum, static_cast<rte_mbuf*>(spares[w - 1]), echo(w)));
        if (o.s->ce) o.s->ce = 0;
        // Burst granularity: the time a burst arrived, not each packet.
        const auto ns = static_cast<std::uint64_t>(static_cast<double>(rs.burst_tsc - o.s->started) * rs.ns_per_tsc);
        home->lat.record(ns);
        if (stats::job_histogram* jh = home->job_lat.of(*o.j)) jh->record(ns);
        return;
    }
    }
}

// A member's own text (an abort's reason), made printable.
std::size_t printable(char* out, std::size_t n, std::span<const std::uint8_t> in) noexcept {
    std::size_t k = 0;
    for (; k < in.size() && k + 1 < n; ++k) out[k] = in[k] >= 0x20 && in[k] < 0x7f ? static_cast<char>(in[k]) : '?';
    out[k] = 0;
    return k;
}

// A worker aborts its job (ERROR from a member): the other members are
// told, with the worker's own reason (and code, when it names a failed rank
// or rails that went down), and the job ends.
void handle_abort(rail_state& rs, rte_mbuf* m, const wire::header& h, std::span<const std::uint8_t> body,
                  const frame::endpoint& from) noexcept {
    agg::job* j = rs.agg.find(h.job_id);
    if (!j) return free_drop(rs, m, drop_reason::leave_unknown);
    if (const drop_reason r = rs.agg.jobs_table().check_sender(*j, h, peer_key(from)); r != drop_reason::none)
        return free_drop(rs, m, r == drop_reason::not_member ? r : drop_reason::leave_unknown);
    // An abort sent to an earlier incarnation of the job id, arriving late.
    if (!table::names(*j, h)) return free_drop(rs, m, drop_reason::leave_unknown);
    bump(rs.ctr.aborts);
    char why[wire::max_error_text / 2];
    printable(why, sizeof why, body);
    char t[wire::max_error_text];
    std::snprintf(t, sizeof t, "rank %u aborted the job%s%s", h.rank, why[0] ? ": " : "", why);
    const auto code = wire::relayed_abort(static_cast<wire::error_code>(h.aux));
    end_job(rs, *j, code, code == wire::error_code::aborted ? h.rank : h.offset, t, h.rank);
    rte_pktmbuf_free(m);
}

// Whether the rank a LEAVE names is not a member here: its job (that
// incarnation) is gone, or the rank of it already left. Its LEAVE_ACK was
// lost, and it asks again. Not when the job id is another job's (another
// token or world): that one is not the sender's to learn about.
bool already_left(rail_state& rs, const wire::header& h) noexcept {
    const agg::job* j = rs.agg.find(h.job_id);
    if (!j || !table::names(*j, h)) return true;
    return rs.agg.jobs_table().check_sender(*j, h, 0) == drop_reason::rank_not_joined;
}

void handle_leave(rail_state& rs, rte_mbuf* m, const wire::header& h, const frame::endpoint& from) noexcept {
    const drop_reason r = rs.agg.leave(h, peer_key(from));
    if (r != drop_reason::none) {
        if (r == drop_reason::not_member || !already_left(rs, h))
            return free_drop(rs, m, r == drop_reason::not_member ? r : drop_reason::leave_unknown);
        // Leaving is idempotent: a LEAVE repeated because its LEAVE_ACK was
        // lost is acknowledged again (at most once a millisecond per rail,
        // as unknown jobs are answered; above that it is dropped), so the
        // worker does not wait out its retries.
        if (!may_answer(rs)) return free_drop(rs, m, drop_reason::leave_unknown);
        bump(rs.ctr.leaves_again);
    } else {
        bump(rs.ctr.leaves);
        publish_jobs(rs);
    }
    std::uint8_t* msg = reuse_as_reply(rs, m, from, wire::header_bytes);
    if (!msg) return free_drop(rs, m, drop_reason::no_mbuf);
    wire::header a = h;
    a.type = wire::msg_type::leave_ack;
    wire::encode_header(a, msg);
    send_udp(rs, m);
}

// A PING: the worker checks that railgated, and its job, are there (it
// waits for a result, or a peer). Answered with a PONG; it also keeps the
// rank's binding fresh.
void handle_ping(rail_state& rs, rte_mbuf* m, const wire::header& h, const frame::endpoint& from) noexcept {
    agg::job* j = rs.agg.find(h.job_id);
    if (!j) return answer_unknown(rs, m, from, h, drop_reason::unknown_job, h.gen);
    if (const drop_reason r = rs.agg.jobs_table().check_sender(*j, h, peer_key(from)); r != drop_reason::none) {
        if (r == drop_reason::rank_not_joined) return answer_unknown(rs, m, from, h, r, h.gen);
        return free_drop(rs, m, r);
    }
    table::heard(*j, h.rank, rs.burst_tsc);
    std::uint8_t* msg = reuse_as_reply(rs, m, from, wire::header_bytes);
    if (!msg) return free_drop(rs, m, drop_reason::no_mbuf);
    // A PING of another incarnation of the job id (its worker missed the
    // end of its job) learns that its job is gone.
    if (h.gen != j->instance) return answer_unknown(rs, m, from, h, drop_reason::unknown_job, h.gen);
    // A PING naming a chunk (count > 0: a timeout asks before it resends)
    // is answered as its RETRANSMIT would be, without its data: HELD when
    // the slot holds it, the kept result when the slot is past it. A chunk
    // not here gets the PONG, and the rank sends it again. A LAG job's
    // slots live on its home member, which is asked (its answer goes out
    // here, or on the member the rank's results use).
    if (h.count) {
        std::uint64_t addr = peer_key(from);
        drop_reason why = drop_reason::none;
        rail_state* home = j->lag ? lag_home(rs, h, addr, why) : &rs;
        agg::job* hj = home == &rs ? j : home ? home->agg.find(h.job_id) : nullptr;
        if (hj) {
            const agg::outcome o = home->agg.query(*hj, h);
            if (o.act != agg::action::dropped) bump(rs.ctr.queried);
            if (o.act == agg::action::held) return send_held(rs, m, h, h.aux, waiting_for(*hj, *o.s), from);
            if (o.act == agg::action::resend) return answer_kept(rs, *home, *hj, *o.s, h.rank, m, h, h.aux, from);
        }
    }
    bump(rs.ctr.pongs);
    send_header_answer(rs, m, msg, h, wire::msg_type::pong, 0);
}

// A worker's round-trip histogram (part of it): merged into the rail's and
// the job's, after the whole message checks out.
[[gnu::cold, gnu::noinline]] void handle_rtt_report(rail_state& rs, rte_mbuf* m, const wire::header& h, std::span<const std::uint8_t> body,
                       const frame::endpoint& from) noexcept {
    agg::job* j = rs.agg.find(h.job_id);
    if (!j) return free_drop(rs, m, drop_reason::unknown_job);
    if (const drop_reason r = rs.agg.jobs_table().check_sender(*j, h, peer_key(from)); r != drop_reason::none)
        return free_drop(rs, m, r);
    stats::job_histogram* jh = rs.job_lat.of(*j, true);
    if (!wire::take_rtt_entries(body, h.count, stats::histogram::bucket_count, [&](std::uint16_t b, std::uint32_t n) {
            rs.worker_rtt.add_to_bucket(b, n);
            if (jh) jh->add_samples(stats::histogram::middle_of(b), n);
        }))
        return free_drop(rs, m, drop_reason::rtt_bucket);
    bump(rs.ctr.rtt_reports);
    rte_pktmbuf_free(m);
}


} // namespace

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
        queue_tx(rs, m);
        return;
    case frame::kind::icmp_echo:
        frame::icmp_echo_reply_in_place(p, fi);
        m->data_len = static_cast<std::uint16_t>(fi.l4_offset + fi.l4_len);
        m->pkt_len = m->data_len;
        bump(rs.ctr.icmp_replies);
        queue_tx(rs, m);
        return;
    case frame::kind::udp: break;
    }
    wire::header h;
    std::span<const std::uint8_t> payload;
    const drop_reason r = wire::parse_worker_message(p + fi.msg_offset, fi.l4_len, h, payload);
    if (r != drop_reason::none) {
        if (r == drop_reason::rg_version && p[fi.msg_offset + 1] == static_cast<std::uint8_t>(wire::msg_type::join) &&
            checksum_ok(rs.s.rx_udp_cksum, m))
            return answer_version(rs, m, fi.src, p[fi.msg_offset]);
        return free_drop(rs, m, r);
    }
    // A contribution's checksum is checked with its slot's (handle_contrib);
    // anything else's before it acts.
    if (h.type == wire::msg_type::contrib) {
        // What is known without reading the payload, at once: a checksum
        // is there, and the port did not find it wrong.
        if (!contribution_check::plausible(rs.s.rx_udp_cksum, m)) return free_drop(rs, m, drop_reason::udp_checksum);
        return handle_contrib(rs, m, h, payload, fi.src);
    }
    if (!checksum_ok(rs.s.rx_udp_cksum, m)) return free_drop(rs, m, drop_reason::udp_checksum);
    switch (h.type) {
    case wire::msg_type::join: return handle_join(rs, m, h, payload, fi.src);
    case wire::msg_type::leave: return handle_leave(rs, m, h, fi.src);
    case wire::msg_type::error: return handle_abort(rs, m, h, payload, fi.src);
    case wire::msg_type::rtt_report: return handle_rtt_report(rs, m, h, payload, fi.src);
    case wire::msg_type::ping: return handle_ping(rs, m, h, fi.src);
    default: return free_drop(rs, m, drop_reason::rg_type);
    }
}

void expire_jobs(rail_state& rs, std::uint64_t now) noexcept {
    rs.agg.jobs_table().expire(now, [&](agg::job& j, const agg::end_event& e) {
        char who[96];
        ranks_text(who, sizeof who, e.missing);
        const bool several = std::popcount(e.missing) > 1;
        char t[wire::max_error_text];
        wire::error_code code = wire::error_code::expired;
        std::uint64_t detail = 0;
        switch (e.why) {
        case agg::end_reason::stalled:
            std::snprintf(t, sizeof t,
                          "rank%s %s sent nothing to slot %u of job %u on rail %s for %" PRIu64
                          " ms while the other ranks did (stopped, dead or cut off)",
                          several ? "s" : "", who, e.slot, j.id, rs.s.cfg.name.c_str(), ms_of(rs, e.waited));
            code = wire::error_code::rank_failed;
            detail = static_cast<std::uint64_t>(std::countr_zero(e.missing));
            bump(rs.ctr.stalls);
            break;
        case agg::end_reason::assemble_timeout:
            std::snprintf(t, sizeof t, "job %u expired on rail %s: rank%s %s did not join within %" PRIu64 " ms", j.id,
                          rs.s.cfg.name.c_str(), several ? "s" : "", who, ms_of(rs, e.waited));
            bump(rs.ctr.expirations);
            break;
        case agg::end_reason::idle_timeout:
            std::snprintf(t, sizeof t, "job %u expired on rail %s: no rank spoke for %" PRIu64 " ms", j.id,
                          rs.s.cfg.name.c_str(), ms_of(rs, e.waited));
            bump(rs.ctr.expirations);
            break;
        }
        end_job(rs, j, code, detail, t);
    });
}

unsigned end_job_for_operator(rail_state& rs, std::uint32_t id, std::string_view text) noexcept {
    agg::job* j = rs.agg.find(id);
    if (!j) return 0;
    const unsigned told = static_cast<unsigned>(std::popcount(j->joined));
    bump(rs.ctr.operator_aborts);
    end_job(rs, *j, wire::error_code::operator_abort, 0, text);
    return told;
}

void end_jobs_on_rails(rail_state& rs, std::uint32_t down) noexcept {
    for (agg::job& j : rs.agg.jobs_table().all()) {
        if (j.st != agg::job_state::active || j.lag || !(down & ~j.excluded)) continue;
        char t[wire::max_error_text];
        std::snprintf(t, sizeof t, "rails 0x%x of job %u went down (railgated saw the link go); re-join around them",
                      down & ~j.excluded, j.id);
        end_job(rs, j, wire::error_code::rail_down, down | j.excluded, t);
    }
}

} // namespace railgate::net::detail
