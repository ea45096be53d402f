#include "dataplane/fault/injector.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>

namespace railgate::fault {
namespace {

std::uint64_t splitmix(std::uint64_t& x) noexcept {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }

bool parse_fraction(std::string_view v, double& out) {
    const std::string s(v);
    char* end = nullptr;
    const double x = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(x) || x < 0 || x > 1) return false;
    out = x;
    return true;
}

} // namespace

std::string parse(std::string_view text, spec& out) {
    spec s;
    if (text.empty() || text == "off" || text == "none") {
        out = s;
        return {};
    }
    while (!text.empty()) {
        const std::size_t comma = text.find(',');
        const std::string_view item = text.substr(0, comma);
        text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
        const std::size_t eq = item.find('=');
        if (eq == std::string_view::npos)
            return "fault spec: '" + std::string(item) + "' is not KEY=VALUE (drop, dup, reorder, corrupt, seed, rank, type, dir)";
        const std::string_view k = item.substr(0, eq), v = item.substr(eq + 1);
        double* field = k == "drop" ? &s.drop : k == "dup" ? &s.dup : k == "reorder" ? &s.reorder
                      : k == "corrupt" ? &s.corrupt : nullptr;
        if (field) {
            if (!parse_fraction(v, *field))
                return "fault spec: " + std::string(k) + "=" + std::string(v) + " is not a fraction in 0..1";
        } else if (k == "seed") {
            const std::string sv(v);
            char* end = nullptr;
            const unsigned long long x = std::strtoull(sv.c_str(), &end, 0);
            if (sv.empty() || end != sv.c_str() + sv.size() || sv[0] == '-')
                return "fault spec: seed=" + sv + " is not an unsigned integer";
            s.seed = x;
        } else if (k == "rank") {
            const std::string sv(v);
            char* end = nullptr;
            const long x = std::strtol(sv.c_str(), &end, 10);
            if (sv.empty() || end != sv.c_str() + sv.size() || x < 0 || x > 65535)
                return "fault spec: rank=" + sv + " is not a rank (0..65535)";
            s.rank = static_cast<int>(x);
        } else if (k == "type") {
            s.types = 0;
            std::string_view rest = v;
            for (bool more = true; more;) {
                const std::size_t plus = rest.find('+');
                const std::string_view name = rest.substr(0, plus);
                more = plus != std::string_view::npos;
                if (more) rest = rest.substr(plus + 1);
                int t = 1;
                while (type_name(t) && name != type_name(t)) ++t;
                if (!type_name(t)) {
                    std::string all;
                    for (int i = 1; type_name(i); ++i) all += (i > 1 ? ", " : "") + std::string(type_name(i));
                    return "fault spec: type=" + std::string(v) + ": '" + std::string(name) +
                           "' is not a message type (" + all + ")";
                }
                s.types |= 1u << t;
            }
        } else if (k == "dir") {
            if (v == "rx") s.dir = spec::way::rx;
            else if (v == "tx") s.dir = spec::way::tx;
            else if (v == "both") s.dir = spec::way::both;
            else return "fault spec: dir=" + std::string(v) + " is not rx, tx or both";
        } else {
            return "fault spec: unknown key '" + std::string(k) + "' (drop, dup, reorder, corrupt, seed, rank, type, dir)";
        }
    }
    out = s;
    return {};
}

std::string format(const spec& s) {
    if (!s.any()) return "off";
    char b[160];
    std::snprintf(b, sizeof b, "drop=%g,dup=%g,reorder=%g,corrupt=%g,seed=%llu", s.drop, s.dup, s.reorder, s.corrupt,
                  static_cast<unsigned long long>(s.seed));
    std::string t = b;
    if (s.rank >= 0) t += ",rank=" + std::to_string(s.rank);
    for (int i = 1, n = 0; type_name(i); ++i)
        if (s.types >> i & 1) t += std::string(n++ ? "+" : ",type=") + type_name(i);
    if (s.dir != spec::way::both) t += s.dir == spec::way::rx ? ",dir=rx" : ",dir=tx";
    return t;
}

const char* type_name(int type) noexcept {
    // Indexed by wire::msg_type (dataplane/proto/wire.hpp).
    static constexpr const char* names[] = {nullptr, "join",     "join_ack",   "contrib", "result", "error", "leave",
                                            "leave_ack", "rtt_report", "region",  "ping",   "pong",  "held"};
    return type > 0 && type < static_cast<int>(std::size(names)) ? names[type] : nullptr;
}

std::uint64_t dice::threshold(double p) noexcept {
    if (p <= 0) return 0;
    if (p >= 1) return UINT64_MAX;
    return static_cast<std::uint64_t>(std::ldexp(p, 64));
}

void dice::reset(const spec& s) noexcept {
    s_ = s;
    active_ = s.any();
    drop_ = threshold(s.drop);
    dup_ = threshold(s.dup);
    reorder_ = threshold(s.reorder);
    corrupt_ = threshold(s.corrupt);
    std::uint64_t x = s.seed;
    for (auto& w : st_) w = splitmix(x);
}

std::uint64_t dice::next() noexcept {
    const std::uint64_t r = rotl(st_[1] * 5, 7) * 9;
    const std::uint64_t t = st_[1] << 17;
    st_[2] ^= st_[0];
    st_[3] ^= st_[1];
    st_[1] ^= st_[2];
    st_[0] ^= st_[3];
    st_[2] ^= t;
    st_[3] = rotl(st_[3], 45);
    return r;
}

verdict dice::roll() noexcept {
    verdict v;
    // p = 1 must always hit: a draw of UINT64_MAX is below no threshold.
    auto hit = [this](std::uint64_t th) { return th == UINT64_MAX || (th && next() < th); };
    if (hit(drop_)) {
        v.drop = true;
        return v;
    }
    v.dup = hit(dup_);
    v.reorder = hit(reorder_);
    v.corrupt = hit(corrupt_);
    if (v.corrupt) v.bit = static_cast<std::uint32_t>(next());
    return v;
}

} // namespace railgate::fault
