#include "dataplane/railgated/verbs_control.hpp"
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <optional>

#include "control/gids.hpp"
#include "control/version.hpp"
#include "dataplane/log/log.hpp"
#include "dataplane/proto/ipv4.hpp"
#include "dataplane/reduce/reduce.hpp"

namespace railgate {

using control::json;

json verbs_rails_json(const verbs::plane& p) {
    json rails = json::array();
    for (const verbs::rail_status& s : p.status()) {
        json j = {{"name", s.name},
                  {"transport", "verbs"},
                  {"device", s.device},
                  {"port", s.port},
                  {"ip", net::format_ipv4(s.ip)},
                  {"cm_port", s.cm_port},
                  {"numa", s.numa},
                  {"path_mtu", s.path_mtu},
                  {"chunk_bytes", s.chunk_bytes},
                  {"traffic_class", s.traffic_class},
                  {"service_level", s.service_level},
                  {"tc", s.tc},
                  {"connections", s.connections},
                  {"active_jobs", s.jobs},
                  {"result_mrs", s.result_mrs}};
        // The source GID: what new connections take (the config's, or
        // railctl rail set's since), and what the last QP took.
        j["gid_index"] = s.gid_index >= 0 ? json(s.gid_index) : json("auto");
        j["gid_index_configured"] = s.gid_index_configured >= 0 ? json(s.gid_index_configured) : json("auto");
        if (s.gid_seen >= 0)
            j["gid_seen"] = {{"index", s.gid_seen},
                             {"gid", s.gid_seen_text},
                             {"chosen", s.gid_seen_given ? "given" : "automatic"}};
        // The RC timers as configured (ack_timeout "rdma_cm": the path's)
        // and as the last connection's QP took them, with their spans.
        const auto timers = [](unsigned ack, unsigned retry, unsigned rnr_retry, unsigned rnr_timer) {
            return json{{"ack_timeout", ack},         {"ack_timeout_ms", verbs::ack_timeout_us(ack) / 1e3},
                        {"retry_count", retry},       {"rnr_retry", rnr_retry},
                        {"min_rnr_timer", rnr_timer}, {"min_rnr_timer_ms", verbs::rnr_timer_us(rnr_timer) / 1e3}};
        };
        json t = {{"configured", timers(s.qp.ack_timeout, s.qp.retry_count, s.qp.rnr_retry, s.qp.min_rnr_timer)},
                  {"configured_text", verbs::describe_timers(s.qp)}};
        if (!s.qp.ack_timeout) t["configured"]["ack_timeout"] = "rdma_cm", t["configured"].erase("ack_timeout_ms");
        if (s.timers_seen) {
            const verbs::qp_timers& q = *s.timers_seen;
            t["seen"] = timers(q.ack_timeout, q.retry_count, q.rnr_retry, q.min_rnr_timer);
            t["seen_text"] = verbs::describe(q);
        }
        j["qp_timers"] = t;
        rails.push_back(j);
    }
    return rails;
}

int verbs_rail_index(const verbs::plane& p, const std::string& name) {
    const auto st = p.status();
    for (std::size_t i = 0; i < st.size(); ++i)
        if (st[i].name == name) return static_cast<int>(i);
    return -1;
}

std::string verbs_rail_names(const verbs::plane& p) {
    std::string names;
    for (const verbs::rail_status& s : p.status()) names += (names.empty() ? "" : ", ") + s.name;
    return names;
}

json jobs_json(const std::vector<agg::job_view>& js) {
    const auto ranks = [](std::uint64_t bits) {
        json l = json::array();
        for (; bits; bits &= bits - 1) l.push_back(std::countr_zero(bits));
        return l;
    };
    json jobs = json::array();
    for (const agg::job_view& v : js) {
        json x = {{"rail", v.rail},
                  {"transport", v.transport},
                  {"job", v.id},
                  {"instance", v.instance},
                  {"world", v.world},
                  {"joined", ranks(v.joined)},
                  {"assembled", v.assembled},
                  {"op", v.op},
                  {"dtype", std::string(wire::dtype_name(v.dt))},
                  {"chunk_bytes", v.chunk_bytes},
                  {"pool", v.pool},
                  {"policy", v.lag ? "lag" : "rail"},
                  {"rails", v.rails},
                  {"excluded_rails", ranks(v.excluded)},
                  {"age_ms", v.age_ms},
                  {"partial_slots", v.partial},
                  {"heard_ms", v.heard_ms}};
        if (v.oldest_slot >= 0) {
            json o = {{"slot", v.oldest_slot},
                      {"gen", v.oldest_gen},
                      {"waited_ms", v.oldest_wait_ms},
                      {"waiting_for", ranks(v.waiting_for)}};
            if (v.offset_known) o["offset"] = v.oldest_offset;
            x["oldest_partial"] = o;
        }
        jobs.push_back(std::move(x));
    }
    return jobs;
}

std::string abort_args(const json& args, std::uint32_t& job, std::string& text) {
    std::string e;
    std::optional<std::uint64_t> id;
    std::optional<std::string> why;
    if (!(e = control::check_keys(args, {"job", "why"})).empty() ||
        !(e = control::get_uint(args, "job", UINT32_MAX, id)).empty() || !(e = control::get_string(args, "why", why)).empty())
        return e;
    if (!id) return "argument 'job' missing";
    job = static_cast<std::uint32_t>(*id);
    text = "the operator ended job " + std::to_string(job) + " (railctl job abort)";
    if (why && !why->empty()) {
        constexpr std::size_t most = 120;
        if (why->size() > most) return "why: at most " + std::to_string(most) + " characters";
        for (char ch : *why)
            if (ch < 0x20 || ch > 0x7e) return "why: printable ASCII only";
        text += ": " + *why;
    }
    return {};
}

json abort_answer(std::uint32_t job, std::vector<std::string> ended_on, unsigned told) {
    if (ended_on.empty()) return control::fail("job " + std::to_string(job) + " runs on no rail (railctl job list)");
    std::sort(ended_on.begin(), ended_on.end());
    return control::ok({{"job", job}, {"rails", ended_on}, {"members_told", told}});
}

json verbs_counters_json(const verbs::plane& p, const std::string& only) {
    json rails = json::array();
    const auto st = p.status();
    for (std::size_t i = 0; i < p.rail_count(); ++i) {
        if (!only.empty() && st[i].name != only) continue;
        const verbs::rail_counters& c = p.counters(i);
        auto v = [](const std::atomic<std::uint64_t>& x) { return x.load(std::memory_order_relaxed); };
        json j = {{"rail", st[i].name},
                  {"transport", "verbs"},
                  {"connects", v(c.connects)},
                  {"disconnects", v(c.disconnects)},
                  {"rejected", v(c.rejected)},
                  {"joins_again", v(c.joins_again)},
                  {"aggregations", v(c.results)},
                  {"engine_reductions", v(c.engine_reductions)},
                  {"qp_errors", v(c.qp_errors)},
                  {"backlogged", v(c.backlogged)},
                  {"absences", v(c.absences)},
                  {"eager_connections", v(c.eager_conns)},
                  {"eager_contributions", v(c.eager_contributions)},
                  {"eager_results", v(c.eager_results)}};
        shared_counters_json(c, j);
        rails.push_back(j);
    }
    return rails;
}

json daemon_json(const config::appliance& cfg, std::chrono::steady_clock::time_point started,
                 const std::string& policy, const std::string& hash, unsigned job_chunk_bytes) {
    return {{"version", version()},
            {"git", git_describe()},
            {"pid", getpid()},
            {"uptime_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()},
            {"config", cfg.source},
            {"kernels", std::string(reduce::best().name)},
            {"policy", policy},
            {"hash", hash},
            {"job_chunk_bytes", job_chunk_bytes},
            {"control_socket", cfg.control_socket},
            {"metrics", cfg.metrics}};
}

std::string build_info_prometheus() {
    return "# HELP railgate_build_info railgated's version and what it was built with (always 1).\n"
           "# TYPE railgate_build_info gauge\n"
           "railgate_build_info{version=\"" + std::string(version()) + "\",git=\"" + git_describe() +
           "\",kernels=\"" + std::string(reduce::best().name) + "\"} 1\n";
}

const char* const latency_metric =
    "# HELP railgate_aggregation_latency_seconds First contribution to result sent, per aggregated chunk.\n"
    "# TYPE railgate_aggregation_latency_seconds histogram\n";

void latency_samples(std::string& o, const std::string& rail, const stats::histogram& h) {
    char line[256];
    const char* r = rail.c_str();
    std::uint64_t cum = 0;
    std::size_t b = 0;
    for (std::uint64_t le_ns = 1024; le_ns <= (std::uint64_t{1} << 30); le_ns <<= 1) {
        for (; b < stats::histogram::bucket_count && stats::histogram::highest_of(b) <= le_ns; ++b) cum += h.bucket(b);
        std::snprintf(line, sizeof line, "railgate_aggregation_latency_seconds_bucket{rail=\"%s\",le=\"%.9g\"} %" PRIu64 "\n",
                      r, static_cast<double>(le_ns) / 1e9, cum);
        o += line;
    }
    std::snprintf(line, sizeof line, "railgate_aggregation_latency_seconds_bucket{rail=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", r,
                  h.count());
    o += line;
    std::snprintf(line, sizeof line, "railgate_aggregation_latency_seconds_sum{rail=\"%s\"} %.9f\n", r,
                  static_cast<double>(h.sum()) / 1e9);
    o += line;
    std::snprintf(line, sizeof line, "railgate_aggregation_latency_seconds_count{rail=\"%s\"} %" PRIu64 "\n", r, h.count());
    o += line;
}

void verbs_latency_samples(const verbs::plane& p, std::string& o) {
    const auto st = p.status();
    for (std::size_t i = 0; i < st.size(); ++i) {
        stats::histogram h;
        if (p.latency(static_cast<int>(i), false, false, h).empty()) latency_samples(o, st[i].name, h);
    }
}

std::string verbs_prometheus(const verbs::plane& p, bool standalone) {
    std::string o = standalone ? build_info_prometheus() : std::string();
    const auto st = p.status();
    auto metric = [&](const char* name, const char* type, const char* help) {
        o += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    };
    auto sample = [&](const std::string& name, const std::string& labels, std::uint64_t v) {
        o += name + "{" + labels + "} " + std::to_string(v) + "\n";
    };
    metric("railgate_verbs_aggregations_total", "counter", "Verbs rails: slots completed and reduced.");
    for (std::size_t i = 0; i < st.size(); ++i)
        sample("railgate_verbs_aggregations_total", "rail=\"" + st[i].name + "\"",
               p.counters(i).results.load(std::memory_order_relaxed));
    metric("railgate_verbs_contributions_total", "counter", "Verbs rails: chunks received.");
    for (std::size_t i = 0; i < st.size(); ++i)
        sample("railgate_verbs_contributions_total", "rail=\"" + st[i].name + "\"",
               p.counters(i).contributions.load(std::memory_order_relaxed));
    metric("railgate_verbs_eager_contributions_total", "counter",
           "Verbs rails: small chunks read from the eager rings (part of contributions).");
    for (std::size_t i = 0; i < st.size(); ++i)
        sample("railgate_verbs_eager_contributions_total", "rail=\"" + st[i].name + "\"",
               p.counters(i).eager_contributions.load(std::memory_order_relaxed));
    metric("railgate_verbs_connections", "gauge", "Verbs rails: worker QPs connected.");
    for (const verbs::rail_status& v : st) sample("railgate_verbs_connections", "rail=\"" + v.name + "\"", v.connections);
    metric("railgate_verbs_drops_total", "counter", "Verbs rails: chunks and messages dropped, by reason.");
    for (std::size_t i = 0; i < st.size(); ++i)
        for (unsigned r = 0; r < drop_reason_count; ++r)
            if (const std::uint64_t n = p.counters(i).drops[r].load(std::memory_order_relaxed))
                sample("railgate_verbs_drops_total",
                       "rail=\"" + st[i].name + "\",reason=\"" +
                           std::string(drop_reason_name(static_cast<drop_reason>(r))) + "\"",
                       n);
    metric("railgate_verbs_port_counter_total", "counter",
           "Verbs rails: their RDMA port's own counters (sysfs hw_counters and counters: resends, sequence errors, ...).");
    for (const verbs::rail_status& v : st) {
        const control::port_counters pc = control::read_port_counters(v.device, v.port);
        const std::string l = "rail=\"" + v.name + "\",device=\"" + v.device + "\",port=\"" + std::to_string(v.port) + "\",";
        for (const auto& [source, list] : {std::pair{"hw_counters", &pc.hw}, std::pair{"counters", &pc.pma}})
            for (const control::port_counter& c : *list)
                sample("railgate_verbs_port_counter_total",
                       l + "source=\"" + source + "\",counter=\"" + c.name + "\"", c.value);
    }
    if (standalone) {
        o += latency_metric;
        verbs_latency_samples(p, o);
    }
    return o;
}

// The rail's RDMA port's own counters (sysfs): what the fabric did to its
// QPs' packets (resends, sequence errors, duplicates), which railgate's
// counters cannot see.
json port_counters_json(const verbs::rail_status& s) {
    const control::port_counters pc = control::read_port_counters(s.device, s.port);
    const auto obj = [](const std::vector<control::port_counter>& v) {
        json o = json::object();
        for (const control::port_counter& c : v) o[c.name] = c.value;
        return o;
    };
    return {{"device", s.device}, {"port", s.port}, {"hw_counters", obj(pc.hw)}, {"counters", obj(pc.pma)}};
}

json verbs_rail_show(const verbs::plane& p, int rail) {
    json j = verbs_rails_json(p).at(static_cast<std::size_t>(rail));
    json c = verbs_counters_json(p, j["name"].get<std::string>());
    j["counters"] = c.empty() ? json::object() : c[0];
    j["port_counters"] = port_counters_json(p.status().at(static_cast<std::size_t>(rail)));
    return j;
}

json verbs_rail_set(verbs::plane& p, int rail, const control::request& r) {
    const json& a = r.args;
    std::string e;
    if (!(e = control::check_keys(a, {"rail", "mtu", "gid_index"})).empty()) return control::fail(e);
    const std::string name = a["rail"].get<std::string>();
    if (a.contains("mtu") == a.contains("gid_index")) return control::fail("give exactly one of 'mtu' and 'gid_index'");
    if (a.contains("mtu"))
        return control::fail("rail '" + name + "' is a verbs rail: its path MTU is the config's path_mtu (or the "
                             "port's active MTU), agreed with each worker when it connects; railctl rail set mtu "
                             "changes DPDK and udp rails");
    int index = -1; // "auto": the RoCEv2 GID of the rail's address
    if (!(a["gid_index"].is_string() && a["gid_index"] == "auto")) {
        std::optional<std::uint64_t> gid;
        if (!(e = control::get_uint(a, "gid_index", UINT32_MAX, gid)).empty())
            return control::fail(e + " (or \"auto\")");
        if (!(e = config::check_gid_index(static_cast<long long>(*gid))).empty()) return control::fail(e);
        index = static_cast<int>(*gid);
    }
    std::string note;
    if (!(e = p.set_gid_index(static_cast<std::size_t>(rail), index, note)).empty())
        return control::fail("rail '" + name + "': " + e);
    log::notice("control: uid %ld pid %ld: rail.set %s gid_index %s", r.peer_uid, r.peer_pid, name.c_str(),
                index < 0 ? "auto" : std::to_string(index).c_str());
    json j = verbs_rails_json(p).at(static_cast<std::size_t>(rail));
    j["state"] = note;
    return control::ok(j);
}

std::string verbs_latency_args(const json& a, bool& worker, bool& reset) {
    std::string e;
    if (!(e = control::check_keys(a, {"rail", "job", "reset", "worker", "tc"})).empty()) return e;
    if (a.contains("job"))
        return "a verbs rail keeps its own aggregation latency and its workers' round trips, not each job's "
               "(per job: DPDK and udp rails)";
    if (a.contains("tc")) return "a verbs rail has no TC scheduler: its HCA schedules (tc: shaped DPDK rails)";
    if (!(e = control::get_bool(a, "reset", reset)).empty()) return e;
    return control::get_bool(a, "worker", worker);
}

json latency_answer(bool worker, const json& rail, const stats::histogram& h, unsigned chunk_bytes, bool reset) {
    return json({{"what", worker ? "worker round trip: contribution sent to result received, as workers report it, ns"
                                        : "aggregation latency: first contribution to result sent, ns"},
                 {"worker", worker},
                 {"rail", rail},
                 {"histogram", control::histogram_to_json(h)},
                 {"chunk_bytes", chunk_bytes},
                 {"reset", reset}});
}

json verbs_latency(const verbs::plane& p, int rail, const json& args) {
    bool worker = false, reset = false;
    std::string e;
    if (!(e = verbs_latency_args(args, worker, reset)).empty()) return control::fail(e);
    stats::histogram h;
    if (!(e = p.latency(rail, worker, reset, h)).empty()) return control::fail(e);
    const auto st = p.status();
    return control::ok(latency_answer(
        worker, rail < 0 ? json("all") : json(st.at(static_cast<std::size_t>(rail)).name), h,
        rail < 0 ? (st.empty() ? 0u : st[0].chunk_bytes) : st.at(static_cast<std::size_t>(rail)).chunk_bytes, reset));
}

json verbs_only_handle(verbs::plane& p, const config::appliance& cfg, std::chrono::steady_clock::time_point started,
                       const control::request& r) {
    std::string e;
    if (r.command == "status") {
        if (!(e = control::check_keys(r.args, {})).empty()) return control::fail(e);
        const auto st = p.status();
        return control::ok({{"daemon", daemon_json(cfg, started, "rail", "l3l4", st.empty() ? 0u : st[0].chunk_bytes)},
                            {"rails", json::array()},
                            {"verbs_rails", verbs_rails_json(p)}});
    }
    if (r.command == "rail.list") {
        if (!(e = control::check_keys(r.args, {})).empty()) return control::fail(e);
        return control::ok({{"rails", json::array()}, {"verbs_rails", verbs_rails_json(p)}});
    }
    if (r.command == "rail.show" || r.command == "rail.set") {
        std::optional<std::string> name;
        if (!(e = control::get_string(r.args, "rail", name)).empty()) return control::fail(e);
        if (!name) return control::fail("argument 'rail' missing");
        const int idx = verbs_rail_index(p, *name);
        if (idx < 0) return control::fail("rail '" + *name + "' does not exist (rails: " + verbs_rail_names(p) + ")");
        if (r.command == "rail.set") return verbs_rail_set(p, idx, r);
        if (!(e = control::check_keys(r.args, {"rail"})).empty()) return control::fail(e);
        return control::ok(verbs_rail_show(p, idx));
    }
    if (r.command == "stats") {
        if (!(e = control::check_keys(r.args, {"rail"})).empty()) return control::fail(e);
        const std::string only = r.args.contains("rail") && r.args["rail"].is_string() ? r.args["rail"].get<std::string>() : "";
        json rails = verbs_counters_json(p, only);
        if (!only.empty() && rails.empty()) return control::fail("no rail named '" + only + "'");
        return control::ok({{"rails", rails}});
    }
    if (r.command == "latency") {
        std::optional<std::string> only;
        if (!(e = control::get_string(r.args, "rail", only)).empty()) return control::fail(e);
        const int idx = only ? verbs_rail_index(p, *only) : -1;
        if (only && idx < 0) return control::fail("no rail named '" + *only + "'");
        return verbs_latency(p, idx, r.args);
    }
    if (r.command == "job.list") {
        if (!(e = control::check_keys(r.args, {"rail"})).empty()) return control::fail(e);
        std::optional<std::string> only;
        if (!(e = control::get_string(r.args, "rail", only)).empty()) return control::fail(e);
        const int idx = only ? verbs_rail_index(p, *only) : -1;
        if (only && idx < 0) return control::fail("no rail named '" + *only + "'");
        std::vector<agg::job_view> js;
        if (!(e = p.jobs(idx, js)).empty()) return control::fail(e);
        return control::ok({{"jobs", jobs_json(js)}});
    }
    if (r.command == "job.abort") {
        std::uint32_t job = 0;
        std::string text;
        if (!(e = abort_args(r.args, job, text)).empty()) return control::fail(e);
        std::vector<std::string> ended_on;
        unsigned told = 0;
        if (!(e = p.abort_job(job, text, ended_on, told)).empty()) return control::fail(e);
        if (!ended_on.empty()) log::notice("control: uid %ld pid %ld: job.abort %u", r.peer_uid, r.peer_pid, job);
        return abort_answer(job, ended_on, told);
    }
    return control::fail("'" + r.command + "' needs DPDK rails; this railgated runs verbs rails only (status, rail "
                         "list, show and set gid-index, stats, latency, job list, job abort)");
}

} // namespace railgate
