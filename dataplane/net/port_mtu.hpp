// The most MTU a DPDK port carries: its PMD's word, except af_packet's.
// DPDK 22.11 states a fixed 1518-byte frame for af_packet, which carries
// what its ring frames (devargs framesz) and its kernel interface do.
// railgated's rails and the DPDK workers' ports both ask here.
#pragma once

#include <string>

struct rte_eth_dev_info;

namespace railgate::net {

struct port_mtu {
    unsigned pmd = 0;     // the PMD's word: the ethdev is configured within it
    unsigned carried = 0; // what frames on the port carry
    unsigned framesz = 0; // af_packet's ring frames; 0: not af_packet
    std::string ifname;   // the kernel interface behind the port, if any
    // For errors, af_packet's only ("" otherwise): what holds `carried`
    // ("in ring frames of 2048 B"), and what would carry `mtu`.
    std::string frames() const;
    std::string advice(unsigned mtu) const;
};

// A PMD that states no frame limit of its own is taken at `unstated`.
port_mtu port_mtu_of(const rte_eth_dev_info& info, unsigned unstated);

// af_packet ring frames: the kernel writes a received frame 66 B into one
// (the tpacket2 header, aligned) and cuts what does not fit; the PMD drops
// a frame to send over framesz - 32. The most MTU frames of framesz carry,
// and the framesz (a multiple of 16, as TPACKET_ALIGN wants) for an MTU.
constexpr unsigned af_packet_mtu(unsigned framesz) noexcept { return framesz > 80 ? framesz - 80 : 0; }
constexpr unsigned af_packet_framesz_for(unsigned mtu) noexcept { return (mtu + 80 + 15) / 16 * 16; }

} // namespace railgate::net
