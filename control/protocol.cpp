#include "control/protocol.hpp"

#include <algorithm>

namespace railgate::control {

std::string parse_request(std::string_view line, request& out) {
    if (line.size() > max_request) return "request larger than " + std::to_string(max_request) + " bytes";
    const json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return "request is not valid JSON";
    if (!j.is_object()) return "request must be a JSON object";
    for (const auto& [k, v] : j.items())
        if (k != "version" && k != "command" && k != "args") return "unknown request key '" + k + "'";
    const auto v = j.find("version");
    if (v == j.end() || !v->is_number_integer()) return "request needs \"version\": " + std::to_string(protocol_version);
    if (v->get<long long>() != protocol_version)
        return "protocol version " + v->dump() + " not supported (this railgated speaks " +
               std::to_string(protocol_version) + ")";
    const auto c = j.find("command");
    if (c == j.end() || !c->is_string() || c->get_ref<const std::string&>().empty())
        return "request needs a \"command\" string";
    out.command = c->get<std::string>();
    const auto a = j.find("args");
    if (a != j.end() && !a->is_object()) return "\"args\" must be an object";
    out.args = a == j.end() ? json::object() : *a;
    return {};
}

json ok(json result) { return {{"version", protocol_version}, {"ok", true}, {"result", std::move(result)}}; }

json fail(const std::string& error) { return {{"version", protocol_version}, {"ok", false}, {"error", error}}; }

std::string check_keys(const json& args, std::initializer_list<std::string_view> allowed) {
    for (const auto& [k, v] : args.items())
        if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) return "unknown argument '" + k + "'";
    return {};
}

std::string get_string(const json& args, const char* key, std::optional<std::string>& out) {
    const auto it = args.find(key);
    if (it == args.end()) return {};
    if (!it->is_string()) return std::string("argument '") + key + "' must be a string";
    out = it->get<std::string>();
    return {};
}

std::string get_uint(const json& args, const char* key, std::uint64_t max, std::optional<std::uint64_t>& out) {
    const auto it = args.find(key);
    if (it == args.end()) return {};
    if (!it->is_number_integer()) return std::string("argument '") + key + "' must be an integer";
    // Non-negative integers parse as unsigned; anything else is below 0.
    if (!it->is_number_unsigned() || it->get<std::uint64_t>() > max)
        return std::string("argument '") + key + "' " + it->dump() + " out of range 0.." + std::to_string(max);
    out = it->get<std::uint64_t>();
    return {};
}

std::string get_bool(const json& args, const char* key, bool& out) {
    const auto it = args.find(key);
    if (it == args.end()) return {};
    if (!it->is_boolean()) return std::string("argument '") + key + "' must be true or false";
    out = it->get<bool>();
    return {};
}

json histogram_to_json(const stats::histogram& h) {
    json buckets = json::array();
    for (std::size_t i = 0; i < stats::histogram::bucket_count; ++i)
        if (const std::uint64_t n = h.bucket(i)) buckets.push_back({i, n});
    return {{"count", h.count()}, {"min", h.min()}, {"max", h.max()}, {"sum", h.sum()}, {"buckets", buckets}};
}

std::string histogram_from_json(const json& j, stats::histogram& out) {
    if (!j.is_object() || !j.contains("buckets") || !j["buckets"].is_array()) return "histogram without buckets";
    for (const json& b : j["buckets"]) {
        if (!b.is_array() || b.size() != 2 || !b[0].is_number_unsigned() || !b[1].is_number_unsigned())
            return "malformed histogram bucket";
        const auto i = b[0].get<std::uint64_t>();
        if (i >= stats::histogram::bucket_count) return "histogram bucket index out of range";
        out.add_to_bucket(static_cast<std::size_t>(i), b[1].get<std::uint64_t>());
    }
    auto u = [&](const char* k) { return j.contains(k) && j[k].is_number_unsigned() ? j[k].get<std::uint64_t>() : 0; };
    out.set_summary(u("min"), u("max"), u("sum"));
    return {};
}

} // namespace railgate::control
