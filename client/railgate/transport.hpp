// The worker side's transport: how a worker's messages reach railgated on
// each rail. Burst-shaped: one virtual call per burst, never per message.
//
// Threading: a transport belongs to one worker and is used by one thread,
// or, where parallel_rails(), by one thread per rail.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "dataplane/proto/drop_reason.hpp"
#include "dataplane/proto/wire.hpp"

namespace railgate::client {

// One message to send: the header and an optional payload that the
// transport reads before send() returns (it may copy or gather it).
struct tx_msg {
    wire::header h;
    const void* payload = nullptr;
    std::uint32_t bytes = 0;
};

// One received, validated server message. The payload may be split in up
// to two fragments (a DPDK chain); both stay valid until the next recv() on
// the same rail.
//
// The UDP checksum of a message whose payload nobody has summed yet (a
// DPDK port that does not verify it) is checked as the payload is copied
// out: copy_to() sums what it copies and returns false when the datagram
// was corrupted. The caller then treats it as never received; what it
// copied is overwritten when the right message comes.
struct rx_msg {
    wire::header h;
    const std::uint8_t* frag[2] = {nullptr, nullptr};
    std::uint32_t frag_len[2] = {0, 0};
    bool unchecked = false;      // the payload's checksum is still to check
    std::uint16_t head_sum = 0;  // unchecked: the ones' sum of all but the payload
    // It came marked ECN CE (transports that see the IP header: DPDK
    // always, UDP when its traffic is ECN-capable).
    bool ce = false;

    std::uint32_t bytes() const noexcept { return frag_len[0] + frag_len[1]; }
    // Copies the payload to dst (bytes() long); false when its checksum is wrong.
    bool copy_to(void* dst) const noexcept;
    // Whether its checksum holds, the payload read but not copied.
    bool intact() const noexcept;
    // A message with no payload (a HELD, a LEAVE_ACK) whose checksum holds.
    bool intact_without_payload() const noexcept { return bytes() == 0 && (!unchecked || head_sum == 0xffff); }
    // Asks for the payload's cache lines (the copy out's source). The
    // worker asks for results under 8 KiB only (worker.cpp, prefetch_below):
    // the hardware streams larger ones.
    void prefetch() const noexcept {
        for (unsigned f = 0; f < 2; ++f)
            for (std::uint32_t i = 0; i < frag_len[f]; i += 64) __builtin_prefetch(frag[f] + i, 0, 3);
    }
};

// The gen of an ERROR a transport makes up itself (a verbs rail whose QP
// failed): the worker takes it as its job's, whatever the incarnation.
inline constexpr std::uint32_t transport_error_gen = 0xffffffffu;

class transport {
public:
    virtual ~transport() = default;
    // Rails the transport can reach now (1 until open_rails()).
    virtual unsigned n_rails() const noexcept = 0;
    // After the first JOIN_ACK: reach every rail it lists (rail 0 included).
    // Returns an empty string or the reason it failed. A transport that
    // waits on the way (a verbs connection's handshake) calls `meanwhile`
    // every 50 ms or so: the worker keeps the rail it has joined alive.
    virtual std::string open_rails(std::span<const wire::rail_entry> rails, const std::function<void()>& meanwhile) = 0;
    // Sends up to n messages on `rail`; returns how many left.
    virtual unsigned send(unsigned rail, const tx_msg* msgs, unsigned n) noexcept = 0;
    // Receives up to max validated server messages from `rail`. Invalid
    // ones are dropped and counted in dropped().
    virtual unsigned recv(unsigned rail, rx_msg* out, unsigned max) noexcept = 0;
    virtual std::uint64_t dropped() const noexcept = 0;
    // Datagrams that arrived merged with others of their flow and were cut
    // apart here (UDP GRO); 0 where the transport has no such thing.
    virtual std::uint64_t coalesced() const noexcept { return 0; }
    // Blocks until a message may be waiting on some rail, or for at most
    // `max`. Poll-mode transports return at once (they spin).
    virtual void wait(std::chrono::microseconds) noexcept {}
    // True when the transport delivers every message (RC verbs): the worker
    // then never retransmits, it only waits.
    virtual bool reliable() const noexcept { return false; }
    // The shortest retransmit timeout worth having: below it a result is
    // more likely late than lost. Kernel transports wait out a scheduler
    // tick (a worker or railgated descheduled on a busy host is not a
    // loss); losses before a chunk's last are found sooner by RACK.
    virtual std::chrono::microseconds min_rto() const noexcept { return std::chrono::microseconds(0); }
    // True when send/recv on different rails may run on different threads
    // at once (each rail's own socket and buffers: UDP).
    virtual bool parallel_rails() const noexcept { return false; }
    // After a failure (railgated restarted, a rail went down and up): makes
    // every rail opened so far usable again (verbs: new connections; kernel
    // and DPDK transports have nothing to redo). "" or why not.
    virtual std::string reconnect() { return ""; }
    // The largest message (header and payload) it sends and receives
    // whole: a JOIN_ACK whose chunk would not fit is refused (its results
    // would be dropped, or not sent at all, every time). A UDP datagram's
    // by default.
    virtual std::size_t max_message_bytes() const noexcept { return 65507; }
    // Why a message of `bytes` is more than it carries, and what would
    // carry it ("" when there is nothing to add).
    virtual std::string message_limit(std::size_t) const { return ""; }
    // What the transport holds on `rail` that the worker's own state does
    // not show ("" where nothing: the kernel and DPDK transports hand each
    // message on at once): for the text of a failure that blames this rank
    // (verbs: whether railgated's REGION came, the sends posted and not yet
    // acknowledged, the QP's state). Called on the worker's thread.
    virtual std::string describe(unsigned) const { return ""; }
    // The transport's name, for reports ("udp", "dpdk", "verbs").
    virtual const char* name() const noexcept = 0;
    // Who sums the UDP checksums of its frames, for reports: "software",
    // "port" (DPDK ports that offload them both ways), "mixed", or "none"
    // (verbs: the fabric's CRCs).
    virtual const char* checksums() const noexcept { return "software"; }

    // The protocol version of the last message railgated sent in another
    // version than this library's (byte 0 is the version in every version,
    // and a railgated answers a JOIN of a version it does not speak in its
    // own), or -1: the worker names it when its JOIN goes unanswered.
    int foreign_version() const noexcept { return foreign_version_.load(std::memory_order_relaxed); }
    void forget_foreign_version() noexcept { foreign_version_.store(-1, std::memory_order_relaxed); }

protected:
    // A message from railgated that did not parse (drop reason r): counted
    // by the caller; its version remembered when that was what was wrong.
    void note_foreign(const std::uint8_t* msg, std::size_t len, drop_reason r) noexcept {
        if (r == drop_reason::rg_version && len > 0) foreign_version_.store(msg[0], std::memory_order_relaxed);
    }

private:
    std::atomic<int> foreign_version_{-1};
};

} // namespace railgate::client
