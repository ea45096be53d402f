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

struct fp32_io {
    static __m512 load(const void* p, std::size_t i, __mmask16 m) noexcept {
        return _mm512_maskz_loadu_ps(m, static_cast<const float*>(p) + i);
    }
    static void store(void* p, std::size_t i, __m512 v, __mmask16 m) noexcept {
        _mm512_mask_storeu_ps(static_cast<float*>(p) + i, m, canonical_nan(v));
    }
};

struct bf16_io {
    static __m512 load(const void* p, std::size_t i, __mmask16 m) noexcept {
        const __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const std::uint16_t*>(p) + i);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    static void store(void* p, std::size_t i, __m512 v, __mmask16 m) noexcept {
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
    }
};

struct fp16_io {
    static __m512 load(const void* p, std::size_t i, __mmask16 m) noexcept {
        return _mm512_cvtph_ps(
            _mm256_maskz_loadu_epi16(m, static_cast<const std::uint16_t*>(p) + i));
    }
    static void store(void* p, std::size_t i, __m512 v, __mmask16 m) noexcept {
        const __m256i h =
            _mm512_cvtps_ph(canonical_nan(v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_mask_storeu_epi16(static_cast<std::uint16_t*>(p) + i, m, h);
    }
};

template <class Io>
void sum_float(void* dst, const void* const* src, unsigned nsrc, std::size_t n) noexcept {
    constexpr __mmask16 all = 0xffff;
    std::size_t i = 0;
    for (; i + step <= n; i += step) {
        __m512 a0 = Io::load(src[0], i, all), a1 = Io::load(src[0], i + lanes, all);
        __m512 a2 = Io::load(src[0], i + 2 * lanes, all), a3 = Io::load(src[0], i + 3 * lanes, all);
        for (unsigned k = 1; k < nsrc; ++k) {
            a0 = _mm512_add_ps(a0, Io::load(src[k], i, all));
            a1 = _mm512_add_ps(a1, Io::load(src[k], i + lanes, all));
            a2 = _mm512_add_ps(a2, Io::load(src[k], i + 2 * lanes, all));
            a3 = _mm512_add_ps(a3, Io::load(src[k], i + 3 * lanes, all));
        }
        Io::store(dst, i, a0, all);
        Io::store(dst, i + lanes, a1, all);
        Io::store(dst, i + 2 * lanes, a2, all);
        Io::store(dst, i + 3 * lanes, a3, all);
    }
    for (; i < n; i += lanes) {
        const std::size_t left = n - i;
        const __mmask16 m = left >= lanes ? all : static_cast<__mmask16>((1u << left) - 1);
        __m512 a = Io::load(src[0], i, m);
        for (unsigned k = 1; k < nsrc; ++k) a = _mm512_add_ps(a, Io::load(src[k], i, m));
        Io::store(dst, i, a, m);
    }
}

} // namespace

#ifdef RAILGATE_AVX512_BF16
void sum_bf16_avx512bf16(void* d, const void* const* s, unsigned w, std::size_t n) noexcept {
    sum_float<bf16_io>(d, s, w, n);
}
#else
void sum_fp32_avx512(void* d, const void* const* s, unsigned w, std::size_t n) noexcept {
    sum_float<fp32_io>(d, s, w, n);
}
void sum_bf16_avx512(void* d, const void* const* s, unsigned w, std::size_t n) noexcept {
    sum_float<bf16_io>(d, s, w, n);
}
void sum_fp16_avx512(void* d, const void* const* s, unsigned w, std::size_t n) noexcept {
    sum_float<fp16_io>(d, s, w, n);
}

void sum_int32_avx512(void* dst, const void* const* src, unsigned nsrc, std::size_t n) noexcept {
    auto* d = static_cast<int*>(dst);
    for (std::size_t i = 0; i < n; i += lanes) {
        const std::size_t left = n - i;
        const __mmask16 m = left >= lanes ? 0xffff : static_cast<__mmask16>((1u << left) - 1);
        __m512i a = _mm512_maskz_loadu_epi32(m, static_cast<const int*>(src[0]) + i);
        for (unsigned k = 1; k < nsrc; ++k)
            a = _mm512_add_epi32(a, _mm512_maskz_loadu_epi32(m, static_cast<const int*>(src[k]) + i));
        _mm512_mask_storeu_epi32(d + i, m, a);
    }
}
#endif

} // namespace railgate::reduce::detail
