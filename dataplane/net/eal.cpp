#include "dataplane/net/eal.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>
#include <vector>
#include <stdexcept>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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
#include "dataplane/net/burst.hpp"

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

bool embedded_hugepages(std::uint64_t free_bytes, const char* env) {
    if (env) {
        const std::string v(env);
        if (v == "0") return false;
        if (v == "1") return true;
        throw std::runtime_error("RAILGATE_HUGEPAGES='" + v + "': give 0 (no hugepages) or 1 (hugepages), or leave it "
                                 "unset (hugepages where 1 GiB of them is free)");
    }
    return free_bytes >= (std::uint64_t{1} << 30);
}

std::uint64_t free_hugepage_bytes(const std::string& root) {
    std::uint64_t bytes = 0;
    std::error_code ec;
    for (const auto& d : std::filesystem::directory_iterator(root + "/sys/kernel/mm/hugepages", ec)) {
        const std::string n = d.path().filename().string(); // hugepages-2048kB
        if (n.rfind("hugepages-", 0) != 0) continue;
        const std::uint64_t kb = std::strtoull(n.c_str() + 10, nullptr, 10);
        std::ifstream f(d.path() / "free_hugepages");
        std::uint64_t pages = 0;
        if (f >> pages) bytes += pages * kb * 1024;
    }
    return bytes;
}

std::vector<std::string> embedded_eal_args(const std::string& prog) {
    // With hugepages the EAL takes them as it needs them (no -m), in
    // memory (--in-memory: no hugetlbfs mount needed, no files left).
    const std::uint64_t free = free_hugepage_bytes();
    if (embedded_hugepages(free, std::getenv("RAILGATE_HUGEPAGES"))) {
        if (!free) // the EAL would say only "Cannot get hugepage information" and EACCES
            throw std::runtime_error("RAILGATE_HUGEPAGES=1: this host has no free hugepages (reserve them: echo 512 > "
                                     "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)");
        return {prog, "--in-memory", "--no-pci", "--no-telemetry", "-l", "0-1", "--log-level", "lib.eal:error"};
    }
    return {prog, "--no-huge", "--no-pci", "--no-shconf", "--no-telemetry", "-l", "0-1", "-m", "512",
            "--log-level", "lib.eal:error"};
}

const char* eal_memory_kind() { return rte_eal_has_hugepages() ? "hugepages" : "4 KiB pages (no hugepages)"; }

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

#ifdef RAILGATE_TSAN
// A TSan build's pools: DPDK's ring mempool driver moves buffers between
// threads inside librte_mempool_ring, which TSan does not instrument (and
// x86's rte_ring orders by barriers TSan does not model), so a buffer freed
// by one thread and allocated by another looked like a race on every
// reuse. Here the free buffers are a stack under a mutex, which TSan sees,
// and the pools have no per-lcore caches: every free and allocation goes
// through it.
struct tsan_pool {
    std::mutex mu;
    std::vector<void*> free;
};
tsan_pool& pool_of(const rte_mempool* mp) { return *static_cast<tsan_pool*>(mp->pool_data); }
int tsan_pool_alloc(rte_mempool* mp) {
    auto* p = new (std::nothrow) tsan_pool;
    if (!p) return -ENOMEM;
    p->free.reserve(mp->size);
    mp->pool_data = p;
    return 0;
}
void tsan_pool_free(rte_mempool* mp) { delete &pool_of(mp); }
int tsan_pool_enqueue(rte_mempool* mp, void* const* objs, unsigned n) {
    // A buffer shared by reference count (railgated's results) comes back
    // from its last holder, whose drop of the count TSan may not see: the
    // other holders released it as they let go (net::handing_over), and
    // again by their own drop of the count, an atomic TSan sees where it
    // is inlined into railgate (after their last read of the buffer).
    for (unsigned i = 0; i < n; ++i) {
        auto* m = static_cast<rte_mbuf*>(objs[i]);
        __tsan_acquire(m);
        __tsan_acquire(&m->refcnt);
    }
    tsan_pool& p = pool_of(mp);
    const std::lock_guard<std::mutex> hold(p.mu);
    p.free.insert(p.free.end(), objs, objs + n);
    return 0;
}
int tsan_pool_dequeue(rte_mempool* mp, void** objs, unsigned n) {
    tsan_pool& p = pool_of(mp);
    const std::lock_guard<std::mutex> hold(p.mu);
    if (p.free.size() < n) return -ENOBUFS;
    std::copy(p.free.end() - n, p.free.end(), objs);
    p.free.resize(p.free.size() - n);
    return 0;
}
unsigned tsan_pool_count(const rte_mempool* mp) {
    tsan_pool& p = pool_of(mp);
    const std::lock_guard<std::mutex> hold(p.mu);
    return static_cast<unsigned>(p.free.size());
}
constexpr const char* pool_ops_name = "railgate_tsan";
const char* pool_ops() {
    static const bool registered = [] {
        static rte_mempool_ops ops{};
        std::snprintf(ops.name, sizeof ops.name, "%s", pool_ops_name);
        ops.alloc = tsan_pool_alloc;
        ops.free = tsan_pool_free;
        ops.enqueue = tsan_pool_enqueue;
        ops.dequeue = tsan_pool_dequeue;
        ops.get_count = tsan_pool_count;
        return rte_mempool_register_ops(&ops) >= 0;
    }();
    return registered ? pool_ops_name : rte_mbuf_best_mempool_ops();
}
constexpr bool tsan_build = true;
#else
const char* pool_ops() { return rte_mbuf_best_mempool_ops(); }
constexpr bool tsan_build = false;
#endif

} // namespace

rte_mempool* make_pktmbuf_pool(const std::string& name, unsigned n, unsigned data_room, int socket) {
    const unsigned flags = rte_eal_has_hugepages() ? 0 : RTE_MEMPOOL_F_NO_IOVA_CONTIG;
    const unsigned cache = tsan_build ? 0 : n >= 4096 ? 256 : 32;
    const unsigned elt = static_cast<unsigned>(sizeof(rte_mbuf)) + data_room;
    rte_mempool* mp = rte_mempool_create_empty(name.c_str(), n, elt, cache,
                                               sizeof(rte_pktmbuf_pool_private), socket, flags);
    if (!mp) throw std::runtime_error("mempool " + name + ": " + rte_strerror(rte_errno));
    rte_pktmbuf_pool_private priv{};
    priv.mbuf_data_room_size = static_cast<uint16_t>(data_room);
    priv.mbuf_priv_size = 0;
    if (rte_mempool_set_ops_byname(mp, pool_ops(), nullptr) != 0) {
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
