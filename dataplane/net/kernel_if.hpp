// Kernel network interfaces railgated configures beside its ports: a tap's
// host side, an af_packet interface, the veth pairs it makes. Each returns
// "" or what failed, with the kernel's reason.
#pragma once

#include <cstdint>
#include <string>

namespace railgate::net {

std::string set_kernel_mtu(const std::string& ifname, unsigned mtu) noexcept;
// The interface's MTU; 0 if it cannot be read.
unsigned kernel_mtu(const std::string& ifname) noexcept;
std::string set_kernel_up(const std::string& ifname) noexcept;
// Gives the interface an address (host order) and brings it up.
std::string set_kernel_address(const std::string& ifname, std::uint32_t ip, unsigned prefix);
// The kernel's senders on it finish their checksums themselves (off) or
// leave them to the device (on): ethtool's tx-checksumming.
std::string set_kernel_tx_checksum(const std::string& ifname, bool on) noexcept;

// The interface that has the IPv4 address (host order), or "".
std::string interface_with(std::uint32_t ip);

// A udp rail's address: put on `ifname` as /32 (and the interface brought
// up) unless an interface has it already; removed with the object if it
// was put there. Throws std::runtime_error with the kernel's reason.
class local_address {
public:
    local_address(std::uint32_t ip, const std::string& ifname);
    ~local_address();
    local_address(const local_address&) = delete;
    local_address& operator=(const local_address&) = delete;
    bool added() const noexcept { return added_; }

private:
    std::uint32_t ip_;
    unsigned ifindex_ = 0;
    bool added_ = false;
};

} // namespace railgate::net
