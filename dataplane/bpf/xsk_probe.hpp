// An AF_XDP socket bound (copy mode) to the loopback device of a fresh,
// private network namespace. Put in xsks_map, it makes a railgate packet's
// XDP_REDIRECT under BPF_PROG_TEST_RUN as real as on a rail, without
// touching any interface the host uses. For tests and benchmarks; root only.
// Note: moves the calling thread into the new namespace for good.
#pragma once

#include <cstddef>

struct xsk_umem;
struct xsk_socket;

namespace railgate::xdp {

class xsk_probe {
public:
    // Throws std::runtime_error saying which step failed.
    xsk_probe();
    ~xsk_probe();
    xsk_probe(const xsk_probe&) = delete;
    xsk_probe& operator=(const xsk_probe&) = delete;

    unsigned ifindex() const noexcept { return ifindex_; }
    int fd() const noexcept;
    // Puts the socket in xsks_map at queue 0.
    void bind_to(int xsks_map_fd) const;

private:
    void* area_ = nullptr;
    std::size_t area_len_ = 4096 * 64;
    xsk_umem* umem_ = nullptr;
    xsk_socket* sock_ = nullptr;
    unsigned ifindex_ = 0;
    struct rings;
    rings* rings_ = nullptr;
};

} // namespace railgate::xdp
