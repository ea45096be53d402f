// The RC timers railgate sets on its QPs (verbs::qp_settings, applied by
// queue_pair::move_to), measured on a real RC connection: both ends in
// this process over rdma_cm on the rxe-vm guest's rxe0, with railgate's
// own queue_pair.
//
//   rnr:  the receiving end has posted no receive when a SEND comes; it
//         posts one 30 ms later. Its min_rnr_timer is how long the sender
//         waits after each receiver-not-ready NAK: with 12 (0.64 ms,
//         railgate's default) the SEND completes soon after the receive is
//         posted, with rdma_cm's 0 (655 ms) not before 655 ms.
//   ack:  the receiving end's QP is destroyed, so nothing answers: the
//         sender resends retry_count times, ack_timeout apart, then its
//         SEND completes with IBV_WC_RETRY_EXC_ERR after (retry_count + 1)
//         ACK timeouts: 3 x 67 ms with ack_timeout 14 and retry_count 2,
//         2 x 268 ms with 16 and 1. With rdma_cm's timeout (19 here, 2.1
//         s) and 7 retries that would be 17 s.
// Each connection's timers are read back (ibv_query_qp) and must be the
// ones set; what rdma_cm's own defaults are is printed. Exit 0 when every
// measurement is inside its bounds.
//
//   qp_timers IP PORT      (IP: an address of an RDMA device; the guest's 198.18.0.1)
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <arpa/inet.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "dataplane/verbs/rdma.hpp"

using namespace railgate;
using clk = std::chrono::steady_clock;

namespace {

constexpr auto event_wait = std::chrono::milliseconds(5000);

void expect(rdma_event_channel* ch, rdma_cm_event_type want, rdma_cm_id** id = nullptr) {
    rdma_cm_event* e = verbs::next_event(ch, event_wait);
    if (!e) throw std::runtime_error(std::string("no ") + rdma_event_str(want) + " within 5 s");
    const rdma_cm_event_type got = e->event;
    if (id) *id = e->id;
    rdma_ack_cm_event(e);
    if (got != want)
        throw std::runtime_error(std::string("wanted ") + rdma_event_str(want) + ", got " + rdma_event_str(got));
}

// One RC connection: `a` (the active end, which sends) to `p` (the passive
// end), each with its settings. Members in teardown order last to first.
struct connection {
    verbs::cm_channel_ptr ach, pch;
    verbs::cm_id_ptr listen, aid, pid;
    verbs::pd_ptr apd, ppd;
    std::unique_ptr<verbs::queue_pair> a, p;
    alignas(64) std::uint64_t abuf = 0x7a11, pbuf = 0;
    verbs::mr_ptr amr, pmr;

    connection(std::uint32_t ip, std::uint16_t port, const verbs::qp_settings& as, const verbs::qp_settings& ps) {
        ach.reset(rdma_create_event_channel());
        pch.reset(rdma_create_event_channel());
        if (!ach || !pch) throw std::runtime_error("rdma_create_event_channel failed (no rdma_ucm?)");
        rdma_cm_id* id = nullptr;
        if (rdma_create_id(pch.get(), &id, nullptr, RDMA_PS_TCP)) throw std::runtime_error("rdma_create_id failed");
        listen.reset(id);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(port);
        sa.sin_addr.s_addr = htonl(ip);
        if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&sa)) || rdma_listen(id, 4))
            throw std::runtime_error(std::string("rdma_bind_addr/rdma_listen: ") + std::strerror(errno));
        if (rdma_create_id(ach.get(), &id, nullptr, RDMA_PS_TCP)) throw std::runtime_error("rdma_create_id failed");
        aid.reset(id);
        if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&sa), 2000))
            throw std::runtime_error(std::string("rdma_resolve_addr: ") + std::strerror(errno));
        expect(ach.get(), RDMA_CM_EVENT_ADDR_RESOLVED);
        if (rdma_resolve_route(id, 2000)) throw std::runtime_error("rdma_resolve_route failed");
        expect(ach.get(), RDMA_CM_EVENT_ROUTE_RESOLVED);
        apd.reset(ibv_alloc_pd(id->verbs));
        if (!apd) throw std::runtime_error("ibv_alloc_pd failed");
        a = std::make_unique<verbs::queue_pair>(id, apd.get(), nullptr, as);
        if (std::string e = a->move_to(IBV_QPS_INIT); !e.empty()) throw std::runtime_error("active: " + e);
        rdma_conn_param cp{};
        cp.qp_num = a->qp()->qp_num;
        cp.retry_count = as.retry_count;
        cp.rnr_retry_count = as.rnr_retry;
        if (rdma_connect(id, &cp)) throw std::runtime_error(std::string("rdma_connect: ") + std::strerror(errno));
        expect(pch.get(), RDMA_CM_EVENT_CONNECT_REQUEST, &id);
        pid.reset(id);
        ppd.reset(ibv_alloc_pd(id->verbs));
        if (!ppd) throw std::runtime_error("ibv_alloc_pd failed");
        p = std::make_unique<verbs::queue_pair>(id, ppd.get(), nullptr, ps);
        std::string e = p->move_to(IBV_QPS_INIT);
        if (e.empty()) e = p->move_to(IBV_QPS_RTR);
        if (e.empty()) e = p->move_to(IBV_QPS_RTS);
        if (!e.empty()) throw std::runtime_error("passive: " + e);
        rdma_conn_param pp{};
        pp.qp_num = p->qp()->qp_num;
        pp.retry_count = ps.retry_count;
        pp.rnr_retry_count = ps.rnr_retry;
        if (rdma_accept(id, &pp)) throw std::runtime_error(std::string("rdma_accept: ") + std::strerror(errno));
        expect(ach.get(), RDMA_CM_EVENT_CONNECT_RESPONSE);
        e = a->move_to(IBV_QPS_RTR);
        if (e.empty()) e = a->move_to(IBV_QPS_RTS);
        if (!e.empty()) throw std::runtime_error("active: " + e);
        if (rdma_establish(aid.get())) throw std::runtime_error("rdma_establish failed");
        expect(pch.get(), RDMA_CM_EVENT_ESTABLISHED);
        amr.reset(ibv_reg_mr(apd.get(), &abuf, sizeof abuf, verbs::local_write));
        pmr.reset(ibv_reg_mr(ppd.get(), &pbuf, sizeof pbuf, verbs::local_write));
        if (!amr || !pmr) throw std::runtime_error("ibv_reg_mr failed");
    }
    ~connection() {
        // The QPs before their memory, PDs and ids (the members' order
        // would free the registrations last).
        a.reset();
        p.reset();
        amr.reset();
        pmr.reset();
    }

    void post_send() {
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(&abuf), sizeof abuf, amr->lkey};
        ibv_send_wr wr{}, *bad = nullptr;
        wr.wr_id = 1;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND;
        wr.send_flags = IBV_SEND_SIGNALED;
        if (ibv_post_send(a->qp(), &wr, &bad)) throw std::runtime_error("ibv_post_send failed");
    }
    void post_recv() {
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(&pbuf), sizeof pbuf, pmr->lkey};
        ibv_recv_wr wr{}, *bad = nullptr;
        wr.wr_id = 2;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        if (ibv_post_recv(p->qp(), &wr, &bad)) throw std::runtime_error("ibv_post_recv failed");
    }
    // The SEND's completion on the active end: its status, or -1 if none within `limit`.
    int send_completion(std::chrono::milliseconds limit) {
        const auto until = clk::now() + limit;
        while (clk::now() < until) {
            ibv_wc wc{};
            const int n = ibv_poll_cq(a->cq(), 1, &wc);
            if (n < 0) throw std::runtime_error("ibv_poll_cq failed");
            if (n == 1 && wc.wr_id == 1) return wc.status;
            if (n == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        return -1;
    }
};

double ms_since(clk::time_point t0) { return std::chrono::duration<double, std::milli>(clk::now() - t0).count(); }

bool same(const verbs::qp_timers& t, const verbs::qp_settings& s) {
    return (!s.ack_timeout || t.ack_timeout == s.ack_timeout) && t.retry_count == s.retry_count &&
           t.rnr_retry == s.rnr_retry && t.min_rnr_timer == s.min_rnr_timer;
}

int failures = 0;
void check(bool ok, const std::string& what) {
    std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
    if (!ok) ++failures;
}

// The receiver's min_rnr_timer: ms until the SEND completes when the
// receive is posted `late` after it.
double rnr_case(std::uint32_t ip, std::uint16_t port, unsigned min_rnr_timer, std::chrono::milliseconds late) {
    verbs::qp_settings s; // the active end: rnr_retry 7 (without end)
    verbs::qp_settings ps;
    ps.min_rnr_timer = static_cast<std::uint8_t>(min_rnr_timer);
    connection c(ip, port, s, ps);
    check(same(c.p->timers(), ps) && same(c.a->timers(), s),
          "the receiver's QP took min rnr timer " + std::to_string(min_rnr_timer) + ": " + verbs::describe(c.p->timers()));
    const auto t0 = clk::now();
    c.post_send();
    std::this_thread::sleep_for(late);
    c.post_recv();
    const int st = c.send_completion(std::chrono::milliseconds(10000));
    const double ms = ms_since(t0);
    if (st != IBV_WC_SUCCESS)
        throw std::runtime_error("the SEND after a late receive ended " +
                                 (st < 0 ? std::string("without a completion in 10 s")
                                         : std::string(ibv_wc_status_str(static_cast<ibv_wc_status>(st)))));
    if (c.pbuf != c.abuf) throw std::runtime_error("the SEND's payload did not arrive");
    return ms;
}

// The sender's ack_timeout and retry_count: ms until its SEND fails with
// nothing answering, and the status it fails with.
double ack_case(std::uint32_t ip, std::uint16_t port, unsigned ack_timeout, unsigned retry_count, int& status) {
    verbs::qp_settings s;
    s.ack_timeout = static_cast<std::uint8_t>(ack_timeout);
    s.retry_count = static_cast<std::uint8_t>(retry_count);
    connection c(ip, port, s, verbs::qp_settings{});
    check(same(c.a->timers(), s), "the sender's QP took " + verbs::describe(c.a->timers()));
    c.p.reset(); // nothing answers: rxe drops what comes for a QP that is gone
    const auto t0 = clk::now();
    c.post_send();
    status = c.send_completion(std::chrono::milliseconds(30000));
    return ms_since(t0);
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: qp_timers IP PORT\n");
        return 2;
    }
    in_addr ia{};
    if (inet_pton(AF_INET, argv[1], &ia) != 1) return 2;
    const std::uint32_t ip = ntohl(ia.s_addr);
    auto port = static_cast<std::uint16_t>(std::atoi(argv[2]));
    try {
        {
            connection c(ip, port++, verbs::qp_settings{.ack_timeout = 0, .min_rnr_timer = 0},
                         verbs::qp_settings{.ack_timeout = 0, .min_rnr_timer = 0});
            std::printf("rdma_cm's own timers here: %s\n", verbs::describe(c.a->timers()).c_str());
        }
        const auto late = std::chrono::milliseconds(30);
        const double fast = rnr_case(ip, port++, 12, late);
        const double slow = rnr_case(ip, port++, 0, late);
        check(fast < 300, "receive posted 30 ms late, min rnr timer 12 (0.64 ms): the SEND completed after " +
                              std::to_string(fast) + " ms (under 300)");
        check(slow >= 600, "receive posted 30 ms late, min rnr timer 0 (655 ms): the SEND completed after " +
                               std::to_string(slow) + " ms (at least 600)");
        int st14 = 0, st16 = 0;
        const double t14 = ack_case(ip, port++, 14, 2, st14);
        const double t16 = ack_case(ip, port++, 16, 1, st16);
        check(st14 == IBV_WC_RETRY_EXC_ERR && t14 >= 150 && t14 < 1500,
              std::string("no answer, ack timeout 14 (67 ms), retry 2: ") +
                  (st14 < 0 ? "no completion" : ibv_wc_status_str(static_cast<ibv_wc_status>(st14))) + " after " +
                  std::to_string(t14) + " ms (3 timeouts: 201; within 150..1500)");
        check(st16 == IBV_WC_RETRY_EXC_ERR && t16 >= 400 && t16 < 4000 && t16 > t14,
              std::string("no answer, ack timeout 16 (268 ms), retry 1: ") +
                  (st16 < 0 ? "no completion" : ibv_wc_status_str(static_cast<ibv_wc_status>(st16))) + " after " +
                  std::to_string(t16) + " ms (2 timeouts: 537; within 400..4000, above the first)");
    } catch (const std::exception& e) {
        std::printf("FAIL: %s\n", e.what());
        return 1;
    }
    return failures ? 1 : 0;
}
