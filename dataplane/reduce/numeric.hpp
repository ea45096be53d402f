// Exact scalar conversions between fp32 and bf16/fp16 (round to nearest
// even, canonical NaN). The reference for every SIMD variant; also used by
// railbench to build references. Include only from translation units built
// for the baseline ISA (never from the -mavx* kernel files), so no
// AVX-compiled copy of these inline functions can leak into baseline code.
#pragma once

#include <bit>
#include <cstdint>

namespace railgate::reduce {

inline constexpr std::uint32_t canonical_nan_f32 = 0x7FC00000u;
inline constexpr std::uint16_t canonical_nan_bf16 = 0x7FC0u;
inline constexpr std::uint16_t canonical_nan_f16 = 0x7E00u;

inline float bf16_to_f32(std::uint16_t h) noexcept {
    return std::bit_cast<float>(std::uint32_t{h} << 16);
}

inline std::uint16_t f32_to_bf16(float f) noexcept {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return canonical_nan_bf16;
    const std::uint32_t r = x + 0x7fffu + ((x >> 16) & 1u);
    return static_cast<std::uint16_t>(r >> 16);
}

inline float f16_to_f32(std::uint16_t h) noexcept {
    const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
    const std::uint32_t exp = (h >> 10) & 0x1fu;
    const std::uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        // Zero or subnormal: mant * 2^-24 is exact in fp32.
        const float v = static_cast<float>(mant) * 0x1p-24f;
        return std::bit_cast<float>(std::bit_cast<std::uint32_t>(v) | sign);
    }
    if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | mant << 13);
    return std::bit_cast<float>(sign | (exp + 112) << 23 | mant << 13);
}

inline std::uint16_t f32_to_f16(float f) noexcept {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
    const std::uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return canonical_nan_f16;
    if (a >= 0x477ff000u) return sign | 0x7c00u; // >= 65520 rounds to infinity
    if (a < 0x38800000u) {
        // Below the smallest normal half (2^-14): subnormal half or zero.
        const std::uint32_t exp = a >> 23;
        if (exp < 102) return sign; // < 2^-25: rounds to zero (2^-25 ties to even 0)
        const std::uint32_t mant = (a & 0x7fffffu) | 0x800000u;
        const std::uint32_t shift = 126 - exp; // 14..24
        std::uint32_t m = mant >> shift;
        const std::uint32_t rem = mant & ((1u << shift) - 1);
        const std::uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (m & 1u))) ++m;
        return static_cast<std::uint16_t>(sign | m);
    }
    const std::uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((r >> 13) - (112u << 10)));
}

inline float canonicalize(float f) noexcept {
    return f != f ? std::bit_cast<float>(canonical_nan_f32) : f;
}

} // namespace railgate::reduce
