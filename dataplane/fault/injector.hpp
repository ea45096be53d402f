// The fault injector's decisions: a spec (what fraction of packets to drop,
// duplicate, reorder and corrupt) and a seeded generator that decides, per
// packet, what happens to it. Pure: the DPDK side (dataplane/net/fault.hpp)
// applies the decisions to mbufs on a rail's receive and transmit paths,
// and railbench --embedded's virtual switch to its own.
//
//   spec: drop=P,dup=P,reorder=P,corrupt=P,seed=S[,rank=N][,type=T[+T..]][,dir=rx|tx]
//         (P a fraction 0..1)
//
// rank=N limits it to railgate messages of rank N (to and from that
// worker: its header's rank); type=T to messages of one type (join,
// join_ack, contrib, result, error, leave, leave_ack, rtt_report, region,
// ping, pong, held), or T+T.. to any of several; dir= to one way, seen from
// railgated (rx: what the workers send it, tx: what it sends them). All
// default to everything: "drop=1,rank=2,dir=tx" is a worker whose results
// stop arriving while its contributions still do; "drop=0.5,type=leave_ack"
// loses half the LEAVE_ACKs; "drop=1,rank=1,type=result+pong+held,dir=tx"
// is railgated fallen silent to a worker that has joined.
//
// The decisions for a packet are independent draws, in that order: a
// dropped packet is neither duplicated, reordered nor corrupted. The same
// seed gives the same sequence of decisions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace railgate::fault {

struct spec {
    double drop = 0, dup = 0, reorder = 0, corrupt = 0;
    std::uint64_t seed = 1;
    int rank = -1;           // -1: every frame
    std::uint32_t types = 0; // bit t: wire::msg_type t; 0: every frame
    enum class way : std::uint8_t { both, rx, tx } dir = way::both;
    bool any() const noexcept { return drop > 0 || dup > 0 || reorder > 0 || corrupt > 0; }
    bool on_rx() const noexcept { return dir != way::tx; }
    bool on_tx() const noexcept { return dir != way::rx; }
    bool operator==(const spec&) const = default;
};

// Parses "drop=0.01,dup=0.001,reorder=0.01,corrupt=0.001,seed=7" (any
// subset, any order; "off" or "" is no faults). Returns "" or the error,
// naming the field.
std::string parse(std::string_view text, spec& out);
// The canonical text of a spec ("off" when it injects nothing).
std::string format(const spec& s);
// The name type= takes for a message type (wire::msg_type's value), or
// null when there is none.
const char* type_name(int type) noexcept;

// What happens to one packet.
struct verdict {
    bool drop = false, dup = false, reorder = false, corrupt = false;
    std::uint32_t bit = 0; // corrupt: which bit of the corruptible bytes flips (modulo their count)
};

// Seeded decisions (xoshiro256**: fast, and good enough for loss patterns).
class dice {
public:
    explicit dice(const spec& s = {}) noexcept { reset(s); }
    void reset(const spec& s) noexcept;
    const spec& current() const noexcept { return s_; }
    bool active() const noexcept { return active_; }
    verdict roll() noexcept;
    std::uint64_t next() noexcept;

private:
    static std::uint64_t threshold(double p) noexcept;
    spec s_;
    bool active_ = false;
    std::uint64_t drop_ = 0, dup_ = 0, reorder_ = 0, corrupt_ = 0;
    std::uint64_t st_[4] = {};
};

} // namespace railgate::fault
