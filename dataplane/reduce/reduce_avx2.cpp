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

// Each io loads an input's raw vector of 8 elements (raw), widens it to
// fp32 lanes (widen), and stores a result vector, returning the bits it
// stored (store): the checksum words sum raw and stored vectors.
inline __m256i words32(__m256i r) noexcept { // 8 32-bit words, pairwise into 64-bit lanes
    return _mm256_add_epi64(_mm256_and_si256(r, _mm256_set1_epi64x(0xffffffff)), _mm256_srli_epi64(r, 32));
}

struct fp32_io {
    static constexpr std::size_t esize = 4;
    using raw_t = __m256i;
    static raw_t raw(const void* p, std::size_t i) noexcept {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const float*>(p) + i));
    }
    static __m256 widen(raw_t r) noexcept { return _mm256_castsi256_ps(r); }
    static __m256i store(void* p, std::size_t i, __m256 v) noexcept {
        const __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
        v = _mm256_blendv_ps(v, nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        _mm256_storeu_ps(static_cast<float*>(p) + i, v);
        return _mm256_castps_si256(v);
    }
};

struct half_raw { // 8 16-bit elements: 4 words
    static constexpr std::size_t esize = 2;
    using raw_t = __m128i;
    static raw_t raw(const void* p, std::size_t i) noexcept {
        return _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const std::uint16_t*>(p) + i));
    }
};

struct bf16_io : half_raw {
    static __m256 widen(raw_t h) noexcept {
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    static __m128i store(void* p, std::size_t i, __m256 v) noexcept {
        const __m256i x = _mm256_castps_si256(v);
        const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
        __m256i r = _mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
        r = _mm256_srli_epi32(r, 16);
        const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC0), nan);
        // packus works per 128-bit lane; 0xD8 gathers qwords 0 and 2.
        const __m128i packed = _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<std::uint16_t*>(p) + i), packed);
        return packed;
    }
};

struct fp16_io : half_raw {
    static __m256 widen(raw_t h) noexcept { return _mm256_cvtph_ps(h); }
    static __m128i store(void* p, std::size_t i, __m256 v) noexcept {
        const __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
        v = _mm256_blendv_ps(v, nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<std::uint16_t*>(p) + i), h);
        return h;
    }
};

// Word totals in 4 64-bit lanes per input, and one for the output (index
// nsrc), folded into words[] at the end.
template <bool Words>
struct word_acc {
    __m256i lanes4[wire::max_world + 1];
    explicit word_acc(unsigned nsrc) noexcept {
        if constexpr (Words)
            for (unsigned k = 0; k <= nsrc; ++k) lanes4[k] = _mm256_setzero_si256();
    }
    static __m256i words(__m256i raw) noexcept { return words32(raw); }        // 8 32-bit words
    static __m256i words(__m128i raw) noexcept { return _mm256_cvtepu32_epi64(raw); } // 4 words
    void add(unsigned k, auto raw) noexcept {
        if constexpr (Words) lanes4[k] = _mm256_add_epi64(lanes4[k], words(raw));
    }
    void add4(unsigned k, auto r0, auto r1, auto r2, auto r3) noexcept {
        if constexpr (Words)
            lanes4[k] = _mm256_add_epi64(lanes4[k], _mm256_add_epi64(_mm256_add_epi64(words(r0), words(r1)),
                                                                     _mm256_add_epi64(words(r2), words(r3))));
    }
    void flush(unsigned nsrc, std::uint64_t* words) const noexcept {
        if constexpr (Words)
            for (unsigned k = 0; k <= nsrc; ++k) {
                alignas(32) std::uint64_t l[4];
                _mm256_store_si256(reinterpret_cast<__m256i*>(l), lanes4[k]);
                words[k] += l[0] + l[1] + l[2] + l[3];
            }
    }
};

template <class Io, bool Words>
void sum_float(void* dst, const void* const* src, unsigned nsrc, std::size_t n, std::uint64_t* words) noexcept {
    word_acc<Words> wa(nsrc);
    // Input k's 4 vectors at i: added to the accumulators, their words to k's.
    auto load4 = [&](unsigned k, std::size_t i, __m256 v[4]) {
        const typename Io::raw_t r0 = Io::raw(src[k], i), r1 = Io::raw(src[k], i + lanes);
        const typename Io::raw_t r2 = Io::raw(src[k], i + 2 * lanes), r3 = Io::raw(src[k], i + 3 * lanes);
        wa.add4(k, r0, r1, r2, r3);
        v[0] = Io::widen(r0), v[1] = Io::widen(r1), v[2] = Io::widen(r2), v[3] = Io::widen(r3);
    };
    std::size_t i = 0;
    for (; i + step <= n; i += step) {
        __m256 a[4], b[4];
        load4(0, i, a);
        for (unsigned k = 1; k < nsrc; ++k) {
            load4(k, i, b);
            for (int j = 0; j < 4; ++j) a[j] = _mm256_add_ps(a[j], b[j]);
        }
        wa.add4(nsrc, Io::store(dst, i, a[0]), Io::store(dst, i + lanes, a[1]), Io::store(dst, i + 2 * lanes, a[2]),
                Io::store(dst, i + 3 * lanes, a[3]));
    }
    for (; i + lanes <= n; i += lanes) {
        typename Io::raw_t r = Io::raw(src[0], i);
        wa.add(0, r);
        __m256 a = Io::widen(r);
        for (unsigned k = 1; k < nsrc; ++k) {
            r = Io::raw(src[k], i);
            wa.add(k, r);
            a = _mm256_add_ps(a, Io::widen(r));
        }
        wa.add(nsrc, Io::store(dst, i, a));
    }
    wa.flush(nsrc, words);
    if constexpr (Words)
        sum_tail(Io::esize == 4 ? sum_words_fp32_scalar
                                : (std::is_same_v<Io, bf16_io> ? sum_words_bf16_scalar : sum_words_fp16_scalar),
                 dst, src, nsrc, i, n, Io::esize, words);
    else
        sum_tail(Io::esize == 4 ? sum_fp32_scalar
                                : (std::is_same_v<Io, bf16_io> ? sum_bf16_scalar : sum_fp16_scalar),
                 dst, src, nsrc, i, n, Io::esize);
}

template <bool Words>
void sum_int32(void* dst, const void* const* src, unsigned nsrc, std::size_t n, std::uint64_t* words) noexcept {
    auto ld = [](const void* p, std::size_t i) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const int*>(p) + i));
    };
    word_acc<Words> wa(nsrc);
    std::size_t i = 0;
    for (; i + 2 * lanes <= n; i += 2 * lanes) {
        __m256i a0 = ld(src[0], i), a1 = ld(src[0], i + lanes);
        wa.add(0, a0), wa.add(0, a1);
        for (unsigned k = 1; k < nsrc; ++k) {
            const __m256i b0 = ld(src[k], i), b1 = ld(src[k], i + lanes);
            wa.add(k, b0), wa.add(k, b1);
            a0 = _mm256_add_epi32(a0, b0);
            a1 = _mm256_add_epi32(a1, b1);
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<int*>(dst) + i), a0);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<int*>(dst) + i + lanes), a1);
        wa.add(nsrc, a0), wa.add(nsrc, a1);
    }
    wa.flush(nsrc, words);
    if constexpr (Words) sum_tail(sum_words_int32_scalar, dst, src, nsrc, i, n, 4, words);
    else sum_tail(sum_int32_scalar, dst, src, nsrc, i, n, 4);
}

// Compressed allreduces' conversions: 8 lanes at a time, the scalar
// reference for the tail (the same per-element operation).
template <class Io>
void narrow(void* dst, const float* src, float div, std::size_t n, narrow_fn tail) noexcept {
    const __m256 d = _mm256_set1_ps(div);
    std::size_t i = 0;
    for (; i + lanes <= n; i += lanes) Io::store(dst, i, _mm256_div_ps(_mm256_loadu_ps(src + i), d));
    if (i < n) tail(static_cast<char*>(dst) + i * Io::esize, src + i, div, n - i);
}
template <class Io>
void widen(float* dst, const void* src, std::size_t n, widen_fn tail) noexcept {
    std::size_t i = 0;
    for (; i + lanes <= n; i += lanes) fp32_io::store(dst, i, Io::widen(Io::raw(src, i)));
    if (i < n) tail(dst + i, static_cast<const char*>(src) + i * Io::esize, n - i);
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

#define RAILGATE_DEFINE(name, body)                                                                     \
    void sum_##name##_avx2(void* d, const void* const* s, unsigned w, std::size_t n) noexcept {       \
        body<false>(d, s, w, n, nullptr);                                                             \
    }                                                                                                 \
    void sum_words_##name##_avx2(void* d, const void* const* s, unsigned w, std::size_t n,            \
                                 std::uint64_t* x) noexcept {                                         \
        body<true>(d, s, w, n, x);                                                                    \
    }
RAILGATE_DEFINE(fp32, fp32)
RAILGATE_DEFINE(bf16, bf16)
RAILGATE_DEFINE(fp16, fp16)
RAILGATE_DEFINE(int32, sum_int32)
#undef RAILGATE_DEFINE

void narrow_fp32_avx2(void* d, const float* s, float div, std::size_t n) noexcept { narrow<fp32_io>(d, s, div, n, narrow_fp32_scalar); }
void narrow_bf16_avx2(void* d, const float* s, float div, std::size_t n) noexcept { narrow<bf16_io>(d, s, div, n, narrow_bf16_scalar); }
void narrow_fp16_avx2(void* d, const float* s, float div, std::size_t n) noexcept { narrow<fp16_io>(d, s, div, n, narrow_fp16_scalar); }
void widen_fp32_avx2(float* d, const void* s, std::size_t n) noexcept { widen<fp32_io>(d, s, n, widen_fp32_scalar); }
void widen_bf16_avx2(float* d, const void* s, std::size_t n) noexcept { widen<bf16_io>(d, s, n, widen_bf16_scalar); }
void widen_fp16_avx2(float* d, const void* s, std::size_t n) noexcept { widen<fp16_io>(d, s, n, widen_fp16_scalar); }

} // namespace railgate::reduce::detail
