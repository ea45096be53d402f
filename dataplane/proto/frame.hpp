// Ethernet / ARP / IPv4 / ICMP / UDP framing for railgate, as pure functions
// over bytes, shared by railgated's rail loop and the worker's DPDK transport.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dataplane/proto/drop_reason.hpp"

namespace railgate::frame {

inline constexpr std::size_t eth_bytes = 14;
inline constexpr std::size_t ipv4_bytes = 20;
inline constexpr std::size_t udp_bytes = 8;
inline constexpr std::size_t udp_frame_overhead = eth_bytes + ipv4_bytes + udp_bytes;
inline constexpr std::size_t arp_frame_bytes = eth_bytes + 28;

struct mac_addr {
    std::uint8_t b[6] = {};
    bool operator==(const mac_addr&) const = default;
};

// Who a rail (or a worker port) is on the wire. ip is host order.
struct endpoint {
    mac_addr mac;
    std::uint32_t ip = 0;
    std::uint16_t udp_port = 0;
    // IPv4 TOS (DSCP << 2): a received frame's; what frames to this endpoint
    // carry (0: the sender's own).
    std::uint8_t tos = 0;
};

enum class kind : std::uint8_t { drop, arp_request, arp_reply, icmp_echo, udp };

struct info {
    kind k = kind::drop;
    drop_reason reason = drop_reason::none;
    std::uint16_t l3_offset = 0;  // IPv4 header
    std::uint16_t l4_offset = 0;  // UDP / ICMP header
    std::uint32_t l4_len = 0;     // ICMP message or UDP payload length
    std::uint32_t msg_offset = 0; // UDP payload
    endpoint src;                 // sender's MAC, IP and UDP port
    std::uint32_t arp_target_ip = 0;
};

// Classifies a received frame addressed to `self`. ARP requests/replies are
// recognised when they target self.ip; ICMP echo requests and UDP datagrams
// when they are addressed to self.ip (and, for UDP, to self.udp_port).
// The IPv4 header checksum is verified. Never reads past `len` bytes at p.
// `frame_len` (>= len) is the whole frame's length when only its first
// `len` bytes are contiguous (a segmented mbuf); ICMP then needs the whole
// frame contiguous and is dropped otherwise.
info classify(const std::uint8_t* p, std::size_t len, const endpoint& self,
              std::size_t frame_len = 0) noexcept;

// Internet checksum (RFC 1071) of `len` bytes, folded and complemented.
std::uint16_t inet_checksum(const void* data, std::size_t len) noexcept;

// Writes Ethernet + IPv4 + UDP headers for a datagram of `payload_len` bytes
// into `out` (udp_frame_overhead bytes). UDP checksum 0 (allowed in IPv4),
// IPv4 checksum filled, DF set, TTL 64.
void write_udp_headers(std::uint8_t* out, const endpoint& src, const endpoint& dst,
                       std::size_t payload_len) noexcept;

// Rewrites only what differs between two destinations of the same datagram:
// Ethernet destination, IPv4 destination + checksum, UDP destination port.
void retarget_udp_headers(std::uint8_t* frame, const endpoint& dst) noexcept;

// Turns a received ARP request (classified arp_request) into the reply in place.
void arp_reply_in_place(std::uint8_t* p, const endpoint& self) noexcept;
// Writes an ARP request for `target_ip`, broadcast, into out[arp_frame_bytes].
void write_arp_request(std::uint8_t* out, const endpoint& self, std::uint32_t target_ip) noexcept;
// Turns an ICMP echo request (classified icmp_echo) into the reply in place.
void icmp_echo_reply_in_place(std::uint8_t* p, const info& fi) noexcept;

} // namespace railgate::frame
