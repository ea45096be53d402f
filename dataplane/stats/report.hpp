// Text reports of a latency histogram, shared by railbench and railctl:
// perftest-style figures and an ASCII bar chart of power-of-two buckets.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "dataplane/stats/histogram.hpp"

namespace railgate::stats {

// "# TITLE (us): samples N", t_min/t_typical/t_avg/t_stdev/p90/p99/p99.9/
// t_max, then the bar chart. Values are ns, printed in us.
void print_latency(std::FILE* out, const histogram& h, const char* title);

// ib_write_lat's summary table: header line and one row.
void print_perftest_summary(std::FILE* out, const histogram& h, unsigned bytes);

// How an lcore shared its CPU: its run-queue wait, the times it counted
// its CPU as shared with a busy task, and the times it did not run for
// 100 ms or more (away: the host took the CPU, the process was stopped).
struct lcore_sharing {
    double waited_s = 0;
    std::uint64_t shared = 0;
    double shared_s = 0;
    std::uint64_t absences = 0;
    double absent_s = 0;
};
// One line, for railctl stats and railgated's exit stats: "lcore 1 (r0,
// r1): waited 0.191 s for its CPU, shared it with a busy task once (0.764
// s), away 2 times (3.104 s)" (no rails: no parenthesis; never shared or
// away: the wait only).
void print_lcore_sharing(std::FILE* out, unsigned lcore, const std::vector<std::string>& rails,
                         const lcore_sharing& s);

} // namespace railgate::stats
