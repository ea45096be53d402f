// railgated's gateway routes, as the control plane sees them: checked
// against the rails, built into the lcores' longest-prefix table, and
// swapped on every lcore at once (the per-packet side is gateway.cpp).
#include <set>

#include "dataplane/net/daemon_impl.hpp"
#include "dataplane/proto/ipv4.hpp"
#include "dataplane/log/log.hpp"

namespace railgate::net {
using namespace detail;

// Checks routes against the rails and builds their table (null when there
// are none). "" or the first problem, naming the route.
std::string daemon::impl::build_fib(const std::vector<route_config>& list, std::unique_ptr<fib>& out) const {
    out.reset();
    if (list.size() > max_routes) return "too many routes (max " + std::to_string(max_routes) + ")";
    if (list.empty()) return {};
    auto f = std::make_unique<fib>();
    std::vector<lpm_table::entry> entries;
    std::set<std::pair<std::uint32_t, unsigned>> seen;
    for (const route_config& r : list) {
        const std::string where = "route " + format_prefix(r.prefix, r.len) + ": ";
        if (r.len > 32 || (r.prefix & ~prefix_mask(r.len))) return where + "host bits set or length above 32";
        if (!seen.insert({r.prefix, r.len}).second) return where + "routed twice";
        rail_static* out_rail = nullptr;
        for (const auto& x : rails)
            if (x->active && x->cfg.name == r.rail) out_rail = x.get();
        if (!out_rail) return where + "rail '" + r.rail + "' does not exist";
        for (const auto& x : rails)
            if (x->active && r.via && x->cfg.ip == r.via)
                return where + "via " + format_ipv4(r.via) + " is rail " + x->cfg.name + "'s own address";
        if (r.via && (r.via >> 28 >= 0xe || r.via == 0xffffffff))
            return where + "via " + format_ipv4(r.via) + " is not a unicast address";
        entries.push_back({r.prefix, r.len, static_cast<std::uint32_t>(f->hops.size())});
        f->hops.push_back({out_rail, r.via});
    }
    f->table = lpm_table(entries);
    f->size_hits(static_cast<unsigned>(lcores.size()));
    out = std::move(f);
    return {};
}

// Makes `next` the routes: every lcore switches to the new table between
// bursts, and the old one is freed once all have.
std::string daemon::impl::publish_routes(std::vector<route_config> next) {
    std::unique_ptr<fib> f;
    if (std::string e = build_fib(next, f); !e.empty()) return e;
    if (launched) {
        lcore_command c;
        c.k = lcore_command::kind::routes;
        c.routes = f.get();
        if (std::string e = on_lcores(c, -1); !e.empty()) return e;
    }
    // No lcore writes the old table any more: the routes that stay keep
    // their totals.
    if (f && fib_now)
        for (std::size_t i = 0; i < next.size(); ++i)
            for (std::size_t k = 0; k < routes.size(); ++k)
                if (next[i].prefix == routes[k].prefix && next[i].len == routes[k].len &&
                    next[i].rail == routes[k].rail && next[i].via == routes[k].via) {
                    f->base_packets[i] = fib_now->total(static_cast<std::uint32_t>(k), 0);
                    f->base_bytes[i] = fib_now->total(static_cast<std::uint32_t>(k), 1);
                }
    fib_now = std::move(f);
    routes = std::move(next);
    if (!routes.empty())
        for (const auto& r : rails)
            if (r->active && r->steering)
                log::warning("rail %s: its XDP program passes everything but railgate's UDP to "
                             "the kernel, so the gateway never sees traffic to route that arrives there; start "
                             "railgated with --no-xdp-steer for gateway rails",
                             r->cfg.name.c_str());
    return {};
}

std::vector<route_status> daemon::routes() const {
    std::lock_guard lock(p_->ctl);
    std::vector<route_status> out;
    for (std::size_t i = 0; i < p_->routes.size(); ++i) {
        route_status s;
        static_cast<route_config&>(s) = p_->routes[i];
        if (p_->fib_now) {
            s.packets = p_->fib_now->total(static_cast<std::uint32_t>(i), 0);
            s.bytes = p_->fib_now->total(static_cast<std::uint32_t>(i), 1);
        }
        out.push_back(s);
    }
    return out;
}

std::string daemon::add_route(const route_config& r) {
    std::lock_guard lock(p_->ctl);
    for (const route_config& x : p_->routes)
        if (x.prefix == r.prefix && x.len == r.len)
            return "route " + format_prefix(r.prefix, r.len) + " exists (by rail " + x.rail + "); delete it first";
    std::vector<route_config> next = p_->routes;
    next.push_back(r);
    return p_->publish_routes(std::move(next));
}

std::string daemon::remove_route(std::uint32_t prefix, unsigned len) {
    std::lock_guard lock(p_->ctl);
    std::vector<route_config> next = p_->routes;
    const auto it = std::find_if(next.begin(), next.end(), [&](const route_config& x) { return x.prefix == prefix && x.len == len; });
    if (it == next.end()) return "no route " + format_prefix(prefix, len);
    next.erase(it);
    return p_->publish_routes(std::move(next));
}


} // namespace railgate::net
