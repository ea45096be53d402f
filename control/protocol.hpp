// railgated's control protocol: one JSON object per line over a unix
// socket, request then response, any number per connection.
//
//   -> {"version": 1, "command": "rail.set", "args": {"rail": "r0", "mtu": 9000}}
//   <- {"version": 1, "ok": true, "result": {...}}
//   <- {"version": 1, "ok": false, "error": "rail 'r9' does not exist (rails: r0, r1)"}
//
// A request that is not valid JSON, not an object, of another version,
// with unknown keys, or over max_request bytes gets an error response and
// changes nothing. Commands: see control/PROTOCOL in the README.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "dataplane/stats/histogram.hpp"

namespace railgate::control {

using json = nlohmann::json;

inline constexpr int protocol_version = 1;
inline constexpr std::size_t max_request = 64 * 1024;
inline constexpr const char* default_socket = "/run/railgate/railgated.sock";

struct request {
    std::string command;
    json args = json::object();
    // Who sent it (SO_PEERCRED), for the log of changes; -1: unknown.
    long peer_uid = -1, peer_pid = -1;
    // A file descriptor the client passed with the request (SCM_RIGHTS;
    // capture.start's output file), or -1. The server closes it after the
    // handler returns: a handler that keeps it dup()s it.
    int fd = -1;
};

// Parses one request line; returns "" or the error to send back.
std::string parse_request(std::string_view line, request& out);

json ok(json result = json::object());
json fail(const std::string& error);

// Typed access to a request's args; every accessor returns "" or the error,
// and check_keys rejects args the command does not take.
std::string check_keys(const json& args, std::initializer_list<std::string_view> allowed);
std::string get_string(const json& args, const char* key, std::optional<std::string>& out);
std::string get_uint(const json& args, const char* key, std::uint64_t max, std::optional<std::uint64_t>& out);
std::string get_bool(const json& args, const char* key, bool& out);

// A histogram on the wire: its non-zero buckets and exact summary figures.
json histogram_to_json(const stats::histogram& h);
// Rebuilds it (bucket counts exact; min/max/sum as sent). "" or error.
std::string histogram_from_json(const json& j, stats::histogram& out);

} // namespace railgate::control
