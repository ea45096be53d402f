#include "dataplane/net/topology.hpp"

#include <net/if.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include <hwloc.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>

#include "dataplane/engine/hwloc_cpus.hpp"

namespace railgate::net {
namespace {

struct hwloc_topo {
    hwloc_topology_t t = nullptr;
    hwloc_topo() {
        if (engine::init_cpu_topology(&t) != 0) {
            t = nullptr;
            return;
        }
        if (hwloc_topology_load(t) != 0) {
            hwloc_topology_destroy(t);
            t = nullptr;
        }
    }
    ~hwloc_topo() {
        if (t) hwloc_topology_destroy(t);
    }
};

long read_long(const std::string& path, long otherwise) {
    std::FILE* f = std::fopen(path.c_str(), "r");
    if (!f) return otherwise;
    long v = otherwise;
    if (std::fscanf(f, "%ld", &v) != 1) v = otherwise;
    std::fclose(f);
    return v;
}

// A kernel netdev's NUMA node, as the kernel knows it (its PCI device's
// numa_node): -1 for a virtual device (veth, tap) or where unknown, 0 for a
// device on a machine with one node.
int netdev_numa_node(const char* ifname) {
    const std::string dev = std::string("/sys/class/net/") + ifname + "/device";
    const long node = read_long(dev + "/numa_node", -2);
    if (node >= 0) return static_cast<int>(node);
    if (node == -2) return -1; // no device behind it
    return ::access("/sys/devices/system/node/node1", F_OK) != 0 ? 0 : -1; // one node: it is there
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
