#include "dataplane/net/topology.hpp"

#include <net/if.h>

#include <cstring>
#include <string>

#include <hwloc.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>

namespace railgate::net {
namespace {

struct hwloc_topo {
    hwloc_topology_t t = nullptr;
    hwloc_topo() {
        if (hwloc_topology_init(&t) != 0) {
            t = nullptr;
            return;
        }
        hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
        if (hwloc_topology_load(t) != 0) {
            hwloc_topology_destroy(t);
            t = nullptr;
        }
    }
    ~hwloc_topo() {
        if (t) hwloc_topology_destroy(t);
    }
};

int netdev_numa_node(const char* ifname) {
    hwloc_topo topo;
    if (!topo.t) return -1;
    for (hwloc_obj_t o = hwloc_get_next_osdev(topo.t, nullptr); o; o = hwloc_get_next_osdev(topo.t, o)) {
        if (!o->name || std::strcmp(o->name, ifname) != 0) continue;
        hwloc_obj_t parent = hwloc_get_non_io_ancestor_obj(topo.t, o);
        if (!parent || !parent->nodeset) return -1;
        if (hwloc_get_nbobjs_by_type(topo.t, HWLOC_OBJ_NUMANODE) <= 1) return 0;
        return hwloc_bitmap_first(parent->nodeset);
    }
    return -1;
}

} // namespace

int port_numa_node(std::uint16_t port) {
    const int s = rte_eth_dev_socket_id(port);
    if (s >= 0) return s;
    rte_eth_dev_info info;
    char name[IF_NAMESIZE] = {};
    if (rte_eth_dev_info_get(port, &info) == 0 && info.if_index && if_indextoname(info.if_index, name))
        return netdev_numa_node(name);
    return -1;
}

void print_topology(std::FILE* out) {
    hwloc_topo topo;
    if (!topo.t) {
        std::fprintf(out, "railgated: hwloc topology unavailable\n");
        return;
    }
    const int nodes = hwloc_get_nbobjs_by_type(topo.t, HWLOC_OBJ_NUMANODE);
    const int cores = hwloc_get_nbobjs_by_type(topo.t, HWLOC_OBJ_CORE);
    std::fprintf(out, "railgated: topology: %d NUMA node(s), %d core(s)\n", nodes, cores);
    for (int i = 0; i < nodes; ++i) {
        hwloc_obj_t n = hwloc_get_obj_by_type(topo.t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
        char cpus[256];
        hwloc_bitmap_list_snprintf(cpus, sizeof cpus, n->cpuset);
        std::fprintf(out, "  NUMA %u: cpus %s\n", n->os_index, cpus);
    }
}

} // namespace railgate::net
