// A delay-based congestion window, in chunks, for one rail of one worker,
// in the manner of Swift (Kumar et al., SIGCOMM 2020): while the measured
// round trip stays under a target the window grows by `ai` chunks per
// round trip; above it the window shrinks in proportion to the excess,
// at most once per round trip and by at most `max_mdf`; a loss shrinks
// it by `max_mdf`, a timeout to the minimum. ECN marks (CE echoed by the
// receiver) shrink it as DCTCP does: by alpha / 2 once per round trip,
// alpha the moving fraction of marked results per window (gain `g`).
// railgated's queue depth, echoed in each result (the frames its traffic-
// class queue held ahead of it), is a second, direct view of the same
// queue: above `depth_target` frames the window shrinks in proportion to
// the excess depth, as for excess delay. With `delay` off the window
// follows depth, marks and timeouts in a row only: a round trip that grows
// because a shared core was busy, not because of a queue, then costs
// nothing, and neither does a single lost datagram (the queue mode, for
// hosts whose cores the workers and railgated share).
//
// The target is the rail's base delay plus headroom for queueing. The
// base is the smallest smoothed round trip (EWMA, 1/8) of the last two
// epochs: a min filter that forgets a path that got longer, over a mean
// that one lucky sample does not pull down (on shared cores a round trip
// now and then takes a tenth of the usual). The target follows the path
// with no configuration; a fixed target replaces it.
//
// Pure logic: callers pass every time (nanoseconds on any clock) and every
// sample; nothing here reads a clock, so tests drive it on a manual one.
#pragma once

#include <algorithm>
#include <cstdint>

namespace railgate::qos {

struct delay_window_params {
    double ai = 1.0;      // chunks added per round trip under the target
    double beta = 0.8;    // decrease per unit of relative excess delay
    double max_mdf = 0.5; // the most a window shrinks per round trip
    double min_window = 1.0;
    double g = 1.0 / 16; // DCTCP's gain for the fraction of marked results
    // A path's first window (capped by the pool). Until its first decrease
    // the window doubles each round trip under the target (slow start).
    double initial_window = 16.0;
    // Fixed target round trip; 0: the base delay plus headroom.
    std::uint64_t target_ns = 0;
    // Queueing allowed above the base: at least headroom_ns, and at least
    // the base itself (a slow path gets room in proportion).
    std::uint64_t headroom_ns = 100'000;
    std::uint64_t epoch_ns = 1'000'000'000; // base-delay min filter
    // React to round trips above the target (off: the queue mode).
    bool delay = true;
    // Halve on a single loss (RACK or one timeout); off (the queue mode),
    // only timeouts in a row shrink it (to the minimum): on the kernel
    // path a lost datagram is most often a receiver that was off its core
    // for a moment, and a halved window takes many round trips to grow back.
    bool loss = true;
    // railgated's echoed queue depth (frames) above which the window
    // shrinks; 0 ignores the depth. DCTCP's marking threshold for 1500-byte
    // frames at 10 Gbit/s is about 65 packets; railgated's shaped rails are
    // slower, and a shallow standing queue is the point.
    unsigned depth_target = 16;

    // The queue mode's parameters: these, with delay and single losses off.
    static delay_window_params queue_mode() noexcept {
        delay_window_params p;
        p.delay = false;
        p.loss = false;
        return p;
    }
};

class delay_window {
public:
    delay_window() = default;
    explicit delay_window(const delay_window_params& p) : p_(p) {}

    // A new pipeline of at most `max_window` chunks (the slot pool). The
    // window starts at the initial window, or keeps what it learned
    // (capped) when the same path goes on (`keep`).
    void start(double max_window, std::uint64_t now, bool keep) noexcept {
        max_ = std::max(max_window, p_.min_window);
        if (!keep || w_ <= 0) {
            w_ = p_.initial_window;
            base_ = prev_base_ = 0;
            epoch_start_ = now;
            decreased_ = false;
            ssthresh_ = 0;
            srtt_ = 0;
            alpha_ = 1.0;
            acked_ = marked_ = 0;
        }
        clamp();
    }

    // A result came back `rtt` after its chunk left (a chunk sent once:
    // Karn); `ce`: the receiver saw its chunk marked; `depth`: the frames
    // railgated's queue held ahead of the result. Returns the window.
    double on_sample(std::uint64_t rtt, std::uint64_t now, bool ce = false, unsigned depth = 0) noexcept {
        srtt_ = srtt_ ? (7 * srtt_ + rtt) / 8 : rtt;
        note_base(srtt_, now);
        ++acked_;
        marked_ += ce;
        if (static_cast<double>(acked_) >= w_) { // a window of results: alpha follows their marked fraction
            alpha_ = (1 - p_.g) * alpha_ + p_.g * static_cast<double>(marked_) / static_cast<double>(acked_);
            acked_ = marked_ = 0;
        }
        const std::uint64_t t = target();
        const bool late = p_.delay && rtt > t;
        const bool deep = p_.depth_target && depth > p_.depth_target;
        deep_ += deep;
        if (ce) {
            ++marks_;
            if (may_decrease(now)) {
                w_ *= 1.0 - alpha_ / 2;
                mark_decrease(now);
            }
        } else if (!late && !deep) {
            // ai per round trip (a window's worth of results adds ai), or
            // in slow start one per result (doubling per round trip).
            w_ += !decreased_ || w_ < ssthresh_ ? 1.0 : w_ >= 1.0 ? p_.ai / w_ : p_.ai;
            ++increases_;
        } else if (may_decrease(now)) {
            // The larger relative excess of the two signals.
            double excess = late ? static_cast<double>(rtt - t) / static_cast<double>(rtt) : 0.0;
            if (deep)
                excess = std::max(excess, static_cast<double>(depth - p_.depth_target) / static_cast<double>(depth));
            w_ *= std::max(1.0 - p_.beta * excess, 1.0 - p_.max_mdf);
            mark_decrease(now);
        }
        clamp();
        return w_;
    }
    // A chunk was found lost (out of order: RACK), or its timeout ran
    // out: the window halves (max_mdf), once per round trip. Timeouts in a
    // row (`consecutive`, the rail's backoff) take it to the minimum.
    // From the minimum the window doubles per round trip again up to half
    // what it had (RFC 5681's slow start to ssthresh after a timeout), and
    // grows additively from there.
    void on_loss(std::uint64_t now, unsigned consecutive = 0) noexcept {
        if (!p_.loss && consecutive < 2) return;
        if (consecutive >= 2) {
            // Timeouts on timeouts (already near the minimum): the aim stays.
            const double aim = std::max(ssthresh_, w_ * (1.0 - p_.max_mdf));
            w_ = p_.min_window;
            mark_decrease(now);
            ssthresh_ = aim;
        } else {
            if (!may_decrease(now)) return;
            w_ *= 1.0 - p_.max_mdf;
            mark_decrease(now);
        }
        clamp();
    }

    // Chunks that may be in flight (at least 1).
    unsigned window() const noexcept { return static_cast<unsigned>(std::max(w_, 1.0)); }
    double exact() const noexcept { return w_; }
    std::uint64_t target() const noexcept {
        if (p_.target_ns) return p_.target_ns;
        const std::uint64_t b = base();
        return b + std::max(p_.headroom_ns, b);
    }
    // The smallest smoothed round trip of this epoch and the last (0: none yet).
    std::uint64_t base() const noexcept {
        if (!prev_base_) return base_;
        return base_ ? std::min(base_, prev_base_) : prev_base_;
    }
    std::uint64_t srtt() const noexcept { return srtt_; }
    std::uint64_t increases() const noexcept { return increases_; }
    std::uint64_t decreases() const noexcept { return decreases_; }
    std::uint64_t marks() const noexcept { return marks_; }
    // Results whose echoed queue depth stood above the target.
    std::uint64_t deep() const noexcept { return deep_; }
    double alpha() const noexcept { return alpha_; }
    const delay_window_params& params() const noexcept { return p_; }

private:
    void note_base(std::uint64_t rtt, std::uint64_t now) noexcept {
        if (now - epoch_start_ >= p_.epoch_ns) {
            prev_base_ = base_;
            base_ = 0;
            epoch_start_ = now;
        }
        if (!base_ || rtt < base_) base_ = rtt;
    }
    // At most one decrease per round trip (the smoothed one): the window
    // reacts to what its last decrease did, not to the queue it left.
    bool may_decrease(std::uint64_t now) const noexcept {
        return !decreased_ || now - last_decrease_ >= srtt_;
    }
    void mark_decrease(std::uint64_t now) noexcept {
        ssthresh_ = std::min(ssthresh_, w_); // no slow start past a mark, a late or deep result, a loss
        decreased_ = true;
        last_decrease_ = now;
        ++decreases_;
    }
    void clamp() noexcept { w_ = std::clamp(w_, p_.min_window, max_); }

    delay_window_params p_{};
    double w_ = 0, max_ = 1;
    std::uint64_t base_ = 0, prev_base_ = 0, epoch_start_ = 0;
    bool decreased_ = false;
    double ssthresh_ = 0; // below it the window doubles per round trip (after timeouts in a row)
    std::uint64_t last_decrease_ = 0, srtt_ = 0;
    std::uint64_t increases_ = 0, decreases_ = 0, marks_ = 0, deep_ = 0;
    double alpha_ = 1.0; // DCTCP starts at 1: the first mark halves
    std::uint64_t acked_ = 0, marked_ = 0;
};

} // namespace railgate::qos
