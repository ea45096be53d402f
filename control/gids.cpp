#include "control/gids.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace railgate::control {
namespace fs = std::filesystem;

std::string first_line(const std::string& path) {
    std::ifstream in(path);
    std::string s;
    std::getline(in, s);
    return s;
}

namespace {

bool all_zero(const std::string& gid) {
    return std::all_of(gid.begin(), gid.end(), [](char c) { return c == '0' || c == ':'; });
}

// 0000:0000:0000:0000:0000:ffff:c612:0001 -> 198.18.0.1
std::string mapped_ipv4(const std::string& gid) {
    if (gid.size() != 39 || gid.compare(0, 30, "0000:0000:0000:0000:0000:ffff:") != 0) return {};
    unsigned a = 0, b = 0;
    try {
        a = static_cast<unsigned>(std::stoul(gid.substr(30, 4), nullptr, 16));
        b = static_cast<unsigned>(std::stoul(gid.substr(35, 4), nullptr, 16));
    } catch (...) {
        return {};
    }
    return std::to_string(a >> 8) + "." + std::to_string(a & 255) + "." + std::to_string(b >> 8) + "." +
           std::to_string(b & 255);
}

} // namespace

std::string gid_version(const std::string& type) {
    if (type.find("v2") != std::string::npos) return "v2";
    if (type.find("v1") != std::string::npos) return "v1";
    return type.empty() ? "" : "IB";
}

std::vector<gid_entry> read_gids(const std::string& root) {
    std::vector<gid_entry> out;
    std::error_code ec;
    for (const fs::directory_entry& dev : fs::directory_iterator(root, ec)) {
        const fs::path ports = dev.path() / "ports";
        for (const fs::directory_entry& port : fs::directory_iterator(ports, ec)) {
            unsigned pn = 0;
            try {
                pn = static_cast<unsigned>(std::stoul(port.path().filename().string()));
            } catch (...) {
                continue;
            }
            for (const fs::directory_entry& g : fs::directory_iterator(port.path() / "gids", ec)) {
                gid_entry e;
                try {
                    e.index = static_cast<unsigned>(std::stoul(g.path().filename().string()));
                } catch (...) {
                    continue;
                }
                e.gid = first_line(g.path());
                if (e.gid.empty() || all_zero(e.gid)) continue;
                e.device = dev.path().filename().string();
                e.port = pn;
                e.ipv4 = mapped_ipv4(e.gid);
                const std::string idx = std::to_string(e.index);
                e.type = first_line(port.path() / "gid_attrs" / "types" / idx);
                e.netdev = first_line(port.path() / "gid_attrs" / "ndevs" / idx);
                out.push_back(std::move(e));
            }
        }
    }
    std::sort(out.begin(), out.end(), [](const gid_entry& a, const gid_entry& b) {
        return std::tie(a.device, a.port, a.index) < std::tie(b.device, b.port, b.index);
    });
    return out;
}

port_counters read_port_counters(const std::string& device, unsigned port, const std::string& root) {
    port_counters out;
    const fs::path dir = fs::path(root) / device / "ports" / std::to_string(port);
    const auto read_dir = [](const fs::path& d, std::vector<port_counter>& to) {
        std::error_code ec;
        for (const fs::directory_entry& f : fs::directory_iterator(d, ec)) {
            const std::string name = f.path().filename().string();
            if (name == "lifespan") continue;
            const std::string v = first_line(f.path().string());
            if (v.empty() || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
            try {
                to.push_back({name, std::stoull(v)});
            } catch (...) { // above 2^64 - 1
            }
        }
        std::sort(to.begin(), to.end(), [](const port_counter& a, const port_counter& b) { return a.name < b.name; });
    };
    read_dir(dir / "hw_counters", out.hw);
    read_dir(dir / "counters", out.pma);
    return out;
}

} // namespace railgate::control
