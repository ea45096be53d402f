// The worker's JOIN against a stand-in railgated on loopback: one that
// refuses it for its excluded rails (rails_mismatch, the job's set in the
// ERROR's offset), and one of two rails that disagree on the job's shape.
// When railgated restarts under a job, one rank may see a rail's queue pair
// fail before it sees railgated gone and rejoin around that rail, while the
// other ranks' new job has every rail (CI caught it in rxe-verbs-faults):
// the worker must take the job's set whether it excludes more rails or
// fewer, and must not go back and forth for ever. Also: an operation
// without progress names where it stood, and a re-join waits out a slow
// restart while retries last.
#include <boost/test/unit_test.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "client/railgate/udp_transport.hpp"
#include "client/railgate/worker.hpp"
#include "dataplane/proto/parse.hpp"
#include "stand_in.hpp"

using namespace railgate;
using clk = std::chrono::steady_clock;

namespace {

// Answers the k-th JOIN (the k-th nonce: a JOIN sent again is answered
// alike) with rails_mismatch naming refuse[k] as the job's excluded rails,
// and a JOIN past the script with a one-rail JOIN_ACK; a PING with a PONG,
// a contribution with nothing, or, with `results`, with itself as its
// result (a one-rank job). Records each JOIN's excluded rails. silence()
// makes it deaf for a while, as a railgated killed and restarted.
class join_server {
public:
    explicit join_server(std::vector<std::uint32_t> refuse, bool results = false)
        : refuse_(std::move(refuse)), results_(results) {
        fd_ = test::bind_loopback(port_);
        th_ = std::thread([this] { loop(); });
    }
    ~join_server() {
        stop_ = true;
        th_.join();
        ::close(fd_);
    }
    std::uint16_t port() const { return port_; }
    std::vector<std::uint32_t> excluded() const {
        std::lock_guard g(mu_);
        return excluded_;
    }
    void silence(std::chrono::milliseconds d) { until_ = (clk::now() + d).time_since_epoch().count(); }
    void chunk_bytes(std::uint16_t b) { chunk_ = b; }
    // Answers JOINs in protocol version v (an ERROR whose byte 0 is v), as
    // a railgated of that version would; -1: in this one.
    void version(int v) { version_ = v; }

private:
    void loop() {
        std::vector<std::uint8_t> in(65536), out(65536);
        std::vector<std::uint64_t> nonces;
        while (!stop_) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 5) <= 0) continue;
            sockaddr_in peer{};
            socklen_t fl = sizeof peer;
            const ssize_t n = ::recvfrom(fd_, in.data(), in.size(), 0, reinterpret_cast<sockaddr*>(&peer), &fl);
            if (n < static_cast<ssize_t>(wire::header_bytes) || clk::now().time_since_epoch().count() < until_) continue;
            const wire::header h = wire::decode_header(in.data());
            std::size_t len = wire::header_bytes;
            if (h.type == wire::msg_type::contrib && results_) {
                wire::header r = h;
                r.type = wire::msg_type::result;
                r.flags = 0;
                len = static_cast<std::size_t>(n);
                std::copy(in.begin(), in.begin() + n, out.begin());
                wire::encode_header(r, out.data());
            } else if (h.type == wire::msg_type::join &&
                n >= static_cast<ssize_t>(wire::header_bytes + wire::join_body_bytes)) {
                const wire::join_body b = wire::decode_join_body(in.data() + wire::header_bytes);
                std::size_t k = 0;
                while (k < nonces.size() && nonces[k] != b.nonce) ++k;
                if (k == nonces.size()) {
                    nonces.push_back(b.nonce);
                    std::lock_guard g(mu_);
                    excluded_.push_back(b.excluded_rails);
                }
                len = k < refuse_.size()
                          ? test::refusal(h, b.nonce, wire::error_code::rails_mismatch, refuse_[k],
                                          "the job's rails differ", out.data())
                          : test::join_ack(h, port_, 16, chunk_, out.data());
                if (const int v = version_; v >= 0) {
                    len = test::refusal(h, b.nonce, wire::error_code::protocol_version, 2, "", out.data());
                    out[0] = static_cast<std::uint8_t>(v);
                }
            } else if (h.type == wire::msg_type::leave) {
                test::header_answer(h, wire::msg_type::leave_ack, 0, out.data());
            } else if (h.type == wire::msg_type::ping) {
                test::header_answer(h, wire::msg_type::pong, 0, out.data()); // never a result
            } else {
                continue;
            }
            ::sendto(fd_, out.data(), len, 0, reinterpret_cast<const sockaddr*>(&peer), sizeof peer);
        }
    }

    std::vector<std::uint32_t> refuse_;
    bool results_;
    std::atomic<clk::rep> until_{0};
    std::atomic<std::uint16_t> chunk_{1024};
    std::atomic<int> version_{-1};
    int fd_ = -1;
    std::uint16_t port_ = 0;
    mutable std::mutex mu_;
    std::vector<std::uint32_t> excluded_;
    std::atomic<bool> stop_{false};
    std::thread th_;
};

client::worker_options options() {
    client::worker_options o;
    o.job_id = 6;
    o.job_token = 0x701e;
    o.max_count = 1 << 16;
    return o;
}

// A join that must fail: its error, and whether it came in under half the
// join timeout (at once, not when the timeout ran out).
struct failed_join {
    std::string error;
    bool soon = false;
};
failed_join join_failing(client::worker& w, const client::worker_options& o) {
    const auto t0 = clk::now();
    failed_join f{w.join()};
    BOOST_TEST_MESSAGE("join: " << f.error);
    f.soon = clk::now() - t0 < o.join_timeout / 2;
    return f;
}

} // namespace

// The job first excludes rail 1 (more than the worker), then none (fewer
// than the worker now does): the worker takes each set, and the third
// JOIN is acked. Before b162f37 it took only a larger set, and failed
// for good at the second refusal.
BOOST_AUTO_TEST_CASE(a_refused_join_takes_the_jobs_rails_either_way) {
    join_server s({0x2, 0x0});
    auto t = client::make_udp_transport(INADDR_LOOPBACK, s.port());
    client::worker w{*t, options()};
    BOOST_TEST(w.join() == "");
    BOOST_TEST(s.excluded() == (std::vector<std::uint32_t>{0x0, 0x2, 0x0}), boost::test_tools::per_element());
    w.leave();
}

// A railgated whose answer keeps changing: after two adoptions the third
// refusal ends the join, at once (not at the join timeout), as a refusal.
BOOST_AUTO_TEST_CASE(a_join_goes_along_with_the_job_twice_then_fails) {
    join_server s({0x2, 0x0, 0x2, 0x0});
    auto t = client::make_udp_transport(INADDR_LOOPBACK, s.port());
    client::worker_options o = options();
    client::worker w{*t, o};
    const auto [e, soon] = join_failing(w, o);
    BOOST_TEST(e.find("refused the join") != std::string::npos);
    BOOST_TEST(e.find("the job's rails differ") != std::string::npos);
    BOOST_TEST(client::failure_name(w.failed_with()) == client::failure_name(client::failure::refused));
    BOOST_TEST(!client::worker::recoverable(w.failed_with()));
    BOOST_TEST(s.excluded() == (std::vector<std::uint32_t>{0x0, 0x2, 0x0}), boost::test_tools::per_element());
    BOOST_TEST(soon); // at once, not at the join timeout
}

namespace {

// Two rails on loopback. Rail 0 acks every JOIN: a job of 1408 B chunks,
// policy rail, over both. Rail 1 records each JOIN's shape word (aux) and
// answers as `second` says: an ack of the same shape, an ack of another
// chunk (a railgated from before the shape word), or shape_mismatch; or
// `late`, the same ack 900 ms after the first JOIN (a slow connection); or
// `never`, with rail 0 answering a PING with the job's end; or `changing`,
// rails_changing for 150 ms from the first JOIN, then the ack; or
// `operator_ends`, the same ack, with rail 0 answering a contribution with
// the operator's abort (railctl job abort). What arrives as an ERROR (a
// worker's abort) on rail 0 is counted, and PINGs there; on rail 1, each
// ERROR's code.
class two_rail_server {
public:
    enum class answer { same, other_chunk, refuse, refuse_once, other_rails, other_index, late, never, changing, operator_ends };
    explicit two_rail_server(answer second) : second_(second) {
        fd_[0] = test::bind_loopback(port_[0]);
        fd_[1] = test::bind_loopback(port_[1]);
        th_ = std::thread([this] { loop(); });
    }
    ~two_rail_server() {
        stop_ = true;
        th_.join();
        ::close(fd_[0]);
        ::close(fd_[1]);
    }
    std::uint16_t port() const { return port_[0]; }
    std::vector<std::uint32_t> shapes() const {
        std::lock_guard g(mu_);
        return shapes_;
    }
    unsigned aborts() const { return aborts_.load(); }
    // Rail 1: the JOINs' nonces (low 32 bits) and the LEAVEs' gens.
    std::vector<std::uint32_t> join_nonces() const {
        std::lock_guard g(mu_);
        return nonces_;
    }
    std::vector<std::uint32_t> leave_gens() const {
        std::lock_guard g(mu_);
        return leave_gens_;
    }
    unsigned pings() const { return pings_.load(); }
    std::vector<std::uint32_t> rail1_abort_codes() const {
        std::lock_guard g(mu_);
        return codes_;
    }

private:
    void loop() {
        std::vector<std::uint8_t> in(65536), out(65536);
        while (!stop_) {
            pollfd p[2] = {{fd_[0], POLLIN, 0}, {fd_[1], POLLIN, 0}};
            if (::poll(p, 2, 5) <= 0) continue;
            for (unsigned r = 0; r < 2; ++r) {
                if (!(p[r].revents & POLLIN)) continue;
                sockaddr_in peer{};
                socklen_t fl = sizeof peer;
                const ssize_t n = ::recvfrom(fd_[r], in.data(), in.size(), 0, reinterpret_cast<sockaddr*>(&peer), &fl);
                if (n < static_cast<ssize_t>(wire::header_bytes)) continue;
                const wire::header h = wire::decode_header(in.data());
                std::size_t len = 0;
                if (h.type == wire::msg_type::join &&
                    n >= static_cast<ssize_t>(wire::header_bytes + wire::join_body_bytes)) {
                    const wire::join_body b = wire::decode_join_body(in.data() + wire::header_bytes);
                    if (r == 1) {
                        std::lock_guard g(mu_);
                        shapes_.push_back(h.aux);
                        nonces_.push_back(static_cast<std::uint32_t>(b.nonce));
                        if (shapes_.size() == 1) first_join_ = clk::now();
                    }
                    if (r == 1 && (second_ == answer::never ||
                                   (second_ == answer::late && clk::now() - first_join_ < std::chrono::milliseconds(900))))
                        continue;
                    if (r == 1 && second_ == answer::changing && clk::now() - first_join_ < std::chrono::milliseconds(150))
                        len = test::refusal(h, b.nonce, wire::error_code::rails_changing, 0,
                                            "railgated is changing its rails", out.data());
                    else if (r == 1 &&
                             (second_ == answer::refuse || (second_ == answer::refuse_once && first_nonce(b.nonce))))
                        len = test::refusal(h, b.nonce, wire::error_code::shape_mismatch, wire::shape_word(2880, false),
                                            "job 6 runs 2880 B chunks here", out.data());
                    else
                        // other_rails: a rail added since the first's
                        // JOIN_ACK (railgated before 2026-12-01 lists it);
                        // other_index: one removed, so this rail moved down.
                        len = test::join_ack(h, port_[0], 16, r == 1 && second_ == answer::other_chunk ? 2880 : 1408,
                                             out.data(), port_[1], wire::rail_policy::rail,
                                             r == 1 && second_ == answer::other_index ? 0 : r,
                                             r == 1 && second_ == answer::other_rails ? 1 : 0);
                } else if (h.type == wire::msg_type::leave) {
                    if (r == 1) {
                        std::lock_guard g(mu_);
                        leave_gens_.push_back(h.gen);
                    }
                    test::header_answer(h, wire::msg_type::leave_ack, 0, out.data());
                    len = wire::header_bytes;
                } else if (h.type == wire::msg_type::error && r == 0) {
                    ++aborts_;
                } else if (h.type == wire::msg_type::error) {
                    std::lock_guard g(mu_);
                    codes_.push_back(h.aux);
                } else if (h.type == wire::msg_type::contrib && r == 0 && second_ == answer::operator_ends) {
                    const std::string_view text = "the operator ended job 6 (railctl job abort): drill";
                    wire::encode_header(wire::error_header(h, wire::error_code::operator_abort, 0, 0x80000001u),
                                        out.data());
                    std::memcpy(out.data() + wire::header_bytes, text.data(), text.size());
                    len = wire::header_bytes + text.size();
                } else if (h.type == wire::msg_type::ping && r == 0) {
                    ++pings_;
                    if (second_ == answer::never) {
                        // The job ended there meanwhile: another rank stopped.
                        const std::string_view text = "rank 1 sent nothing to slot 0 of job 6 on rail r0 for 1000 ms";
                        wire::encode_header(wire::error_header(h, wire::error_code::rank_failed, 1, 0x80000001u), out.data());
                        std::memcpy(out.data() + wire::header_bytes, text.data(), text.size());
                        len = wire::header_bytes + text.size();
                    } else {
                        test::header_answer(h, wire::msg_type::pong, 0, out.data());
                        len = wire::header_bytes;
                    }
                }
                if (len) ::sendto(fd_[r], out.data(), len, 0, reinterpret_cast<const sockaddr*>(&peer), sizeof peer);
            }
        }
    }

    // Whether `nonce` is the first JOIN's on rail 1 (a JOIN sent again
    // carries its nonce).
    bool first_nonce(std::uint64_t nonce) {
        if (!seen_) seen_ = nonce;
        return nonce == seen_;
    }
    answer second_;
    clk::time_point first_join_{};
    std::uint64_t seen_ = 0;
    int fd_[2] = {-1, -1};
    std::uint16_t port_[2] = {0, 0};
    mutable std::mutex mu_;
    std::vector<std::uint32_t> shapes_, nonces_, leave_gens_, codes_;
    std::atomic<unsigned> aborts_{0};
    std::atomic<unsigned> pings_{0};
    std::atomic<bool> stop_{false};
    std::thread th_;
};

} // namespace

// Rail 0 acks at once, rail 1 900 ms later (over verbs: a connection slow
// to set up). The ranks that joined sooner may be at work on rail 0
// meanwhile, and railgated judges a rank silent there past its stall time
// (1000 ms in the JOIN_ACK): the worker PINGs rail 0 every quarter of it
// until it has joined rail 1. (Before, it sent nothing; the official CI of
// 759823f had a job end so in the SoftRoCE guest, at 1064 ms.)
BOOST_AUTO_TEST_CASE(a_rank_joining_its_other_rails_keeps_the_first_alive) {
    two_rail_server s(two_rail_server::answer::late);
    auto t = client::make_udp_transport(INADDR_LOOPBACK, s.port());
    client::worker w{*t, options()};
    const auto t0 = clk::now();
    BOOST_TEST(w.join() == "");
    BOOST_TEST((clk::now() - t0 >= std::chrono::milliseconds(900)));
    BOOST_TEST(s.pings() >= 2u); // at 250, 500, 750 ms
    BOOST_TEST(w.stripe_rails().size() == 2u);
    w.leave();
}

// The job ends on rail 0 while the rank still joins rail 1 (another rank
// stopped): the PING's answer ends the join at once, naming why, not the
// join timeout.
BOOST_AUTO_TEST_CASE(the_jobs_end_on_the_first_rail_ends_a_join_of_the_others) {
    two_rail_server s(two_rail_server::answer::never);
    auto t = client::make_udp_transport(INADDR_LOOPBACK, s.port());
    client::worker_options o = options();
    client::worker w{*t, o};
    const auto [e, soon] = join_failing(w, o);
    BOOST_TEST(e.find("railgated ended the job on rail 0: rank 1 sent nothing to slot 0") != std::string::npos, e);
    BOOST_TEST(client::failure_name(w.failed_with()) == client::failure_name(client::failure::rank_failed));
    BOOST_TEST(soon);
    // Rail 1 never answered its JOIN, which may yet have made the rank's
    // part there: it is left, named by the JOIN's nonce (railgated knows no
    // incarnation the worker could name). Left behind, it made the rank's
    // next process a second claim on the rank, refused for 30 s.
    const auto nonces = s.join_nonces();
    BOOST_REQUIRE(!nonces.empty());
    const auto gens = s.leave_gens();
    BOOST_TEST(!gens.empty());
    for (std::uint32_t g : gens) BOOST_TEST(g == nonces.front());
}

// The JOINs of the rails after the first name the job's shape as the first
// rail's JOIN_ACK gave it, so that every rail runs the job alike.
BOOST_AUTO_TEST_CASE(the_other_rails_joins_name_the_first_rails_shape) {
    two_rail_server s(two_rail_server::answer::same);
    auto t = client::make_udp_transport(INADDR_LOOPBACK, s.port());
    client::worker w{*t, options()};
    BOOST_TEST(w.join() == "");
    BOOST_REQUIRE(!s.shapes().empty());
    for (std::uint32_t a : s.shapes()) BOOST_TEST(a == wire::shape_word(1408, false, 2));
    BOOST_TEST(w.stripe_rails().size() == 2u);
    w.leave();
}

// A rail that refuses the shape (shape_mismatch), acks another chunk, or
// lists other rails (one added or removed since the first JOIN_ACK):
// the job cannot run, so the worker ends it on the rail it joined (an
// ERROR, not a LEAVE: the other ranks are told at once) and fails as a
// recoverable abort, naming why.
BOOST_AUTO_TEST_CASE(rails_that_disagree_on_the_shape_end_the_job_recoverably) {
    using enum two_rail_server::answer;
    for (auto second : {refuse, other_chunk, other_rails, other_index}) {
        two_rail_server s(second);
        auto t = client::make_udp_transport(INADDR_LOOPBACK, s.port());
        client::worker_options o = options();
        client::worker w{*t, o};
        const auto [e, soon] = join_failing(w, o);
        const char* says = second == refuse      ? "refused the join on rail 1: job 6 runs 2880 B chunks here"
                           : second == other_chunk ? "with 2880 B chunks under policy rail on rail 1, and 1408 B under rail on rail 0"
                           : second == other_rails ? "lists 3 rails to job 6 on rail 1 (its rail 1), against 2 on the first"
                                                   : "lists 2 rails to job 6 on rail 1 (its rail 0), against 2 on the first";
        BOOST_TEST(e.find(says) != std::string::npos, e);
        BOOST_TEST(client::failure_name(w.failed_with()) == client::failure_name(client::failure::aborted));
        BOOST_TEST(client::worker::recoverable(w.failed_with()));
        BOOST_TEST(soon);
        for (int i = 0; i < 100 && s.aborts() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        BOOST_TEST(s.aborts() >= 1u);
    }
}

// The operator's abort (railctl job abort) is final: it fails the
// operation as stopped, which no retry recovers (a rank's abort does);
// control_plane.sh and verbs_faults.sh show it end to end (--retry 3).
BOOST_AUTO_TEST_CASE(an_operators_abort_is_not_retried) {
    BOOST_TEST(!client::worker::recoverable(client::failure::stopped));
    BOOST_TEST(client::worker::recoverable(client::failure::aborted));
    BOOST_TEST(client::failure_name(client::failure::stopped) == "stopped");
    BOOST_TEST(wire::error_name(wire::error_code::operator_abort) == "railgated's operator ended the job");
}

// Told on rail 0 mid-operation that the operator ended the job, a worker
// with retries fails as stopped, does not re-join, and ends the job on rail
// 1 passing the operator's word on (operator_abort, not a rank's abort):
// a rank that reads rail 1 first must not take it for a rank's abort and
// re-join (CI's rxe-verbs-faults-sanitized caught one doing so).
BOOST_AUTO_TEST_CASE(an_operators_abort_read_on_one_rail_is_passed_on_to_the_others) {
    two_rail_server s(two_rail_server::answer::operator_ends);
    auto t = client::make_udp_transport(INADDR_LOOPBACK, s.port());
    client::worker_options o = options();
    o.retries = 3;
    std::vector<std::string> told;
    o.on_retry = [&told](const std::string& what) { told.push_back(what); };
    client::worker w{*t, o};
    BOOST_REQUIRE(w.join() == "");
    BOOST_REQUIRE(w.stripe_rails().size() == 2u);
    std::vector<float> x(4000, 1.0f);
    const std::string e = w.allreduce(x.data(), x.size(), wire::dtype::fp32);
    BOOST_TEST(e.find("the operator ended job 6 (railctl job abort): drill") != std::string::npos, e);
    BOOST_TEST(client::failure_name(w.failed_with()) == client::failure_name(client::failure::stopped));
    BOOST_TEST(told.empty()); // no re-join
    BOOST_TEST(s.shapes().size() == 1u); // rail 1's one JOIN
    std::vector<std::uint32_t> codes;
    for (int i = 0; i < 100 && codes.empty(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        codes = s.rail1_abort_codes();
    }
    BOOST_REQUIRE(!codes.empty());
    for (std::uint32_t c : codes) BOOST_TEST(c == static_cast<std::uint32_t>(wire::error_code::operator_abort));
}

// railgated holds JOINs while its lcores take a new rail list, MTU or
// policy (rails_changing): the worker JOINs again, every 10 ms rather than
// every 100, and joins once the rail answers.
BOOST_AUTO_TEST_CASE(a_join_waits_while_railgated_changes_its_rails) {
    two_rail_server s(two_rail_server::answer::changing);
    auto t = client::make_udp_transport(INADDR_LOOPBACK, s.port());
    client::worker w{*t, options()};
    BOOST_TEST(w.join() == "");
    BOOST_TEST(w.stripe_rails().size() == 2u);
    BOOST_TEST(s.shapes().size() >= 5u, s.shapes().size()); // 2 in 150 ms at 100 ms
    BOOST_TEST(s.aborts() == 0u);
    w.leave();
}

// A join that fails as an operation may (here the job's shape refused on
// rail 1, once) is tried again with retries, as a failed operation is: the
// other ranks of an aborted job are retrying too. Without retries it fails.
BOOST_AUTO_TEST_CASE(a_recoverable_join_failure_is_retried_with_retries) {
    {
        two_rail_server s(two_rail_server::answer::refuse_once);
        auto t = client::make_udp_transport(INADDR_LOOPBACK, s.port());
        client::worker_options o = options();
        o.retries = 2;
        std::vector<std::string> told; // options.on_retry's lines
        o.on_retry = [&told](const std::string& what) { told.push_back(what); };
        client::worker w{*t, o};
        BOOST_TEST(w.join() == "");
        BOOST_TEST(w.recoveries() == 1u);
        BOOST_REQUIRE(told.size() == 2u);
        BOOST_TEST(told[0].find("refused the join on rail 1") != std::string::npos);
        BOOST_TEST(told[0].find("; re-joining (retry 1 of 2)") != std::string::npos);
        BOOST_TEST(told[1] == "joined again");
        BOOST_TEST(s.shapes().size() >= 2u);
        BOOST_TEST(s.aborts() >= 1u);
        w.leave();
    }
    two_rail_server s(two_rail_server::answer::refuse_once);
    auto t = client::make_udp_transport(INADDR_LOOPBACK, s.port());
    client::worker w{*t, options()};
    BOOST_TEST(w.join().find("refused the join on rail 1") != std::string::npos);
    BOOST_TEST(w.recoveries() == 0u);
}

// A railgated that answers every PING but never a result: the operation
// times out (not railgated gone), and its error says where the rail stood,
// what a user or a bug report needs: the chunks back and out, how often the
// oldest went, what railgated answered.
BOOST_AUTO_TEST_CASE(an_operation_without_progress_says_where_it_stood) {
    join_server s({});
    auto t = client::make_udp_transport(INADDR_LOOPBACK, s.port());
    client::worker_options o = options();
    o.op_timeout = std::chrono::milliseconds(300);
    o.peer_timeout = std::chrono::milliseconds(100);
    client::worker w{*t, o};
    BOOST_REQUIRE(w.join() == "");
    std::vector<float> x(1000, 1.0f);
    const std::string e = w.allreduce(x.data(), x.size(), wire::dtype::fp32);
    BOOST_TEST_MESSAGE(e);
    BOOST_TEST(client::failure_name(w.failed_with()) == client::failure_name(client::failure::timeout));
    BOOST_TEST(e.find("allreduce timed out: no result on rail 0 for 300 ms (0 of 4 chunks back, 4 made, 0 owed") !=
               std::string::npos);
    BOOST_TEST(e.find("; oldest out: chunk 0 (slot 0, generation 0, offset 0), sent again ") != std::string::npos);
    BOOST_TEST(e.find(" PONGs, probe ") != std::string::npos);
    BOOST_TEST(e.find(" 0 PONGs") == std::string::npos); // it heard railgated
    w.leave();
}

// railgated silent for 1.5 s mid-job, five join timeouts (300 ms): the
// worker finds it gone (100 ms), asks again for the job (a join timeout),
// and re-joins. A re-join not answered within the join timeout goes on
// while retries last (until 2026-11-30 the first one ended the operation,
// ~0.7 s in: a railgated restarted on a loaded machine, 14 s for its EAL,
// was given one join timeout). The operation then runs again bit-exact.
BOOST_AUTO_TEST_CASE(a_rejoin_waits_out_a_slow_restart_while_retries_last) {
    join_server s({}, true);
    auto t = client::make_udp_transport(INADDR_LOOPBACK, s.port());
    client::worker_options o = options();
    o.peer_timeout = std::chrono::milliseconds(100);
    o.join_timeout = std::chrono::milliseconds(300);
    o.retries = 8;
    std::vector<std::string> told; // options.on_retry's lines
    o.on_retry = [&told](const std::string& what) { told.push_back(what); };
    client::worker w{*t, o};
    BOOST_REQUIRE(w.join() == "");
    std::vector<float> x(4000);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
    BOOST_REQUIRE(w.allreduce(x.data(), x.size(), wire::dtype::fp32) == "");
    s.silence(std::chrono::milliseconds(1500));
    const auto t0 = clk::now();
    const std::string e = w.allreduce(x.data(), x.size(), wire::dtype::fp32);
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(clk::now() - t0).count();
    BOOST_TEST_MESSAGE("railgated silent 1.5 s: " << (e.empty() ? "done" : e) << " in " << took << " ms, "
                                                  << w.recoveries() << " recoveries, " << w.resumes() << " resumes");
    BOOST_TEST(e == "");
    BOOST_TEST(w.recoveries() == 1u);
    BOOST_TEST(took >= 1400); // it waited for railgated
    // Each step told as it came: railgated gone (asked again for the job),
    // still silent (a re-join), re-joins unanswered (more retries), back.
    for (const std::string& l : told) BOOST_TEST_MESSAGE("on_retry: " << l);
    BOOST_REQUIRE(told.size() >= 4u);
    BOOST_TEST(told.front().find("operation 1: ") == 0u);
    BOOST_TEST(told.front().find("; asking railgated again for the job as it was") != std::string::npos);
    BOOST_TEST(told[1].find("operation 1: ") == 0u);
    BOOST_TEST(told[1].find("; re-joining (retry 1 of 8)") != std::string::npos);
    BOOST_TEST(told[2].find("re-join: ") == 0u);
    BOOST_TEST(told[2].find("; re-joining (retry 2 of 8)") != std::string::npos);
    BOOST_TEST(told.back() == "joined again; running operation 1 again");
    for (std::size_t i = 0; i < x.size(); ++i) BOOST_REQUIRE_EQUAL(x[i], static_cast<float>(i));
    w.leave();
}

// A JOIN_ACK whose chunk a kernel-UDP worker cannot receive whole (its
// datagrams are 9216 B at most; fuzz_worker found a 128 KiB one taken,
// each contribution then too big for a datagram): the join is refused,
// naming both sizes, not run into an operation that cannot progress.
BOOST_AUTO_TEST_CASE(a_chunk_the_transport_cannot_carry_is_refused) {
    join_server s({});
    s.chunk_bytes(16384);
    auto t = client::make_udp_transport(INADDR_LOOPBACK, s.port());
    client::worker_options o = options();
    client::worker w{*t, o};
    const auto [e, soon] = join_failing(w, o);
    BOOST_TEST(e == "railgated's JOIN_ACK gives 16384 B chunks; the udp transport carries messages of at most 9216 B "
                    "(40 B of header)");
    BOOST_TEST(client::failure_name(w.failed_with()) == client::failure_name(client::failure::refused));
    BOOST_TEST(soon);
    s.chunk_bytes(8960);
    BOOST_TEST(w.join() == "");
    w.leave();
}

// A railgated of another protocol version: its answers cannot be read (nor
// their nonce checked, so a forged one cannot end a join at once), and the
// join that times out names both versions, refused: no retry mends it.
// Then one of this version: joined.
BOOST_AUTO_TEST_CASE(a_railgated_of_another_protocol_version_is_named) {
    join_server s({});
    s.version(3);
    auto t = client::make_udp_transport(INADDR_LOOPBACK, s.port());
    client::worker_options o = options();
    o.join_timeout = std::chrono::milliseconds(400);
    client::worker w{*t, o};
    BOOST_TEST(w.join() == "railgated speaks railgate protocol version 3, this library 2: no JOIN_ACK it can read "
                           "(upgrade the workers or railgated so that they match)");
    BOOST_TEST(client::failure_name(w.failed_with()) == client::failure_name(client::failure::refused));
    BOOST_TEST(!client::worker::recoverable(w.failed_with()));
    BOOST_TEST(t->foreign_version() == 3);
    BOOST_TEST(t->dropped() > 0u);
    // Then railgated silent (upgraded, not yet back): the join's timeout
    // is a timeout, not the earlier version's.
    s.silence(std::chrono::milliseconds(600));
    BOOST_TEST(w.join().find("join timed out after 400 ms: no JOIN_ACK") == 0u);
    BOOST_TEST(client::failure_name(w.failed_with()) == client::failure_name(client::failure::timeout));
    s.version(-1);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    BOOST_TEST(w.join() == "");
    w.leave();
}
