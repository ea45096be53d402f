#include "control/plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace railgate::control {
namespace {

std::string esc(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '<') o += "&lt;";
        else if (c == '>') o += "&gt;";
        else if (c == '&') o += "&amp;";
        else o += c;
    }
    return o;
}

std::string fmt(const char* f, double a, double b = 0, double c = 0, double d = 0) {
    char buf[256];
    std::snprintf(buf, sizeof buf, f, a, b, c, d);
    return buf;
}

std::string us_label(double us) {
    if (us >= 1e6) return fmt("%g s", us / 1e6);
    if (us >= 1e3) return fmt("%g ms", us / 1e3);
    return fmt("%g us", us);
}

} // namespace

std::string latency_svg(const stats::histogram& h, const std::string& title) {
    constexpr double W = 960, H = 660, L = 90, R = 930;
    constexpr double top0 = 70, top1 = 300, bot0 = 380, bot1 = 600;
    std::string s = fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" viewBox=\"0 0 %g %g\" "
                        "font-family=\"sans-serif\" font-size=\"13\">\n",
                        W, H, W, H);
    s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    s += "<text x=\"" + fmt("%g", W / 2) + "\" y=\"28\" text-anchor=\"middle\" font-size=\"18\">" + esc(title) + "</text>\n";
    if (h.count() == 0) {
        s += "<text x=\"480\" y=\"330\" text-anchor=\"middle\">no samples</text>\n</svg>\n";
        return s;
    }
    // Zero-latency samples (bucket 0: a clock that did not move) have no
    // place on a log axis: they are counted apart, and the axis starts at
    // the lowest non-empty bucket above zero, not at an arbitrary floor.
    const std::uint64_t zeros = h.bucket(0);
    if (zeros == h.count()) {
        s += fmt("<text x=\"480\" y=\"330\" text-anchor=\"middle\">all %.0f samples are 0 us</text>\n</svg>\n",
                 static_cast<double>(zeros));
        return s;
    }
    std::size_t first = 1;
    while (h.bucket(first) == 0) ++first;
    const double lo_us = static_cast<double>(stats::histogram::lowest_of(first)) / 1000.0;
    const double hi_us = std::max(lo_us * 10, static_cast<double>(h.max()) / 1000.0);
    const double x0 = std::floor(std::log10(lo_us)), x1 = std::ceil(std::log10(hi_us));
    auto X = [&](double us) {
        return us <= 0 ? L : std::clamp(L + (std::log10(us) - x0) / (x1 - x0) * (R - L), L, R);
    };
    s += fmt("<text x=\"%g\" y=\"50\" text-anchor=\"middle\" fill=\"#444\">", W / 2) +
         fmt("%.0f samples, min %.2f us, p50 %.2f us", static_cast<double>(h.count()), static_cast<double>(h.min()) / 1e3,
             static_cast<double>(h.percentile(50)) / 1e3) +
         fmt(", p99 %.2f us, max %.2f us</text>\n", static_cast<double>(h.percentile(99)) / 1e3,
             static_cast<double>(h.max()) / 1e3);
    if (zeros)
        s += fmt("<text x=\"%g\" y=\"66\" text-anchor=\"middle\" fill=\"#c0392b\">", W / 2) +
             fmt("%.0f sample(s) of 0 us (%.2f%%) are not on the log axis; the CDF starts at their share</text>\n",
                 static_cast<double>(zeros), 100.0 * static_cast<double>(zeros) / static_cast<double>(h.count()));

    // Histogram: 24 log-spaced bins per decade.
    const int per_decade = 24;
    const int nbins = static_cast<int>((x1 - x0) * per_decade);
    std::vector<std::uint64_t> bins(static_cast<std::size_t>(nbins), 0);
    for (std::size_t i = first; i < stats::histogram::bucket_count; ++i)
        if (const std::uint64_t n = h.bucket(i)) {
            const double us = (static_cast<double>(stats::histogram::lowest_of(i)) +
                               static_cast<double>(stats::histogram::highest_of(i))) / 2000.0;
            const int b = std::clamp(static_cast<int>((std::log10(us) - x0) * per_decade), 0, nbins - 1);
            bins[static_cast<std::size_t>(b)] += n;
        }
    const double peak = static_cast<double>(*std::max_element(bins.begin(), bins.end()));
    const double bw = (R - L) / nbins;
    s += "<g fill=\"#3b73b9\">\n";
    for (int b = 0; b < nbins; ++b)
        if (bins[static_cast<std::size_t>(b)]) {
            const double hgt = (top1 - top0) * static_cast<double>(bins[static_cast<std::size_t>(b)]) / peak;
            s += fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n", L + b * bw, top1 - hgt,
                     std::max(bw - 1, 1.0), hgt);
        }
    s += "</g>\n";
    // CDF polyline over the histogram's own buckets.
    std::string pts;
    std::uint64_t cum = zeros;
    pts += fmt("%.1f,%.1f ", L, bot1 - (bot1 - bot0) * static_cast<double>(zeros) / static_cast<double>(h.count()));
    for (std::size_t i = first; i < stats::histogram::bucket_count; ++i)
        if (const std::uint64_t n = h.bucket(i)) {
            cum += n;
            const double us = static_cast<double>(stats::histogram::highest_of(i)) / 1000.0;
            const double y = bot1 - (bot1 - bot0) * static_cast<double>(cum) / static_cast<double>(h.count());
            pts += fmt("%.1f,%.1f ", X(std::min(us, hi_us)), y);
        }
    s += "<polyline fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2\" points=\"" + pts + "\"/>\n";

    // Axes, decade ticks and grid.
    for (double y0 : {top1, bot1}) {
        s += fmt("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", L, y0, R, y0);
        for (double d = x0; d <= x1 + 1e-9; d += 1) {
            const double x = X(std::pow(10.0, d));
            s += fmt("<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"#bbb\" stroke-dasharray=\"2,3\"/>\n", x,
                     y0 == top1 ? top0 : bot0, x, y0);
            s += fmt("<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">", x, y0 + 18) + us_label(std::pow(10.0, d)) + "</text>\n";
        }
    }
    s += fmt("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", L, top0, L, top1);
    s += fmt("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", L, bot0, L, bot1);
    for (int k = 0; k <= 4; ++k) {
        const double y = top1 - (top1 - top0) * k / 4.0;
        s += fmt("<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%.0f</text>\n", L - 6, y + 4, peak * k / 4.0);
    }
    for (double q : {0.0, 0.25, 0.5, 0.75, 1.0}) {
        const double y = bot1 - (bot1 - bot0) * q;
        s += fmt("<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, y, R, y);
        s += fmt("<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", L - 6, y + 4, q);
    }
    // Percentile markers on the CDF.
    const struct {
        double p;
        const char* name;
    } marks[] = {{50, "p50"}, {99, "p99"}, {99.9, "p99.9"}};
    int row = 0;
    for (const auto& m : marks) {
        const double us = static_cast<double>(h.percentile(m.p)) / 1000.0;
        const double x = X(us);
        s += fmt("<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"#27ae60\" stroke-dasharray=\"5,3\"/>\n", x,
                 bot0, x, bot1);
        s += fmt("<text x=\"%.1f\" y=\"%g\" fill=\"#27ae60\" font-size=\"11\" text-anchor=\"middle\">", x, bot0 - 4 - 11 * (row % 2)) +
             m.name + "</text>\n";
        // Legend, top left of the CDF panel.
        s += fmt("<text x=\"%g\" y=\"%g\" fill=\"#27ae60\">", L + 10, bot0 + 18 + 16 * row++) + m.name + " = " +
             fmt("%.2f us</text>\n", us);
    }
    s += fmt("<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">latency (log scale)</text>\n", (L + R) / 2, top1 + 40);
    s += fmt("<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">latency (log scale)</text>\n", (L + R) / 2, bot1 + 40);
    s += fmt("<text x=\"20\" y=\"%g\" transform=\"rotate(-90 20 %g)\" text-anchor=\"middle\">samples</text>\n",
             (top0 + top1) / 2, (top0 + top1) / 2);
    s += fmt("<text x=\"20\" y=\"%g\" transform=\"rotate(-90 20 %g)\" text-anchor=\"middle\">CDF</text>\n",
             (bot0 + bot1) / 2, (bot0 + bot1) / 2);
    s += "</svg>\n";
    return s;
}

} // namespace railgate::control
