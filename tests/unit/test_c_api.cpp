// librailgate's C ABI against a stand-in railgated on loopback (one rail,
// world 1: a result is the contribution sent back), so that its threads run
// in the unit suite and under TSan: concurrent submitters, the progress
// thread, rg_test/rg_wait, aborts and a server that goes silent. Real
// railgated runs are tests/install/c_abi.sh and ddp_train.sh.
#define BOOST_TEST_MODULE c_api
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <csignal>
#include <cstring>
#include <string>
#include <chrono>
#include <thread>
#include <vector>

#include "client/railgate.h"
#include "dataplane/proto/parse.hpp"
#include "dataplane/reduce/numeric.hpp"
#include "stand_in.hpp"

using namespace railgate;

namespace {

// A railgated of one rail on 127.0.0.1 for jobs of one rank.
class fake_server {
public:
    fake_server() {
        fd_ = test::bind_loopback(port_);
        const int on = 1;
        BOOST_REQUIRE(::setsockopt(fd_, IPPROTO_IP, IP_RECVTOS, &on, sizeof on) == 0);
        th_ = std::thread([this] { loop(); });
    }
    ~fake_server() {
        stop_ = true;
        th_.join();
        ::close(fd_);
    }
    std::uint16_t port() const { return port_; }
    void silence(bool s) { silent_ = s; }
    // The next n contributions are lost (not answered).
    void drop_contribs(unsigned n) { drop_ = n; }
    // Results from now on echo their contribution as marked ECN CE (a
    // congested port's, as railgated's echo says it).
    void mark_results(bool on) { mark_ = on; }
    // Contributions from now on are answered with railgated's ERROR
    // rank_failed naming `rank`, as railgated ends a job when a rank sent
    // nothing to a slot the others had filled; -1: answered again.
    void blame(int rank) { blame_ = rank; }
    unsigned pings() const { return pings_; }
    unsigned leaves() const { return leaves_; }
    // The IPv4 TOS byte of the last contribution.
    unsigned contrib_tos() const { return contrib_tos_; }

private:
    void loop() {
        std::vector<std::uint8_t> buf(65536), out(65536);
        while (!stop_) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 10) <= 0) continue;
            sockaddr_in from{};
            iovec iov{buf.data(), buf.size()};
            alignas(cmsghdr) std::uint8_t ctl[CMSG_SPACE(sizeof(int))];
            msghdr mh{};
            mh.msg_name = &from;
            mh.msg_namelen = sizeof from;
            mh.msg_iov = &iov;
            mh.msg_iovlen = 1;
            mh.msg_control = ctl;
            mh.msg_controllen = sizeof ctl;
            const ssize_t n = ::recvmsg(fd_, &mh, 0);
            const socklen_t fl = mh.msg_namelen;
            unsigned tos = 0;
            for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) tos = *CMSG_DATA(c);
            if (n < static_cast<ssize_t>(wire::header_bytes)) continue;
            wire::header h = wire::decode_header(buf.data());
            if (h.type == wire::msg_type::leave) ++leaves_;   // heard, answered or not
            if (silent_) continue;
            std::size_t len = wire::header_bytes;
            wire::header r = h;
            r.flags = 0;
            switch (h.type) {
            case wire::msg_type::join:
                len = test::join_ack(h, port_, 16, 1024, out.data());
                ::sendto(fd_, out.data(), len, 0, reinterpret_cast<sockaddr*>(&from), fl);
                continue;
            case wire::msg_type::contrib:
                if (const int b = blame_; b >= 0) {
                    const std::string text = "rank " + std::to_string(b) + " sent nothing to slot " +
                                             std::to_string(h.slot) + " of job " + std::to_string(h.job_id) +
                                             " on rail r0 for 1000 ms while the other ranks did";
                    wire::encode_header(
                        wire::error_header(h, wire::error_code::rank_failed, static_cast<std::uint64_t>(b), 0x80000001u),
                        out.data());
                    std::memcpy(out.data() + wire::header_bytes, text.data(), text.size());
                    ::sendto(fd_, out.data(), wire::header_bytes + text.size(), 0, reinterpret_cast<sockaddr*>(&from), fl);
                    continue;
                }
                if (drop_ > 0) {
                    --drop_;
                    continue;
                }
                contrib_tos_ = tos;
                r.type = wire::msg_type::result;
                r.aux = mark_ ? wire::result_echo(0, true) : 0;
                std::memcpy(out.data() + wire::header_bytes, buf.data() + wire::header_bytes,
                            static_cast<std::size_t>(n) - wire::header_bytes);
                len = static_cast<std::size_t>(n);
                break;
            case wire::msg_type::leave: r.type = wire::msg_type::leave_ack; break;
            case wire::msg_type::ping:
                ++pings_;
                r.type = wire::msg_type::pong;
                break;
            default: continue;   // RTT reports, aborts
            }
            wire::encode_header(r, out.data());
            ::sendto(fd_, out.data(), len, 0, reinterpret_cast<sockaddr*>(&from), fl);
        }
    }
    int fd_ = -1;
    std::uint16_t port_ = 0;
    std::atomic<bool> stop_{false}, silent_{false}, mark_{false};
    std::atomic<int> blame_{-1};
    std::atomic<unsigned> pings_{0}, contrib_tos_{0}, drop_{0}, leaves_{0};
    std::thread th_;
};

// A one-rank job's config on the stand-in server, the rest left at rg_config_init's.
rg_config config_for(const fake_server& s, std::uint32_t job) {
    rg_config c;
    rg_config_init(&c);
    c.server = "127.0.0.1";
    c.port = s.port();
    c.job = job;
    c.token = rg_random_token();
    c.world = 1;
    return c;
}

rg_comm* make(const fake_server& s, std::uint32_t job, std::uint32_t timeout_ms = 20000,
              std::uint8_t cc = RG_CC_QUEUE) {
    rg_config c = config_for(s, job);
    c.congestion_control = cc;
    c.max_count = 1 << 20;
    c.timeout_ms = timeout_ms;
    rg_comm* comm = nullptr;
    BOOST_REQUIRE_EQUAL(rg_create(&c, &comm), RG_OK);
    BOOST_REQUIRE_MESSAGE(rg_join(comm) == RG_OK, rg_last_error(comm));
    return comm;
}

// librailgate 0.1's rg_get_stats (symbol version RAILGATE_0), as a program
// built against 0.1's header calls it: four counters, no struct_size.
struct rg_stats_0_1 {
    std::uint64_t allreduces, bytes, retransmits, recoveries;
};
extern "C" rg_status rg_get_stats_0_1(const rg_comm* comm, rg_stats_0_1* out);
__asm__(".symver rg_get_stats_0_1, rg_get_stats@RAILGATE_0");

} // namespace

// Four threads submit asynchronous and blocking allreduces at once; each
// one's result (world 1: its input) comes back in its own buffer.
BOOST_AUTO_TEST_CASE(concurrent_submitters) {
    fake_server s;
    rg_comm* comm = make(s, 1);
    std::atomic<int> failures{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t)
        ts.emplace_back([&, t] {
            for (int k = 0; k < 20; ++k) {
                const std::size_t n = 1000 + 997 * static_cast<std::size_t>(k + t);
                std::vector<float> in(n), out(n, -1.0f);
                for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<float>(i * (t + 1)) * 0.5f;
                rg_request* q = nullptr;
                if (k % 2) {
                    if (rg_allreduce(comm, in.data(), out.data(), n, RG_FP32) != RG_OK) ++failures;
                } else if (rg_allreduce_start(comm, in.data(), out.data(), n, RG_FP32, &q) != RG_OK) {
                    ++failures;
                } else {
                    while (rg_test(q) == RG_IN_PROGRESS) std::this_thread::yield();
                    if (rg_wait(q) != RG_OK) ++failures;
                    rg_request_free(q);
                }
                if (out != in) ++failures;
            }
        });
    for (auto& t : ts) t.join();
    BOOST_TEST(failures.load() == 0);
    rg_stats st = RG_STATS_INIT;
    BOOST_TEST(rg_get_stats(comm, &st) == RG_OK);
    BOOST_TEST(st.allreduces == 80u);
    rg_destroy(comm);
}

// Between operations the communicator PINGs its job every quarter of the
// stall time (the server's JOIN_ACK says 1000 ms), so that a rank computing
// longer than that is not taken for dead; operations submitted meanwhile
// still run one at a time.
BOOST_AUTO_TEST_CASE(an_idle_communicator_keeps_its_job_alive) {
    fake_server s;
    rg_comm* comm = make(s, 40);
    const unsigned before = s.pings();
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    BOOST_TEST(s.pings() - before >= 2u);
    std::vector<std::thread> ts;
    std::atomic<int> failures{0};
    for (int t = 0; t < 2; ++t)
        ts.emplace_back([&] {
            std::vector<float> v(3000, 1.0f);
            for (int k = 0; k < 5; ++k) {
                if (rg_allreduce(comm, v.data(), v.data(), v.size(), RG_FP32) != RG_OK) ++failures;
                std::this_thread::sleep_for(std::chrono::milliseconds(120));
            }
        });
    for (auto& t : ts) t.join();
    BOOST_TEST(failures.load() == 0);
    rg_destroy(comm);
}

// Compressed: divided by the divisor in float, rounded to bf16 / fp16,
// widened back; fp32 "compression" only divides.
BOOST_AUTO_TEST_CASE(compressed_rounds_once) {
    fake_server s;
    rg_comm* comm = make(s, 10);
    std::vector<float> v(5000), want(5000);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 1.0f + static_cast<float>(i) * 0.001f;
    for (rg_dtype wire : {RG_BF16, RG_FP16, RG_FP32}) {
        std::vector<float> x = v;
        for (std::size_t i = 0; i < v.size(); ++i) {
            const float d = v[i] / 3.0f;
            want[i] = wire == RG_BF16   ? reduce::bf16_to_f32(reduce::f32_to_bf16(d))
                      : wire == RG_FP16 ? reduce::f16_to_f32(reduce::f32_to_f16(d))
                                        : d;
        }
        BOOST_REQUIRE_MESSAGE(rg_allreduce_compressed(comm, x.data(), x.size(), wire, 3.0f) == RG_OK,
                              rg_last_error(comm));
        BOOST_TEST((x == want), "wire dtype " << wire);
    }
    float f = 1;
    BOOST_TEST(rg_allreduce_compressed(comm, &f, 1, RG_INT32, 1.0f) == RG_ERR_USAGE);
    BOOST_TEST(rg_allreduce_compressed(comm, &f, 1, RG_BF16, 0.0f) == RG_ERR_USAGE);
    rg_destroy(comm);
}

// A silent server fails the running allreduce (railgated gone) and every
// one queued behind it, with the reason; rg_abort fails what is queued.
BOOST_AUTO_TEST_CASE(failures_reach_every_request) {
    fake_server s;
    rg_comm* comm = make(s, 20);
    std::vector<float> a(200000, 1.0f), b(1000, 2.0f);
    s.silence(true);
    rg_request *q1 = nullptr, *q2 = nullptr;
    BOOST_REQUIRE(rg_allreduce_start(comm, a.data(), a.data(), a.size(), RG_FP32, &q1) == RG_OK);
    BOOST_REQUIRE(rg_allreduce_start(comm, b.data(), b.data(), b.size(), RG_FP32, &q2) == RG_OK);
    // Asked while it runs (and its error is being written): "" until it ends.
    unsigned early = 0;
    while (rg_test(q1) == RG_IN_PROGRESS)
        if (*rg_request_error(q1) && rg_test(q1) == RG_IN_PROGRESS) ++early;
    BOOST_TEST(early == 0u);
    const rg_status s1 = rg_wait(q1), s2 = rg_wait(q2);
    BOOST_TEST(s1 == RG_ERR_DAEMON_GONE, rg_status_name(s1) << ": " << rg_request_error(q1));
    BOOST_TEST(s2 == s1);
    BOOST_TEST(std::string(rg_request_error(q2)).find("an earlier operation failed") != std::string::npos);
    rg_request_free(q1);
    rg_request_free(q2);
    BOOST_TEST(rg_allreduce(comm, b.data(), b.data(), 4, RG_FP32) == RG_ERR_DAEMON_GONE);
    rg_destroy(comm);

    s.silence(false);
    comm = make(s, 30);
    BOOST_TEST(rg_abort(comm, "test over") == RG_OK);
    BOOST_TEST(rg_allreduce(comm, b.data(), b.data(), 4, RG_FP32) == RG_ERR_ABORTED);
    BOOST_TEST(std::string(rg_last_error(comm)).find("test over") != std::string::npos);
    rg_destroy(comm);
}

// rg_destroy finishes what was queued; the requests stay the caller's, and
// testing, waiting or reading them afterwards does not touch the freed
// communicator (it did: rg_test and rg_wait locked its mutex, a
// use-after-free ASan reports), an aborted one's error included.
BOOST_AUTO_TEST_CASE(requests_outlive_their_communicator) {
    fake_server s;
    rg_comm* comm = make(s, 40);
    std::vector<float> a(200000), b(1000), out_a(a.size(), -1.0f), out_b(b.size(), -1.0f);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 1000) * 0.25f;
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i) + 0.5f;
    rg_request *q1 = nullptr, *q2 = nullptr;
    BOOST_REQUIRE(rg_allreduce_start(comm, a.data(), out_a.data(), a.size(), RG_FP32, &q1) == RG_OK);
    BOOST_REQUIRE(rg_allreduce_start(comm, b.data(), out_b.data(), b.size(), RG_FP32, &q2) == RG_OK);
    rg_destroy(comm);
    BOOST_TEST(rg_test(q1) == RG_OK);
    BOOST_TEST(rg_wait(q2) == RG_OK);
    BOOST_TEST(rg_wait(q1) == RG_OK);
    BOOST_TEST(std::string(rg_request_error(q1)).empty());
    BOOST_TEST((out_a == a));
    BOOST_TEST((out_b == b));
    rg_request_free(q1);
    rg_request_free(q2);

    comm = make(s, 50);
    s.silence(true);
    BOOST_REQUIRE(rg_allreduce_start(comm, a.data(), out_a.data(), a.size(), RG_FP32, &q1) == RG_OK);
    BOOST_REQUIRE(rg_allreduce_start(comm, b.data(), out_b.data(), b.size(), RG_FP32, &q2) == RG_OK);
    BOOST_TEST(rg_abort(comm, "ending early") == RG_OK);
    rg_destroy(comm);
    s.silence(false);
    BOOST_TEST(rg_test(q1) != RG_IN_PROGRESS);
    BOOST_TEST(rg_wait(q2) == RG_ERR_ABORTED);
    BOOST_TEST(std::string(rg_request_error(q2)).find("ending early") != std::string::npos, rg_request_error(q2));
    rg_request_free(q1);
    rg_request_free(q2);
}

// rg_last_error while another thread's calls fail on the same
// communicator: each reader gets a whole message of its own (it read the
// communicator's string as the other thread rewrote it: TSan's data race,
// a torn or freed string).
BOOST_AUTO_TEST_CASE(last_error_is_read_whole_while_another_thread_fails) {
    fake_server s;
    rg_comm* comm = make(s, 60);
    std::vector<float> b(16, 1.0f);
    std::atomic<bool> stop{false};
    std::thread failing([&] {
        for (std::size_t k = 0; !stop; ++k) {
            if (k % 2)
                rg_allreduce(comm, b.data(), b.data(), (std::size_t{1} << 20) + 1 + k * 1000003, RG_FP32);
            else
                rg_allreduce(comm, b.data(), b.data(), 4, static_cast<rg_dtype>(7 + k % 1000));
        }
    });
    unsigned torn = 0;
    for (int k = 0; k < 20000; ++k) {
        const std::string e = rg_last_error(comm);
        const bool whole = e.empty() || (e.rfind("count ", 0) == 0 && e.find(" is above the job's max_count 1048576") != std::string::npos) ||
                           (e.rfind("dtype ", 0) == 0 && e.find("is not one of RG_FP32, RG_BF16, RG_FP16, RG_INT32") != std::string::npos);
        if (!whole) ++torn;
    }
    stop = true;
    failing.join();
    BOOST_TEST(torn == 0u);
    BOOST_TEST(rg_allreduce(comm, b.data(), b.data(), b.size(), RG_FP32) == RG_OK);
    rg_destroy(comm);
}

// A child forked while its parent's allreduce runs inherits the
// communicator, not its threads or its job: every call is RG_ERR_USAGE, its
// rg_wait does not wait, its rg_destroy sends no LEAVE (it ended the
// parent's rank) and does not hang on the parent's running op (it did);
// the parent's allreduce finishes bit-exact.
BOOST_AUTO_TEST_CASE(a_forked_child_leaves_its_parents_communicator_alone) {
    fake_server s;
    rg_config c = config_for(s, 70);
    c.peer_timeout_ms = 20000;   // the silence lasts as long as the child
    rg_comm* comm = nullptr;
    BOOST_REQUIRE(rg_create(&c, &comm) == RG_OK);
    BOOST_REQUIRE(rg_join(comm) == RG_OK);
    std::vector<float> b(5000), out(b.size(), -1.0f);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i) * 0.5f;
    BOOST_REQUIRE(rg_allreduce(comm, b.data(), out.data(), b.size(), RG_FP32) == RG_OK);
    s.silence(true);   // the next allreduce stays in progress until it ends
    rg_request* q = nullptr;
    std::fill(out.begin(), out.end(), -1.0f);
    BOOST_REQUIRE(rg_allreduce_start(comm, b.data(), out.data(), b.size(), RG_FP32, &q) == RG_OK);
    const pid_t child = ::fork();
    BOOST_REQUIRE(child >= 0);
    if (child == 0) {
        int bad = 0;
        if (rg_allreduce(comm, b.data(), b.data(), 4, RG_FP32) != RG_ERR_USAGE) bad |= 1;
        if (!std::strstr(rg_last_error(comm), "a process forked from it cannot use it")) bad |= 2;
        if (rg_test(q) != RG_ERR_USAGE) bad |= 4;
        if (rg_wait(q) != RG_ERR_USAGE) bad |= 8;
        rg_stats st = RG_STATS_INIT;
        if (rg_get_stats(comm, &st) != RG_ERR_USAGE || rg_abort(comm, "child") != RG_ERR_USAGE) bad |= 16;
        rg_destroy(comm);
        ::_exit(bad);
    }
    int status = -1;
    for (int k = 0; k < 500 && ::waitpid(child, &status, WNOHANG) == 0; ++k)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (status == -1) {
        ::kill(child, SIGKILL);
        ::waitpid(child, &status, 0);
        BOOST_ERROR("the forked child hung (its rg_wait or rg_destroy)");
    } else {
        BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0), "child status " << status);
    }
    BOOST_TEST(s.leaves() == 0u);
    s.silence(false);
    BOOST_TEST(rg_wait(q) == RG_OK, rg_request_error(q));
    BOOST_TEST((out == b));
    rg_request_free(q);
    BOOST_TEST(rg_allreduce(comm, b.data(), b.data(), b.size(), RG_FP32) == RG_OK);
    rg_destroy(comm);
    BOOST_TEST(s.leaves() > 0u);
}

// config.peer_timeout_ms: how long a silent server has before it is taken
// for gone (default 1000, 0 the default, above an hour refused).
BOOST_AUTO_TEST_CASE(peer_timeout_comes_from_the_config) {
    fake_server s;
    auto gone_after = [&](std::uint32_t job, std::uint32_t peer_ms) {
        rg_config c = config_for(s, job);
        c.peer_timeout_ms = peer_ms;
        rg_comm* comm = nullptr;
        BOOST_REQUIRE_EQUAL(rg_create(&c, &comm), RG_OK);
        BOOST_REQUIRE_MESSAGE(rg_join(comm) == RG_OK, rg_last_error(comm));
        std::vector<float> v(4, 1.0f);
        BOOST_REQUIRE(rg_allreduce(comm, v.data(), v.data(), v.size(), RG_FP32) == RG_OK);
        s.silence(true);
        const auto t0 = std::chrono::steady_clock::now();
        const rg_status st = rg_allreduce(comm, v.data(), v.data(), v.size(), RG_FP32);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        BOOST_TEST(st == RG_ERR_DAEMON_GONE, rg_status_name(st) << ": " << rg_last_error(comm));
        BOOST_TEST(std::string(rg_last_error(comm)).find("stopped answering") != std::string::npos, rg_last_error(comm));
        s.silence(false);
        rg_destroy(comm);
        return ms;
    };
    const double short_ms = gone_after(90, 300), long_ms = gone_after(91, 2500), default_ms = gone_after(92, 0);
    BOOST_TEST(short_ms >= 300.0);
    BOOST_TEST(short_ms < 2000.0);
    BOOST_TEST(long_ms >= 2500.0);
    BOOST_TEST(default_ms >= 1000.0);
    BOOST_TEST(default_ms < long_ms);

    rg_config c = config_for(s, 93);
    BOOST_TEST(c.peer_timeout_ms == 1000u);
    c.peer_timeout_ms = 3600001;
    rg_comm* comm = nullptr;
    BOOST_TEST(rg_create(&c, &comm) == RG_ERR_USAGE);
    BOOST_TEST(std::string(rg_last_error(nullptr)).find("peer_timeout_ms 3600001") != std::string::npos,
               rg_last_error(nullptr));
}

// config.connect_timeout_ms (verbs; its attempts are tested on rxe in
// tests/rxe/verbs_loss.sh): 5000 by default, above an hour refused. A
// caller built against the header before it passes a struct that ends at
// on_retry_ctx: whatever lies past that is not read (here a value that
// would be refused), and its communicator works.
BOOST_AUTO_TEST_CASE(connect_timeout_is_checked_and_an_older_config_is_served) {
    fake_server s;
    rg_config c = config_for(s, 94);
    BOOST_TEST(c.connect_timeout_ms == 5000u);
    c.connect_timeout_ms = 3600001;
    rg_comm* comm = nullptr;
    BOOST_TEST(rg_create(&c, &comm) == RG_ERR_USAGE);
    BOOST_TEST(comm == nullptr);
    BOOST_TEST(std::string(rg_last_error(nullptr)).find("connect_timeout_ms 3600001") != std::string::npos,
               rg_last_error(nullptr));
    c.struct_size = offsetof(rg_config, connect_timeout_ms);
    BOOST_REQUIRE_MESSAGE(rg_create(&c, &comm) == RG_OK, rg_last_error(nullptr));
    BOOST_REQUIRE_MESSAGE(rg_join(comm) == RG_OK, rg_last_error(comm));
    std::vector<float> v(4, 2.0f);
    BOOST_TEST(rg_allreduce(comm, v.data(), v.data(), v.size(), RG_FP32) == RG_OK, rg_last_error(comm));
    BOOST_TEST(v[3] == 2.0f);
    BOOST_TEST(rg_leave(comm) == RG_OK);
    rg_destroy(comm);
}

// A rank railgated names as the one that sent nothing says what it held
// on the rail then (made, sent, resent, HELD; a verbs rail's REGION, posted
// sends and QP state), so that "never sent" and "sent, not delivered" can
// be told apart; a rank told of another's silence says only railgated's
// words.
BOOST_AUTO_TEST_CASE(a_rank_blamed_for_silence_says_what_it_held) {
    fake_server s;
    for (const int blamed : {0, 1}) {
        rg_comm* comm = make(s, 95 + static_cast<std::uint32_t>(blamed));
        std::vector<float> v(4, 1.0f);
        BOOST_REQUIRE_MESSAGE(rg_allreduce(comm, v.data(), v.data(), v.size(), RG_FP32) == RG_OK, rg_last_error(comm));
        s.blame(blamed);
        BOOST_TEST(rg_allreduce(comm, v.data(), v.data(), v.size(), RG_FP32) == RG_ERR_RANK_FAILED);
        s.blame(-1);
        const std::string e = rg_last_error(comm);
        BOOST_TEST(e.find("rank " + std::to_string(blamed) + " sent nothing to slot 0 of job") != std::string::npos, e);
        if (blamed == 0)
            BOOST_TEST(e.find("[this rank on the rail then: 0 of 1 chunks back, 1 made") != std::string::npos, e);
        else
            BOOST_TEST(e.find("this rank on the rail") == std::string::npos, e);
        rg_destroy(comm);
    }
}

// config.congestion_control: RG_CC_DELAY or RG_CC_QUEUE makes the job's datagrams
// ECN-capable (ECT(0)) in their DSCP, and the window follows the round
// trips with exact results; off, no ECN bits; other values are refused.
BOOST_AUTO_TEST_CASE(congestion_control_is_asked_for_in_the_config) {
    fake_server s;
    for (const std::uint8_t cc : {std::uint8_t{RG_CC_OFF}, std::uint8_t{RG_CC_DELAY}, std::uint8_t{RG_CC_QUEUE}}) {
        rg_comm* comm = make(s, 70 + cc, 20000, cc);
        std::vector<float> v(100000), in(100000);
        for (std::size_t i = 0; i < v.size(); ++i) in[i] = v[i] = static_cast<float>(i % 1000);
        for (int k = 0; k < 5; ++k) BOOST_REQUIRE_MESSAGE(rg_allreduce(comm, v.data(), v.data(), v.size(), RG_FP32) == RG_OK,
                                                         rg_last_error(comm));
        BOOST_TEST(std::memcmp(v.data(), in.data(), v.size() * sizeof(float)) == 0);
        BOOST_TEST((s.contrib_tos() & 3u) == (cc != RG_CC_OFF ? 2u : 0u), "tos " << s.contrib_tos());
        BOOST_TEST(rg_leave(comm) == RG_OK);
        rg_destroy(comm);
    }
    rg_config c = config_for(s, 79);
    BOOST_TEST(c.congestion_control == RG_CC_QUEUE); // the default
    c.congestion_control = 7;
    rg_comm* comm = nullptr;
    BOOST_TEST(rg_create(&c, &comm) == RG_ERR_USAGE);
    BOOST_TEST(std::string(rg_last_error(nullptr)).find("congestion_control 7") != std::string::npos,
               rg_last_error(nullptr));
}

// config.gid_index: -1 (automatic: RAILGATE_IB_GID_INDEX, else the RoCEv2
// GID) or an index 0..255; anything else is refused before a connection,
// not cut to a byte (300 became 44) or taken for automatic (-5).
BOOST_AUTO_TEST_CASE(gid_index_is_checked_in_the_config) {
    fake_server s;
    for (const int g : {-5, -2, 256, 300}) {
        rg_config c = config_for(s, 80);
        BOOST_TEST(c.gid_index == -1); // the default
        c.gid_index = g;
        rg_comm* comm = nullptr;
        BOOST_TEST(rg_create(&c, &comm) == RG_ERR_USAGE);
        BOOST_TEST(comm == nullptr);
        BOOST_TEST(std::string(rg_last_error(nullptr)) ==
                       "config.gid_index " + std::to_string(g) + " is not -1 (automatic) or a GID index 0..255",
                   rg_last_error(nullptr));
    }
}

// rg_stats: the counters of a lost contribution's recovery, the struct_size
// handshake with an older or newer header, 0.1's rg_get_stats, and the
// congestion counters.
BOOST_AUTO_TEST_CASE(stats_count_and_fit_the_callers_struct) {
    fake_server s;
    rg_comm* comm = make(s, 70);
    std::vector<float> buf(4096, 1.5f);
    BOOST_TEST(rg_allreduce(comm, buf.data(), buf.data(), buf.size(), RG_FP32) == RG_OK);
    s.drop_contribs(1);
    BOOST_TEST(rg_allreduce(comm, buf.data(), buf.data(), buf.size(), RG_FP32) == RG_OK, rg_last_error(comm));
    BOOST_TEST(buf[4095] == 1.5f);

    rg_stats st = RG_STATS_INIT;
    BOOST_TEST_REQUIRE(rg_get_stats(comm, &st) == RG_OK);
    BOOST_TEST(st.struct_size == sizeof(rg_stats));
    BOOST_TEST(st.allreduces == 2u);
    BOOST_TEST(st.bytes == 2 * buf.size() * sizeof(float));
    BOOST_TEST(st.retransmits >= 1u); // the lost chunk, by a timeout or a tail probe
    BOOST_TEST(st.timeout_retransmits + st.tail_probes >= 1u);
    BOOST_TEST(st.timeout_retransmits + st.tail_probes <= st.retransmits);
    BOOST_TEST(st.spurious_retransmits == 0u); // lost, not reordered
    BOOST_TEST(st.recoveries == 0u);
    BOOST_TEST(st.ecn_marks == 0u);
    BOOST_TEST(st.window_decreases == 0u);
    BOOST_TEST(st.ecn_marks == 0u);
    BOOST_TEST(st.window_decreases == 0u);

    // A program built against an older header: only its fields are written.
    struct older {
        rg_stats head; // the first five fields used, the rest a guard
    } o;
    std::memset(&o, 0xab, sizeof o);
    o.head.struct_size = offsetof(rg_stats, timeout_retransmits);
    BOOST_TEST_REQUIRE(rg_get_stats(comm, &o.head) == RG_OK);
    BOOST_TEST(o.head.struct_size == offsetof(rg_stats, timeout_retransmits));
    BOOST_TEST(o.head.allreduces == 2u);
    BOOST_TEST(o.head.retransmits == st.retransmits);
    BOOST_TEST(o.head.timeout_retransmits == 0xababababababababull);
    BOOST_TEST(o.head.ecn_marks == 0xababababababababull);
    // A newer header's larger struct: this library's fields, and it says so.
    struct newer {
        rg_stats now;
        std::uint64_t later = 0xcd;
    } n;
    n.now.struct_size = sizeof n;
    BOOST_TEST_REQUIRE(rg_get_stats(comm, &n.now) == RG_OK);
    BOOST_TEST(n.now.struct_size == sizeof(rg_stats));
    BOOST_TEST(n.now.retransmits == st.retransmits);
    BOOST_TEST(n.later == 0xcdu);
    // Too small for 0.2's first fields (a struct zeroed instead of set with
    // RG_STATS_INIT, or this one): refused, with the reason.
    rg_stats bad = RG_STATS_INIT;
    bad.struct_size = sizeof(std::uint64_t);
    BOOST_TEST(rg_get_stats(comm, &bad) == RG_ERR_USAGE);
    BOOST_TEST(std::string(rg_last_error(comm)).find("struct_size 8 is below 40") != std::string::npos,
               rg_last_error(comm));
    BOOST_TEST(rg_get_stats(comm, nullptr) == RG_ERR_USAGE);
    BOOST_TEST(rg_get_stats(nullptr, &st) == RG_ERR_USAGE);

    // 0.1's symbol: the four counters, nothing after them.
    struct {
        rg_stats_0_1 s;
        std::uint64_t guard = 0xef;
    } v;
    BOOST_TEST_REQUIRE(rg_get_stats_0_1(comm, &v.s) == RG_OK);
    BOOST_TEST(v.s.allreduces == 2u);
    BOOST_TEST(v.s.bytes == st.bytes);
    BOOST_TEST(v.s.retransmits == st.retransmits);
    BOOST_TEST(v.s.recoveries == 0u);
    BOOST_TEST(v.guard == 0xefu);

    // Results that echo their contribution as marked CE (a congested
    // port): each counted, and the window shrinks.
    s.mark_results(true);
    for (int k = 0; k < 3; ++k) BOOST_TEST(rg_allreduce(comm, buf.data(), buf.data(), buf.size(), RG_FP32) == RG_OK);
    rg_stats marked = RG_STATS_INIT;
    BOOST_TEST_REQUIRE(rg_get_stats(comm, &marked) == RG_OK);
    BOOST_TEST(marked.ecn_marks >= 3 * buf.size() * sizeof(float) / 1024, marked.ecn_marks); // every chunk's result
    BOOST_TEST(marked.window_decreases >= 1u);
    rg_destroy(comm);
}
