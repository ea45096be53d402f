// Eager rings for small chunks on verbs rails (the "LL" path): a chunk of
// at most ll::max_payload bytes travels as a plain RDMA WRITE (no
// immediate, so no receive and no completion at the receiver) into the
// next entry of a ring in the peer's memory, which the peer busy-polls.
// Worker to railgated carries contributions, railgated to worker results.
// The layout follows NCCL's LL protocol: every 8-byte word holds 4 bytes of
// data and a 4-byte flag, so a word is either entirely written or still
// holds its old flag, whatever order the HCA places a WRITE's bytes in
// (an aligned 8-byte store is indivisible; perftest's latency tests rely on
// the weaker "last byte last"). Entry k of a connection's stream lives at
// ring index k % entries with the flag of its lap, never 0 (a fresh ring
// is zeroed) and never the previous lap's at that index.
//
// Entry words: [0] the immediate a WRITE_WITH_IMM would carry (slot and
// generation), [1] the payload's length in bytes, [2..] the payload, 4
// bytes per word. Pure logic: tests/unit/test_verbs_ll.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "dataplane/proto/wire.hpp"

namespace railgate::verbs::ll {

inline constexpr unsigned entries = wire::verbs_max_pool; // a slot in flight holds at most one entry each way
inline constexpr std::size_t entry_bytes = 256;
inline constexpr std::size_t entry_words = entry_bytes / 8;
inline constexpr std::size_t max_payload = (entry_words - 2) * 4; // 120 bytes
inline constexpr std::size_t ring_bytes = std::size_t{entries} * entry_bytes;

// The flag of stream entry `seq`: its lap, 1 .. 2^32 - 1 and around.
constexpr std::uint32_t flag_of(std::uint64_t seq) noexcept {
    return static_cast<std::uint32_t>(seq / entries % 0xffffffffu) + 1;
}
constexpr std::size_t offset_of(std::uint64_t seq) noexcept { return seq % entries * entry_bytes; }
// The bytes a WRITE of an entry with `len` payload bytes carries.
constexpr std::size_t wire_bytes(std::size_t len) noexcept { return (2 + (len + 3) / 4) * 8; }

constexpr std::uint64_t word(std::uint32_t data, std::uint32_t flag) noexcept {
    return std::uint64_t{flag} << 32 | data;
}

// Writes entry `seq` (imm, payload[0..len)) into `out` (entry_words words);
// returns the bytes to WRITE (wire_bytes(len)). len <= max_payload.
inline std::size_t encode(std::uint64_t* out, std::uint64_t seq, std::uint32_t imm, const void* payload,
                          std::uint32_t len) noexcept {
    const std::uint32_t f = flag_of(seq);
    out[0] = word(imm, f);
    out[1] = word(len, f);
    const auto* p = static_cast<const std::uint8_t*>(payload);
    for (std::uint32_t i = 0, w = 2; i < len; i += 4, ++w) {
        std::uint32_t d = 0;
        std::memcpy(&d, p + i, len - i < 4 ? len - i : 4);
        out[w] = word(d, f);
    }
    return wire_bytes(len);
}

enum class status : std::uint8_t {
    empty,   // not (entirely) written yet: look again later
    ready,   // imm, len and the payload are out
    bad,     // written, but its length is 0 or above max_payload: skip it (counted)
};

struct entry {
    std::uint32_t imm = 0, len = 0;
};

// Whether entry `seq` has begun to land in `in` (its first word holds the
// lap's flag): the peer posted it, and so whatever it posted on the QP
// before it.
inline bool begun(const std::uint64_t* in, std::uint64_t seq) noexcept {
    return static_cast<std::uint32_t>(__atomic_load_n(in, __ATOMIC_ACQUIRE) >> 32) == flag_of(seq);
}

// Reads entry `seq` from `in` (the ring's memory at offset_of(seq), which
// the peer's HCA writes while this reads); the payload goes to `payload`
// (max_payload bytes of room).
inline status poll(const std::uint64_t* in, std::uint64_t seq, entry& e, void* payload) noexcept {
    const std::uint32_t f = flag_of(seq);
    auto load = [in](std::size_t i) { return __atomic_load_n(in + i, __ATOMIC_ACQUIRE); };
    const std::uint64_t w0 = load(0);
    if (static_cast<std::uint32_t>(w0 >> 32) != f) return status::empty;
    const std::uint64_t w1 = load(1);
    if (static_cast<std::uint32_t>(w1 >> 32) != f) return status::empty;
    e.imm = static_cast<std::uint32_t>(w0);
    e.len = static_cast<std::uint32_t>(w1);
    if (e.len == 0 || e.len > max_payload) return status::bad;
    auto* p = static_cast<std::uint8_t*>(payload);
    for (std::uint32_t i = 0, w = 2; i < e.len; i += 4, ++w) {
        const std::uint64_t x = load(w);
        if (static_cast<std::uint32_t>(x >> 32) != f) return status::empty;
        const auto d = static_cast<std::uint32_t>(x);
        std::memcpy(p + i, &d, e.len - i < 4 ? e.len - i : 4);
    }
    return status::ready;
}

} // namespace railgate::verbs::ll
