#include "dataplane/verbs/rdma.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hwloc.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <stdexcept>

#include "dataplane/engine/hwloc_cpus.hpp"
#include "dataplane/proto/ipv4.hpp"

namespace railgate::verbs {

ibv_mtu mtu_enum(unsigned bytes) noexcept {
    switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    case 4096: return IBV_MTU_4096;
    default: return static_cast<ibv_mtu>(0);
    }
}

unsigned mtu_bytes(ibv_mtu m) noexcept {
    const int v = static_cast<int>(m);
    return v >= 1 && v <= 5 ? 128u << v : 0;
}

namespace {
// One topology for the process's NUMA bindings, loaded on first use.
hwloc_topology_t topology() {
    static hwloc_topology_t t = [] {
        hwloc_topology_t x;
        engine::init_cpu_topology(&x);
        hwloc_topology_load(x);
        return x;
    }();
    return t;
}
} // namespace

region_memory::region_memory(std::size_t n, int numa_node) : bytes(n) {
    if (n == 0) return;
    p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        p = nullptr;
        throw std::runtime_error("cannot map " + std::to_string(n) + " bytes of verbs memory");
    }
    if (numa_node >= 0) {
        hwloc_topology_t t = topology();
        if (hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(t, static_cast<unsigned>(numa_node)))
            hwloc_set_area_membind(t, p, n, node->nodeset, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET);
    }
}

region_memory::~region_memory() {
    if (p) munmap(p, bytes);
}

region_memory& region_memory::operator=(region_memory&& o) noexcept {
    if (this != &o) {
        if (p) munmap(p, bytes);
        p = o.p;
        bytes = o.bytes;
        o.p = nullptr;
    }
    return *this;
}

queue_pair::queue_pair(rdma_cm_id* id, ibv_pd* pd, ibv_comp_channel* channel, const qp_settings& s)
    : id_(id), s_(s) {
    cq_ = ibv_create_cq(id->verbs, static_cast<int>(s.sq_depth + s.rq_depth), nullptr, channel, 0);
    if (!cq_) throw std::runtime_error(std::string("ibv_create_cq: ") + std::strerror(errno));
    ibv_qp_init_attr a{};
    a.send_cq = cq_;
    a.recv_cq = cq_;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = s.sq_depth;
    a.cap.max_recv_wr = s.rq_depth;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.cap.max_inline_data = s.max_inline;
    qp_ = ibv_create_qp(pd, &a);
    if (!qp_ && s.max_inline) { // an HCA without inline sends
        a.cap.max_inline_data = 0;
        qp_ = ibv_create_qp(pd, &a);
    }
    inline_ = qp_ ? a.cap.max_inline_data : 0;
    if (!qp_) {
        const int e = errno;
        ibv_destroy_cq(cq_);
        throw std::runtime_error(std::string("ibv_create_qp: ") + std::strerror(e));
    }
}

queue_pair::~queue_pair() {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    ibv_modify_qp(qp_, &a, IBV_QP_STATE);
    ibv_destroy_qp(qp_);
    ibv_destroy_cq(cq_);
}

std::string queue_pair::move_to(ibv_qp_state to) {
    ibv_qp_attr a{};
    int mask = 0;
    a.qp_state = to;
    if (rdma_init_qp_attr(id_, &a, &mask))
        return std::string("rdma_init_qp_attr: ") + std::strerror(errno);
    if (to == IBV_QPS_INIT) a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    if (to == IBV_QPS_RTR) {
        ibv_port_attr pa{};
        if (ibv_query_port(id_->verbs, id_->port_num, &pa)) return "ibv_query_port failed";
        // The path MTU: rdma_cm's (from the path), capped by the port's
        // active MTU and by the configured one.
        ibv_mtu m = a.path_mtu ? std::min(a.path_mtu, pa.active_mtu) : pa.active_mtu;
        if (s_.path_mtu) m = std::min(m, mtu_enum(s_.path_mtu));
        a.path_mtu = m;
        mtu_used_ = mtu_bytes(m);
        if (a.ah_attr.is_global) {
            if (s_.gid_index >= 0) {
                a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(s_.gid_index);
            } else if (const sockaddr* src = rdma_get_local_addr(id_); src && src->sa_family == AF_INET) {
                const auto ip = ntohl(reinterpret_cast<const sockaddr_in*>(src)->sin_addr.s_addr);
                const int g = find_ipv4_gid(id_->verbs, id_->port_num, ip, s_.prefer_roce_v2);
                if (g >= 0) a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(g);
            }
            if (s_.traffic_class) a.ah_attr.grh.traffic_class = s_.traffic_class;
            gid_used_ = a.ah_attr.grh.sgid_index;
        }
        a.ah_attr.sl = s_.service_level;
        a.min_rnr_timer = s_.min_rnr_timer;
        mask |= IBV_QP_MIN_RNR_TIMER;
    }
    if (to == IBV_QPS_RTS) {
        if (s_.ack_timeout) a.timeout = s_.ack_timeout;
        a.retry_cnt = s_.retry_count;
        a.rnr_retry = s_.rnr_retry;
        mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY;
    }
    if (ibv_modify_qp(qp_, &a, mask))
        return "ibv_modify_qp to " + std::to_string(static_cast<int>(to)) + ": " + std::strerror(errno);
    if (to == IBV_QPS_RTS) {
        ibv_qp_attr q{};
        ibv_qp_init_attr qi{};
        if (ibv_query_qp(qp_, &q, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MIN_RNR_TIMER, &qi))
            return std::string("ibv_query_qp: ") + std::strerror(errno);
        timers_ = {q.timeout, q.retry_cnt, q.rnr_retry, q.min_rnr_timer};
    }
    return "";
}

double ack_timeout_us(unsigned n) noexcept { return n && n < 32 ? 4.096 * static_cast<double>(1ull << n) : 0; }

std::uint8_t ack_timeout_within(std::chrono::microseconds budget) noexcept {
    std::uint8_t n = 1;
    while (n < 31 && ack_timeout_us(n + 1u) <= static_cast<double>(budget.count())) ++n;
    return n;
}

std::uint8_t default_ack_timeout(std::chrono::microseconds silence, unsigned retry_count) noexcept {
    return ack_timeout_within(silence / (std::min(retry_count, 7u) + 1));
}

std::vector<std::chrono::milliseconds> connect_attempts(std::chrono::milliseconds total,
                                                        std::chrono::milliseconds first) {
    using ms = std::chrono::milliseconds;
    total = std::max(total, ms(0));
    if (first <= ms(0) || first >= total) return {total};
    std::vector<ms> out;
    ms left = total, next = first;
    while (left > ms(0)) {
        ms w = std::min(next, left);
        if (left - w < first / 2) w = left; // the rest, too short for an attempt of its own
        out.push_back(w);
        left -= w;
        next = w * 2;
    }
    return out;
}

double rnr_timer_us(unsigned n) noexcept {
    // 0.01 ms steps doubling every other step from 1; 0 is the longest.
    static constexpr unsigned us[32] = {655360, 10,    20,    30,    40,    60,     80,     120,
                                        160,    240,   320,   480,   640,   960,    1280,   1920,
                                        2560,   3840,  5120,  7680,  10240, 15360,  20480,  30720,
                                        40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};
    return n < 32 ? us[n] : 0;
}

namespace {
std::string span_text(double us) {
    char b[32];
    if (us >= 1e6) std::snprintf(b, sizeof b, "%.2f s", us / 1e6);
    else std::snprintf(b, sizeof b, "%.3g ms", us / 1e3);
    return b;
}
} // namespace

std::string describe(const qp_timers& t) {
    return "ack timeout " + std::to_string(t.ack_timeout) + " (" +
           (t.ack_timeout ? span_text(ack_timeout_us(t.ack_timeout)) : std::string("none")) + "), retry " +
           std::to_string(t.retry_count) + ", rnr retry " + std::to_string(t.rnr_retry) + ", min rnr timer " +
           std::to_string(t.min_rnr_timer) + " (" + span_text(rnr_timer_us(t.min_rnr_timer)) + ")";
}

std::string describe_timers(const qp_settings& s) {
    std::string t = describe(qp_timers{s.ack_timeout, s.retry_count, s.rnr_retry, s.min_rnr_timer});
    if (!s.ack_timeout) t.replace(0, t.find(')') + 1, "ack timeout rdma_cm's");
    return t;
}

namespace {
// Environment variable `name` as an integer lo..hi into n: "" (n unchanged
// when it is not set) or why not, naming it.
std::string env_uint(const char* name, unsigned lo, unsigned hi, unsigned long& n) {
    const char* e = std::getenv(name);
    if (!e) return "";
    char* end = nullptr;
    errno = 0;
    const unsigned long v = std::strtoul(e, &end, 10);
    if (!*e || *e == '-' || *end || errno || v < lo || v > hi)
        return std::string(name) + "='" + e + "': must be an integer " + std::to_string(lo) + ".." + std::to_string(hi);
    n = v;
    return "";
}
} // namespace

std::string settings_from_env(qp_settings& s) {
    struct var {
        const char* name;
        unsigned lo, hi;
        std::uint8_t qp_settings::*field;
    };
    static constexpr var vars[] = {{"RAILGATE_IB_TIMEOUT", 1, 31, &qp_settings::ack_timeout},
                                   {"RAILGATE_IB_RETRY_CNT", 0, 7, &qp_settings::retry_count},
                                   {"RAILGATE_IB_RNR_RETRY", 0, 7, &qp_settings::rnr_retry},
                                   {"RAILGATE_IB_MIN_RNR_TIMER", 0, 31, &qp_settings::min_rnr_timer}};
    qp_settings out = s;
    for (const var& v : vars) {
        unsigned long n = out.*v.field;
        if (std::string e = env_uint(v.name, v.lo, v.hi, n); !e.empty()) return e;
        out.*v.field = static_cast<std::uint8_t>(n);
    }
    // A GID index given (a tool's --gid-index, the C API's gid_index) wins.
    unsigned long g = static_cast<unsigned long>(out.gid_index < 0 ? -1 : out.gid_index);
    if (std::string e = env_uint("RAILGATE_IB_GID_INDEX", 0, 255, g); !e.empty()) return e;
    if (out.gid_index < 0 && g <= 255) out.gid_index = static_cast<int>(g);
    s = out;
    return "";
}

std::size_t encode_cm_private(const cm_hello& h, std::uint8_t* o) noexcept {
    const std::uint8_t b[cm_private_bytes] = {'R', 'G', 'V', '1', 1, static_cast<std::uint8_t>(mtu_enum(h.path_mtu)),
                                              h.ll ? cm_cap_ll : std::uint8_t{0}, 0};
    std::memcpy(o, b, cm_private_bytes);
    if (!h.ll) return cm_private_bytes;
    for (unsigned i = 0; i < 8; ++i) o[8 + i] = static_cast<std::uint8_t>(h.ll_addr >> (56 - 8 * i));
    for (unsigned i = 0; i < 4; ++i) o[16 + i] = static_cast<std::uint8_t>(h.ll_rkey >> (24 - 8 * i));
    return cm_private_ll_bytes;
}

cm_hello decode_cm_private(const void* data, std::size_t len) noexcept {
    cm_hello h;
    if (!data || len < cm_private_bytes) return h;
    const auto* b = static_cast<const std::uint8_t*>(data);
    if (std::memcmp(b, "RGV1", 4) != 0 || b[4] != 1) return h;
    h.path_mtu = mtu_bytes(static_cast<ibv_mtu>(b[5]));
    if ((b[6] & cm_cap_ll) && len >= cm_private_ll_bytes) {
        h.ll = true;
        for (unsigned i = 0; i < 8; ++i) h.ll_addr = h.ll_addr << 8 | b[8 + i];
        for (unsigned i = 0; i < 4; ++i) h.ll_rkey = h.ll_rkey << 8 | b[16 + i];
    }
    return h;
}

void eager_rings::open(ibv_pd* pd, int numa_node, cm_hello& offer) {
    in = region_memory(ll::ring_bytes, numa_node);
    out = region_memory(ll::ring_bytes, numa_node);
    std::memset(in.p, 0, ll::ring_bytes); // flag 0: no lap's (and faulted in where bound)
    in_mr.reset(ibv_reg_mr(pd, in.p, ll::ring_bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
    out_mr.reset(ibv_reg_mr(pd, out.p, ll::ring_bytes, local_write));
    if (!in_mr || !out_mr) {
        const int e = errno;
        close();
        throw std::runtime_error(std::string("ibv_reg_mr (eager rings): ") + std::strerror(e));
    }
    offer.ll = true;
    offer.ll_addr = reinterpret_cast<std::uintptr_t>(in.p);
    offer.ll_rkey = in_mr->rkey;
}

unsigned port_path_mtu(rdma_cm_id* id, unsigned configured) noexcept {
    ibv_port_attr pa{};
    if (ibv_query_port(id->verbs, id->port_num, &pa)) return configured;
    const unsigned active = mtu_bytes(pa.active_mtu);
    return configured ? std::min(configured, active) : active;
}

namespace {
// An IPv4-mapped GID's address (::ffff:a.b.c.d, host order).
bool ipv4_of(const ibv_gid& g, std::uint32_t& ip) noexcept {
    const std::uint8_t* r = g.raw;
    for (int k = 0; k < 10; ++k)
        if (r[k]) return false;
    if (r[10] != 0xff || r[11] != 0xff) return false;
    ip = std::uint32_t{r[12]} << 24 | std::uint32_t{r[13]} << 16 | std::uint32_t{r[14]} << 8 | r[15];
    return true;
}
} // namespace

int find_ipv4_gid(ibv_context* ctx, unsigned port, std::uint32_t ip, bool v2) noexcept {
    ibv_port_attr pa{};
    if (ibv_query_port(ctx, static_cast<std::uint8_t>(port), &pa)) return -1;
    const std::uint32_t want = v2 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
    for (int i = 0; i < pa.gid_tbl_len; ++i) {
        ibv_gid_entry e{};
        if (ibv_query_gid_ex(ctx, port, static_cast<std::uint32_t>(i), &e, 0) || e.gid_type != want) continue;
        if (std::uint32_t has = 0; ipv4_of(e.gid, has) && has == ip) return i;
    }
    return -1;
}

std::string check_gid(ibv_context* ctx, unsigned port, int index, std::uint32_t ip, std::string* what) {
    const std::string where = std::string(ibv_get_device_name(ctx->device)) + " port " + std::to_string(port);
    ibv_port_attr pa{};
    if (ibv_query_port(ctx, static_cast<std::uint8_t>(port), &pa))
        return where + ": ibv_query_port: " + std::strerror(errno);
    if (index < 0 || index >= pa.gid_tbl_len)
        return "GID index " + std::to_string(index) + " is beyond the GID table of " + where + " (" +
               std::to_string(pa.gid_tbl_len) + " entries)";
    ibv_gid_entry e{};
    static const ibv_gid zero{};
    if (ibv_query_gid_ex(ctx, port, static_cast<std::uint32_t>(index), &e, 0) ||
        std::memcmp(&e.gid, &zero, sizeof zero) == 0)
        return "GID index " + std::to_string(index) + " of " + where + " is empty (railctl gid list)";
    char text[INET6_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET6, e.gid.raw, text, sizeof text);
    const char* type = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2"
                       : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? "RoCE v1"
                                                            : "IB";
    if (what) *what = std::string(text) + ", " + type;
    if (std::uint32_t has = 0; pa.link_layer != IBV_LINK_LAYER_ETHERNET || (ipv4_of(e.gid, has) && has == ip)) return "";
    const std::string w = net::format_ipv4(ip);
    std::string own;
    for (const bool v2 : {true, false})
        if (const int g = find_ipv4_gid(ctx, port, ip, v2); g >= 0)
            own += (own.empty() ? "" : ", ") + std::to_string(g) + (v2 ? " (RoCE v2)" : " (RoCE v1)");
    return "GID index " + std::to_string(index) + " of " + where + " is " + text + " (" + type + "), not a GID of " + w +
           ", the address the connections are made at: on RoCE a QP's source GID is the address its packets leave "
           "from, and the peer's QP drops what comes from another (" + w + "'s GIDs: " + (own.empty() ? "none" : own) +
           "; railctl gid list)";
}

std::string bind_this_thread(int cpu, int numa_node) {
    hwloc_topology_t t = topology();
    if (cpu >= 0) {
        hwloc_bitmap_t set = hwloc_bitmap_alloc();
        hwloc_bitmap_only(set, static_cast<unsigned>(cpu));
        const int rc = hwloc_set_cpubind(t, set, HWLOC_CPUBIND_THREAD);
        hwloc_bitmap_free(set);
        return rc == 0 ? "cpu " + std::to_string(cpu) : "cpu " + std::to_string(cpu) + " (binding failed)";
    }
    if (numa_node >= 0)
        if (hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(t, static_cast<unsigned>(numa_node))) {
            char buf[128];
            hwloc_bitmap_list_snprintf(buf, sizeof buf, node->cpuset);
            const int rc = hwloc_set_cpubind(t, node->cpuset, HWLOC_CPUBIND_THREAD);
            return "node " + std::to_string(numa_node) + " cpus " + buf + (rc ? " (binding failed)" : "");
        }
    return "unpinned";
}

int hca_numa_node(ibv_context* ctx) {
    const std::string path = std::string("/sys/class/infiniband/") + ibv_get_device_name(ctx->device) +
                             "/device/numa_node";
    int n = -1;
    if (std::FILE* f = std::fopen(path.c_str(), "r")) {
        if (std::fscanf(f, "%d", &n) != 1) n = -1;
        std::fclose(f);
    }
    return n;
}

bool software_device(ibv_context* ctx) {
    const std::string path = std::string("/sys/class/infiniband/") + ibv_get_device_name(ctx->device) + "/device";
    return access(path.c_str(), F_OK) != 0;
}

rdma_cm_event* next_event(rdma_event_channel* ch, std::chrono::milliseconds timeout) noexcept {
    pollfd p{ch->fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return nullptr;
    rdma_cm_event* e = nullptr;
    return rdma_get_cm_event(ch, &e) == 0 ? e : nullptr;
}

bool set_nonblocking(int fd) noexcept {
    const int fl = fcntl(fd, F_GETFL);
    return fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
}

std::string describe(const ibv_wc& wc) {
    char b[160];
    std::snprintf(b, sizeof b, "%s (opcode %d, vendor error 0x%x, wr_id 0x%llx)", ibv_wc_status_str(wc.status),
                  static_cast<int>(wc.opcode), wc.vendor_err, static_cast<unsigned long long>(wc.wr_id));
    return b;
}

} // namespace railgate::verbs
