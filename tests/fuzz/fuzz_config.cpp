// libFuzzer target: railgated's TOML configuration (config::parse, toml++
// underneath). The input is the file's text. Beyond no crash and no
// sanitizer report: a text is judged the same way twice; every error names
// what is wrong, on a line the text has; and a configuration accepted as
// valid holds what the validators promise railgated (rail names, MTUs,
// the metrics address, slot limits, the fault spec).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "control/config.hpp"
#include "dataplane/fault/injector.hpp"

using namespace railgate;

namespace {

[[noreturn]] void broken(const char* what) {
    std::fprintf(stderr, "fuzz_config: invariant broken: %s\n", what);
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const config::result r = config::parse(text, "fuzz.toml");
    const config::result again = config::parse(text, "fuzz.toml");
    if (r.ok() != again.ok() || r.errors.size() != again.errors.size()) broken("two parses of one text disagree");
    std::size_t lines = 1;
    for (char c : text) lines += c == '\n';
    for (const config::error& e : r.errors) {
        if (e.what.empty()) broken("an error without a reason");
        if (e.line > lines + 1) broken("an error on a line the text does not have");
        if (e.text().find("fuzz.toml") == std::string::npos) broken("an error that does not name the file");
    }
    if (!r.ok()) return 0;
    const config::appliance& c = r.cfg;
    if (!c.metrics.empty() && !config::check_metrics(c.metrics, c.metrics_public).empty()) broken("accepted metrics address");
    if (c.default_slots == 0 || c.default_slots > c.max_slots) broken("accepted slot limits");
    if (c.max_jobs == 0) broken("accepted max_jobs 0");
    fault::spec f;
    if (!fault::parse(c.fault, f).empty()) broken("accepted fault spec");
    std::set<std::string> names;
    for (const config::rail& rail : c.rails) {
        if (!config::check_rail_name(rail.name).empty()) broken("accepted rail name");
        if (!names.insert(rail.name).second) broken("two rails with one name");
        if (!config::check_mtu(rail.mtu).empty()) broken("accepted MTU");
        if (rail.mtu_max && rail.mtu_max < rail.mtu) broken("accepted mtu_max below mtu");
    }
    return 0;
}
