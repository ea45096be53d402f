// RAII around DPDK's EAL and mbuf pools. Only dataplane/net and the DPDK
// transports include rte_* headers.
#pragma once

#include <string>
#include <vector>

struct rte_mempool;

namespace railgate::net {

// rte_eal_init may run once per process; constructing a second eal throws.
// Throws std::runtime_error naming the failure (rte_strerror).
class eal {
public:
    explicit eal(const std::vector<std::string>& args);
    ~eal();
    eal(const eal&) = delete;
    eal& operator=(const eal&) = delete;
};

// DPDK's own log lines (the EAL's, the PMDs') through railgated's log
// (dataplane/log): one line each, with railgated's timestamp or journald
// priority and its --log-level, instead of DPDK's bare stderr. Call before
// the eal, once.
void route_dpdk_log();

// The CI and embedded EAL arguments: no hugepages, no PCI, no shared config,
// no telemetry, lcores 0-1, 512 MiB.
std::vector<std::string> embedded_eal_args(const std::string& prog);

// A pktmbuf pool of n buffers with `data_room` bytes each on `socket`.
// Without hugepages the pool is built with RTE_MEMPOOL_F_NO_IOVA_CONTIG:
// otherwise every object is padded to avoid crossing a page, which wastes
// memory and thrashes the cache; and its pages are faulted in at once
// (as hugepages are), not by the data path's first touch of each buffer.
// Throws on failure.
rte_mempool* make_pktmbuf_pool(const std::string& name, unsigned n, unsigned data_room, int socket);

} // namespace railgate::net
