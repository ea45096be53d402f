#include "dataplane/net/port_mtu.hpp"

#include <net/if.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_ethdev.h>
#include <rte_kvargs.h>

namespace railgate::net {

std::string port_mtu::frames() const {
    return framesz ? "in ring frames of " + std::to_string(framesz) + " B" : "";
}

std::string port_mtu::advice(unsigned mtu) const {
    return framesz ? "give its devargs framesz=" + std::to_string(af_packet_framesz_for(mtu)) +
                         " or more, and a blocksz at least as large"
                   : "";
}

port_mtu port_mtu_of(const rte_eth_dev_info& info, unsigned unstated) {
    port_mtu p;
    p.pmd = std::min<unsigned>(info.max_mtu, info.max_rx_pktlen > RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN
                                                 ? info.max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN
                                                 : unstated);
    p.carried = p.pmd;
    char name[IF_NAMESIZE] = {};
    if (info.if_index && if_indextoname(info.if_index, name)) p.ifname = name;
    if (info.driver_name && std::strcmp(info.driver_name, "net_af_packet") == 0) {
        p.framesz = 2048; // the PMD's default
        const rte_devargs* da = info.device ? rte_dev_devargs(info.device) : nullptr;
        if (rte_kvargs* kv = da && da->args ? rte_kvargs_parse(da->args, nullptr) : nullptr) {
            if (const char* v = rte_kvargs_get(kv, "framesz")) p.framesz = static_cast<unsigned>(std::atoi(v));
            rte_kvargs_free(kv);
        }
        p.carried = af_packet_mtu(p.framesz);
    }
    return p;
}

} // namespace railgate::net
