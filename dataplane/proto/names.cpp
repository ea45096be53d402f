#include <array>
#include <cstdio>

#include "dataplane/proto/drop_reason.hpp"
#include "dataplane/proto/wire.hpp"

namespace railgate {
namespace {
constexpr std::array<std::string_view, drop_reason_count> drop_names = {
#define RAILGATE_X(name, text) #name,
    RAILGATE_DROP_REASONS(RAILGATE_X)
#undef RAILGATE_X
};
constexpr std::array<std::string_view, drop_reason_count> drop_texts = {
#define RAILGATE_X(name, text) text,
    RAILGATE_DROP_REASONS(RAILGATE_X)
#undef RAILGATE_X
};
constexpr std::array<std::string_view, wire::dtype_count> dtype_names = {"fp32", "bf16", "fp16",
                                                                        "int32"};
} // namespace

std::string_view drop_reason_name(drop_reason r) noexcept {
    const auto i = static_cast<unsigned>(r);
    return i < drop_reason_count ? drop_names[i] : std::string_view("none");
}

std::string_view drop_reason_text(drop_reason r) noexcept {
    const auto i = static_cast<unsigned>(r);
    return i < drop_reason_count ? drop_texts[i] : std::string_view("not dropped");
}

namespace wire {
std::string_view dtype_name(dtype d) noexcept {
    const auto i = static_cast<unsigned>(d);
    return i < dtype_count ? dtype_names[i] : std::string_view("?");
}

bool dtype_from_name(std::string_view s, dtype& out) noexcept {
    for (unsigned i = 0; i < dtype_count; ++i)
        if (dtype_names[i] == s) {
            out = static_cast<dtype>(i);
            return true;
        }
    return false;
}

std::string_view error_name(error_code c) noexcept {
    switch (c) {
    case error_code::none: return "none";
    case error_code::bad_token: return "bad job token";
    case error_code::world_mismatch: return "world size differs from the job's";
    case error_code::dtype_mismatch: return "dtype differs from the job's";
    case error_code::max_count_mismatch: return "max_count differs from the job's";
    case error_code::job_table_full: return "job table full";
    case error_code::bad_request: return "bad request";
    case error_code::aborted: return "job aborted by a worker";
    case error_code::pool_mismatch: return "pool size differs from the job's";
    case error_code::job_in_use: return "the job id is in use by another job (its token differs)";
    case error_code::rank_taken: return "the rank is joined from another address or process";
    case error_code::rails_mismatch: return "excluded rails differ from the job's";
    case error_code::too_many_pending: return "too many jobs still assembling from this address";
    case error_code::no_buffers: return "the rail's buffers cannot carry the job";
    case error_code::rank_failed: return "a rank failed";
    case error_code::unknown_job: return "railgated does not know the job (restarted, or the job expired)";
    case error_code::expired: return "the job expired";
    case error_code::rail_down: return "a rail of the job went down";
    case error_code::op_mismatch: return "the rank is at another operation than the job";
    case error_code::rank_claimed: return "two processes claim the rank of a job that has not started";
    case error_code::shape_mismatch: return "the job's chunk or policy on this rail differs from its first rail's";
    case error_code::rails_changing: return "railgated is changing its rails' advertisement: join again";
    case error_code::operator_abort: return "railgated's operator ended the job";
    case error_code::protocol_version: return "the JOIN is of another railgate protocol version";
    }
    return "unknown error";
}

void foreign_join_text(char* out, std::size_t n, const char* rail, unsigned version) noexcept {
    std::snprintf(out, n,
                  "railgated on rail %s speaks railgate protocol version %u, not %u (upgrade the workers or "
                  "railgated so that they match)",
                  rail, unsigned{protocol_version}, version);
}
} // namespace wire
} // namespace railgate
