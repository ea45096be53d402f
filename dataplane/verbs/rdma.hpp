// Thin RAII and QP helpers over rdma-core, shared by railgated's verbs rails
// (the passive side) and the worker's verbs transport (the active side).
//
// Connections are RC QPs set up with rdma_cm, the standard (addresses and
// routes are resolved by the kernel, so IPoIB and RoCE work alike). The QP
// is ours, not rdma_create_qp's: rdma_init_qp_attr gives the attributes
// rdma_cm would use and railgate overrides what the rail configures (GID
// index, path MTU, traffic class, service level) before each transition.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/proto/wire.hpp"
#include "dataplane/verbs/ll_ring.hpp"

namespace railgate::verbs {

// Queue sizing both ends share: a receive for every slot in flight
// (verbs_max_pool) plus control messages (JOIN retries, REGION, LEAVE, RTT
// reports) one way, and room for the control messages sent the other.
inline constexpr unsigned ctl_recvs = 32;
inline constexpr unsigned ctl_sends = 16;
inline constexpr unsigned rq_depth = wire::verbs_max_pool + ctl_recvs;
inline constexpr unsigned sq_depth = wire::verbs_max_pool + ctl_sends;
inline constexpr std::size_t ctl_bytes = wire::verbs_ctl_bytes;

// ibv_reg_mr's access for memory only this side writes. An int: the
// ibv_reg_mr macro ands it with an enumerator of another enum, which
// clang's -Wdeprecated-enum-enum-conversion rejects for an ibv_access_flags.
inline constexpr int local_write = IBV_ACCESS_LOCAL_WRITE;

// Work request ids: the kind in the top byte, an index below. Receives
// carry their buffer index, posted sends their send_ledger sequence; the
// ledger's tag of a send is its kind (ctl_send, data) and index.
enum class wr_kind : std::uint64_t { recv = 1, ctl_send = 2, data = 3, send = 4, ll = 5 }; // ll: an eager ring entry (ll_ring.hpp)
constexpr std::uint64_t make_wr_id(wr_kind k, std::uint64_t i) noexcept {
    return static_cast<std::uint64_t>(k) << 56 | i;
}
constexpr wr_kind kind_of(std::uint64_t id) noexcept { return static_cast<wr_kind>(id >> 56); }
constexpr std::uint64_t index_of(std::uint64_t id) noexcept { return id & ((std::uint64_t{1} << 56) - 1); }

struct qp_settings {
    int gid_index = -1;          // -1: automatic (below)
    bool prefer_roce_v2 = true;  // automatic: the RoCEv2 GID of the bound IPv4 address, as NCCL picks
    unsigned path_mtu = 0;       // bytes, 256..4096; 0: the port's active MTU
    std::uint8_t traffic_class = 0;
    std::uint8_t service_level = 0;
    unsigned sq_depth = 64, rq_depth = 64;
    unsigned max_inline = 64;    // payloads up to this many bytes go inline in the WQE (if the HCA can)
    // RC timers, in the IB encodings (qp_timers below reads them back).
    // ack_timeout: how long a send waits for its ACK before it is resent,
    // 4.096 us x 2^n (1..31; 0: rdma_cm's, from the path's packet
    // lifetime: 2.1 s on rxe; railgated and the worker library set
    // default_ack_timeout() of their peer's silence limit). retry_count: resends after that before the
    // QP fails (0..7). rnr_retry: resends after a receiver-not-ready NAK
    // (0..7; 7 without end). min_rnr_timer: how long this end asks a
    // sender to wait after its RNR NAK (0..31; 12 is 0.64 ms, as perftest
    // and NCCL set; rdma_cm's 0 is 655 ms).
    std::uint8_t ack_timeout = 0;
    std::uint8_t retry_count = 7, rnr_retry = 7, min_rnr_timer = 12;
};

// The timers a QP has (ibv_query_qp), as the HCA took them.
struct qp_timers {
    unsigned ack_timeout = 0, retry_count = 0, rnr_retry = 0, min_rnr_timer = 0;
};
// The IB encodings in microseconds: 4.096 us x 2^n (0: no timeout, which
// reads as 0), and the RNR NAK timer's table (IBA 9.7.5.2.8).
double ack_timeout_us(unsigned n) noexcept;
double rnr_timer_us(unsigned n) noexcept;
// The longest ACK timeout (1..31) of at most `budget`.
std::uint8_t ack_timeout_within(std::chrono::microseconds budget) noexcept;
// railgate's default ACK timeout for QPs whose peer is given up after
// `silence` (railgated's [jobs] stall_ms, a worker's peer timeout): the
// longest of which retry_count + 1 fit in it. A packet the fabric drops is
// then resent after one timeout, and one dropped on every resend fails its
// QP (retry exceeded, named) before the silence gives the peer up. 14
// (67 ms) at the default 1 s and retry_count 7; rdma_cm's 19 (2.1 s on rxe)
// would end the job at its first loss, and the longest under half of 1 s
// (16, 268 ms, railgate's default before) failed 3-rank jobs at 1% loss on
// rxe in the guest (tests/rxe/verbs_loss.sh, doc/performance.md).
std::uint8_t default_ack_timeout(std::chrono::microseconds silence, unsigned retry_count) noexcept;
// How a worker spends its connect timeout `total` on rdma_cm attempts: the
// first waits `first` (at most total), each next one twice the last, the
// last what is left (a remainder under half of `first` goes to the one
// before it). rdma_cm resends a lost connection MAD only on its own timer
// (the REQ's response timeout: about 4 s), so a worker that waited on one
// attempt lost its connect to one lost packet; an attempt that got no
// answer is dropped (its id destroyed: the CM tells railgated with a REJ)
// and a new one sent. total 5 s, first 1 s: 1, 2 and 2 s. first 0: one
// attempt of total.
std::vector<std::chrono::milliseconds> connect_attempts(std::chrono::milliseconds total,
                                                        std::chrono::milliseconds first);
// "ack timeout 14 (67.1 ms), retry 7, rnr retry 7, min rnr timer 12 (0.64 ms)"
std::string describe(const qp_timers& t);
// The same of the settings ("ack timeout rdma_cm's" when it is 0).
std::string describe_timers(const qp_settings& s);
// A worker's overrides from its environment, as NCCL_IB_TIMEOUT,
// NCCL_IB_RETRY_CNT and NCCL_IB_GID_INDEX are NCCL's: RAILGATE_IB_TIMEOUT
// (1..31), RAILGATE_IB_RETRY_CNT (0..7), RAILGATE_IB_RNR_RETRY (0..7),
// RAILGATE_IB_MIN_RNR_TIMER (0..31), and RAILGATE_IB_GID_INDEX (0..255)
// where s has no GID index given (-1: a tool's --gid-index or the C API's
// gid_index wins). "" or the first bad one, named with its range (s
// unchanged then).
std::string settings_from_env(qp_settings& s);

// "path_mtu 1024" -> IBV_MTU_1024; 0 for anything that is not an IB MTU.
ibv_mtu mtu_enum(unsigned bytes) noexcept;
unsigned mtu_bytes(ibv_mtu m) noexcept;

struct cm_channel_deleter {
    void operator()(rdma_event_channel* c) const noexcept { rdma_destroy_event_channel(c); }
};
struct cm_id_deleter {
    void operator()(rdma_cm_id* id) const noexcept { rdma_destroy_id(id); }
};
struct pd_deleter {
    void operator()(ibv_pd* p) const noexcept { ibv_dealloc_pd(p); }
};
struct mr_deleter {
    void operator()(ibv_mr* m) const noexcept { ibv_dereg_mr(m); }
};
struct comp_channel_deleter {
    void operator()(ibv_comp_channel* c) const noexcept { ibv_destroy_comp_channel(c); }
};
using cm_channel_ptr = std::unique_ptr<rdma_event_channel, cm_channel_deleter>;
using cm_id_ptr = std::unique_ptr<rdma_cm_id, cm_id_deleter>;
using pd_ptr = std::unique_ptr<ibv_pd, pd_deleter>;
using mr_ptr = std::unique_ptr<ibv_mr, mr_deleter>;
using comp_channel_ptr = std::unique_ptr<ibv_comp_channel, comp_channel_deleter>;

// Page-aligned memory, bound to a NUMA node when node >= 0 (hwloc).
struct region_memory {
    void* p = nullptr;
    std::size_t bytes = 0;
    region_memory() = default;
    region_memory(std::size_t bytes, int numa_node);
    ~region_memory();
    region_memory(region_memory&& o) noexcept : p(o.p), bytes(o.bytes) { o.p = nullptr; }
    region_memory& operator=(region_memory&& o) noexcept;
};

// One RC queue pair with its own CQ (completions of both queues). The CQ
// reports to `channel` when armed. Destruction moves the QP to ERR first.
class queue_pair {
public:
    queue_pair(rdma_cm_id* id, ibv_pd* pd, ibv_comp_channel* channel, const qp_settings& s);
    ~queue_pair();
    queue_pair(const queue_pair&) = delete;
    queue_pair& operator=(const queue_pair&) = delete;

    ibv_qp* qp() const noexcept { return qp_; }
    ibv_cq* cq() const noexcept { return cq_; }
    const qp_settings& settings() const noexcept { return s_; }
    // Moves the QP to INIT, RTR or RTS with rdma_cm's attributes and the
    // rail's overrides. Returns "" or why not. After RTR, gid_index() and
    // path_mtu() tell what was used.
    std::string move_to(ibv_qp_state to);
    int gid_index() const noexcept { return gid_used_; }
    // Lowers the path MTU the RTR transition will use (the peer's).
    void cap_path_mtu(unsigned bytes) noexcept {
        if (bytes && (!s_.path_mtu || bytes < s_.path_mtu)) s_.path_mtu = bytes;
    }
    unsigned path_mtu() const noexcept { return mtu_used_; }
    // After RTS: the timers the HCA took (the settings' or rdma_cm's).
    const qp_timers& timers() const noexcept { return timers_; }
    // Sends of at most this many bytes may carry IBV_SEND_INLINE.
    unsigned max_inline() const noexcept { return inline_; }

private:
    rdma_cm_id* id_;
    qp_settings s_;
    ibv_cq* cq_ = nullptr;
    ibv_qp* qp_ = nullptr;
    int gid_used_ = -1;
    unsigned mtu_used_ = 0;
    unsigned inline_ = 0;
    qp_timers timers_;
};

// Selective signalling of one QP's sends. Most sends complete silently; one
// in `every`, control messages (force) and sends into a nearly full queue
// ask for a completion, and since RC completes in order, a completion (or a
// flush error) retires every send posted before it too. Saves a CQE per
// send on both ends of the latency path. Each send gets a sequence number
// (its WR id, below 2^56); the caller's own tag for it comes back in retire.
class send_ledger {
public:
    explicit send_ledger(unsigned depth, unsigned every = 16) : depth_(depth), every_(every) {}
    bool full() const noexcept { return posted_.size() >= depth_; }
    std::size_t in_flight() const noexcept { return posted_.size(); }
    // Whether the next send must be signalled.
    bool signal_next(bool force) noexcept {
        if (force || ++since_ >= every_ || posted_.size() + every_ >= depth_) {
            since_ = 0;
            return true;
        }
        return false;
    }
    // The sequence number of the next send (use it in its WR id).
    std::uint64_t next_seq() const noexcept { return seq_; }
    void posted(std::uint64_t tag) { posted_.push_back({seq_++, tag}); }
    // The send with sequence `seq` completed: retire(tag) for it and every
    // send before it.
    template <class F> void complete(std::uint64_t seq, F&& retire) {
        while (!posted_.empty() && posted_.front().seq <= seq) {
            const std::uint64_t tag = posted_.front().tag;
            posted_.pop_front();
            retire(tag);
        }
    }
    // The QP is gone: whatever did not complete is retired now.
    template <class F> void drop_all(F&& retire) {
        for (const entry& e : posted_) retire(e.tag);
        posted_.clear();
    }

private:
    struct entry {
        std::uint64_t seq, tag;
    };
    std::deque<entry> posted_;
    std::uint64_t seq_ = 0;
    unsigned depth_, every_, since_ = 0;
};

// The rdma_cm private data of railgate's connections: both sides state the
// path MTU they will use, and both then use the smaller (a responder drops
// packets above its own path MTU). 8 bytes: "RGV1", version 1, the MTU as
// ibv_mtu, a capability byte, a zero byte. With capability cm_cap_ll the
// sender's eager ring follows (ll_ring.hpp): its address (u64) and rkey
// (u32), big-endian, 20 bytes in all. A worker offers its ring; railgated
// answers with its own when it takes the offer (it busy-polls the rail),
// and then both directions carry small chunks through the rings. Peers
// that predate the ring send a zero capability byte and ignore the rest.
inline constexpr std::size_t cm_private_bytes = 8;
inline constexpr std::size_t cm_private_ll_bytes = 20;
inline constexpr std::uint8_t cm_cap_ll = 0x01;
struct cm_hello {
    unsigned path_mtu = 0; // bytes; 0 when the data is not railgate's
    bool ll = false;
    std::uint64_t ll_addr = 0;
    std::uint32_t ll_rkey = 0;
};
// Writes h into out (cm_private_ll_bytes of room); returns its length.
std::size_t encode_cm_private(const cm_hello& h, std::uint8_t* out) noexcept;
cm_hello decode_cm_private(const void* data, std::size_t len) noexcept;
// One end of a connection's eager rings (ll_ring.hpp): the peer WRITEs
// its entries into `in`, which this end busy-polls; this end's entries are
// staged in `out`, each at its own ring place, and WRITTEn to the peer's
// ring. An entry in `out` is rewritten only a lap later, after the peer has
// read it (at most a pool of slots is in flight each way), so a WRITE owns
// its staged words until then. Empty (on() false) until open(); railgated
// opens only when it takes the worker's offer, a worker closes when its
// offer is declined.
struct eager_rings {
    region_memory in, out;
    mr_ptr in_mr, out_mr;
    std::uint64_t in_seq = 0, out_seq = 0; // the next entry each way
    std::uint64_t peer_addr = 0;
    std::uint32_t peer_rkey = 0;

    // Maps and registers both rings on `pd` (throws); `offer` gets our
    // ring's address and rkey for the peer.
    void open(ibv_pd* pd, int numa_node, cm_hello& offer);
    // The peer's ring, from its answer.
    void attach(const cm_hello& theirs) noexcept {
        peer_addr = theirs.ll_addr;
        peer_rkey = theirs.ll_rkey;
    }
    void close() noexcept {
        in_mr.reset(); // the registrations before their memory
        out_mr.reset();
        in = region_memory{};
        out = region_memory{};
        in_seq = out_seq = peer_addr = 0;
        peer_rkey = 0;
    }
    bool on() const noexcept { return out_mr != nullptr; }

    // Entry out_seq, encoded in `out` (ll::encode): post a plain RDMA WRITE
    // of `bytes` from `words` to `raddr` with out_mr's lkey and peer_rkey,
    // then sent() once the post took.
    struct staged {
        std::uint64_t* words;
        std::uint32_t bytes;
        std::uint64_t raddr;
    };
    staged stage(std::uint32_t imm, const void* payload, std::uint32_t len) noexcept {
        const std::size_t at = ll::offset_of(out_seq);
        auto* w = reinterpret_cast<std::uint64_t*>(static_cast<std::uint8_t*>(out.p) + at);
        return {w, static_cast<std::uint32_t>(ll::encode(w, out_seq, imm, payload, len)), peer_addr + at};
    }
    void sent() noexcept { ++out_seq; }
    // Whether the peer's entry in_seq has begun to land (ll::begun).
    bool pending() const noexcept {
        return ll::begun(reinterpret_cast<const std::uint64_t*>(static_cast<const std::uint8_t*>(in.p) +
                                                                ll::offset_of(in_seq)),
                         in_seq);
    }
    // The peer's entry in_seq (payload: ll::max_payload bytes of room);
    // past it unless it is still empty.
    ll::status take(ll::entry& e, void* payload) noexcept {
        const auto* w = reinterpret_cast<const std::uint64_t*>(static_cast<const std::uint8_t*>(in.p) +
                                                               ll::offset_of(in_seq));
        const ll::status st = ll::poll(w, in_seq, e, payload);
        if (st != ll::status::empty) ++in_seq;
        return st;
    }
};

// The path MTU a QP on this id's port would use when not capped: the
// configured one, else the port's active MTU.
unsigned port_path_mtu(rdma_cm_id* id, unsigned configured) noexcept;

// The index of the RoCEv2 (or, with !v2, RoCEv1) GID whose IPv4 address is
// `ip` (host order) on the port, or -1.
int find_ipv4_gid(ibv_context* ctx, unsigned port, std::uint32_t ip, bool v2) noexcept;

// Whether GID `index` of the port may be the source of a rail's QPs whose
// rdma_cm address is `ip` (host order): "" or why not, naming the device,
// port and the indices that would do. Refused: an index beyond the table,
// an empty entry, and on a RoCE port any GID but `ip`'s own (its RoCE v1 or
// v2 one): there the source GID is the address the packets leave from, and
// the workers' QPs drop what does not come from the one they connected to
// (rxe's check_addr, a NIC's). An IB port's GIDs (subnet prefixes) are the
// operator's to choose. `what` (when given) gets the entry, as
// "::ffff:198.18.0.1, RoCE v2".
std::string check_gid(ibv_context* ctx, unsigned port, int index, std::uint32_t ip, std::string* what = nullptr);

// Pins the calling thread to `cpu`, or else to the CPUs of NUMA node
// `numa_node` (both -1: leaves it alone). Returns a description for the
// placement log ("cpu 3", "node 1 cpus 0-15", "unpinned").
std::string bind_this_thread(int cpu, int numa_node);
// The NUMA node of an HCA (sysfs), or -1 when it has none (SoftRoCE).
int hca_numa_node(ibv_context* ctx);
// True for a software RDMA device (rxe, siw: no bus device in sysfs). Its
// protocol work runs in the kernel, partly deferred: a poller that never
// enters the kernel delays it until the next tick, so pollers of such a
// device make a cheap system call on idle passes (measured on rxe: 4-byte
// raillat 21 -> 15 us half round trip).
bool software_device(ibv_context* ctx);

// Waits for the next CM event on `ch` (for at most `timeout`); returns the
// event (caller acks) or nullptr on timeout or error.
rdma_cm_event* next_event(rdma_event_channel* ch, std::chrono::milliseconds timeout) noexcept;
// Puts a CM channel or comp channel fd in non-blocking mode.
bool set_nonblocking(int fd) noexcept;

// "local length error (wr_id 0x..)" for logs: ibv_wc_status_str plus the op.
std::string describe(const ibv_wc& wc);

} // namespace railgate::verbs
