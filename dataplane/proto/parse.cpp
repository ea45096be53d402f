#include "dataplane/proto/parse.hpp"

#include <bit>
#include <cstring>

namespace railgate::wire {
namespace {

inline void put16(std::uint8_t* p, std::uint16_t v) noexcept {
    p[0] = static_cast<std::uint8_t>(v >> 8);
    p[1] = static_cast<std::uint8_t>(v);
}
inline void put32(std::uint8_t* p, std::uint32_t v) noexcept {
    put16(p, static_cast<std::uint16_t>(v >> 16));
    put16(p + 2, static_cast<std::uint16_t>(v));
}
inline void put64(std::uint8_t* p, std::uint64_t v) noexcept {
    put32(p, static_cast<std::uint32_t>(v >> 32));
    put32(p + 4, static_cast<std::uint32_t>(v));
}
inline std::uint16_t get16(const std::uint8_t* p) noexcept {
    return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
}
inline std::uint32_t get32(const std::uint8_t* p) noexcept {
    return std::uint32_t{get16(p)} << 16 | get16(p + 2);
}
inline std::uint64_t get64(const std::uint8_t* p) noexcept {
    return std::uint64_t{get32(p)} << 32 | get32(p + 4);
}

// Checks shared by both directions; `from_worker` selects the legal types.
drop_reason parse_common(const std::uint8_t* msg, std::size_t len, header& h,
                         std::span<const std::uint8_t>& payload, bool from_worker) noexcept {
    if (len < header_bytes) return drop_reason::rg_truncated;
    if (msg[0] != protocol_version) return drop_reason::rg_version;
    h = decode_header(msg);
    const auto t = static_cast<std::uint8_t>(h.type);
    bool type_ok;
    if (from_worker)
        type_ok = h.type == msg_type::join || h.type == msg_type::contrib || h.type == msg_type::rtt_report ||
                  h.type == msg_type::leave || h.type == msg_type::error || h.type == msg_type::region ||
                  h.type == msg_type::ping;
    else
        type_ok = h.type == msg_type::join_ack || h.type == msg_type::result ||
                  h.type == msg_type::leave_ack || h.type == msg_type::error || h.type == msg_type::region ||
                  h.type == msg_type::pong || h.type == msg_type::held;
    if (!type_ok || t == 0) return drop_reason::rg_type;
    if (h.flags & ~flags_known) return drop_reason::rg_flags;
    if (!dtype_valid(static_cast<std::uint8_t>(h.dt))) return drop_reason::rg_dtype;
    if (h.world_size == 0 || h.world_size > max_world) return drop_reason::rg_world;
    if (from_worker && h.rank >= h.world_size) return drop_reason::rg_rank;

    const std::size_t body = len - header_bytes;
    payload = std::span<const std::uint8_t>(msg + header_bytes, body);
    const bool data = from_worker ? h.type == msg_type::contrib : h.type == msg_type::result;
    if (data) {
        if (h.count == 0) return drop_reason::rg_count_zero;
        const std::size_t need = std::size_t{h.count} * dtype_size(h.dt);
        if (need > body) return drop_reason::rg_count_exceeds_payload;
        if (need < body) return drop_reason::rg_payload_trailing;
        if (h.offset > max_tensor_elems || h.count > max_tensor_elems - h.offset)
            return drop_reason::rg_offset_range;
    } else if (from_worker && h.type == msg_type::join && body != join_body_bytes) {
        return drop_reason::rg_body;
    } else if (h.type == msg_type::region && body != region_body_bytes) {
        return drop_reason::rg_body;
    } else if (!from_worker && body != 0 &&
               (h.type == msg_type::leave_ack || h.type == msg_type::pong || h.type == msg_type::held)) {
        // Header-only answers (a RESULT with a bit flipped in its type
        // byte would otherwise be a HELD with a payload to check).
        return drop_reason::rg_body;
    } else if (from_worker && h.type == msg_type::rtt_report &&
               (h.count == 0 || h.count > rtt_entries_per_msg || body != std::size_t{h.count} * rtt_entry_bytes)) {
        return drop_reason::rg_rtt_body;
    }
    return drop_reason::none;
}

} // namespace

void encode_header(const header& h, std::uint8_t* o) noexcept {
    o[0] = h.version;
    o[1] = static_cast<std::uint8_t>(h.type);
    o[2] = static_cast<std::uint8_t>(h.dt);
    o[3] = h.flags;
    put32(o + 4, h.job_id);
    put64(o + 8, h.job_token);
    put16(o + 16, h.rank);
    put16(o + 18, h.world_size);
    put16(o + 20, h.slot);
    put16(o + 22, static_cast<std::uint16_t>(h.count)); // wire messages stay below 2^16 elements
    put64(o + 24, h.offset);
    put32(o + 32, h.gen);
    put32(o + 36, h.aux);
}

std::uint16_t header_sum(const header& h) noexcept {
    // The encoded header's big-endian 16-bit words, from the fields.
    auto w32 = [](std::uint32_t x) { return std::uint64_t{x >> 16} + (x & 0xffff); };
    auto w64 = [&](std::uint64_t x) { return w32(static_cast<std::uint32_t>(x >> 32)) + w32(static_cast<std::uint32_t>(x)); };
    std::uint64_t s = (std::uint64_t{h.version} << 8 | static_cast<std::uint8_t>(h.type)) +
                      (std::uint64_t{static_cast<std::uint8_t>(h.dt)} << 8 | h.flags) + w32(h.job_id) +
                      w64(h.job_token) + h.rank + h.world_size + h.slot + static_cast<std::uint16_t>(h.count) +
                      w64(h.offset) + w32(h.gen) + w32(h.aux);
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    return static_cast<std::uint16_t>(s);
}

header decode_header(const std::uint8_t* i) noexcept {
    header h;
    h.version = i[0];
    h.type = static_cast<msg_type>(i[1]);
    h.dt = static_cast<dtype>(i[2]);
    h.flags = i[3];
    h.job_id = get32(i + 4);
    h.job_token = get64(i + 8);
    h.rank = get16(i + 16);
    h.world_size = get16(i + 18);
    h.slot = get16(i + 20);
    h.count = get16(i + 22);
    h.offset = get64(i + 24);
    h.gen = get32(i + 32);
    h.aux = get32(i + 36);
    return h;
}

drop_reason parse_worker_message(const std::uint8_t* msg, std::size_t len, header& h,
                                 std::span<const std::uint8_t>& payload) noexcept {
    return parse_common(msg, len, h, payload, true);
}

drop_reason parse_server_message(const std::uint8_t* msg, std::size_t len, header& h,
                                 std::span<const std::uint8_t>& payload) noexcept {
    return parse_common(msg, len, h, payload, false);
}

void encode_rtt_entry(std::uint16_t bucket, std::uint32_t samples, std::uint8_t* o) noexcept {
    put16(o, bucket);
    put32(o + 2, samples);
}

void decode_rtt_entry(const std::uint8_t* i, std::uint16_t& bucket, std::uint32_t& samples) noexcept {
    bucket = get16(i);
    samples = get32(i + 2);
}

void encode_join_body(const join_body& b, std::uint8_t* o) noexcept {
    std::memset(o, 0, join_body_bytes);
    put64(o, b.max_count);
    put16(o + 8, b.pool_size);
    put16(o + 10, b.op);
    put32(o + 12, b.excluded_rails);
    put64(o + 16, b.nonce);
}

join_body decode_join_body(const std::uint8_t* i) noexcept {
    join_body b;
    b.max_count = get64(i);
    b.pool_size = get16(i + 8);
    b.op = get16(i + 10);
    b.excluded_rails = get32(i + 12);
    b.nonce = get64(i + 16);
    return b;
}

void encode_region_body(const region_body& b, std::uint8_t* o) noexcept {
    put64(o, b.addr);
    put32(o + 8, b.rkey);
    put32(o + 12, b.bytes);
}

region_body decode_region_body(const std::uint8_t* i) noexcept {
    return {get64(i), get32(i + 8), get32(i + 12)};
}

std::size_t encode_join_ack_body(const join_ack_body& b, std::uint8_t* o) noexcept {
    std::memset(o, 0, join_ack_fixed_bytes);
    put16(o, b.pool_size);
    o[2] = static_cast<std::uint8_t>(b.policy);
    o[6] = static_cast<std::uint8_t>(b.hash);
    o[3] = b.n_rails;
    put16(o + 4, static_cast<std::uint16_t>(b.chunk_bytes <= 0xffff ? b.chunk_bytes : 0));
    o[7] = static_cast<std::uint8_t>(std::has_single_bit(b.chunk_bytes) ? std::countr_zero(b.chunk_bytes) : 0);
    put16(o + 8, b.stall_ms);
    put32(o + 12, b.excluded_rails);
    std::uint8_t* e = o + join_ack_fixed_bytes;
    for (unsigned r = 0; r < b.n_rails && r < max_rails; ++r, e += rail_entry_bytes) {
        const rail_entry& re = b.rails[r];
        put32(e, re.ip);
        put16(e + 4, re.udp_port);
        put16(e + 6, re.mtu);
        std::memcpy(e + 8, re.mac, 6);
        put16(e + 14, static_cast<std::uint16_t>(re.chunk_bytes <= 0xffff ? re.chunk_bytes : 0));
    }
    return join_ack_fixed_bytes + std::size_t{b.n_rails} * rail_entry_bytes;
}

bool decode_join_ack_body(std::span<const std::uint8_t> in, join_ack_body& b) noexcept {
    if (in.size() < join_ack_fixed_bytes) return false;
    const std::uint8_t* i = in.data();
    b.pool_size = get16(i);
    if (i[2] > static_cast<std::uint8_t>(rail_policy::lag)) return false;
    b.policy = static_cast<rail_policy>(i[2]);
    if (i[6] > static_cast<std::uint8_t>(lag_hash::l3l4)) return false;
    b.hash = static_cast<lag_hash>(i[6]);
    b.n_rails = i[3];
    // The u16 where it fits, else 2^log2 (which must agree where both are).
    const unsigned log2 = i[7];
    if (log2 > 31) return false;
    const std::uint32_t pow = std::uint32_t{1} << log2;
    b.chunk_bytes = get16(i + 4);
    if (b.chunk_bytes == 0 && log2 >= 16) b.chunk_bytes = pow;
    if (b.chunk_bytes == 0 || b.chunk_bytes > max_chunk_bytes || (log2 && b.chunk_bytes != pow)) return false;
    if (b.n_rails == 0 || b.n_rails > max_rails) return false;
    b.stall_ms = get16(i + 8);
    b.excluded_rails = get32(i + 12);
    // Every rail excluded, or one beyond the list: nothing to stripe over.
    if (b.n_rails < 32 && (b.excluded_rails >> b.n_rails)) return false;
    if (stripe_of(0, b.n_rails, b.excluded_rails).count == 0) return false;
    if (in.size() != join_ack_fixed_bytes + std::size_t{b.n_rails} * rail_entry_bytes) return false;
    const std::uint8_t* e = i + join_ack_fixed_bytes;
    for (unsigned r = 0; r < b.n_rails; ++r, e += rail_entry_bytes) {
        rail_entry& re = b.rails[r];
        re.ip = get32(e);
        re.udp_port = get16(e + 4);
        re.mtu = get16(e + 6);
        std::memcpy(re.mac, e + 8, 6);
        re.chunk_bytes = get16(e + 14);
        if (re.chunk_bytes == 0) re.chunk_bytes = b.chunk_bytes; // a chunk above 65535 bytes
    }
    return true;
}

} // namespace railgate::wire
