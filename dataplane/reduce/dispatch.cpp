#include <cstdlib>

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

} // namespace

bool cpu_supports(isa level) noexcept {
    // __builtin_cpu_supports also checks that the OS saves the AVX state.
    switch (level) {
    case isa::scalar: return true;
    case isa::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    case isa::avx512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl");
    case isa::avx512_bf16:
        return cpu_supports(isa::avx512) && __builtin_cpu_supports("avx512bf16");
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
