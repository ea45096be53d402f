#include <cstdlib>

#include <cpuid.h>

#include "dataplane/reduce/reduce_variants.hpp"

namespace railgate::reduce {
namespace {

using namespace detail;

constexpr kernels tables[isa_count] = {
    {isa::scalar,
     "scalar",
     {sum_fp32_scalar, sum_bf16_scalar, sum_fp16_scalar, sum_int32_scalar},
     {sum_words_fp32_scalar, sum_words_bf16_scalar, sum_words_fp16_scalar, sum_words_int32_scalar},
     {narrow_fp32_scalar, narrow_bf16_scalar, narrow_fp16_scalar, nullptr},
     {widen_fp32_scalar, widen_bf16_scalar, widen_fp16_scalar, nullptr}},
    {isa::avx2,
     "avx2",
     {sum_fp32_avx2, sum_bf16_avx2, sum_fp16_avx2, sum_int32_avx2},
     {sum_words_fp32_avx2, sum_words_bf16_avx2, sum_words_fp16_avx2, sum_words_int32_avx2},
     {narrow_fp32_avx2, narrow_bf16_avx2, narrow_fp16_avx2, nullptr},
     {widen_fp32_avx2, widen_bf16_avx2, widen_fp16_avx2, nullptr}},
    {isa::avx512,
     "avx512",
     {sum_fp32_avx512, sum_bf16_avx512, sum_fp16_avx512, sum_int32_avx512},
     {sum_words_fp32_avx512, sum_words_bf16_avx512, sum_words_fp16_avx512, sum_words_int32_avx512},
     {narrow_fp32_avx512, narrow_bf16_avx512, narrow_fp16_avx512, nullptr},
     {widen_fp32_avx512, widen_bf16_avx512, widen_fp16_avx512, nullptr}},
    {isa::avx512_bf16,
     "avx512_bf16",
     {sum_fp32_avx512, sum_bf16_avx512bf16, sum_fp16_avx512, sum_int32_avx512},
     {sum_words_fp32_avx512, sum_words_bf16_avx512bf16, sum_words_fp16_avx512, sum_words_int32_avx512},
     {narrow_fp32_avx512, narrow_bf16_avx512bf16, narrow_fp16_avx512, nullptr},
     {widen_fp32_avx512, widen_bf16_avx512, widen_fp16_avx512, nullptr}},
};

const kernels& choose() noexcept {
    unsigned cap = isa_count - 1;
    if (const char* env = std::getenv("RAILGATE_ISA")) {
        isa want;
        if (isa_from_name(env, want)) cap = static_cast<unsigned>(want);
    }
    for (unsigned l = cap + 1; l-- > 0;)
        if (cpu_supports(static_cast<isa>(l))) return tables[l];
    return tables[0];
}

// A CPUID feature bit. For the features older compilers'
// __builtin_cpu_supports does not name (clang 14: f16c, avx512bf16); the
// AVX state the OS saves is checked by the builtin's avx2/avx512f.
bool cpuid_bit(unsigned leaf, unsigned sub, int reg, unsigned bit) noexcept {
    unsigned r[4]{};
    if (!__get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3])) return false;
    return (r[reg] >> bit) & 1u;
}
constexpr int eax = 0, ecx = 2;

} // namespace

bool cpu_supports(isa level) noexcept {
    // __builtin_cpu_supports also checks that the OS saves the AVX state.
    switch (level) {
    case isa::scalar: return true;
    case isa::avx2: return __builtin_cpu_supports("avx2") && cpuid_bit(1, 0, ecx, 29); // F16C
    case isa::avx512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl");
    case isa::avx512_bf16:
        return cpu_supports(isa::avx512) && cpuid_bit(7, 1, eax, 5); // AVX512_BF16
    }
    return false;
}

const kernels* get(isa level) noexcept {
    const auto i = static_cast<unsigned>(level);
    return i < isa_count && cpu_supports(level) ? &tables[i] : nullptr;
}

const kernels& best() noexcept {
    static const kernels& chosen = choose();
    return chosen;
}

bool isa_from_name(std::string_view s, isa& out) noexcept {
    for (const kernels& k : tables)
        if (k.name == s) {
            out = k.level;
            return true;
        }
    return false;
}

} // namespace railgate::reduce
