#include "dataplane/log/log.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace railgate::log {
namespace {

std::atomic<int> threshold{static_cast<int>(level::info)};

// $JOURNAL_STREAM is "DEV:INODE" of the journal's socket; it names stderr
// only when stderr is still that socket (not redirected by a child's shell).
bool stderr_is_journal() noexcept {
    const char* js = std::getenv("JOURNAL_STREAM");
    if (!js) return false;
    unsigned long long dev = 0, ino = 0;
    if (std::sscanf(js, "%llu:%llu", &dev, &ino) != 2) return false;
    struct stat st{};
    if (fstat(STDERR_FILENO, &st) != 0) return false;
    return st.st_dev == dev && st.st_ino == ino;
}

const bool journal = stderr_is_journal();

void vwrite(level l, const char* fmt, std::va_list ap) noexcept {
    if (!enabled(l)) return;
    char text[1024];
    std::vsnprintf(text, sizeof text, fmt, ap);
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    const std::string line = format_line(l, text, ts.tv_sec * 1000000000LL + ts.tv_nsec, journal);
    // One write(2) per line: lines of several threads do not interleave.
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
}

} // namespace

std::string_view name(level l) noexcept {
    switch (l) {
    case level::error: return "error";
    case level::warning: return "warning";
    case level::notice: return "notice";
    case level::info: return "info";
    default: return "debug";
    }
}

bool parse(std::string_view s, level& out) noexcept {
    for (level l : {level::error, level::warning, level::notice, level::info, level::debug})
        if (s == name(l)) return out = l, true;
    if (s == "warn") return out = level::warning, true;
    return false;
}

void set_level(level l) noexcept { threshold.store(static_cast<int>(l), std::memory_order_relaxed); }
level current() noexcept { return static_cast<level>(threshold.load(std::memory_order_relaxed)); }
bool enabled(level l) noexcept { return static_cast<int>(l) <= threshold.load(std::memory_order_relaxed); }
bool to_journal() noexcept { return journal; }

std::string format_line(level l, std::string_view text, long long unix_ns, bool to_journal) {
    std::string s;
    if (to_journal) {
        s = "<" + std::to_string(static_cast<int>(l)) + ">";
    } else {
        const std::time_t secs = static_cast<std::time_t>(unix_ns / 1000000000LL);
        std::tm tm{};
        gmtime_r(&secs, &tm);
        char stamp[40];
        std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ ", tm.tm_year + 1900, tm.tm_mon + 1,
                      tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(unix_ns / 1000000 % 1000));
        s = stamp;
        s += name(l);
        s += ' ';
    }
    s += "railgated: ";
    // One event, one line: a newline inside the text would start a second,
    // unprefixed one.
    for (char c : text) s += c == '\n' ? ' ' : c;
    while (!s.empty() && s.back() == ' ') s.pop_back();
    s += '\n';
    return s;
}

void write(level l, const char* fmt, ...) noexcept {
    std::va_list ap;
    va_start(ap, fmt);
    vwrite(l, fmt, ap);
    va_end(ap);
}

#define RG_LOG_AT(fn, lvl)                                                                          \
    void fn(const char* fmt, ...) noexcept {                                                        \
        std::va_list ap;                                                                            \
        va_start(ap, fmt);                                                                          \
        vwrite(level::lvl, fmt, ap);                                                                \
        va_end(ap);                                                                                 \
    }
RG_LOG_AT(error, error)
RG_LOG_AT(warning, warning)
RG_LOG_AT(notice, notice)
RG_LOG_AT(info, info)
RG_LOG_AT(debug, debug)
#undef RG_LOG_AT

} // namespace railgate::log
