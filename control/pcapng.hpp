// pcapng (draft-ietf-opsawg-pcapng) output for railctl capture: a section
// header, one interface description per rail, and enhanced packet blocks
// carrying the direction in epb_flags and a dropped packet's reason in a
// comment. Little-endian, nanosecond timestamps. Pure; no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace railgate::control::pcapng {

struct interface {
    std::string name;        // the rail's name
    std::string description; // its device, driver and address
    std::uint32_t snaplen = 0;
};

enum class direction : std::uint8_t { unknown = 0, inbound = 1, outbound = 2 };

// Appends the section header block (naming `application`) and one
// interface description block per interface (Ethernet, if_tsresol 9).
void begin(std::string& out, std::string_view application, const std::vector<interface>& ifs);
// Appends one enhanced packet block: `data` is the captured bytes (at most
// the interface's snaplen), `orig_len` the packet's length on the wire,
// `ns` nanoseconds since the epoch; `comment` (may be empty) is an
// opt_comment.
void packet(std::string& out, std::uint32_t interface_id, std::uint64_t ns, std::string_view data,
            std::uint32_t orig_len, direction dir, std::string_view comment = {});

} // namespace railgate::control::pcapng
