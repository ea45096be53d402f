// The benchmark tools' command lines: "--name VALUE" pairs. A number must be
// whole (no trailing text) and within the flag's range; -h or --help prints
// the usage on stdout and exits 0; a flag the tool does not know, a missing
// value or a bad one prints what is wrong and the usage on stderr and exits
// 2 (as railbench and railctl do), before any benchmark starts.
#pragma once

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace railgate::bench {

class flags {
public:
    flags(int argc, char** argv, const char* usage) : argc_(argc), argv_(argv), usage_(usage) {}

    // The next flag's name into `name`; false at the end.
    bool next(std::string& name) {
        if (i_ >= argc_) return false;
        name = argv_[i_++];
        if (name == "-h" || name == "--help") {
            std::printf("%s\n", usage_);
            std::exit(0);
        }
        flag_ = name;
        return true;
    }

    // The current flag's value, as given.
    std::string text() {
        if (i_ >= argc_) fail(flag_ + " needs a value");
        return argv_[i_++];
    }

    // The current flag's value as a number in [lo, hi].
    template <class T>
    T number(T lo, T hi) {
        const std::string s = text();
        return parse<T>(s, lo, hi, flag_);
    }

    // `s` (part of the current flag's value) as a number in [lo, hi].
    template <class T>
    T parse(std::string_view s, T lo, T hi, const std::string& what) {
        T v{};
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size() || s.empty())
            fail(what + ": '" + std::string(s) + "' is not a number");
        if (!(v >= lo && v <= hi)) // NaN too
            fail(what + ": " + std::string(s) + " out of range " + show(lo) + ".." + show(hi));
        return v;
    }

    [[noreturn]] void unknown() { fail("unknown flag " + flag_); }

    [[noreturn]] void fail(const std::string& why) const {
        const std::string_view self = argv_[0];
        const auto slash = self.rfind('/');
        std::fprintf(stderr, "%s: %s\n%s\n", std::string(slash == self.npos ? self : self.substr(slash + 1)).c_str(),
                     why.c_str(), usage_);
        std::exit(2);
    }

private:
    template <class T>
    static std::string show(T v) {
        if constexpr (std::is_floating_point_v<T>) {
            char b[32];
            std::snprintf(b, sizeof b, "%g", static_cast<double>(v));
            return b;
        } else {
            return std::to_string(v);
        }
    }

    int argc_;
    char** argv_;
    const char* usage_;
    int i_ = 1;
    std::string flag_;
};

} // namespace railgate::bench
