// railgated's side of the XDP steering program (railgate_xdp.c): finding
// the object file, configuring the program the af_xdp PMD attached, reading
// its counters, and removing a program left behind by a killed railgated.
// Also loads the object directly for BPF_PROG_TEST_RUN (tests, benchmark).
//
// Needs CAP_BPF/CAP_NET_ADMIN (root), as af_xdp itself does.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "dataplane/bpf/xdp_abi.h"

struct bpf_object;

namespace railgate::xdp {

using counters = std::array<std::uint64_t, RG_XDP_REASONS>;

std::string_view reason_name(unsigned reason) noexcept;

// $RAILGATE_XDP_OBJ, else the object meson built or installed; empty when
// none exists.
std::string default_object_path();

// The program's maps, by file descriptor; closes them.
class maps {
public:
    maps() = default;
    maps(int cfg, int stats, int xsk) : cfg_(cfg), stats_(stats), xsk_(xsk) {}
    maps(maps&&) noexcept;
    maps& operator=(maps&&) noexcept;
    ~maps();

    bool complete() const noexcept { return cfg_ >= 0 && stats_ >= 0 && xsk_ >= 0; }
    // addr in host order; owner 0 means this process. Throws
    // std::runtime_error on a failed update.
    void configure(std::uint32_t addr, std::uint16_t udp_port, std::uint8_t version, bool enabled = true,
                   std::uint32_t owner = 0);
    rg_xdp_config config() const;
    // Summed over CPUs.
    counters read() const;
    int xsk_fd() const noexcept { return xsk_; }

private:
    int cfg_ = -1, stats_ = -1, xsk_ = -1;
};

// The program attached to an interface by the af_xdp PMD.
class attached {
public:
    // The railgate program on ifindex, or nullptr when the interface carries
    // another program (the PMD's default) or none.
    static std::unique_ptr<attached> find(unsigned ifindex);
    std::uint32_t prog_id() const noexcept { return id_; }
    maps& program_maps() noexcept { return maps_; }

private:
    std::uint32_t id_ = 0;
    maps maps_;
};

// Before railgated's af_xdp PMD attaches to ifname: removes a railgate
// program whose railgated is gone (killed, so the PMD could not detach it).
// Throws std::runtime_error when a live railgated owns the interface or a
// foreign XDP program is attached. Returns true if it removed one.
bool clear_stale(const std::string& ifname);

// True while ifindex carries any XDP program.
bool has_program(unsigned ifindex);

// The object loaded straight from its file, unattached: BPF_PROG_TEST_RUN.
class object {
public:
    explicit object(const std::string& path);
    ~object();
    object(const object&) = delete;
    object& operator=(const object&) = delete;

    int prog_fd() const noexcept { return prog_fd_; }
    maps& program_maps() noexcept { return maps_; }

    struct run_result {
        std::uint32_t action;  // XDP_PASS, XDP_DROP, XDP_REDIRECT, ...
        std::uint32_t ns;      // mean duration per repetition
    };
    // Runs the program on one frame as if received on rx_queue of ifindex
    // (0: no device).
    run_result run(const void* frame, std::size_t len, std::uint32_t repeat = 1, unsigned ifindex = 0,
                   std::uint32_t rx_queue = 0) const;

private:
    bpf_object* obj_ = nullptr;
    int prog_fd_ = -1;
    maps maps_;
};

} // namespace railgate::xdp
