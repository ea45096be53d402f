// Kernel UDP sockets, one per rail: for workers without DPDK. Connected,
// non-blocking, batched with sendmmsg/recvmmsg; a batch's runs of equal
// datagrams (a rail's contributions) leave as one UDP GSO message each
// (UDP_SEGMENT; RAILGATE_UDP_GSO=0 turns it off, a kernel without it falls
// back by itself). Receives ask for UDP GRO (UDP_GRO; RAILGATE_UDP_GRO=0
// turns it off): where the device does GRO (a NIC by default, a veth with
// `ethtool -K IF gro on`) a run of results arrives as one message, cut
// apart here; coalesced() counts them. With an ECN-capable TOS, received
// datagrams say CE (IP_RECVTOS).
#pragma once

#include <memory>

#include "client/railgate/transport.hpp"

namespace railgate::client {

// server_ip (host order) and port: railgated's rail 0, the bootstrap.
// tos: the IPv4 TOS byte (DSCP << 2) of every datagram: the job's traffic
// class, in which railgated also answers. Throws std::runtime_error on
// socket errors.
std::unique_ptr<transport> make_udp_transport(std::uint32_t server_ip, std::uint16_t port, std::uint8_t tos = 0);

} // namespace railgate::client
