// A token-bucket shaper: `rate` bits per second, at most `burst` bytes at
// once. The clock is a template parameter (any std::chrono clock, or a
// manual one in tests): the bucket never reads it, callers pass `now`, so
// a burst of packets costs one clock read and tests need no sleeps.
//
// Tokens are kept in byte-nanoseconds per second units (bytes * 1e9) so
// refills are exact integers: no drift however small the elapsed time.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace railgate::qos {

template <class Clock>
class token_bucket {
public:
    using time_point = typename Clock::time_point;
    static constexpr std::uint64_t scale = 1000000000ull; // tokens per byte

    token_bucket() = default;
    // rate_bps 0: unshaped (always conforms).
    token_bucket(std::uint64_t rate_bps, std::uint64_t burst_bytes, time_point now) { set(rate_bps, burst_bytes, now); }

    void set(std::uint64_t rate_bps, std::uint64_t burst_bytes, time_point now) noexcept {
        rate_Bps_ = rate_bps / 8;
        burst_ = std::min<std::uint64_t>(burst_bytes, max_burst) * scale;
        tokens_ = burst_; // starts full, as tbf and HTB do
        last_ = now;
    }
    bool shaped() const noexcept { return rate_Bps_ != 0; }
    std::uint64_t rate_bps() const noexcept { return rate_Bps_ * 8; }
    std::uint64_t burst_bytes() const noexcept { return burst_ / scale; }

    // Whether `bytes` may leave now (refills first).
    bool conforms(std::uint32_t bytes, time_point now) noexcept {
        if (!shaped()) return true;
        refill(now);
        return tokens_ >= std::uint64_t{bytes} * scale;
    }
    // Takes the tokens of `bytes` that conformed.
    void consume(std::uint32_t bytes) noexcept {
        if (shaped()) tokens_ -= std::min(tokens_, std::uint64_t{bytes} * scale);
    }
    // How long until `bytes` conform (0: now).
    std::chrono::nanoseconds wait(std::uint32_t bytes, time_point now) noexcept {
        if (!shaped()) return std::chrono::nanoseconds(0);
        refill(now);
        const std::uint64_t need = std::uint64_t{bytes} * scale;
        if (tokens_ >= need) return std::chrono::nanoseconds(0);
        return std::chrono::nanoseconds((need - tokens_ + rate_Bps_ - 1) / rate_Bps_);
    }

private:
    // 8 GiB of burst keeps 2 * burst * scale (a full bucket plus a refill)
    // below 2^64.
    static constexpr std::uint64_t max_burst = std::uint64_t{1} << 33;

    void refill(time_point now) noexcept {
        if (now <= last_) return;
        const auto ns = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_).count());
        last_ = now;
        // Time to fill the bucket from empty caps the product (no overflow).
        const std::uint64_t fill_ns = burst_ / rate_Bps_ + 1;
        tokens_ = std::min(burst_, tokens_ + std::min(ns, fill_ns) * rate_Bps_);
    }

    std::uint64_t rate_Bps_ = 0, burst_ = 0, tokens_ = 0;
    time_point last_{};
};

} // namespace railgate::qos
