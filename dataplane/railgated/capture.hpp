// railctl capture, on railgated's side: capture sessions over DPDK rails.
// A session gives each of its rails a capture ring (net::capture_ring) that
// the rail's lcore fills; a writer thread drains the rings, oldest record
// first across rails, into pcapng, which it writes to the file railctl
// opened and passed with capture.start (SCM_RIGHTS): railgated writes only
// where its caller could.
//
// The writer runs at SCHED_IDLE: it takes only CPU time nothing else wants
// (on a busy node the workers' and the kernel's), and when it falls behind,
// or its file (a slow pipe) does, the rings fill and the rails count
// overruns; nothing waits for it. The control thread and the writer share
// no lock, so a starved writer never holds up a control command: sessions
// reach the writer through a lock-free list, and everything else they
// share is atomic. The control thread alone talks to the lcores (starting
// and stopping the mirroring), on requests and on its tick (reap()): a
// session nobody asked about for its lease ([daemon] client_timeout_ms;
// its railctl was killed) is stopped and dropped there.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "control/protocol.hpp"
#include "dataplane/net/daemon.hpp"

namespace railgate {

class capture_sessions {
public:
    static constexpr std::uint32_t default_snaplen = 128;
    static constexpr std::size_t max_pending = std::size_t{4} << 20; // pcapng waiting for a slow file

    // `thread`: the writer runs on its own thread; `caller`: whoever calls
    // pump() writes (bench_dataplane). A session nobody asked about for
    // `lease` is dropped.
    enum class writer : std::uint8_t { thread, caller };
    explicit capture_sessions(net::daemon& d, writer w = writer::thread,
                              std::chrono::milliseconds lease = std::chrono::milliseconds(5000));
    ~capture_sessions();
    capture_sessions(const capture_sessions&) = delete;
    capture_sessions& operator=(const capture_sessions&) = delete;

    // The control thread's side.
    // capture.start {rails: [names], rx, tx, drops, snaplen, job, count},
    // writing to `fd` (the request's; kept as a duplicate).
    control::json start(const std::vector<std::size_t>& rails, const control::json& args, int fd);
    // capture.status {id}: what was written so far, and done once the file
    // is complete (a session stopped or counted out, its rings written).
    control::json status(const control::json& args);
    // capture.stop {id}: the rails stop mirroring; what the rings hold is
    // still written.
    control::json stop(const control::json& args);
    // Stops the mirroring of sessions that counted out, and drops those
    // nobody asked about for the lease. Runs on the control thread's tick.
    void reap();
    // writer::caller: one pass of the writer, then reap().
    void pump();

private:
    struct rail_tap {
        std::size_t rail;
        std::unique_ptr<net::capture_ring> ring;
        std::uint64_t overruns_at_start = 0;
    };
    // Fixed once started, but for the atomics; `fd`, `out` and `error`
    // belong to the writer (error is published by `done`).
    struct session {
        std::uint64_t id = 0;
        std::vector<rail_tap> taps;
        net::capture_filter filter;
        std::uint64_t count = 0; // stop after this many packets (0: no limit)
        std::int64_t wall_minus_clock = 0; // wall-clock ns minus daemon::clock_ns
        std::atomic<bool> mirroring{true};   // cleared by the control thread once the lcores stopped
        std::atomic<bool> abandoned{false};  // the control thread dropped it: close and forget
        std::atomic<bool> counted_out{false}, done{false}; // set by the writer
        std::atomic<std::uint64_t> written{0}, rx{0}, tx{0}, dropped{0};
        int fd = -1;
        std::string out;
        std::string error;
    };
    struct handoff {
        std::shared_ptr<session> s;
        handoff* next;
    };
    struct entry { // the control thread's view of a session
        std::shared_ptr<session> s;
        std::chrono::steady_clock::time_point last_seen;
    };

    void halt(session& s); // control thread: the lcores stop mirroring into its rings
    control::json summary(const session& s) const;
    // The writer's side.
    void write_pass();
    void drain(session& s); // rings -> s.out, while it holds under max_pending
    bool flush(session& s); // s.out -> the file, without waiting; false on an error
    void finish(session& s, std::string error = {});

    net::daemon& d_;
    std::chrono::milliseconds lease_;
    std::map<std::uint64_t, entry> sessions_; // the control thread's
    std::uint64_t next_id_ = 1;
    std::atomic<handoff*> incoming_{nullptr};  // control thread -> writer
    std::vector<std::shared_ptr<session>> mine_; // the writer's
    std::atomic<bool> stop_{false};
    std::thread writer_;
};

} // namespace railgate
