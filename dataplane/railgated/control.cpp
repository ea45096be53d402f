#include "dataplane/railgated/control.hpp"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdio>

#include <rte_cycles.h>
#include <rte_telemetry.h>

#include "control/version.hpp"
#include "dataplane/net/fib.hpp"
#include "dataplane/railgated/verbs_control.hpp"
#include "dataplane/reduce/reduce.hpp"
#include "dataplane/log/log.hpp"

namespace railgate {

using control::json;

control_plane* control_plane::instance = nullptr;

namespace {

std::string mac_text(const std::uint8_t* m) {
    char b[18];
    std::snprintf(b, sizeof b, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
    return b;
}


} // namespace

control_plane::control_plane(net::daemon& d, const config::appliance& cfg)
    : d_(d), cfg_(cfg), hash_(cfg.hash), started_(std::chrono::steady_clock::now()) {}

void control_plane::log_change(const control::request& r, const std::string& what) {
    log::notice("control: uid %ld pid %ld: %s", r.peer_uid, r.peer_pid, what.c_str());
}

// A rail's entry in a status list (which skips removed rails), by index.
const net::rail_status* control_plane::status_of(const std::vector<net::rail_status>& st, std::size_t index) {
    for (const net::rail_status& s : st)
        if (s.index == index) return &s;
    return nullptr;
}

std::string control_plane::find_rail(const json& args, int& index, bool required) const {
    std::optional<std::string> name;
    if (std::string e = control::get_string(args, "rail", name); !e.empty()) return e;
    index = -1;
    if (!name) return required ? "argument 'rail' missing" : "";
    std::string known;
    for (std::size_t i = 0; i < d_.rail_count(); ++i) {
        if (!d_.rail_active(i)) continue;
        if (d_.rail(i).name == *name) {
            index = static_cast<int>(i);
            return {};
        }
        known += (known.empty() ? "" : ", ") + d_.rail(i).name;
    }
    if (verbs_ && verbs_rail_index(*verbs_, *name) >= 0)
        return "rail '" + *name + "' is a verbs rail: this applies to DPDK and udp rails (" + known + ")";
    return "rail '" + *name + "' does not exist (rails: " + known +
           (verbs_ ? "; verbs rails: " + verbs_rail_names(*verbs_) : std::string()) + ")";
}

json control_plane::rail_json(const net::rail_status& r) const {
    json j = {{"name", r.name},
              {"transport", r.driver == "udp" ? "udp" : "dpdk"},
              {"device", r.port_name},
              {"driver", r.driver},
              {"ifname", r.ifname},
              {"host_ifname", r.host_ifname},
              {"port", r.port},
              {"numa", r.numa},
              {"lcore", r.lcore},
              {"ip", net::format_ipv4(r.ip)},
              {"udp_port", r.udp_port},
              {"mac", mac_text(r.mac)},
              {"mtu", r.mtu},
              {"mtu_target", r.mtu_target},
              {"mtu_max", r.mtu_max},
              {"chunk_bytes", r.chunk_bytes},
              {"traffic_class", r.traffic_class},
              {"active_jobs", r.active_jobs},
              {"xdp_steering", r.xdp_steering},
              {"link", r.link_up ? "up" : "down"},
              {"fault", fault::format(r.fault)}};
    for (const config::rail& c : cfg_.rails) {
        if (c.name != r.name) continue;
        if (c.gid_index) j["gid_index"] = *c.gid_index;
    }
    // The shaping, for a shaped rail only (a status or rail list is asked
    // for often: by railctl stats --watch, by scripts).
    if (shaped(d_.rail(r.index))) j["shaping"] = tc_json(r.index);
    return j;
}

bool control_plane::shaped(const net::rail_config& rc) {
    return rc.rate_bps != 0 ||
           std::any_of(rc.tcs.begin(), rc.tcs.end(), [](const qos::tc_config& t) { return t.strict || t.rate_bps; });
}

json control_plane::tc_json(std::size_t i) const {
    const net::rail_config& rc = d_.rail(i);
    const net::rail_counters& c = d_.counters(i);
    json tcs = json::array();
    for (unsigned t = 0; t < qos::tc_count; ++t)
        tcs.push_back({{"tc", t},
                       {"strict", rc.tcs[t].strict},
                       {"weight", rc.tcs[t].weight},
                       {"rate_bps", rc.tcs[t].rate_bps},
                       {"burst_bytes", rc.tcs[t].burst_bytes},
                       {"packets", c.tc_packets[t].load(std::memory_order_relaxed)},
                       {"bytes", c.tc_bytes[t].load(std::memory_order_relaxed)},
                       {"drops", c.tc_drops[t].load(std::memory_order_relaxed)}});
    json dscp = json::object(), pcp = json::object(); // entries that differ from the defaults
    for (unsigned d = 0; d < 64; ++d)
        if (rc.tc_map.dscp[d] != d >> 3) dscp[std::to_string(d)] = rc.tc_map.dscp[d];
    for (unsigned p = 0; p < 8; ++p)
        if (rc.tc_map.pcp[p] != p) pcp[std::to_string(p)] = rc.tc_map.pcp[p];
    return {{"rail", rc.name},
            {"dscp", dscp},
            {"pcp", pcp},
            {"rate_bps", rc.rate_bps},
            {"burst_bytes", rc.burst_bytes},
            {"shaped", shaped(rc)},
            {"tcs", tcs}};
}

json control_plane::counters_json(std::size_t i) const {
    const net::rail_counters& c = d_.counters(i);
    auto v = [](const net::counter& x) { return x.load(std::memory_order_relaxed); };
    json j = {{"rail", d_.rail(i).name},
              {"rx_packets", v(c.rx_packets)},
              {"rx_bytes", v(c.rx_bytes)},
              {"tx_packets", v(c.tx_packets)},
              {"tx_bytes", v(c.tx_bytes)},
              {"aggregations", v(c.aggregations)},
              {"results_sent", v(c.results_sent)},
              {"results_resent", v(c.results_resent)},
              {"held", v(c.held)},
              {"held_queued", v(c.held_queued)},
              {"queried", v(c.queried)},
              {"ecn_marked", v(c.ecn_marked)},
              {"ends_retold", v(c.ends_retold)},
              {"fault_duplicated", v(c.fault_dups)},
              {"fault_reordered", v(c.fault_reorders)},
              {"fault_corrupted", v(c.fault_corrupts)},
              {"arp_replies", v(c.arp_replies)},
              {"icmp_replies", v(c.icmp_replies)},
              {"udp_coalesced", v(c.udp_coalesced)},
              {"udp_copied", v(c.udp_copied)},
              {"fwd_packets", v(c.fwd_packets)},
              {"fwd_bytes", v(c.fwd_bytes)},
              {"arp_requests", v(c.arp_requests)},
              {"neighbours", v(c.neighbours)},
              {"icmp_errors", v(c.icmp_errors)},
              {"capture_packets", v(c.capture_packets)},
              {"capture_overruns", v(c.capture_overruns)},
              {"busy_percent", v(c.poll_cycles) ? 100.0 * static_cast<double>(v(c.busy_cycles)) /
                                                      static_cast<double>(v(c.poll_cycles))
                                                : 0.0}};
    shared_counters_json(c, j);
    if (const auto x = d_.xdp_counters(i)) {
        json xj = json::object();
        for (unsigned r = 0; r < RG_XDP_REASONS; ++r) xj[std::string(xdp::reason_name(r))] = (*x)[r];
        j["xdp"] = xj;
    }
    return j;
}

// capture.start names rails (or "all") and passes the output file; status
// and stop name the capture.
json control_plane::capture(const control::request& r) {
    using control::fail;
    const json& a = r.args;
    if (r.command == "capture.status") return capture_.status(a);
    if (r.command == "capture.stop") return capture_.stop(a);
    if (r.command != "capture.start") return fail("unknown command '" + r.command + "'");
    if (!a.is_object() || !a.contains("rails")) return fail("argument 'rails' missing");
    const json& names = a["rails"];
    std::vector<std::size_t> rails;
    if (names.is_string() && names.get<std::string>() == "all") {
        for (std::size_t i = 0; i < d_.rail_count(); ++i)
            if (d_.rail_active(i)) rails.push_back(i);
    } else if (names.is_array() && !names.empty()) {
        for (const json& n : names) {
            if (!n.is_string()) return fail("argument 'rails': a list of rail names, or \"all\"");
            const std::string name = n.get<std::string>();
            if (verbs_ && !verbs_counters_json(*verbs_, name).empty())
                return fail("rail " + name +
                            " is a verbs rail: its packets never pass railgated's lcores. Capture it with tcpdump on "
                            "its netdev (SoftRoCE: the rxe device's parent, e.g. `tcpdump -i eth0 udp port 4791`), "
                            "or with the NIC vendor's tool (Mellanox: docker-based ibdump)");
            int idx = -1;
            if (std::string e = find_rail({{"rail", name}}, idx, true); !e.empty()) return fail(e);
            if (std::find(rails.begin(), rails.end(), static_cast<std::size_t>(idx)) != rails.end())
                return fail("rail " + name + " named twice");
            rails.push_back(static_cast<std::size_t>(idx));
        }
    } else {
        return fail("argument 'rails': a list of rail names, or \"all\"");
    }
    json out = capture_.start(rails, a, r.fd);
    if (out.value("ok", false)) log_change(r, "capture.start " + a.dump());
    return out;
}

json control_plane::handle(const control::request& r) {
    using control::fail;
    using control::ok;
    const json& a = r.args;
    std::string e;
    if (r.command == "status") {
        if (!(e = control::check_keys(a, {})).empty()) return fail(e);
        json rails = json::array();
        for (const net::rail_status& s : d_.status()) rails.push_back(rail_json(s));
        return ok({{"daemon", daemon_json(cfg_, started_, std::string(wire::policy_name(d_.policy())),
                                          std::string(config::name(hash_)), d_.job_chunk_bytes())},
                   {"rails", rails},
                   {"verbs_rails", verbs_ ? verbs_rails_json(*verbs_) : json::array()}});
    }
    // A verbs rail's name: its own show and set (verbs_control.cpp).
    if (verbs_ && (r.command == "rail.show" || r.command == "rail.set") && a.contains("rail") && a["rail"].is_string())
        if (const int v = verbs_rail_index(*verbs_, a["rail"].get<std::string>()); v >= 0) {
            if (r.command == "rail.set") return verbs_rail_set(*verbs_, v, r);
            if (!(e = control::check_keys(a, {"rail"})).empty()) return fail(e);
            return ok(verbs_rail_show(*verbs_, v));
        }
    if (r.command == "rail.list" || r.command == "rail.show") {
        const bool show = r.command == "rail.show";
        if (!(e = control::check_keys(a, show ? std::initializer_list<std::string_view>{"rail"}
                                              : std::initializer_list<std::string_view>{}))
                 .empty())
            return fail(e);
        int idx = -1;
        if (show && !(e = find_rail(a, idx, true)).empty()) return fail(e);
        const auto st = d_.status();
        if (!show) {
            json rails = json::array();
            for (const auto& s : st) rails.push_back(rail_json(s));
            return ok({{"rails", rails}, {"verbs_rails", verbs_ ? verbs_rails_json(*verbs_) : json::array()}});
        }
        const net::rail_status* s = status_of(st, static_cast<std::size_t>(idx));
        if (!s) return fail("rail was removed meanwhile");
        json j = rail_json(*s);
        j["counters"] = counters_json(static_cast<std::size_t>(idx));
        return ok(j);
    }
    if (r.command == "rail.set") {
        if (!(e = control::check_keys(a, {"rail", "mtu", "gid_index"})).empty()) return fail(e);
        int idx = -1;
        if (!(e = find_rail(a, idx, true)).empty()) return fail(e);
        std::optional<std::uint64_t> mtu, gid;
        const bool gid_auto = a.contains("gid_index") && a["gid_index"] == "auto";
        if (!(e = control::get_uint(a, "mtu", UINT32_MAX, mtu)).empty()) return fail(e);
        if (!gid_auto && !(e = control::get_uint(a, "gid_index", UINT32_MAX, gid)).empty()) return fail(e);
        if (!!mtu == (gid || gid_auto)) return fail("give exactly one of 'mtu' and 'gid_index'");
        const std::string& name = d_.rail(static_cast<std::size_t>(idx)).name;
        if (gid || gid_auto) {
            if (gid && !(e = config::check_gid_index(static_cast<long long>(*gid))).empty()) return fail(e);
            return fail("rail '" + name + "' is a DPDK rail: it has no GID table (GIDs belong to verbs rails)");
        }
        if (!(e = config::check_mtu(static_cast<long long>(*mtu), config::mtu_max)).empty()) return fail(e);
        std::string state;
        if (!(e = d_.set_mtu(static_cast<std::size_t>(idx), static_cast<unsigned>(*mtu), state)).empty()) return fail(e);
        log_change(r, "rail.set " + name + " mtu " + std::to_string(*mtu));
        const auto st = d_.status();
        const net::rail_status* s = status_of(st, static_cast<std::size_t>(idx));
        if (!s) return fail("rail was removed meanwhile");
        json j = rail_json(*s);
        j["state"] = state;
        return ok(j);
    }
    if (r.command == "rail.add") {
        if (!(e = control::check_keys(a, {"rail", "devargs", "ip", "mtu", "host_ip", "lcore"})).empty()) return fail(e);
        std::optional<std::string> name, devargs, ip, host_ip;
        std::optional<std::uint64_t> mtu, lcore;
        for (auto [k, o] : {std::pair{"rail", &name}, {"devargs", &devargs}, {"ip", &ip}, {"host_ip", &host_ip}})
            if (!(e = control::get_string(a, k, *o)).empty()) return fail(e);
        if (!(e = control::get_uint(a, "mtu", UINT32_MAX, mtu)).empty()) return fail(e);
        if (!(e = control::get_uint(a, "lcore", RTE_MAX_LCORE - 1, lcore)).empty()) return fail(e);
        if (!name || !devargs || !ip) return fail("rail.add needs 'rail', 'devargs' and 'ip'");
        if (!(e = config::check_rail_name(*name)).empty()) return fail(e);
        net::rail_config rc;
        rc.name = *name;
        if (!net::parse_ipv4(*ip, rc.ip)) return fail("'" + *ip + "' is not an IPv4 address");
        if (host_ip) {
            const auto slash = host_ip->find('/');
            const std::string addr = host_ip->substr(0, slash);
            if (!net::parse_ipv4(addr, rc.host_ip)) return fail("host_ip '" + *host_ip + "' is not A.B.C.D/N");
            if (slash != std::string::npos) {
                const std::string pl = host_ip->substr(slash + 1);
                if (pl.empty() || pl.size() > 2 || pl.find_first_not_of("0123456789") != std::string::npos ||
                    std::stoi(pl) < 1 || std::stoi(pl) > 32)
                    return fail("host_ip '" + *host_ip + "': bad prefix length");
                rc.host_prefix = static_cast<unsigned>(std::stoi(pl));
            }
        }
        rc.mtu = static_cast<std::uint16_t>(mtu.value_or(1500));
        if (!(e = config::check_mtu(static_cast<long long>(mtu.value_or(1500)))).empty()) return fail(e);
        rc.mtu_max = rc.mtu;
        rc.udp_port = cfg_.udp_port;
        rc.lcore = lcore ? static_cast<int>(*lcore) : -1;
        std::size_t idx = 0;
        if (!(e = d_.add_rail(rc, *devargs, idx)).empty()) return fail("rail.add " + *name + ": " + e);
        log_change(r, "rail.add " + *name + " " + *devargs + " " + *ip);
        for (const net::rail_status& st : d_.status())
            if (st.name == *name) return ok(rail_json(st));
        return fail("rail.add: the new rail is not listed");
    }
    if (r.command == "rail.remove") {
        if (!(e = control::check_keys(a, {"rail"})).empty()) return fail(e);
        int idx = -1;
        if (!(e = find_rail(a, idx, true)).empty()) return fail(e);
        const std::string name = d_.rail(static_cast<std::size_t>(idx)).name;
        if (!(e = d_.remove_rail(static_cast<std::size_t>(idx))).empty()) return fail("rail.remove: " + e);
        log_change(r, "rail.remove " + name);
        return ok({{"removed", name}});
    }
    if (r.command == "policy.show") {
        if (!(e = control::check_keys(a, {})).empty()) return fail(e);
        return ok({{"mode", wire::policy_name(d_.policy())}, {"hash", std::string(config::name(hash_))}});
    }
    if (r.command == "policy.set") {
        if (!(e = control::check_keys(a, {"mode", "hash"})).empty()) return fail(e);
        std::optional<std::string> mode, hash;
        if (!(e = control::get_string(a, "mode", mode)).empty()) return fail(e);
        if (!(e = control::get_string(a, "hash", hash)).empty()) return fail(e);
        config::policy_mode pm;
        if (!mode || !config::parse_policy_mode(*mode, pm))
            return fail("policy mode '" + mode.value_or("") + "' is not one of rail, lag");
        config::lag_hash h = hash_;
        if (hash && pm != config::policy_mode::lag) return fail("hash applies to the lag policy only");
        if (hash && !config::parse_lag_hash(*hash, h)) return fail("hash '" + *hash + "' is not one of l2, l3l4");
        const auto p = pm == config::policy_mode::lag ? wire::rail_policy::lag : wire::rail_policy::rail;
        if (!(e = d_.set_policy(p, h == config::lag_hash::l2 ? wire::lag_hash::l2 : wire::lag_hash::l3l4)).empty())
            return fail(e);
        hash_ = h;
        log_change(r, std::string("policy.set ") + wire::policy_name(p));
        return ok({{"mode", wire::policy_name(p)}, {"hash", std::string(config::name(hash_))}, {"applies", "to jobs that join from now on"}});
    }
    if (r.command == "tc.list") {
        if (!(e = control::check_keys(a, {"rail"})).empty()) return fail(e);
        int idx = -1;
        if (!(e = find_rail(a, idx, false)).empty()) return fail(e);
        json rails = json::array();
        for (std::size_t i = 0; i < d_.rail_count(); ++i)
            if (d_.rail_active(i) && (idx < 0 || static_cast<int>(i) == idx)) rails.push_back(tc_json(i));
        return ok({{"rails", rails}});
    }
    if (r.command == "tc.set") {
        if (!(e = control::check_keys(a, {"rail", "tc", "rate", "burst", "weight", "strict"})).empty()) return fail(e);
        int idx = -1;
        if (!(e = find_rail(a, idx, true)).empty()) return fail(e);
        std::optional<std::uint64_t> tc, burst, weight;
        std::optional<std::string> rate_text;
        bool strict = false;
        if (!(e = control::get_uint(a, "tc", 7, tc)).empty()) return fail(e);
        if (!(e = control::get_uint(a, "burst", 1u << 30, burst)).empty()) return fail(e);
        if (!(e = control::get_uint(a, "weight", 100, weight)).empty()) return fail(e);
        if (!(e = control::get_string(a, "rate", rate_text)).empty()) return fail(e);
        if (!(e = control::get_bool(a, "strict", strict)).empty()) return fail(e);
        std::uint64_t rate = 0;
        if (rate_text && *rate_text != "0" && *rate_text != "off" && !qos::parse_rate(*rate_text, rate))
            return fail("'" + *rate_text + "' is not a rate like 10Gbit or 250Mbit (0 or off: no cap)");
        if (burst && *burst < 1500) return fail("burst " + std::to_string(*burst) + " below 1500 bytes");
        if (weight && *weight == 0) return fail("weight 0 out of range 1..100");
        const auto i = static_cast<std::size_t>(idx);
        const net::rail_config& rc = d_.rail(i);
        std::uint64_t rail_rate = rc.rate_bps, rail_burst = rc.burst_bytes;
        std::array<qos::tc_config, qos::tc_count> tcs = rc.tcs;
        if (!tc) {
            if (weight || strict) return fail("weight and strict belong to a traffic class: tc.set rail R tc N ...");
            if (!rate_text && !burst) return fail("give the rail's rate and/or burst");
            if (rate_text) rail_rate = rate;
            if (burst) rail_burst = *burst;
        } else {
            qos::tc_config& t = tcs[*tc];
            if ((rate_text || burst) + !!weight + strict != 1)
                return fail("give one of: rate (and burst), weight, strict");
            if (rate_text) t.rate_bps = rate;
            if (burst) t.burst_bytes = *burst;
            if (weight) t = {false, static_cast<unsigned>(*weight), t.rate_bps, t.burst_bytes};
            if (strict) t.strict = true;
        }
        if (!(e = d_.set_shaping(i, rail_rate, rail_burst, tcs)).empty()) return fail(e);
        log_change(r, "tc.set " + rc.name + " " + a.dump());
        return ok(tc_json(i));
    }
    if (r.command == "fault.show" || r.command == "fault.set") {
        const bool set = r.command == "fault.set";
        if (!(e = control::check_keys(a, set ? std::initializer_list<std::string_view>{"rail", "spec"}
                                              : std::initializer_list<std::string_view>{"rail"}))
                 .empty())
            return fail(e);
        int idx = -1;
        if (!(e = find_rail(a, idx, set)).empty()) return fail(e);
        if (set) {
            std::optional<std::string> text;
            if (!(e = control::get_string(a, "spec", text)).empty()) return fail(e);
            if (!text) return fail("argument 'spec' missing");
            fault::spec f;
            if (!(e = fault::parse(*text, f)).empty()) return fail(e);
            if (!(e = d_.set_fault(static_cast<std::size_t>(idx), f)).empty()) return fail(e);
            log_change(r, "fault.set rail " + d_.rail(static_cast<std::size_t>(idx)).name + " " + fault::format(f));
        }
        json rails = json::array();
        for (const net::rail_status& s : d_.status()) {
            if (idx >= 0 && s.index != static_cast<std::size_t>(idx)) continue;
            const net::rail_counters& c = d_.counters(s.index);
            rails.push_back({{"rail", s.name},
                             {"spec", fault::format(s.fault)},
                             {"dropped", c.drops[static_cast<unsigned>(drop_reason::fault_injected)].load()},
                             {"duplicated", c.fault_dups.load()},
                             {"reordered", c.fault_reorders.load()},
                             {"corrupted", c.fault_corrupts.load()}});
        }
        return ok({{"rails", rails}});
    }
    if (r.command == "fault.freeze") {
        if (!(e = control::check_keys(a, {"rail", "ms"})).empty()) return fail(e);
        int idx = -1;
        if (!(e = find_rail(a, idx, true)).empty()) return fail(e);
        std::optional<std::uint64_t> ms;
        if (!(e = control::get_uint(a, "ms", net::daemon::max_freeze_ms, ms)).empty()) return fail(e);
        if (!ms) return fail("argument 'ms' missing");
        const auto i = static_cast<std::size_t>(idx);
        unsigned lcore = 0;
        if (!(e = d_.freeze(i, static_cast<std::uint32_t>(*ms), lcore)).empty()) return fail(e);
        log_change(r, "fault.freeze rail " + d_.rail(i).name + " (lcore " + std::to_string(lcore) + ") for " +
                          std::to_string(*ms) + " ms");
        return ok({{"rail", d_.rail(i).name}, {"lcore", lcore}, {"ms", *ms}});
    }
    if (r.command == "route.list") {
        if (!(e = control::check_keys(a, {})).empty()) return fail(e);
        json routes = json::array();
        for (const net::route_status& x : d_.routes())
            routes.push_back({{"prefix", net::format_prefix(x.prefix, x.len)},
                              {"rail", x.rail},
                              {"via", x.via ? net::format_ipv4(x.via) : "on-link"},
                              {"packets", x.packets},
                              {"bytes", x.bytes}});
        return ok({{"routes", routes}});
    }
    if (r.command == "route.add" || r.command == "route.del") {
        const bool add = r.command == "route.add";
        if (!(e = add ? control::check_keys(a, {"prefix", "rail", "via"}) : control::check_keys(a, {"prefix"})).empty())
            return fail(e);
        std::optional<std::string> prefix, via;
        if (!(e = control::get_string(a, "prefix", prefix)).empty()) return fail(e);
        if (!prefix) return fail("argument 'prefix' missing");
        net::route_config rt;
        if (!(e = net::parse_prefix(*prefix, rt.prefix, rt.len)).empty()) return fail(e);
        if (!add) {
            if (!(e = d_.remove_route(rt.prefix, rt.len)).empty()) return fail(e);
            log_change(r, "route.del " + *prefix);
            return ok({{"deleted", *prefix}});
        }
        int idx = -1;
        if (!(e = find_rail(a, idx, true)).empty()) return fail(e);
        rt.rail = d_.rail(static_cast<std::size_t>(idx)).name;
        if (!(e = control::get_string(a, "via", via)).empty()) return fail(e);
        if (via && !net::parse_ipv4(*via, rt.via)) return fail("via '" + *via + "' is not an IPv4 address");
        if (!(e = d_.add_route(rt)).empty()) return fail(e);
        log_change(r, "route.add " + *prefix + " " + rt.rail);
        return ok({{"added", *prefix}, {"rail", rt.rail}, {"via", rt.via ? net::format_ipv4(rt.via) : "on-link"}});
    }
    if (r.command.starts_with("capture.")) return capture(r);
    if (r.command == "stats") {
        if (!(e = control::check_keys(a, {"rail"})).empty()) return fail(e);
        // A verbs rail's name selects it alone.
        if (verbs_ && a.contains("rail") && a["rail"].is_string()) {
            json v = verbs_counters_json(*verbs_, a["rail"].get<std::string>());
            if (!v.empty()) return ok({{"rails", v}});
        }
        int idx = -1;
        if (!(e = find_rail(a, idx, false)).empty()) return fail(e);
        json rails = json::array();
        for (std::size_t i = 0; i < d_.rail_count(); ++i)
            if (d_.rail_active(i) && (idx < 0 || static_cast<int>(i) == idx)) rails.push_back(counters_json(i));
        if (verbs_ && idx < 0)
            for (const json& v : verbs_counters_json(*verbs_)) rails.push_back(v);
        // The lcores (the one serving the rail asked for): how each shared
        // its CPU.
        json lcores = json::array();
        const std::string only = idx < 0 ? "" : d_.rail(static_cast<std::size_t>(idx)).name;
        for (const net::lcore_status& l : d_.lcores()) {
            if (!only.empty() && std::find(l.rails.begin(), l.rails.end(), only) == l.rails.end()) continue;
            lcores.push_back({{"lcore", l.lcore},
                              {"rails", l.rails},
                              {"runq_wait_seconds", static_cast<double>(l.runq_wait_ns) / 1e9},
                              {"core_shared", l.shared},
                              {"core_shared_seconds", static_cast<double>(l.shared_ns) / 1e9},
                              {"absences", l.absences},
                              {"absent_seconds", static_cast<double>(l.absent_ns) / 1e9},
                              {"since_pass_seconds", static_cast<double>(l.since_pass_ns) / 1e9}});
        }
        return ok({{"rails", rails}, {"lcores", lcores}});
    }
    if (r.command == "job.list") {
        if (!(e = control::check_keys(a, {"rail"})).empty()) return fail(e);
        std::vector<agg::job_view> js;
        // A verbs rail's name selects it alone.
        if (verbs_ && a.contains("rail") && a["rail"].is_string()) {
            const int v = verbs_rail_index(*verbs_, a["rail"].get<std::string>());
            if (v >= 0) {
                if (!(e = verbs_->jobs(v, js)).empty()) return fail(e);
                return ok({{"jobs", jobs_json(js)}});
            }
        }
        int idx = -1;
        if (!(e = find_rail(a, idx, false)).empty()) return fail(e);
        if (!(e = d_.jobs(idx, js)).empty()) return fail(e);
        if (verbs_ && idx < 0 && !(e = verbs_->jobs(-1, js)).empty()) return fail(e);
        return ok({{"jobs", jobs_json(js)}});
    }
    if (r.command == "job.abort") {
        std::uint32_t job = 0;
        std::string text;
        if (!(e = abort_args(a, job, text)).empty()) return fail(e);
        std::vector<std::string> ended_on;
        unsigned told = 0;
        if (!(e = d_.abort_job(job, text, ended_on, told)).empty()) return fail(e);
        if (verbs_ && !(e = verbs_->abort_job(job, text, ended_on, told)).empty()) return fail(e);
        if (!ended_on.empty()) log_change(r, "job.abort " + std::to_string(job));
        return abort_answer(job, ended_on, told);
    }
    if (r.command == "latency") {
        if (!(e = control::check_keys(a, {"rail", "job", "reset", "worker", "tc"})).empty()) return fail(e);
        // A verbs rail's name selects it alone.
        if (verbs_ && a.contains("rail") && a["rail"].is_string())
            if (const int v = verbs_rail_index(*verbs_, a["rail"].get<std::string>()); v >= 0)
                return verbs_latency(*verbs_, v, a);
        int idx = -1;
        if (!(e = find_rail(a, idx, false)).empty()) return fail(e);
        std::optional<std::uint64_t> job, tc;
        if (!(e = control::get_uint(a, "job", UINT32_MAX, job)).empty()) return fail(e);
        if (!(e = control::get_uint(a, "tc", 7, tc)).empty()) return fail(e);
        bool reset = false, worker = false;
        if (!(e = control::get_bool(a, "reset", reset)).empty()) return fail(e);
        if (!(e = control::get_bool(a, "worker", worker)).empty()) return fail(e);
        stats::histogram h;
        if (tc) {
            if (job || worker) return fail("tc goes alone: a traffic class's wait is per rail, not per job or worker");
            if (!(e = d_.tc_latency(idx, static_cast<unsigned>(*tc), reset, h)).empty()) return fail(e);
            return ok({{"what", "traffic class " + std::to_string(*tc) +
                                    ": time frames waited in the rail's TC scheduler (shaped rails), ns"},
                       {"worker", false},
                       {"tc", *tc},
                       {"rail", idx < 0 ? json("all") : json(d_.rail(static_cast<std::size_t>(idx)).name)},
                       {"histogram", control::histogram_to_json(h)},
                       {"chunk_bytes", d_.job_chunk_bytes()},
                       {"reset", reset}});
        }
        std::optional<std::uint32_t> j;
        if (job) j = static_cast<std::uint32_t>(*job);
        if (!(e = d_.latency(idx, j, worker, reset, h)).empty()) return fail(e);
        // Every rail's: the verbs rails' too (they keep no job's).
        if (verbs_ && idx < 0 && !job && !(e = verbs_->latency(-1, worker, reset, h)).empty()) return fail(e);
        json out = latency_answer(worker, idx < 0 ? json("all") : json(d_.rail(static_cast<std::size_t>(idx)).name), h,
                                  d_.job_chunk_bytes(), reset);
        if (job) out["job"] = *job;
        return ok(out);
    }
    return fail("unknown command '" + r.command +
                "' (status, rail.list, rail.show, rail.set, rail.add, rail.remove, policy.show, policy.set, tc.list, "
                "tc.set, route.list, route.add, route.del, fault.show, fault.set, fault.freeze, stats, latency, capture.start, capture.status, capture.stop)");
}

std::string control_plane::prometheus() {
    std::string o;
    char line[512];
    auto metric = [&](const char* name, const char* type, const char* help) {
        std::snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
        o += line;
    };
    struct field {
        const char* name;
        const char* help;
        const net::counter net::rail_counters::*c;
    };
    o += build_info_prometheus();
    static const field fields[] = {
        {"railgate_rx_packets_total", "Packets received on the rail.", &net::rail_counters::rx_packets},
        {"railgate_rx_bytes_total", "Bytes received on the rail.", &net::rail_counters::rx_bytes},
        {"railgate_tx_packets_total", "Packets sent on the rail.", &net::rail_counters::tx_packets},
        {"railgate_tx_bytes_total", "Bytes sent on the rail.", &net::rail_counters::tx_bytes},
        {"railgate_contributions_total", "Contributions accepted into a slot.", &net::rail_counters::contributions},
        {"railgate_aggregations_total", "Slots completed and reduced.", &net::rail_counters::aggregations},
        {"railgate_results_sent_total", "RESULT messages sent.", &net::rail_counters::results_sent},
        {"railgate_joins_total", "JOINs accepted.", &net::rail_counters::joins},
        {"railgate_join_errors_total", "JOINs refused.", &net::rail_counters::join_errors},
        {"railgate_results_resent_total", "RESULTs sent again for a retransmitted contribution.",
         &net::rail_counters::results_resent},
        {"railgate_aborts_total", "Jobs a worker aborted.", &net::rail_counters::aborts},
        {"railgate_operator_aborts_total", "Jobs the operator ended (railctl job abort).",
         &net::rail_counters::operator_aborts},
        {"railgate_ecn_marked_total", "Frames marked ECN CE joining a standing traffic-class queue.",
         &net::rail_counters::ecn_marked},
        {"railgate_udp_coalesced_total", "udp rails: datagrams that arrived in coalesced (UDP GRO) messages.",
         &net::rail_counters::udp_coalesced},
        {"railgate_udp_copied_total", "udp rails: datagrams copied out of a coalesced message's buffers.",
         &net::rail_counters::udp_copied},
        {"railgate_capture_packets_total", "Packets mirrored to a capture (railctl capture).",
         &net::rail_counters::capture_packets},
        {"railgate_capture_overruns_total", "Packets a capture missed because its ring was full.",
         &net::rail_counters::capture_overruns},
        {"railgate_job_stalls_total", "Jobs ended because a slot waited for a rank past the stall time.",
         &net::rail_counters::stalls},
        {"railgate_job_expirations_total", "Jobs that did not assemble, or went idle, in time.",
         &net::rail_counters::expirations},
        {"railgate_job_takeovers_total", "Jobs ended because a rank re-joined as a new process.",
         &net::rail_counters::takeovers},
        {"railgate_job_ends_retold_total", "A job's end told again to a member that sent after it (its ERROR was lost).",
         &net::rail_counters::ends_retold},
        {"railgate_leaves_total", "LEAVEs accepted.", &net::rail_counters::leaves},
        {"railgate_leaves_again_total", "LEAVEs of a rank that had left, acknowledged again (its LEAVE_ACK was lost).",
         &net::rail_counters::leaves_again},
        {"railgate_pongs_total", "PINGs answered PONG.", &net::rail_counters::pongs},
        {"railgate_held_total", "Retransmits of a contribution a slot holds (or PINGs naming it), answered HELD.",
         &net::rail_counters::held},
        {"railgate_held_queued_total",
         "Of those, a kept result asked for while it still waits in a traffic-class queue (HELD with aux 0, not "
         "sent twice).",
         &net::rail_counters::held_queued},
        {"railgate_queried_total", "PINGs naming a chunk railgated has, answered HELD or with the kept result.",
         &net::rail_counters::queried},
        {"railgate_rtt_reports_total", "RTT_REPORT messages merged.", &net::rail_counters::rtt_reports},
        {"railgate_arp_replies_total", "ARP requests for the rail's address answered.", &net::rail_counters::arp_replies},
        {"railgate_icmp_echo_replies_total", "ICMP echo requests answered.", &net::rail_counters::icmp_replies},
        {"railgate_fault_duplicated_total", "Frames the fault injector duplicated.", &net::rail_counters::fault_dups},
        {"railgate_fault_reordered_total", "Frames the fault injector reordered.", &net::rail_counters::fault_reorders},
        {"railgate_fault_corrupted_total", "Frames the fault injector corrupted.", &net::rail_counters::fault_corrupts},
        {"railgate_arp_requests_total", "ARP requests the gateway sent for next hops.", &net::rail_counters::arp_requests},
        {"railgate_neighbours_learned_total", "Next hops the gateway learnt.", &net::rail_counters::neighbours},
        {"railgate_icmp_errors_total", "ICMP errors the gateway sent (time exceeded, unreachable).",
         &net::rail_counters::icmp_errors},
        {"railgate_forwarded_packets_total", "Datagrams the gateway routed out of the rail.", &net::rail_counters::fwd_packets},
        {"railgate_forwarded_bytes_total", "Bytes the gateway routed out of the rail.", &net::rail_counters::fwd_bytes},
    };
    for (const field& f : fields) {
        metric(f.name, "counter", f.help);
        for (std::size_t i = 0; i < d_.rail_count(); ++i) {
            if (!d_.rail_active(i)) continue;
            std::snprintf(line, sizeof line, "%s{rail=\"%s\"} %" PRIu64 "\n", f.name, d_.rail(i).name.c_str(),
                          (d_.counters(i).*f.c).load(std::memory_order_relaxed));
            o += line;
        }
    }
    // The lcore's time on the rail, as node_exporter reports CPU time: all
    // of it, and the polls that found work (busy / poll is the busyness).
    const double tsc_hz = static_cast<double>(rte_get_tsc_hz());
    for (const bool busy : {false, true}) {
        const char* name = busy ? "railgate_rail_busy_seconds_total" : "railgate_rail_poll_seconds_total";
        metric(name, "counter",
               busy ? "Time the rail's lcore spent on polls of the rail that found work."
                    : "Time the rail's lcore spent polling the rail.");
        for (std::size_t i = 0; i < d_.rail_count(); ++i) {
            if (!d_.rail_active(i)) continue;
            const net::rail_counters& c = d_.counters(i);
            std::snprintf(line, sizeof line, "%s{rail=\"%s\"} %.6f\n", name, d_.rail(i).name.c_str(),
                          static_cast<double>((busy ? c.busy_cycles : c.poll_cycles).load(std::memory_order_relaxed)) /
                              tsc_hz);
            o += line;
        }
    }
    metric("railgate_drops_total", "counter", "Packets dropped, by reason.");
    for (std::size_t i = 0; i < d_.rail_count(); ++i)
        for (unsigned r = 0; r < drop_reason_count && d_.rail_active(i); ++r)
            if (const std::uint64_t n = d_.counters(i).drops[r].load(std::memory_order_relaxed)) {
                std::snprintf(line, sizeof line, "railgate_drops_total{rail=\"%s\",reason=\"%s\"} %" PRIu64 "\n",
                              d_.rail(i).name.c_str(),
                              std::string(drop_reason_name(static_cast<drop_reason>(r))).c_str(), n);
                o += line;
            }
    metric("railgate_xdp_packets_total", "counter", "XDP steering verdicts on af_xdp rails, by reason.");
    for (std::size_t i = 0; i < d_.rail_count(); ++i)
        if (const auto x = d_.xdp_counters(i))
            for (unsigned r = 0; r < RG_XDP_REASONS; ++r) {
                std::snprintf(line, sizeof line, "railgate_xdp_packets_total{rail=\"%s\",reason=\"%s\"} %" PRIu64 "\n",
                              d_.rail(i).name.c_str(), std::string(xdp::reason_name(r)).c_str(), (*x)[r]);
                o += line;
            }
    struct tc_field {
        const char* name;
        const char* help;
        const net::counter (net::rail_counters::*c)[qos::tc_count];
    };
    static const tc_field tc_fields[] = {
        {"railgate_tc_bytes_total", "Bytes a shaped rail's traffic class sent (wire bytes as shaped).",
         &net::rail_counters::tc_bytes},
        {"railgate_tc_drops_total", "Frames refused by a full traffic-class queue.", &net::rail_counters::tc_drops},
    };
    for (const tc_field& f : tc_fields) {
        metric(f.name, "counter", f.help);
        for (std::size_t i = 0; i < d_.rail_count(); ++i)
            for (unsigned t = 0; t < qos::tc_count && d_.rail_active(i); ++t)
                if (const std::uint64_t n = (d_.counters(i).*f.c)[t].load(std::memory_order_relaxed)) {
                    std::snprintf(line, sizeof line, "%s{rail=\"%s\",tc=\"%u\"} %" PRIu64 "\n", f.name,
                                  d_.rail(i).name.c_str(), t, n);
                    o += line;
                }
    }
    if (verbs_) o += verbs_prometheus(*verbs_);
    const std::vector<net::lcore_status> lcores = d_.lcores();
    struct lcore_field {
        const char* name;
        const char* help;
        double (*of)(const net::lcore_status&);
    };
    static const lcore_field lcore_fields[] = {
        {"railgate_lcore_runqueue_wait_seconds_total",
         "Time the lcore's thread waited on a run queue while another task had its CPU (0 on a CPU of its own).",
         [](const net::lcore_status& l) { return static_cast<double>(l.runq_wait_ns) / 1e9; }},
        {"railgate_lcore_core_shared_total",
         "Times an lcore that does not spin began to count its CPU as shared with a busy task (it then sleeps or naps "
         "when idle).",
         [](const net::lcore_status& l) { return static_cast<double>(l.shared); }},
        {"railgate_lcore_core_shared_seconds_total", "Time an lcore that does not spin counted its CPU as shared.",
         [](const net::lcore_status& l) { return static_cast<double>(l.shared_ns) / 1e9; }},
        {"railgate_lcore_absences_total",
         "Times an lcore's loop did not run for 100 ms or more (the host took its CPU, the process was stopped); the "
         "jobs' stall and idle clocks skip that time.",
         [](const net::lcore_status& l) { return static_cast<double>(l.absences); }},
        {"railgate_lcore_absent_seconds_total", "Time an lcore's loop did not run, in absences of 100 ms or more.",
         [](const net::lcore_status& l) { return static_cast<double>(l.absent_ns) / 1e9; }},
    };
    for (const lcore_field& f : lcore_fields) {
        metric(f.name, "counter", f.help);
        for (const net::lcore_status& l : lcores) {
            std::snprintf(line, sizeof line, "%s{lcore=\"%u\"} %.9g\n", f.name, l.lcore, f.of(l));
            o += line;
        }
    }
    metric("railgate_lcore_seconds_since_pass", "gauge",
           "How long ago the lcore last went round its loop (it does every 10 ms, idle or busy): over 5 s, it is "
           "stuck, as railgated logs and tells systemd's watchdog.");
    for (const net::lcore_status& l : lcores) {
        std::snprintf(line, sizeof line, "railgate_lcore_seconds_since_pass{lcore=\"%u\"} %.3f\n", l.lcore,
                      static_cast<double>(l.since_pass_ns) / 1e9);
        o += line;
    }
    struct gauge {
        const char* name;
        const char* help;
        unsigned (*of)(const net::rail_status&);
    };
    static const gauge gauges[] = {
        {"railgate_rail_mtu_bytes", "The MTU the rail's port runs at.", [](const net::rail_status& r) { return r.mtu; }},
        {"railgate_rail_up", "Whether the rail's link is up (1) or down (0).",
         [](const net::rail_status& r) { return r.link_up ? 1u : 0u; }},
        {"railgate_rail_active_jobs", "Jobs the rail carries now.", [](const net::rail_status& r) { return r.active_jobs; }},
    };
    const std::vector<net::rail_status> status = d_.status();
    for (const gauge& g : gauges) {
        metric(g.name, "gauge", g.help);
        for (const net::rail_status& r : status) {
            std::snprintf(line, sizeof line, "%s{rail=\"%s\"} %u\n", g.name, r.name.c_str(), g.of(r));
            o += line;
        }
    }
    const std::vector<net::route_status> routes = d_.routes();
    if (!routes.empty()) {
        for (int which = 0; which < 2; ++which) {
            const char* name = which ? "railgate_route_bytes_total" : "railgate_route_packets_total";
            metric(name, "counter", which ? "Bytes the gateway routed by the route." : "Datagrams the gateway routed by the route.");
            for (const net::route_status& r : routes) {
                std::snprintf(line, sizeof line, "%s{prefix=\"%s\",rail=\"%s\"} %" PRIu64 "\n", name,
                              net::format_prefix(r.prefix, r.len).c_str(), r.rail.c_str(), which ? r.bytes : r.packets);
                o += line;
            }
        }
    }
    // Aggregation latency as a Prometheus histogram (latency_samples), the
    // verbs rails' too.
    o += latency_metric;
    for (std::size_t i = 0; i < d_.rail_count(); ++i) {
        if (!d_.rail_active(i)) continue;
        stats::histogram h;
        if (!d_.latency(static_cast<int>(i), std::nullopt, false, false, h).empty()) continue;
        latency_samples(o, d_.rail(i).name, h);
    }
    if (verbs_) verbs_latency_samples(*verbs_, o);
    return o;
}

namespace {

int tel_rails(const char*, const char*, rte_tel_data* d) {
    rte_tel_data_start_array(d, RTE_TEL_STRING_VAL);
    net::daemon& dm = control_plane::instance->daemon();
    for (std::size_t i = 0; i < dm.rail_count(); ++i)
        if (dm.rail_active(i)) rte_tel_data_add_array_string(d, dm.rail(i).name.c_str());
    return 0;
}

int tel_rail(const char*, const char* params, rte_tel_data* d) {
    net::daemon& dm = control_plane::instance->daemon();
    for (std::size_t i = 0; i < dm.rail_count(); ++i) {
        if (!params || !dm.rail_active(i) || dm.rail(i).name != params) continue;
        const net::rail_counters& c = dm.counters(i);
        rte_tel_data_start_dict(d);
        auto add = [&](const char* k, const net::counter& v) {
            rte_tel_data_add_dict_u64(d, k, v.load(std::memory_order_relaxed));
        };
        add("rx_packets", c.rx_packets);
        add("rx_bytes", c.rx_bytes);
        add("tx_packets", c.tx_packets);
        add("tx_bytes", c.tx_bytes);
        add("contributions", c.contributions);
        add("aggregations", c.aggregations);
        add("results_sent", c.results_sent);
        add("joins", c.joins);
        rte_tel_data_add_dict_u64(d, "drops", c.total_drops());
        return 0;
    }
    return -1;
}

int tel_status(const char*, const char*, rte_tel_data* d) {
    net::daemon& dm = control_plane::instance->daemon();
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_string(d, "policy", dm.policy() == wire::rail_policy::rail ? "rail" : "lag");
    rte_tel_data_add_dict_int(d, "rails", static_cast<int>(dm.rail_count()));
    rte_tel_data_add_dict_u64(d, "job_chunk_bytes", dm.job_chunk_bytes());
    return 0;
}

} // namespace

void control_plane::register_telemetry() {
    instance = this;
    rte_telemetry_register_cmd("/railgate/status", tel_status, "railgated's policy, rail count and job chunk size.");
    rte_telemetry_register_cmd("/railgate/rails", tel_rails, "railgated's rail names.");
    rte_telemetry_register_cmd("/railgate/rail", tel_rail, "One rail's counters. Parameters: rail name");
}

} // namespace railgate
