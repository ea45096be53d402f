// Dotted-quad IPv4 text <-> host-order addresses, for configs, flags and logs.
#pragma once

#include <cstdint>
#include <string>

namespace railgate::net {

// Parses dotted-quad IPv4 into host order; false on anything else.
bool parse_ipv4(const std::string& s, std::uint32_t& out) noexcept;
std::string format_ipv4(std::uint32_t ip);

} // namespace railgate::net
