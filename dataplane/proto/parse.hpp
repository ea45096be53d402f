// Encoding and validation of railgate messages. Pure functions over bytes:
// no DPDK, no allocation, safe on any input (fuzzed in tests/fuzz).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "dataplane/proto/drop_reason.hpp"
#include "dataplane/proto/wire.hpp"

namespace railgate::wire {

// Writes the 40-byte header in network byte order.
void encode_header(const header& h, std::uint8_t* out) noexcept;
// The ones' sum (frame::ones_sum16) of the header encode_header writes,
// from the fields (the hot paths checksum datagrams without reading back
// what they just wrote).
std::uint16_t header_sum(const header& h) noexcept;
// Reads the 40-byte header without validating it. `in` must hold 40 bytes.
header decode_header(const std::uint8_t* in) noexcept;

// Validates a railgate message received by railgated (a UDP payload):
// stateless checks only (the job-dependent ones are in agg/).
// On success returns drop_reason::none and fills `h` and `payload`.
// Rules, in order:
//   - at least header_bytes long;
//   - version == protocol_version;
//   - type is one workers send (join, contrib, leave, error);
//   - no reserved flag bits;
//   - dtype known; world in 1..max_world; rank < world;
//   - contrib: count >= 1 and count * dtype_size == payload length exactly;
//     offset + count <= max_tensor_elems;
//   - join: body of join_body_bytes; region (verbs): region_body_bytes.
drop_reason parse_worker_message(const std::uint8_t* msg, std::size_t len, header& h,
                                 std::span<const std::uint8_t>& payload) noexcept;

// Validates a message received by a worker (result, join_ack, error,
// leave_ack). Same rules with the server-side types; for result the payload
// length must equal count * dtype_size.
drop_reason parse_server_message(const std::uint8_t* msg, std::size_t len, header& h,
                                 std::span<const std::uint8_t>& payload) noexcept;

// One RTT_REPORT entry (rtt_entry_bytes).
void encode_rtt_entry(std::uint16_t bucket, std::uint32_t samples, std::uint8_t* out) noexcept;
void decode_rtt_entry(const std::uint8_t* in, std::uint16_t& bucket, std::uint32_t& samples) noexcept;
// An RTT_REPORT's `count` entries in `body` (the parse checked its length),
// all or none: false when a bucket is `buckets` or above, else each given
// to f(bucket, samples).
template <class F>
bool take_rtt_entries(std::span<const std::uint8_t> body, std::size_t count, std::size_t buckets, F&& f) {
    std::uint16_t b;
    std::uint32_t n;
    for (std::size_t i = 0; i < count; ++i) {
        decode_rtt_entry(body.data() + i * rtt_entry_bytes, b, n);
        if (b >= buckets) return false;
    }
    for (std::size_t i = 0; i < count; ++i) {
        decode_rtt_entry(body.data() + i * rtt_entry_bytes, b, n);
        f(b, n);
    }
    return true;
}

void encode_join_body(const join_body& b, std::uint8_t* out) noexcept;
join_body decode_join_body(const std::uint8_t* in) noexcept;

void encode_region_body(const region_body& b, std::uint8_t* out) noexcept;
region_body decode_region_body(const std::uint8_t* in) noexcept;

// Returns the encoded size: join_ack_fixed_bytes + n_rails * rail_entry_bytes.
std::size_t encode_join_ack_body(const join_ack_body& b, std::uint8_t* out) noexcept;
// Returns false when the body is truncated or announces 0 or > max_rails rails.
bool decode_join_ack_body(std::span<const std::uint8_t> in, join_ack_body& out) noexcept;

} // namespace railgate::wire
