// railgated's log: one line per event, with a level, for a terminal, a file
// and journald alike.
//
//   on a terminal or in a file:  2026-11-24T08:45:14.123Z notice railgated: ready
//   under systemd (stderr is the journal, $JOURNAL_STREAM): <5>railgated: ready
//
// journald reads the <N> prefix as the line's priority and stamps the time
// itself, so `journalctl -p warning -u railgated` and grep both work. Lines
// at a level below the one set (--log-level) are not written. Control-thread
// and start-up code only: the lcores count, they do not log.
#pragma once

#include <string>
#include <string_view>

namespace railgate::log {

// syslog's order and numbers (the journal's priorities).
enum class level : int { error = 3, warning = 4, notice = 5, info = 6, debug = 7 };

std::string_view name(level) noexcept;
// "error", "warning" (or "warn"), "notice", "info", "debug".
bool parse(std::string_view s, level& out) noexcept;
// The names parse() takes, for usage and error texts.
inline constexpr std::string_view level_names = "error, warning, notice, info, debug";

void set_level(level) noexcept;
level current() noexcept;
bool enabled(level l) noexcept;
// Whether stderr is the journal (then lines carry <N> and no timestamp).
bool to_journal() noexcept;

// Write one line, "railgated: " + the formatted text, to stderr, when the
// level is enabled. Safe from any thread; a line is one write(2).
[[gnu::format(printf, 2, 3)]] void write(level l, const char* fmt, ...) noexcept;
[[gnu::format(printf, 1, 2)]] void error(const char* fmt, ...) noexcept;
[[gnu::format(printf, 1, 2)]] void warning(const char* fmt, ...) noexcept;
[[gnu::format(printf, 1, 2)]] void notice(const char* fmt, ...) noexcept;
[[gnu::format(printf, 1, 2)]] void info(const char* fmt, ...) noexcept;
[[gnu::format(printf, 1, 2)]] void debug(const char* fmt, ...) noexcept;

// One line in the format write() uses, with the time given (tests).
std::string format_line(level l, std::string_view text, long long unix_ns, bool journal);

} // namespace railgate::log
