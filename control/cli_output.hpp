// The command-line tools' results must not vanish with exit status 0: a
// full disk, /dev/full or an I/O error under their output is an error.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace railgate {

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
