// hwloc for CPUs and NUMA nodes only: no I/O discovery. The PCI plugin
// (libpciaccess) is slow to start and leaks what it reads at exit; a NIC's
// NUMA node comes from sysfs instead (net::port_numa_node).
#pragma once

#include <hwloc.h>

namespace railgate::engine {

// hwloc_topology_init() for a topology of CPUs and memory; 0 or -1.
inline int init_cpu_topology(hwloc_topology_t* t) noexcept {
    if (hwloc_topology_init(t) != 0) return -1;
    hwloc_topology_set_io_types_filter(*t, HWLOC_TYPE_FILTER_KEEP_NONE);
    for (const char* c : {"pci", "opencl", "gl"})
        hwloc_topology_set_components(*t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, c);
    return 0;
}

} // namespace railgate::engine
