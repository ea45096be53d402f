// The version every binary reports (--version): railgate's, the commit it
// was built from (git describe), and what it was built against.
#pragma once

#include <string>
#include <string_view>

namespace railgate {

// "0.1.0"
const char* version() noexcept;
// `git describe --always --dirty` of the tree that was built ("unknown"
// outside git).
const char* git_describe() noexcept;
// "PROGRAM 0.1.0 (git DESCRIBE)\n  built with DPDK X, rdma-core libibverbs Y;
// reduce kernels K (this CPU)\n"
std::string version_text(std::string_view program);

} // namespace railgate
