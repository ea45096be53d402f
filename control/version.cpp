#include "control/version.hpp"

#include "control/railgate_version.h"
#include "dataplane/reduce/reduce.hpp"

namespace railgate {

const char* version() noexcept { return RAILGATE_VERSION; }
const char* git_describe() noexcept { return RAILGATE_GIT; }

std::string version_text(std::string_view program) {
    std::string s(program);
    s += " " RAILGATE_VERSION " (git " RAILGATE_GIT ")\n"
         "  built with DPDK " RAILGATE_DPDK_VERSION ", rdma-core libibverbs " RAILGATE_IBVERBS_VERSION
         "; reduce kernels ";
    s += reduce::best().name;
    s += " (this CPU)\n";
    return s;
}

} // namespace railgate
