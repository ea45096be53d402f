#include "dataplane/proto/frame.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <immintrin.h>

namespace railgate::frame {
namespace {

constexpr std::uint16_t ethertype_ipv4 = 0x0800;
constexpr std::uint16_t ethertype_arp = 0x0806;
constexpr std::uint16_t ethertype_vlan = 0x8100;
constexpr std::uint8_t proto_icmp = 1;
constexpr std::uint8_t proto_udp = 17;

inline std::uint16_t rd16(const std::uint8_t* p) noexcept {
    return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
}
inline std::uint32_t rd32(const std::uint8_t* p) noexcept {
    return std::uint32_t{rd16(p)} << 16 | rd16(p + 2);
}
inline void wr16(std::uint8_t* p, std::uint16_t v) noexcept {
    p[0] = static_cast<std::uint8_t>(v >> 8);
    p[1] = static_cast<std::uint8_t>(v);
}
inline void wr32(std::uint8_t* p, std::uint32_t v) noexcept {
    wr16(p, static_cast<std::uint16_t>(v >> 16));
    wr16(p + 2, static_cast<std::uint16_t>(v));
}

// The one's-complement sum of RFC 1071: 32-bit words in the CPU's own
// (little-endian) order added into a 64-bit accumulator (2^32 words before
// it could overflow; no carry to chase, so the loop vectorises), folded
// with end-around carries at the end, and the folded sum, which comes out
// byte-swapped (RFC 1071 sec. 2B), swapped back once.
std::uint16_t ones_sum(const std::uint8_t* p, std::size_t len) noexcept {
    std::uint64_t sum = 0;
    const std::size_t words = len / 4;
    for (std::size_t i = 0; i < words; ++i) {
        std::uint32_t w;
        std::memcpy(&w, p + 4 * i, 4);
        sum += w;
    }
    p += 4 * words;
    len -= 4 * words;
    if (len >= 2) {
        std::uint16_t w;
        std::memcpy(&w, p, 2);
        sum += w;
        p += 2, len -= 2;
    }
    if (len) sum += p[0]; // the high byte of a big-endian word: low in ours
    sum = (sum & 0xffffffffu) + (sum >> 32);
    sum = (sum & 0xffffffffu) + (sum >> 32);
    sum = (sum & 0xffffu) + (sum >> 16);
    sum = (sum & 0xffffu) + (sum >> 16);
    return __builtin_bswap16(static_cast<std::uint16_t>(sum));
}

// Every path writes into one `info` the caller returns, so that the
// compiler returns it in place (with a return per path it built a local
// and copied it out with rep movs: a fifth of the gateway's per-packet time).
void drop(info& fi, drop_reason r) noexcept {
    fi.k = kind::drop;
    fi.reason = r;
}

void classify_arp(info& fi, const std::uint8_t* p, std::size_t len, const endpoint& self) noexcept {
    if (len < arp_frame_bytes) return drop(fi, drop_reason::arp_malformed);
    const std::uint8_t* a = p + eth_bytes;
    // htype Ethernet, ptype IPv4, hlen 6, plen 4.
    if (rd16(a) != 1 || rd16(a + 2) != ethertype_ipv4 || a[4] != 6 || a[5] != 4)
        return drop(fi, drop_reason::arp_malformed);
    const std::uint16_t op = rd16(a + 6);
    std::memcpy(fi.src.mac.b, a + 8, 6);
    fi.src.ip = rd32(a + 14);
    fi.arp_target_ip = rd32(a + 24);
    if (fi.arp_target_ip != self.ip) return drop(fi, drop_reason::arp_not_ours);
    if (op == 1) fi.k = kind::arp_request;
    else if (op == 2) fi.k = kind::arp_reply;
    else return drop(fi, drop_reason::arp_malformed);
    return;
}

} // namespace

std::uint16_t inet_checksum(const void* data, std::size_t len) noexcept {
    const auto* p = static_cast<const std::uint8_t*>(data);
    if (len == ipv4_bytes) { // an IPv4 header without options: every frame, twice
        std::uint32_t sum = 0;
        for (unsigned i = 0; i < ipv4_bytes; i += 2) sum += rd16(p + i);
        sum = (sum & 0xffffu) + (sum >> 16);
        sum = (sum & 0xffffu) + (sum >> 16);
        return static_cast<std::uint16_t>(~sum);
    }
    return static_cast<std::uint16_t>(~ones_sum(p, len));
}

// Payload-sized sums (every railgate chunk, twice or more per hop; the
// workers' copies into and out of their frames) in the widest vectors the
// CPU has. Each adds the bytes' little-endian 32-bit words (the last one
// padded with zeros) into 64-bit lanes, optionally storing them to `d` on
// the way; fold_words makes the ones' sum. Hand-written: GCC's
// vectorisation of the scalar loop copied-and-summed at 0.6x memcpy.
namespace {

// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized (_mm512_undefined
// in their masked forms), as in dataplane/reduce.
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
template <bool Copy>
__attribute__((target("avx512f,avx512bw"))) std::uint64_t words_avx512(std::uint8_t* d, const std::uint8_t* s,
                                                                      std::size_t n) noexcept {
    const __m512i lo = _mm512_set1_epi64(0xffffffff);
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
// (Macros: lambdas would not inherit the function's target.)
#define RG_WORDS(v) _mm512_add_epi64(_mm512_and_si512(v, lo), _mm512_srli_epi64(v, 32))
    std::size_t i = 0;
    for (; i + 256 <= n; i += 256) {
        const __m512i v0 = _mm512_loadu_si512(s + i), v1 = _mm512_loadu_si512(s + i + 64);
        const __m512i v2 = _mm512_loadu_si512(s + i + 128), v3 = _mm512_loadu_si512(s + i + 192);
        if constexpr (Copy) {
            _mm512_storeu_si512(d + i, v0);
            _mm512_storeu_si512(d + i + 64, v1);
            _mm512_storeu_si512(d + i + 128, v2);
            _mm512_storeu_si512(d + i + 192, v3);
        }
        a0 = _mm512_add_epi64(a0, RG_WORDS(v0));
        a1 = _mm512_add_epi64(a1, RG_WORDS(v1));
        a2 = _mm512_add_epi64(a2, RG_WORDS(v2));
        a3 = _mm512_add_epi64(a3, RG_WORDS(v3));
    }
    for (; i < n; i += 64) {
        const __mmask64 m = n - i >= 64 ? ~__mmask64{0} : (__mmask64{1} << (n - i)) - 1;
        const __m512i v = _mm512_maskz_loadu_epi8(m, s + i); // bytes past n: zeros
        if constexpr (Copy) _mm512_mask_storeu_epi8(d + i, m, v);
        a0 = _mm512_add_epi64(a0, RG_WORDS(v));
    }
#undef RG_WORDS
    alignas(64) std::uint64_t l[8];
    _mm512_store_si512(l, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
    return l[0] + l[1] + l[2] + l[3] + l[4] + l[5] + l[6] + l[7];
}
#pragma GCC diagnostic pop

// The bytes of [i, n) as little-endian words (the scalar tails).
std::uint64_t tail_words(const std::uint8_t* s, std::size_t i, std::size_t n) noexcept {
    std::uint64_t t = 0;
    for (; i < n; ++i) t += std::uint64_t{s[i]} << (8 * (i % 4));
    return t;
}

template <bool Copy>
__attribute__((target("avx2"))) std::uint64_t words_avx2(std::uint8_t* d, const std::uint8_t* s, std::size_t n) noexcept {
    const __m256i lo = _mm256_set1_epi64x(0xffffffff);
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
#define RG_WORDS(v) _mm256_add_epi64(_mm256_and_si256(v, lo), _mm256_srli_epi64(v, 32))
#define RG_LD(at) _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + (at)))
#define RG_ST(at, v) _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + (at)), v)
    std::size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        const __m256i v0 = RG_LD(i), v1 = RG_LD(i + 32), v2 = RG_LD(i + 64), v3 = RG_LD(i + 96);
        if constexpr (Copy) {
            RG_ST(i, v0);
            RG_ST(i + 32, v1);
            RG_ST(i + 64, v2);
            RG_ST(i + 96, v3);
        }
        a0 = _mm256_add_epi64(a0, RG_WORDS(v0));
        a1 = _mm256_add_epi64(a1, RG_WORDS(v1));
        a2 = _mm256_add_epi64(a2, RG_WORDS(v2));
        a3 = _mm256_add_epi64(a3, RG_WORDS(v3));
    }
    for (; i + 32 <= n; i += 32) {
        const __m256i v = RG_LD(i);
        if constexpr (Copy) RG_ST(i, v);
        a0 = _mm256_add_epi64(a0, RG_WORDS(v));
    }
#undef RG_WORDS
#undef RG_LD
#undef RG_ST
    if constexpr (Copy) std::memcpy(d + i, s + i, n - i);
    alignas(32) std::uint64_t l[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(l), _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
    return l[0] + l[1] + l[2] + l[3] + tail_words(s, i, n);
}

template <bool Copy>
std::uint64_t words_scalar(std::uint8_t* d, const std::uint8_t* s, std::size_t n) noexcept {
    std::uint64_t t = 0;
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        std::uint32_t w;
        std::memcpy(&w, s + i, 4);
        if constexpr (Copy) std::memcpy(d + i, &w, 4);
        t += w;
    }
    if constexpr (Copy) std::memcpy(d + i, s + i, n - i);
    return t + tail_words(s, i, n);
}

using words_fn = std::uint64_t (*)(std::uint8_t*, const std::uint8_t*, std::size_t) noexcept;
// RAILGATE_ISA=scalar|avx2 caps the choice, as for the reduce kernels
// (the unit tests run each).
template <bool Copy>
words_fn pick_words() noexcept {
    const char* cap = std::getenv("RAILGATE_ISA");
    const bool scalar = cap && std::strcmp(cap, "scalar") == 0, avx2 = cap && std::strcmp(cap, "avx2") == 0;
    if (!scalar && !avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
        return words_avx512<Copy>;
    if (!scalar && __builtin_cpu_supports("avx2")) return words_avx2<Copy>;
    return words_scalar<Copy>;
}

} // namespace

std::uint16_t fold_words(std::uint64_t sum) noexcept {
    sum = (sum & 0xffffffffu) + (sum >> 32);
    sum = (sum & 0xffffffffu) + (sum >> 32);
    sum = (sum & 0xffffu) + (sum >> 16);
    sum = (sum & 0xffffu) + (sum >> 16);
    // Little-endian words: the bytes of the network-order sum, swapped.
    return __builtin_bswap16(static_cast<std::uint16_t>(sum));
}

std::uint16_t ones_sum16(const void* data, std::size_t len) noexcept {
    const auto* p = static_cast<const std::uint8_t*>(data);
    if (len < 256) return ones_sum(p, len);
    static const words_fn f = pick_words<false>();
    return fold_words(f(nullptr, p, len));
}

std::uint16_t copy_and_sum(void* dst, const void* src, std::size_t len) noexcept {
    static const words_fn f = pick_words<true>();
    return fold_words(f(static_cast<std::uint8_t*>(dst), static_cast<const std::uint8_t*>(src), len));
}

// The pseudo-header (RFC 768) and the UDP header of an untagged frame.
std::uint16_t udp_header_sum(const std::uint8_t* frame) noexcept {
    // Fixed-size words, no loop (a few per datagram, on every path).
    const std::uint8_t* ip = frame + eth_bytes;
    const std::uint8_t* u = ip + ipv4_bytes;
    std::uint32_t sum = 0;
    for (unsigned i = 12; i < 20; i += 2) sum += rd16(ip + i); // source, destination
    sum += proto_udp;
    sum += rd16(u + 4);                                        // UDP length (pseudo-header)
    for (unsigned i = 0; i < udp_bytes; i += 2) sum += rd16(u + i);
    sum = (sum & 0xffffu) + (sum >> 16);
    sum = (sum & 0xffffu) + (sum >> 16);
    return static_cast<std::uint16_t>(sum);
}

void fill_udp_checksum(std::uint8_t* frame, std::uint16_t payload_sum) noexcept {
    std::uint8_t* u = frame + eth_bytes + ipv4_bytes;
    wr16(u + 6, 0);
    const std::uint16_t c = static_cast<std::uint16_t>(~add_sums(udp_header_sum(frame), payload_sum));
    wr16(u + 6, c ? c : 0xffff); // 0 means "none" in IPv4: all ones stands for it
}

void fill_udp_checksum(std::uint8_t* frame) noexcept {
    const std::uint8_t* u = frame + eth_bytes + ipv4_bytes;
    fill_udp_checksum(frame, ones_sum16(u + udp_bytes, rd16(u + 4) - udp_bytes));
}

bool udp_checksum_ok(const std::uint8_t* frame, std::size_t len) noexcept {
    if (len < udp_frame_overhead || (frame[eth_bytes] & 0x0f) != 5) return false;
    info fi;
    fi.l4_offset = static_cast<std::uint16_t>(eth_bytes + ipv4_bytes);
    fi.msg_offset = static_cast<std::uint32_t>(udp_frame_overhead);
    const std::size_t ulen = rd16(frame + fi.l4_offset + 4);
    if (ulen < udp_bytes) return false;
    fi.l4_len = static_cast<std::uint32_t>(ulen - udp_bytes);
    return udp_checksum_ok(frame, len, fi);
}

bool udp_checksum_ok(const std::uint8_t* frame, std::size_t contig, const info& fi, const std::uint8_t* more,
                     std::size_t more_len) noexcept {
    if (fi.l4_offset != eth_bytes + ipv4_bytes || fi.msg_offset > contig) return false; // options: not ours
    const std::uint8_t* u = frame + fi.l4_offset;
    if (rd16(u + 6) == 0) return false;
    const std::size_t body = fi.l4_len;
    const std::size_t here = std::min<std::size_t>(body, contig - fi.msg_offset);
    if (here + more_len < body) return false;
    std::uint16_t sum = add_sums(udp_header_sum(frame), ones_sum16(frame + fi.msg_offset, here));
    if (here < body) {
        std::uint16_t rest = ones_sum16(more, body - here);
        // A piece that starts at an odd offset sums byte-swapped (RFC 1071 2B).
        if (here & 1) rest = __builtin_bswap16(rest);
        sum = add_sums(sum, rest);
    }
    return sum == 0xffff;
}

static void classify_into(info& fi, const std::uint8_t* p, std::size_t len, const endpoint& self,
                          std::size_t frame_len) noexcept {
    if (frame_len < len) frame_len = len;
    if (len < eth_bytes) return drop(fi, drop_reason::eth_truncated);
    std::uint16_t et = rd16(p + 12);
    std::size_t l2 = eth_bytes;
    if (et == ethertype_vlan) { // 802.1Q: only forwarded, never railgated's own traffic
        if (len < vlan_eth_bytes) return drop(fi, drop_reason::eth_truncated);
        et = rd16(p + 16);
        l2 = vlan_eth_bytes;
        if (et != ethertype_ipv4) return drop(fi, drop_reason::ethertype);
    }
    if (et == ethertype_arp) return classify_arp(fi, p, len, self);
    if (et != ethertype_ipv4) return drop(fi, drop_reason::ethertype);

    const std::uint8_t* ip = p + l2;
    const std::size_t contig = len - l2;       // readable here
    const std::size_t l3_room = frame_len - l2; // in the frame
    if (contig < ipv4_bytes) return drop(fi, drop_reason::ip_truncated);
    if ((ip[0] >> 4) != 4) return drop(fi, drop_reason::ip_bad_header);
    const std::size_t ihl = std::size_t{ip[0] & 0x0fu} * 4;
    if (ihl < ipv4_bytes) return drop(fi, drop_reason::ip_bad_header);
    const std::size_t total = rd16(ip + 2);
    // Ethernet may pad short frames, so the frame may be longer than total.
    if (ihl > contig || total > l3_room) return drop(fi, drop_reason::ip_truncated);
    if (total < ihl) return drop(fi, drop_reason::ip_bad_header);
    if (inet_checksum(ip, ihl) != 0) return drop(fi, drop_reason::ip_bad_checksum);
    const std::uint32_t dst = rd32(ip + 16);
    if (dst != self.ip) {
        // Unicast to this rail's MAC for another host: the gateway's. Routers
        // forward fragments as they are.
        if (std::memcmp(p, self.mac.b, 6) != 0 || dst >> 28 >= 0xe) return drop(fi, drop_reason::ip_not_ours);
            fi.k = kind::forward;
        fi.l3_offset = static_cast<std::uint16_t>(l2);
        fi.l4_len = static_cast<std::uint32_t>(total); // the IPv4 datagram
        return;
    }
    if (l2 != eth_bytes) return drop(fi, drop_reason::ethertype);
    // MF set or a non-zero fragment offset.
    if (rd16(ip + 6) & 0x3fff) return drop(fi, drop_reason::ip_fragment);

    fi.l3_offset = static_cast<std::uint16_t>(eth_bytes);
    fi.l4_offset = static_cast<std::uint16_t>(eth_bytes + ihl);
    std::memcpy(fi.src.mac.b, p + 6, 6);
    fi.src.ip = rd32(ip + 12);
    fi.src.tos = ip[1];
    const std::uint8_t* l4 = ip + ihl;
    const std::size_t l4_room = total - ihl;

    if (ip[9] == proto_icmp) {
        // Echo request (type 8, code 0) with a correct checksum.
        if (total > contig || l4_room < 8 || l4[0] != 8 || l4[1] != 0 || inet_checksum(l4, l4_room) != 0)
            return drop(fi, drop_reason::icmp_ignored);
        fi.k = kind::icmp_echo;
        fi.l4_len = static_cast<std::uint32_t>(l4_room);
        return;
    }
    if (ip[9] != proto_udp) return drop(fi, drop_reason::ip_proto);
    if (l4_room < udp_bytes || ihl + udp_bytes > contig) return drop(fi, drop_reason::udp_truncated);
    const std::size_t ulen = rd16(l4 + 4);
    if (ulen < udp_bytes || ulen > l4_room) return drop(fi, drop_reason::udp_truncated);
    if (rd16(l4 + 2) != self.udp_port) return drop(fi, drop_reason::udp_port);
    fi.src.udp_port = rd16(l4);
    fi.k = kind::udp;
    fi.msg_offset = static_cast<std::uint32_t>(fi.l4_offset + udp_bytes);
    fi.l4_len = static_cast<std::uint32_t>(ulen - udp_bytes);
    return;
}

info classify(const std::uint8_t* p, std::size_t len, const endpoint& self, std::size_t frame_len) noexcept {
    info fi;
    classify_into(fi, p, len, self, frame_len);
    return fi;
}

namespace {
// 32-bit values' halves, for sums of 16-bit words.
constexpr std::uint32_t halves(std::uint32_t x) noexcept { return (x >> 16) + (x & 0xffff); }
constexpr std::uint16_t fold32(std::uint32_t s) noexcept {
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    return static_cast<std::uint16_t>(s);
}
} // namespace

std::uint16_t write_udp_headers(std::uint8_t* o, const endpoint& src, const endpoint& dst,
                                std::size_t payload_len) noexcept {
    std::memcpy(o, dst.mac.b, 6);
    std::memcpy(o + 6, src.mac.b, 6);
    wr16(o + 12, ethertype_ipv4);
    std::uint8_t* ip = o + eth_bytes;
    const std::uint8_t tos = dst.tos ? dst.tos : src.tos;
    const auto ip_len = static_cast<std::uint16_t>(ipv4_bytes + udp_bytes + payload_len);
    const auto udp_len = static_cast<std::uint16_t>(udp_bytes + payload_len);
    ip[0] = 0x45;
    ip[1] = tos;
    wr16(ip + 2, ip_len);
    wr16(ip + 4, 0);
    wr16(ip + 6, 0x4000); // DF
    ip[8] = 64;
    ip[9] = proto_udp;
    wr32(ip + 12, src.ip);
    wr32(ip + 16, dst.ip);
    // Both checksums from the values, not read back from what was just
    // stored (byte-sized stores do not forward to word-sized loads).
    const std::uint32_t addrs = halves(src.ip) + halves(dst.ip);
    wr16(ip + 10, static_cast<std::uint16_t>(~fold32((0x4500u | tos) + ip_len + 0x4000u + (64u << 8 | proto_udp) + addrs)));
    std::uint8_t* u = ip + ipv4_bytes;
    wr16(u, src.udp_port);
    wr16(u + 2, dst.udp_port);
    wr16(u + 4, udp_len);
    wr16(u + 6, 0);
    return fold32(addrs + proto_udp + 2u * udp_len + src.udp_port + dst.udp_port);
}

void write_udp_headers_offloaded(std::uint8_t* o, const endpoint& src, const endpoint& dst,
                                 std::size_t payload_len) noexcept {
    write_udp_headers(o, src, dst, payload_len);
    const auto udp_len = static_cast<std::uint16_t>(udp_bytes + payload_len);
    wr16(o + eth_bytes + ipv4_bytes + 6, fold32(halves(src.ip) + halves(dst.ip) + proto_udp + udp_len));
}

void set_udp_checksum(std::uint8_t* frame, std::uint16_t header_sum, std::uint16_t msg_sum) noexcept {
    const auto c = static_cast<std::uint16_t>(~add_sums(header_sum, msg_sum));
    wr16(frame + eth_bytes + ipv4_bytes + 6, c ? c : 0xffff); // 0 means "none": all ones stands for it
}

bool mark_ce(std::uint8_t* frame, std::size_t len) noexcept {
    if (len < eth_bytes + ipv4_bytes || rd16(frame + 12) != ethertype_ipv4) return false;
    std::uint8_t* ip = frame + eth_bytes;
    const unsigned ecn = ip[1] & 0x03u;
    if ((ip[0] >> 4) != 4 || ecn == 0 || ecn == 0x03) return false;
    const std::uint16_t old_word = rd16(ip);
    ip[1] = static_cast<std::uint8_t>(ip[1] | 0x03u);
    // HC' = ~(~HC + ~m + m')
    const std::uint32_t s = static_cast<std::uint16_t>(~rd16(ip + 10)) + static_cast<std::uint16_t>(~old_word) + rd16(ip);
    wr16(ip + 10, static_cast<std::uint16_t>(~fold32(s)));
    return true;
}

void retarget_udp_headers(std::uint8_t* o, const endpoint& dst) noexcept {
    std::memcpy(o, dst.mac.b, 6);
    std::uint8_t* ip = o + eth_bytes;
    if (dst.tos) ip[1] = dst.tos;
    wr32(ip + 16, dst.ip);
    wr16(ip + 10, 0);
    wr16(ip + 10, inet_checksum(ip, ipv4_bytes));
    wr16(ip + ipv4_bytes + 2, dst.udp_port);
}

void arp_reply_in_place(std::uint8_t* p, const endpoint& self) noexcept {
    std::uint8_t* a = p + eth_bytes;
    std::memcpy(p, a + 8, 6); // to the requester
    std::memcpy(p + 6, self.mac.b, 6);
    wr16(a + 6, 2);
    std::memcpy(a + 18, a + 8, 10); // target = old sender (MAC + IP)
    std::memcpy(a + 8, self.mac.b, 6);
    wr32(a + 14, self.ip);
}

void write_arp_request(std::uint8_t* o, const endpoint& self, std::uint32_t target_ip) noexcept {
    std::memset(o, 0xff, 6);
    std::memcpy(o + 6, self.mac.b, 6);
    wr16(o + 12, ethertype_arp);
    std::uint8_t* a = o + eth_bytes;
    wr16(a, 1);
    wr16(a + 2, ethertype_ipv4);
    a[4] = 6;
    a[5] = 4;
    wr16(a + 6, 1);
    std::memcpy(a + 8, self.mac.b, 6);
    wr32(a + 14, self.ip);
    std::memset(a + 18, 0, 6);
    wr32(a + 24, target_ip);
}

std::size_t write_icmp_error(std::uint8_t* o, const endpoint& self, const mac_addr& to, const std::uint8_t* ip,
                             std::size_t ip_len, std::uint8_t type, std::uint8_t code, std::uint16_t mtu) noexcept {
    if (ip_len < ipv4_bytes) return 0;
    const std::size_t ihl = std::size_t{ip[0] & 0x0fu} * 4;
    if (ihl < ipv4_bytes || ihl > ip_len) return 0;
    const std::uint32_t src = rd32(ip + 12);
    if (src == 0 || src >> 28 >= 0xe || (rd16(ip + 6) & 0x1fff)) return 0;
    const std::size_t quote = std::min(ip_len, ihl + 8);
    if (ip[9] == proto_icmp) {
        if (quote < ihl + 1) return 0;
        const std::uint8_t t = ip[ihl];
        if (t != 0 && t != 8 && t != 13 && t != 14) return 0; // only queries get errors
    }
    std::memcpy(o, to.b, 6);
    std::memcpy(o + 6, self.mac.b, 6);
    wr16(o + 12, ethertype_ipv4);
    std::uint8_t* h = o + eth_bytes;
    const std::size_t icmp_len = 8 + quote;
    h[0] = 0x45;
    h[1] = 0xc0; // network control, as routers send ICMP
    wr16(h + 2, static_cast<std::uint16_t>(ipv4_bytes + icmp_len));
    wr16(h + 4, 0);
    wr16(h + 6, 0);
    h[8] = 64;
    h[9] = proto_icmp;
    wr16(h + 10, 0);
    wr32(h + 12, self.ip);
    wr32(h + 16, src);
    wr16(h + 10, inet_checksum(h, ipv4_bytes));
    std::uint8_t* c = h + ipv4_bytes;
    c[0] = type;
    c[1] = code;
    wr16(c + 2, 0);
    wr16(c + 4, 0);
    wr16(c + 6, type == 3 && code == 4 ? mtu : 0);
    std::memcpy(c + 8, ip, quote);
    wr16(c + 2, inet_checksum(c, icmp_len));
    return eth_bytes + ipv4_bytes + icmp_len;
}

void icmp_echo_reply_in_place(std::uint8_t* p, const info& fi) noexcept {
    std::uint8_t mac[6];
    std::memcpy(mac, p, 6);
    std::memcpy(p, p + 6, 6);
    std::memcpy(p + 6, mac, 6);
    std::uint8_t* ip = p + fi.l3_offset;
    std::uint8_t a[4];
    std::memcpy(a, ip + 12, 4);
    std::memcpy(ip + 12, ip + 16, 4);
    std::memcpy(ip + 16, a, 4);
    ip[8] = 64;
    wr16(ip + 10, 0);
    wr16(ip + 10, inet_checksum(ip, static_cast<std::size_t>(fi.l4_offset - fi.l3_offset)));
    std::uint8_t* icmp = p + fi.l4_offset;
    icmp[0] = 0; // echo reply
    wr16(icmp + 2, 0);
    wr16(icmp + 2, inet_checksum(icmp, fi.l4_len));
}

} // namespace railgate::frame
