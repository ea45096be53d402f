// The config file: the shipped examples parse, and every kind of mistake is
// reported with file, line, column, field and reason, all at once.
#define BOOST_TEST_MODULE config
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>

#include "control/config.hpp"
#include "dataplane/qos/classify.hpp"

using namespace railgate;

namespace {

const std::string rail0 = R"(
[[rail]]
name = "r0"
transport = "dpdk"
devargs = "net_null0"
ip = "10.0.0.1"
)";

config::result parse(const std::string& text) { return config::parse(text, "t.toml"); }

// The one error of a parse, as text.
std::string only_error(const std::string& text) {
    const config::result r = parse(text);
    BOOST_TEST_REQUIRE(r.errors.size() == 1u, "errors: " << r.errors.size() << " for\n" << text);
    return r.errors[0].text();
}

} // namespace

BOOST_AUTO_TEST_CASE(embedded_default_is_valid) {
    const config::result r = config::parse(config::embedded_default_text(), "embedded");
    for (const auto& e : r.errors) BOOST_TEST_MESSAGE(e.text());
    BOOST_TEST_REQUIRE(r.ok());
    const config::appliance& a = r.cfg;
    BOOST_TEST(a.rails.size() == 2u);
    BOOST_TEST(a.rails[0].name == "r0");
    for (const config::rail& x : a.rails) {
        BOOST_TEST((x.transport == config::transport::udp));
        BOOST_TEST(x.interface == "lo");
        BOOST_TEST(x.mtu == 9000u);
        BOOST_TEST(x.mtu_max == 9000u);
    }
    BOOST_TEST(a.rails[0].ip == 0xc6120001u);
    BOOST_TEST(a.rails[1].ip == 0xc6120101u);
    BOOST_TEST(a.socket_mode == 0660u);
    BOOST_TEST(a.metrics == "127.0.0.1:9477");
    // The embedded default is the one place (with the tests) without hugepages or PCI.
    const std::vector<std::string> want{"-l", "0-1", "--no-huge", "-m", "512", "--no-pci", "--no-shconf",
                                        "--no-telemetry", "--log-level", "lib.eal:error"};
    BOOST_TEST(config::eal_arguments(a) == want, boost::test_tools::per_element());
    BOOST_TEST(config::embedded_default().rails.size() == 2u);
}

BOOST_AUTO_TEST_CASE(shipped_examples_are_valid) {
    for (const char* f : {"embedded.toml", "local-af_packet.toml", "lab-2node.toml", "dgx-8rail.toml", "gateway.toml", "railgated.toml"}) {
        const config::result r = config::load(std::string(RAILGATE_SOURCE_ROOT "/config/") + f);
        for (const auto& e : r.errors) BOOST_TEST_MESSAGE(e.text());
        BOOST_TEST(r.ok(), f);
    }
    const config::appliance lab = config::load(RAILGATE_SOURCE_ROOT "/config/lab-2node.toml").cfg;
    BOOST_TEST(lab.rails.size() == 2u);
    BOOST_TEST((lab.rails[0].transport == config::transport::verbs));
    BOOST_TEST(*lab.rails[0].gid_index == 3u);
    BOOST_TEST(lab.rails[1].mtu == 9000u);
    const config::appliance dgx = config::load(RAILGATE_SOURCE_ROOT "/config/dgx-8rail.toml").cfg;
    BOOST_TEST(dgx.rails.size() == 8u);
    BOOST_TEST(dgx.rails[3].numa == 0);
    BOOST_TEST(dgx.rails[4].numa == 1);
    const config::appliance gw = config::load(RAILGATE_SOURCE_ROOT "/config/gateway.toml").cfg;
    BOOST_TEST(gw.routes.size() == 3u);
    BOOST_TEST(gw.routes[2].via == 0x0A0001FEu);
    BOOST_TEST(gw.rails[0].pcp_tc.size() == 1u);
}

BOOST_AUTO_TEST_CASE(files_that_are_no_configuration_are_refused_not_read_forever) {
    auto only = [](const config::result& r) { return r.errors.size() == 1 ? r.errors[0].text() : "(not one error)"; };
    BOOST_TEST(only(config::load("/nonexistent/railgated.toml")) ==
               "/nonexistent/railgated.toml: cannot read: No such file or directory");
    BOOST_TEST(only(config::load(RAILGATE_SOURCE_ROOT "/config")) ==
               RAILGATE_SOURCE_ROOT "/config: cannot read: Is a directory");
    // An endless device stops at the bound instead of filling memory.
    BOOST_TEST(only(config::load("/dev/zero")) == "/dev/zero: larger than 4 MiB, not a railgated configuration");
    // A pipe holding a configuration (--config <(...)) is read as a file is.
    int p[2];
    BOOST_TEST_REQUIRE(pipe(p) == 0);
    const std::string text = rail0;
    BOOST_TEST_REQUIRE(write(p[1], text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    close(p[1]);
    const config::result r = config::load("/dev/fd/" + std::to_string(p[0]));
    close(p[0]);
    for (const auto& e : r.errors) BOOST_TEST_MESSAGE(e.text());
    BOOST_TEST(r.ok());
    BOOST_TEST(r.cfg.rails.size() == 1u);
}

BOOST_AUTO_TEST_CASE(errors_name_file_line_field_and_reason) {
    // Line numbers: rail0 starts with a newline, so "mtu" is on line 7.
    BOOST_TEST(only_error(rail0 + "mtu = 70000\n") == "t.toml:7:7: rail[0].mtu: MTU 70000 out of range 576..9216");
    BOOST_TEST(only_error(rail0 + "mtu = 0\n") == "t.toml:7:7: rail[0].mtu: MTU 0 out of range 576..9216");
    BOOST_TEST(only_error(rail0 + "mtu = \"abc\"\n") == "t.toml:7:7: rail[0].mtu: must be an integer");
    // A float far beyond long long is refused, never cast (UB; fuzz_config).
    BOOST_TEST(only_error(rail0 + "mtu = 8.1e93\n") == "t.toml:7:7: rail[0].mtu: must be an integer");
    BOOST_TEST(only_error(rail0 + "mttu = 1500\n") == "t.toml:7:1: rail[0].mttu: unknown key (did you mean 'mtu'?)");
    BOOST_TEST(only_error(rail0 + "gid_index = 3\n") ==
               "t.toml:7:13: rail[0].gid_index: applies to transport = \"verbs\" only");
    BOOST_TEST(only_error("[policy]\nmode = \"lga\"\n" + rail0) ==
               "t.toml:2:8: policy.mode: 'lga' is not one of rail, lag");
    BOOST_TEST(only_error("[policy]\nhash = \"l2\"\n" + rail0) ==
               "t.toml:2:8: policy.hash: applies to mode = \"lag\" only");
    BOOST_TEST(only_error("[daemon]\nmetrics = \"10.0.0.1:9477\"\n" + rail0) ==
               "t.toml:2:11: daemon.metrics: '10.0.0.1' is not a loopback address (metrics stay on 127.0.0.0/8 "
               "unless metrics_public = true, or railgated's --metrics-public, says otherwise)");
    BOOST_TEST(parse("[daemon]\nmetrics_public = true\nmetrics = \"0.0.0.0:9477\"\n" + rail0).ok());
    BOOST_TEST(only_error("[daemon]\nmetrics_public = true\nmetrics = \"example.org:9477\"\n" + rail0) ==
               "t.toml:3:11: daemon.metrics: 'example.org' is not an IPv4 address");
    BOOST_TEST(only_error("[daemon]\neal_args = [\"-l\", \"0\"]\n" + rail0) ==
               "t.toml:2:12: daemon.eal_args: moved to the [eal] table (its keys, and args = [...] for other EAL flags)");
    BOOST_TEST(only_error("[daemon]\nsocket_mode = \"0999\"\n" + rail0) ==
               "t.toml:2:15: daemon.socket_mode: '0999' is not an octal mode like \"0660\"");
    BOOST_TEST(only_error("[daemon]\ncontrol_socket = \"relative.sock\"\n" + rail0) ==
               "t.toml:2:18: daemon.control_socket: must be an absolute path");
    BOOST_TEST(only_error("[daemon]\nsocket_group = \"no-such-group-rg\"\n" + rail0) ==
               "t.toml:2:16: daemon.socket_group: no group 'no-such-group-rg'");
    BOOST_TEST(only_error("[pools]\ndefault_slots = 300\nmax_slots = 200\n" + rail0) ==
               "t.toml:2:17: pools.default_slots: 300 exceeds max_slots 200");
    BOOST_TEST(only_error(rail0 + "ip = \"10.0.0.1\"\n") ==
               "t.toml:7:6: Error while parsing key-value pair: cannot redefine existing string 'ip'");
    BOOST_TEST(only_error(rail0 + "ip2 = \"10.0.0.300\"\n") ==
               "t.toml:7:1: rail[0].ip2: unknown key (did you mean 'ip'?)");
    BOOST_TEST(only_error("") == "t.toml:1:1: rail: no rails configured (add a [[rail]] table)");
    BOOST_TEST(only_error("[[rail]]\nname = \"r0\"\ndevargs = \"x\"\nip = \"1.2.3.400\"\n") ==
               "t.toml:4:6: rail[0].ip: '1.2.3.400' is not an IPv4 address");
}

BOOST_AUTO_TEST_CASE(veth_pairs) {
    const auto rail = [](const std::string& name, const std::string& devargs, const std::string& peer, const std::string& ip) {
        return "[[rail]]\nname = \"" + name + "\"\ndevargs = \"" + devargs + "\"\nveth_peer = \"" + peer +
               "\"\nip = \"" + ip + "\"\n";
    };
    const config::result ok = parse(rail("r0", "net_af_xdp0,iface=a0", "b0", "10.0.0.1") +
                                    rail("r1", "net_af_packet1,blocksz=4096,iface=a1", "b1", "10.0.1.1"));
    BOOST_TEST_REQUIRE(ok.ok());
    BOOST_TEST(ok.cfg.rails[1].veth_peer == "b1");
    BOOST_TEST(config::devarg(ok.cfg.rails[1].devargs, "iface") == "a1");
    BOOST_TEST(config::devarg("net_af_packet1,xiface=q,iface=a1", "iface") == "a1");
    BOOST_TEST(config::devarg("net_af_packet1", "iface") == "");
    BOOST_TEST(only_error(rail("r0", "net_tap0,iface=a0", "b0", "10.0.0.1")) ==
               "t.toml:4:13: rail[0].veth_peer: applies to net_af_packet and net_af_xdp rails only");
    BOOST_TEST(only_error(rail("r0", "net_af_packet0", "b0", "10.0.0.1")) ==
               "t.toml:4:13: rail[0].veth_peer: the devargs name no valid iface= for the pair's other end");
    BOOST_TEST(only_error(rail("r0", "net_af_packet0,iface=a0", "a0", "10.0.0.1")) ==
               "t.toml:4:13: rail[0].veth_peer: the peer must differ from iface=a0");
    BOOST_TEST(only_error(rail("r0", "net_af_packet0,iface=a0", "a/b", "10.0.0.1")) ==
               "t.toml:4:13: rail[0].veth_peer: 'a/b' is not an interface name (1-15 characters, no '/', ':' or spaces)");
    BOOST_TEST(only_error(rail("r0", "net_af_packet0,iface=a0", "sixteen-chars-xx", "10.0.0.1")) ==
               "t.toml:4:13: rail[0].veth_peer: 'sixteen-chars-xx' is not an interface name (1-15 characters, no '/', ':' or spaces)");
    BOOST_TEST(only_error(rail("r0", "net_af_packet0,iface=a0", "b0", "10.0.0.1") +
                          rail("r1", "net_af_packet1,iface=b0", "c0", "10.0.1.1")) ==
               "t.toml:9:13: rail[1].veth_peer: an interface of this pair is another rail's");
}

BOOST_AUTO_TEST_CASE(udp_rails) {
    const std::string u = "[[rail]]\nname = \"u0\"\ntransport = \"udp\"\nip = \"198.18.0.1\"\n";
    const config::result ok = parse(u + "interface = \"lo\"\nmtu = 9000\nrate = \"10Gbit\"\n");
    BOOST_TEST_REQUIRE(ok.ok());
    BOOST_TEST((ok.cfg.rails[0].transport == config::transport::udp));
    BOOST_TEST(ok.cfg.rails[0].interface == "lo");
    BOOST_TEST(ok.cfg.rails[0].devargs.empty());
    BOOST_TEST(config::name(config::transport::udp) == "udp");
    BOOST_TEST(parse(u).ok()); // an interface has the address already
    BOOST_TEST(only_error(u + "devargs = \"net_null0\"\n") ==
               "t.toml:5:11: rail[0].devargs: applies to transport = \"dpdk\" only (a udp rail is the kernel's socket on ip)");
    BOOST_TEST(only_error(u + "veth_peer = \"rg0\"\n") ==
               "t.toml:5:13: rail[0].veth_peer: applies to transport = \"dpdk\" only (a udp rail is the kernel's socket on ip)");
    BOOST_TEST(only_error(u + "host_ip = \"198.18.0.254/24\"\n") ==
               "t.toml:5:11: rail[0].host_ip: applies to transport = \"dpdk\" only (a udp rail is the kernel's socket on ip)");
    BOOST_TEST(only_error(u + "device = \"rxe0\"\n") == "t.toml:5:10: rail[0].device: applies to transport = \"verbs\" only");
    BOOST_TEST(only_error(u + "interface = \"a/b\"\n") ==
               "t.toml:5:13: rail[0].interface: 'a/b' is not an interface name (1-15 characters, no '/', ':' or spaces)");
    BOOST_TEST(only_error("[[rail]]\nname = \"d0\"\ndevargs = \"net_null0\"\nip = \"10.0.0.1\"\ninterface = \"lo\"\n") ==
               "t.toml:5:13: rail[0].interface: applies to transport = \"udp\" only");
    BOOST_TEST(only_error(u + "[[route]]\nprefix = \"10.1.0.0/16\"\nrail = \"u0\"\n") ==
               "t.toml:7:8: route[0].rail: 'u0' is a udp rail; routes leave by dpdk rails");
}

BOOST_AUTO_TEST_CASE(verbs_rails) {
    const std::string v = "[[rail]]\nname = \"v0\"\ntransport = \"verbs\"\ndevice = \"rxe0\"\nip = \"10.0.0.1\"\n";
    BOOST_TEST(parse(v + "gid_index = 1\n").ok());
    BOOST_TEST(parse(v + "gid_type = \"roce_v2\"\n").ok());
    BOOST_TEST(only_error(v + "gid_index = 300\n") == "t.toml:6:13: rail[0].gid_index: GID index 300 out of range 0..255");
    BOOST_TEST(only_error(v + "gid_index = 1\ngid_type = \"roce_v2\"\n") ==
               "t.toml:7:12: rail[0].gid_type: give gid_index or gid_type, not both");
    BOOST_TEST(only_error(v + "gid_type = \"rocev2\"\n") ==
               "t.toml:6:12: rail[0].gid_type: 'rocev2' is not one of ib, roce_v1, roce_v2");
    BOOST_TEST(only_error(v + "devargs = \"net_null0\"\n") ==
               "t.toml:6:11: rail[0].devargs: applies to transport = \"dpdk\" only");
    BOOST_TEST(only_error(v + "port = 0\n") == "t.toml:6:8: rail[0].port: 0 out of range 1..255");
    const config::result ok = parse(v + "path_mtu = 2048\nservice_level = 3\nchunk_bytes = 8192\ntraffic_class = 106\n");
    BOOST_TEST_REQUIRE(ok.ok());
    BOOST_TEST(ok.cfg.rails[0].path_mtu == 2048u);
    BOOST_TEST(ok.cfg.rails[0].service_level == 3u);
    BOOST_TEST(ok.cfg.rails[0].chunk_bytes == 8192u);
    BOOST_TEST(parse(v).cfg.rails[0].path_mtu == 0u); // the port's active MTU
    BOOST_TEST(only_error(v + "path_mtu = 1500\n") ==
               "t.toml:6:12: rail[0].path_mtu: must be 256, 512, 1024, 2048 or 4096 (default: the port's active MTU)");
    BOOST_TEST(only_error(v + "service_level = 16\n") == "t.toml:6:17: rail[0].service_level: 16 out of range 0..15");
    BOOST_TEST(parse(v + "chunk_bytes = 1048576\n").ok());
    BOOST_TEST(only_error(v + "chunk_bytes = 8388608\n") ==
               "t.toml:6:15: rail[0].chunk_bytes: must be a power of two, 1024..4194304 (4 MiB)");
    BOOST_TEST(only_error(v + "chunk_bytes = 5000\n") ==
               "t.toml:6:15: rail[0].chunk_bytes: must be a power of two, 1024..4194304 (4 MiB)");
    BOOST_TEST(only_error(rail0 + "path_mtu = 1024\n") ==
               "t.toml:7:12: rail[0].path_mtu: applies to transport = \"verbs\" only");
}

BOOST_AUTO_TEST_CASE(verbs_rc_timers) {
    const std::string v = "[[rail]]\nname = \"v0\"\ntransport = \"verbs\"\ndevice = \"rxe0\"\nip = \"10.0.0.1\"\n";
    const config::rail d = parse(v).cfg.rails.at(0); // rdma_cm's ACK timeout, perftest's RNR timer
    BOOST_TEST((d.ack_timeout == 0u && d.retry_count == 7u && d.rnr_retry == 7u && d.min_rnr_timer == 12u));
    const config::result ok = parse(v + "ack_timeout = 14\nretry_count = 3\nrnr_retry = 0\nmin_rnr_timer = 31\n");
    BOOST_TEST_REQUIRE(ok.ok());
    const config::rail& r = ok.cfg.rails[0];
    BOOST_TEST((r.ack_timeout == 14u && r.retry_count == 3u && r.rnr_retry == 0u && r.min_rnr_timer == 31u));
    BOOST_TEST(only_error(v + "ack_timeout = 0\n") == "t.toml:6:15: rail[0].ack_timeout: 0 out of range 1..31");
    BOOST_TEST(only_error(v + "ack_timeout = 32\n") == "t.toml:6:15: rail[0].ack_timeout: 32 out of range 1..31");
    BOOST_TEST(only_error(v + "retry_count = 8\n") == "t.toml:6:15: rail[0].retry_count: 8 out of range 0..7");
    BOOST_TEST(only_error(v + "rnr_retry = -1\n") == "t.toml:6:13: rail[0].rnr_retry: -1 out of range 0..7");
    BOOST_TEST(only_error(v + "min_rnr_timer = \"fast\"\n") == "t.toml:6:17: rail[0].min_rnr_timer: must be an integer");
    for (const char* k : {"ack_timeout = 14", "retry_count = 7", "rnr_retry = 7", "min_rnr_timer = 12"})
        BOOST_TEST(only_error(rail0 + k + "\n").find("applies to transport = \"verbs\" only") != std::string::npos, k);
}

BOOST_AUTO_TEST_CASE(shaping_and_traffic_classes) {
    const config::result ok = parse(rail0 + "rate = \"10Gbit\"\nburst = 30000\n"
                                            "[[rail.tc]]\nid = 5\nstrict = true\n"
                                            "[[rail.tc]]\nid = 0\nweight = 3\nrate = \"2.5Gbit\"\n");
    for (const auto& e : ok.errors) BOOST_TEST_MESSAGE(e.text());
    BOOST_TEST_REQUIRE(ok.ok());
    const config::rail& r = ok.cfg.rails[0];
    BOOST_TEST(r.rate_bps == 10'000'000'000ull);
    BOOST_TEST(r.burst_bytes == 30000u);
    BOOST_TEST_REQUIRE(r.tcs.size() == 2u);
    BOOST_TEST((r.tcs[0].id == 5 && r.tcs[0].strict));
    BOOST_TEST((r.tcs[1].id == 0 && r.tcs[1].weight == 3u && r.tcs[1].rate_bps == 2'500'000'000ull));
    BOOST_TEST(only_error(rail0 + "rate = \"fast\"\n") ==
               "t.toml:7:8: rail[0].rate: 'fast' is not a rate like \"10Gbit\" or \"250Mbit\"");
    BOOST_TEST(only_error(rail0 + "[[rail.tc]]\nid = 8\n") == "t.toml:8:6: rail[0].tc[0].id: 8 out of range 0..7");
    BOOST_TEST(only_error(rail0 + "[[rail.tc]]\nweight = 2\n") == "t.toml:7:1: rail[0].tc[0].id: missing (the traffic class, 0..7)");
    BOOST_TEST(only_error(rail0 + "[[rail.tc]]\nid = 1\n[[rail.tc]]\nid = 1\n") ==
               "t.toml:10:6: rail[0].tc[1].id: tc 1 given twice");
    BOOST_TEST(only_error(rail0 + "[[rail.tc]]\nid = 1\nstrict = true\nweight = 2\n") ==
               "t.toml:10:10: rail[0].tc[0].weight: a strict TC has no ETS weight");
    BOOST_TEST(only_error(rail0 + "[[rail.tc]]\nid = 1\nweigth = 2\n") ==
               "t.toml:9:1: rail[0].tc[0].weigth: unknown key (did you mean 'weight'?)");
    const std::string v = "[[rail]]\nname = \"v0\"\ntransport = \"verbs\"\ndevice = \"rxe0\"\nip = \"10.0.0.1\"\n";
    BOOST_TEST(only_error(v + "rate = \"1Gbit\"\n").find("rail[0].rate: applies to transport = \"dpdk\" only") !=
               std::string::npos);
    const config::result ecn = parse(rail0 + "rate = \"1Gbit\"\necn_mark = 32\n");
    BOOST_TEST_REQUIRE(ecn.ok());
    BOOST_TEST(ecn.cfg.rails[0].ecn_mark == 32u);
    BOOST_TEST(only_error(rail0 + "ecn_mark = 0\n") == "t.toml:7:12: rail[0].ecn_mark: 0 out of range 1..4096");
    BOOST_TEST(only_error(v + "ecn_mark = 8\n").find("rail[0].ecn_mark: applies to transport = \"dpdk\" only") !=
               std::string::npos);
    const config::result m = parse(rail0 + "dscp = { 26 = 6, 46 = 5 }\n");
    BOOST_TEST_REQUIRE(m.ok());
    BOOST_TEST(m.cfg.rails[0].dscp_tc.size() == 2u);
    BOOST_TEST(only_error(rail0 + "dscp = { 64 = 1 }\n") == "t.toml:7:10: rail[0].dscp: key '64' is not a DSCP, 0..63");
    BOOST_TEST(only_error(rail0 + "dscp = { 46 = 9 }\n") == "t.toml:7:15: rail[0].dscp: DSCP 46: the TC must be 0..7");
    BOOST_TEST(only_error(rail0 + "dscp = 5\n") == "t.toml:7:8: rail[0].dscp: must be a table of DSCP = TC, like { 46 = 5 }");
    const config::result pcp = parse(rail0 + "pcp = { 3 = 6, 5 = 7 }\n");
    BOOST_TEST_REQUIRE(pcp.ok());
    BOOST_TEST(pcp.cfg.rails[0].pcp_tc.size() == 2u);
    BOOST_TEST(only_error(rail0 + "pcp = { 8 = 1 }\n") == "t.toml:7:9: rail[0].pcp: key '8' is not a PCP, 0..7");
    BOOST_TEST(only_error(rail0 + "sl = { 1 = 1 }\n") ==
               "t.toml:7:6: rail[0].sl: applies to transport = \"verbs\" only (dpdk rails: dscp, pcp)");
    const config::result sl = parse(v + "service_level = 3\nsl = { 3 = 6 }\n");
    BOOST_TEST_REQUIRE(sl.ok());
    BOOST_TEST((sl.cfg.rails[0].sl_tc == std::vector<std::pair<unsigned, unsigned>>{{3, 6}}));
    BOOST_TEST(only_error(v + "sl = { 16 = 1 }\n") == "t.toml:6:8: rail[0].sl: key '16' is not a SL, 0..15");
    BOOST_TEST(only_error(v + "pcp = { 1 = 1 }\n").find("rail[0].pcp: applies to transport = \"dpdk\" only") !=
               std::string::npos);
    std::uint64_t bps = 0;
    BOOST_TEST((railgate::qos::parse_rate("250Mbit", bps) && bps == 250'000'000ull));
    BOOST_TEST((railgate::qos::parse_rate("1.5gbit", bps) && bps == 1'500'000'000ull));
    BOOST_TEST((railgate::qos::parse_rate("64kbps", bps) && bps == 64'000ull));
    BOOST_TEST(!railgate::qos::parse_rate("0Mbit", bps));
    BOOST_TEST(!railgate::qos::parse_rate("12 furlongs", bps));
}

// An idle lcore's weight beside a busy task: nice -10 unless set; 0
// keeps the thread's own; nothing outside -20..0.
BOOST_AUTO_TEST_CASE(shared_nice) {
    BOOST_TEST(parse(rail0).cfg.shared_nice == -10);
    BOOST_TEST(parse("[daemon]\nshared_nice = -5\n" + rail0).cfg.shared_nice == -5);
    BOOST_TEST(parse("[daemon]\nshared_nice = 0\n" + rail0).cfg.shared_nice == 0);
    BOOST_TEST(only_error("[daemon]\nshared_nice = 5\n" + rail0) == "t.toml:2:15: daemon.shared_nice: 5 out of range -20..0");
    BOOST_TEST(only_error("[daemon]\nshared_nice = -21\n" + rail0) ==
               "t.toml:2:15: daemon.shared_nice: -21 out of range -20..0");
}

BOOST_AUTO_TEST_CASE(verbs_eager_rings) {
    BOOST_TEST(parse(rail0).cfg.verbs_eager_rings);
    BOOST_TEST(!parse("[daemon]\nverbs_eager_rings = false\n" + rail0).cfg.verbs_eager_rings);
    BOOST_TEST(!parse("[daemon]\nverbs_eager_rings = 1\n" + rail0).ok());
    BOOST_TEST(only_error("[daemon]\nshared_nice = \"high\"\n" + rail0) ==
               "t.toml:2:15: daemon.shared_nice: must be an integer");
}

// How long a silent control client is kept: 5 s unless set; 1 s at least.
BOOST_AUTO_TEST_CASE(client_timeout) {
    BOOST_TEST(parse(rail0).cfg.client_timeout_ms == 5000u);
    BOOST_TEST(parse("[daemon]\nclient_timeout_ms = 1000\n" + rail0).cfg.client_timeout_ms == 1000u);
    BOOST_TEST(only_error("[daemon]\nclient_timeout_ms = 999\n" + rail0) ==
               "t.toml:2:21: daemon.client_timeout_ms: 999 out of range 1000..3600000");
}

BOOST_AUTO_TEST_CASE(gateway_routes) {
    BOOST_TEST(parse(rail0).cfg.neighbour_reachable == 30u);
    BOOST_TEST(parse("[daemon]\nneighbour_reachable = 5\n" + rail0).cfg.neighbour_reachable == 5u);
    BOOST_TEST(only_error("[daemon]\nneighbour_reachable = 0\n" + rail0) ==
               "t.toml:2:23: daemon.neighbour_reachable: 0 out of range 1..86400");
    const std::string two = rail0 + "[[rail]]\nname = \"r1\"\ndevargs = \"net_null1\"\nip = \"10.1.0.1\"\n";
    const config::result r = parse(two + "[[route]]\nprefix = \"10.2.0.0/16\"\nrail = \"r1\"\nvia = \"10.1.0.254\"\n"
                                         "[[route]]\nprefix = \"0.0.0.0/0\"\nrail = \"r0\"\n");
    BOOST_TEST_REQUIRE(r.ok());
    BOOST_TEST_REQUIRE(r.cfg.routes.size() == 2u);
    BOOST_TEST(r.cfg.routes[0].prefix == 0x0A020000u);
    BOOST_TEST(r.cfg.routes[0].len == 16u);
    BOOST_TEST(r.cfg.routes[0].via == 0x0A0100FEu);
    BOOST_TEST(r.cfg.routes[1].via == 0u);
    const std::string route = two + "[[route]]\n";
    BOOST_TEST(only_error(route + "prefix = \"10.2.0.1/16\"\nrail = \"r1\"\n") ==
               "t.toml:12:10: route[0].prefix: '10.2.0.1/16' has host bits set (10.2.0.0/16?)");
    BOOST_TEST(only_error(route + "prefix = \"10.2.0.0/16\"\nrail = \"r9\"\n") == "t.toml:13:8: route[0].rail: no rail 'r9'");
    BOOST_TEST(only_error(route + "rail = \"r1\"\n") == "t.toml:11:1: route[0].prefix: missing (like \"10.2.0.0/24\")");
    BOOST_TEST(only_error(route + "prefix = \"10.2.0.0/16\"\nrail = \"r1\"\nvia = \"10.1.0.1\"\n") ==
               "t.toml:14:7: route[0].via: is rail r1's own address");
    BOOST_TEST(only_error(route + "prefix = \"10.2.0.0/16\"\nrail = \"r1\"\nmetric = 1\n") ==
               "t.toml:14:1: route[0].metric: unknown key");
    BOOST_TEST(only_error(route + "prefix = \"10.2.0.0/16\"\nrail = \"r1\"\n" + "[[route]]\nprefix = \"10.2.0.0/16\"\nrail = \"r0\"\n") ==
               "t.toml:15:10: route[1].prefix: 10.2.0.0/16 is routed twice");
    const std::string v = "[[rail]]\nname = \"v0\"\ntransport = \"verbs\"\ndevice = \"rxe0\"\nip = \"10.9.0.1\"\n";
    BOOST_TEST(only_error(rail0 + v + "[[route]]\nprefix = \"10.2.0.0/16\"\nrail = \"v0\"\n") ==
               "t.toml:14:8: route[0].rail: 'v0' is a verbs rail; routes leave by dpdk rails");
}

BOOST_AUTO_TEST_CASE(every_error_is_reported_not_just_the_first) {
    const config::result r = parse(
        "[daemon]\nudp_port = 0\n[policy]\nmode = \"bond\"\n"
        "[[rail]]\nname = \"a\"\ndevargs = \"net_null0\"\nip = \"10.0.0.1\"\nmtu = 100\n"
        "[[rail]]\nname = \"a\"\ndevargs = \"net_null1\"\nip = \"10.0.0.1\"\ntraffic_class = 256\n");
    BOOST_TEST(r.errors.size() == 6u);
    std::string all;
    for (const auto& e : r.errors) all += e.text() + "\n";
    BOOST_TEST_MESSAGE(all);
    for (const char* want : {"daemon.udp_port: 0 out of range 1..65535", "policy.mode: 'bond'",
                             "rail[0].mtu: MTU 100", "rail[1].traffic_class: 256 out of range 0..255",
                             "rail[1].name: 'a' names two rails", "rail[1].ip: address used by another rail"})
        BOOST_TEST(all.find(want) != std::string::npos, want);
}

BOOST_AUTO_TEST_CASE(syntax_errors_are_located) {
    const std::string e = only_error("[daemon]\nudp_port = = 3\n");
    BOOST_TEST(e.find("t.toml:2:") == 0u, e);
    const config::result r = parse("rail = 3\n");
    BOOST_TEST_REQUIRE(r.errors.size() == 2u);
    BOOST_TEST(r.errors[0].text() == "t.toml:1:8: rail: must be an array of tables ([[rail]])");
    BOOST_TEST(only_error("daemon = 3\n" + rail0) == "t.toml:1:10: daemon: must be a table ([daemon])");
}

// A file gets a real EAL unless it says otherwise: hugepages, telemetry, and
// PCI when a rail names a PCI device.
BOOST_AUTO_TEST_CASE(eal_table) {
    using v = std::vector<std::string>;
    BOOST_TEST(config::eal_arguments(parse(rail0).cfg) == (v{"--no-pci", "--in-memory"}),
               boost::test_tools::per_element());
    const std::string pci_rail = "[[rail]]\nname = \"p0\"\ndevargs = \"0000:3b:00.0\"\nip = \"10.0.0.1\"\n";
    BOOST_TEST(config::eal_arguments(parse(pci_rail).cfg) == (v{"--in-memory"}), boost::test_tools::per_element());
    const config::result full = parse(R"([eal]
lcores = "0,2-9"
main_lcore = 0
socket_mem = "1024,1024"
huge_dir = "/dev/hugepages1G"
pci = true
in_memory = false
file_prefix = "rg1"
iova_mode = "va"
log_levels = ["lib.eal:error", "pmd.net.mlx5:debug"]
args = ["--legacy-mem"]
)" + rail0);
    for (const auto& e : full.errors) BOOST_TEST_MESSAGE(e.text());
    BOOST_TEST_REQUIRE(full.ok());
    BOOST_TEST(config::eal_arguments(full.cfg) ==
                   (v{"-l", "0,2-9", "--main-lcore", "0", "--socket-mem", "1024,1024", "--huge-dir", "/dev/hugepages1G",
                      "--file-prefix", "rg1", "--iova-mode", "va", "--log-level", "lib.eal:error", "--log-level",
                      "pmd.net.mlx5:debug", "--legacy-mem"}),
               boost::test_tools::per_element());
    BOOST_TEST(only_error("[eal]\nlcores = \"0-3;8\"\n" + rail0) ==
               "t.toml:2:10: eal.lcores: '0-3;8' is not a CPU list like \"0-3,8\"");
    BOOST_TEST(only_error("[eal]\nhugepages = false\nsocket_mem = \"512\"\n" + rail0) ==
               "t.toml:3:14: eal.socket_mem: needs hugepages (hugepages = false)");
    BOOST_TEST(only_error("[eal]\nfile_prefix = \"x\"\n" + rail0) ==
               "t.toml:2:15: eal.file_prefix: has no effect with in_memory = true");
    BOOST_TEST(only_error("[eal]\niova_mode = \"ab\"\n" + rail0) == "t.toml:2:13: eal.iova_mode: 'ab' is not one of va, pa");
    BOOST_TEST(only_error("[eal]\nargs = [\"\"]\n" + rail0) ==
               "t.toml:2:9: eal.args: must be an array of non-empty strings");
    BOOST_TEST(only_error("[eal]\nhugepage = false\n" + rail0) ==
               "t.toml:2:1: eal.hugepage: unknown key (did you mean 'hugepages'?)");
    BOOST_TEST(only_error("[eal]\npci = false\n" + pci_rail) ==
               "t.toml:5:11: rail[0].devargs: '0000:3b:00.0' is a PCI device, and [eal] pci = false");
}

// railgated.toml(5) documents every key the parser knows, under its table,
// and no key the parser does not.
BOOST_AUTO_TEST_CASE(man_page_documents_every_key) {
    std::ifstream in(RAILGATE_SOURCE_ROOT "/doc/railgated.toml.5");
    BOOST_TEST_REQUIRE(in.good());
    std::set<std::string> documented;
    std::string line, table;
    while (std::getline(in, line)) {
        if (line.rfind(".SS [", 0) == 0) {
            table = line.substr(4);
            table.erase(std::remove(table.begin(), table.end(), '['), table.end());
            table.erase(std::remove(table.begin(), table.end(), ']'), table.end());
        } else if (line.rfind(".SH", 0) == 0) {
            table.clear();
        } else if (!table.empty() && line.rfind(".B ", 0) == 0 && line.find(' ', 3) == std::string::npos) {
            documented.insert(table + "." + line.substr(3));
        }
    }
    const std::set<std::string> known = config::known_keys();
    BOOST_TEST(known.size() > 60u);
    for (const std::string& k : known) BOOST_TEST(documented.count(k), k << " is not in railgated.toml(5)");
    for (const std::string& k : documented) BOOST_TEST(known.count(k), k << " is documented but not parsed");
}

BOOST_AUTO_TEST_CASE(shared_validators) {
    BOOST_TEST(config::check_mtu(9000).empty());
    BOOST_TEST(config::check_mtu(70000) == "MTU 70000 out of range 576..9216");
    BOOST_TEST(config::check_mtu(9216, 4000) == "MTU 9216 out of range 576..4000");
    BOOST_TEST(config::check_gid_index(255).empty());
    BOOST_TEST(!config::check_gid_index(-1).empty());
    BOOST_TEST(config::check_rail_name("gpu0").empty());
    BOOST_TEST(!config::check_rail_name("").empty());
    BOOST_TEST(!config::check_rail_name("a b").empty());
    BOOST_TEST(!config::check_rail_name("a-very-long-rail-name").empty());
}
