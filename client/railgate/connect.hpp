// A worker's way to railgated, whatever the transport: the kernel UDP
// sockets, a DPDK EAL with one device per rail, or verbs connections. Used
// by railbench, raillat's remote mode and the C ABI (librailgate).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "client/railgate/transport.hpp"

struct rte_mempool;

namespace railgate::net {
class eal;
}

namespace railgate::client {

struct connect_options {
    std::string transport = "udp";   // udp | dpdk | verbs
    std::uint32_t server_ip = 0;     // railgated's rail 0, host order
    std::uint16_t port = wire::default_udp_port;
    std::uint8_t tos = 0;            // udp: the IPv4 TOS byte (the traffic class)
    // dpdk: per rail, a device (a vdev "net_af_xdp0,iface=eth1" or a PCI
    // address) and this worker's IPv4 address there (host order).
    std::vector<std::pair<std::string, std::uint32_t>> dpdk_rails;
    int gid_index = -1;              // verbs: -1 automatic
    // verbs: the worker's peer timeout, which sets the QPs' ACK timeout
    // (verbs_options::peer_timeout); 0: verbs_options' default, the
    // worker's (1 s).
    std::chrono::milliseconds peer_timeout{0};
    // verbs: how long a rail's connect may take (verbs_options::
    // connect_timeout); 0: verbs_options' default (5 s).
    std::chrono::milliseconds connect_timeout{0};
    // verbs: told each connect attempt that got no answer, before the next
    // (verbs_options::on_connect_retry).
    std::function<void(const std::string&)> on_connect_retry;
};

// Parses "DEVARGS@IP" (net_af_xdp0,iface=eth1@10.0.0.10); false if it is not.
bool parse_dpdk_rail(const std::string& s, std::pair<std::string, std::uint32_t>& out);

// The transport and what it stands on. Members go in reverse: the
// transport stops its ports before the EAL ends.
class connection {
public:
    explicit connection(const connect_options& o);   // throws std::runtime_error with the reason
    ~connection();
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;
    transport& get() noexcept { return *t_; }

private:
    std::unique_ptr<net::eal> eal_;   // dpdk only: this process's EAL (one per process)
    rte_mempool* pool_ = nullptr;
    std::unique_ptr<transport> t_;
};

} // namespace railgate::client
