// Dotted-quad IPv4 text <-> host-order addresses, for configs, flags and logs.
#pragma once

#include <arpa/inet.h>

#include <cstdint>
#include <string>

namespace railgate::net {

// Parses dotted-quad IPv4 into host order; false on anything else.
inline bool parse_ipv4(const std::string& s, std::uint32_t& out) noexcept {
    in_addr a{};
    if (inet_pton(AF_INET, s.c_str(), &a) != 1) return false;
    out = ntohl(a.s_addr);
    return true;
}

// Into a caller's buffer (no allocation: the lcores' error texts).
struct ipv4_text {
    char s[INET_ADDRSTRLEN];
    explicit ipv4_text(std::uint32_t ip) noexcept {
        in_addr a{htonl(ip)};
        inet_ntop(AF_INET, &a, s, sizeof s);
    }
};

inline std::string format_ipv4(std::uint32_t ip) {
    char buf[INET_ADDRSTRLEN];
    in_addr a{htonl(ip)};
    inet_ntop(AF_INET, &a, buf, sizeof buf);
    return buf;
}

} // namespace railgate::net
