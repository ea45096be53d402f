// railgated's stop signals: SIGINT, SIGTERM and SIGHUP (a closed terminal,
// or a reload asked of a daemon that has none) ask for the clean stop, in
// the start-up too: it finishes, then everything railgated did to the host
// (veths, XDP programs, taps, addresses) is undone and the buffers counted.
// A second signal, a second or more after the first, takes the signal's
// default action at once: the clean stop, or a start-up stuck in a device
// or the EAL, takes longer than whoever sends it will wait. A copy sooner
// than that is the same request (`timeout` and a terminal signal the
// process and then its whole group).
#pragma once

#include <cstdint>

namespace railgate::stop {

// Installs the handlers (and ignores SIGPIPE). Once per process.
void install();

// The signal that asked for the stop; 0 while none has.
int requested();

// The rule, on any clock: what a stop signal at now_ns does, `first` being
// the signal already recorded (0: none) at first_ns.
enum class action { record, repeat, force };
constexpr std::int64_t force_after_ns = 1'000'000'000;
constexpr action on_signal(int first, std::int64_t first_ns, std::int64_t now_ns) {
    if (!first) return action::record;
    return now_ns - first_ns < force_after_ns ? action::repeat : action::force;
}

} // namespace railgate::stop
