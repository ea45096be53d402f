// An lcore thread's weight beside a busy task (rail_loop.cpp).
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>

namespace railgate::net {

// The calling thread, as getpriority and setpriority name it.
inline id_t this_thread_id() noexcept { return static_cast<id_t>(::gettid()); }

// The calling thread's nice, or false.
inline bool thread_nice(int& out) noexcept {
    errno = 0;
    out = ::getpriority(PRIO_PROCESS, this_thread_id());
    return errno == 0;
}

// Sets the calling thread's nice; false if not allowed.
inline bool set_thread_nice(int nice) noexcept { return ::setpriority(PRIO_PROCESS, this_thread_id(), nice) == 0; }

// Beside a busy task the kernel (EEVDF, Linux 6.6 on) lets a woken lcore
// take the core at once only while the lcore is owed CPU time; one that just
// ran past its share (a few round trips in a row, back to back) wakes behind
// the busy task and waits for its slice, up to a 4 ms tick: raillat udp beside
// a busy task on each CPU had p99 1.4-2.0 ms for it (perf sched: 35 wake-ups
// a second waited 1-5 ms). So while the core counts as shared and the loop
// sleeps or naps at once (light traffic), its thread weighs as nice -10 (9
// times a nice-0 task; [daemon] shared_nice, 0 for never); it is back at
// its own nice when the core is its own again and when traffic is heavy (it
// yields then, and a heavy thread that yields is picked straight back).
// Measured with the client at nice -10 too (a busy-polling client beside a
// busy task on its own CPU waits for that task's slices itself, which set
// the p99 of every such run before):
// udp rails p99 19-20 us against 0.7-1.5 ms at nice 0, af_packet rails
// (napping) 58-85 us against 0.07-2 ms (0.93-0.97 ms in runs of 100,000).
// At that weight the loop's own waits no longer show the busy task: its
// probe (shared_core, probe_every_ms) reads the CPU's time instead, and
// the core stays shared while the task is there. A thread
// that may not raise its priority (no CAP_SYS_NICE) keeps its nice; the
// daemon says so at launch (daemon.cpp, can_raise_weight).
class shared_weight {
public:
    static constexpr int nice_shared = -10; // the default ([daemon] shared_nice)
    // `nice`: the weight to take (-20..-1); 0 never changes the thread's.
    explicit shared_weight(int nice = nice_shared) noexcept : to_(nice) {
        if (to_ >= 0 || !thread_nice(own_)) own_ = to_ = 0; // off, or unknown: leave it
    }
    ~shared_weight() { raise(false); } // the EAL's thread serves the next daemon
    shared_weight(const shared_weight&) = delete;
    shared_weight& operator=(const shared_weight&) = delete;
    // The weight (up) or the thread's own nice; a no-op when the thread
    // already weighs as much, or may not.
    void raise(bool up) noexcept {
        if (up == up_ || own_ <= to_) return;
        if (set_thread_nice(up ? to_ : own_)) up_ = up;
        else own_ = to_; // not allowed: stop trying
    }

private:
    int to_, own_ = 0;
    bool up_ = false;
};

// Whether this process may raise a thread to `nice` (tried on the calling
// thread, which is put back).
inline bool can_raise_weight(int nice = shared_weight::nice_shared) noexcept {
    int own = 0;
    if (!thread_nice(own)) return false;
    if (own <= nice) return true;
    if (!set_thread_nice(nice)) return false;
    (void)set_thread_nice(own);
    return true;
}

} // namespace railgate::net
