#include "dataplane/bpf/xsk_probe.hpp"

#include <net/if.h>
#include <sched.h>
#include <sys/mman.h>

#include <bpf/bpf.h>
#include <linux/if_xdp.h>
#include <xdp/xsk.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace railgate::xdp {

struct xsk_probe::rings {
    xsk_ring_prod fill{}, tx{};
    xsk_ring_cons comp{}, rx{};
};

xsk_probe::xsk_probe() : rings_(new rings) {
    auto fail = [this](const std::string& what, int e) {
        this->~xsk_probe();
        throw std::runtime_error("xsk_probe: " + what + ": " + std::strerror(e < 0 ? -e : e));
    };
    if (unshare(CLONE_NEWNET) != 0) fail("unshare(CLONE_NEWNET)", errno);
    ifindex_ = if_nametoindex("lo");
    area_ = mmap(nullptr, area_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area_ == MAP_FAILED) {
        area_ = nullptr;
        fail("mmap", errno);
    }
    if (const int rc = xsk_umem__create(&umem_, area_, area_len_, &rings_->fill, &rings_->comp, nullptr))
        fail("xsk_umem__create", rc);
    xsk_socket_config cfg{};
    cfg.rx_size = XSK_RING_CONS__DEFAULT_NUM_DESCS;
    cfg.tx_size = XSK_RING_PROD__DEFAULT_NUM_DESCS;
    cfg.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;
    cfg.bind_flags = XDP_COPY;
    if (const int rc = xsk_socket__create(&sock_, "lo", 0, umem_, &rings_->rx, &rings_->tx, &cfg))
        fail("xsk_socket__create on lo", rc);
}

xsk_probe::~xsk_probe() {
    if (sock_) xsk_socket__delete(sock_);
    if (umem_) xsk_umem__delete(umem_);
    if (area_) munmap(area_, area_len_);
    delete rings_;
    sock_ = nullptr, umem_ = nullptr, area_ = nullptr, rings_ = nullptr;
}

int xsk_probe::fd() const noexcept { return xsk_socket__fd(sock_); }

void xsk_probe::bind_to(int xsks_map_fd) const {
    const __u32 q = 0;
    const int f = fd();
    if (bpf_map_update_elem(xsks_map_fd, &q, &f, BPF_ANY) != 0)
        throw std::runtime_error(std::string("xsk_probe: xsks_map update: ") + std::strerror(errno));
}

} // namespace railgate::xdp
