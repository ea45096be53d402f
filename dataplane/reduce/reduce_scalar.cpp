// Baseline (scalar) kernels: the reference every SIMD variant must match.
#include <bit>
#include <cstring>

#include "dataplane/reduce/numeric.hpp"
#include "dataplane/reduce/reduce_variants.hpp"

namespace railgate::reduce::detail {
namespace {

// words[k] accumulates input k's little-endian 32-bit words: a 32-bit
// element is one; a 16-bit element is the low half of its pair's word at an
// even index, the high half at an odd one.
template <class T>
inline std::uint64_t word_of(T raw, std::size_t i) noexcept {
    if constexpr (sizeof(T) == 4) return raw;
    else return std::uint64_t{raw} << (16 * (i & 1));
}

// Element i of a buffer that need not be aligned to T (a payload after a
// 42-byte frame header is 2 mod 4): memcpy, one plain load or store on x86.
template <class T> inline T load(const void* p, std::size_t i) noexcept {
    T v;
    std::memcpy(&v, static_cast<const unsigned char*>(p) + i * sizeof(T), sizeof(T));
    return v;
}
template <class T> inline void store(void* p, std::size_t i, T v) noexcept {
    std::memcpy(static_cast<unsigned char*>(p) + i * sizeof(T), &v, sizeof(T));
}

// Load, widen (to the accumulation type), add in rank order, narrow:
// Widen and Narrow give each dtype its arithmetic.
template <class T, bool Words, class Acc, class Widen, class Narrow>
inline void sum_elements(void* dst, const void* const* src, unsigned nsrc, std::size_t n, std::uint64_t* words,
                         Widen widen, Narrow narrow) noexcept {
    for (std::size_t i = 0; i < n; ++i) {
        const T r0 = load<T>(src[0], i);
        if constexpr (Words) words[0] += word_of(r0, i);
        Acc acc = widen(r0);
        for (unsigned k = 1; k < nsrc; ++k) {
            const T r = load<T>(src[k], i);
            if constexpr (Words) words[k] += word_of(r, i);
            acc += widen(r);
        }
        const T out = narrow(acc);
        if constexpr (Words) words[nsrc] += word_of(out, i);
        store<T>(dst, i, out);
    }
}

float f32_of(std::uint32_t r) noexcept { return std::bit_cast<float>(r); }
std::uint32_t f32_out(float f) noexcept { return std::bit_cast<std::uint32_t>(canonicalize(f)); }
std::uint32_t same(std::uint32_t x) noexcept { return x; } // int32: unsigned, wrap-around defined

template <bool Words>
void fp32(void* d, const void* const* s, unsigned w, std::size_t n, std::uint64_t* words) noexcept {
    sum_elements<std::uint32_t, Words, float>(d, s, w, n, words, f32_of, f32_out);
}
template <bool Words>
void bf16(void* d, const void* const* s, unsigned w, std::size_t n, std::uint64_t* words) noexcept {
    sum_elements<std::uint16_t, Words, float>(d, s, w, n, words, bf16_to_f32, f32_to_bf16);
}
template <bool Words>
void fp16(void* d, const void* const* s, unsigned w, std::size_t n, std::uint64_t* words) noexcept {
    sum_elements<std::uint16_t, Words, float>(d, s, w, n, words, f16_to_f32, f32_to_f16);
}
template <bool Words>
void int32(void* d, const void* const* s, unsigned w, std::size_t n, std::uint64_t* words) noexcept {
    sum_elements<std::uint32_t, Words, std::uint32_t>(d, s, w, n, words, same, same);
}

} // namespace

void sum_fp32_scalar(void* d, const void* const* s, unsigned w, std::size_t n) noexcept { fp32<false>(d, s, w, n, nullptr); }
void sum_bf16_scalar(void* d, const void* const* s, unsigned w, std::size_t n) noexcept { bf16<false>(d, s, w, n, nullptr); }
void sum_fp16_scalar(void* d, const void* const* s, unsigned w, std::size_t n) noexcept { fp16<false>(d, s, w, n, nullptr); }
void sum_int32_scalar(void* d, const void* const* s, unsigned w, std::size_t n) noexcept { int32<false>(d, s, w, n, nullptr); }
void sum_words_fp32_scalar(void* d, const void* const* s, unsigned w, std::size_t n, std::uint64_t* x) noexcept {
    fp32<true>(d, s, w, n, x);
}
void sum_words_bf16_scalar(void* d, const void* const* s, unsigned w, std::size_t n, std::uint64_t* x) noexcept {
    bf16<true>(d, s, w, n, x);
}
void sum_words_fp16_scalar(void* d, const void* const* s, unsigned w, std::size_t n, std::uint64_t* x) noexcept {
    fp16<true>(d, s, w, n, x);
}
void sum_words_int32_scalar(void* d, const void* const* s, unsigned w, std::size_t n, std::uint64_t* x) noexcept {
    int32<true>(d, s, w, n, x);
}

void narrow_fp32_scalar(void* d, const float* s, float div, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) store<std::uint32_t>(d, i, f32_out(s[i] / div));
}
void narrow_bf16_scalar(void* d, const float* s, float div, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) store<std::uint16_t>(d, i, f32_to_bf16(s[i] / div));
}
void narrow_fp16_scalar(void* d, const float* s, float div, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) store<std::uint16_t>(d, i, f32_to_f16(s[i] / div));
}
void widen_fp32_scalar(float* d, const void* s, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) d[i] = canonicalize(load<float>(s, i));
}
void widen_bf16_scalar(float* d, const void* s, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) d[i] = canonicalize(bf16_to_f32(load<std::uint16_t>(s, i)));
}
void widen_fp16_scalar(float* d, const void* s, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) d[i] = canonicalize(f16_to_f32(load<std::uint16_t>(s, i)));
}

namespace {
void shift(const void* const* src, unsigned nsrc, std::size_t by, const void** out) noexcept {
    for (unsigned k = 0; k < nsrc; ++k) out[k] = static_cast<const char*>(src[k]) + by;
}
} // namespace

void sum_tail(sum_fn fn, void* dst, const void* const* src, unsigned nsrc, std::size_t from,
              std::size_t n, std::size_t esize) noexcept {
    if (from >= n) return;
    const void* shifted[wire::max_world];
    shift(src, nsrc, from * esize, shifted);
    fn(static_cast<char*>(dst) + from * esize, shifted, nsrc, n - from);
}

void sum_tail(sum_words_fn fn, void* dst, const void* const* src, unsigned nsrc, std::size_t from,
              std::size_t n, std::size_t esize, std::uint64_t* words) noexcept {
    if (from >= n) return;
    const void* shifted[wire::max_world];
    shift(src, nsrc, from * esize, shifted);
    fn(static_cast<char*>(dst) + from * esize, shifted, nsrc, n - from, words);
}

} // namespace railgate::reduce::detail
