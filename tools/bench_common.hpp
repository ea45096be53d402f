// Shared by railbench and the tests: deterministic per-rank inputs, the
// rank-order reference, sizes with suffixes, and histogram printing.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "dataplane/proto/wire.hpp"
#include "dataplane/stats/histogram.hpp"

namespace railgate::bench {

// Fills `out` (count elements of dt) with rank `rank`'s input: varied
// magnitudes and signs so that summation order is observable, plus a few
// signed zeros, denormals and infinities.
void fill_input(void* out, std::size_t count, wire::dtype dt, unsigned rank, std::uint64_t seed);

// Copies a rank's input back into its buffer before an operation: the
// harness's own copy, kept out of libc's memcpy so that tools/profile.sh
// does not count it among the workers' copies.
void restore_input(void* dst, const void* src, std::size_t bytes) noexcept;

// The rank-order serial sum of `inputs` (the scalar kernel), into out.
void reference_sum(void* out, const std::vector<const void*>& inputs, std::size_t count, wire::dtype dt);

// Elements of `got` that differ bit-wise from `want`.
std::size_t count_wrong(const void* got, const void* want, std::size_t count, wire::dtype dt);

// "64M", "1K", "4096", "1G" -> bytes; false on garbage.
bool parse_size(const std::string& s, std::uint64_t& out);

} // namespace railgate::bench
