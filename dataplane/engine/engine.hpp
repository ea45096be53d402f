// The TBB engine: one tbb::task_arena per NUMA node, so that a rail's heavy
// work runs on the cores next to its NIC, and a large-block reduce that
// splits one reduction over an arena's threads.
//
// Splitting is by element ranges: every element is still summed in rank
// order by the same kernel, so the result is bit-identical to the
// single-thread kernel's (reduce.hpp's contract). Blocks smaller than
// `threshold_bytes` (per input) stay on the calling thread: DPDK chunks are
// reduced inline on their lcore. The threshold comes from bench_engine.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/engine/placement.hpp"
#include "dataplane/proto/wire.hpp"
#include "dataplane/reduce/reduce.hpp"

namespace railgate::engine {

class engine {
public:
    // One arena per node of `topo`, each with its node's CPU count and, where
    // oneTBB can bind (tbbbind + hwloc), constrained to that node. A single
    // node's arena is not bound (there is nowhere else to run).
    // Each call to reduce or run_each that goes parallel has an arena of its
    // own while it runs (a copy of its node's, taken from the node's free
    // ones or made, and given back after; TBB's threads are shared between
    // them): callers on one node do not wait for each other, and a node
    // keeps as many arenas as it ever had callers at once. With one arena for all, a
    // second caller found its one slot for outside threads taken and waited
    // until a thread inside ran its work (oneTBB's delegation): two verbs
    // rails' reduces ran one after the other, one rail's thread summing the
    // other's while its own completions waited. (Slots for more callers in
    // one arena halved a 256 KiB reduce: TBB's thread then looked for work
    // in the empty ones.)
    explicit engine(const topology& topo, std::size_t threshold_bytes = 256 * 1024);
    ~engine();
    engine(const engine&) = delete;
    engine& operator=(const engine&) = delete;

    std::size_t arenas() const noexcept;
    // The arena index for a NUMA node (its own, or arena 0 for -1/unknown).
    std::size_t arena_of(int numa_node) const noexcept;
    int arena_concurrency(std::size_t arena) const noexcept;
    // How many arenas `arena`'s node has made for its callers so far.
    std::size_t caller_arenas(std::size_t arena) const;
    std::size_t threshold_bytes() const noexcept { return threshold_; }
    // "node 0: 8 threads; node 1: 8 threads (tbb numa ids 0 1)", for logs.
    std::string describe() const;

    // dst[i] = src[0][i] + ... + src[n-1][i], rank order, on `numa_node`'s
    // arena when the block is large; inline otherwise. Blocks the caller.
    void reduce(const reduce::kernels& k, wire::dtype dt, void* dst, const void* const* src, unsigned nsrc,
                std::size_t count, int numa_node) const;

    // Runs fn(0) .. fn(n - 1) at once on `numa_node`'s arena, each as its
    // own task (pipelines that poll until their work is done: n must not
    // exceed the arena's concurrency, or the later ones wait for the
    // earlier to finish). Returns when all have returned.
    void run_each(unsigned n, int numa_node, const std::function<void(unsigned)>& fn) const;

private:
    struct impl;
    std::unique_ptr<impl> p_;
    std::size_t threshold_;
};

} // namespace railgate::engine
