// A udp rail's port (transport = "udp"): the kernel's UDP socket on the
// rail's address stands where a DPDK port would. Workers on the same host
// (or reaching it through the host's own stack) then cost the kernel one
// copy each way and no per-frame trip through a veth and af_packet: their
// UDP GSO messages travel whole to this socket (UDP GRO: the kernel does not
// cut them into datagrams, the receive does, into one mbuf each), and
// results leave as UDP GSO messages too.
//
// To the rail loop it is a port like any other: rx() hands over each
// datagram in an mbuf framed as Ethernet/IPv4/UDP to the rail (the kernel
// verified the checksum, and the mbuf flags say so), tx() takes the frames
// the handlers built and sends their UDP payloads to the frames'
// destinations, a run of equal-sized datagrams to one destination as one
// UDP_SEGMENT message, and zero-copy from a chained result (each segment is
// one iovec).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "dataplane/proto/drop_reason.hpp"
#include "dataplane/proto/frame.hpp"

struct rte_mbuf;
struct rte_mempool;

namespace railgate::net {

class udp_port {
public:
    static constexpr unsigned max_burst = 64;

    // Binds ip:port (host order). Throws std::runtime_error with the
    // kernel's reason (an address no interface has, a port in use).
    udp_port(std::uint32_t ip, std::uint16_t port, unsigned buffer_bytes, unsigned max_frames);
    ~udp_port();
    udp_port(const udp_port&) = delete;
    udp_port& operator=(const udp_port&) = delete;

    // What receives did, for the rail's counters.
    struct rx_tally {
        unsigned oversize = 0;  // dropped: datagrams larger than an mbuf's room
        unsigned no_mbuf = 0;   // dropped: segments of a coalesced message the pool had no mbuf for
        unsigned coalesced = 0; // datagrams that arrived in coalesced (GRO) messages
        unsigned copied = 0;    // datagrams that did not land alone in an mbuf and were copied
    };
    // Up to n (<= max_burst) datagrams, each in an mbuf of `pool` framed to
    // `self`, in the order they arrived, counted in `tally`. With
    // the pool empty nothing is received (the socket buffer holds them).
    //
    // With UDP GRO a message is a run of equal datagrams (the last may be
    // shorter); each message's buffers are mbufs cut at the segment size
    // the last coalesced message had, so that each datagram lands in an
    // mbuf of its own, and then 64 KiB of overflow. A datagram that did not
    // land alone in an mbuf (another segment size, more segments than
    // mbufs) is copied into a fresh one. What one receive brings beyond n
    // waits for the next call.
    unsigned rx(rte_mempool* pool, const frame::endpoint& self, rte_mbuf** out, unsigned n, rx_tally& tally) noexcept;

    // Sends the UDP payloads of frames from `self` (untagged IPv4/UDP) to
    // their destinations and frees what went. What did not go is returned
    // in failed[] with its reason (not freed): tx_full when the socket
    // buffer stays full, udp_rail_refused for a frame that is not a UDP
    // datagram from the rail or that the kernel refuses (too big for the
    // route).
    unsigned tx(rte_mbuf** v, unsigned n, const frame::endpoint& self, rte_mbuf** failed,
                drop_reason* why) noexcept;

    // Whether a frame's checksums hold: one whose checksums were computed
    // in software (not left to the port) and then damaged, as the fault
    // injector damages a frame on the wire. The socket would send it with
    // fresh checksums, so the damage would reach the worker unseen: such a
    // frame is not sent (a receiver would drop it).
    static bool intact(const rte_mbuf* m) noexcept;

    int fd() const noexcept { return fd_; }
    // Datagrams sent, and the messages (UDP_SEGMENT runs) that carried them.
    std::uint64_t sent_datagrams() const noexcept { return sent_; }
    std::uint64_t sent_messages() const noexcept { return messages_; }
    // Datagrams received, and the messages (GRO runs) that carried them.
    std::uint64_t received_datagrams() const noexcept { return received_; }
    std::uint64_t received_messages() const noexcept { return rx_messages_; }
    // Datagrams that did not land alone in an mbuf and were copied out.
    std::uint64_t copied_datagrams() const noexcept { return copied_; }
    // Whether the kernel coalesces received datagrams (UDP_GRO;
    // RAILGATE_UDP_GRO=0 turns it off, for workers too).
    bool gro() const noexcept { return gro_; }

private:
    // One receive's messages: at most max_rx_msgs, each of at most
    // max_gro_segs datagrams (the kernel's UDP GRO limit).
    static constexpr unsigned max_rx_msgs = 16, max_gro_segs = 64;
    static constexpr std::size_t overflow_bytes = 65536;
    void receive(rte_mempool* pool, const frame::endpoint& self, rx_tally& tally) noexcept;

    int fd_ = -1;
    bool gro_ = false;
    rte_mbuf* spare_[max_burst] = {}; // allocated ahead, kept between receives
    unsigned nspare_ = 0;
    std::uint32_t seg_ = 0;    // the segment size receive buffers are cut at (0: an mbuf's room)
    unsigned group_ = 1;       // mbufs per message (the most segments a message of the last receive had)
    rte_mbuf* staged_[max_rx_msgs * max_gro_segs] = {}; // received, not yet handed out
    unsigned staged_at_ = 0, staged_n_ = 0;
    std::unique_ptr<std::uint8_t[]> overflow_; // max_rx_msgs * overflow_bytes, touched only when needed
    std::uint64_t sent_ = 0, messages_ = 0, received_ = 0, rx_messages_ = 0, copied_ = 0;
    // tx's scratch, sized for max_frames frames of up to 4 segments.
    struct out_msg;
    struct dgram {
        std::uint32_t ip;
        std::uint16_t port;
        std::uint8_t tos;
        std::uint32_t len;
    };
    std::vector<dgram> dgrams_;
    std::unique_ptr<out_msg[]> msgs_;
    std::unique_ptr<mmsghdr[]> hdrs_;
    std::unique_ptr<iovec[]> iov_;
    std::unique_ptr<unsigned[]> order_;
    unsigned max_frames_ = 0;
};

} // namespace railgate::net
