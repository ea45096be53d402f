#include "control/pcapng.hpp"

#include <cstring>

namespace railgate::control::pcapng {
namespace {

constexpr std::uint32_t shb_type = 0x0A0D0D0A, idb_type = 1, epb_type = 6;
constexpr std::uint16_t opt_end = 0, opt_comment = 1;
constexpr std::uint16_t shb_userappl = 4, if_name = 2, if_description = 3, if_tsresol = 9, epb_flags = 2;
constexpr std::uint16_t linktype_ethernet = 1;

void put16(std::string& o, std::uint16_t v) { o.append(reinterpret_cast<const char*>(&v), 2); }
void put32(std::string& o, std::uint32_t v) { o.append(reinterpret_cast<const char*>(&v), 4); }
void pad4(std::string& o) { o.append((4 - o.size() % 4) % 4, '\0'); }

void option(std::string& o, std::uint16_t code, std::string_view v) {
    put16(o, code);
    put16(o, static_cast<std::uint16_t>(v.size()));
    o.append(v);
    pad4(o);
}

// A block of `type` around `body` (its length a multiple of 4).
void block(std::string& out, std::uint32_t type, const std::string& body) {
    const auto total = static_cast<std::uint32_t>(12 + body.size());
    put32(out, type);
    put32(out, total);
    out += body;
    put32(out, total);
}

} // namespace

void begin(std::string& out, std::string_view application, const std::vector<interface>& ifs) {
    std::string b;
    put32(b, 0x1A2B3C4D); // byte-order magic
    put16(b, 1);          // version 1.0
    put16(b, 0);
    put32(b, 0xFFFFFFFF); // section length unknown
    put32(b, 0xFFFFFFFF);
    option(b, shb_userappl, application);
    put32(b, opt_end);
    block(out, shb_type, b);
    for (const interface& i : ifs) {
        std::string d;
        put16(d, linktype_ethernet);
        put16(d, 0);
        put32(d, i.snaplen);
        option(d, if_name, i.name);
        if (!i.description.empty()) option(d, if_description, i.description);
        option(d, if_tsresol, std::string_view("\x09", 1)); // 10^-9 s
        put32(d, opt_end);
        block(out, idb_type, d);
    }
}

void packet(std::string& out, std::uint32_t interface_id, std::uint64_t ns, std::string_view data,
            std::uint32_t orig_len, direction dir, std::string_view comment) {
    // Written in place with one resize (this runs once per captured
    // packet): the block's fixed part, the padded data, epb_flags, the
    // comment, the end.
    const std::size_t data_pad = (4 - data.size() % 4) % 4, comment_pad = (4 - comment.size() % 4) % 4;
    const std::size_t comment_bytes = comment.empty() ? 0 : 4 + comment.size() + comment_pad;
    const auto total = static_cast<std::uint32_t>(28 + data.size() + data_pad + 8 + comment_bytes + 4 + 4);
    const std::size_t at = out.size();
    out.resize(at + total); // zero-filled: the padding
    char* p = out.data() + at;
    auto w32 = [&p](std::uint32_t v) {
        std::memcpy(p, &v, 4);
        p += 4;
    };
    auto w16 = [&p](std::uint16_t v) {
        std::memcpy(p, &v, 2);
        p += 2;
    };
    w32(epb_type);
    w32(total);
    w32(interface_id);
    w32(static_cast<std::uint32_t>(ns >> 32));
    w32(static_cast<std::uint32_t>(ns));
    w32(static_cast<std::uint32_t>(data.size()));
    w32(orig_len);
    std::memcpy(p, data.data(), data.size());
    p += data.size() + data_pad;
    w16(epb_flags);
    w16(4);
    w32(static_cast<std::uint32_t>(dir));
    if (!comment.empty()) {
        w16(opt_comment);
        w16(static_cast<std::uint16_t>(comment.size()));
        std::memcpy(p, comment.data(), comment.size());
        p += comment.size() + comment_pad;
    }
    w32(opt_end);
    w32(total);
}

} // namespace railgate::control::pcapng
