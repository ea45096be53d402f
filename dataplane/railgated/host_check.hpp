// railgated --check's look at the host: can this configuration start here?
// Hugepages, the lcores, each rail's device (a PCI NIC and its driver,
// vfio, a tap's /dev/net/tun, an af_xdp/af_packet interface, an RDMA
// device and its port, a udp rail's address). It reads files only, under
// `root` ("" is the real host; the unit tests give a made-up tree), and
// asks `owner` which interface has an address (udp rails; "": none), and
// changes nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "control/config.hpp"

namespace railgate::host {

struct finding {
    bool problem = false; // true: railgated cannot start as configured; false: a fact worth knowing
    std::string what;
};

using address_owner = std::function<std::string(std::uint32_t ip)>;
std::vector<finding> check(const config::appliance& a, const std::string& root = "", const address_owner& owner = {});

// "3b:00.0" -> "0000:3b:00.0"; devargs after a ',' dropped; "" when it is
// not a PCI address.
std::string pci_address(const std::string& devargs);

// "0,2-4" -> {0,2,3,4}; false on a malformed list.
bool parse_cpu_list(const std::string& s, std::vector<unsigned>& out);

} // namespace railgate::host
