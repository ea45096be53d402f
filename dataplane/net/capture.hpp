// Packet capture (railctl capture): a rail's lcore mirrors the first
// `snaplen` bytes of the packets it receives, sends or drops into a
// single-producer single-consumer ring of fixed-size records; the control
// thread drains it and writes pcapng. The lcore never waits: when the ring
// is full it skips the packet and counts capture_overruns. Pure logic, no
// DPDK, so that it is unit-tested on its own.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "dataplane/proto/drop_reason.hpp"

namespace railgate::net {

enum class capture_dir : std::uint8_t { rx = 0, tx = 1 };

// What a capture mirrors of its rail.
struct capture_filter {
    bool rx = true, tx = true, drops = false;
    std::optional<std::uint32_t> job; // only this job's railgate datagrams
    std::uint32_t snaplen = 128;      // bytes of each packet kept
    std::uint16_t udp_port = 0;       // railgate's port on the rail (for `job`)
};

class capture_ring {
public:
    // One record's fixed part; `cap_len` bytes of the packet follow it.
    struct record {
        std::uint64_t ns = 0;       // the data plane's clock (net::daemon::clock_ns)
        std::uint32_t orig_len = 0; // the packet's length on the wire
        std::uint16_t cap_len = 0;
        capture_dir dir = capture_dir::rx;
        drop_reason reason = drop_reason::none; // none: not dropped
    };
    static constexpr std::uint32_t max_snaplen = 16384;

    // Slots of sizeof(record) + snaplen bytes (rounded to 64), as many as
    // fit `budget` bytes, a power of two in [64, 65536].
    explicit capture_ring(std::uint32_t snaplen, std::size_t budget = std::size_t{2} << 20)
        : snaplen_(std::clamp<std::uint32_t>(snaplen, 1, max_snaplen)),
          slot_((sizeof(record) + snaplen_ + 63) & ~std::size_t{63}) {
        std::size_t n = 64;
        while (n < 65536 && (n * 2) * slot_ <= budget) n *= 2;
        mask_ = n - 1;
        buf_ = std::make_unique<unsigned char[]>(n * slot_);
    }
    capture_ring(const capture_ring&) = delete;
    capture_ring& operator=(const capture_ring&) = delete;

    std::uint32_t snaplen() const noexcept { return snaplen_; }
    std::size_t slots() const noexcept { return mask_ + 1; }

    // Producer: the slot for a packet of `orig_len` bytes, its header
    // filled and cap_len = min(orig_len, snaplen); the caller copies
    // cap_len bytes to data(), then commit(). Null when the ring is full.
    record* reserve(std::uint32_t orig_len, capture_dir dir, drop_reason why, std::uint64_t ns) noexcept {
        const std::uint64_t h = head_.load(std::memory_order_relaxed);
        if (h - tail_cache_ > mask_) {
            tail_cache_ = tail_.load(std::memory_order_acquire);
            if (h - tail_cache_ > mask_) return nullptr;
        }
        auto* r = reinterpret_cast<record*>(&buf_[(h & mask_) * slot_]);
        r->ns = ns;
        r->orig_len = orig_len;
        r->cap_len = static_cast<std::uint16_t>(std::min(orig_len, snaplen_));
        r->dir = dir;
        r->reason = why;
        return r;
    }
    static unsigned char* data(record* r) noexcept { return reinterpret_cast<unsigned char*>(r + 1); }
    void commit() noexcept { head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

    // Consumer: the oldest record (null when empty), then pop().
    const record* front() noexcept {
        const std::uint64_t t = tail_.load(std::memory_order_relaxed);
        if (t == head_cache_) {
            head_cache_ = head_.load(std::memory_order_acquire);
            if (t == head_cache_) return nullptr;
        }
        return reinterpret_cast<const record*>(&buf_[(t & mask_) * slot_]);
    }
    static const unsigned char* data(const record* r) noexcept { return reinterpret_cast<const unsigned char*>(r + 1); }
    void pop() noexcept { tail_.store(tail_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

private:
    std::uint32_t snaplen_;
    std::size_t slot_;
    std::size_t mask_ = 0;
    std::unique_ptr<unsigned char[]> buf_;
    alignas(64) std::atomic<std::uint64_t> head_{0}; // written by the producer
    std::uint64_t tail_cache_ = 0;                   // the producer's view of tail_
    alignas(64) std::atomic<std::uint64_t> tail_{0}; // written by the consumer
    std::uint64_t head_cache_ = 0;                   // the consumer's view of head_
};

// Whether a frame is the railgate datagram of `job` (IPv4, with or without
// one 802.1Q tag, UDP from or to `udp_port`, the header's job id). Reads at
// most `len` bytes.
inline bool frame_of_job(const std::uint8_t* p, std::size_t len, std::uint16_t udp_port, std::uint32_t job) noexcept {
    std::size_t l3 = 14;
    if (len < l3) return false;
    unsigned type = unsigned{p[12]} << 8 | p[13];
    if (type == 0x8100) {
        if (len < 18) return false;
        type = unsigned{p[16]} << 8 | p[17];
        l3 = 18;
    }
    if (type != 0x0800 || len < l3 + 20 || (p[l3] >> 4) != 4 || p[l3 + 9] != 17) return false;
    const std::size_t l4 = l3 + std::size_t{p[l3] & 0x0fu} * 4;
    const std::size_t msg = l4 + 8;
    if (len < msg + 8) return false;
    const unsigned sport = unsigned{p[l4]} << 8 | p[l4 + 1], dport = unsigned{p[l4 + 2]} << 8 | p[l4 + 3];
    if (sport != udp_port && dport != udp_port) return false;
    const std::uint32_t id = std::uint32_t{p[msg + 4]} << 24 | std::uint32_t{p[msg + 5]} << 16 |
                             std::uint32_t{p[msg + 6]} << 8 | p[msg + 7];
    return id == job;
}

} // namespace railgate::net
