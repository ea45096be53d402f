#include "dataplane/railgated/host_check.hpp"

#include "control/gids.hpp"
#include "dataplane/agg/footprint.hpp"
#include "dataplane/proto/ipv4.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace railgate::host {
namespace fs = std::filesystem;
namespace {

std::string read_line(const fs::path& p) { return control::first_line(p.string()); }

bool present(const fs::path& p) {
    std::error_code ec;
    return fs::exists(p, ec);
}

class checker {
public:
    checker(const config::appliance& a, const std::string& root, const address_owner& owner)
        : a_(a), root_(root), owner_(owner) {}

    std::vector<finding> run() {
        const bool dpdk = std::any_of(a_.rails.begin(), a_.rails.end(),
                                      [](const config::rail& r) { return r.transport != config::transport::verbs; });
        if (dpdk) {
            memory();
            lcores();
            tables();
        }
        for (const config::rail& r : a_.rails) {
            if (r.transport == config::transport::verbs) verbs_rail(r);
            else if (r.transport == config::transport::udp) udp_rail(r);
            else if (config::is_pci(r)) pci_rail(r);
            else vdev_rail(r);
        }
        return std::move(out_);
    }

private:
    fs::path at(const std::string& p) const { return fs::path(root_ + p); }
    void problem(std::string s) { out_.push_back({true, std::move(s)}); }
    void fact(std::string s) { out_.push_back({false, std::move(s)}); }

    // The rails' aggregation tables (verbs rails keep their own, smaller)
    // against MemTotal: railgated refuses to start past half of it.
    void tables() {
        std::ifstream m(at("/proc/meminfo"));
        std::string key;
        unsigned long long kb = 0;
        while (m >> key && key != "MemTotal:") m.ignore(1 << 10, '\n');
        if (!(m >> kb) || !kb) return;
        const auto rails = static_cast<std::size_t>(std::count_if(
            a_.rails.begin(), a_.rails.end(), [](const config::rail& r) { return r.transport != config::transport::verbs; }));
        const std::string e = agg::tables_fit(a_.max_jobs, a_.max_slots, rails, kb * 1024);
        if (e.empty())
            fact("aggregation tables: " + std::to_string(agg::table_bytes(a_.max_jobs, a_.max_slots) >> 20) +
                 " MiB per rail (max_jobs " + std::to_string(a_.max_jobs) + " x max_slots " + std::to_string(a_.max_slots) + ")");
        else
            problem(e);
    }

    // Hugepages: railgated's mbuf pools come from them unless [eal]
    // hugepages = false.
    void memory() {
        const config::eal_options& e = a_.eal;
        if (!e.hugepages) {
            fact("hugepages off ([eal] hugepages = false): " + std::to_string(e.memory_mb ? e.memory_mb : 512) +
                 " MB of ordinary memory; for tests and demos, not line rate");
            return;
        }
        unsigned long long free_bytes = 0;
        std::string sizes;
        std::error_code ec;
        for (const auto& d : fs::directory_iterator(at("/sys/kernel/mm/hugepages"), ec)) {
            const std::string n = d.path().filename().string(); // hugepages-2048kB
            const unsigned long long kb = std::strtoull(n.c_str() + std::min<std::size_t>(n.size(), 10), nullptr, 10);
            const unsigned long long nr = std::strtoull(read_line(d.path() / "nr_hugepages").c_str(), nullptr, 10);
            const unsigned long long fr = std::strtoull(read_line(d.path() / "free_hugepages").c_str(), nullptr, 10);
            free_bytes += fr * kb * 1024;
            sizes += (sizes.empty() ? "" : ", ") + std::to_string(fr) + " of " + std::to_string(nr) + " x " +
                     std::to_string(kb) + "kB free";
        }
        const unsigned long long free_mb = free_bytes >> 20;
        if (!free_bytes) {
            problem("no free hugepages (" + (sizes.empty() ? std::string("this kernel has none") : sizes) +
                    "): reserve them (echo 2048 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages, or "
                    "hugepagesz=1G hugepages=N on the kernel command line), or set [eal] hugepages = false for a test");
            return;
        }
        unsigned long long want_mb = e.memory_mb;
        if (!e.socket_mem.empty()) {
            std::stringstream ss(e.socket_mem);
            std::string x;
            want_mb = 0;
            while (std::getline(ss, x, ',')) want_mb += std::strtoull(x.c_str(), nullptr, 10);
        }
        if (want_mb > free_mb)
            problem("[eal] asks for " + std::to_string(want_mb) + " MB of hugepages; " + std::to_string(free_mb) +
                    " MB are free (" + sizes + ")");
        else
            fact("hugepages: " + sizes);
        if (!e.in_memory && e.huge_dir.empty()) {
            std::ifstream m(at("/proc/mounts"));
            std::string line;
            bool mounted = false;
            while (std::getline(m, line)) mounted |= line.find(" hugetlbfs ") != std::string::npos;
            if (!mounted) problem("no hugetlbfs mounted (mount -t hugetlbfs nodev /dev/hugepages), and [eal] in_memory = false");
        }
        if (!e.huge_dir.empty() && !present(at(e.huge_dir))) problem("[eal] huge_dir " + e.huge_dir + " does not exist");
    }

    void lcores() {
        std::vector<unsigned> online;
        const std::string list = read_line(at("/sys/devices/system/cpu/online"));
        if (!parse_cpu_list(list, online)) return; // no sysfs to judge by
        std::vector<unsigned> want;
        if (a_.eal.lcores.empty() || !parse_cpu_list(a_.eal.lcores, want)) return;
        const std::set<unsigned> on(online.begin(), online.end());
        std::string missing;
        for (unsigned c : want)
            if (!on.count(c)) missing += (missing.empty() ? "" : ",") + std::to_string(c);
        if (!missing.empty())
            problem("[eal] lcores \"" + a_.eal.lcores + "\": CPU " + missing + " not online (online: " + list + ")");
        for (const config::rail& r : a_.rails)
            if (r.lcore >= 0 && std::find(want.begin(), want.end(), static_cast<unsigned>(r.lcore)) == want.end())
                problem("rail " + r.name + ": lcore " + std::to_string(r.lcore) + " is not in [eal] lcores \"" +
                        a_.eal.lcores + "\"");
    }

    void pci_rail(const config::rail& r) {
        const std::string addr = pci_address(r.devargs);
        const std::string who = "rail " + r.name + " (" + (addr.empty() ? r.devargs : addr) + "): ";
        if (addr.empty()) return problem(who + "'" + r.devargs + "' is neither a vdev (net_*) nor a PCI address");
        const fs::path dev = at("/sys/bus/pci/devices/" + addr);
        if (!present(dev)) return problem(who + "no such PCI device (lspci -D lists them)");
        std::error_code ec;
        const fs::path drv = fs::read_symlink(dev / "driver", ec);
        const std::string driver = ec ? "" : drv.filename().string();
        const std::string node = read_line(dev / "numa_node");
        const std::string where = node.empty() || node == "-1" ? "" : ", NUMA node " + node;
        if (driver.empty())
            return problem(who + "bound to no driver: bind it to vfio-pci (dpdk-devbind.py -b vfio-pci " + addr + ")");
        if (driver == "vfio-pci") {
            if (!present(at("/dev/vfio/vfio"))) return problem(who + "vfio-pci, but /dev/vfio/vfio is missing (modprobe vfio-pci)");
            std::error_code gec;
            const bool group = fs::is_symlink(dev / "iommu_group", gec);
            const bool noiommu = read_line(at("/sys/module/vfio/parameters/enable_unsafe_noiommu_mode")) == "Y";
            if (!group && !noiommu)
                return problem(who + "vfio-pci, but the device has no IOMMU group: enable the IOMMU (intel_iommu=on "
                                     "iommu=pt) or, unsafely, vfio's enable_unsafe_noiommu_mode");
            return fact(who + "vfio-pci" + where);
        }
        if (driver == "mlx5_core" || driver == "mlx4_core")
            return fact(who + driver + ", bifurcated: DPDK's mlx5 PMD shares it with the kernel's netdev" + where);
        if (driver == "uio_pci_generic" || driver == "igb_uio")
            return fact(who + driver + " (works; vfio-pci isolates the device with the IOMMU)" + where);
        problem(who + "bound to the kernel's " + driver + " driver: DPDK cannot drive it; bind it to vfio-pci "
                      "(dpdk-devbind.py -b vfio-pci " + addr + ")");
    }

    void vdev_rail(const config::rail& r) {
        const std::string who = "rail " + r.name + " (" + r.devargs.substr(0, r.devargs.find(',')) + "): ";
        if (r.devargs.rfind("net_tap", 0) == 0) {
            if (!present(at("/dev/net/tun"))) return problem(who + "/dev/net/tun is missing (modprobe tun)");
            return fact(who + "a tap interface railgated makes (/dev/net/tun)");
        }
        if (r.devargs.rfind("net_af_xdp", 0) == 0 || r.devargs.rfind("net_af_packet", 0) == 0) {
            const std::string iface = config::devarg(r.devargs, "iface");
            if (iface.empty()) return;
            if (!r.veth_peer.empty()) {
                const bool port_end = present(at("/sys/class/net/" + iface)), peer = present(at("/sys/class/net/" + r.veth_peer));
                if (port_end != peer) {
                    const std::string& there = port_end ? iface : r.veth_peer;
                    return problem(who + "interface " + there + " exists without its veth peer (ip link del " + there + ")");
                }
                return fact(who + "a veth pair railgated makes, " + iface + " for the port and " + r.veth_peer +
                            " for the host" + (port_end ? " (there now: an earlier railgated's, taken over)" : ""));
            }
            if (!present(at("/sys/class/net/" + iface)))
                return problem(who + "no interface " + iface + " in this network namespace");
            fact(who + "interface " + iface);
        }
    }

    void udp_rail(const config::rail& r) {
        const std::string ip = net::format_ipv4(r.ip);
        const std::string who = "rail " + r.name + " (udp " + ip + ":" + std::to_string(a_.udp_port) + "): ";
        if (const std::string has = owner_ ? owner_(r.ip) : ""; !has.empty())
            return fact(who + "the kernel's socket on " + ip + ", which " + has + " has");
        if (r.interface.empty())
            return problem(who + "no interface has " + ip + ": put it on one, or give the rail interface = \"lo\"");
        if (!present(at("/sys/class/net/" + r.interface)))
            return problem(who + "no interface " + r.interface + " to put " + ip + " on");
        fact(who + "the kernel's socket on " + ip + ", which railgated puts on " + r.interface + " (/32)");
    }

    void verbs_rail(const config::rail& r) {
        const std::string who = "rail " + r.name + " (" + r.device + " port " + std::to_string(r.port) + "): ";
        const fs::path dev = at("/sys/class/infiniband/" + r.device);
        if (!present(dev)) return problem(who + "no RDMA device " + r.device + " (rdma link show, ibv_devices)");
        const fs::path port = dev / "ports" / std::to_string(r.port);
        if (!present(port)) return problem(who + "the device has no port " + std::to_string(r.port));
        const std::string state = read_line(port / "state"); // "4: ACTIVE"
        if (state.find("ACTIVE") == std::string::npos)
            return problem(who + "port state " + (state.empty() ? "unknown" : state) + ", not ACTIVE");
        fact(who + "ACTIVE, link layer " + read_line(port / "link_layer"));
    }

    const config::appliance& a_;
    std::string root_;
    address_owner owner_;
    std::vector<finding> out_;
};

} // namespace

std::string pci_address(const std::string& devargs) {
    std::string a = devargs.substr(0, devargs.find(','));
    for (char& c : a) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (std::count(a.begin(), a.end(), ':') == 1) a = "0000:" + a;
    // dddd:bb:dd.f
    if (a.size() != 12 || a[4] != ':' || a[7] != ':' || a[10] != '.') return {};
    for (std::size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11})
        if (!std::isxdigit(static_cast<unsigned char>(a[i]))) return {};
    return a;
}

bool parse_cpu_list(const std::string& s, std::vector<unsigned>& out) {
    out.clear();
    std::stringstream ss(s);
    std::string part;
    while (std::getline(ss, part, ',')) {
        unsigned lo = 0, hi = 0;
        char tail = 0;
        if (std::sscanf(part.c_str(), "%u-%u%c", &lo, &hi, &tail) == 2) {
        } else if (std::sscanf(part.c_str(), "%u%c", &lo, &tail) == 1) {
            hi = lo;
        } else {
            return false;
        }
        if (hi < lo || hi > 65535) return false;
        for (unsigned c = lo; c <= hi; ++c) out.push_back(c);
    }
    return !out.empty();
}

std::vector<finding> check(const config::appliance& a, const std::string& root, const address_owner& owner) {
    return checker(a, root, owner).run();
}

} // namespace railgate::host
