// railgated's stop signals (dataplane/railgated/stop_signal.hpp): the first
// asks for the clean stop, a copy within a second is the same request, and
// one a second or more later takes the signal's default action. The rule on
// a manual clock, then the handlers for real in a child process.
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "dataplane/railgated/stop_signal.hpp"

using namespace railgate;

BOOST_AUTO_TEST_CASE(stop_signal_rule) {
    constexpr std::int64_t t0 = 5'000'000'000;
    BOOST_TEST((stop::on_signal(0, 0, t0) == stop::action::record));
    BOOST_TEST((stop::on_signal(SIGTERM, t0, t0) == stop::action::repeat));
    BOOST_TEST((stop::on_signal(SIGTERM, t0, t0 + stop::force_after_ns - 1) == stop::action::repeat));
    BOOST_TEST((stop::on_signal(SIGTERM, t0, t0 + stop::force_after_ns) == stop::action::force));
    BOOST_TEST((stop::on_signal(SIGINT, t0, t0 + 60 * stop::force_after_ns) == stop::action::force));
}

// The child's exit status names the step that went wrong; dying of SIGHUP
// (the third signal, 1.1 s after the first) is the pass.
BOOST_AUTO_TEST_CASE(stop_signals_in_a_process) {
    const pid_t child = fork();
    BOOST_TEST_REQUIRE(child >= 0);
    if (child == 0) {
        stop::install();
        if (stop::requested() != 0) _exit(10);
        std::raise(SIGTERM); // the clean stop asked
        if (stop::requested() != SIGTERM) _exit(11);
        std::raise(SIGINT); // a copy at once (`timeout`'s to the group): the same request
        if (stop::requested() != SIGTERM) _exit(12);
        if (std::signal(SIGPIPE, SIG_IGN) != SIG_IGN) _exit(13);
        usleep(1'100'000);
        std::raise(SIGHUP); // a second or more later: at once
        _exit(14);
    }
    int status = 0;
    BOOST_TEST_REQUIRE(waitpid(child, &status, 0) == child);
    BOOST_TEST_INFO("exit status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1) << ", signal "
                                   << (WIFSIGNALED(status) ? WTERMSIG(status) : 0));
    BOOST_TEST((WIFSIGNALED(status) && WTERMSIG(status) == SIGHUP));
}
