// When a verbs rail's thread looks at its clock, and what a gap between
// two looks means. The look runs the lifecycle's tick (stalled, idle and
// unassembled jobs), answers railctl and beats for the liveness watchdog.
//
// Idle passes are cheap and many: the thread looks every `every_passes`
// of them without reading the clock. A pass that found work may be long
// (16 completions a connection, each perhaps a reduce of megabytes in
// the engine), so after one the thread reads the coarse clock and looks
// once `busy_ns` have passed. Before, it looked only every 256 passes,
// busy or not: 256 busy passes could take seconds, and the gap was taken
// for railgated's absence, moving every job's clocks on by it, so a job
// whose rank had died was never found stalled while other jobs kept the
// rail busy, and the watchdog saw no beat.
//
// A gap of `away_ns` or more between two looks is time the thread did not
// run (the host took its CPU, the process was stopped): the jobs' clocks
// skip it (job_table::absent), so that no rank is judged silent for it.
#pragma once

#include <cstdint>

namespace railgate::verbs {

class pass_clock {
public:
    static constexpr unsigned every_passes = 256;
    // The lifecycle's tick: a look runs it when one has passed since the
    // last run (plane::rail_state::expire), and a busy thread looks once one
    // has passed since its last look.
    static constexpr std::uint64_t tick_ns = 10'000'000;
    static constexpr std::uint64_t busy_ns = tick_ns;
    static constexpr std::uint64_t away_ns = 250'000'000;

    explicit pass_clock(std::uint64_t now_ns) noexcept : looked_(now_ns) {}

    // After pass number `pass`: whether the thread looks now. `now` (a
    // callable giving the time in ns) is read only after a pass with work
    // that is not already a look's turn.
    template <class Now>
    bool due(unsigned pass, bool work, Now&& now) const {
        if (pass % every_passes == 0) return true;
        return work && now() - looked_ >= busy_ns;
    }

    // The look at `now`: the gap since the last one when it counts as an
    // absence, else 0.
    std::uint64_t look(std::uint64_t now) noexcept {
        const std::uint64_t gap = now > looked_ ? now - looked_ : 0;
        looked_ = now;
        return gap >= away_ns ? gap : 0;
    }

    std::uint64_t looked() const noexcept { return looked_; }

private:
    std::uint64_t looked_;
};

} // namespace railgate::verbs
