// A veth pair railgated makes for a rail (`veth_peer` in the config): the
// port's end for an af_packet or af_xdp PMD, the peer for the kernel's
// workers on this host, which give it the rail's host_ip. The peer
// computes its UDP checksums itself (railgated drops datagrams whose
// checksum a NIC was meant to finish). Made before the EAL probes the
// port; deleted with the object (the kernel deletes both ends). A pair of
// these names left by a railgated that was killed is taken over.
#pragma once

#include <string>

namespace railgate::net {

class veth_pair {
public:
    // Throws std::runtime_error naming the step and the kernel's reason.
    veth_pair(std::string port_end, std::string peer, unsigned mtu);
    ~veth_pair();
    veth_pair(veth_pair&& o) noexcept : port_end_(std::move(o.port_end_)), peer_(std::move(o.peer_)) { o.port_end_.clear(); }
    veth_pair(const veth_pair&) = delete;
    veth_pair& operator=(const veth_pair&) = delete;
    veth_pair& operator=(veth_pair&&) = delete;

    const std::string& port_end() const noexcept { return port_end_; }
    const std::string& peer() const noexcept { return peer_; }
    bool taken_over() const noexcept { return taken_over_; }

private:
    void remove() noexcept;
    std::string port_end_, peer_;
    bool taken_over_ = false;
};

} // namespace railgate::net
