// Ethernet / ARP / IPv4 / ICMP / UDP framing for railgate, as pure functions
// over bytes, shared by railgated's rail loop and the worker's DPDK transport.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dataplane/proto/drop_reason.hpp"

namespace railgate::frame {

inline constexpr std::size_t eth_bytes = 14;
inline constexpr std::size_t vlan_eth_bytes = 18; // with an 802.1Q tag
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

// forward: an IPv4 datagram sent to self.mac for another address (the
// gateway's to route; l3_offset and l4_len = its total length are set).
// Frames with an 802.1Q tag are classified forward or dropped.
enum class kind : std::uint8_t { drop, arp_request, arp_reply, icmp_echo, udp, forward };

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
// An IPv4 datagram to self.mac for another unicast address is `forward`.
// The IPv4 header checksum is verified. Never reads past `len` bytes at p.
// `frame_len` (>= len) is the whole frame's length when only its first
// `len` bytes are contiguous (a segmented mbuf); ICMP then needs the whole
// frame contiguous and is dropped otherwise.
info classify(const std::uint8_t* p, std::size_t len, const endpoint& self,
              std::size_t frame_len = 0) noexcept;

// Internet checksum (RFC 1071) of `len` bytes, folded and complemented.
std::uint16_t inet_checksum(const void* data, std::size_t len) noexcept;
// The ones'-complement sum of `len` bytes folded to 16 bits, not
// complemented, as a big-endian number: the sums of even-length pieces
// add (add_sums) to the sum of the pieces joined.
std::uint16_t ones_sum16(const void* data, std::size_t len) noexcept;
constexpr std::uint16_t add_sums(std::uint16_t a, std::uint16_t b) noexcept {
    const std::uint32_t s = std::uint32_t{a} + b;
    return static_cast<std::uint16_t>((s & 0xffffu) + (s >> 16));
}
// Copies len bytes and returns their ones_sum16, in one pass.
std::uint16_t copy_and_sum(void* dst, const void* src, std::size_t len) noexcept;
// ones_sum16 of bytes whose little-endian 32-bit words (the last one padded
// with zeros) another pass summed into 64 bits, unfolded: the reduce
// kernels (reduce::sum_words_fn).
std::uint16_t fold_words(std::uint64_t words) noexcept;

// UDP checksums (RFC 768) of railgate datagrams: railgated and the DPDK
// worker carry one in every datagram and drop what arrives without a right
// one, so that a corrupted chunk is never summed.
// Fills the checksum of the untagged IPv4/UDP frame at `frame` whose UDP
// payload sums (ones_sum16) to payload_sum.
void fill_udp_checksum(std::uint8_t* frame, std::uint16_t payload_sum) noexcept;
// The same, summing the payload (contiguous after the headers) itself.
void fill_udp_checksum(std::uint8_t* frame) noexcept;
// The pseudo-header's and UDP header's part of an untagged frame's checksum.
std::uint16_t udp_header_sum(const std::uint8_t* frame) noexcept;
// Whether a frame classified `udp` carries a UDP checksum, and a right one.
// The UDP payload is the frame's bytes from fi.msg_offset up to `contig`,
// then `more` (`more_len` bytes: a chained mbuf's next segment).
bool udp_checksum_ok(const std::uint8_t* frame, std::size_t contig, const info& fi, const std::uint8_t* more = nullptr,
                     std::size_t more_len = 0) noexcept;
// The same for a contiguous frame classified `udp` earlier (untagged IPv4
// without options, as railgate datagrams are), from the frame alone.
bool udp_checksum_ok(const std::uint8_t* frame, std::size_t len) noexcept;

// Writes Ethernet + IPv4 + UDP headers for a datagram of `payload_len` bytes
// into `out` (udp_frame_overhead bytes). UDP checksum 0 (fill_udp_checksum
// or set_udp_checksum sets it once the payload is in), IPv4 checksum
// filled, DF set, TTL 64. Returns the pseudo-header's and UDP header's part
// of the UDP checksum (udp_header_sum of the result, without reading it).
std::uint16_t write_udp_headers(std::uint8_t* out, const endpoint& src, const endpoint& dst,
                                std::size_t payload_len) noexcept;
// write_udp_headers for a port that computes the UDP checksum only (DPDK's
// TX UDP checksum offload, not the IPv4 one): the IPv4 checksum complete
// and the UDP checksum field holding the pseudo-header's sum, both from the
// values (no load of what was just stored: it would wait on the line).
void write_udp_headers_offloaded(std::uint8_t* frame, const endpoint& src, const endpoint& dst,
                                 std::size_t payload_len) noexcept;
// Sets the UDP checksum of a frame whose headers sum to header_sum (as
// write_udp_headers returned) and whose UDP payload sums to msg_sum.
void set_udp_checksum(std::uint8_t* frame, std::uint16_t header_sum, std::uint16_t msg_sum) noexcept;

// ECN congestion experienced: an untagged IPv4 frame of `len` bytes whose
// ECN field says ECN-capable (ECT(0) or ECT(1)) gets CE, its IPv4 checksum
// updated incrementally (RFC 1624; a port that computes it overwrites it).
// True when it marked; a frame that is not ECN-capable (or already CE, or
// not IPv4) stays as it is.
bool mark_ce(std::uint8_t* frame, std::size_t len) noexcept;

// Rewrites only what differs between two destinations of the same datagram:
// Ethernet destination, IPv4 destination + checksum, UDP destination port.
void retarget_udp_headers(std::uint8_t* frame, const endpoint& dst) noexcept;

// Turns a received ARP request (classified arp_request) into the reply in place.
void arp_reply_in_place(std::uint8_t* p, const endpoint& self) noexcept;
// Writes an ARP request for `target_ip`, broadcast, into out[arp_frame_bytes].
void write_arp_request(std::uint8_t* out, const endpoint& self, std::uint32_t target_ip) noexcept;
// An ICMP error from `self` about the IPv4 datagram at `ip` (`ip_len` bytes
// readable), to `to` (the Ethernet sender it came from): time exceeded
// (type 11) or destination unreachable (type 3; code 4 carries `mtu`). It
// quotes the header and 8 bytes of the datagram (RFC 792). Returns the
// frame's length (at most icmp_error_max), or 0 where RFC 1812 forbids an
// error: about an ICMP error, a non-first fragment, or a datagram from a
// multicast or broadcast or zero source.
inline constexpr std::size_t icmp_error_max = eth_bytes + ipv4_bytes + 8 + 60 + 8;
std::size_t write_icmp_error(std::uint8_t* out, const endpoint& self, const mac_addr& to, const std::uint8_t* ip,
                             std::size_t ip_len, std::uint8_t type, std::uint8_t code, std::uint16_t mtu) noexcept;
// Turns an ICMP echo request (classified icmp_echo) into the reply in place.
void icmp_echo_reply_in_place(std::uint8_t* p, const info& fi) noexcept;

} // namespace railgate::frame
