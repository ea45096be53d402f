#include "dataplane/engine/engine.hpp"

#include <tbb/blocked_range.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <memory>
#include <mutex>
#include <vector>

namespace railgate::engine {
namespace {

// Sanitizer runtimes refuse libraries dlopen()ed with RTLD_DEEPBIND, as
// oneTBB opens tbbbind: sanitizer builds do not bind arenas to nodes.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool can_bind = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool can_bind = false;
#else
constexpr bool can_bind = true;
#endif
#else
constexpr bool can_bind = true;
#endif

// a.execute(f), what the caller wrote before it (its arguments, its locals,
// f itself) released to the thread that runs f: a caller that finds the
// arena's slots taken hands f to a thread already inside (oneTBB's
// delegation) through a queue ThreadSanitizer cannot see (Debian's libtbb
// is not built with it). It reported one verbs rail's thread, running
// another rail's reduce, as racing with that rail's thread on its arguments
// (rxe-verbs-allreduce-tsan). The flag is a global: the runner reaches it
// without reading anything of the caller's first (the closure is).
std::atomic<std::uint64_t> handed_over{0};
template <class F> void execute_handed(tbb::task_arena& a, F&& f) {
    handed_over.fetch_add(1, std::memory_order_release);
    a.execute([&f] {
        (void)handed_over.load(std::memory_order_acquire);
        f();
    });
}

// A node's arenas for calling threads: one per caller at a time, not per
// thread that ever called. A caller takes a free one (or a new copy of the
// node's, which has its settings but not its slots) and gives it back when
// its call returns, so a process whose short-lived threads each call once
// keeps as many arenas as were ever in use at once.
class arena_pool {
public:
    explicit arena_pool(const tbb::task_arena& model) : model_(model) {}

    class lease {
    public:
        lease(arena_pool& p, std::unique_ptr<tbb::task_arena> a) noexcept : pool_(p), a_(std::move(a)) {}
        lease(const lease&) = delete;
        lease& operator=(const lease&) = delete;
        ~lease() { pool_.give_back(std::move(a_)); }
        tbb::task_arena& operator*() const noexcept { return *a_; }

    private:
        arena_pool& pool_;
        std::unique_ptr<tbb::task_arena> a_;
    };

    lease take() {
        {
            const std::lock_guard<std::mutex> g(m_);
            if (!free_.empty()) {
                std::unique_ptr<tbb::task_arena> a = std::move(free_.back());
                free_.pop_back();
                return lease(*this, std::move(a));
            }
            ++made_;
            free_.reserve(made_); // so that give_back() never allocates
        }
        return lease(*this, std::make_unique<tbb::task_arena>(model_));
    }

    std::size_t made() const {
        const std::lock_guard<std::mutex> g(m_);
        return made_;
    }

private:
    void give_back(std::unique_ptr<tbb::task_arena> a) noexcept {
        const std::lock_guard<std::mutex> g(m_);
        free_.push_back(std::move(a)); // within the room take() reserved
    }

    const tbb::task_arena& model_;
    mutable std::mutex m_;
    std::vector<std::unique_ptr<tbb::task_arena>> free_;
    std::size_t made_ = 0;
};

} // namespace

struct engine::impl {
    std::vector<int> node_ids; // NUMA node per arena
    // Each node's arena as made (not initialised): what the callers' arenas
    // are copies of.
    std::vector<tbb::task_arena> arenas;
    std::vector<std::unique_ptr<arena_pool>> callers; // per node
    std::vector<int> tbb_numa; // what oneTBB sees
};

engine::engine(const topology& topo, std::size_t threshold_bytes)
    : p_(std::make_unique<impl>()), threshold_(threshold_bytes) {
    // One node: every CPU is on it, there is nothing to bind to, and oneTBB
    // is not asked (asking loads tbbbind).
    if (can_bind && topo.nodes.size() > 1) p_->tbb_numa = tbb::info::numa_nodes();
    for (const topology::node& n : topo.nodes) {
        tbb::task_arena::constraints c;
        c.max_concurrency = std::max<int>(1, static_cast<int>(n.cpus.size()));
        // oneTBB binds only to nodes it knows (tbbbind); otherwise the arena
        // keeps the node's thread count and the OS places its threads.
        if (std::find(p_->tbb_numa.begin(), p_->tbb_numa.end(), n.os_index) != p_->tbb_numa.end())
            c.numa_id = n.os_index;
        p_->arenas.emplace_back(c);
        p_->node_ids.push_back(n.os_index);
    }
    if (p_->arenas.empty()) {
        p_->arenas.emplace_back();
        p_->node_ids.push_back(-1);
    }
    for (const tbb::task_arena& a : p_->arenas) p_->callers.push_back(std::make_unique<arena_pool>(a));
}

engine::~engine() = default;

std::size_t engine::arenas() const noexcept { return p_->arenas.size(); }

std::size_t engine::arena_of(int numa_node) const noexcept {
    for (std::size_t i = 0; i < p_->node_ids.size(); ++i)
        if (p_->node_ids[i] == numa_node) return i;
    return 0;
}

int engine::arena_concurrency(std::size_t a) const noexcept { return p_->arenas[a].max_concurrency(); }

std::size_t engine::caller_arenas(std::size_t a) const { return p_->callers[a]->made(); }

std::string engine::describe() const {
    std::string s;
    for (std::size_t i = 0; i < p_->arenas.size(); ++i)
        s += (i ? "; " : "") + std::string("node ") + std::to_string(p_->node_ids[i]) + ": " +
             std::to_string(p_->arenas[i].max_concurrency()) + " threads";
    if (p_->arenas.size() < 2) return s + " (one node: unbound)";
    s += " (oneTBB numa ids";
    for (int id : p_->tbb_numa) s += " " + std::to_string(id);
    return s + ")";
}

void engine::reduce(const reduce::kernels& k, wire::dtype dt, void* dst, const void* const* src, unsigned nsrc,
                    std::size_t count, int numa_node) const {
    const std::size_t es = wire::dtype_size(dt);
    const reduce::sum_fn f = k[dt];
    if (count * es < threshold_) return f(dst, src, nsrc, count);
    const arena_pool::lease a = p_->callers[arena_of(numa_node)]->take();
    // Grains of 64 KiB per input: large enough to amortise a task, small
    // enough to balance; aligned to 64 elements for the SIMD kernels.
    const std::size_t grain = std::max<std::size_t>(64, (64 * 1024 / es) & ~std::size_t{63});
    // Each grain's writes are released to the caller through `summed`
    // (one atomic per 64 KiB): TBB's own join happens inside a library
    // ThreadSanitizer cannot see, and it reported the caller's read of
    // dst as a race with the task that wrote it.
    std::atomic<std::size_t> summed{0};
    execute_handed(*a, [&] {
        tbb::parallel_for(tbb::blocked_range<std::size_t>(0, count, grain),
                          [&](const tbb::blocked_range<std::size_t>& r) {
                              const void* s[wire::max_world];
                              for (unsigned i = 0; i < nsrc; ++i)
                                  s[i] = static_cast<const std::uint8_t*>(src[i]) + r.begin() * es;
                              f(static_cast<std::uint8_t*>(dst) + r.begin() * es, s, nsrc, r.size());
                              summed.fetch_add(r.size(), std::memory_order_release);
                          });
    });
    [[maybe_unused]] const std::size_t all = summed.load(std::memory_order_acquire);
    assert(all == count);
}

void engine::run_each(unsigned n, int numa_node, const std::function<void(unsigned)>& fn) const {
    const arena_pool::lease a = p_->callers[arena_of(numa_node)]->take();
    execute_handed(*a, [&] {
        tbb::parallel_for(tbb::blocked_range<unsigned>(0, n, 1),
                          [&](const tbb::blocked_range<unsigned>& r) {
                              for (unsigned i = r.begin(); i != r.end(); ++i) fn(i);
                          },
                          tbb::simple_partitioner());
    });
}

} // namespace railgate::engine
