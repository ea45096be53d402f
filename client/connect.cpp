#include "client/railgate/connect.hpp"

#include <stdexcept>

#include <rte_ethdev.h>

#include "client/railgate/dpdk_transport.hpp"
#include "client/railgate/udp_transport.hpp"
#include "client/railgate/verbs_transport.hpp"
#include "dataplane/net/eal.hpp"
#include "dataplane/proto/ipv4.hpp"

namespace railgate::client {

bool parse_dpdk_rail(const std::string& s, std::pair<std::string, std::uint32_t>& out) {
    const auto at = s.rfind('@');
    std::uint32_t ip = 0;
    if (at == std::string::npos || at == 0 || !net::parse_ipv4(s.substr(at + 1), ip)) return false;
    out = {s.substr(0, at), ip};
    return true;
}

connection::connection(const connect_options& o) {
    if (o.transport == "udp") {
        t_ = make_udp_transport(o.server_ip, o.port, o.tos);
    } else if (o.transport == "verbs") {
        verbs_options vo;
        vo.qp.gid_index = o.gid_index;
        if (o.peer_timeout.count() > 0) vo.peer_timeout = o.peer_timeout;
        if (o.connect_timeout.count() > 0) vo.connect_timeout = o.connect_timeout;
        vo.on_connect_retry = o.on_connect_retry;
        t_ = std::make_unique<verbs_transport>(o.server_ip, o.port, vo);
    } else if (o.transport == "dpdk") {
        if (o.dpdk_rails.empty()) throw std::runtime_error("the dpdk transport needs a device per rail (DEVARGS@IP)");
        // Its own EAL: no shared config (several workers run side by side),
        // no hugepages, one lcore; the devices as vdevs or PCI addresses.
        std::vector<std::string> args{"railgate-worker", "--no-huge", "--no-pci", "--no-shconf", "--no-telemetry",
                                      "-l", "0", "-m", "256", "--log-level", "lib.eal:error",
                                      "--log-level", "pmd.net.af_xdp:error"};
        bool xdp = false;
        for (const auto& [dev, ip] : o.dpdk_rails) {
            args.push_back(dev.rfind("net_", 0) == 0 ? "--vdev" : "-a");
            args.push_back(dev);
            xdp |= dev.rfind("net_af_xdp", 0) == 0;
        }
        eal_ = std::make_unique<net::eal>(args);
        // af_xdp shares the pool with the kernel as its UMEM: a buffer may
        // not cross a page (so MTU <= 1500 there); others get jumbo room.
        pool_ = net::make_pktmbuf_pool("railgate_worker", 8192, RTE_PKTMBUF_HEADROOM + (xdp ? 2048 : 10240),
                                       SOCKET_ID_ANY);
        std::vector<dpdk_port> ports;
        for (const auto& [dev, ip] : o.dpdk_rails) {
            std::uint16_t port = 0;
            const std::string name = dev.substr(0, dev.find(','));
            if (rte_eth_dev_get_port_by_name(name.c_str(), &port) != 0)
                throw std::runtime_error("no DPDK port " + name);
            ports.push_back({port, ip, o.tos});
        }
        t_ = make_dpdk_transport(ports, o.server_ip, o.port, pool_);
    } else {
        throw std::runtime_error("transport '" + o.transport + "': udp, dpdk or verbs");
    }
}

connection::~connection() {
    t_.reset();
    eal_.reset();
}

} // namespace railgate::client
