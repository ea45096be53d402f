// RDMA verbs (RoCE, InfiniBand): one RC QP per rail, connected with rdma_cm
// to railgated's verbs rails. Control messages are SENDs; a contribution is
// copied into the rail's registered slot buffer and RDMA-written with
// immediate (slot, generation) into railgated's region for this rank; the
// result comes back the same way into the same slot buffer. RC is
// reliable and ordered, so the worker never retransmits over it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/railgate/transport.hpp"
#include "dataplane/verbs/rdma.hpp"

namespace railgate::client {

struct verbs_options {
    verbs::qp_settings qp;   // GID index, path MTU, traffic class, SL of the worker's QPs
    std::chrono::milliseconds connect_timeout{5000};
};

class verbs_transport : public transport {
public:
    // Connects rail 0 (server_ip host order, port: railgated's rdma_cm
    // port, its udp_port). Throws std::runtime_error with the reason.
    verbs_transport(std::uint32_t server_ip, std::uint16_t port, const verbs_options& o = {});
    ~verbs_transport() override;

    unsigned n_rails() const noexcept override;
    std::string open_rails(std::span<const wire::rail_entry> rails, const std::function<void()>& meanwhile) override;
    unsigned send(unsigned rail, const tx_msg* msgs, unsigned n) noexcept override;
    unsigned recv(unsigned rail, rx_msg* out, unsigned max) noexcept override;
    std::uint64_t dropped() const noexcept override;
    void wait(std::chrono::microseconds max) noexcept override;
    bool reliable() const noexcept override { return true; }
    const char* checksums() const noexcept override { return "none"; }
    // Every rail connected afresh (railgated restarted: its QPs are gone);
    // a rail that cannot be reached stays failed (its first recv() says
    // so). "" when at least one could.
    std::string reconnect() override;
    const char* name() const noexcept override { return "verbs"; }
    // RDMA writes into railgated's slots: any chunk the protocol has.
    std::size_t max_message_bytes() const noexcept override { return wire::header_bytes + wire::max_chunk_bytes; }

    // For tests and protocol tools: an RDMA WRITE_WITH_IMM of `bytes` bytes
    // of slot `slot`'s buffer into railgated's slot `slot` with an arbitrary
    // immediate. Returns false when the rail is not ready.
    bool write_raw(unsigned rail, unsigned slot, std::uint32_t imm, std::uint32_t bytes) noexcept;
    // The GID index and path MTU rail 0's QP uses.
    int gid_index() const noexcept;
    unsigned path_mtu() const noexcept;

    struct rail;

private:
    struct address {
        std::uint32_t ip;
        std::uint16_t port;
    };
    std::vector<address> addrs_; // where each rail connects
    verbs_options o_;
    std::vector<std::unique_ptr<rail>> rails_;
    std::uint64_t dropped_ = 0;
};

} // namespace railgate::client
