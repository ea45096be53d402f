#include "dataplane/net/kernel_if.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "dataplane/net/netlink.hpp"

namespace railgate::net {
namespace {

// An AF_INET socket and an ifreq naming one kernel interface, for its ioctls.
struct if_ioctl {
    int fd;
    ifreq ifr{};
    explicit if_ioctl(const std::string& ifname) : fd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
        std::snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname.c_str());
    }
    ~if_ioctl() {
        if (fd >= 0) close(fd);
    }
    if_ioctl(const if_ioctl&) = delete;
    if_ioctl& operator=(const if_ioctl&) = delete;
    bool operator()(unsigned long req) noexcept { return fd >= 0 && ioctl(fd, req, &ifr) == 0; }
};

std::string failed(const std::string& what, const std::string& ifname) {
    return "cannot set " + what + ifname + ": " + std::strerror(errno);
}

} // namespace

std::string set_kernel_mtu(const std::string& ifname, unsigned mtu) noexcept {
    if_ioctl io(ifname);
    io.ifr.ifr_mtu = static_cast<int>(mtu);
    if (io(SIOCSIFMTU)) return {};
    return "cannot set MTU " + std::to_string(mtu) + " on " + ifname + ": " + std::strerror(errno);
}

unsigned kernel_mtu(const std::string& ifname) noexcept {
    if_ioctl io(ifname);
    return io(SIOCGIFMTU) && io.ifr.ifr_mtu > 0 ? static_cast<unsigned>(io.ifr.ifr_mtu) : 0;
}

std::string set_kernel_up(const std::string& ifname) noexcept {
    if_ioctl io(ifname);
    if (!io(SIOCGIFFLAGS)) return failed("flags of ", ifname);
    io.ifr.ifr_flags = static_cast<short>(io.ifr.ifr_flags | IFF_UP);
    if (!io(SIOCSIFFLAGS)) return failed("bringing up ", ifname);
    return {};
}

std::string set_kernel_tx_checksum(const std::string& ifname, bool on) noexcept {
    if_ioctl io(ifname);
    ethtool_value v{};
    v.cmd = ETHTOOL_STXCSUM;
    v.data = on;
    io.ifr.ifr_data = reinterpret_cast<char*>(&v);
    if (io(SIOCETHTOOL)) return {};
    return failed(std::string("tx checksumming ") + (on ? "on" : "off") + " on ", ifname);
}

std::string interface_with(std::uint32_t ip) {
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return {};
    std::string name;
    for (ifaddrs* a = list; a && name.empty(); a = a->ifa_next)
        if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && a->ifa_name &&
            ntohl(reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr) == ip)
            name = a->ifa_name;
    freeifaddrs(list);
    return name;
}

namespace {
int address_request(std::uint16_t type, std::uint16_t flags, unsigned ifindex, std::uint32_t ip, unsigned prefix = 32) {
    ifaddrmsg m{};
    m.ifa_family = AF_INET;
    m.ifa_prefixlen = static_cast<std::uint8_t>(prefix);
    m.ifa_index = ifindex;
    detail::nl_request rq(type, flags, m);
    const std::uint32_t net = htonl(ip);
    rq.attr(IFA_LOCAL, &net, sizeof net);
    rq.attr(IFA_ADDRESS, &net, sizeof net);
    return rq.send();
}
} // namespace

std::string set_kernel_address(const std::string& ifname, std::uint32_t ip, unsigned prefix) {
    const unsigned ifindex = if_nametoindex(ifname.c_str());
    if (!ifindex) return failed("address on ", ifname);
    if (const int e = address_request(RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE, ifindex, ip, prefix); e != 0) {
        errno = e;
        return failed("address on ", ifname);
    }
    return set_kernel_up(ifname);
}

local_address::local_address(std::uint32_t ip, const std::string& ifname) : ip_(ip) {
    if (!interface_with(ip).empty()) return;
    ifindex_ = if_nametoindex(ifname.c_str());
    if (!ifindex_) throw std::runtime_error("no interface " + ifname + " to put the rail's address on");
    if (const int e = address_request(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, ifindex_, ip); e != 0)
        throw std::runtime_error("cannot add the rail's address to " + ifname + ": " + std::strerror(e));
    if (const std::string e = set_kernel_up(ifname); !e.empty()) {
        address_request(RTM_DELADDR, 0, ifindex_, ip);
        throw std::runtime_error(e);
    }
    added_ = true;
}

local_address::~local_address() {
    if (added_) address_request(RTM_DELADDR, 0, ifindex_, ip_);
}

} // namespace railgate::net
