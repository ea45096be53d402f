// The worker side over DPDK ethdev ports, one port per rail: in-process
// rings (embedded mode), af_xdp, af_packet or memif. The worker builds its
// own Ethernet/IPv4/UDP frames and resolves railgated's rail-0 MAC by ARP;
// the other rails' MACs come from the JOIN_ACK.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "client/railgate/transport.hpp"

struct rte_mempool;
struct rte_mbuf;

namespace railgate::client {

struct dpdk_port {
    std::uint16_t port_id = 0;
    std::uint32_t ip = 0; // this worker's address on the rail, host order
    std::uint8_t tos = 0; // IPv4 TOS (DSCP << 2) of its frames: the traffic class
    // The port computes and verifies UDP checksums although it does not
    // advertise it: the embedded switch, whose wire is memory (as a veth's
    // or lo's, where Linux computes none either). Ports that advertise the
    // offloads (RX and TX UDP checksums) use them without it.
    bool emulate_checksum_offload = false;
};

// What the embedded switch does to a worker's outgoing burst before it
// leaves (its fault injector), or to an incoming one as it arrives (a
// direct link's: the offloads' marks and the fault injector): may drop,
// reorder, duplicate into room for `cap` frames; n is updated.
using burst_hook = std::function<void(unsigned rail, rte_mbuf** frames, unsigned& n, unsigned cap)>;

// Configures and starts every port (1 RX + 1 TX queue, mbufs from `pool`).
// `pump`, if set, runs at the start of every recv(): the embedded mode's
// virtual switch, and `tx_hook` on every burst sent; with `hook_holds`
// (it may hold frames back: reordering) also with none at every recv(),
// so that what it held leaves within a poll; `rx_hook`, if set, on every
// burst received, empty ones too (it may hold frames back). Frames carry UDP
// checksums (in software, or left to a port that offloads them); received
// ones without a right one (checked in software unless the port marked it
// verified), or from anyone but railgated's rail, are dropped (dropped()).
// Throws std::runtime_error on port errors.
std::unique_ptr<transport> make_dpdk_transport(const std::vector<dpdk_port>& ports, std::uint32_t server_ip,
                                               std::uint16_t server_port, rte_mempool* pool,
                                               std::function<void()> pump = {}, burst_hook tx_hook = {},
                                               bool hook_holds = false, burst_hook rx_hook = {});

} // namespace railgate::client
