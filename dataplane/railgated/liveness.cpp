#include "dataplane/railgated/liveness.hpp"

#include <algorithm>
#include <cstdio>

namespace railgate::live {

namespace {
std::string seconds(std::chrono::nanoseconds d) {
    char t[32];
    std::snprintf(t, sizeof t, "%.1f s", std::chrono::duration<double>(d).count());
    return t;
}
} // namespace

liveness::liveness(std::chrono::microseconds every, std::chrono::milliseconds stuck)
    : every_(every.count() > 0 ? every : std::chrono::microseconds{0}),
      stuck_(every_.count() > 0 ? std::min(stuck, std::chrono::duration_cast<std::chrono::milliseconds>(every_ / 2))
                                : stuck) {
    if (stuck_.count() < 1) stuck_ = std::chrono::milliseconds{1};
}

liveness::verdict liveness::step(clock::time_point now, std::span<const loop> loops) {
    verdict v;
    for (const loop& l : loops) {
        auto it = std::find_if(stuck_now_.begin(), stuck_now_.end(), [&](const stuck_loop& s) { return s.name == l.name; });
        if (l.since >= stuck_) {
            if (it == stuck_now_.end()) {
                stuck_now_.push_back({l.name, l.since});
                v.stuck.push_back(l.name + " has not gone round its loop for " + seconds(l.since) +
                                  (every_.count() ? ": systemd's watchdog is no longer told railgated is alive" : ""));
            } else {
                it->longest = std::max(it->longest, l.since);
            }
        } else if (it != stuck_now_.end()) {
            v.back.push_back(l.name + " goes round its loop again (it stopped for " + seconds(it->longest) + " or more)");
            stuck_now_.erase(it);
        }
    }
    // A loop that is gone (its rail removed, railgated stopping) is not stuck.
    std::erase_if(stuck_now_, [&](const stuck_loop& s) {
        return std::none_of(loops.begin(), loops.end(), [&](const loop& l) { return l.name == s.name; });
    });
    if (every_.count() && stuck_now_.empty() && (!pinged_ || now - last_ping_ >= every_ / 2)) {
        v.ping = true;
        pinged_ = true;
        last_ping_ = now;
    }
    return v;
}

} // namespace railgate::live
