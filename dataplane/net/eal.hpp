// RAII around DPDK's EAL and mbuf pools. Only dataplane/net and the DPDK
// transports include rte_* headers.
#pragma once

#include <cstdint>
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

// The embedded EAL arguments (railbench --embedded, raillat, the benchmarks
// and the vdev tests): no PCI, no shared config or files, no telemetry,
// lcores 0-1; and hugepages where the host has them free, else 512 MiB of
// ordinary 4 KiB pages (--no-huge; CI reserves hugepages for its tests:
// tools/setup.sh, as_test_host). On 4 KiB pages the pools
// span tens of thousands of pages and the data path misses the TLB:
// railbench --embedded at MTU 9000 moved 1.4-1.9x the busbw on hugepages
// (a 2-vCPU guest, one binary, alternated; one lcore alone 0.90-1.06x in
// that stretch, 1.3-1.4x in a slower one: doc/performance.md).
// $RAILGATE_HUGEPAGES decides instead of the host: "0" never, "1" always
// (the EAL then fails, saying so, where there are none).
// Throws std::runtime_error on another value of it.
std::vector<std::string> embedded_eal_args(const std::string& prog);

// Whether embedded_eal_args takes hugepages, given the bytes of them free
// (every size) and $RAILGATE_HUGEPAGES (nullptr: unset): free ones only
// where at least 1 GiB is, so that a few such processes at once (tests,
// a benchmark beside a railgated) do not run each other out.
// Throws std::runtime_error on a value of the variable not "0" or "1".
bool embedded_hugepages(std::uint64_t free_bytes, const char* env);

// Free hugepages of every size, in bytes (0: none, or no sysfs), under
// `root` ("" is the host; tests give a made-up tree).
std::uint64_t free_hugepage_bytes(const std::string& root = "");

// What the running EAL's memory is, for the benchmarks' headers:
// "hugepages" or "4 KiB pages (no hugepages)".
const char* eal_memory_kind();

// A pktmbuf pool of n buffers with `data_room` bytes each on `socket`.
// Without hugepages the pool is built with RTE_MEMPOOL_F_NO_IOVA_CONTIG:
// otherwise every object is padded to avoid crossing a page, which wastes
// memory and thrashes the cache; and its pages are faulted in at once
// (as hugepages are), not by the data path's first touch of each buffer.
// Throws on failure.
rte_mempool* make_pktmbuf_pool(const std::string& name, unsigned n, unsigned data_room, int socket);

} // namespace railgate::net
