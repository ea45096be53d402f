// railgated's liveness: whether every loop that moves frames (each DPDK
// lcore, each verbs rail's thread) and the control thread still go round,
// and what systemd's watchdog (WatchdogSec=, $WATCHDOG_USEC) is told. A
// loop that has not gone round for `stuck` is reported once, and while
// any is, systemd is not told railgated is alive: a loop hung in a device
// call gets railgated restarted (Restart=on-failure) once the watchdog's
// interval has passed, instead of serving nothing while looking up. A
// loop that goes round again is reported too, and the watchdog is told
// again. The main thread pings: if it hangs, nothing is told either.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace railgate::live {

// A loop and how long ago it last went round.
struct loop {
    std::string name; // "lcore 1", "verbs rail v0"
    std::chrono::nanoseconds since{0};
};

class liveness {
public:
    using clock = std::chrono::steady_clock;
    static constexpr std::chrono::milliseconds default_stuck{5000};
    // `every`: systemd's watchdog interval (0: no watchdog). A loop is stuck
    // after `stuck`, or after half the interval when that is shorter; the
    // watchdog is told every half interval while no loop is.
    explicit liveness(std::chrono::microseconds every, std::chrono::milliseconds stuck = default_stuck);

    struct verdict {
        bool ping = false;               // tell the watchdog now (WATCHDOG=1)
        std::vector<std::string> stuck;  // loops just found stuck, as log lines
        std::vector<std::string> back;   // loops going round again, as log lines
    };
    // Looks at the loops at `now` (call it often: every 100 ms).
    verdict step(clock::time_point now, std::span<const loop> loops);

    std::chrono::microseconds every() const noexcept { return every_; }
    std::chrono::milliseconds stuck_after() const noexcept { return stuck_; }
    bool any_stuck() const noexcept { return !stuck_now_.empty(); }

private:
    struct stuck_loop {
        std::string name;
        std::chrono::nanoseconds longest{0};
    };
    std::chrono::microseconds every_;
    std::chrono::milliseconds stuck_;
    std::vector<stuck_loop> stuck_now_;
    clock::time_point last_ping_{};
    bool pinged_ = false;
};

} // namespace railgate::live
