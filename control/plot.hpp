// A latency histogram as a self-contained SVG: the distribution on a
// log-scaled latency axis (top) and its CDF with p50/p99/p99.9 marked
// (bottom). Opens in any browser.
#pragma once

#include <string>

#include "dataplane/stats/histogram.hpp"

namespace railgate::control {

// Values are ns; axes are labelled in us.
std::string latency_svg(const stats::histogram& h, const std::string& title);

} // namespace railgate::control
