// libFuzzer target: the control protocol, both ends.
//
// railgated's end: the input goes, cut into pieces at places the input
// chooses, over a real unix socket to a real control::server (its line
// framing, size limits and unfinished-request handling) whose handler reads
// the request the way railgated's commands do (control::check_keys and the
// typed accessors, a histogram argument through histogram_from_json).
// railctl's end: the input is also read as a response line (JSON object with
// "ok"), and any "histogram" in it is decoded as railctl decodes latency.
//
// Invariants, beyond no crash and no sanitizer report: the server answers
// every complete line it accepted with one JSON object carrying "ok" (at
// most one extra for an unfinished or oversized tail), and keeps serving
// the next client; an accepted request has a command and object args; a
// decoded histogram counts exactly what its buckets hold.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "control/protocol.hpp"
#include "control/server.hpp"

using namespace railgate;
using control::json;

namespace {

[[noreturn]] void broken(const char* what) {
    std::fprintf(stderr, "fuzz_control: invariant broken: %s\n", what);
    std::abort();
}

void check_histogram(const json& j) {
    stats::histogram h;
    if (!control::histogram_from_json(j, h).empty()) return;
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < stats::histogram::bucket_count; ++i) n += h.bucket(i);
    if (n != h.count()) broken("histogram count differs from its buckets");
}

// What railgated's handlers do with a request's arguments.
json handle(const control::request& r) {
    if (r.command.empty() || !r.args.is_object()) broken("accepted request without command or object args");
    if (std::string e = control::check_keys(r.args, {"rail", "mtu", "up", "histogram", "gid_index", "name"}); !e.empty())
        return control::fail(e);
    std::optional<std::string> rail, name;
    std::optional<std::uint64_t> mtu, gid;
    bool up = false;
    for (std::string e : {control::get_string(r.args, "rail", rail), control::get_string(r.args, "name", name),
                          control::get_uint(r.args, "mtu", 9216, mtu), control::get_uint(r.args, "gid_index", 255, gid),
                          control::get_bool(r.args, "up", up)})
        if (!e.empty()) return control::fail(e);
    if (mtu && *mtu > 9216) broken("get_uint let a value past its bound through");
    json out = {{"command", r.command}};
    if (r.args.contains("histogram")) {
        stats::histogram h;
        if (std::string e = control::histogram_from_json(r.args["histogram"], h); !e.empty()) return control::fail(e);
        out["histogram"] = control::histogram_to_json(h);
    }
    if (rail) out["rail"] = *rail + "/" + r.command; // echoes what the client sent
    return control::ok(out);
}

struct fixture {
    std::string path;
    std::unique_ptr<control::server> srv;
    fixture() {
        path = "/tmp/rg-fuzz-control-" + std::to_string(getpid()) + ".sock";
        control::socket_options o;
        o.path = path;
        o.mode = 0600;
        o.incomplete_timeout = std::chrono::milliseconds(20);
        o.max_output = 1 << 16;
        srv = std::make_unique<control::server>(o, handle);
    }
};

int connect_to(const std::string& path) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) broken("the server stopped accepting");
    return fd;
}

// Sends `bytes` in pieces, hangs up its sending side, and reads every
// response until the server closes; returns the response lines.
std::vector<std::string> exchange(const std::string& path, std::string_view bytes, std::uint8_t cut) {
    const int fd = connect_to(path);
    std::string in;
    char b[65536];
    auto read_some = [&](int ms) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, ms) <= 0) return 0;
        const ssize_t n = read(fd, b, sizeof b);
        if (n > 0) in.append(b, static_cast<std::size_t>(n));
        return n > 0 ? 1 : -1;
    };
    const std::size_t piece = 1 + cut % 64;
    for (std::size_t off = 0; off < bytes.size();) {
        const ssize_t w = send(fd, bytes.data() + off, std::min(piece, bytes.size() - off), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EAGAIN) {
            if (read_some(10) < 0) break;
            continue;
        }
        if (w <= 0) break; // the server cut us off (oversized): fine
        off += static_cast<std::size_t>(w);
    }
    shutdown(fd, SHUT_WR);
    int r;
    while ((r = read_some(5000)) > 0) {
    }
    if (r == 0) broken("the server neither answered nor closed within 5 s");
    close(fd);
    std::vector<std::string> lines;
    std::size_t s = 0, nl;
    while ((nl = in.find('\n', s)) != std::string::npos) {
        lines.push_back(in.substr(s, nl - s));
        s = nl + 1;
    }
    return lines;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static fixture f;
    if (size == 0) return 0;
    const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);

    // railctl's end: the input as a response.
    const json reply = json::parse(text.begin(), text.end(), nullptr, false);
    if (!reply.is_discarded() && reply.is_object()) {
        if (reply.contains("result") && reply["result"].is_object() && reply["result"].contains("histogram"))
            check_histogram(reply["result"]["histogram"]);
        if (reply.contains("histogram")) check_histogram(reply["histogram"]);
    }

    // railgated's end: the input as requests over the socket.
    std::size_t complete = 0;
    for (char c : text) complete += c == '\n';
    const std::vector<std::string> answers = exchange(f.path, text, data[0]);
    if (answers.size() > complete + 1) broken("more responses than requests");
    for (const std::string& a : answers) {
        const json j = json::parse(a, nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains("ok")) broken("a response that is not a JSON object with ok");
    }
    // Small inputs of whole lines are answered line for line.
    if (text.size() < 1024 && !text.empty() && text.back() == '\n' && answers.size() != complete)
        broken("a complete request left unanswered");
    // And the server still serves a well-formed request.
    const std::vector<std::string> next =
        exchange(f.path, "{\"version\": 1, \"command\": \"status\", \"args\": {\"rail\": \"r0\"}}\n", 63);
    if (next.size() != 1 || next[0].find("\"ok\":true") == std::string::npos) broken("the next client is not served");
    return 0;
}
