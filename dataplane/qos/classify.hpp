// Traffic classes: which of the 8 TCs a frame or a QP belongs to, from its
// IPv4 DSCP, its VLAN PCP or its IB service level / GRH traffic class, by a
// configurable table. The default is what NICs do with DCB off-the-shelf:
// priority = DSCP >> 3 (so DSCP 46, EF, is TC 5), PCP = TC, SL & 7.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace railgate::qos {

inline constexpr unsigned tc_count = 8;

struct tc_map {
    std::array<std::uint8_t, 64> dscp{};
    std::array<std::uint8_t, 8> pcp{};
    std::array<std::uint8_t, 16> sl{};

    static constexpr tc_map defaults() noexcept {
        tc_map m;
        for (unsigned d = 0; d < 64; ++d) m.dscp[d] = static_cast<std::uint8_t>(d >> 3);
        for (unsigned p = 0; p < 8; ++p) m.pcp[p] = static_cast<std::uint8_t>(p);
        for (unsigned s = 0; s < 16; ++s) m.sl[s] = static_cast<std::uint8_t>(s & 7);
        return m;
    }
    constexpr std::uint8_t from_dscp(std::uint8_t d) const noexcept { return dscp[d & 63]; }
    // IPv4 TOS byte (DSCP in the high 6 bits, ECN below).
    constexpr std::uint8_t from_tos(std::uint8_t tos) const noexcept { return dscp[tos >> 2]; }
    constexpr std::uint8_t from_pcp(std::uint8_t p) const noexcept { return pcp[p & 7]; }
    constexpr std::uint8_t from_sl(std::uint8_t s) const noexcept { return sl[s & 15]; }
    // A RoCE QP's GRH traffic class carries DSCP << 2, like the IPv4 TOS.
    constexpr std::uint8_t from_grh_tclass(std::uint8_t tclass) const noexcept { return from_tos(tclass); }

    // Sets one entry; returns "" or why not ("dscp 64 out of range 0..63").
    std::string set(const std::string& field, unsigned key, unsigned tc) {
        const unsigned size = field == "dscp" ? 64 : field == "pcp" ? 8 : field == "sl" ? 16 : 0;
        if (!size) return "'" + field + "' is not dscp, pcp or sl";
        if (key >= size) return field + " " + std::to_string(key) + " out of range 0.." + std::to_string(size - 1);
        if (tc >= tc_count) return "tc " + std::to_string(tc) + " out of range 0..7";
        (field == "dscp" ? dscp.data() : field == "pcp" ? pcp.data() : sl.data())[key] = static_cast<std::uint8_t>(tc);
        return "";
    }
};

// "1Gbit", "250Mbit", "64kbit", "2000000" (bits per second, decimal units
// as tc uses them; "bit" optional, "bps" accepted). False on anything else.
inline bool parse_rate(const std::string& s, std::uint64_t& bps) {
    std::size_t i = 0;
    double v = 0;
    try {
        v = std::stod(s, &i);
    } catch (...) {
        return false;
    }
    std::string unit = s.substr(i);
    for (char& c : unit) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    for (const char* suffix : {"bit", "bps"})
        if (unit.size() >= 3 && unit.compare(unit.size() - 3, 3, suffix) == 0) unit.resize(unit.size() - 3);
    double mult = 1;
    if (unit == "k") mult = 1e3;
    else if (unit == "m") mult = 1e6;
    else if (unit == "g") mult = 1e9;
    else if (unit == "t") mult = 1e12;
    else if (!unit.empty()) return false;
    if (!(v > 0) || v * mult > 1e15) return false;
    bps = static_cast<std::uint64_t>(v * mult + 0.5);
    return bps > 0;
}

} // namespace railgate::qos
