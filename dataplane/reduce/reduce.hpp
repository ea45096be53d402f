// Sum-reduction kernels for railgate's aggregation, selected at run time.
//
// Contract (every variant, bit for bit):
//   dst[i] = round(src[0][i] + src[1][i] + ... + src[nsrc-1][i])
// evaluated left to right in rank order. fp32 sums in fp32; bf16 and fp16 are
// widened exactly to fp32, summed in fp32 in rank order, and rounded once to
// nearest-even on the way back. A NaN result is written as the canonical
// quiet NaN (fp32 0x7FC00000, bf16 0x7FC0, fp16 0x7E00) so that NaN payloads
// cannot depend on operand order inside a SIMD unit. int32 wraps modulo 2^32
// (two's complement), like NCCL and MPI on common hardware; it never traps.
// Denormals are kept (no FTZ/DAZ). Element data is little-endian.
//
// dst may alias src[0] exactly (the data plane reduces into rank 0's
// buffer); no other overlap is allowed. nsrc >= 1. Thread-safe, noexcept, no
// allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "dataplane/proto/wire.hpp"

namespace railgate::reduce {

using sum_fn = void (*)(void* dst, const void* const* src, unsigned nsrc, std::size_t n) noexcept;
// The same reduction, and on the way, for every input k: words[k] += a
// total of src[k]'s bytes (its n elements) congruent modulo 0xffff to the
// sum of its little-endian 16-bit words, and zero only if they are all
// zero. frame::fold_words turns it into the input's ones' sum (RFC 1071),
// which is all the checksum needs: railgated checks the UDP checksums of a
// slot's contributions in the pass that reduces them, instead of a pass of
// its own over memory the reduce then reads again. (Variants differ in the
// total they add, not in its fold.) words[nsrc] gets the same for dst: the
// result's checksum comes from the same pass. words has nsrc + 1 entries.
using sum_words_fn = void (*)(void* dst, const void* const* src, unsigned nsrc, std::size_t n,
                              std::uint64_t* words) noexcept;

// Conversions for a worker's compressed allreduce (the DDP hooks' float32
// buckets sent as another wire type), with the same rounding and NaN rules:
//   narrow: dst[i] = round_to_type(src[i] / divisor), a NaN canonical; the
//           fp32 one may run in place (dst == src);
//   widen:  dst[i] = the type's src[i] as fp32 (exact), a NaN canonical.
// Not for int32 (nullptr there).
using narrow_fn = void (*)(void* dst, const float* src, float divisor, std::size_t n) noexcept;
using widen_fn = void (*)(float* dst, const void* src, std::size_t n) noexcept;

enum class isa : std::uint8_t { scalar = 0, avx2 = 1, avx512 = 2, avx512_bf16 = 3 };
inline constexpr unsigned isa_count = 4;

struct kernels {
    isa level;
    std::string_view name;
    sum_fn sum[wire::dtype_count]; // indexed by wire::dtype
    sum_words_fn sum_words[wire::dtype_count];
    narrow_fn narrow[wire::dtype_count];
    widen_fn widen[wire::dtype_count];

    sum_fn operator[](wire::dtype d) const noexcept { return sum[static_cast<unsigned>(d)]; }
    sum_words_fn with_words(wire::dtype d) const noexcept { return sum_words[static_cast<unsigned>(d)]; }
};

// True when this CPU (and OS) can run the variant.
bool cpu_supports(isa level) noexcept;
// The variant's table, or nullptr when the CPU cannot run it.
const kernels* get(isa level) noexcept;
// The best variant for this CPU, chosen once. RAILGATE_ISA=scalar|avx2|
// avx512|avx512_bf16 caps the choice (for tests and for old-CPU emulation);
// an unknown or unsupported value falls back to the best supported one.
const kernels& best() noexcept;
bool isa_from_name(std::string_view s, isa& out) noexcept;

} // namespace railgate::reduce
