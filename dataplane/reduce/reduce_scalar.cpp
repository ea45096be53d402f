// Baseline (scalar) kernels: the reference every SIMD variant must match.
#include <cstring>

#include "dataplane/reduce/numeric.hpp"
#include "dataplane/reduce/reduce_variants.hpp"

namespace railgate::reduce::detail {

void sum_fp32_scalar(void* dst, const void* const* src, unsigned nsrc, std::size_t n) noexcept {
    auto* d = static_cast<float*>(dst);
    for (std::size_t i = 0; i < n; ++i) {
        float acc = static_cast<const float*>(src[0])[i];
        for (unsigned k = 1; k < nsrc; ++k) acc += static_cast<const float*>(src[k])[i];
        d[i] = canonicalize(acc);
    }
}

void sum_bf16_scalar(void* dst, const void* const* src, unsigned nsrc, std::size_t n) noexcept {
    auto* d = static_cast<std::uint16_t*>(dst);
    for (std::size_t i = 0; i < n; ++i) {
        float acc = bf16_to_f32(static_cast<const std::uint16_t*>(src[0])[i]);
        for (unsigned k = 1; k < nsrc; ++k)
            acc += bf16_to_f32(static_cast<const std::uint16_t*>(src[k])[i]);
        d[i] = f32_to_bf16(acc);
    }
}

void sum_fp16_scalar(void* dst, const void* const* src, unsigned nsrc, std::size_t n) noexcept {
    auto* d = static_cast<std::uint16_t*>(dst);
    for (std::size_t i = 0; i < n; ++i) {
        float acc = f16_to_f32(static_cast<const std::uint16_t*>(src[0])[i]);
        for (unsigned k = 1; k < nsrc; ++k)
            acc += f16_to_f32(static_cast<const std::uint16_t*>(src[k])[i]);
        d[i] = f32_to_f16(acc);
    }
}

void sum_int32_scalar(void* dst, const void* const* src, unsigned nsrc, std::size_t n) noexcept {
    auto* d = static_cast<std::uint32_t*>(dst);
    for (std::size_t i = 0; i < n; ++i) {
        // Unsigned arithmetic: wrap-around is defined.
        std::uint32_t acc = static_cast<const std::uint32_t*>(src[0])[i];
        for (unsigned k = 1; k < nsrc; ++k) acc += static_cast<const std::uint32_t*>(src[k])[i];
        d[i] = acc;
    }
}

void sum_tail(sum_fn fn, void* dst, const void* const* src, unsigned nsrc, std::size_t from,
              std::size_t n, std::size_t esize) noexcept {
    if (from >= n) return;
    const void* shifted[wire::max_world];
    for (unsigned k = 0; k < nsrc; ++k)
        shifted[k] = static_cast<const char*>(src[k]) + from * esize;
    fn(static_cast<char*>(dst) + from * esize, shifted, nsrc, n - from);
}

} // namespace railgate::reduce::detail
