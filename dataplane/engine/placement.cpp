#include "dataplane/engine/placement.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "dataplane/engine/hwloc_cpus.hpp"

namespace railgate::engine {

std::string place(const std::vector<cpu_slot>& cpus, const std::vector<rail_need>& rails,
                  std::vector<rail_place>& out) {
    out.clear();
    if (cpus.empty()) return "no CPU to serve rails";
    std::map<unsigned, unsigned> load;
    for (const cpu_slot& c : cpus) load[c.id] = 0;
    auto node_of = [&](unsigned id) {
        for (const cpu_slot& c : cpus)
            if (c.id == id) return c.node;
        return -2;
    };
    for (const rail_need& r : rails) {
        rail_place p;
        if (r.override_cpu >= 0) {
            const auto want = static_cast<unsigned>(r.override_cpu);
            if (node_of(want) == -2) return "rail " + r.name + ": CPU " + std::to_string(want) + " is not a candidate";
            p.cpu = want;
            p.node = node_of(want);
            if (r.nic_node >= 0 && p.node >= 0 && p.node != r.nic_node)
                p.warning = "rail " + r.name + ": its NIC is on NUMA node " + std::to_string(r.nic_node) +
                            " but the config puts it on CPU " + std::to_string(want) + " of node " +
                            std::to_string(p.node) + " (cross-node: every packet crosses the interconnect)";
        } else {
            const cpu_slot* best = nullptr;
            for (const cpu_slot& c : cpus)
                if ((r.nic_node < 0 || c.node == r.nic_node) && (!best || load[c.id] < load[best->id])) best = &c;
            if (!best)
                return "rail " + r.name + ": its NIC is on NUMA node " + std::to_string(r.nic_node) +
                       ", which has no CPU to serve it (give that node a worker lcore, or set the rail's lcore "
                       "to serve it across nodes)";
            p.cpu = best->id;
            p.node = best->node;
        }
        ++load[p.cpu];
        out.push_back(p);
    }
    return "";
}

topology topology::load(const std::string& synthetic, const std::string& xml_file) {
    hwloc_topology_t t;
    if (init_cpu_topology(&t)) throw std::runtime_error("hwloc_topology_init failed");
    topology out;
    out.source = "this machine";
    int rc = 0;
    if (!synthetic.empty()) {
        rc = hwloc_topology_set_synthetic(t, synthetic.c_str());
        out.source = "synthetic " + synthetic;
    } else if (!xml_file.empty()) {
        rc = hwloc_topology_set_xml(t, xml_file.c_str());
        out.source = "xml " + xml_file;
    }
    if (rc || hwloc_topology_load(t)) {
        hwloc_topology_destroy(t);
        throw std::runtime_error("hwloc cannot load the topology (" + out.source + ")");
    }
    const int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < n; ++i) {
        hwloc_obj_t o = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
        node nd;
        nd.os_index = static_cast<int>(o->os_index);
        unsigned cpu;
        hwloc_bitmap_foreach_begin(cpu, o->cpuset) nd.cpus.push_back(cpu);
        hwloc_bitmap_foreach_end();
        out.nodes.push_back(std::move(nd));
    }
    hwloc_topology_destroy(t);
    return out;
}

std::vector<cpu_slot> topology::slots() const {
    std::vector<cpu_slot> v;
    for (const node& n : nodes)
        for (unsigned c : n.cpus) v.push_back({c, n.os_index});
    std::sort(v.begin(), v.end(), [](const cpu_slot& a, const cpu_slot& b) { return a.id < b.id; });
    return v;
}

int topology::node_of(unsigned cpu) const noexcept {
    for (const node& n : nodes)
        if (std::find(n.cpus.begin(), n.cpus.end(), cpu) != n.cpus.end()) return n.os_index;
    return -1;
}

} // namespace railgate::engine
