// What the unit tests' stand-in railgateds on loopback share: a UDP socket
// bound to 127.0.0.1 on a port the kernel picks, and the JOIN_ACK of a
// one-rail job.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
#include <string_view>

#include "dataplane/proto/parse.hpp"

namespace railgate::test {

// A UDP socket on 127.0.0.1; its port in `port`.
inline int bind_loopback(std::uint16_t& port) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
    socklen_t len = sizeof sa;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    port = ntohs(sa.sin_port);
    return fd;
}

// The JOIN_ACK answering `join` for a job of one rail on 127.0.0.1:port
// (MTU 1500), or of two with a second on 127.0.0.1:port1, written to `out`
// (header and body); returns its length. `index`: the rail's index (the
// header's aux, as railgated sets it); `more`: rails listed beyond those
// (as when one was added), at 127.0.0.1:port + 100 + i.
inline std::size_t join_ack(const wire::header& join, std::uint16_t port, std::uint16_t pool,
                            std::uint16_t chunk_bytes, std::uint8_t* out, std::uint16_t port1 = 0,
                            wire::rail_policy policy = wire::rail_policy::rail, unsigned index = 0,
                            unsigned more = 0) {
    wire::header r = join;
    r.type = wire::msg_type::join_ack;
    r.flags = 0;
    r.gen = 0x80000001u;
    r.aux = index;
    wire::join_ack_body b;
    b.pool_size = pool;
    b.n_rails = static_cast<std::uint8_t>((port1 ? 2 : 1) + more);
    b.policy = policy;
    b.chunk_bytes = chunk_bytes;
    b.stall_ms = 1000;
    for (unsigned i = 0; i < b.n_rails; ++i) {
        b.rails[i].ip = INADDR_LOOPBACK;
        b.rails[i].udp_port = static_cast<std::uint16_t>(i == 0 ? port : i == 1 && port1 ? port1 : port + 100 + i);
        b.rails[i].mtu = 1500;
        b.rails[i].chunk_bytes = chunk_bytes;
    }
    wire::encode_header(r, out);
    return wire::header_bytes + wire::encode_join_ack_body(b, out + wire::header_bytes);
}

// railgated's refusal of `join` (whose JOIN body carried `nonce`): an
// ERROR with `code`, `detail` in its offset and `text` after the header,
// written to `out`; returns its length.
inline std::size_t refusal(const wire::header& join, std::uint64_t nonce, wire::error_code code,
                           std::uint64_t detail, std::string_view text, std::uint8_t* out) {
    wire::encode_header(wire::error_header(join, code, detail, static_cast<std::uint32_t>(nonce)), out);
    std::memcpy(out + wire::header_bytes, text.data(), text.size());
    return wire::header_bytes + text.size();
}

// A header-only answer (HELD, PONG) to `to`, written to `out`
// (header_bytes), as railgated's: its type, no flags, `aux`; no count but
// a PONG's (it echoes the chunk a PING names).
inline void header_answer(wire::header to, wire::msg_type type, std::uint32_t aux, std::uint8_t* out) {
    to.type = type;
    to.flags = 0;
    if (type != wire::msg_type::pong) to.count = 0;
    to.aux = aux;
    wire::encode_header(to, out);
}

} // namespace railgate::test
