// Where each rail's poller runs, and the machine it runs on.
//
// Rule: a rail is served by the least-loaded candidate CPU (lcore) on its
// NIC's NUMA node. An explicit override wins, with a warning when it crosses
// nodes; a NIC whose node has no candidate CPU is an error, never a silent
// cross-node placement. A NIC of unknown node (-1: virtual, single-node)
// takes the least-loaded CPU anywhere. Pure: testable on any topology.
#pragma once

#include <string>
#include <vector>

namespace railgate::engine {

struct cpu_slot {
    unsigned id = 0; // lcore id (DPDK) or OS CPU
    int node = -1;
};

struct rail_need {
    std::string name;
    int nic_node = -1;
    int override_cpu = -1;
};

struct rail_place {
    unsigned cpu = 0;
    int node = -1;
    std::string warning; // non-empty: placed across nodes by override
};

// Fills `out` (one per rail, in order); returns "" or the first rail that
// cannot be placed, with the reason.
std::string place(const std::vector<cpu_slot>& cpus, const std::vector<rail_need>& rails,
                  std::vector<rail_place>& out);

// The machine's NUMA nodes and their CPUs, from hwloc: the real one, or a
// synthetic description ("package:2 numa:1 core:8 pu:1", see hwloc's
// HWLOC_SYNTHETIC) or an XML export, for tests and what-if planning.
struct topology {
    struct node {
        int os_index = 0;
        std::vector<unsigned> cpus;
    };
    std::vector<node> nodes;
    std::string source; // "this machine", "synthetic ...", "xml FILE"

    // Throws std::runtime_error when hwloc cannot load it.
    static topology load(const std::string& synthetic = "", const std::string& xml_file = "");
    // Every CPU as a placement candidate.
    std::vector<cpu_slot> slots() const;
    int node_of(unsigned cpu) const noexcept;
};

} // namespace railgate::engine
