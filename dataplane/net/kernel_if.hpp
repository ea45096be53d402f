// Kernel network interfaces railgated configures beside its ports: a tap's
// host side, an af_packet interface, the veth pairs it makes. Each returns
// "" or what failed, with the kernel's reason.
#pragma once

#include <cstdint>
#include <string>

namespace railgate::net {

std::string set_kernel_mtu(const std::string& ifname, unsigned mtu) noexcept;
std::string set_kernel_up(const std::string& ifname) noexcept;
// Gives the interface an address (host order) and brings it up.
std::string set_kernel_address(const std::string& ifname, std::uint32_t ip, unsigned prefix);
// The kernel's senders on it finish their checksums themselves (off) or
// leave them to the device (on): ethtool's tx-checksumming.
std::string set_kernel_tx_checksum(const std::string& ifname, bool on) noexcept;

} // namespace railgate::net
