#include "dataplane/bpf/xdp_steer.hpp"

#include <net/if.h>
#include <signal.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <sys/stat.h>
#include <vector>

namespace railgate::xdp {
namespace {

std::string err_text(int e) { return std::strerror(e < 0 ? -e : e); }

void close_fd(int& fd) {
    if (fd >= 0) close(fd);
    fd = -1;
}

bool exists(const std::string& p) {
    struct stat st;
    return !p.empty() && stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The maps a loaded program uses, by name, from the kernel's prog info.
maps maps_of_program(int prog_fd) {
    bpf_prog_info info{};
    __u32 len = sizeof info;
    if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0) return {};
    std::vector<__u32> ids(info.nr_map_ids);
    info = bpf_prog_info{};
    info.nr_map_ids = static_cast<__u32>(ids.size());
    info.map_ids = reinterpret_cast<std::uintptr_t>(ids.data());
    len = sizeof info;
    if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0) return {};
    int cfg = -1, stats = -1, xsk = -1;
    for (std::uint32_t i = 0; i < info.nr_map_ids && i < ids.size(); ++i) {
        int fd = bpf_map_get_fd_by_id(ids[i]);
        if (fd < 0) continue;
        bpf_map_info mi{};
        __u32 mlen = sizeof mi;
        int* slot = nullptr;
        if (bpf_obj_get_info_by_fd(fd, &mi, &mlen) == 0) {
            if (!std::strcmp(mi.name, RG_XDP_CFG_MAP)) slot = &cfg;
            else if (!std::strcmp(mi.name, RG_XDP_STATS_MAP)) slot = &stats;
            else if (!std::strcmp(mi.name, RG_XDP_XSK_MAP)) slot = &xsk;
        }
        if (slot && *slot < 0) *slot = fd;
        else close(fd);
    }
    return maps(cfg, stats, xsk);
}

struct attached_info {
    std::uint32_t id = 0;
    std::uint32_t flags = 0; // the mode it was attached in, for detaching
};

attached_info query(unsigned ifindex) {
    bpf_xdp_query_opts q{};
    q.sz = sizeof q;
    attached_info a;
    if (bpf_xdp_query(static_cast<int>(ifindex), 0, &q) != 0) return a;
    switch (q.attach_mode) {
    case XDP_ATTACHED_DRV: a.id = q.drv_prog_id; a.flags = XDP_FLAGS_DRV_MODE; break;
    case XDP_ATTACHED_SKB: a.id = q.skb_prog_id; a.flags = XDP_FLAGS_SKB_MODE; break;
    case XDP_ATTACHED_HW: a.id = q.hw_prog_id; a.flags = XDP_FLAGS_HW_MODE; break;
    case XDP_ATTACHED_MULTI: a.id = q.drv_prog_id ? q.drv_prog_id : q.skb_prog_id; break;
    default: break;
    }
    return a;
}

std::string prog_name(int prog_fd) {
    bpf_prog_info info{};
    __u32 len = sizeof info;
    if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0) return {};
    return info.name;
}

} // namespace

std::string_view reason_name(unsigned reason) noexcept {
    static constexpr std::string_view names[RG_XDP_REASONS] = {
        "redirect",        "pass_unconfigured", "pass_no_xsk",    "pass_arp",        "pass_vlan",
        "pass_other_l3",   "pass_malformed",    "pass_fragment",  "pass_icmp",       "pass_tcp",
        "pass_other_l4",   "pass_other_addr",   "pass_other_port", "drop_short",     "drop_bad_length",
        "drop_bad_version",
    };
    return reason < RG_XDP_REASONS ? names[reason] : std::string_view("?");
}

std::string default_object_path() {
    if (const char* e = std::getenv("RAILGATE_XDP_OBJ"); e && *e) return e;
    for (const char* p : {RAILGATE_XDP_BUILD_PATH, RAILGATE_XDP_INSTALL_PATH})
        if (exists(p)) return p;
    return {};
}

maps::maps(maps&& o) noexcept : cfg_(o.cfg_), stats_(o.stats_), xsk_(o.xsk_) { o.cfg_ = o.stats_ = o.xsk_ = -1; }

maps& maps::operator=(maps&& o) noexcept {
    if (this != &o) {
        this->~maps();
        cfg_ = o.cfg_, stats_ = o.stats_, xsk_ = o.xsk_;
        o.cfg_ = o.stats_ = o.xsk_ = -1;
    }
    return *this;
}

maps::~maps() {
    close_fd(cfg_);
    close_fd(stats_);
    close_fd(xsk_);
}

void maps::configure(std::uint32_t addr, std::uint16_t udp_port, std::uint8_t version, bool enabled,
                     std::uint32_t owner) {
    rg_xdp_config c{};
    c.enabled = enabled ? 1 : 0;
    c.owner_pid = owner ? owner : static_cast<__u32>(getpid());
    c.addr = htonl(addr);
    c.udp_port = htons(udp_port);
    c.version = version;
    const __u32 key = 0;
    if (bpf_map_update_elem(cfg_, &key, &c, BPF_ANY) != 0)
        throw std::runtime_error("xdp: cannot write " RG_XDP_CFG_MAP ": " + err_text(errno));
}

rg_xdp_config maps::config() const {
    rg_xdp_config c{};
    const __u32 key = 0;
    if (bpf_map_lookup_elem(cfg_, &key, &c) != 0) c = rg_xdp_config{};
    return c;
}

counters maps::read() const {
    counters out{};
    const int ncpu = libbpf_num_possible_cpus();
    if (ncpu <= 0) return out;
    std::vector<std::uint64_t> per_cpu(static_cast<std::size_t>(ncpu));
    for (__u32 r = 0; r < RG_XDP_REASONS; ++r)
        if (bpf_map_lookup_elem(stats_, &r, per_cpu.data()) == 0)
            for (std::uint64_t v : per_cpu) out[r] += v;
    return out;
}

std::unique_ptr<attached> attached::find(unsigned ifindex) {
    const attached_info a = query(ifindex);
    if (!a.id) return nullptr;
    const int fd = bpf_prog_get_fd_by_id(a.id);
    if (fd < 0) return nullptr;
    std::unique_ptr<attached> out;
    if (prog_name(fd) == RG_XDP_PROG_NAME) {
        maps m = maps_of_program(fd);
        if (m.complete()) {
            out.reset(new attached);
            out->id_ = a.id;
            out->maps_ = std::move(m);
        }
    }
    close(fd);
    return out;
}

bool has_program(unsigned ifindex) { return query(ifindex).id != 0; }

bool clear_stale(const std::string& ifname) {
    const unsigned ifindex = if_nametoindex(ifname.c_str());
    if (!ifindex) throw std::runtime_error("xdp: no interface " + ifname);
    const attached_info a = query(ifindex);
    if (!a.id) return false;
    const int fd = bpf_prog_get_fd_by_id(a.id);
    if (fd < 0) throw std::runtime_error("xdp: cannot open program " + std::to_string(a.id) + " on " + ifname);
    const std::string name = prog_name(fd);
    const maps m = name == RG_XDP_PROG_NAME ? maps_of_program(fd) : maps();
    close(fd);
    if (name != RG_XDP_PROG_NAME)
        throw std::runtime_error("xdp: " + ifname + " already carries XDP program " + std::to_string(a.id) + " '" +
                                 name + "'; remove it (ip link set dev " + ifname + " xdp off) or use --no-xdp-steer");
    if (!m.complete()) throw std::runtime_error("xdp: program on " + ifname + " lacks railgate's maps");
    const rg_xdp_config c = m.config();
    const pid_t owner = static_cast<pid_t>(c.owner_pid);
    if (owner > 0 && owner != getpid() && (kill(owner, 0) == 0 || errno == EPERM))
        throw std::runtime_error("xdp: " + ifname + " is served by railgated pid " + std::to_string(owner));
    const int rc = bpf_xdp_detach(static_cast<int>(ifindex), a.flags, nullptr);
    if (rc != 0) throw std::runtime_error("xdp: cannot detach stale program from " + ifname + ": " + err_text(rc));
    return true;
}

object::object(const std::string& path) {
    obj_ = bpf_object__open_file(path.c_str(), nullptr);
    if (!obj_ || libbpf_get_error(obj_)) {
        obj_ = nullptr;
        throw std::runtime_error("xdp: cannot open " + path);
    }
    if (const int rc = bpf_object__load(obj_); rc != 0) {
        bpf_object__close(obj_);
        obj_ = nullptr;
        throw std::runtime_error("xdp: cannot load " + path + ": " + err_text(rc));
    }
    bpf_program* prog = bpf_object__find_program_by_name(obj_, RG_XDP_PROG_NAME);
    prog_fd_ = prog ? bpf_program__fd(prog) : -1;
    auto dup_map = [&](const char* name) {
        bpf_map* m = bpf_object__find_map_by_name(obj_, name);
        return m ? dup(bpf_map__fd(m)) : -1;
    };
    maps_ = maps(dup_map(RG_XDP_CFG_MAP), dup_map(RG_XDP_STATS_MAP), dup_map(RG_XDP_XSK_MAP));
    if (prog_fd_ < 0 || !maps_.complete()) {
        bpf_object__close(obj_);
        obj_ = nullptr;
        throw std::runtime_error("xdp: " + path + " is not railgate's XDP program");
    }
}

object::~object() {
    if (obj_) bpf_object__close(obj_);
}

object::run_result object::run(const void* frame, std::size_t len, std::uint32_t repeat, unsigned ifindex,
                               std::uint32_t rx_queue) const {
    xdp_md ctx{};
    ctx.data_end = static_cast<__u32>(len);
    ctx.ingress_ifindex = ifindex;
    ctx.rx_queue_index = rx_queue;
    std::vector<unsigned char> out(len + 256);
    bpf_test_run_opts o{};
    o.sz = sizeof o;
    o.data_in = frame;
    o.data_size_in = static_cast<__u32>(len);
    o.data_out = out.data();
    o.data_size_out = static_cast<__u32>(out.size());
    o.ctx_in = &ctx;
    o.ctx_size_in = sizeof ctx;
    o.repeat = static_cast<int>(repeat);
    if (const int rc = bpf_prog_test_run_opts(prog_fd_, &o); rc != 0)
        throw std::runtime_error("xdp: BPF_PROG_TEST_RUN: " + err_text(rc));
    return {o.retval, o.duration};
}

} // namespace railgate::xdp
