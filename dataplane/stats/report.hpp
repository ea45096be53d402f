// Text reports of a latency histogram, shared by railbench and railctl:
// perftest-style figures and an ASCII bar chart of power-of-two buckets.
#pragma once

#include <cstdio>

#include "dataplane/stats/histogram.hpp"

namespace railgate::stats {

// "# TITLE (us): samples N", t_min/t_typical/t_avg/t_stdev/p90/p99/p99.9/
// t_max, then the bar chart. Values are ns, printed in us.
void print_latency(std::FILE* out, const histogram& h, const char* title);

// ib_write_lat's summary table: header line and one row.
void print_perftest_summary(std::FILE* out, const histogram& h, unsigned bytes);

} // namespace railgate::stats
