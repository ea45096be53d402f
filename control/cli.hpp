// What the command-line tools share: numbers read strictly, and output
// that must not vanish with exit status 0.
#pragma once

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

namespace railgate {

// An unsigned number as a flag's value: decimal digits (leading zeros are
// decimal, not octal), or 0x and hex digits. No sign ("-1" is not 2^64 -
// 1), no blanks, nothing after it, nothing past 2^64 - 1: false.
inline bool parse_unsigned(std::string_view text, std::uint64_t& out) noexcept {
    int base = 10;
    if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
        text.remove_prefix(2);
        base = 16;
    }
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, base);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return false;
    out = v;
    return true;
}

// A token's text (RAILGATE_TOKEN or --token) without the blanks around it:
// the documented RAILGATE_TOKEN=$(od -An -N8 -tu8 /dev/urandom) keeps od's
// leading spaces (an assignment does not split words), and a quoted
// --token "$RAILGATE_TOKEN" passes them on.
inline std::string trim_blanks(std::string_view v) {
    const auto first = v.find_first_not_of(" \t\n");
    if (first == std::string_view::npos) return {};
    return std::string(v.substr(first, v.find_last_not_of(" \t\n") - first + 1));
}

// Closes `f` (flushes stdout, which stays open: the EAL's log and exit
// statistics may still write to it) and, if anything written to it was
// lost, says so on stderr as "PROG: writing WHAT: why". Returns rc, or 1
// where rc was 0 and output was lost. A reader that closed its pipe
// (EPIPE, where SIGPIPE is ignored) ended the output by choice: no error.
inline int close_output(std::FILE* f, const char* prog, const std::string& what, int rc) {
    errno = 0;
    bool done;
    if (f == stdout) {
        done = std::fflush(f) == 0 && !std::ferror(f);
    } else {
        const bool clean = !std::ferror(f);
        done = std::fclose(f) == 0 && clean;
    }
    if (done || errno == EPIPE) return rc;
    std::fprintf(stderr, "%s: writing %s: %s\n", prog, what.c_str(),
                 errno ? std::strerror(errno) : "a write failed, some of it is lost");
    return rc ? rc : 1;
}

} // namespace railgate
