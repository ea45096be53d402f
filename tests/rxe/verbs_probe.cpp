// A misbehaving verbs worker, for the rxe suite: it joins a job of one on
// railgated's verbs rail, writes chunks whose immediate names a slot out of
// range, a wrong generation and a length that is not whole elements (each
// must be counted and dropped), then checks that a real allreduce still
// completes with the right result on the same QP. Then it leaves twice:
// both LEAVEs are acknowledged. Then it JOINs another job naming a job
// shape (wire::shape_word, as a worker does on the rails after its first)
// that is not the plane's, and a malformed one: refused with
// shape_mismatch and bad_request.
// With `eager` (railgated busy-polls the rail, so it takes the probe's
// eager ring): the same bad chunks again through the ring, and entries
// whose length is 0 or above the ring's 120 bytes (each counted, under
// slot_range, bad_generation and verbs_length), then a small and a large
// allreduce exact. Without it, railgated must have declined the ring.
// With `intrude`: another tenant's WRITEs (intrude() below). With
// `churn`: ranks that leave a job and are replaced (churn() below). With
// `order PID`: a REGION queued behind 16 completions, then an eager chunk
// (order() below; PID is railgated's, which it stops and resumes).
//
//   verbs_probe SERVER_IP PORT [eager|intrude|churn|order PID]
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "client/railgate/verbs_transport.hpp"
#include "client/railgate/worker.hpp"
#include "dataplane/proto/ipv4.hpp"
#include "dataplane/proto/parse.hpp"

using namespace railgate;

namespace {

// Receives on rail 0 of `t`, handing each batch (maybe empty) to `done`,
// until it returns true or `limit` passes; false then.
template <class F> bool recv_until(client::verbs_transport& t, std::chrono::seconds limit, F&& done) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        client::rx_msg m[4];
        const unsigned n = t.recv(0, m, 4);
        if (done(std::span<const client::rx_msg>(m, n))) return true;
    }
    return false;
}

// A probe worker's options: rank `rank` of job `job` (world ranks), 4
// slots, tensors of at most 4096 elements.
client::worker_options probe_options(std::uint32_t job, std::uint64_t token, std::uint16_t world = 1,
                                     std::uint16_t rank = 0) {
    client::worker_options o;
    o.job_id = job;
    o.job_token = token;
    o.world = world;
    o.rank = rank;
    o.pool_size = 4;
    o.max_count = 4096;
    // As rxe-verbs-faults' railbench ranks: the guest, under TCG on a
    // loaded host, held a rail's answers past the default 1 s while its
    // other rail answered ("rail 0 (198.18.0.1) stopped answering for 1000
    // ms" after the bad writes, with one of the host's CPUs busy
    // elsewhere), and the first JOIN's past the default 5 s.
    o.peer_timeout = std::chrono::milliseconds(5000);
    o.join_timeout = std::chrono::milliseconds(20000);
    return o;
}

// Job 90 of two ranks, A0 and A1, and an intruder of job 91 on its own
// connection, which is handed A0's contribution region on railgated (or,
// for the second intruder, A0's eager ring there, when it has one) and
// WRITEs zeros over it while A0's chunks wait there for A1's. railgated
// gives each connection a protection domain of its own, so the intruder's
// WRITE must fail (a remote access error on its QP) and job 90's sums must
// be exact. With one PD per rail the WRITE lands and the sum is A1's alone.
int intrude(std::uint32_t ip, std::uint16_t port) {
    constexpr std::size_t n = 1000; // 4000 bytes: WRITE_WITH_IMMs into the region, not the ring
    auto options = [](std::uint32_t job, std::uint16_t world, std::uint16_t rank) {
        return probe_options(job, 0xfeed + job, world, rank);
    };
    client::verbs_transport t0(ip, port), t1(ip, port);
    client::worker a0(t0, options(90, 2, 0)), a1(t1, options(90, 2, 1));
    for (client::worker* w : {&a0, &a1})
        if (auto e = w->join(); !e.empty()) {
            std::fprintf(stderr, "verbs_probe: intrude: join of job 90: %s\n", e.c_str());
            return 1;
        }
    std::vector<float> v0(n), v1(n), want(n);
    for (std::size_t i = 0; i < n; ++i) {
        v0[i] = static_cast<float>(i) + 1.0f;
        v1[i] = static_cast<float>(i) * 0.25f;
        want[i] = v0[i] + v1[i];
    }
    std::string e0, e1;
    std::thread r0([&] { e0 = a0.allreduce(v0.data(), n, wire::dtype::fp32); });
    // A0's chunks land in its region and wait for A1's.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    std::string refused[2];
    unsigned tried = 0;
    for (const bool ring : {false, true}) {
        wire::region_body victim;
        if (!t0.peer_memory(0, ring, victim)) continue; // no eager ring
        ++tried;
        try {
            client::verbs_transport tb(ip, port);
            client::worker b(tb, options(91 + ring, 1, 0));
            if (auto e = b.join(); !e.empty()) {
                std::fprintf(stderr, "verbs_probe: intrude: join of the intruder's job: %s\n", e.c_str());
                std::_Exit(1);
            }
            wire::region_body own;
            recv_until(tb, std::chrono::seconds(5), [&](auto) { return tb.peer_memory(0, false, own); });
            if (!tb.write_raw_to(0, victim, std::min(victim.bytes, own.bytes))) {
                std::fprintf(stderr, "verbs_probe: intrude: could not post the intruder's WRITE\n");
                std::_Exit(1);
            }
            // Refused in a round trip; a WRITE that lands is never told, and
            // the whole wait must stay inside the job's stall time (5 s).
            recv_until(tb, std::chrono::seconds(1), [&](std::span<const client::rx_msg> got) {
                for (const client::rx_msg& m : got)
                    if (m.h.type == wire::msg_type::error &&
                        static_cast<wire::error_code>(m.h.aux) == wire::error_code::rail_down)
                        refused[ring].assign(reinterpret_cast<const char*>(m.frag[0]), m.frag_len[0]);
                return !refused[ring].empty();
            });
        } catch (const std::exception& ex) {
            std::fprintf(stderr, "verbs_probe: intrude: the intruder: %s\n", ex.what());
            std::_Exit(1);
        }
    }
    std::thread r1([&] { e1 = a1.allreduce(v1.data(), n, wire::dtype::fp32); });
    r0.join();
    r1.join();
    if (!e0.empty() || !e1.empty()) {
        std::fprintf(stderr, "verbs_probe: intrude: job 90's allreduce: %s%s\n", e0.c_str(), e1.c_str());
        return 1;
    }
    bool ok = v0 == want && v1 == want;
    for (unsigned i = 0; i < tried; ++i) {
        std::printf("verbs_probe: intrude: the WRITE into A0's %s: %s\n", i ? "eager ring" : "contribution region",
                    refused[i].empty() ? "not refused" : refused[i].c_str());
        ok = ok && refused[i].find("remote access") != std::string::npos;
    }
    if (!ok) {
        std::fprintf(stderr, "verbs_probe: intrude: another job's WRITE %s, job 90's sums %s\n",
                     refused[0].empty() ? "landed" : "was refused", v0 == want && v1 == want ? "exact" : "WRONG");
        return 1;
    }
    std::printf("verbs_probe: intrude: %u WRITEs of another job into job 90's memory refused, its sums exact\n",
                tried);
    return 0;
}

// Job 96 of two ranks: B0 joins and stays; rank 1 is taken 4 times by a
// new connection that JOINs, LEAVEs and disconnects, then once more by one
// that stays, and the two allreduce, which must be exact. The probe then
// prints "churned" and holds the job (both connections up) until its
// standard input closes: the caller reads railctl's result_mrs meanwhile,
// which must count B0's and the last rank 1's registrations alone on each
// rail (it counted every connection that had ever joined the job).
int churn(std::uint32_t ip, std::uint16_t port) {
    constexpr unsigned replaced = 4;
    constexpr std::size_t n = 5000; // 20,000 bytes: five chunks on v0
    auto options = [](std::uint16_t rank) {
        client::worker_options o = probe_options(96, 0xc4u, 2, rank);
        o.max_count = n;
        return o;
    };
    client::verbs_transport t0(ip, port);
    client::worker b0(t0, options(0));
    if (auto e = b0.join(); !e.empty()) {
        std::fprintf(stderr, "verbs_probe: churn: rank 0's join: %s\n", e.c_str());
        return 1;
    }
    for (unsigned k = 0; k < replaced; ++k) {
        client::verbs_transport t(ip, port);
        client::worker b(t, options(1));
        if (auto e = b.join(); !e.empty()) {
            std::fprintf(stderr, "verbs_probe: churn: rank 1's join number %u: %s\n", k + 1, e.c_str());
            return 1;
        }
        b.leave();
    }
    client::verbs_transport t1(ip, port);
    client::worker b1(t1, options(1));
    if (auto e = b1.join(); !e.empty()) {
        std::fprintf(stderr, "verbs_probe: churn: the last rank 1's join: %s\n", e.c_str());
        return 1;
    }
    std::vector<float> v0(n), v1(n), want(n);
    for (std::size_t i = 0; i < n; ++i) {
        v0[i] = static_cast<float>(i % 977) * 0.5f;
        v1[i] = static_cast<float>(i % 131) + 3.0f;
        want[i] = v0[i] + v1[i];
    }
    std::string e0, e1;
    std::thread r0([&] { e0 = b0.allreduce(v0.data(), n, wire::dtype::fp32); });
    e1 = b1.allreduce(v1.data(), n, wire::dtype::fp32);
    r0.join();
    if (!e0.empty() || !e1.empty() || v0 != want || v1 != want) {
        std::fprintf(stderr, "verbs_probe: churn: the allreduce after %u replaced ranks: %s%s%s\n", replaced,
                     e0.c_str(), e1.c_str(), e0.empty() && e1.empty() ? "wrong sums" : "");
        return 1;
    }
    std::printf("verbs_probe: churn: rank 1 of job 96 joined and left on %u connections, then its allreduce with "
                "rank 0 was exact\nchurned\n",
                replaced);
    std::fflush(stdout);
    while (std::getchar() != EOF) {
    }
    return 0;
}

// A worker's REGION is a SEND, a completion on railgated's CQ; the chunk it
// sends right after (the barrier's 4 bytes) an eager entry, with none. The
// entry lands after the REGION's completion, but railgated polls its CQ 16
// completions at a time, then the ring: it must read the REGION first even
// when the entry is in the ring and the REGION past the first 16. Made
// certain here: job 82 of one rank on a connection that held job 81 (so
// its transport has its memory and railgated's ring). With railgated
// stopped, 17 JOINs of job 82, its REGION, then a 16-byte chunk through
// the ring; resumed, railgated reads 16 JOINs, then the ring. The chunk
// must come back summed, not be dropped (region_missing: over RC it would
// never come again, and the rank would be judged stalled). The JOIN is
// answered once: its 16 copies came while the answer was on its way.
// A PING goes first, which railgated (no job on the connection) answers
// with an ERROR: one of its 16 control buffers, so that the JOINs' answers
// (a JOIN_ACK and a REGION each, from buffers that come back only as their
// sends complete) do not pair up with what is left. Every JOIN_ACK must
// come with its REGION: a worker with the JOIN_ACK alone has joined but
// can send nothing (before, railgated answered the 8th JOIN with its
// JOIN_ACK and dropped its REGION: 8 JOIN_ACKs, 7 REGIONs).
int order(std::uint32_t ip, std::uint16_t port, pid_t railgated) {
    client::verbs_transport t(ip, port);
    if (!t.eager(0)) {
        std::fprintf(stderr, "verbs_probe: order: railgated declined the eager ring\n");
        return 1;
    }
    const client::worker_options o = probe_options(81, 0x0bde);
    {
        client::worker w(t, o);
        std::vector<float> v(20, 1.5f);
        if (auto e = w.join(); !e.empty() || !(e = w.allreduce(v.data(), v.size(), wire::dtype::fp32)).empty()) {
            std::fprintf(stderr, "verbs_probe: order: job 81: %s\n", e.c_str());
            return 1;
        }
        w.leave();
    }
    wire::header j;
    j.type = wire::msg_type::join;
    j.job_id = 82;
    j.job_token = o.job_token;
    j.world_size = 1;
    wire::join_body b;
    b.max_count = o.max_count;
    b.pool_size = static_cast<std::uint16_t>(o.pool_size);
    b.nonce = 0x0de4;
    std::uint8_t body[wire::join_body_bytes];
    wire::encode_join_body(b, body);
    const client::tx_msg join{j, body, wire::join_body_bytes};
    wire::header ph = j;
    ph.type = wire::msg_type::ping;
    const client::tx_msg ping{ph, nullptr, 0};
    wire::region_body mine;
    if (!t.own_memory(0, mine)) {
        std::fprintf(stderr, "verbs_probe: order: no result memory after job 81\n");
        return 1;
    }
    wire::header rh = j;
    rh.type = wire::msg_type::region;
    std::uint8_t rb[wire::region_body_bytes];
    wire::encode_region_body(mine, rb);
    const client::tx_msg region{rh, rb, sizeof rb};
    const float in[4] = {1.0f, -2.5f, 3.25f, 1e-3f};
    wire::header ch = j;
    ch.type = wire::msg_type::contrib;
    ch.count = 4;
    const client::tx_msg chunk{ch, in, sizeof in};
    // Posts a message, reaping the send completions that free the
    // transport's control buffers (nothing else comes while railgated is
    // stopped).
    auto post = [&](const client::tx_msg& m) {
        for (int i = 0; i < 1000; ++i) {
            if (t.send(0, &m, 1) == 1) return true;
            client::rx_msg got[4];
            t.recv(0, got, 4);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return false;
    };
    if (::kill(railgated, SIGSTOP) != 0) {
        std::fprintf(stderr, "verbs_probe: order: cannot stop railgated (pid %d)\n", static_cast<int>(railgated));
        return 1;
    }
    const std::uint64_t regions_before = t.regions_received(0);
    bool ok = post(ping);
    for (int i = 0; i < 17 && ok; ++i) ok = post(join);
    ok = ok && post(region) && post(chunk);
    std::this_thread::sleep_for(std::chrono::milliseconds(300)); // delivered into railgated's CQ and ring
    ::kill(railgated, SIGCONT);
    if (!ok) {
        std::fprintf(stderr, "verbs_probe: order: could not post the JOINs, the REGION or the chunk\n");
        return 1;
    }
    std::vector<float> out;
    unsigned acks = 0;
    recv_until(t, std::chrono::seconds(5), [&](std::span<const client::rx_msg> got) {
        for (const client::rx_msg& m : got) {
            acks += m.h.type == wire::msg_type::join_ack;
            if (m.h.type == wire::msg_type::result && m.h.job_id == 82 && m.h.slot == 0 && m.bytes() == sizeof in) {
                out.resize(4);
                m.copy_to(out.data());
            }
        }
        return !out.empty();
    });
    if (out.empty()) {
        std::fprintf(stderr, "verbs_probe: order: the chunk behind the REGION came back in no result (%u JOIN_ACKs)\n",
                     acks);
        return 1;
    }
    // Answers the transport read from its CQ after the result (it reads the
    // ring after at most 32 completions a call).
    recv_until(t, std::chrono::seconds(1), [&](std::span<const client::rx_msg> got) {
        for (const client::rx_msg& m : got) acks += m.h.type == wire::msg_type::join_ack;
        return false;
    });
    const std::uint64_t regions = t.regions_received(0) - regions_before;
    if (regions < acks) {
        std::fprintf(stderr, "verbs_probe: order: %u JOIN_ACKs but %llu REGIONs: a JOIN_ACK came without its REGION\n",
                     acks, static_cast<unsigned long long>(regions));
        return 1;
    }
    if (std::memcmp(out.data(), in, sizeof in) != 0) {
        std::fprintf(stderr, "verbs_probe: order: the result of job 82 is not its one rank's chunk\n");
        return 1;
    }
    // The 16 JOINs after the first repeat it while its answer is on its
    // way: one answer (railgated counts the rest joins_again). Before, each
    // was answered in full until the control buffers ran out: 8 JOIN_ACKs
    // and REGIONs, then tx_full drops.
    if (acks != 1 || regions != 1) {
        std::fprintf(stderr, "verbs_probe: order: %u JOIN_ACKs and %llu REGIONs to 17 copies of one JOIN, not one each\n",
                     acks, static_cast<unsigned long long>(regions));
        return 1;
    }
    std::printf("verbs_probe: order: an eager chunk behind a REGION queued past 16 completions summed; 17 copies of "
                "one JOIN answered once (%u JOIN_ACK, its REGION)\n",
                acks);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    const bool args = argc == 3 ||
                      (argc == 4 && (std::strcmp(argv[3], "eager") == 0 || std::strcmp(argv[3], "intrude") == 0 ||
                                     std::strcmp(argv[3], "churn") == 0)) ||
                      (argc == 5 && std::strcmp(argv[3], "order") == 0 && std::atoi(argv[4]) > 0);
    if (!args) {
        std::fprintf(stderr, "usage: verbs_probe SERVER_IP PORT [eager|intrude|churn|order PID]\n");
        return 2;
    }
    const bool eager = argc == 4 && std::strcmp(argv[3], "eager") == 0;
    std::uint32_t ip = 0;
    if (!net::parse_ipv4(argv[1], ip)) return 2;
    try {
        if (argc == 5)
            return order(ip, static_cast<std::uint16_t>(std::atoi(argv[2])), static_cast<pid_t>(std::atoi(argv[4])));
        if (argc == 4 && std::strcmp(argv[3], "churn") == 0)
            return churn(ip, static_cast<std::uint16_t>(std::atoi(argv[2])));
        if (argc == 4 && !eager) return intrude(ip, static_cast<std::uint16_t>(std::atoi(argv[2])));
        client::verbs_transport t(ip, static_cast<std::uint16_t>(std::atoi(argv[2])));
        const client::worker_options o = probe_options(77, 0x5eed);
        client::worker w(t, o);
        if (auto e = w.join(); !e.empty()) {
            std::fprintf(stderr, "verbs_probe: join: %s\n", e.c_str());
            return 1;
        }
        // Wait for railgated's REGION: write_raw needs it.
        for (int i = 0; i < 2000; ++i) {
            client::rx_msg m[4];
            t.recv(0, m, 4);
            if (t.write_raw(0, 0, wire::verbs_imm(200, 0), 64)) break; // slot 200 >= pool 4
        }
        const bool ok = t.write_raw(0, 1, wire::verbs_imm(1, 9), 64) && // generation 9, slot's is 0
                        t.write_raw(0, 2, wire::verbs_imm(2, 0), 6);    // 1.5 fp32 elements
        if (!ok) {
            std::fprintf(stderr, "verbs_probe: could not post the bad writes\n");
            return 1;
        }
        if (t.eager(0) != eager) {
            std::fprintf(stderr, "verbs_probe: railgated %s the eager ring\n", eager ? "declined" : "took");
            return 1;
        }
        if (eager && !(t.write_raw_eager(0, 0, wire::verbs_imm(200, 0), 8, 8) && // slot 200 >= pool 4
                       t.write_raw_eager(0, 1, wire::verbs_imm(1, 9), 8, 8) &&   // generation 9
                       t.write_raw_eager(0, 2, wire::verbs_imm(2, 0), 6, 6) &&   // 1.5 fp32 elements
                       t.write_raw_eager(0, 3, wire::verbs_imm(3, 0), 0, 8) &&   // claims 0 bytes
                       t.write_raw_eager(0, 3, wire::verbs_imm(3, 0), 121, 8))) { // claims more than an entry holds
            std::fprintf(stderr, "verbs_probe: could not post the bad eager entries\n");
            return 1;
        }
        // A small allreduce (80 bytes: the eager ring's when it has one)
        // and a large one.
        for (std::size_t n : {std::size_t{20}, std::size_t{1000}}) {
            std::vector<float> v(n);
            for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;
            const std::vector<float> want = v;
            if (auto e = w.allreduce(v.data(), v.size(), wire::dtype::fp32); !e.empty()) {
                std::fprintf(stderr, "verbs_probe: allreduce of %zu after the bad writes: %s\n", n, e.c_str());
                return 1;
            }
            if (v != want) {
                std::fprintf(stderr, "verbs_probe: wrong result of %zu after the bad writes\n", n);
                return 1;
            }
        }
        // What the transport says it holds on the rail (for a failure that
        // blames this rank): railgated's REGION had, no slot out once the
        // allreduces are back, the QP ready to send.
        const std::string held = t.describe(0);
        std::printf("verbs_probe: the rail holds: %s\n", held.c_str());
        if (held.rfind("REGION had (", 0) != 0 || held.find(", 0 of 4 slots out, ") == std::string::npos ||
            held.find(", QP RTS") == std::string::npos) {
            std::fprintf(stderr, "verbs_probe: describe(0) after the allreduces: %s\n", held.c_str());
            return 1;
        }
        // LEAVE twice, as a worker whose wait ran out before the LEAVE_ACK
        // came: each is acknowledged (leaves 1, leaves_again 1), neither
        // counted a drop.
        wire::header h;
        h.type = wire::msg_type::leave;
        h.job_id = o.job_id;
        h.job_token = o.job_token;
        h.world_size = static_cast<std::uint16_t>(o.world);
        h.gen = w.instance(0);
        unsigned acks = 0;
        for (int k = 0; k < 2; ++k) {
            const client::tx_msg leave{h, nullptr, 0};
            t.send(0, &leave, 1);
            recv_until(t, std::chrono::seconds(10), [&](std::span<const client::rx_msg> got) {
                for (const client::rx_msg& m : got) acks += m.h.type == wire::msg_type::leave_ack;
                return acks > static_cast<unsigned>(k);
            });
        }
        if (acks != 2) {
            std::fprintf(stderr, "verbs_probe: %u LEAVE_ACKs to 2 LEAVEs\n", acks);
            return 1;
        }
        // JOINs of job 78 with a shape word: the error code each gets.
        auto refusal = [&](std::uint32_t word) -> int {
            wire::header j;
            j.type = wire::msg_type::join;
            j.job_id = 78;
            j.job_token = o.job_token;
            j.world_size = 2;
            j.aux = word;
            wire::join_body b;
            b.max_count = 4096;
            b.pool_size = 4;
            b.nonce = 0x1234 + word;
            std::uint8_t body[wire::join_body_bytes];
            wire::encode_join_body(b, body);
            const client::tx_msg join{j, body, wire::join_body_bytes};
            t.send(0, &join, 1);
            int code = -1;
            recv_until(t, std::chrono::seconds(10), [&](std::span<const client::rx_msg> got) {
                for (const client::rx_msg& m : got) {
                    if (m.h.type == wire::msg_type::join_ack) code = 0;
                    else if (m.h.type == wire::msg_type::error && m.h.job_id == 78) code = static_cast<int>(m.h.aux);
                    if (code >= 0) return true;
                }
                return false;
            });
            return code;
        };
        const std::uint32_t chunk = w.job_info().chunk_bytes, rails = w.job_info().n_rails;
        const int other_chunk = refusal(wire::shape_word(chunk / 2, false, rails));
        const int lag = refusal(wire::shape_word(chunk, true, rails));
        const int more_rails = refusal(wire::shape_word(chunk, false, rails + 1));
        const int malformed = refusal(wire::shape_word(100, false, rails));
        const int shape = static_cast<int>(wire::error_code::shape_mismatch);
        if (other_chunk != shape || lag != shape || more_rails != shape ||
            malformed != static_cast<int>(wire::error_code::bad_request)) {
            std::fprintf(stderr,
                         "verbs_probe: JOINs with a shape not the plane's (half its %u B chunk, LAG, %u rails) and "
                         "a malformed one got %d, %d, %d and %d (-1: no answer, 0: JOIN_ACK)\n",
                         chunk, rails + 1, other_chunk, lag, more_rails, malformed);
            return 1;
        }
        // A JOIN of another protocol version (byte 0): answered in this
        // one, naming it.
        {
            wire::header j;
            j.version = 3;
            j.type = wire::msg_type::join;
            j.job_id = 79;
            j.world_size = 2;
            std::uint8_t body[wire::join_body_bytes] = {};
            const client::tx_msg join{j, body, wire::join_body_bytes};
            t.send(0, &join, 1);
            std::string told;
            recv_until(t, std::chrono::seconds(10), [&](std::span<const client::rx_msg> got) {
                for (const client::rx_msg& m : got)
                    if (m.h.type == wire::msg_type::error &&
                        m.h.aux == static_cast<std::uint32_t>(wire::error_code::protocol_version) && m.h.offset == 3) {
                        told.assign(m.bytes(), '\0');
                        m.copy_to(told.data());
                        return true;
                    }
                return false;
            });
            if (told.find("speaks railgate protocol version 2, not 3") == std::string::npos) {
                std::fprintf(stderr, "verbs_probe: a JOIN of protocol version 3 got no protocol_version ERROR (%s)\n",
                             told.c_str());
                return 1;
            }
        }
        std::printf("verbs_probe: 3 bad writes%s posted, the allreduces after them are exact, a repeated LEAVE "
                    "acked, 4 JOINs naming another job shape refused, one of protocol version 3 told\n",
                    eager ? " and 5 bad eager entries" : " (railgated declined the eager ring)");
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "verbs_probe: %s\n", e.what());
        return 1;
    }
}
