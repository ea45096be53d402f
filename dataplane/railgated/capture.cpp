#include "dataplane/railgated/capture.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string_view>

#include "control/pcapng.hpp"
#include "control/version.hpp"
#include "dataplane/proto/ipv4.hpp"
#include "dataplane/log/log.hpp"

namespace railgate {

using control::fail;
using control::json;
using control::ok;

capture_sessions::capture_sessions(net::daemon& d, writer w, std::chrono::milliseconds lease) : d_(d), lease_(lease) {
    if (w == writer::caller) return;
    writer_ = std::thread([this] {
        pthread_setname_np(pthread_self(), "rg-capture");
        sched_param p{};
        pthread_setschedparam(pthread_self(), SCHED_IDLE, &p);
        while (!stop_.load(std::memory_order_relaxed)) {
            write_pass();
            // A 2 MiB ring holds several ms of a busy rail.
            std::this_thread::sleep_for(std::chrono::milliseconds(mine_.empty() ? 20 : 2));
        }
    });
}

capture_sessions::~capture_sessions() {
    for (auto& [id, e] : sessions_) halt(*e.s);
    stop_ = true;
    if (writer_.joinable()) writer_.join();
    for (handoff* h = incoming_.exchange(nullptr); h;) {
        handoff* next = h->next;
        mine_.push_back(std::move(h->s));
        delete h;
        h = next;
    }
    for (auto& s : mine_)
        if (s->fd >= 0) close(s->fd);
}

json capture_sessions::start(const std::vector<std::size_t>& rails, const json& a, int fd) {
    std::string e;
    if (fd < 0) return fail("capture.start needs the output file passed with the request (SCM_RIGHTS), as railctl does");
    struct stat st{};
    if (fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISCHR(st.st_mode)))
        return fail("the capture's output is not a file, pipe or socket");
    if (const int fl = fcntl(fd, F_GETFL); fl < 0 || (fl & O_ACCMODE) == O_RDONLY)
        return fail("the capture's output is not open for writing");
    if (!(e = control::check_keys(a, {"rails", "rx", "tx", "drops", "snaplen", "job", "count"})).empty()) return fail(e);
    if (rails.empty()) return fail("no rail to capture");
    auto sp = std::make_shared<session>();
    session& s = *sp;
    bool any = false;
    for (const char* k : {"rx", "tx", "drops"})
        if (a.contains(k)) any = true;
    if (any) { // naming a direction captures only the ones named
        s.filter.rx = s.filter.tx = s.filter.drops = false;
        if (!(e = control::get_bool(a, "rx", s.filter.rx)).empty()) return fail(e);
        if (!(e = control::get_bool(a, "tx", s.filter.tx)).empty()) return fail(e);
        if (!(e = control::get_bool(a, "drops", s.filter.drops)).empty()) return fail(e);
        if (!s.filter.rx && !s.filter.tx && !s.filter.drops) return fail("nothing to capture: rx, tx and drops are all off");
    }
    std::optional<std::uint64_t> snaplen, job, count;
    if (!(e = control::get_uint(a, "snaplen", net::capture_ring::max_snaplen, snaplen)).empty()) return fail(e);
    if (snaplen && *snaplen < 14) return fail("snaplen " + std::to_string(*snaplen) + " is below an Ethernet header (14..16384)");
    if (!(e = control::get_uint(a, "job", UINT32_MAX, job)).empty()) return fail(e);
    if (!(e = control::get_uint(a, "count", std::numeric_limits<std::uint64_t>::max(), count)).empty()) return fail(e);
    s.filter.snaplen = snaplen ? static_cast<std::uint32_t>(*snaplen) : default_snaplen;
    if (job) s.filter.job = static_cast<std::uint32_t>(*job);
    // 0 is the session's "no limit"; asked for, it would capture forever.
    if (count && *count == 0) return fail("count 0: a capture stops after at least 1 packet (leave --count out for no limit)");
    s.count = count.value_or(0);
    for (std::size_t r : rails)
        for (const auto& [id, o] : sessions_)
            for (const rail_tap& t : o.s->taps)
                if (t.rail == r && o.s->mirroring.load())
                    return fail("rail " + d_.rail(r).name + " is already being captured (capture " + std::to_string(id) + ")");
    const auto status = d_.status();
    std::vector<control::pcapng::interface> ifs;
    for (std::size_t r : rails) {
        for (const net::rail_status& st : status)
            if (st.index == r)
                ifs.push_back({st.name,
                               st.port_name + " (" + st.driver + "), " + net::format_ipv4(st.ip) + ":" +
                                   std::to_string(st.udp_port),
                               s.filter.snaplen});
        s.taps.push_back({r, std::make_unique<net::capture_ring>(s.filter.snaplen),
                          d_.counters(r).capture_overruns.load(std::memory_order_relaxed)});
    }
    const auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
    s.wall_minus_clock = static_cast<std::int64_t>(wall) - static_cast<std::int64_t>(net::daemon::clock_ns());
    control::pcapng::begin(s.out, std::string("railgated ") + version() + " (git " + git_describe() + ", railctl capture)", ifs);
    for (std::size_t k = 0; k < s.taps.size(); ++k)
        if (e = d_.set_capture(s.taps[k].rail, s.taps[k].ring.get(), s.filter); !e.empty()) {
            for (std::size_t j = 0; j <= k; ++j) d_.set_capture(s.taps[j].rail, nullptr);
            return fail("capture on rail " + d_.rail(s.taps[k].rail).name + ": " + e);
        }
    s.fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (s.fd < 0) {
        halt(s);
        return fail(std::string("dup: ") + std::strerror(errno));
    }
    // A pipe's reader may be slow: railgated never waits for it.
    fcntl(s.fd, F_SETFL, fcntl(s.fd, F_GETFL) | O_NONBLOCK);
    const std::uint64_t id = next_id_++;
    s.id = id;
    json names = json::array();
    for (const rail_tap& t : s.taps) names.push_back(d_.rail(t.rail).name);
    json out = {{"id", id}, {"rails", names}, {"snaplen", s.filter.snaplen},
                {"ring_slots", s.taps.front().ring->slots()}};
    sessions_.emplace(id, entry{sp, std::chrono::steady_clock::now()});
    auto* h = new handoff{sp, incoming_.load(std::memory_order_relaxed)};
    while (!incoming_.compare_exchange_weak(h->next, h, std::memory_order_release, std::memory_order_relaxed)) {
    }
    return ok(out);
}

void capture_sessions::halt(session& s) {
    if (!s.mirroring.load()) return;
    for (const rail_tap& t : s.taps) d_.set_capture(t.rail, nullptr);
    s.mirroring.store(false, std::memory_order_release);
}

json capture_sessions::summary(const session& s) const {
    std::uint64_t overruns = 0;
    for (const rail_tap& t : s.taps)
        overruns += d_.counters(t.rail).capture_overruns.load(std::memory_order_relaxed) - t.overruns_at_start;
    return {{"packets", s.written.load()}, {"rx", s.rx.load()}, {"tx", s.tx.load()}, {"drops", s.dropped.load()},
            {"overruns", overruns}};
}

namespace {
std::string get_id(const json& a, std::uint64_t& id) {
    std::string e;
    if (!(e = control::check_keys(a, {"id"})).empty()) return e;
    std::optional<std::uint64_t> v;
    if (!(e = control::get_uint(a, "id", std::numeric_limits<std::uint64_t>::max(), v)).empty()) return e;
    if (!v) return "argument 'id' missing";
    id = *v;
    return {};
}
} // namespace

json capture_sessions::status(const json& a) {
    std::uint64_t id = 0;
    if (std::string e = get_id(a, id); !e.empty()) return fail(e);
    const auto it = sessions_.find(id);
    if (it == sessions_.end())
        return fail("no capture " + std::to_string(id) + " (it ended, or nobody asked about it for " +
                    std::to_string(lease_.count()) + " ms)");
    session& s = *it->second.s;
    it->second.last_seen = std::chrono::steady_clock::now();
    if (s.counted_out.load()) halt(s);
    const bool done = s.done.load(std::memory_order_acquire);
    json out = summary(s);
    out["done"] = done;
    if (done && !s.error.empty()) out["error"] = "writing the capture: " + s.error;
    if (done) {
        halt(s);
        sessions_.erase(it);
    }
    return ok(out);
}

json capture_sessions::stop(const json& a) {
    std::uint64_t id = 0;
    if (std::string e = get_id(a, id); !e.empty()) return fail(e);
    const auto it = sessions_.find(id);
    if (it == sessions_.end()) return fail("no capture " + std::to_string(id));
    halt(*it->second.s);
    it->second.last_seen = std::chrono::steady_clock::now();
    return ok(summary(*it->second.s));
}

void capture_sessions::reap() {
    const auto now = std::chrono::steady_clock::now();
    for (auto it = sessions_.begin(); it != sessions_.end();) {
        session& s = *it->second.s;
        if (s.counted_out.load() || s.done.load()) halt(s); // a failed file ends the mirroring too
        if (now - it->second.last_seen > lease_) {
            halt(s);
            s.abandoned.store(true, std::memory_order_release);
            log::notice("capture %llu: nobody asked about it for %lld ms, stopped",
                         static_cast<unsigned long long>(it->first), static_cast<long long>(lease_.count()));
            it = sessions_.erase(it);
        } else {
            ++it;
        }
    }
}

void capture_sessions::pump() {
    write_pass();
    reap();
}

// The writer.

void capture_sessions::finish(session& s, std::string error) {
    if (s.fd >= 0) close(s.fd);
    s.fd = -1;
    s.out.clear();
    s.error = std::move(error);
    s.done.store(true, std::memory_order_release);
}

bool capture_sessions::flush(session& s) {
    while (!s.out.empty()) {
        const ssize_t n = write(s.fd, s.out.data(), s.out.size());
        if (n > 0) {
            s.out.erase(0, static_cast<std::size_t>(n));
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
        finish(s, n < 0 ? std::strerror(errno) : "write returned 0");
        return false;
    }
    return true;
}

void capture_sessions::write_pass() {
    for (handoff* h = incoming_.exchange(nullptr, std::memory_order_acquire); h;) {
        handoff* next = h->next;
        mine_.push_back(std::move(h->s));
        delete h;
        h = next;
    }
    for (auto it = mine_.begin(); it != mine_.end();) {
        session& s = **it;
        if (s.abandoned.load(std::memory_order_acquire)) {
            if (!s.done.load()) finish(s, "abandoned");
            it = mine_.erase(it);
            continue;
        }
        if (!s.done.load()) {
            // Read before draining: once the lcores stopped, what the
            // rings hold after this pass's drain is all there will be.
            const bool stopped = !s.mirroring.load(std::memory_order_acquire);
            drain(s);
            if (flush(s)) {
                bool empty = true;
                for (const rail_tap& t : s.taps) empty = empty && !t.ring->front();
                if (s.out.empty() && (s.counted_out.load() || (stopped && empty))) finish(s);
            }
        }
        // Done: forgotten once the control thread dropped it too.
        if (s.done.load() && it->use_count() == 1) it = mine_.erase(it);
        else ++it;
    }
}

void capture_sessions::drain(session& s) {
    std::string comment;
    // The counters have one writer (this thread): counted locally, published once.
    std::uint64_t written = s.written.load(std::memory_order_relaxed), rx = 0, tx = 0, dropped = 0;
    while (s.out.size() < max_pending && (s.count == 0 || written < s.count)) {
        // The oldest record across the rails.
        const net::capture_ring::record* best = nullptr;
        std::size_t from = 0;
        for (std::size_t k = 0; k < s.taps.size(); ++k)
            if (const auto* r = s.taps[k].ring->front(); r && (!best || r->ns < best->ns)) {
                best = r;
                from = k;
            }
        if (!best) break;
        comment.clear();
        if (best->reason != drop_reason::none) {
            comment = "drop: ";
            comment += drop_reason_name(best->reason);
            comment += ": ";
            comment += drop_reason_text(best->reason);
            ++dropped;
        } else {
            ++(best->dir == net::capture_dir::rx ? rx : tx);
        }
        const auto ns = static_cast<std::uint64_t>(static_cast<std::int64_t>(best->ns) + s.wall_minus_clock);
        control::pcapng::packet(
            s.out, static_cast<std::uint32_t>(from), ns,
            std::string_view(reinterpret_cast<const char*>(net::capture_ring::data(best)), best->cap_len),
            best->orig_len,
            best->dir == net::capture_dir::rx ? control::pcapng::direction::inbound : control::pcapng::direction::outbound,
            comment);
        s.taps[from].ring->pop();
        ++written;
    }
    s.written.store(written, std::memory_order_relaxed);
    s.rx.store(s.rx.load(std::memory_order_relaxed) + rx, std::memory_order_relaxed);
    s.tx.store(s.tx.load(std::memory_order_relaxed) + tx, std::memory_order_relaxed);
    s.dropped.store(s.dropped.load(std::memory_order_relaxed) + dropped, std::memory_order_relaxed);
    if (s.count && written >= s.count) s.counted_out.store(true, std::memory_order_release);
}

} // namespace railgate
