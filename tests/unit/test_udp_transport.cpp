// The kernel-UDP transport's receive side against a stand-in server on
// loopback: results sent as UDP GSO messages reach a UDP_GRO socket still
// coalesced (loopback keeps the GSO message whole), and the transport must
// cut them apart into the datagrams that were sent, a shorter last one and
// a bad one among them, across receives smaller than a message.
#define BOOST_TEST_MODULE udp_transport
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "client/railgate/udp_transport.hpp"
#include "dataplane/proto/parse.hpp"

using namespace railgate;
using namespace std::chrono_literals;

namespace {

constexpr std::uint32_t loopback = 0x7f000001;

// A datagram railgated would send: RESULT of `count` fp32 elements at
// `offset`, element k holding offset + k.
std::vector<std::uint8_t> result(std::uint64_t offset, std::uint32_t count) {
    wire::header h;
    h.type = wire::msg_type::result;
    h.job_id = 3;
    h.job_token = 0x1234;
    h.world_size = 2;
    h.count = count;
    h.offset = offset;
    std::vector<std::uint8_t> d(wire::header_bytes + count * 4);
    wire::encode_header(h, d.data());
    for (std::uint32_t k = 0; k < count; ++k) {
        const float v = static_cast<float>(offset + k);
        std::memcpy(d.data() + wire::header_bytes + k * 4, &v, 4);
    }
    return d;
}

struct server {
    int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in self{}, peer{};
    server() {
        self.sin_family = AF_INET;
        self.sin_addr.s_addr = htonl(loopback);
        socklen_t len = sizeof self;
        BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&self), sizeof self) == 0);
        BOOST_REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) == 0);
    }
    ~server() { ::close(fd); }
    std::uint16_t port() const { return ntohs(self.sin_port); }
    // Learns the worker's address from what it sends.
    void hear(client::transport& t) {
        wire::header h;
        h.type = wire::msg_type::ping;
        h.world_size = 2;
        client::tx_msg m{h, nullptr, 0};
        BOOST_REQUIRE_EQUAL(t.send(0, &m, 1), 1u);
        std::uint8_t buf[256];
        socklen_t len = sizeof peer;
        BOOST_REQUIRE(::recvfrom(fd, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&peer), &len) > 0);
    }
    // The datagrams as one UDP GSO message cut at the first one's size.
    void send_gso(const std::vector<std::vector<std::uint8_t>>& dgrams) {
        std::vector<std::uint8_t> all;
        for (const auto& d : dgrams) all.insert(all.end(), d.begin(), d.end());
        iovec iov{all.data(), all.size()};
        alignas(cmsghdr) std::uint8_t ctl[CMSG_SPACE(sizeof(std::uint16_t))] = {};
        msghdr mh{};
        mh.msg_name = &peer;
        mh.msg_namelen = sizeof peer;
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = ctl;
        mh.msg_controllen = sizeof ctl;
        cmsghdr* c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(std::uint16_t));
        const auto seg = static_cast<std::uint16_t>(dgrams.front().size());
        std::memcpy(CMSG_DATA(c), &seg, sizeof seg);
        BOOST_REQUIRE_EQUAL(::sendmsg(fd, &mh, 0), static_cast<ssize_t>(all.size()));
    }
};

// Sends 3 GSO messages (50 results of 256 elements each; the third ends
// with a 100-element result, and its 10th datagram is not railgate's) and
// receives them 7 at a time. Returns the transport's coalesced() count.
std::uint64_t run_gso_results() {
    server s;
    auto t = client::make_udp_transport(loopback, s.port());
    s.hear(*t);
    std::map<std::uint64_t, std::uint32_t> want; // offset -> count
    std::uint64_t offset = 0;
    for (int msg = 0; msg < 3; ++msg) {
        std::vector<std::vector<std::uint8_t>> dgrams;
        for (int i = 0; i < 50; ++i) {
            const std::uint32_t count = msg == 2 && i == 49 ? 100 : 256;
            dgrams.push_back(result(offset, count));
            if (msg == 2 && i == 9) dgrams.back()[0] = 99; // a version railgate does not speak: dropped
            else want[offset] = count;
            offset += count;
        }
        s.send_gso(dgrams);
    }
    std::map<std::uint64_t, std::uint32_t> got;
    client::rx_msg out[7];
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (got.size() < want.size() && std::chrono::steady_clock::now() < deadline) {
        const unsigned n = t->recv(0, out, 7);
        BOOST_REQUIRE_LE(n, 7u);
        if (n == 0) t->wait(10ms);
        for (unsigned i = 0; i < n; ++i) {
            const auto& m = out[i];
            BOOST_REQUIRE(m.h.type == wire::msg_type::result);
            BOOST_REQUIRE_EQUAL(m.bytes(), m.h.count * 4);
            std::vector<float> v(m.h.count);
            BOOST_REQUIRE(m.copy_to(v.data()));
            for (std::uint32_t k = 0; k < m.h.count; ++k)
                BOOST_REQUIRE_EQUAL(v[k], static_cast<float>(m.h.offset + k));
            BOOST_REQUIRE_MESSAGE(got.emplace(m.h.offset, m.h.count).second, "offset " << m.h.offset << " twice");
        }
    }
    BOOST_TEST((got == want));
    BOOST_TEST(t->dropped() == 1u);
    BOOST_TEST(t->recv(0, out, 7) == 0u); // nothing more, nothing left behind
    return t->coalesced();
}

} // namespace

BOOST_AUTO_TEST_CASE(gro_results_are_cut_apart_across_small_receives) {
    ::unsetenv("RAILGATE_UDP_GRO");
    // 149 good datagrams and the bad one arrived in 3 coalesced messages.
    BOOST_TEST(run_gso_results() == 150u);
}

BOOST_AUTO_TEST_CASE(without_gro_the_kernel_cuts_them) {
    ::setenv("RAILGATE_UDP_GRO", "0", 1);
    BOOST_TEST(run_gso_results() == 0u);
    ::unsetenv("RAILGATE_UDP_GRO");
}
