// The avx512_bf16 variant: the AVX-512 kernels with VCVTNEPS2BF16 for the
// bf16 narrowing. Compiled with -mavx512bf16 in addition to the AVX-512 flags.
#define RAILGATE_AVX512_BF16 1
#include "dataplane/reduce/reduce_avx512.cpp"
