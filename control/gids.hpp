// The RDMA GID tables as the kernel shows them in sysfs
// (/sys/class/infiniband/DEV/ports/PORT/gids/N and gid_attrs/), read the way
// show_gids does. The root can be redirected (tests use a fixture tree).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace railgate::control {

struct gid_entry {
    std::string device;
    unsigned port = 0;
    unsigned index = 0;
    std::string gid;    // "fe80:0000:0000:0000:...", as sysfs prints it
    std::string ipv4;   // the address of an IPv4-mapped GID, else ""
    std::string type;   // "RoCE v2", "IB/RoCE v1", ...
    std::string netdev; // the GID's net device, if any
};

// Every non-zero GID of every device and port under `root`
// (default /sys/class/infiniband), sorted by device, port, index.
std::vector<gid_entry> read_gids(const std::string& root = "/sys/class/infiniband");

// "v1"/"v2"/"IB" from a sysfs type string.
std::string gid_version(const std::string& type);

// A sysfs attribute: the first line of the file, "" when it cannot be read.
std::string first_line(const std::string& path);

// An RDMA port's counters as the kernel shows them under
// DEV/ports/PORT/: `hw_counters/` (the driver's own: rxe's
// completer_retry_err, rcvd_seq_err, duplicate_request ...; mlx5's
// local_ack_timeout_err, packet_seq_err, out_of_sequence ...) and
// `counters/` (the IB PMA's: port_xmit_data ..., where the driver has
// them), each sorted by name. `lifespan` (how long a driver caches its
// hw counters) and files that do not read as a number are left out; a
// device or port that is not there gives two empty lists.
struct port_counter {
    std::string name;
    std::uint64_t value = 0;
};
struct port_counters {
    std::vector<port_counter> hw;  // hw_counters/
    std::vector<port_counter> pma; // counters/
};
port_counters read_port_counters(const std::string& device, unsigned port,
                                 const std::string& root = "/sys/class/infiniband");

} // namespace railgate::control
