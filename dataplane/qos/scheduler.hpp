// The transmit scheduler of one rail: 8 traffic classes, DCB-style.
//
//   - strict TCs go first, highest TC first;
//   - the other TCs share what is left by ETS weights, with deficit round
//     robin: a weight is a minimum guarantee under contention, and what an
//     idle or rate-capped TC does not use is lent to the others (work
//     conserving);
//   - every TC may have its own token-bucket shaper (a rate cap), and the
//     rail one (the link speed, or a stand-in for one);
//   - a TC whose head does not conform to its shaper is skipped this time,
//     so a capped TC never blocks the others.
//
// Items are whatever the caller transmits (an rte_mbuf*, a test struct)
// with their wire size. Queues are bounded; a full queue refuses the item
// and the caller counts the drop. The clock is a template parameter: the
// caller passes `now` (one read per burst), tests use a manual clock.
#pragma once

#include <array>
#include <cstdint>
#include <vector>
#include <optional>
#include <string>

#include "dataplane/qos/classify.hpp"
#include "dataplane/qos/token_bucket.hpp"

namespace railgate::qos {

struct tc_config {
    bool strict = false;
    unsigned weight = 1;          // ETS share (relative), ignored when strict
    std::uint64_t rate_bps = 0;   // 0: not capped
    std::uint64_t burst_bytes = 0; // 0: 16 max-size items
};

struct tc_counters {
    std::uint64_t enqueued = 0, dequeued = 0, bytes = 0, drops = 0;
};

// Validates a TC configuration set; "" or the first problem.
inline std::string check(const std::array<tc_config, tc_count>& tcs) {
    for (unsigned t = 0; t < tc_count; ++t)
        if (!tcs[t].strict && (tcs[t].weight == 0 || tcs[t].weight > 100))
            return "tc " + std::to_string(t) + ": weight " + std::to_string(tcs[t].weight) + " out of range 1..100";
    return "";
}

template <class Item, class Clock>
class scheduler {
public:
    using time_point = typename Clock::time_point;

    struct options {
        std::array<tc_config, tc_count> tcs{};
        std::uint64_t rail_rate_bps = 0;    // 0: not shaped
        std::uint64_t rail_burst_bytes = 0; // 0: 16 max-size items
        std::uint32_t max_item_bytes = 9216 + 18;
        std::size_t queue_items = 1024;     // per TC
        // ECN: frames queued behind this many others in their TC are to be
        // marked CE (DCTCP's step marking; 0: never). marks() says so.
        std::size_t ecn_mark_items = 0;
    };

    scheduler(const options& o, time_point now) : o_(o) { configure(o, now); }

    // Applies a new configuration; queued items stay queued.
    void configure(const options& o, time_point now) {
        o_ = o;
        auto burst = [&](std::uint64_t b) { return b ? b : std::uint64_t{16} * o.max_item_bytes; };
        rail_.set(o.rail_rate_bps, burst(o.rail_burst_bytes), now);
        for (unsigned t = 0; t < tc_count; ++t) {
            tc_state& s = tc_[t];
            s.shaper.set(o.tcs[t].rate_bps, burst(o.tcs[t].burst_bytes), now);
            s.quantum = std::uint64_t{o.tcs[t].weight ? o.tcs[t].weight : 1} * o.max_item_bytes;
            s.deficit = 0;
            s.q.reserve(o.queue_items);
        }
    }
    const options& config() const noexcept { return o_; }

    // Whether an item queued on `tc` now should be marked ECN CE: its
    // queue holds at least ecn_mark_items (the caller marks what can be).
    bool marks(unsigned tc) const noexcept {
        return o_.ecn_mark_items && tc_[tc % tc_count].q.size() >= o_.ecn_mark_items;
    }

    // Queues an item on its TC; false when that queue is full (counted).
    bool enqueue(unsigned tc, Item item, std::uint32_t bytes) {
        tc_state& s = tc_[tc % tc_count];
        if (s.q.size() >= o_.queue_items) {
            ++s.ctr.drops;
            return false;
        }
        s.q.push_back({item, bytes});
        ++s.ctr.enqueued;
        ++queued_;
        return true;
    }

    struct out {
        Item item;
        unsigned tc;
        std::uint32_t bytes;
    };
    // The next item allowed to leave now, if any. The TC is chosen first
    // (strict, then deficit round robin, among TCs whose own shaper lets
    // their head go); if the rail's shaper does not let that item go yet,
    // nothing leaves and the choice stands: the rail's timing never
    // reorders the TCs or skews their shares.
    std::optional<out> dequeue(time_point now) {
        if (!queued_) return std::nullopt;
        for (unsigned t = tc_count; t-- > 0;)
            if (o_.tcs[t].strict && ready(t, now)) return rail_lets(t, now) ? std::optional<out>(take(t)) : std::nullopt;
        for (unsigned step = 0; step <= tc_count; ++step) {
            const unsigned t = cur_;
            tc_state& s = tc_[t];
            if (!o_.tcs[t].strict && ready(t, now)) {
                if (!turn_) {
                    s.deficit += s.quantum;
                    turn_ = true;
                }
                if (s.q.front().bytes <= s.deficit) {
                    if (!rail_lets(t, now)) return std::nullopt;
                    s.deficit -= s.q.front().bytes;
                    return take(t);
                }
            } else if (s.q.empty()) {
                s.deficit = 0; // an idle TC banks nothing: its share is lent, not saved
            }
            cur_ = (cur_ + 1) % tc_count;
            turn_ = false;
        }
        return std::nullopt;
    }

    // When the next queued item could leave (for pacing); 0 = now or none.
    std::chrono::nanoseconds next_in(time_point now) {
        std::chrono::nanoseconds best = std::chrono::nanoseconds::max();
        for (unsigned t = 0; t < tc_count; ++t) {
            tc_state& s = tc_[t];
            if (s.q.empty()) continue;
            const std::uint32_t b = s.q.front().bytes;
            best = std::min(best, std::max(s.shaper.wait(b, now), rail_.wait(b, now)));
        }
        return best == std::chrono::nanoseconds::max() ? std::chrono::nanoseconds(0) : best;
    }

    // Hands every queued item to f and empties the queues (shutdown).
    template <class F> void clear(F&& f) {
        for (tc_state& s : tc_) s.q.drain([&](const entry& e) { f(e.item); });
        queued_ = 0;
    }
    // Whether any TC or the rail is shaped (else the scheduler is not needed).
    static bool shapes(const options& o) noexcept {
        if (o.rail_rate_bps) return true;
        for (const tc_config& t : o.tcs)
            if (t.strict || t.rate_bps) return true;
        return false;
    }

    std::size_t queued() const noexcept { return queued_; }
    std::size_t queued(unsigned tc) const noexcept { return tc_[tc].q.size(); }
    // A ticket for the item enqueue() queued last on `tc`, and whether the
    // item a ticket names is still queued there (its TC is FIFO). A ticket
    // another scheduler gave, or one dropped by clear(), may read queued
    // only while `tc` holds more items than it took since: never for longer
    // than its queue takes to drain.
    std::uint32_t ticket(unsigned tc) const noexcept {
        return static_cast<std::uint32_t>(tc_[tc % tc_count].ctr.enqueued);
    }
    bool holds(unsigned tc, std::uint32_t ticket) const noexcept {
        const tc_state& s = tc_[tc % tc_count];
        const std::uint32_t ahead = ticket - static_cast<std::uint32_t>(s.ctr.dequeued);
        return ahead != 0 && ahead <= s.q.size();
    }
    const tc_counters& counters(unsigned tc) const noexcept { return tc_[tc].ctr; }

private:
    struct entry {
        Item item;
        std::uint32_t bytes;
    };
    // A TC's queue: a ring over one allocation made by configure(), so that
    // enqueue and dequeue never allocate (a deque allocated a block every
    // few dozen items, on the packet path).
    class ring {
    public:
        // Room for n items at least; the queued ones keep their order.
        void reserve(std::size_t n) {
            n = std::max(n, n_);
            if (n == buf_.size()) return;
            std::vector<entry> b(n);
            for (std::size_t i = 0; i < n_; ++i) b[i] = at(i);
            buf_ = std::move(b);
            head_ = 0;
        }
        bool empty() const noexcept { return n_ == 0; }
        std::size_t size() const noexcept { return n_; }
        const entry& front() const noexcept { return buf_[head_]; }
        void push_back(const entry& e) noexcept { // the caller keeps size() below the reserve
            buf_[(head_ + n_) % buf_.size()] = e;
            ++n_;
        }
        void pop_front() noexcept {
            head_ = (head_ + 1) % buf_.size();
            --n_;
        }
        template <class F> void drain(F&& f) {
            for (; n_; pop_front()) f(front());
        }

    private:
        const entry& at(std::size_t i) const noexcept { return buf_[(head_ + i) % buf_.size()]; }
        std::vector<entry> buf_;
        std::size_t head_ = 0, n_ = 0;
    };
    struct tc_state {
        ring q;
        token_bucket<Clock> shaper;
        std::uint64_t quantum = 0, deficit = 0;
        tc_counters ctr;
    };

    // The TC has an item its own shaper lets go.
    bool ready(unsigned t, time_point now) {
        tc_state& s = tc_[t];
        return !s.q.empty() && s.shaper.conforms(s.q.front().bytes, now);
    }
    bool rail_lets(unsigned t, time_point now) { return rail_.conforms(tc_[t].q.front().bytes, now); }
    out take(unsigned t) {
        tc_state& s = tc_[t];
        const entry e = s.q.front();
        s.q.pop_front();
        --queued_;
        s.shaper.consume(e.bytes);
        rail_.consume(e.bytes);
        ++s.ctr.dequeued;
        s.ctr.bytes += e.bytes;
        return {e.item, t, e.bytes};
    }

    options o_;
    token_bucket<Clock> rail_;
    std::array<tc_state, tc_count> tc_;
    std::size_t queued_ = 0;
    unsigned cur_ = 0;
    bool turn_ = false;
};

} // namespace railgate::qos
