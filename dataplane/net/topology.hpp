// Where a rail's NIC sits, and which lcore should serve it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <vector>

namespace railgate::net {

// NUMA node of an ethdev: rte_eth_dev_socket_id for PCI devices; for vdevs
// bound to a kernel interface (af_packet, af_xdp) the interface's node as
// hwloc sees it; -1 when unknown (virtual rings, single-node hosts).
int port_numa_node(std::uint16_t port);

// One line per NUMA node with its CPUs, from hwloc.
void print_topology(std::FILE* out);

} // namespace railgate::net
