// AVX2 + F16C kernels. Compiled with -mavx2 -mf16c; called only after
// cpu_supports(isa::avx2). Same per-element operation order as the scalar
// reference: acc = src0; acc += src1; ... (no FMA, no reassociation).
#include <immintrin.h>

#include <type_traits>

#include "dataplane/reduce/reduce_variants.hpp"

namespace railgate::reduce::detail {
namespace {

// 4 vectors of 8 lanes per step: enough independent adds to hide latency.
constexpr std::size_t lanes = 8;
constexpr std::size_t step = 4 * lanes;

struct fp32_io {
    static constexpr std::size_t esize = 4;
    static __m256 load(const void* p, std::size_t i) noexcept {
        return _mm256_loadu_ps(static_cast<const float*>(p) + i);
    }
    static void store(void* p, std::size_t i, __m256 v) noexcept {
        const __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
        v = _mm256_blendv_ps(v, nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        _mm256_storeu_ps(static_cast<float*>(p) + i, v);
    }
};

struct bf16_io {
    static constexpr std::size_t esize = 2;
    static __m256 load(const void* p, std::size_t i) noexcept {
        const __m128i h = _mm_loadu_si128(
            reinterpret_cast<const __m128i*>(static_cast<const std::uint16_t*>(p) + i));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    static void store(void* p, std::size_t i, __m256 v) noexcept {
        const __m256i x = _mm256_castps_si256(v);
        const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
        __m256i r = _mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
        r = _mm256_srli_epi32(r, 16);
        const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC0), nan);
        // packus works per 128-bit lane; 0xD8 gathers qwords 0 and 2.
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<std::uint16_t*>(p) + i),
                         _mm256_castsi256_si128(packed));
    }
};

struct fp16_io {
    static constexpr std::size_t esize = 2;
    static __m256 load(const void* p, std::size_t i) noexcept {
        return _mm256_cvtph_ps(_mm_loadu_si128(
            reinterpret_cast<const __m128i*>(static_cast<const std::uint16_t*>(p) + i)));
    }
    static void store(void* p, std::size_t i, __m256 v) noexcept {
        const __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
        v = _mm256_blendv_ps(v, nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<std::uint16_t*>(p) + i),
                         _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
};

template <class Io>
void sum_float(void* dst, const void* const* src, unsigned nsrc, std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + step <= n; i += step) {
        __m256 a0 = Io::load(src[0], i), a1 = Io::load(src[0], i + lanes);
        __m256 a2 = Io::load(src[0], i + 2 * lanes), a3 = Io::load(src[0], i + 3 * lanes);
        for (unsigned k = 1; k < nsrc; ++k) {
            a0 = _mm256_add_ps(a0, Io::load(src[k], i));
            a1 = _mm256_add_ps(a1, Io::load(src[k], i + lanes));
            a2 = _mm256_add_ps(a2, Io::load(src[k], i + 2 * lanes));
            a3 = _mm256_add_ps(a3, Io::load(src[k], i + 3 * lanes));
        }
        Io::store(dst, i, a0);
        Io::store(dst, i + lanes, a1);
        Io::store(dst, i + 2 * lanes, a2);
        Io::store(dst, i + 3 * lanes, a3);
    }
    for (; i + lanes <= n; i += lanes) {
        __m256 a = Io::load(src[0], i);
        for (unsigned k = 1; k < nsrc; ++k) a = _mm256_add_ps(a, Io::load(src[k], i));
        Io::store(dst, i, a);
    }
    sum_tail(Io::esize == 4 ? sum_fp32_scalar
                            : (std::is_same_v<Io, bf16_io> ? sum_bf16_scalar : sum_fp16_scalar),
             dst, src, nsrc, i, n, Io::esize);
}

} // namespace

void sum_fp32_avx2(void* d, const void* const* s, unsigned w, std::size_t n) noexcept {
    sum_float<fp32_io>(d, s, w, n);
}
void sum_bf16_avx2(void* d, const void* const* s, unsigned w, std::size_t n) noexcept {
    sum_float<bf16_io>(d, s, w, n);
}
void sum_fp16_avx2(void* d, const void* const* s, unsigned w, std::size_t n) noexcept {
    sum_float<fp16_io>(d, s, w, n);
}

void sum_int32_avx2(void* dst, const void* const* src, unsigned nsrc, std::size_t n) noexcept {
    auto ld = [](const void* p, std::size_t i) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const int*>(p) + i));
    };
    std::size_t i = 0;
    for (; i + 2 * lanes <= n; i += 2 * lanes) {
        __m256i a0 = ld(src[0], i), a1 = ld(src[0], i + lanes);
        for (unsigned k = 1; k < nsrc; ++k) {
            a0 = _mm256_add_epi32(a0, ld(src[k], i));
            a1 = _mm256_add_epi32(a1, ld(src[k], i + lanes));
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<int*>(dst) + i), a0);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<int*>(dst) + i + lanes), a1);
    }
    sum_tail(sum_int32_scalar, dst, src, nsrc, i, n, 4);
}

} // namespace railgate::reduce::detail
