#include "tools/bench_common.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "control/cli.hpp"
#include "dataplane/reduce/numeric.hpp"
#include "dataplane/reduce/reduce.hpp"

namespace railgate::bench {
namespace {

std::uint64_t mix(std::uint64_t x) noexcept {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

float value(std::uint64_t h) noexcept {
    const unsigned kind = h & 1023;
    if (kind == 0) return -0.0f;
    if (kind == 1) return std::bit_cast<float>(static_cast<std::uint32_t>(h >> 40) & 0x007fffffu); // denormal
    // Magnitudes 2^-12 .. 2^12: large enough spread that order matters.
    const int e = static_cast<int>((h >> 10) % 25) - 12;
    const float m = 1.0f + static_cast<float>((h >> 20) & 0xfffff) / 1048576.0f;
    const float v = std::ldexp(m, e);
    return (h >> 60) & 1 ? -v : v;
}

} // namespace

void fill_input(void* out, std::size_t count, wire::dtype dt, unsigned rank, std::uint64_t seed) {
    const std::uint64_t base = mix(seed * 1000003u + rank);
    for (std::size_t i = 0; i < count; ++i) {
        const std::uint64_t h = mix(base + i);
        switch (dt) {
        case wire::dtype::fp32: static_cast<float*>(out)[i] = value(h); break;
        case wire::dtype::bf16: static_cast<std::uint16_t*>(out)[i] = reduce::f32_to_bf16(value(h)); break;
        case wire::dtype::fp16: static_cast<std::uint16_t*>(out)[i] = reduce::f32_to_f16(value(h) / 64.0f); break;
        case wire::dtype::int32: static_cast<std::uint32_t*>(out)[i] = static_cast<std::uint32_t>(h >> 3); break;
        }
    }
}

[[gnu::noinline]] void restore_input(void* dst, const void* src, std::size_t bytes) noexcept {
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    std::size_t i = 0;
    for (; i + 64 <= bytes; i += 64) {
        std::memcpy(d + i, s + i, 64); // inlined: vector moves
        asm volatile("" ::: "memory"); // not merged back into one memcpy call
    }
    std::memcpy(d + i, s + i, bytes - i);
}

void reference_sum(void* out, const std::vector<const void*>& inputs, std::size_t count, wire::dtype dt) {
    reduce::get(reduce::isa::scalar)->operator[](dt)(out, inputs.data(), static_cast<unsigned>(inputs.size()), count);
}

std::size_t count_wrong(const void* got, const void* want, std::size_t count, wire::dtype dt) {
    const std::size_t es = wire::dtype_size(dt);
    if (std::memcmp(got, want, count * es) == 0) return 0;
    std::size_t wrong = 0;
    const auto* g = static_cast<const std::uint8_t*>(got);
    const auto* w = static_cast<const std::uint8_t*>(want);
    for (std::size_t i = 0; i < count; ++i)
        if (std::memcmp(g + i * es, w + i * es, es) != 0) ++wrong;
    return wrong;
}

bool parse_size(const std::string& s, std::uint64_t& out) {
    const std::size_t digits = std::min(s.find_first_not_of("0123456789"), s.size());
    std::uint64_t v = 0;
    if (!parse_unsigned(std::string_view(s).substr(0, digits), v)) return false;
    const std::string suf = s.substr(digits);
    unsigned shift = 0;
    if (suf == "K" || suf == "k") shift = 10;
    else if (suf == "M" || suf == "m") shift = 20;
    else if (suf == "G" || suf == "g") shift = 30;
    else if (!suf.empty()) return false;
    if (shift && v > (UINT64_MAX >> shift)) return false; // past 2^64 once multiplied
    out = v << shift;
    return true;
}

} // namespace railgate::bench
