// railgated --check's look at the host, on a made-up tree of /sys, /dev and
// /proc files: each finding a real node would meet (no hugepages, a CPU
// that is not there, a NIC still on its kernel driver, vfio without an
// IOMMU group, a missing interface, an RDMA port that is down); the
// embedded EAL's choice of hugepages. And the log's line format (terminal
// and journald).
#define BOOST_TEST_MODULE host_check
#include <boost/test/unit_test.hpp>

#include <map>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "control/config.hpp"
#include "dataplane/agg/footprint.hpp"
#include "dataplane/log/log.hpp"
#include "dataplane/net/eal.hpp"
#include "dataplane/railgated/host_check.hpp"

using namespace railgate;
namespace fs = std::filesystem;

namespace {

// A scratch root with the files a host shows; removed at the end.
struct fake_host {
    fs::path root = fs::temp_directory_path() / ("rg_host_" + std::to_string(getpid()));
    fake_host() {
        fs::remove_all(root);
        file("/sys/devices/system/cpu/online", "0-3");
    }
    ~fake_host() { fs::remove_all(root); }
    void file(const std::string& p, const std::string& text) {
        fs::create_directories((root / p.substr(1)).parent_path());
        std::ofstream(root / p.substr(1)) << text << "\n";
    }
    void dir(const std::string& p) { fs::create_directories(root / p.substr(1)); }
    void link(const std::string& p, const std::string& to) {
        fs::create_directories((root / p.substr(1)).parent_path());
        fs::create_directory_symlink(to, root / p.substr(1));
    }
    void hugepages(unsigned nr, unsigned free) {
        file("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", std::to_string(nr));
        file("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", std::to_string(free));
    }
    // Which interface has an address (udp rails): none unless set here.
    std::map<std::uint32_t, std::string> addresses;
    // The problems (or the facts) only, joined by " | ".
    std::string findings(const config::appliance& a, bool problem) const {
        const host::address_owner owner = [this](std::uint32_t ip) {
            const auto it = addresses.find(ip);
            return it == addresses.end() ? std::string() : it->second;
        };
        std::string s;
        for (const host::finding& f : host::check(a, root.string(), owner))
            if (f.problem == problem) s += (s.empty() ? "" : " | ") + f.what;
        return s;
    }
    std::string problems(const config::appliance& a) const { return findings(a, true); }
    std::string facts(const config::appliance& a) const { return findings(a, false); }
};

config::appliance pci_node(const std::string& lcores = "0-1") {
    const config::result r = config::parse("[eal]\nlcores = \"" + lcores +
                                               "\"\n[[rail]]\nname = \"g0\"\ndevargs = \"3b:00.0\"\nip = \"10.0.0.1\"\n",
                                           "t.toml");
    BOOST_TEST_REQUIRE(r.ok());
    return r.cfg;
}

} // namespace

// The embedded EAL (railbench --embedded, raillat, the vdev tests) takes
// hugepages where 1 GiB of them is free, of every size together, and
// $RAILGATE_HUGEPAGES overrides the host either way.
BOOST_AUTO_TEST_CASE(the_embedded_eal_takes_hugepages_where_enough_are_free) {
    fake_host h;
    BOOST_TEST(net::free_hugepage_bytes(h.root.string()) == 0u); // no hugepages directory at all
    h.hugepages(1024, 256);
    BOOST_TEST(net::free_hugepage_bytes(h.root.string()) == 256ull << 21);
    h.file("/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages", "2");
    h.file("/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages", "1");
    h.file("/sys/kernel/mm/hugepages/README", "not a size"); // not a hugepages-N directory
    const std::uint64_t free = net::free_hugepage_bytes(h.root.string());
    BOOST_TEST(free == (256ull << 21) + (1ull << 30));

    BOOST_TEST(net::embedded_hugepages(free, nullptr));
    BOOST_TEST(net::embedded_hugepages(1ull << 30, nullptr));
    BOOST_TEST(!net::embedded_hugepages((1ull << 30) - (2ull << 20), nullptr)); // 511 pages of 2 MiB: 4 KiB pages
    BOOST_TEST(!net::embedded_hugepages(0, nullptr));
    BOOST_TEST(!net::embedded_hugepages(free, "0"));
    BOOST_TEST(net::embedded_hugepages(0, "1"));
    for (const char* bad : {"", "yes", "2", "01", "1 "})
        BOOST_CHECK_THROW(net::embedded_hugepages(free, bad), std::runtime_error);
}

BOOST_AUTO_TEST_CASE(pci_addresses_and_cpu_lists) {
    BOOST_TEST(host::pci_address("3b:00.0") == "0000:3b:00.0");
    BOOST_TEST(host::pci_address("0000:3B:00.1,rxq_cqe_comp_en=0") == "0000:3b:00.1");
    BOOST_TEST(host::pci_address("net_tap0") == "");
    BOOST_TEST(host::pci_address("0000:3b:00") == "");
    std::vector<unsigned> c;
    BOOST_TEST(host::parse_cpu_list("0,2-4", c));
    BOOST_TEST(c == (std::vector<unsigned>{0, 2, 3, 4}), boost::test_tools::per_element());
    BOOST_TEST(!host::parse_cpu_list("1-", c));
    BOOST_TEST(!host::parse_cpu_list("3-1", c));
    BOOST_TEST(!host::parse_cpu_list("", c));
    BOOST_TEST(!host::parse_cpu_list("0,,1", c));
}

BOOST_AUTO_TEST_CASE(a_ready_pci_node) {
    fake_host h;
    h.hugepages(1024, 1024);
    h.file("/sys/bus/pci/devices/0000:3b:00.0/numa_node", "0");
    h.link("/sys/bus/pci/devices/0000:3b:00.0/driver", "../../../bus/pci/drivers/vfio-pci");
    h.link("/sys/bus/pci/devices/0000:3b:00.0/iommu_group", "../../../kernel/iommu_groups/12");
    h.file("/dev/vfio/vfio", "");
    BOOST_TEST(h.problems(pci_node()) == "");
    BOOST_TEST(h.facts(pci_node()) ==
               "hugepages: 1024 of 1024 x 2048kB free | rail g0 (0000:3b:00.0): vfio-pci, NUMA node 0");
}

BOOST_AUTO_TEST_CASE(what_a_new_node_gets_wrong) {
    fake_host h;
    h.hugepages(0, 0);
    h.dir("/sys/bus/pci/devices/0000:3b:00.0");
    h.link("/sys/bus/pci/devices/0000:3b:00.0/driver", "../../../bus/pci/drivers/ice");
    BOOST_TEST(h.problems(pci_node("0-1,6")) ==
               "no free hugepages (0 of 0 x 2048kB free): reserve them (echo 2048 > "
               "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages, or hugepagesz=1G hugepages=N on the kernel "
               "command line), or set [eal] hugepages = false for a test | [eal] lcores \"0-1,6\": CPU 6 not online "
               "(online: 0-3) | rail g0 (0000:3b:00.0): bound to the kernel's ice driver: DPDK cannot drive it; bind it "
               "to vfio-pci (dpdk-devbind.py -b vfio-pci 0000:3b:00.0)");
    // vfio-pci without an IOMMU group, and too few hugepages for socket_mem.
    fake_host v;
    v.hugepages(512, 256);
    v.dir("/sys/bus/pci/devices/0000:3b:00.0");
    v.link("/sys/bus/pci/devices/0000:3b:00.0/driver", "../../../bus/pci/drivers/vfio-pci");
    v.file("/dev/vfio/vfio", "");
    config::appliance a = pci_node();
    a.eal.socket_mem = "1024";
    BOOST_TEST(v.problems(a) ==
               "[eal] asks for 1024 MB of hugepages; 512 MB are free (256 of 512 x 2048kB free) | rail g0 "
               "(0000:3b:00.0): vfio-pci, but the device has no IOMMU group: enable the IOMMU (intel_iommu=on "
               "iommu=pt) or, unsafely, vfio's enable_unsafe_noiommu_mode");
    v.file("/sys/module/vfio/parameters/enable_unsafe_noiommu_mode", "Y");
    a.eal.socket_mem = "512";
    BOOST_TEST(v.problems(a) == "");
    // The device not there at all; a mlx5 port (bifurcated) is fine.
    fake_host m;
    m.hugepages(8, 8);
    BOOST_TEST(m.problems(pci_node()) == "rail g0 (0000:3b:00.0): no such PCI device (lspci -D lists them)");
    m.dir("/sys/bus/pci/devices/0000:3b:00.0");
    m.link("/sys/bus/pci/devices/0000:3b:00.0/driver", "../../../bus/pci/drivers/mlx5_core");
    BOOST_TEST(m.problems(pci_node()) == "");
}

BOOST_AUTO_TEST_CASE(vdevs_and_verbs_rails) {
    fake_host h;
    const config::result r = config::parse(R"([eal]
hugepages = false
[[rail]]
name = "t0"
devargs = "net_tap0,iface=rg0"
ip = "10.0.0.1"
[[rail]]
name = "x0"
devargs = "net_af_xdp0,iface=ens1f0"
ip = "10.0.1.1"
[[rail]]
name = "v0"
transport = "verbs"
device = "mlx5_0"
ip = "10.0.2.1"
)",
                                           "t.toml");
    BOOST_TEST_REQUIRE(r.ok());
    BOOST_TEST(h.problems(r.cfg) == "rail t0 (net_tap0): /dev/net/tun is missing (modprobe tun) | rail x0 (net_af_xdp0): "
                                    "no interface ens1f0 in this network namespace | rail v0 (mlx5_0 port 1): no RDMA "
                                    "device mlx5_0 (rdma link show, ibv_devices)");
    h.file("/dev/net/tun", "");
    h.dir("/sys/class/net/ens1f0");
    h.file("/sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN");
    BOOST_TEST(h.problems(r.cfg) == "rail v0 (mlx5_0 port 1): port state 1: DOWN, not ACTIVE");
    h.file("/sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE");
    h.file("/sys/class/infiniband/mlx5_0/ports/1/link_layer", "Ethernet");
    BOOST_TEST(h.problems(r.cfg) == "");
    BOOST_TEST(h.facts(r.cfg).find("rail v0 (mlx5_0 port 1): ACTIVE, link layer Ethernet") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(veth_pairs_railgated_makes) {
    fake_host h;
    const config::result r = config::parse(R"([eal]
hugepages = false
[[rail]]
name = "p0"
devargs = "net_af_packet0,iface=rgp0"
veth_peer = "rg0"
ip = "10.0.0.1"
)",
                                           "t.toml");
    BOOST_TEST_REQUIRE(r.ok());
    BOOST_TEST(h.problems(r.cfg) == "");
    BOOST_TEST(h.facts(r.cfg).find("rail p0 (net_af_packet0): a veth pair railgated makes, rgp0 for the port and rg0 "
                                   "for the host") != std::string::npos);
    h.dir("/sys/class/net/rg0"); // one end without the other: in the way
    BOOST_TEST(h.problems(r.cfg) == "rail p0 (net_af_packet0): interface rg0 exists without its veth peer (ip link del rg0)");
    h.dir("/sys/class/net/rgp0"); // both: an earlier railgated's pair
    BOOST_TEST(h.problems(r.cfg) == "");
    BOOST_TEST(h.facts(r.cfg).find("(there now: an earlier railgated's, taken over)") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(udp_rails_addresses) {
    fake_host h;
    const auto udp = [](const std::string& extra) {
        const config::result r = config::parse("[eal]\nhugepages = false\n[[rail]]\nname = \"u0\"\ntransport = \"udp\"\n"
                                               "ip = \"198.18.0.1\"\n" + extra, "t.toml");
        BOOST_TEST_REQUIRE(r.ok());
        return r.cfg;
    };
    BOOST_TEST(h.problems(udp("")) == "rail u0 (udp 198.18.0.1:47000): no interface has 198.18.0.1: put it on one, "
                                      "or give the rail interface = \"lo\"");
    BOOST_TEST(h.problems(udp("interface = \"lo\"\n")) == "rail u0 (udp 198.18.0.1:47000): no interface lo to put 198.18.0.1 on");
    h.dir("/sys/class/net/lo");
    BOOST_TEST(h.problems(udp("interface = \"lo\"\n")) == "");
    BOOST_TEST(h.facts(udp("interface = \"lo\"\n")).find("the kernel's socket on 198.18.0.1, which railgated puts on lo (/32)") !=
               std::string::npos);
    h.addresses[0xC6120001] = "eth3";
    BOOST_TEST(h.problems(udp("")) == "");
    BOOST_TEST(h.facts(udp("")).find("rail u0 (udp 198.18.0.1:47000): the kernel's socket on 198.18.0.1, which eth3 has") !=
               std::string::npos);
}

// The rails' aggregation tables against MemTotal: 1024 jobs of 65535 slots
// (101 GiB a rail) made railgated's lcore die of std::bad_alloc.
BOOST_AUTO_TEST_CASE(aggregation_tables_against_the_hosts_memory) {
    fake_host h;
    h.dir("/sys/class/net/lo");
    const auto node = [](const std::string& pools) {
        const config::result r = config::parse("[eal]\nhugepages = false\n[pools]\n" + pools + "[[rail]]\nname = \"u0\"\n"
                                               "transport = \"udp\"\nip = \"198.18.0.1\"\ninterface = \"lo\"\n"
                                               "[[rail]]\nname = \"u1\"\ntransport = \"udp\"\nip = \"198.18.1.1\"\n"
                                               "interface = \"lo\"\n",
                                               "t.toml");
        BOOST_TEST_REQUIRE(r.ok());
        return r.cfg;
    };
    const config::appliance big = node("max_jobs = 1024\nmax_slots = 65535\n");
    // No /proc/meminfo (a container's view may lack it): not judged.
    BOOST_TEST(h.problems(big) == "");
    h.file("/proc/meminfo", "MemTotal:       24591432 kB\nMemFree:        23000000 kB");
    BOOST_TEST(h.problems(big) == "max_jobs 1024 x max_slots 65535: the aggregation tables take 101.0 GiB per rail, "
                                  "202.0 GiB for 2 rail(s), over half this host's 23.5 GiB of memory; lower max_jobs or "
                                  "max_slots");
    // The defaults: 3 MiB a rail.
    BOOST_TEST(h.problems(node("")) == "");
    BOOST_TEST(h.facts(node("")).find("aggregation tables: 3 MiB per rail (max_jobs 8 x max_slots 256)") != std::string::npos);
    // Half of the host is the line: 2 rails of 1024 x 2048 (about 3 GiB
    // each) fit in twice their size, not in 2 KiB less.
    const config::appliance mid = node("max_jobs = 1024\nmax_slots = 2048\n");
    const std::uint64_t two_rails_kib = 2 * agg::table_bytes(1024, 2048) / 1024;
    h.file("/proc/meminfo", "MemTotal: " + std::to_string(2 * two_rails_kib) + " kB");
    BOOST_TEST(h.problems(mid) == "");
    h.file("/proc/meminfo", "MemTotal: " + std::to_string(2 * two_rails_kib - 2) + " kB");
    BOOST_TEST(h.problems(mid).find("the aggregation tables take") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(log_lines) {
    const long long t = 1795509914123456789LL; // 2026-11-24T...
    const std::string term = log::format_line(log::level::warning, "rail r0: link down\nagain", t, false);
    BOOST_TEST(term.substr(25) == "warning railgated: rail r0: link down again\n");
    BOOST_TEST(term[4] == '-');
    BOOST_TEST(term.substr(19, 5) == ".123Z");
    BOOST_TEST(log::format_line(log::level::notice, "ready", t, true) == "<5>railgated: ready\n");
    log::level l{};
    BOOST_TEST(log::parse("warn", l));
    BOOST_TEST((l == log::level::warning));
    BOOST_TEST(!log::parse("lib.eal:debug", l));
    log::set_level(log::level::notice);
    BOOST_TEST(!log::enabled(log::level::info));
    BOOST_TEST(log::enabled(log::level::error));
}
