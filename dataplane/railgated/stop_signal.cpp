#include "dataplane/railgated/stop_signal.hpp"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>

namespace railgate::stop {
namespace {

volatile std::sig_atomic_t first_signal = 0;
std::atomic<std::int64_t> first_ns{0};
static_assert(std::atomic<std::int64_t>::is_always_lock_free); // so signal-safe

std::int64_t monotonic_ns() { // clock_gettime is async-signal-safe
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

extern "C" void handle(int sig) {
    const int saved_errno = errno; // of the code the signal interrupted
    const std::int64_t now = monotonic_ns();
    switch (on_signal(first_signal, first_ns, now)) {
    case action::record:
        first_ns = now;
        first_signal = sig;
        break;
    case action::repeat: break;
    case action::force: {
        static constexpr char msg[] = "railgated: a second signal: stopping at once, without the clean stop\n";
        [[maybe_unused]] const ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
        std::signal(sig, SIG_DFL);
        std::raise(sig); // delivered as the handler returns
        break;
    }
    }
    errno = saved_errno;
}

} // namespace

void install() {
    for (const int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, handle);
    std::signal(SIGPIPE, SIG_IGN);
}

int requested() { return first_signal; }

} // namespace railgate::stop
