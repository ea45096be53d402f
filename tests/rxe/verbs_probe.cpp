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
//
//   verbs_probe SERVER_IP PORT [eager]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "client/railgate/verbs_transport.hpp"
#include "client/railgate/worker.hpp"
#include "dataplane/proto/ipv4.hpp"
#include "dataplane/proto/parse.hpp"

using namespace railgate;

int main(int argc, char** argv) {
    if (argc != 3 && !(argc == 4 && std::strcmp(argv[3], "eager") == 0)) {
        std::fprintf(stderr, "usage: verbs_probe SERVER_IP PORT [eager]\n");
        return 2;
    }
    const bool eager = argc == 4;
    std::uint32_t ip = 0;
    if (!net::parse_ipv4(argv[1], ip)) return 2;
    try {
        client::verbs_transport t(ip, static_cast<std::uint16_t>(std::atoi(argv[2])));
        client::worker_options o;
        o.job_id = 77;
        o.job_token = 0x5eed;
        o.world = 1;
        o.pool_size = 4;
        o.max_count = 4096;
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
            const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (acks == static_cast<unsigned>(k) && std::chrono::steady_clock::now() < until) {
                client::rx_msg m[4];
                const unsigned n = t.recv(0, m, 4);
                for (unsigned j = 0; j < n; ++j) acks += m[j].h.type == wire::msg_type::leave_ack;
            }
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
            const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (std::chrono::steady_clock::now() < until) {
                client::rx_msg m[4];
                const unsigned n = t.recv(0, m, 4);
                for (unsigned i = 0; i < n; ++i) {
                    if (m[i].h.type == wire::msg_type::join_ack) return 0;
                    if (m[i].h.type == wire::msg_type::error && m[i].h.job_id == 78) return static_cast<int>(m[i].h.aux);
                }
            }
            return -1;
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
        std::printf("verbs_probe: 3 bad writes%s posted, the allreduces after them are exact, a repeated LEAVE "
                    "acked, 4 JOINs naming another job shape refused\n",
                    eager ? " and 5 bad eager entries" : " (railgated declined the eager ring)");
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "verbs_probe: %s\n", e.what());
        return 1;
    }
}
