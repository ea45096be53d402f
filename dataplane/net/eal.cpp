#include "dataplane/net/eal.hpp"

#include <atomic>
#include <stdexcept>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_mempool.h>

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

std::vector<std::string> embedded_eal_args(const std::string& prog) {
    return {prog, "--no-huge", "--no-pci", "--no-shconf", "--no-telemetry", "-l", "0-1", "-m", "512",
            "--log-level", "lib.eal:error"};
}

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
    return mp;
}

} // namespace railgate::net
