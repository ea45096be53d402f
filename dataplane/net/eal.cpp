#include "dataplane/net/eal.hpp"

#include <atomic>
#include <cstdint>
#include <stdexcept>

#include <cstdio>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_log.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_mempool.h>

#include "dataplane/log/log.hpp"

namespace railgate::net {
namespace {
std::atomic<bool> eal_started{false};
}

eal::eal(const std::vector<std::string>& args) {
    if (eal_started.exchange(true)) throw std::runtime_error("EAL already initialised in this process");
    std::vector<char*> argv;
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (rte_eal_init(static_cast<int>(copy.size()), argv.data()) < 0)
        throw std::runtime_error(std::string("rte_eal_init: ") + rte_strerror(rte_errno));
}

eal::~eal() { rte_eal_cleanup(); }

namespace {

// DPDK writes a message in pieces (fprintf); a line is logged when its
// newline arrives, at the level of the message being written.
std::string dpdk_pending;

ssize_t dpdk_log_write(void*, const char* buf, size_t n) {
    dpdk_pending.append(buf, n);
    for (std::size_t nl; (nl = dpdk_pending.find('\n')) != std::string::npos; dpdk_pending.erase(0, nl + 1)) {
        const int l = rte_log_cur_msg_loglevel();
        const log::level lv = l <= static_cast<int>(RTE_LOG_ERR)       ? log::level::error
                              : l == static_cast<int>(RTE_LOG_WARNING) ? log::level::warning
                              : l == static_cast<int>(RTE_LOG_NOTICE)  ? log::level::notice
                              : l == static_cast<int>(RTE_LOG_INFO)    ? log::level::info
                                                                       : log::level::debug;
        if (nl) log::write(lv, "dpdk: %.*s", static_cast<int>(nl), dpdk_pending.data());
    }
    return static_cast<ssize_t>(n);
}

} // namespace

void route_dpdk_log() {
    static cookie_io_functions_t fns{nullptr, dpdk_log_write, nullptr, nullptr};
    if (std::FILE* f = fopencookie(nullptr, "w", fns)) {
        std::setvbuf(f, nullptr, _IONBF, 0);
        rte_openlog_stream(f);
    }
}

std::vector<std::string> embedded_eal_args(const std::string& prog) {
    return {prog, "--no-huge", "--no-pci", "--no-shconf", "--no-telemetry", "-l", "0-1", "-m", "512",
            "--log-level", "lib.eal:error"};
}

namespace {

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 // Linux 5.14
#endif

// Faults in every page of one of the pool's memory chunks, writable, now:
// one system call where the kernel has MADV_POPULATE_WRITE, else a write
// of each page's first byte (its own value: headers may live there).
void populate_chunk(rte_mempool*, void*, rte_mempool_memhdr* h, unsigned) {
    const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto start = reinterpret_cast<std::uintptr_t>(h->addr) & ~(page - 1);
    const std::uintptr_t end = reinterpret_cast<std::uintptr_t>(h->addr) + h->len;
    if (madvise(reinterpret_cast<void*>(start), end - start, MADV_POPULATE_WRITE) == 0) return;
    for (std::uintptr_t a = reinterpret_cast<std::uintptr_t>(h->addr); a < end; a = (a & ~(page - 1)) + page) {
        auto* b = reinterpret_cast<volatile unsigned char*>(a);
        *b = *b;
    }
}

} // namespace

rte_mempool* make_pktmbuf_pool(const std::string& name, unsigned n, unsigned data_room, int socket) {
    const unsigned flags = rte_eal_has_hugepages() ? 0 : RTE_MEMPOOL_F_NO_IOVA_CONTIG;
    const unsigned cache = n >= 4096 ? 256 : 32;
    const unsigned elt = static_cast<unsigned>(sizeof(rte_mbuf)) + data_room;
    rte_mempool* mp = rte_mempool_create_empty(name.c_str(), n, elt, cache,
                                               sizeof(rte_pktmbuf_pool_private), socket, flags);
    if (!mp) throw std::runtime_error("mempool " + name + ": " + rte_strerror(rte_errno));
    rte_pktmbuf_pool_private priv{};
    priv.mbuf_data_room_size = static_cast<uint16_t>(data_room);
    priv.mbuf_priv_size = 0;
    if (rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), nullptr) != 0) {
        rte_mempool_free(mp);
        throw std::runtime_error("mempool " + name + ": cannot set ops");
    }
    rte_pktmbuf_pool_init(mp, &priv);
    if (rte_mempool_populate_default(mp) < 0) {
        rte_mempool_free(mp);
        throw std::runtime_error("mempool " + name + ": cannot populate (" + std::to_string(n) +
                                 " x " + std::to_string(elt) + " bytes)");
    }
    rte_mempool_obj_iter(mp, rte_pktmbuf_init, nullptr);
    // Without hugepages the EAL's memory is ordinary pages, faulted in at
    // first touch (hugepages are, when the EAL maps them). A buffer's
    // first use then took its page faults inside the data path, and every
    // operation took some buffers never used before (traced): railbench
    // --embedded MTU 9000 4 MiB per-chunk p99/p50 3.7-4.0 against 2.3-2.5
    // populated, busbw 3.16 against 3.52 GB/s. The pool is resident from
    // here on, as a hugepage one is.
    if (!rte_eal_has_hugepages()) rte_mempool_mem_iter(mp, populate_chunk, nullptr);
    return mp;
}

} // namespace railgate::net
