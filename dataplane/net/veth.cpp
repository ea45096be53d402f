#include "dataplane/net/veth.hpp"

#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "dataplane/log/log.hpp"
#include "dataplane/net/kernel_if.hpp"
#include "dataplane/net/netlink.hpp"

namespace railgate::net {
using detail::nl_request;
namespace {

// Throws what a kernel_if call reports.
void must(const std::string& error) {
    if (!error.empty()) throw std::runtime_error(error);
}

// Whether port_end is a veth whose other end is peer: its iflink is the
// peer's index (both in this namespace).
bool paired(const std::string& port_end, const std::string& peer) {
    const unsigned peer_index = if_nametoindex(peer.c_str());
    if (!if_nametoindex(port_end.c_str()) || !peer_index) return false;
    std::ifstream f("/sys/class/net/" + port_end + "/iflink");
    unsigned iflink = 0;
    return (f >> iflink) && iflink == peer_index;
}

} // namespace

veth_pair::veth_pair(std::string port_end, std::string peer, unsigned mtu)
    : port_end_(std::move(port_end)), peer_(std::move(peer)) {
    const std::string what = "veth " + port_end_ + " / " + peer_;
    nl_request rq(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
    rq.attr(IFLA_IFNAME, port_end_);
    rq.attr(IFLA_MTU, std::uint32_t{mtu});
    const std::size_t info = rq.begin(IFLA_LINKINFO);
    rq.attr(IFLA_INFO_KIND, std::string("veth"));
    const std::size_t data = rq.begin(IFLA_INFO_DATA);
    const std::size_t peer_at = rq.begin(VETH_INFO_PEER);
    ifinfomsg pi{};
    pi.ifi_family = AF_UNSPEC;
    rq.raw(&pi, sizeof pi);
    rq.attr(IFLA_IFNAME, peer_);
    rq.attr(IFLA_MTU, std::uint32_t{mtu});
    rq.end(peer_at);
    rq.end(data);
    rq.end(info);
    if (const int e = rq.send()) {
        if (e != EEXIST) {
            port_end_.clear();
            throw std::runtime_error("cannot make " + what + ": " + std::strerror(e));
        }
        if (!paired(port_end_, peer_)) {
            const std::string taken = if_nametoindex(port_end_.c_str()) ? port_end_ : peer_;
            port_end_.clear();
            throw std::runtime_error("cannot make " + what + ": interface " + taken +
                                     " exists and is not one end of this pair (ip link del " + taken + ")");
        }
        taken_over_ = true; // left by a railgated that did not exit
        must(set_kernel_mtu(port_end_, mtu));
        must(set_kernel_mtu(peer_, mtu));
    }
    try {
        // The host's senders checksum in full: railgated drops a datagram
        // whose checksum a NIC was meant to finish.
        must(set_kernel_tx_checksum(peer_, false));
        must(set_kernel_up(port_end_));
        must(set_kernel_up(peer_));
    } catch (...) {
        remove();
        throw;
    }
}

veth_pair::~veth_pair() { remove(); }

void veth_pair::remove() noexcept {
    if (port_end_.empty()) return;
    nl_request rq(RTM_DELLINK, 0);
    rq.attr(IFLA_IFNAME, port_end_);
    if (const int e = rq.send(); e && e != ENODEV)
        log::warning("veth %s / %s: cannot delete it: %s", port_end_.c_str(), peer_.c_str(), std::strerror(e));
    port_end_.clear();
}

} // namespace railgate::net
