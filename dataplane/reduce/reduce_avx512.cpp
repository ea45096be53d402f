// AVX-512 (F, BW, VL) kernels with masked tails. Compiled with -mavx512f
// -mavx512bw -mavx512vl; called only after cpu_supports(isa::avx512).
// reduce_avx512bf16.cpp includes this file with RAILGATE_AVX512_BF16 set to
// swap in the hardware bf16 narrowing.
#include <immintrin.h>

#include "dataplane/reduce/reduce_variants.hpp"

namespace railgate::reduce::detail {
namespace {

constexpr std::size_t lanes = 16;
constexpr std::size_t step = 4 * lanes;

inline __m512 canonical_nan(__m512 v) noexcept {
    const __mmask16 m = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_mov_ps(v, m, _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
}

// Each io loads an input's raw vector (raw; masked-off lanes zero: the
// checksum sums it), widens it to fp32 lanes (widen), and stores a result
// vector, returning the bits it stored (store; the checksum sums them too).
struct fp32_io {
    using raw_t = __m512i;
    static raw_t raw(const void* p, std::size_t i, __mmask16 m) noexcept {
        return _mm512_maskz_loadu_epi32(m, static_cast<const float*>(p) + i);
    }
    static __m512 widen(raw_t r) noexcept { return _mm512_castsi512_ps(r); }
    static __m512i store(void* p, std::size_t i, __m512 v, __mmask16 m) noexcept {
        v = canonical_nan(v);
        _mm512_mask_storeu_ps(static_cast<float*>(p) + i, m, v);
        return _mm512_castps_si512(v);
    }
};

struct half_raw { // 16 16-bit elements: 8 words
    using raw_t = __m256i;
    static raw_t raw(const void* p, std::size_t i, __mmask16 m) noexcept {
        return _mm256_maskz_loadu_epi16(m, static_cast<const std::uint16_t*>(p) + i);
    }
};

struct bf16_io : half_raw {
    static __m512 widen(raw_t h) noexcept {
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    static __m256i store(void* p, std::size_t i, __m512 v, __mmask16 m) noexcept {
        __m256i out;
#ifdef RAILGATE_AVX512_BF16
        // VCVTNEPS2BF16 rounds to nearest even but treats denormal inputs as
        // zero; patch those lanes (exponent field 0, non-zero) with the
        // integer rounding so that results stay bit-exact with the reference.
        out = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
        const __m512i x = _mm512_castps_si512(v);
        const __mmask16 denorm =
            _mm512_test_epi32_mask(x, _mm512_set1_epi32(0x7fffffff)) &
            ~_mm512_test_epi32_mask(x, _mm512_set1_epi32(0x7f800000));
        if (denorm) {
            const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
            const __m512i r = _mm512_srli_epi32(
                _mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
            out = _mm256_mask_mov_epi16(out, denorm, _mm512_cvtepi32_epi16(r));
        }
        const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        out = _mm256_mask_mov_epi16(out, nan, _mm256_set1_epi16(0x7FC0));
#else
        const __m512i x = _mm512_castps_si512(v);
        const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
        __m512i r = _mm512_srli_epi32(
            _mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
        const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7FC0));
        out = _mm512_cvtepi32_epi16(r);
#endif
        _mm256_mask_storeu_epi16(static_cast<std::uint16_t*>(p) + i, m, out);
        return out;
    }
};

struct fp16_io : half_raw {
    static __m512 widen(raw_t h) noexcept { return _mm512_cvtph_ps(h); }
    static __m256i store(void* p, std::size_t i, __m512 v, __mmask16 m) noexcept {
        const __m256i h =
            _mm512_cvtps_ph(canonical_nan(v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_mask_storeu_epi16(static_cast<std::uint16_t*>(p) + i, m, h);
        return h;
    }
};

// Checksum totals, the inputs' and the output's: 32-bit words zero-extended
// into 64-bit lanes, folded into words[] at the end. (VNNI measured no
// faster in bench_reduce: VPDPBUSD on even and odd bytes, 0.43x memcpy
// against 0.61x at W=2 in L2; VPDPWSSD on sign-flipped words, 0.42-0.62x
// against 0.49-0.59x: their accumulation chains.)
template <bool Words>
struct word_acc {
    __m512i lanes8[wire::max_world + 1]; // the inputs', then the output's (index nsrc)
    explicit word_acc(unsigned nsrc) noexcept {
        if constexpr (Words)
            for (unsigned k = 0; k <= nsrc; ++k) lanes8[k] = _mm512_setzero_si512();
    }
    static __m512i words(__m512i r) noexcept {
        return _mm512_add_epi64(_mm512_and_si512(r, _mm512_set1_epi64(0xffffffff)), _mm512_srli_epi64(r, 32));
    }
    static __m512i words(__m256i r) noexcept { return _mm512_cvtepu32_epi64(r); }
    void add(unsigned k, auto raw) noexcept {
        if constexpr (Words) lanes8[k] = _mm512_add_epi64(lanes8[k], words(raw));
    }
    void add4(unsigned k, auto r0, auto r1, auto r2, auto r3) noexcept {
        if constexpr (Words)
            lanes8[k] = _mm512_add_epi64(lanes8[k], _mm512_add_epi64(_mm512_add_epi64(words(r0), words(r1)),
                                                                     _mm512_add_epi64(words(r2), words(r3))));
    }
    void flush(unsigned nsrc, std::uint64_t* words) const noexcept {
        if constexpr (Words)
            for (unsigned k = 0; k <= nsrc; ++k) {
                alignas(64) std::uint64_t l[8]; // (GCC 12's _mm512_reduce_add_epi64 trips -Wuninitialized)
                _mm512_store_si512(l, lanes8[k]);
                words[k] += l[0] + l[1] + l[2] + l[3] + l[4] + l[5] + l[6] + l[7];
            }
    }
};

template <class Io, bool Words>
void sum_float(void* dst, const void* const* src, unsigned nsrc, std::size_t n, std::uint64_t* words) noexcept {
    constexpr __mmask16 all = 0xffff;
    word_acc<Words> wa(nsrc);
    // Input k's 4 vectors at i: widened into v, their words added to k's.
    auto load4 = [&](unsigned k, std::size_t i, __m512 v[4]) {
        const typename Io::raw_t r0 = Io::raw(src[k], i, all), r1 = Io::raw(src[k], i + lanes, all);
        const typename Io::raw_t r2 = Io::raw(src[k], i + 2 * lanes, all), r3 = Io::raw(src[k], i + 3 * lanes, all);
        wa.add4(k, r0, r1, r2, r3);
        v[0] = Io::widen(r0), v[1] = Io::widen(r1), v[2] = Io::widen(r2), v[3] = Io::widen(r3);
    };
    std::size_t i = 0;
    for (; i + step <= n; i += step) {
        __m512 a[4], b[4];
        load4(0, i, a);
        for (unsigned k = 1; k < nsrc; ++k) {
            load4(k, i, b);
            for (int j = 0; j < 4; ++j) a[j] = _mm512_add_ps(a[j], b[j]);
        }
        wa.add4(nsrc, Io::store(dst, i, a[0], all), Io::store(dst, i + lanes, a[1], all),
                Io::store(dst, i + 2 * lanes, a[2], all), Io::store(dst, i + 3 * lanes, a[3], all));
    }
    for (; i < n; i += lanes) {
        const std::size_t left = n - i;
        const __mmask16 m = left >= lanes ? all : static_cast<__mmask16>((1u << left) - 1);
        typename Io::raw_t r = Io::raw(src[0], i, m);
        wa.add(0, r);
        __m512 a = Io::widen(r);
        for (unsigned k = 1; k < nsrc; ++k) {
            r = Io::raw(src[k], i, m);
            wa.add(k, r);
            a = _mm512_add_ps(a, Io::widen(r));
        }
        wa.add(nsrc, Io::store(dst, i, a, m)); // lanes past n are zeros: sums of zeros
    }
    wa.flush(nsrc, words);
}

template <bool Words>
void sum_int32(void* dst, const void* const* src, unsigned nsrc, std::size_t n, std::uint64_t* words) noexcept {
    auto* d = static_cast<int*>(dst);
    word_acc<Words> wa(nsrc);
    for (std::size_t i = 0; i < n; i += lanes) {
        const std::size_t left = n - i;
        const __mmask16 m = left >= lanes ? 0xffff : static_cast<__mmask16>((1u << left) - 1);
        __m512i a = fp32_io::raw(src[0], i, m);
        wa.add(0, a);
        for (unsigned k = 1; k < nsrc; ++k) {
            const __m512i b = fp32_io::raw(src[k], i, m);
            wa.add(k, b);
            a = _mm512_add_epi32(a, b);
        }
        _mm512_mask_storeu_epi32(d + i, m, a);
        wa.add(nsrc, a);
    }
    wa.flush(nsrc, words);
}

// Compressed allreduces' conversions, 16 lanes at a time with a masked
// tail. (The fp32 narrow may run in place: each vector is loaded before
// it is stored.)
template <class Io>
void narrow(void* dst, const float* src, float div, std::size_t n) noexcept {
    const __m512 d = _mm512_set1_ps(div);
    std::size_t i = 0;
    for (; i + step <= n; i += step) {
        const __m512 v0 = _mm512_div_ps(_mm512_loadu_ps(src + i), d);
        const __m512 v1 = _mm512_div_ps(_mm512_loadu_ps(src + i + lanes), d);
        const __m512 v2 = _mm512_div_ps(_mm512_loadu_ps(src + i + 2 * lanes), d);
        const __m512 v3 = _mm512_div_ps(_mm512_loadu_ps(src + i + 3 * lanes), d);
        Io::store(dst, i, v0, 0xffff), Io::store(dst, i + lanes, v1, 0xffff);
        Io::store(dst, i + 2 * lanes, v2, 0xffff), Io::store(dst, i + 3 * lanes, v3, 0xffff);
    }
    for (; i < n; i += lanes) {
        const std::size_t left = n - i;
        const __mmask16 m = left >= lanes ? 0xffff : static_cast<__mmask16>((1u << left) - 1);
        Io::store(dst, i, _mm512_div_ps(_mm512_maskz_loadu_ps(m, src + i), d), m);
    }
}
template <class Io>
void widen(float* dst, const void* src, std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + step <= n; i += step) {
        const auto r0 = Io::raw(src, i, 0xffff), r1 = Io::raw(src, i + lanes, 0xffff);
        const auto r2 = Io::raw(src, i + 2 * lanes, 0xffff), r3 = Io::raw(src, i + 3 * lanes, 0xffff);
        fp32_io::store(dst, i, Io::widen(r0), 0xffff), fp32_io::store(dst, i + lanes, Io::widen(r1), 0xffff);
        fp32_io::store(dst, i + 2 * lanes, Io::widen(r2), 0xffff), fp32_io::store(dst, i + 3 * lanes, Io::widen(r3), 0xffff);
    }
    for (; i < n; i += lanes) {
        const std::size_t left = n - i;
        const __mmask16 m = left >= lanes ? 0xffff : static_cast<__mmask16>((1u << left) - 1);
        fp32_io::store(dst, i, Io::widen(Io::raw(src, i, m)), m);
    }
}

template <bool W> void fp32(void* d, const void* const* s, unsigned w, std::size_t n, std::uint64_t* x) noexcept {
    sum_float<fp32_io, W>(d, s, w, n, x);
}
template <bool W> void bf16(void* d, const void* const* s, unsigned w, std::size_t n, std::uint64_t* x) noexcept {
    sum_float<bf16_io, W>(d, s, w, n, x);
}
template <bool W> void fp16(void* d, const void* const* s, unsigned w, std::size_t n, std::uint64_t* x) noexcept {
    sum_float<fp16_io, W>(d, s, w, n, x);
}
} // namespace

#define RAILGATE_DEFINE(fn, suffix, body)                                                             \
    void sum_##fn##_##suffix(void* d, const void* const* s, unsigned w, std::size_t n) noexcept {     \
        body<false>(d, s, w, n, nullptr);                                                             \
    }                                                                                                 \
    void sum_words_##fn##_##suffix(void* d, const void* const* s, unsigned w, std::size_t n,          \
                                   std::uint64_t* x) noexcept {                                       \
        body<true>(d, s, w, n, x);                                                                    \
    }
#ifdef RAILGATE_AVX512_BF16
RAILGATE_DEFINE(bf16, avx512bf16, bf16)
void narrow_bf16_avx512bf16(void* d, const float* s, float div, std::size_t n) noexcept { narrow<bf16_io>(d, s, div, n); }
#else
RAILGATE_DEFINE(fp32, avx512, fp32)
RAILGATE_DEFINE(bf16, avx512, bf16)
RAILGATE_DEFINE(fp16, avx512, fp16)
RAILGATE_DEFINE(int32, avx512, sum_int32)
void narrow_fp32_avx512(void* d, const float* s, float div, std::size_t n) noexcept { narrow<fp32_io>(d, s, div, n); }
void narrow_bf16_avx512(void* d, const float* s, float div, std::size_t n) noexcept { narrow<bf16_io>(d, s, div, n); }
void narrow_fp16_avx512(void* d, const float* s, float div, std::size_t n) noexcept { narrow<fp16_io>(d, s, div, n); }
void widen_fp32_avx512(float* d, const void* s, std::size_t n) noexcept { widen<fp32_io>(d, s, n); }
void widen_bf16_avx512(float* d, const void* s, std::size_t n) noexcept { widen<bf16_io>(d, s, n); }
void widen_fp16_avx512(float* d, const void* s, std::size_t n) noexcept { widen<fp16_io>(d, s, n); }
#endif
#undef RAILGATE_DEFINE

} // namespace railgate::reduce::detail
