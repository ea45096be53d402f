#include "control/config.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>

#define TOML_ENABLE_FORMATTERS 0
#include <toml++/toml.h>

#include "control/cli.hpp"
#include "dataplane/proto/wire.hpp"
#include "dataplane/fault/injector.hpp"
#include "dataplane/net/fib.hpp"
#include "dataplane/qos/classify.hpp"

namespace railgate::config {

std::string_view name(transport t) noexcept {
    return t == transport::dpdk ? "dpdk" : t == transport::verbs ? "verbs" : "udp";
}
std::string_view name(policy_mode p) noexcept { return p == policy_mode::rail ? "rail" : "lag"; }
std::string_view name(lag_hash h) noexcept { return h == lag_hash::l2 ? "l2" : "l3l4"; }
std::string_view name(gid_type g) noexcept {
    switch (g) {
    case gid_type::ib: return "ib";
    case gid_type::roce_v1: return "roce_v1";
    default: return "roce_v2";
    }
}

bool parse_policy_mode(std::string_view s, policy_mode& out) noexcept {
    if (s == "rail") out = policy_mode::rail;
    else if (s == "lag") out = policy_mode::lag;
    else return false;
    return true;
}

bool parse_lag_hash(std::string_view s, lag_hash& out) noexcept {
    if (s == "l2") out = lag_hash::l2;
    else if (s == "l3l4") out = lag_hash::l3l4;
    else return false;
    return true;
}

std::string error::text() const {
    std::string s = file;
    if (line) s += ":" + std::to_string(line) + ":" + std::to_string(column);
    s += ": ";
    if (!field.empty()) s += field + ": ";
    return s + what;
}

std::string check_mtu(long long v, unsigned max) {
    if (v < mtu_min || v > max) return wire::mtu_range_error(v, max);
    return {};
}

std::string check_gid_index(long long v) {
    if (v < 0 || v > gid_index_max) return "GID index " + std::to_string(v) + " out of range 0..255";
    return {};
}

std::string check_rail_name(std::string_view s) {
    if (s.empty() || s.size() > 15) return "rail name must be 1..15 characters";
    for (char c : s)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
            return "rail name '" + std::string(s) + "' may hold only letters, digits, '_', '-' and '.'";
    return {};
}

std::string check_metrics(std::string_view v, bool allow_public) {
    const auto colon = v.rfind(':');
    const std::string host(colon == std::string_view::npos ? std::string_view{} : v.substr(0, colon));
    const std::string port(colon == std::string_view::npos ? std::string_view{} : v.substr(colon + 1));
    std::uint64_t p = 0;
    in_addr ia{};
    if (!parse_unsigned(port, p) || p < 1 || p > 65535 || host.empty()) return "'" + std::string(v) + "' is not HOST:PORT";
    if (host == "localhost") return {};
    if (inet_pton(AF_INET, host.c_str(), &ia) != 1) return "'" + host + "' is not an IPv4 address";
    if (!allow_public && (ntohl(ia.s_addr) >> 24) != 127)
        return "'" + host + "' is not a loopback address (metrics stay on 127.0.0.0/8 unless metrics_public = true, "
               "or railgated's --metrics-public, says otherwise)";
    return {};
}

bool is_pci(const rail& r) { return r.transport == transport::dpdk && r.devargs.rfind("net_", 0) != 0; }

std::vector<std::string> eal_arguments(const appliance& a) {
    const eal_options& e = a.eal;
    std::vector<std::string> v;
    auto flag = [&](const char* f, const std::string& x) {
        if (x.empty()) return;
        v.push_back(f);
        v.push_back(x);
    };
    flag("-l", e.lcores);
    if (e.main_lcore >= 0) flag("--main-lcore", std::to_string(e.main_lcore));
    if (!e.hugepages) v.push_back("--no-huge");
    flag("-m", e.memory_mb ? std::to_string(e.memory_mb) : e.hugepages ? "" : "512");
    flag("--socket-mem", e.socket_mem);
    flag("--huge-dir", e.huge_dir);
    const bool pci = e.pci.value_or(std::any_of(a.rails.begin(), a.rails.end(), is_pci));
    if (!pci) v.push_back("--no-pci");
    // Without hugepages the EAL uses legacy memory, which --in-memory refuses;
    // --no-shconf keeps the same promise (no files, no secondaries) there.
    if (e.in_memory) v.push_back(e.hugepages ? "--in-memory" : "--no-shconf");
    flag("--file-prefix", e.file_prefix);
    if (!e.telemetry) v.push_back("--no-telemetry");
    flag("--iova-mode", e.iova_mode);
    for (const std::string& l : e.log_levels) flag("--log-level", l);
    v.insert(v.end(), e.args.begin(), e.args.end());
    return v;
}

std::string devarg(const std::string& d, const std::string& key) {
    std::size_t at = 0;
    while ((at = d.find(key + "=", at)) != std::string::npos) {
        if (at > 0 && d[at - 1] == ',') {
            const std::size_t v = at + key.size() + 1;
            return d.substr(v, d.find(',', v) - v);
        }
        ++at;
    }
    return {};
}

namespace {

// A node's integer, only when it is one: toml++'s value<long long>() on a
// float casts it first, undefined beyond the range of long long (1e300;
// found by tests/fuzz/fuzz_config).
std::optional<long long> int_of(const toml::node* n) {
    if (!n || !n->is_integer()) return std::nullopt;
    return n->value<long long>();
}

unsigned edit_distance(std::string_view a, std::string_view b) {
    std::vector<unsigned> prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<unsigned>(j);
    for (std::size_t i = 1; i <= a.size(); ++i) {
        cur[0] = static_cast<unsigned>(i);
        for (std::size_t j = 1; j <= b.size(); ++j)
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0u : 1u)});
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

// While known_keys() runs: every key a reader is asked about, as
// "table.key" ("rail.tc.weight").
thread_local std::set<std::string>* key_log = nullptr;

// "rail[1].tc[0]" -> "rail.tc"
std::string table_of(const std::string& prefix) {
    std::string t;
    for (std::size_t i = 0; i < prefix.size(); ++i) {
        if (prefix[i] == '[') i = prefix.find(']', i);
        else t += prefix[i];
    }
    return t;
}

// Reads one table's keys into typed fields, recording located errors, and
// flags keys it was never asked about.
class reader {
public:
    reader(const toml::table& t, std::string prefix, const std::string& file, std::vector<error>& errs)
        : t_(t), prefix_(std::move(prefix)), file_(file), errs_(errs) {}

    void fail(const toml::node* n, const std::string& key, const std::string& what) {
        fail_at(n ? n->source() : t_.source(), key, what);
    }

    void fail_at(const toml::source_region& src, const std::string& key, const std::string& what) {
        error e;
        e.file = file_;
        e.line = src.begin.line;
        e.column = src.begin.column;
        e.field = key.empty() ? prefix_ : prefix_.empty() ? key : prefix_ + "." + key;
        e.what = what;
        errs_.push_back(std::move(e));
    }

    const toml::node* get(const std::string& key) {
        known_.insert(key);
        if (key_log && !prefix_.empty()) key_log->insert(table_of(prefix_) + "." + key);
        return t_.get(key);
    }

    bool has(const std::string& key) { return get(key) != nullptr; }

    void integer(const std::string& key, long long lo, long long hi, auto& out) {
        const toml::node* n = get(key);
        if (!n) return;
        const auto v = int_of(n);
        if (!n->is_integer() || !v) return fail(n, key, "must be an integer");
        if (*v < lo || *v > hi)
            return fail(n, key, std::to_string(*v) + " out of range " + std::to_string(lo) + ".." + std::to_string(hi));
        out = static_cast<std::remove_reference_t<decltype(out)>>(*v);
    }

    bool string(const std::string& key, std::string& out) {
        const toml::node* n = get(key);
        if (!n) return false;
        if (!n->is_string()) {
            fail(n, key, "must be a string");
            return false;
        }
        out = *n->value<std::string>();
        return true;
    }

    void ipv4(const std::string& key, std::uint32_t& out, unsigned* prefix = nullptr) {
        std::string s;
        if (!string(key, s)) return;
        std::string addr = s;
        if (const auto slash = s.find('/'); prefix && slash != std::string::npos) {
            addr = s.substr(0, slash);
            const std::string p = s.substr(slash + 1);
            std::uint64_t v = 0;
            if (!parse_unsigned(p, v) || v < 1 || v > 32) return fail(get(key), key, "'" + s + "': bad prefix length");
            *prefix = static_cast<unsigned>(v);
        }
        in_addr a{};
        if (inet_pton(AF_INET, addr.c_str(), &a) != 1) return fail(get(key), key, "'" + s + "' is not an IPv4 address");
        out = ntohl(a.s_addr);
    }

    template <class E>
    void choice(const std::string& key, std::initializer_list<std::pair<std::string_view, E>> opts, E& out) {
        std::string s;
        if (!string(key, s)) return;
        std::string list;
        for (const auto& [k, v] : opts) {
            if (s == k) {
                out = v;
                return;
            }
            list += (list.empty() ? "" : ", ") + std::string(k);
        }
        fail(get(key), key, "'" + s + "' is not one of " + list);
    }

    // A reader for a table nested under `key` (its errors name prefix.key).
    reader nested(const toml::table& t, const std::string& key) { return reader(t, prefix_ + "." + key, file_, errs_); }

    bool boolean(const std::string& key, bool& out) {
        const toml::node* n = get(key);
        if (!n) return false;
        if (!n->is_boolean()) {
            fail(n, key, "must be true or false");
            return false;
        }
        out = *n->value<bool>();
        return true;
    }

    // A rate like "10Gbit" or "250Mbit" (bits per second).
    void rate(const std::string& key, std::uint64_t& out) {
        std::string s;
        if (!string(key, s)) return;
        if (!qos::parse_rate(s, out)) fail(get(key), key, "'" + s + "' is not a rate like \"10Gbit\" or \"250Mbit\"");
    }

    // Every key not read is an error, with the nearest known key suggested.
    void reject_unknown() {
        for (const auto& [k, v] : t_) {
            const std::string key(k.str());
            if (known_.count(key)) continue;
            std::string best;
            unsigned bd = 3;
            for (const std::string& cand : known_)
                if (const unsigned d = edit_distance(key, cand); d < bd) bd = d, best = cand;
            (void)v;
            fail_at(k.source(), key, "unknown key" + (best.empty() ? std::string() : " (did you mean '" + best + "'?)"));
        }
    }

private:
    const toml::table& t_;
    std::string prefix_;
    const std::string& file_;
    std::vector<error>& errs_;
    std::set<std::string> known_;
};

void read_daemon(reader& r, appliance& a, std::vector<error>&) {
    r.integer("udp_port", 1, 65535, a.udp_port);
    if (r.string("control_socket", a.control_socket)) {
        if (a.control_socket.empty() || a.control_socket[0] != '/')
            r.fail(r.get("control_socket"), "control_socket", "must be an absolute path");
        else if (a.control_socket.size() >= 108)
            r.fail(r.get("control_socket"), "control_socket", "longer than a unix socket path may be (107)");
    }
    std::string mode;
    if (r.string("socket_mode", mode)) {
        char* end = nullptr;
        const long v = std::strtol(mode.c_str(), &end, 8);
        if (mode.empty() || *end || v < 0 || v > 0777)
            r.fail(r.get("socket_mode"), "socket_mode", "'" + mode + "' is not an octal mode like \"0660\"");
        else
            a.socket_mode = static_cast<unsigned>(v);
    }
    if (r.string("socket_owner", a.socket_owner) && !getpwnam(a.socket_owner.c_str()))
        r.fail(r.get("socket_owner"), "socket_owner", "no user '" + a.socket_owner + "'");
    if (r.string("socket_group", a.socket_group) && !getgrnam(a.socket_group.c_str()))
        r.fail(r.get("socket_group"), "socket_group", "no group '" + a.socket_group + "'");
    r.boolean("metrics_public", a.metrics_public);
    if (r.string("metrics", a.metrics) && !a.metrics.empty())
        if (std::string e = check_metrics(a.metrics, a.metrics_public); !e.empty()) r.fail(r.get("metrics"), "metrics", e);
    r.integer("stats_interval", 0, 86400, a.stats_interval);
    r.integer("neighbour_reachable", 1, 86400, a.neighbour_reachable);
    r.choice<idle_mode>("idle", {{"auto", idle_mode::automatic}, {"spin", idle_mode::spin}, {"yield", idle_mode::yield},
                                     {"sleep", idle_mode::sleep}},
                        a.idle);
    r.boolean("verbs_eager_rings", a.verbs_eager_rings);
    r.integer("shared_nice", -20, 0, a.shared_nice);
    r.integer("client_timeout_ms", 1000, 3600000, a.client_timeout_ms);
    if (const toml::node* n = r.get("eal_args"))
        r.fail(n, "eal_args", "moved to the [eal] table (its keys, and args = [...] for other EAL flags)");
    r.reject_unknown();
}

// A string of the characters in `allowed` only (EAL list syntaxes).
void charset(reader& r, const std::string& key, std::string& out, std::string_view allowed, const char* what) {
    if (!r.string(key, out)) return;
    if (out.empty() || out.find_first_not_of(allowed) != std::string::npos)
        r.fail(r.get(key), key, "'" + out + "' is not " + what);
}

void strings(reader& r, const std::string& key, std::vector<std::string>& out) {
    const toml::node* n = r.get(key);
    if (!n) return;
    const toml::array* arr = n->as_array();
    if (!arr) return r.fail(n, key, "must be an array of strings");
    for (const toml::node& e : *arr) {
        if (!e.is_string() || e.value<std::string>()->empty()) return r.fail(&e, key, "must be an array of non-empty strings");
        out.push_back(*e.value<std::string>());
    }
}

void read_eal(reader& r, appliance& a) {
    eal_options& e = a.eal;
    charset(r, "lcores", e.lcores, "0123456789,-", "a CPU list like \"0-3,8\"");
    r.integer("main_lcore", 0, 1023, e.main_lcore);
    r.integer("memory_mb", 0, 1 << 24, e.memory_mb);
    charset(r, "socket_mem", e.socket_mem, "0123456789,", "megabytes per NUMA node like \"1024,1024\"");
    r.boolean("hugepages", e.hugepages);
    if (r.string("huge_dir", e.huge_dir) && (e.huge_dir.empty() || e.huge_dir[0] != '/'))
        r.fail(r.get("huge_dir"), "huge_dir", "must be an absolute path");
    if (bool pci = true; r.boolean("pci", pci)) e.pci = pci;
    r.boolean("in_memory", e.in_memory);
    r.boolean("telemetry", e.telemetry);
    r.choice<std::string>("iova_mode", {{"va", "va"}, {"pa", "pa"}}, e.iova_mode);
    charset(r, "file_prefix", e.file_prefix,
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.", "a name of letters, digits, '_', '-', '.'");
    strings(r, "log_levels", e.log_levels);
    strings(r, "args", e.args);
    if (!e.hugepages && (!e.socket_mem.empty() || !e.huge_dir.empty()))
        r.fail(r.get(e.socket_mem.empty() ? "huge_dir" : "socket_mem"), e.socket_mem.empty() ? "huge_dir" : "socket_mem",
               "needs hugepages (hugepages = false)");
    if (e.in_memory && !e.file_prefix.empty())
        r.fail(r.get("file_prefix"), "file_prefix", "has no effect with in_memory = true");
    r.reject_unknown();
}

void read_pools(reader& r, appliance& a) {
    r.integer("max_jobs", 1, 1024, a.max_jobs);
    r.integer("max_slots", 1, 65535, a.max_slots);
    r.integer("default_slots", 1, 65535, a.default_slots);
    r.integer("mbufs_per_rail", 1024, 1 << 22, a.mbufs_per_rail);
    if (a.default_slots > a.max_slots)
        r.fail(r.get("default_slots"), "default_slots",
               std::to_string(a.default_slots) + " exceeds max_slots " + std::to_string(a.max_slots));
    r.reject_unknown();
}

void read_jobs(reader& r, appliance& a) {
    r.integer("stall_ms", 10, 3600000, a.stall_ms);
    r.integer("assemble_ms", 100, 86400000, a.assemble_ms);
    r.integer("idle_ms", 0, 604800000, a.idle_ms);
    r.integer("max_pending_joins", 0, 1024, a.max_pending_joins);
    if (r.string("fault", a.fault)) {
        fault::spec f;
        if (std::string e = fault::parse(a.fault, f); !e.empty()) r.fail(r.get("fault"), "fault", e);
    }
    r.reject_unknown();
}

void read_policy(reader& r, appliance& a) {
    r.choice<policy_mode>("mode", {{"rail", policy_mode::rail}, {"lag", policy_mode::lag}}, a.policy);
    if (r.has("hash")) {
        r.choice<lag_hash>("hash", {{"l2", lag_hash::l2}, {"l3l4", lag_hash::l3l4}}, a.hash);
        if (a.policy != policy_mode::lag) r.fail(r.get("hash"), "hash", "applies to mode = \"lag\" only");
    }
    r.reject_unknown();
}

// [[rail.tc]]: one table per traffic class that is not the default (ETS
// weight 1, uncapped).
void read_tcs(reader& r, rail& x) {
    const toml::node* n = r.get("tc");
    if (!n) return;
    const toml::array* arr = n->as_array();
    if (!arr) return r.fail(n, "tc", "must be [[rail.tc]] tables");
    std::uint8_t seen = 0;
    for (std::size_t i = 0; i < arr->size(); ++i) {
        const toml::table* t = (*arr)[i].as_table();
        if (!t) {
            r.fail(&(*arr)[i], "tc", "must be [[rail.tc]] tables");
            continue;
        }
        reader tr = r.nested(*t, "tc[" + std::to_string(i) + "]");
        rail::traffic_class_cfg c;
        if (!tr.has("id")) tr.fail(nullptr, "id", "missing (the traffic class, 0..7)");
        tr.integer("id", 0, 7, c.id);
        if (seen & (1u << c.id)) tr.fail(tr.get("id"), "id", "tc " + std::to_string(c.id) + " given twice");
        seen = static_cast<std::uint8_t>(seen | (1u << c.id));
        tr.boolean("strict", c.strict);
        tr.integer("weight", 1, 100, c.weight);
        if (c.strict && tr.has("weight")) tr.fail(tr.get("weight"), "weight", "a strict TC has no ETS weight");
        tr.rate("rate", c.rate_bps);
        tr.integer("burst", 1500, 1ll << 30, c.burst_bytes);
        tr.reject_unknown();
        x.tcs.push_back(c);
    }
}

// dscp = { 26 = 6, 46 = 5 } (and pcp, sl): which TC a DSCP, VLAN PCP or
// IB service level goes to.
void read_tc_table(reader& r, const char* field, unsigned max, const char* example,
                   std::vector<std::pair<unsigned, unsigned>>& out) {
    const toml::node* n = r.get(field);
    if (!n) return;
    const toml::table* t = n->as_table();
    std::string what = field;
    for (char& c : what) c = static_cast<char>(c - 'a' + 'A');
    if (!t) return r.fail(n, field, "must be a table of " + what + " = TC, like " + example);
    for (const auto& [k, v] : *t) {
        const std::string key(k.str());
        std::uint64_t d = 0;
        const auto tc = int_of(&v);
        if (!parse_unsigned(key, d) || d > max)
            r.fail_at(k.source(), field, "key '" + key + "' is not a " + what + ", 0.." + std::to_string(max));
        else if (!v.is_integer() || !tc || *tc < 0 || *tc > 7) r.fail(&v, field, what + " " + key + ": the TC must be 0..7");
        else out.emplace_back(static_cast<unsigned>(d), static_cast<unsigned>(*tc));
    }
}

// [[route]] prefix = "10.2.0.0/24", rail = "r1", via = "10.2.0.254"
void read_route(reader& r, appliance& a) {
    route x;
    if (!r.string("prefix", x.prefix_text)) r.fail(nullptr, "prefix", "missing (like \"10.2.0.0/24\")");
    else if (const std::string e = net::parse_prefix(x.prefix_text, x.prefix, x.len); !e.empty())
        r.fail(r.get("prefix"), "prefix", e);
    if (!r.string("rail", x.rail)) r.fail(nullptr, "rail", "missing (the rail the prefix is reached by)");
    if (r.has("via")) r.ipv4("via", x.via);
    r.reject_unknown();
    a.routes.push_back(std::move(x));
}

bool ifname_ok(const std::string& n) {
    if (n.empty() || n.size() > 15 || n == "." || n == "..") return false;
    return std::all_of(n.begin(), n.end(), [](char c) { return c > ' ' && c <= '~' && c != '/' && c != ':'; });
}

void read_rail(reader& r, rail& x) {
    if (r.string("name", x.name)) {
        if (const std::string e = check_rail_name(x.name); !e.empty()) r.fail(r.get("name"), "name", e);
    } else {
        r.fail(nullptr, "name", "missing");
    }
    r.choice<transport>("transport", {{"dpdk", transport::dpdk}, {"verbs", transport::verbs}, {"udp", transport::udp}},
                        x.transport);
    if (x.transport != transport::verbs) { // dpdk and udp: railgated's rail loop, shaped in software
        for (const char* k : {"device", "port", "gid_index", "gid_type", "path_mtu", "service_level", "chunk_bytes",
                              "ack_timeout", "retry_count", "rnr_retry", "min_rnr_timer"})
            if (r.has(k)) r.fail(r.get(k), k, "applies to transport = \"verbs\" only");
        r.rate("rate", x.rate_bps);
        r.integer("burst", 1500, 1ll << 30, x.burst_bytes);
        r.integer("ecn_mark", 1, 4096, x.ecn_mark);
        read_tcs(r, x);
        read_tc_table(r, "dscp", 63, "{ 46 = 5 }", x.dscp_tc);
        read_tc_table(r, "pcp", 7, "{ 3 = 6 }", x.pcp_tc);
        if (r.has("sl")) r.fail(r.get("sl"), "sl", "applies to transport = \"verbs\" only (dpdk rails: dscp, pcp)");
    }
    if (x.transport == transport::udp) {
        for (const char* k : {"devargs", "veth_peer", "host_ip"})
            if (r.has(k)) r.fail(r.get(k), k, "applies to transport = \"dpdk\" only (a udp rail is the kernel's socket on ip)");
        if (r.string("interface", x.interface) && !ifname_ok(x.interface))
            r.fail(r.get("interface"), "interface", "'" + x.interface + "' is not an interface name (1-15 characters, no '/', ':' or spaces)");
    } else if (r.has("interface")) {
        r.fail(r.get("interface"), "interface", "applies to transport = \"udp\" only");
    }
    if (x.transport == transport::dpdk) {
        if (!r.string("devargs", x.devargs)) r.fail(nullptr, "devargs", "missing (a DPDK vdev or PCI address)");
        else if (x.devargs.empty() || x.devargs[0] == ',') r.fail(r.get("devargs"), "devargs", "empty device name");
        if (r.string("veth_peer", x.veth_peer)) {
            const std::string iface = devarg(x.devargs, "iface");
            if (x.devargs.rfind("net_af_packet", 0) != 0 && x.devargs.rfind("net_af_xdp", 0) != 0)
                r.fail(r.get("veth_peer"), "veth_peer", "applies to net_af_packet and net_af_xdp rails only");
            else if (!ifname_ok(iface))
                r.fail(r.get("veth_peer"), "veth_peer", "the devargs name no valid iface= for the pair's other end");
            else if (!ifname_ok(x.veth_peer))
                r.fail(r.get("veth_peer"), "veth_peer", "'" + x.veth_peer + "' is not an interface name (1-15 characters, no '/', ':' or spaces)");
            else if (x.veth_peer == iface)
                r.fail(r.get("veth_peer"), "veth_peer", "the peer must differ from iface=" + iface);
        }
    } else if (x.transport == transport::verbs) {
        if (!r.string("device", x.device) || x.device.empty()) r.fail(r.get("device"), "device", "missing (an RDMA device, e.g. mlx5_0)");
        r.integer("port", 1, 255, x.port);
        if (r.has("devargs")) r.fail(r.get("devargs"), "devargs", "applies to transport = \"dpdk\" only");
        read_tc_table(r, "sl", 15, "{ 3 = 6 }", x.sl_tc);
        for (const char* k : {"rate", "burst", "tc", "dscp", "pcp", "ecn_mark"})
            if (r.has(k))
                r.fail(r.get(k), k, "applies to transport = \"dpdk\" only (a verbs rail's HCA schedules; set its "
                                    "traffic_class and service_level)");
        if (const toml::node* n = r.get("gid_index")) {
            const auto v = int_of(n);
            if (!n->is_integer() || !v) r.fail(n, "gid_index", "must be an integer");
            else if (const std::string e = check_gid_index(*v); !e.empty()) r.fail(n, "gid_index", e);
            else x.gid_index = static_cast<unsigned>(*v);
        }
        if (r.has("gid_type")) {
            gid_type g = gid_type::roce_v2;
            r.choice<gid_type>("gid_type", {{"ib", gid_type::ib}, {"roce_v1", gid_type::roce_v1}, {"roce_v2", gid_type::roce_v2}}, g);
            x.gid_type = g;
            if (x.gid_index) r.fail(r.get("gid_type"), "gid_type", "give gid_index or gid_type, not both");
        }
        if (const toml::node* n = r.get("path_mtu")) {
            const auto v = int_of(n);
            if (!n->is_integer() || !v || (*v != 256 && *v != 512 && *v != 1024 && *v != 2048 && *v != 4096))
                r.fail(n, "path_mtu", "must be 256, 512, 1024, 2048 or 4096 (default: the port's active MTU)");
            else
                x.path_mtu = static_cast<unsigned>(*v);
        }
        r.integer("service_level", 0, 15, x.service_level);
        if (const toml::node* n = r.get("chunk_bytes")) {
            const auto v = int_of(n);
            if (!n->is_integer() || !v || *v < 1024 || *v > 4194304 || (*v & (*v - 1)))
                r.fail(n, "chunk_bytes", "must be a power of two, 1024..4194304 (4 MiB)");
            else
                x.chunk_bytes = static_cast<unsigned>(*v);
        }
        // 0 would be an ACK timer that never fires: a lost packet never resent.
        r.integer("ack_timeout", 1, 31, x.ack_timeout);
        r.integer("retry_count", 0, 7, x.retry_count);
        r.integer("rnr_retry", 0, 7, x.rnr_retry);
        r.integer("min_rnr_timer", 0, 31, x.min_rnr_timer);
    }
    if (!r.has("ip")) r.fail(nullptr, "ip", "missing");
    r.ipv4("ip", x.ip);
    if (r.has("host_ip")) r.ipv4("host_ip", x.host_ip, &x.host_prefix);
    if (const toml::node* n = r.get("mtu")) {
        const auto v = int_of(n);
        if (!n->is_integer() || !v) r.fail(n, "mtu", "must be an integer");
        else if (const std::string e = check_mtu(*v); !e.empty()) r.fail(n, "mtu", e);
        else x.mtu = static_cast<unsigned>(*v);
    }
    if (const toml::node* n = r.get("mtu_max")) {
        const auto v = int_of(n);
        if (!n->is_integer() || !v) r.fail(n, "mtu_max", "must be an integer");
        else if (const std::string e = check_mtu(*v); !e.empty()) r.fail(n, "mtu_max", e);
        else if (static_cast<unsigned>(*v) < x.mtu) r.fail(n, "mtu_max", std::to_string(*v) + " is below mtu " + std::to_string(x.mtu));
        else x.mtu_max = static_cast<unsigned>(*v);
    }
    r.integer("numa", 0, 63, x.numa);
    r.integer("lcore", 0, 1023, x.lcore);
    r.integer("traffic_class", 0, 255, x.traffic_class);
    r.reject_unknown();
}

} // namespace

result parse(std::string_view text, const std::string& file) {
    result res;
    res.cfg.source = file;
    toml::table root;
    try {
        root = toml::parse(text, file);
    } catch (const toml::parse_error& e) {
        error er;
        er.file = file;
        er.line = e.source().begin.line;
        er.column = e.source().begin.column;
        er.what = std::string(e.description());
        res.errors.push_back(std::move(er));
        return res;
    }
    appliance& a = res.cfg;
    reader top(root, "", file, res.errors);
    auto section = [&](const char* key, auto&& fn) {
        const toml::node* n = top.get(key);
        if (!n) return;
        const toml::table* t = n->as_table();
        if (!t) return top.fail(n, key, "must be a table ([" + std::string(key) + "])");
        reader r(*t, key, file, res.errors);
        fn(r);
    };
    section("daemon", [&](reader& r) { read_daemon(r, a, res.errors); });
    section("jobs", [&](reader& r) { read_jobs(r, a); });
    section("pools", [&](reader& r) { read_pools(r, a); });
    section("eal", [&](reader& r) { read_eal(r, a); });
    section("policy", [&](reader& r) { read_policy(r, a); });
    if (const toml::node* n = top.get("rail")) {
        const toml::array* arr = n->as_array();
        if (!arr || !arr->is_array_of_tables()) {
            top.fail(n, "rail", "must be an array of tables ([[rail]])");
        } else {
            for (std::size_t i = 0; i < arr->size(); ++i) {
                rail x;
                reader r(*arr->get(i)->as_table(), "rail[" + std::to_string(i) + "]", file, res.errors);
                read_rail(r, x);
                a.rails.push_back(std::move(x));
            }
        }
    }
    if (const toml::node* n = top.get("route")) {
        const toml::array* arr = n->as_array();
        if (!arr || !arr->is_array_of_tables()) {
            top.fail(n, "route", "must be an array of tables ([[route]])");
        } else {
            for (std::size_t i = 0; i < arr->size(); ++i) {
                reader r(*arr->get(i)->as_table(), "route[" + std::to_string(i) + "]", file, res.errors);
                read_route(r, a);
            }
        }
    }
    top.reject_unknown();

    // Rules across fields.
    if (a.rails.empty()) top.fail(nullptr, "rail", "no rails configured (add a [[rail]] table)");
    if (a.rails.size() > 32) top.fail(top.get("rail"), "rail", std::to_string(a.rails.size()) + " rails; at most 32");
    std::set<std::string> names;
    std::set<std::uint32_t> ips;
    std::set<std::string> ifaces; // of the veth pairs railgated makes
    const toml::array* arr = root.get("rail") ? root.get("rail")->as_array() : nullptr;
    for (std::size_t i = 0; i < a.rails.size(); ++i) {
        const rail& x = a.rails[i];
        reader r(*arr->get(i)->as_table(), "rail[" + std::to_string(i) + "]", file, res.errors);
        if (!x.name.empty() && !names.insert(x.name).second) r.fail(r.get("name"), "name", "'" + x.name + "' names two rails");
        if (x.ip && !ips.insert(x.ip).second) r.fail(r.get("ip"), "ip", "address used by another rail");
        if (const std::string i = devarg(x.devargs, "iface");
            !x.veth_peer.empty() && x.veth_peer != i && (!ifaces.insert(x.veth_peer).second || !ifaces.insert(i).second))
            r.fail(r.get("veth_peer"), "veth_peer", "an interface of this pair is another rail's");
        if (is_pci(x) && a.eal.pci == false)
            r.fail(r.get("devargs"), "devargs", "'" + x.devargs + "' is a PCI device, and [eal] pci = false");
    }
    for (rail& x : a.rails)
        if (!x.mtu_max) x.mtu_max = std::max(x.mtu, 9000u);
    const toml::array* routes = root.get("route") ? root.get("route")->as_array() : nullptr;
    std::set<std::pair<std::uint32_t, unsigned>> prefixes;
    for (std::size_t i = 0; routes && i < a.routes.size(); ++i) {
        const route& rt = a.routes[i];
        reader r(*routes->get(i)->as_table(), "route[" + std::to_string(i) + "]", file, res.errors);
        const auto x = std::find_if(a.rails.begin(), a.rails.end(), [&](const rail& y) { return y.name == rt.rail; });
        if (!rt.rail.empty() && x == a.rails.end()) r.fail(r.get("rail"), "rail", "no rail '" + rt.rail + "'");
        else if (x != a.rails.end() && x->transport != transport::dpdk)
            r.fail(r.get("rail"), "rail", "'" + rt.rail + "' is a " + std::string(name(x->transport)) +
                                              " rail; routes leave by dpdk rails");
        if (rt.prefix_text.size() && !prefixes.insert({rt.prefix, rt.len}).second)
            r.fail(r.get("prefix"), "prefix", rt.prefix_text + " is routed twice");
        for (const rail& y : a.rails)
            if (rt.via && y.ip == rt.via) r.fail(r.get("via"), "via", "is rail " + y.name + "'s own address");
    }
    return res;
}

result load(const std::string& path) {
    // Read with POSIX calls, bounded: a directory says so (a stream reads
    // it as an empty file), and /dev/zero or an endless pipe is refused
    // at max_config_bytes instead of read until memory runs out.
    auto refused = [&](const std::string& why) {
        result res;
        res.cfg.source = path;
        res.errors.push_back({path, 0, 0, "", why});
        return res;
    };
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return refused("cannot read: " + std::string(std::strerror(errno)));
    std::string text;
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) != 0) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int e = errno;
            close(fd);
            return refused("cannot read: " + std::string(std::strerror(e)));
        }
        text.append(buf, static_cast<std::size_t>(n));
        if (text.size() > max_config_bytes) {
            close(fd);
            return refused("larger than " + std::to_string(max_config_bytes >> 20) +
                           " MiB, not a railgated configuration");
        }
    }
    close(fd);
    return parse(text, path);
}

std::set<std::string> known_keys() {
    // A file that takes every branch of the parser: each table present, a
    // dpdk rail with a traffic class, a verbs rail, a route. Its values do
    // not matter; the readers record each key they look up.
    static constexpr std::string_view every_branch = R"([daemon]
[eal]
[pools]
[jobs]
[policy]
[[rail]]
name = "d"
devargs = "net_null0"
ip = "10.0.0.1"
[[rail.tc]]
id = 1
[[rail]]
name = "v"
transport = "verbs"
device = "x"
ip = "10.0.0.2"
[[rail]]
name = "u"
transport = "udp"
interface = "lo"
ip = "10.0.0.3"
[[route]]
prefix = "10.1.0.0/16"
rail = "d"
)";
    std::set<std::string> keys;
    key_log = &keys;
    parse(every_branch, "(known keys)");
    key_log = nullptr;
    return keys;
}

appliance embedded_default() {
    result r = parse(embedded_default_text(), "(embedded default)");
    // The embedded text is part of the build; the unit tests keep it valid.
    return r.cfg;
}

} // namespace railgate::config
