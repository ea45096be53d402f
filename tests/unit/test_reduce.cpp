// Every reduction variant against the scalar reference, bit for bit, and the
// scalar conversions against independent references.
#define BOOST_TEST_MODULE reduce
#include <boost/test/unit_test.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <immintrin.h>

#include "dataplane/reduce/numeric.hpp"
#include "dataplane/reduce/reduce.hpp"

using namespace railgate;
using namespace railgate::reduce;

namespace {

std::vector<const kernels*> variants() {
    std::vector<const kernels*> v;
    for (unsigned l = 0; l < isa_count; ++l)
        if (const kernels* k = get(static_cast<isa>(l))) v.push_back(k);
    return v;
}

// Bit patterns that stress the edge cases of each element type.
std::vector<std::uint32_t> special_f32() {
    return {0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007fffff, 0x00800000,
            0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000,
            0x7f800001, 0x7fa00000, 0x3f800000, 0xbf800000, 0x4b800000, 0x33800000,
            0x00008000, 0x00018000, 0x3f808000, 0x3f818000, 0x477ff000, 0x477fefff};
}
std::vector<std::uint16_t> special_16() {
    return {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x7c00, 0xfc00,
            0x7e00, 0xfe00, 0x7c01, 0x7f80, 0xff80, 0x7fc0, 0x0080, 0x007f, 0x3c00, 0xbc00};
}

struct inputs {
    std::vector<std::vector<std::uint8_t>> bufs;
    std::vector<const void*> ptrs;
};

inputs make_inputs(wire::dtype dt, unsigned w, std::size_t n, std::mt19937& rng) {
    const std::size_t es = wire::dtype_size(dt);
    inputs in;
    in.bufs.assign(w, std::vector<std::uint8_t>(n * es + 64));
    auto f32 = special_f32();
    auto h16 = special_16();
    std::uniform_int_distribution<int> pick(0, 9);
    std::uniform_real_distribution<float> val(-1000.f, 1000.f);
    std::uniform_int_distribution<int> ex(-30, 30);
    for (unsigned k = 0; k < w; ++k) {
        for (std::size_t i = 0; i < n; ++i) {
            std::uint8_t* p = in.bufs[k].data() + i * es;
            const int c = pick(rng);
            const float f = std::ldexp(val(rng), ex(rng));
            switch (dt) {
            case wire::dtype::fp32: {
                const std::uint32_t b = c == 0 ? f32[rng() % f32.size()] : std::bit_cast<std::uint32_t>(f);
                std::memcpy(p, &b, 4);
                break;
            }
            case wire::dtype::bf16:
            case wire::dtype::fp16: {
                std::uint16_t b = c == 0 ? h16[rng() % h16.size()] : static_cast<std::uint16_t>(rng());
                std::memcpy(p, &b, 2);
                break;
            }
            case wire::dtype::int32: {
                const std::uint32_t b = c == 0 ? (rng() & 1 ? 0x7fffffffu : 0x80000000u) : rng();
                std::memcpy(p, &b, 4);
                break;
            }
            }
        }
        in.ptrs.push_back(in.bufs[k].data());
    }
    return in;
}

// Nearest-even fp32 -> bf16 computed in double, independent of numeric.hpp.
std::uint16_t bf16_reference(float f) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    if (std::isnan(f)) return canonical_nan_bf16;
    const auto lo = static_cast<std::uint16_t>(x >> 16);
    if ((x & 0xffff) == 0) return lo;
    const auto hi = static_cast<std::uint16_t>(lo + 1);
    const double dl = bf16_to_f32(lo), dh = bf16_to_f32(hi), d = f;
    const double el = std::fabs(d - dl), eh = std::isinf(dh) ? std::fabs(d - dl) * 2 + 1 : std::fabs(dh - d);
    if ((x & 0xffff) == 0x8000) return (lo & 1) ? hi : lo; // exact tie
    if (std::isinf(dh)) return (x & 0xffff) > 0x8000 ? hi : lo;
    return el < eh ? lo : hi;
}

// The little-endian 32-bit words of len bytes, zero-padded to a whole word,
// summed byte by byte.
std::uint64_t word_total(const std::uint8_t* p, std::size_t len) {
    std::uint64_t t = 0;
    for (std::size_t i = 0; i < len; ++i) t += std::uint64_t{p[i]} << (8 * (i % 4));
    return t;
}

// A total folded to 16 bits with end-around carry (what frame::fold_words
// does, before its byte swap).
std::uint16_t fold(std::uint64_t t) {
    while (t >> 16) t = (t & 0xffff) + (t >> 16);
    return static_cast<std::uint16_t>(t);
}

} // namespace

BOOST_AUTO_TEST_CASE(best_is_supported_and_scalar_always_present) {
    BOOST_TEST(cpu_supports(best().level));
    BOOST_TEST(get(isa::scalar) != nullptr);
    BOOST_TEST_MESSAGE("kernel variants on this CPU: " << variants().size() << ", best " << best().name);
}

BOOST_AUTO_TEST_CASE(f16_roundtrip_every_half) {
    for (std::uint32_t h = 0; h < 0x10000; ++h) {
        const auto hb = static_cast<std::uint16_t>(h);
        const float f = f16_to_f32(hb);
        const bool nan = (hb & 0x7c00) == 0x7c00 && (hb & 0x3ff);
        if (nan) {
            BOOST_TEST(std::isnan(f));
            BOOST_TEST(f32_to_f16(f) == canonical_nan_f16);
        } else {
            BOOST_TEST(f32_to_f16(f) == hb, "half " << std::hex << h);
        }
    }
}

BOOST_AUTO_TEST_CASE(f16_matches_f16c_hardware) {
    if (!reduce::cpu_supports(reduce::isa::avx2)) return; // avx2 implies F16C here
    std::mt19937 rng(7);
    auto hw = [](float f) __attribute__((target("f16c"))) {
        return static_cast<std::uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
    };
    auto hw_up = [](std::uint16_t h) __attribute__((target("f16c"))) { return _cvtsh_ss(h); };
    for (std::uint32_t h = 0; h < 0x10000; ++h) {
        const auto hb = static_cast<std::uint16_t>(h);
        if (!std::isnan(hw_up(hb)))
            BOOST_TEST(std::bit_cast<std::uint32_t>(f16_to_f32(hb)) == std::bit_cast<std::uint32_t>(hw_up(hb)));
    }
    unsigned bad = 0;
    for (int i = 0; i < 2000000; ++i) {
        // Random bit patterns concentrated around the half range.
        std::uint32_t x = rng();
        if (i & 1) x = (x & 0x807fffff) | ((95u + rng() % 50) << 23);
        const float f = std::bit_cast<float>(x);
        if (std::isnan(f)) continue;
        if (f32_to_f16(f) != hw(f)) ++bad;
    }
    for (std::uint32_t x : special_f32()) {
        const float f = std::bit_cast<float>(x);
        if (!std::isnan(f)) BOOST_TEST(f32_to_f16(f) == hw(f), "fp32 bits " << std::hex << x);
    }
    BOOST_TEST(bad == 0u);
}

BOOST_AUTO_TEST_CASE(bf16_rounding_matches_double_reference) {
    std::mt19937 rng(11);
    for (std::uint32_t x : special_f32())
        BOOST_TEST(f32_to_bf16(std::bit_cast<float>(x)) == bf16_reference(std::bit_cast<float>(x)),
                   "fp32 bits " << std::hex << x);
    unsigned bad = 0;
    for (int i = 0; i < 2000000; ++i) {
        const float f = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
        if (f32_to_bf16(f) != bf16_reference(f)) ++bad;
    }
    BOOST_TEST(bad == 0u);
}

BOOST_AUTO_TEST_CASE(scalar_is_serial_rank_order_sum) {
    // 1e8 + 1 == 1e8 in fp32, so rank order gives 0 where (1 - 1e8) + 1e8 gives 0
    // and (1e8 - 1e8) + 1 gives 1: the order is observable.
    const float a[] = {1e8f}, b[] = {1.f}, c[] = {-1e8f};
    const void* src[] = {a, b, c};
    float out = -1;
    get(isa::scalar)->sum[0](&out, src, 3, 1);
    BOOST_TEST(out == 0.f);
    const void* src2[] = {c, a, b};
    get(isa::scalar)->sum[0](&out, src2, 3, 1);
    BOOST_TEST(out == 1.f);
    // int32 wraps.
    const std::int32_t i1[] = {0x7fffffff}, i2[] = {1};
    const void* s3[] = {i1, i2};
    std::int32_t r = 0;
    get(isa::scalar)->sum[3](&r, s3, 2, 1);
    BOOST_TEST(r == std::numeric_limits<std::int32_t>::min());
}

BOOST_AUTO_TEST_CASE(every_variant_matches_scalar_all_tails) {
    std::mt19937 rng(42);
    const kernels& ref = *get(isa::scalar);
    std::vector<std::size_t> lengths;
    for (std::size_t n = 0; n <= 300; ++n) lengths.push_back(n);
    for (std::size_t n : {511u, 512u, 513u, 1023u, 1024u, 1025u, 2047u, 2048u, 2049u, 4095u, 4096u, 4097u})
        lengths.push_back(n);
    unsigned checked = 0;
    for (const kernels* k : variants()) {
        for (unsigned d = 0; d < wire::dtype_count; ++d) {
            const auto dt = static_cast<wire::dtype>(d);
            const std::size_t es = wire::dtype_size(dt);
            for (unsigned w : {1u, 2u, 3u, 4u, 5u, 8u, 17u, 64u}) {
                for (std::size_t n : lengths) {
                    if (w > 8 && n > 1100) continue;
                    inputs in = make_inputs(dt, w, n, rng);
                    std::vector<std::uint8_t> want(n * es + 64, 0xAB), got(n * es + 64, 0xAB);
                    ref[dt](want.data(), in.ptrs.data(), w, n);
                    k->sum[d](got.data(), in.ptrs.data(), w, n);
                    // Byte-compare including the 64 guard bytes after the end.
                    if (want != got) {
                        BOOST_ERROR(k->name << " " << wire::dtype_name(dt) << " w=" << w << " n=" << n
                                            << " differs from scalar");
                        return;
                    }
                    // In place into src[0], as the data plane does.
                    std::vector<std::uint8_t> inplace = in.bufs[0];
                    in.ptrs[0] = inplace.data();
                    k->sum[d](inplace.data(), in.ptrs.data(), w, n);
                    if (!std::equal(want.begin(), want.begin() + static_cast<long>(n * es), inplace.begin())) {
                        BOOST_ERROR(k->name << " in place " << wire::dtype_name(dt) << " w=" << w << " n=" << n);
                        return;
                    }
                    // And with each input's words summed on the way (the
                    // checksum railgated verifies), also in place.
                    std::vector<std::uint8_t> inplace2 = in.bufs[0];
                    in.ptrs[0] = inplace2.data();
                    std::vector<std::uint64_t> words(w + 1, 0xffff0000); // added to, not set
                    k->sum_words[d](inplace2.data(), in.ptrs.data(), w, n, words.data());
                    in.ptrs[0] = in.bufs[0].data();
                    bool words_ok = true;
                    for (unsigned r = 0; r < w; ++r)
                        words_ok &= fold(words[r] - 0xffff0000) == fold(word_total(in.bufs[r].data(), n * es));
                    // And the result's (the bytes it wrote).
                    words_ok &= fold(words[w] - 0xffff0000) == fold(word_total(want.data(), n * es));
                    if (!std::equal(want.begin(), want.begin() + static_cast<long>(n * es), inplace2.begin()) ||
                        !words_ok) {
                        BOOST_ERROR(k->name << " with words " << wire::dtype_name(dt) << " w=" << w << " n=" << n);
                        return;
                    }
                    ++checked;
                }
            }
        }
    }
    BOOST_TEST(checked > 10000u);
}

BOOST_AUTO_TEST_CASE(nan_results_are_canonical) {
    for (const kernels* k : variants()) {
        const std::uint32_t a[] = {0xffc12345, 0x7f800000, 0x7fa00001};
        const std::uint32_t b[] = {0x7f812345, 0xff800000, 0x3f800000};
        const void* src[] = {a, b};
        std::uint32_t out[3] = {};
        k->sum[0](out, src, 2, 3);
        for (std::uint32_t o : out) BOOST_TEST(o == canonical_nan_f32, k->name);
    }
}

// The compressed allreduce's conversions: the scalar narrow against the
// scalar conversions (numeric.hpp) after an IEEE division, the scalar widen
// exact; every variant against the scalar, bit for bit, at every tail
// length, divisors that round and that do not, the fp32 narrow in place.
BOOST_AUTO_TEST_CASE(narrow_and_widen_every_variant_matches_scalar) {
    std::mt19937 rng(7);
    const kernels& ref = *get(isa::scalar);
    std::vector<std::size_t> lengths;
    for (std::size_t n = 0; n <= 70; ++n) lengths.push_back(n);
    for (std::size_t n : {255u, 256u, 257u, 4097u}) lengths.push_back(n);
    unsigned checked = 0;
    for (std::size_t n : lengths) {
        // fp32 sources: specials (NaNs, infinities, denormals, halves'
        // rounding edges) among values over many binades.
        inputs src = make_inputs(wire::dtype::fp32, 1, n, rng);
        std::vector<float> f(n);
        if (n) std::memcpy(f.data(), src.bufs[0].data(), n * 4); // (no null pointer to memcpy at n = 0)
        for (float div : {1.0f, 2.0f, 3.0f, 0.5f, 7.0f}) {
            for (unsigned d = 0; d < 3; ++d) {
                const auto dt = static_cast<wire::dtype>(d);
                const std::size_t es = wire::dtype_size(dt);
                std::vector<std::uint8_t> want(n * es + 64, 0xAB);
                ref.narrow[d](want.data(), f.data(), div, n);
                for (std::size_t i = 0; i < n; ++i) { // the scalar one is what it says
                    const float q = f[i] / div;
                    std::uint32_t w32 = 0;
                    std::memcpy(&w32, want.data() + i * es, es);
                    const std::uint32_t exp = dt == wire::dtype::fp32   ? std::bit_cast<std::uint32_t>(canonicalize(q))
                                              : dt == wire::dtype::bf16 ? f32_to_bf16(q)
                                                                        : f32_to_f16(q);
                    if (w32 != exp) {
                        BOOST_ERROR("scalar narrow " << wire::dtype_name(dt) << " i=" << i);
                        return;
                    }
                }
                for (const kernels* k : variants()) {
                    std::vector<std::uint8_t> got(n * es + 64, 0xAB);
                    k->narrow[d](got.data(), f.data(), div, n);
                    if (got != want) { // guard bytes included
                        BOOST_ERROR(k->name << " narrow " << wire::dtype_name(dt) << " n=" << n << " div=" << div);
                        return;
                    }
                    if (dt == wire::dtype::fp32) { // in place
                        std::vector<float> g = f;
                        k->narrow[d](g.data(), g.data(), div, n);
                        if (n && std::memcmp(g.data(), want.data(), n * 4) != 0) {
                            BOOST_ERROR(k->name << " narrow fp32 in place n=" << n);
                            return;
                        }
                    }
                    ++checked;
                }
            }
        }
        for (unsigned d = 0; d < 3; ++d) {
            const auto dt = static_cast<wire::dtype>(d);
            inputs in = make_inputs(dt, 1, n, rng); // every 16-bit pattern kind, NaNs included
            std::vector<float> want(n + 16, -1.0f);
            ref.widen[d](want.data(), in.ptrs[0], n);
            for (std::size_t i = 0; i < n; ++i) {
                std::uint32_t raw = 0;
                std::memcpy(&raw, in.bufs[0].data() + i * wire::dtype_size(dt), wire::dtype_size(dt));
                const float exact = dt == wire::dtype::fp32   ? std::bit_cast<float>(raw)
                                    : dt == wire::dtype::bf16 ? bf16_to_f32(static_cast<std::uint16_t>(raw))
                                                              : f16_to_f32(static_cast<std::uint16_t>(raw));
                if (std::bit_cast<std::uint32_t>(want[i]) != std::bit_cast<std::uint32_t>(canonicalize(exact))) {
                    BOOST_ERROR("scalar widen " << wire::dtype_name(dt) << " i=" << i);
                    return;
                }
            }
            for (const kernels* k : variants()) {
                std::vector<float> got(n + 16, -1.0f);
                k->widen[d](got.data(), in.ptrs[0], n);
                if (std::memcmp(got.data(), want.data(), (n + 16) * 4) != 0) {
                    BOOST_ERROR(k->name << " widen " << wire::dtype_name(dt) << " n=" << n);
                    return;
                }
                ++checked;
            }
        }
    }
    BOOST_TEST(checked > 1000u);
    for (const kernels* k : variants()) BOOST_TEST((k->narrow[3] == nullptr && k->widen[3] == nullptr), k->name);
}
