// Rail placement and the TBB engine on synthetic topologies (hwloc), so
// that a 2-socket, 8-NIC machine is testable on this one: every rail is
// served on its NIC's node, never across nodes unless the config says so
// (with a warning), and the engine has one arena per node whose parallel
// reduce is bit-identical to the single-thread kernel, and which a second
// caller enters without waiting for the first.
#define BOOST_TEST_MODULE placement
#include <boost/test/unit_test.hpp>

#include <tbb/info.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "dataplane/engine/engine.hpp"
#include "dataplane/engine/placement.hpp"

using namespace railgate;
using namespace railgate::engine;

namespace {
const char* const two_sockets = "package:2 numa:1 core:8 pu:1"; // 2 nodes x 8 CPUs
}

BOOST_AUTO_TEST_CASE(synthetic_two_socket_topology_loads) {
    const topology t = topology::load(two_sockets);
    BOOST_TEST_REQUIRE(t.nodes.size() == 2u);
    BOOST_TEST(t.nodes[0].cpus.size() == 8u);
    BOOST_TEST(t.nodes[1].cpus.size() == 8u);
    BOOST_TEST(t.node_of(t.nodes[1].cpus[0]) == t.nodes[1].os_index);
    BOOST_TEST(t.slots().size() == 16u);
}

BOOST_AUTO_TEST_CASE(eight_nics_are_served_on_their_own_nodes) {
    const topology t = topology::load(two_sockets);
    std::vector<rail_need> rails;
    for (int i = 0; i < 8; ++i) rails.push_back({"r" + std::to_string(i), i < 4 ? 0 : 1, -1});
    std::vector<rail_place> out;
    BOOST_TEST_REQUIRE(place(t.slots(), rails, out).empty());
    std::set<unsigned> used;
    for (int i = 0; i < 8; ++i) {
        BOOST_TEST(out[i].node == rails[i].nic_node, "rail " << i);
        BOOST_TEST(t.node_of(out[i].cpu) == rails[i].nic_node, "rail " << i);
        BOOST_TEST(out[i].warning.empty());
        used.insert(out[i].cpu);
    }
    BOOST_TEST(used.size() == 8u); // least loaded first: one CPU each
}

BOOST_AUTO_TEST_CASE(a_node_without_candidates_is_an_error_not_a_fallback) {
    const topology t = topology::load(two_sockets);
    std::vector<cpu_slot> node0_only;
    for (const cpu_slot& c : t.slots())
        if (c.node == 0) node0_only.push_back(c);
    std::vector<rail_place> out;
    const std::string e = place(node0_only, {{"r5", 1, -1}}, out);
    BOOST_TEST(e.find("rail r5: its NIC is on NUMA node 1, which has no CPU to serve it") == 0, e);
}

BOOST_AUTO_TEST_CASE(an_override_across_nodes_is_placed_with_a_warning) {
    const topology t = topology::load(two_sockets);
    const unsigned cpu0 = t.nodes[0].cpus[3];
    std::vector<rail_place> out;
    BOOST_TEST_REQUIRE(place(t.slots(), {{"r6", 1, static_cast<int>(cpu0)}, {"r7", 0, static_cast<int>(cpu0)}}, out).empty());
    BOOST_TEST(out[0].cpu == cpu0);
    BOOST_TEST(out[0].warning.find("cross-node") != std::string::npos, out[0].warning);
    BOOST_TEST(out[1].warning.empty()); // same node: no warning
    BOOST_TEST(place(t.slots(), {{"r8", 0, 999}}, out) == "rail r8: CPU 999 is not a candidate");
    // Unknown NIC node: anywhere, least loaded.
    BOOST_TEST_REQUIRE(place(t.slots(), {{"v", -1, -1}, {"w", -1, -1}}, out).empty());
    BOOST_TEST(out[0].cpu != out[1].cpu);
}

BOOST_AUTO_TEST_CASE(one_arena_per_node_and_bit_exact_parallel_reduce) {
    const topology t = topology::load(two_sockets);
    const railgate::engine::engine e(t, 4096);
    BOOST_TEST(e.arenas() == 2u);
    BOOST_TEST(e.arena_of(t.nodes[1].os_index) == 1u);
    BOOST_TEST(e.arena_concurrency(1) == 8);
    BOOST_TEST_MESSAGE(e.describe());
    const reduce::kernels& k = reduce::best();
    std::mt19937 rng(7);
    for (wire::dtype dt : {wire::dtype::fp32, wire::dtype::bf16, wire::dtype::fp16, wire::dtype::int32}) {
        const std::size_t n = 1000003, es = wire::dtype_size(dt);
        std::vector<std::vector<std::uint8_t>> in(4, std::vector<std::uint8_t>(n * es));
        const void* src[4];
        for (unsigned r = 0; r < 4; ++r) {
            for (auto& b : in[r]) b = static_cast<std::uint8_t>(rng());
            src[r] = in[r].data();
        }
        std::vector<std::uint8_t> serial(n * es), parallel(n * es);
        k[dt](serial.data(), src, 4, n);
        e.reduce(k, dt, parallel.data(), src, 4, n, 1);
        BOOST_TEST((serial == parallel), "dtype " << wire::dtype_name(dt));
    }
}

// Two callers in one node's arena at once (railgated's verbs rails, each
// reducing its chunks on its own thread): the second does not wait for the
// first. Here the first holds its slot and TBB's one thread of a 2-CPU
// node (a run_each whose two functions wait), and the second's reduce
// must finish meanwhile. With oneTBB's one slot for outside threads, the
// second's reduce was handed to a thread inside, and waited until the
// first's functions gave up (5 s).
BOOST_AUTO_TEST_CASE(a_second_caller_does_not_wait_for_the_first) {
    using clk = std::chrono::steady_clock;
    const topology t = topology::load("package:1 numa:1 core:2 pu:1");
    const railgate::engine::engine e(t, 0); // threshold 0: every reduce in the arena
    BOOST_TEST(e.arena_concurrency(0) == 2);
    const int node = t.nodes[0].os_index;
    std::atomic<unsigned> started{0}, saw_second{0};
    std::atomic<bool> second_done{false};
    std::thread first([&] {
        e.run_each(2, node, [&](unsigned) {
            ++started;
            const auto until = clk::now() + std::chrono::seconds(5);
            while (!second_done.load() && clk::now() < until) std::this_thread::yield();
            if (second_done.load()) ++saw_second;
        });
    });
    for (int i = 0; i < 5000 && started.load() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (started.load() < 2) {
        // No TBB thread came (a 1-CPU host has none): nothing to show.
        second_done = true;
        first.join();
        BOOST_TEST_MESSAGE("TBB's thread never joined the arena: " << tbb::info::default_concurrency() << " CPUs");
        return;
    }
    // One grain of fp32: the second caller sums it itself, and takes no
    // other task while it waits (it never waits).
    std::vector<float> a(1024, 1.0f), b(1024, 2.0f), sum(1024);
    const void* src[2] = {a.data(), b.data()};
    const auto t0 = clk::now();
    e.reduce(reduce::best(), wire::dtype::fp32, sum.data(), src, 2, sum.size(), node);
    const double took = std::chrono::duration<double>(clk::now() - t0).count();
    second_done = true;
    first.join();
    BOOST_TEST_MESSAGE("the second caller's reduce took " << took * 1e3 << " ms");
    BOOST_TEST(took < 2.0);
    BOOST_TEST(saw_second.load() == 2u); // the first's functions were still waiting
    BOOST_TEST((sum == std::vector<float>(1024, 3.0f)));
    BOOST_TEST(e.caller_arenas(0) == 2u); // one for each caller at once
}

// Threads that call once and exit (a binding's short-lived threads) leave
// no arenas behind: a node keeps as many as it had callers at once. With
// an arena per thread that ever called, the 64 made 64.
BOOST_AUTO_TEST_CASE(callers_that_come_and_go_leave_no_arenas_behind) {
    const topology t = topology::load("package:1 numa:1 core:2 pu:1");
    const railgate::engine::engine e(t, 0);
    const int node = t.nodes[0].os_index;
    std::vector<float> a(4096, 1.0f), b(4096, 2.0f);
    const void* src[2] = {a.data(), b.data()};
    for (int i = 0; i < 64; ++i) {
        std::vector<float> sum(4096);
        std::thread([&] { e.reduce(reduce::best(), wire::dtype::fp32, sum.data(), src, 2, sum.size(), node); }).join();
        BOOST_TEST((sum == std::vector<float>(4096, 3.0f)));
    }
    BOOST_TEST(e.caller_arenas(0) == 1u);
    // Callers at once, each many times: at most one arena each, all sums exact.
    constexpr unsigned callers = 6;
    std::vector<std::thread> v;
    std::atomic<unsigned> wrong{0};
    for (unsigned c = 0; c < callers; ++c)
        v.emplace_back([&] {
            std::vector<float> sum(4096);
            for (int i = 0; i < 200; ++i) {
                e.reduce(reduce::best(), wire::dtype::fp32, sum.data(), src, 2, sum.size(), node);
                if (sum != std::vector<float>(4096, 3.0f)) ++wrong;
                std::vector<int> order(4);
                e.run_each(2, node, [&](unsigned k) { order[k] = 1; });
                if (order[0] + order[1] != 2) ++wrong;
            }
        });
    for (std::thread& th : v) th.join();
    BOOST_TEST(wrong.load() == 0u);
    BOOST_TEST(e.caller_arenas(0) >= 1u);
    BOOST_TEST(e.caller_arenas(0) <= callers);
}
