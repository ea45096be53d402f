// Gateway forwarding's route table: IPv4 prefixes to next hops, longest
// prefix match. Pure (no DPDK), so that the rules are unit-tested alone.
//
// The table is built once from a route list and then only read: railgated
// publishes a new table to its lcores when routes change, so a lookup takes
// no lock. One open-addressing hash per prefix length in use, probed from
// the longest length down: a lookup costs one probe per distinct length, a
// few for a gateway's handful of prefixes. (DPDK's rte_lpm would cost a
// fixed 64 MiB tbl24 per table, more than a --no-huge EAL is given.)
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/proto/ipv4.hpp"

namespace railgate::net {

inline constexpr std::uint32_t prefix_mask(unsigned len) noexcept {
    return len == 0 ? 0 : ~std::uint32_t{0} << (32 - len);
}

// "10.2.0.0/24" (host order). The host bits must be zero. "" or why not.
inline std::string parse_prefix(const std::string& s, std::uint32_t& prefix, unsigned& len) {
    const std::size_t slash = s.find('/');
    const std::string addr = s.substr(0, slash);
    if (slash == std::string::npos || !parse_ipv4(addr, prefix))
        return "'" + s + "' is not a prefix like 10.2.0.0/24";
    const std::string l = s.substr(slash + 1);
    if (l.empty() || l.size() > 2 || !std::all_of(l.begin(), l.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoul(l) > 32)
        return "'" + s + "': the prefix length must be 0..32";
    len = static_cast<unsigned>(std::stoul(l));
    if (prefix & ~prefix_mask(len))
        return "'" + s + "' has host bits set (" + format_ipv4(prefix & prefix_mask(len)) + "/" + l + "?)";
    return {};
}

inline std::string format_prefix(std::uint32_t prefix, unsigned len) {
    return format_ipv4(prefix) + "/" + std::to_string(len);
}

// Longest-prefix match from (prefix, length) to a value.
class lpm_table {
public:
    struct entry {
        std::uint32_t prefix = 0;
        unsigned len = 0;
        std::uint32_t value = 0;
    };

    lpm_table() = default;
    // Entries must have distinct (prefix, len) and zero host bits.
    explicit lpm_table(const std::vector<entry>& entries) {
        std::vector<unsigned> lens;
        for (const entry& e : entries) lens.push_back(e.len);
        std::sort(lens.begin(), lens.end(), std::greater<>());
        lens.erase(std::unique(lens.begin(), lens.end()), lens.end());
        for (unsigned l : lens) {
            group g;
            g.mask = prefix_mask(l);
            std::size_t n = 0;
            for (const entry& e : entries) n += e.len == l;
            std::size_t size = 4;
            while (size < 2 * n) size *= 2;
            g.slots.resize(size);
            for (const entry& e : entries) {
                if (e.len != l) continue;
                std::size_t i = hash(e.prefix) & (size - 1);
                while (g.slots[i].used) i = (i + 1) & (size - 1);
                g.slots[i] = {e.prefix, e.value, true};
            }
            groups_.push_back(std::move(g));
        }
    }

    std::optional<std::uint32_t> lookup(std::uint32_t ip) const noexcept {
        for (const group& g : groups_) {
            const std::uint32_t key = ip & g.mask;
            const std::size_t m = g.slots.size() - 1;
            for (std::size_t i = hash(key) & m;; i = (i + 1) & m) {
                const slot& s = g.slots[i];
                if (!s.used) break;
                if (s.key == key) return s.value;
            }
        }
        return std::nullopt;
    }
    bool empty() const noexcept { return groups_.empty(); }

private:
    struct slot {
        std::uint32_t key = 0, value = 0;
        bool used = false;
    };
    struct group {
        std::uint32_t mask = 0;
        std::vector<slot> slots; // a power of two, at most half full
    };
    static std::size_t hash(std::uint32_t k) noexcept {
        return static_cast<std::size_t>((k * 0x9E3779B1u) >> 7 ^ k);
    }
    std::vector<group> groups_; // longest prefix first
};

} // namespace railgate::net
