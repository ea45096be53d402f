// Log-linear histogram in the HdrHistogram layout: values below 2^SubBits
// are exact, above that each power of two is split into 2^(SubBits-1)
// linear sub-buckets. `histogram` (SubBits 11: values below 2048 exact,
// relative error < 1/1024, 280 KiB) is every rail's and lcore's;
// `job_histogram` (SubBits 7: < 1/64, 20 KiB) is each job's, of which a
// rail keeps max_jobs and more. Values are unsigned integers, by
// convention nanoseconds; values >= 2^44 are clamped to the top bucket.
//
// record() is a few instructions, allocation-free and noexcept. An instance
// is single-writer; merge() combines per-lcore instances for reporting.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

namespace railgate::stats {

template <unsigned SubBits>
class basic_histogram {
public:
    static constexpr unsigned sub_bits = SubBits;
    static constexpr std::uint64_t sub_count = std::uint64_t{1} << sub_bits;
    static constexpr std::uint64_t half = sub_count / 2;
    static constexpr unsigned max_bits = 44;
    static constexpr std::uint64_t max_value = (std::uint64_t{1} << max_bits) - 1;
    static constexpr std::size_t bucket_count = sub_count + (max_bits - sub_bits) * half;

    basic_histogram() : counts_(bucket_count, 0) {}

    static std::size_t index_of(std::uint64_t v) noexcept {
        if (v > max_value) v = max_value;
        if (v < sub_count) return static_cast<std::size_t>(v);
        const unsigned e = 63u - static_cast<unsigned>(std::countl_zero(v));
        const unsigned shift = e - (sub_bits - 1);
        const std::uint64_t sub = v >> shift; // in [half, sub_count)
        return static_cast<std::size_t>(sub_count + (shift - 1) * half + (sub - half));
    }
    // Smallest and largest value that land in bucket i.
    static std::uint64_t lowest_of(std::size_t i) noexcept {
        if (i < sub_count) return i;
        const std::uint64_t j = i - sub_count;
        const unsigned shift = static_cast<unsigned>(j / half) + 1;
        return (half + j % half) << shift;
    }
    static std::uint64_t highest_of(std::size_t i) noexcept {
        if (i < sub_count) return i;
        const unsigned shift = static_cast<unsigned>((i - sub_count) / half) + 1;
        return lowest_of(i) + (std::uint64_t{1} << shift) - 1;
    }
    // The value a bucket's samples stand for where only the bucket is known.
    static std::uint64_t middle_of(std::size_t i) noexcept { return (lowest_of(i) + highest_of(i)) / 2; }

    void record(std::uint64_t v) noexcept {
        ++counts_[index_of(v)];
        ++total_;
        sum_ += v;
        min_ = std::min(min_, v);
        max_ = std::max(max_, v);
    }

    // Another precision's samples land in the bucket of their bucket's
    // middle (to the coarser of the two precisions).
    template <unsigned S>
    void merge(const basic_histogram<S>& o) noexcept {
        if constexpr (S == SubBits) {
            for (std::size_t i = 0; i < bucket_count; ++i) counts_[i] += o.counts_[i];
        } else {
            for (std::size_t i = 0; i < o.bucket_count; ++i)
                if (const std::uint64_t n = o.bucket(i))
                    counts_[index_of(o.middle_of(i))] += n;
        }
        total_ += o.total_;
        sum_ += o.sum_;
        min_ = std::min(min_, o.min_);
        max_ = std::max(max_, o.max_);
    }

    void reset() noexcept {
        std::fill(counts_.begin(), counts_.end(), 0);
        total_ = sum_ = max_ = 0;
        min_ = UINT64_MAX;
    }

    std::uint64_t count() const noexcept { return total_; }
    std::uint64_t min() const noexcept { return total_ ? min_ : 0; }
    std::uint64_t max() const noexcept { return max_; }
    double mean() const noexcept { return total_ ? static_cast<double>(sum_) / static_cast<double>(total_) : 0; }

    // The value at percentile p (0..100): the highest value of the bucket
    // holding the ceil(p% * count)-th smallest sample, capped at max().
    std::uint64_t percentile(double p) const noexcept {
        if (total_ == 0) return 0;
        auto rank = static_cast<std::uint64_t>(std::ceil(p / 100.0 * static_cast<double>(total_)));
        rank = std::clamp<std::uint64_t>(rank, 1, total_);
        std::uint64_t seen = 0;
        for (std::size_t i = 0; i < bucket_count; ++i) {
            seen += counts_[i];
            if (seen >= rank) return std::min(highest_of(i), max_);
        }
        return max_;
    }

    // Standard deviation from bucket midpoints.
    double stddev() const noexcept {
        if (total_ < 2) return 0;
        const double m = mean();
        double acc = 0;
        for (std::size_t i = 0; i < bucket_count; ++i)
            if (counts_[i]) {
                const double mid = (static_cast<double>(lowest_of(i)) + static_cast<double>(highest_of(i))) / 2;
                acc += static_cast<double>(counts_[i]) * (mid - m) * (mid - m);
            }
        return std::sqrt(acc / static_cast<double>(total_ - 1));
    }

    std::uint64_t bucket(std::size_t i) const noexcept { return counts_[i]; }
    std::uint64_t sum() const noexcept { return sum_; }

    // Adding samples known only by bucket (a histogram sent elsewhere):
    // min, max and sum follow to the bucket's precision; set_summary() can
    // then put in the exact figures if the sender kept them.
    void add_to_bucket(std::size_t i, std::uint64_t n) noexcept {
        if (!n) return;
        counts_[i] += n;
        total_ += n;
        sum_ += n * middle_of(i);
        min_ = std::min(min_, lowest_of(i));
        max_ = std::max(max_, highest_of(i));
    }
    // n samples of about `v` (a bucket of another precision's middle).
    void add_samples(std::uint64_t v, std::uint64_t n) noexcept {
        if (!n) return;
        counts_[index_of(v)] += n;
        total_ += n;
        sum_ += n * v;
        min_ = std::min(min_, v);
        max_ = std::max(max_, v);
    }
    void set_summary(std::uint64_t min, std::uint64_t max, std::uint64_t sum) noexcept {
        min_ = total_ ? min : UINT64_MAX;
        max_ = max;
        sum_ = sum;
    }

private:
    template <unsigned>
    friend class basic_histogram;
    std::vector<std::uint64_t> counts_;
    std::uint64_t total_ = 0, sum_ = 0, min_ = UINT64_MAX, max_ = 0;
};

using histogram = basic_histogram<11>;
using job_histogram = basic_histogram<7>;

} // namespace railgate::stats
