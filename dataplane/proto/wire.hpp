// railgate wire protocol: constants and the host-order view of the header.
// The byte layout is specified in dataplane/proto/PROTOCOL.md; encode() and
// parse_header() in parse.hpp are the only code that touches raw bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <charconv>
#include <string>
#include <string_view>

namespace railgate::wire {

// 2: JOIN carries the worker's nonce and the rails it stripes around;
// JOIN_ACK the stall timeout and the job's excluded rails; PING/PONG.
inline constexpr std::uint8_t protocol_version = 2;
// Default UDP port of railgated. Deliberately not 4791 (RoCEv2), so that a
// rail can share a fabric with RoCE traffic without being mistaken for it.
inline constexpr std::uint16_t default_udp_port = 47000;
inline constexpr std::size_t header_bytes = 40;
// Ethernet (14) + IPv4 without options (20) + UDP (8).
inline constexpr std::size_t l2l4_bytes = 14 + 20 + 8;
// The contributor bitmap of a slot is one 64-bit word.
inline constexpr unsigned max_world = 64;
// Bound on a tensor's element count (2^40 elements = 4 TiB of fp32); keeps
// offset + count far from overflow.
inline constexpr std::uint64_t max_tensor_elems = std::uint64_t{1} << 40;
inline constexpr unsigned min_mtu = 576;
inline constexpr unsigned max_mtu = 9216;
inline constexpr std::size_t max_error_text = 200;

// A bad MTU, worded alike by every binary, config file and command.
inline std::string mtu_range_error(std::string_view mtu, unsigned max = max_mtu) {
    return "MTU " + std::string(mtu) + " out of range " + std::to_string(min_mtu) + ".." + std::to_string(max);
}
inline std::string mtu_range_error(long long mtu, unsigned max = max_mtu) {
    return mtu_range_error(std::to_string(mtu), max);
}
// Parses an MTU given as text: "" or the error (mtu_range_error's wording).
inline std::string parse_mtu(std::string_view text, unsigned& out) {
    unsigned long long v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec == std::errc::invalid_argument || end != text.data() + text.size())
        return "MTU '" + std::string(text) + "' is not a number";
    if (ec == std::errc::result_out_of_range || v < min_mtu || v > max_mtu) return mtu_range_error(text);
    out = static_cast<unsigned>(v);
    return {};
}

enum class msg_type : std::uint8_t {
    join = 1,      // worker -> railgated, one per rail
    join_ack = 2,  // railgated -> worker
    contrib = 3,   // worker -> railgated: one chunk of one rank's tensor
    result = 4,    // railgated -> every worker: the reduced chunk
    error = 5,     // railgated -> worker, or worker -> railgated (abort)
    leave = 6,     // worker -> railgated
    leave_ack = 7, // railgated -> worker
    rtt_report = 8, // worker -> railgated: its per-chunk round-trip histogram (count entries)
    region = 9,    // verbs rails, both ways: where the peer may RDMA WRITE (region_body)
    ping = 10,     // worker -> railgated: are you (and my job) there?
    pong = 11,     // railgated -> worker: the answer to a PING
    held = 12,     // railgated -> worker: a RETRANSMIT of a contribution it holds (the slot waits for other ranks)
};

enum class dtype : std::uint8_t { fp32 = 0, bf16 = 1, fp16 = 2, int32 = 3 };
inline constexpr unsigned dtype_count = 4;

enum class rail_policy : std::uint8_t { rail = 0, lag = 1 };
// What a LAG hashes to pick a flow's member: l2 (the MAC pair: every worker
// behind one host's MAC lands on one member, so a job's flows share it) or
// l3l4 (addresses and ports: each worker's flow hashes on its own).
enum class lag_hash : std::uint8_t { l2 = 0, l3l4 = 1 };

// Header flag bits. Bits not named here are reserved and must be zero.
inline constexpr std::uint8_t flag_retransmit = 0x01;
inline constexpr std::uint8_t flags_known = flag_retransmit;

// RESULT's aux, per destination rank: the congestion railgated saw on that
// rank's contribution of the chunk. Low 24 bits: how long it waited there
// for the other ranks' (microseconds, saturating), which a worker takes off
// its round trip (a slow rank is not a queue); bits 24-30: railgated's
// queue depth, the frames its traffic-class queue held ahead of this result
// on the rail it left by (saturating at 127; 0 on a rail not shaped, where
// results leave at once); the top bit: it came marked ECN CE. 0 from
// railgateds that do not echo (and on resent results).
inline constexpr std::uint32_t result_wait_us_mask = 0x00ffffffu;
inline constexpr unsigned result_depth_shift = 24;
inline constexpr std::uint32_t result_depth_max = 0x7fu;
inline constexpr std::uint32_t result_depth_mask = result_depth_max << result_depth_shift;
inline constexpr std::uint32_t result_ce = 0x80000000u;
inline constexpr std::uint32_t result_echo(std::uint64_t wait_us, bool ce) noexcept {
    return (wait_us > result_wait_us_mask ? result_wait_us_mask : static_cast<std::uint32_t>(wait_us)) |
           (ce ? result_ce : 0u);
}
// An echo with railgated's queue depth (frames) set.
inline constexpr std::uint32_t result_with_depth(std::uint32_t echo, std::size_t depth) noexcept {
    const auto d = depth > result_depth_max ? result_depth_max : static_cast<std::uint32_t>(depth);
    return (echo & ~result_depth_mask) | d << result_depth_shift;
}
inline constexpr unsigned result_depth(std::uint32_t aux) noexcept {
    return (aux & result_depth_mask) >> result_depth_shift;
}
// IPv4 ECN codepoints (the TOS byte's low two bits).
inline constexpr std::uint8_t ecn_mask = 0x03, ecn_ect0 = 0x02, ecn_ce = 0x03;

// ERROR codes, carried in header.aux.
enum class error_code : std::uint32_t {
    none = 0,
    bad_token = 1,
    world_mismatch = 2,
    dtype_mismatch = 3,
    max_count_mismatch = 4,
    job_table_full = 5,
    bad_request = 6,
    aborted = 7,       // another worker aborted the job
    pool_mismatch = 8,
    job_in_use = 9,       // JOIN: the job id belongs to another member set (token differs)
    rank_taken = 10,      // JOIN: the rank is joined from another address or process
    rails_mismatch = 11,  // JOIN: excluded rails differ from the job's (offset: the job's)
    too_many_pending = 12, // JOIN: this address has too many jobs still assembling
    no_buffers = 13,      // JOIN: the rail's buffers cannot carry the job next to the others
    rank_failed = 14,     // a rank stopped, died or restarted (offset: the rank)
    unknown_job = 15,     // railgated does not know the job (restarted, or expired it)
    expired = 16,         // the job did not assemble, or went idle, in time
    rail_down = 17,       // a rail of the job went down (offset: bitmap of rails)
    op_mismatch = 18,     // JOIN: the rank is at another operation than the job (offset: the job's)
    // JOIN, and the job it ends: two live processes claim one rank of a job
    // that has not yet completed a chunk (the same id and token started
    // twice); neither can be told from the other, so neither gets the job
    // (offset: the rank).
    rank_claimed = 19,
    // JOIN on a rail after the first: the job's chunk or policy there is not
    // the one its first rail gave (offset: the job's shape word on this rail,
    // or 0 when this rail's MTU cannot carry the chunk asked for).
    shape_mismatch = 20,
    // JOIN: railgated is moving its rails to a new advertisement (a rail
    // added or removed, an MTU or the policy set), one lcore after another;
    // until every lcore has, JOINs are refused so that no job's rails answer
    // from two. The worker JOINs again (milliseconds).
    rails_changing = 21,
    // railgated's operator ended the job (railctl job abort; the text says
    // why): its workers give up the operation and do not re-join it.
    operator_abort = 22,
    // JOIN of another protocol version (offset: its version). Sent in this
    // version; a worker of another cannot parse it, but reads byte 0 and
    // names both versions when its JOIN goes unanswered.
    protocol_version = 23,
};
inline constexpr std::uint32_t error_code_max = 23;

// What railgated tells a job's other members when one aborts it (a
// worker's ERROR, `code` in its aux): the worker's own code when it passes
// on what railgated told it on another rail of the job (a failed rank,
// rails gone down, the operator's abort), so that every rank fails alike
// on every rail whichever rail's word it reads first; `aborted` otherwise.
// Before 2026-12-03 the operator's abort came back as `aborted` from the
// rails a worker ended the job on, and a rank that read that first
// re-joined (CI's rxe-verbs-faults-sanitized).
constexpr error_code relayed_abort(error_code code) noexcept {
    return code == error_code::rank_failed || code == error_code::rail_down || code == error_code::operator_abort
               ? code
               : error_code::aborted;
}

// Host-order view of the 40-byte header.
struct header {
    std::uint8_t version = protocol_version;
    msg_type type = msg_type::contrib;
    dtype dt = dtype::fp32;
    std::uint8_t flags = 0;
    std::uint32_t job_id = 0;
    std::uint64_t job_token = 0;
    std::uint16_t rank = 0;
    std::uint16_t world_size = 0;
    std::uint16_t slot = 0;
    // Elements in this message's payload: u16 on the wire (a UDP chunk is at
    // most 8 KiB); wider in memory for verbs chunks, which carry no header.
    std::uint32_t count = 0;
    std::uint64_t offset = 0; // element offset of the chunk in the tensor
    std::uint32_t gen = 0;    // how many times this slot was used before
    std::uint32_t aux = 0;    // ERROR: error_code; JOIN_ACK: rail index; JOIN: shape_word
};

// A job's shape, as its first rail's JOIN_ACK gives it: chunk bytes in bits
// 0-23, the number of rails it lists in bits 24-30 (0: not named, a worker
// before 2026-12-01), bit 31 set under LAG. A worker's JOINs on its other
// rails carry it in the header's aux, so that every rail runs the job
// alike: each rail creates its part of the job when its first JOIN comes,
// and an MTU, policy or rail-set change between two rails' JOINs would
// otherwise give one job two chunk sizes, two policies, or two stripings
// (or, under LAG, two home members). 0 on the first rail's JOIN (railgated
// chooses).
inline constexpr std::uint32_t shape_lag_bit = 1u << 31, shape_chunk_mask = 0xffffffu, shape_rails_shift = 24,
                               shape_rails_mask = 0x7fu << shape_rails_shift;
constexpr std::uint32_t shape_word(std::uint32_t chunk_bytes, bool lag, unsigned rails = 0) noexcept {
    return (chunk_bytes & shape_chunk_mask) | ((rails << shape_rails_shift) & shape_rails_mask) |
           (lag ? shape_lag_bit : 0);
}
inline constexpr std::uint32_t shape_chunk(std::uint32_t w) noexcept { return w & shape_chunk_mask; }
inline constexpr bool shape_lag(std::uint32_t w) noexcept { return w & shape_lag_bit; }
inline constexpr unsigned shape_rails(std::uint32_t w) noexcept { return (w & shape_rails_mask) >> shape_rails_shift; }

// JOIN body (24 bytes after the header).
struct join_body {
    std::uint64_t max_count = 0;   // largest tensor (elements) the job reduces
    std::uint16_t pool_size = 0;   // slots per rail the worker wants; 0 = server's
    // The operation the worker runs next (allreduces it completed in this
    // job, modulo 2^16): ranks re-joining after a failure must agree on it,
    // or one's inputs would be summed with another operation's.
    std::uint16_t op = 0;
    // Rails (bit = index in JOIN_ACK) the job stripes around: a rail that
    // went down. The job's first JOIN fixes it (with the rails railgated
    // knows are down); later JOINs must name a subset.
    std::uint32_t excluded_rails = 0;
    // Random per worker process and join: a JOIN for a joined rank from
    // another nonce is another process (a restart), never a repeat.
    std::uint64_t nonce = 0;
};
inline constexpr std::size_t join_body_bytes = 24;
// RTT_REPORT body: `count` entries of (u16 histogram bucket index, u32
// samples), big-endian; stats::histogram's buckets, in ns. At most
// rtt_entries_per_msg per message so that it fits the minimum MTU.
inline constexpr std::size_t rtt_entry_bytes = 6;
inline constexpr unsigned rtt_entries_per_msg = 64;

// Verbs rails (PROTOCOL.md, "Verbs rails"). Control messages travel as
// SEND/RECV with the layout above; chunks travel as RDMA WRITE_WITH_IMM into
// the peer's region, the immediate naming the slot and its generation, so a
// chunk needs no header. REGION tells the peer where to write: railgated's
// (after JOIN_ACK) for that rank's contributions, the worker's for its
// results, slot s at addr + s * chunk_bytes.
struct region_body {
    std::uint64_t addr = 0;
    std::uint32_t rkey = 0;
    std::uint32_t bytes = 0;   // region length: at least pool * chunk_bytes
};
inline constexpr std::size_t region_body_bytes = 16;
// Slots per job on a verbs rail: each in-flight chunk holds a posted receive
// on both sides, so the pool is bounded by the receive queues.
inline constexpr unsigned verbs_max_pool = 256;
// Bytes per chunk on verbs rails unless the rail says otherwise (the HCA
// segments a WRITE into path-MTU packets; the chunk only sets the pipelining).
inline constexpr std::uint32_t verbs_default_chunk_bytes = 32768;
// Largest chunk (a verbs rail's; UDP chunks follow the MTU).
inline constexpr std::uint32_t max_chunk_bytes = 4u << 20;
// Largest control message on a verbs rail (a JOIN_ACK of max_rails rails).
inline constexpr std::size_t verbs_ctl_bytes = 1024;
// Immediate data of a chunk: slot in the high 16 bits, the low 16 bits of
// the slot's generation in the low 16. Results echo the contribution's.
constexpr std::uint32_t verbs_imm(std::uint16_t slot, std::uint32_t gen) noexcept {
    return std::uint32_t{slot} << 16 | (gen & 0xffffu);
}
constexpr std::uint16_t verbs_imm_slot(std::uint32_t imm) noexcept { return static_cast<std::uint16_t>(imm >> 16); }
constexpr std::uint16_t verbs_imm_gen(std::uint32_t imm) noexcept { return static_cast<std::uint16_t>(imm); }

// One rail as announced in JOIN_ACK (16 bytes each).
struct rail_entry {
    std::uint32_t ip = 0;          // host order
    std::uint16_t udp_port = 0;
    std::uint16_t mtu = 0;
    std::uint8_t mac[6] = {};
    // Payload bytes per chunk on this rail; u16 on the wire, 0 there when
    // larger (a verbs rail's chunk of 64 KiB or more: the job's chunk).
    std::uint32_t chunk_bytes = 0;
};
inline constexpr std::size_t rail_entry_bytes = 16;
inline constexpr unsigned max_rails = 32;
// A JOIN's shape word as a worker sends it: a chunk of 64..max_chunk_bytes
// in steps of 64 bytes, and at most max_rails rails.
constexpr bool shape_valid(std::uint32_t w) noexcept {
    const std::uint32_t c = shape_chunk(w);
    return c && c % 64 == 0 && c <= max_chunk_bytes && shape_rails(w) <= max_rails;
}

// JOIN_ACK body: 16 bytes then n_rails entries.
struct join_ack_body {
    std::uint16_t pool_size = 0;
    rail_policy policy = rail_policy::rail;
    lag_hash hash = lag_hash::l3l4; // LAG only
    std::uint8_t n_rails = 0;
    // The job's chunk: the smallest rail chunk, a multiple of 64 bytes. On
    // the wire the u16 at byte 4 when it fits (0 otherwise), and its log2
    // at byte 7 when it is a power of two (0 otherwise: MTU 1500's 1408).
    std::uint32_t chunk_bytes = 0;
    // railgated ends a job whose slot waits this long for a rank (0: never);
    // a worker keeps its retransmit timeout well below it.
    std::uint16_t stall_ms = 0;
    // The rails the job stripes around (its first JOIN's, and rails that
    // were down when it was created).
    std::uint32_t excluded_rails = 0;
    rail_entry rails[max_rails];
};
inline constexpr std::size_t join_ack_fixed_bytes = 16;

constexpr std::size_t dtype_size(dtype d) noexcept {
    return d == dtype::bf16 || d == dtype::fp16 ? 2 : 4;
}

constexpr bool dtype_valid(std::uint8_t d) noexcept { return d < dtype_count; }

std::string_view dtype_name(dtype d) noexcept;
// Parses "fp32", "bf16", "fp16", "int32"; returns false on anything else.
bool dtype_from_name(std::string_view s, dtype& out) noexcept;
std::string_view error_name(error_code c) noexcept;
// The ERROR protocol_version's text, in out[n] (cut to fit): what a rail
// tells a JOIN of `version`.
void foreign_join_text(char* out, std::size_t n, const char* rail, unsigned version) noexcept;
// "rail" or "lag".
constexpr const char* policy_name(rail_policy p) noexcept { return p == rail_policy::lag ? "lag" : "rail"; }

// The header of an ERROR that answers `req` (its job, rank and request):
// `code` in aux, `detail` in offset (a rank, or rails), the job instance (or
// what the request asked with) in gen. Both planes send it.
constexpr header error_header(const header& req, error_code code, std::uint64_t detail, std::uint32_t gen) noexcept {
    header h = req;
    h.type = msg_type::error;
    h.flags = 0;
    h.count = 0;
    h.slot = 0;
    h.gen = gen;
    h.offset = detail;
    h.aux = static_cast<std::uint32_t>(code);
    return h;
}
// The text an ERROR carries after its header: the code's name when none is
// given, cut to max_error_text bytes.
inline std::string_view error_text(std::string_view text, error_code code) noexcept {
    if (text.empty()) text = error_name(code);
    return text.substr(0, std::min(text.size(), max_error_text));
}

// Constant-time equality of two tokens: how long it takes says nothing
// about how many bits matched.
constexpr bool token_equal(std::uint64_t a, std::uint64_t b) noexcept {
    std::uint64_t d = a ^ b;
    d |= d >> 32;
    d |= d >> 16;
    d |= d >> 8;
    return (d & 0xff) == 0;
}

// The stripe of rail `rail` among the rails not in `excluded` (bit per
// rail index, n rails), and how many there are: chunk i of a job goes to
// the (i % count)-th rail not excluded. -1 when the rail is excluded.
struct stripe_pos {
    int index = -1;
    unsigned count = 0;
};
constexpr stripe_pos stripe_of(unsigned rail, unsigned n, std::uint32_t excluded) noexcept {
    stripe_pos p;
    for (unsigned r = 0; r < n; ++r) {
        if (excluded >> r & 1) continue;
        if (r == rail) p.index = static_cast<int>(p.count);
        ++p.count;
    }
    return p;
}

// Payload bytes per chunk for a rail MTU: the largest multiple of 64 that
// fits in MTU - IPv4 - UDP - railgate header (1408 at 1500, 8896 at 9000).
// Multiples of 64 keep chunks aligned to cache lines and SIMD widths (and
// to every dtype's element); a power of two would leave a quarter of an
// MTU-1500 frame empty (1024 of 1432 bytes), and the small-MTU paths are
// bound by packets, not bytes.
constexpr std::uint32_t chunk_bytes_for_mtu(std::uint32_t mtu) noexcept {
    if (mtu < 20 + 8 + header_bytes + 64) return 0;
    const std::uint32_t room = mtu - 20 - 8 - static_cast<std::uint32_t>(header_bytes);
    return room / 64 * 64;
}

// LAG. A job's aggregation lives on its home member, lag_member(job, 0,
// n) for everyone; each worker's flow (worker, job) travels on the member
// lag_flow_member picks, and railgated hands it to the home member's
// aggregator (the bond is served by one lcore) and answers on the member
// the flow came in on.
constexpr unsigned lag_member(std::uint32_t job_id, std::uint64_t job_token, unsigned n_rails,
                              std::uint64_t flow = 0) noexcept {
    if (n_rails <= 1) return 0;
    std::uint64_t x = (std::uint64_t{job_id} << 32) ^ job_token ^ (flow * 0x9e3779b97f4a7c15ull);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return static_cast<unsigned>(x % n_rails);
}

// The member a worker's flow uses: l2 keeps every worker of the job on the
// job's home member; l3l4 spreads the workers by rank.
constexpr unsigned lag_flow_member(lag_hash h, std::uint32_t job_id, std::uint64_t job_token, std::uint16_t rank,
                                   unsigned n_rails) noexcept {
    return h == lag_hash::l2 ? lag_member(job_id, job_token, n_rails)
                             : lag_member(job_id, job_token, n_rails, std::uint64_t{rank} + 1);
}

} // namespace railgate::wire
