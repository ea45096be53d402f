// Internal: the per-ISA kernel entry points. Each variant lives in its own
// translation unit compiled with its own -m flags (see meson.build).
#pragma once

#include "dataplane/reduce/reduce.hpp"

namespace railgate::reduce::detail {

#define RAILGATE_DECLARE_VARIANT(suffix)                                                                    \
    void sum_fp32_##suffix(void*, const void* const*, unsigned, std::size_t) noexcept;                   \
    void sum_bf16_##suffix(void*, const void* const*, unsigned, std::size_t) noexcept;                   \
    void sum_fp16_##suffix(void*, const void* const*, unsigned, std::size_t) noexcept;                   \
    void sum_int32_##suffix(void*, const void* const*, unsigned, std::size_t) noexcept;                  \
    void sum_words_fp32_##suffix(void*, const void* const*, unsigned, std::size_t, std::uint64_t*) noexcept; \
    void sum_words_bf16_##suffix(void*, const void* const*, unsigned, std::size_t, std::uint64_t*) noexcept; \
    void sum_words_fp16_##suffix(void*, const void* const*, unsigned, std::size_t, std::uint64_t*) noexcept; \
    void sum_words_int32_##suffix(void*, const void* const*, unsigned, std::size_t, std::uint64_t*) noexcept; \
    void narrow_fp32_##suffix(void*, const float*, float, std::size_t) noexcept;                          \
    void narrow_bf16_##suffix(void*, const float*, float, std::size_t) noexcept;                          \
    void narrow_fp16_##suffix(void*, const float*, float, std::size_t) noexcept;                          \
    void widen_fp32_##suffix(float*, const void*, std::size_t) noexcept;                                  \
    void widen_bf16_##suffix(float*, const void*, std::size_t) noexcept;                                  \
    void widen_fp16_##suffix(float*, const void*, std::size_t) noexcept;

RAILGATE_DECLARE_VARIANT(scalar)
RAILGATE_DECLARE_VARIANT(avx2)
RAILGATE_DECLARE_VARIANT(avx512)
#undef RAILGATE_DECLARE_VARIANT
// avx512_bf16 differs from avx512 only in the bf16 narrowing.
void sum_bf16_avx512bf16(void*, const void* const*, unsigned, std::size_t) noexcept;
void sum_words_bf16_avx512bf16(void*, const void* const*, unsigned, std::size_t, std::uint64_t*) noexcept;
void narrow_bf16_avx512bf16(void*, const float*, float, std::size_t) noexcept;

// Runs the scalar kernel `fn` on elements [from, n): the SIMD variants' tail
// where they have no masked loads. esize is the element size in bytes.
void sum_tail(sum_fn fn, void* dst, const void* const* src, unsigned nsrc, std::size_t from,
              std::size_t n, std::size_t esize) noexcept;
// The same for the words variants; `from` is even (a 16-bit element's half
// of its word is its index's parity).
void sum_tail(sum_words_fn fn, void* dst, const void* const* src, unsigned nsrc, std::size_t from,
              std::size_t n, std::size_t esize, std::uint64_t* words) noexcept;

} // namespace railgate::reduce::detail
