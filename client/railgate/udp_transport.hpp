// Kernel UDP sockets, one per rail: for workers without DPDK. Connected,
// non-blocking, batched with sendmmsg/recvmmsg.
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
