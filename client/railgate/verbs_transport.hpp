// RDMA verbs (RoCE, InfiniBand): one RC QP per rail, connected with rdma_cm
// to railgated's verbs rails. Control messages are SENDs; a contribution is
// copied into the rail's registered slot buffer and RDMA-written with
// immediate (slot, generation) into railgated's region for this rank; the
// result comes back the same way into the same slot buffer. RC is
// reliable and ordered, so the worker never retransmits over it.
// Chunks of at most 120 bytes take the eager rings instead when railgated
// accepts them (dataplane/verbs/ll_ring.hpp): a plain RDMA WRITE each way,
// read by polling memory. The worker then polls instead of sleeping on its
// completion channel while it waits (railgated busy-polls that rail too).
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
    // GID index, path MTU, traffic class, SL and RC timers of the
    // worker's QPs; RAILGATE_IB_TIMEOUT, RAILGATE_IB_RETRY_CNT,
    // RAILGATE_IB_RNR_RETRY and RAILGATE_IB_MIN_RNR_TIMER in the
    // environment set the timers, RAILGATE_IB_GID_INDEX the GID index when
    // none is given (verbs::settings_from_env; a bad value fails the
    // constructor, named). A GID index is checked against each rail's
    // local address before its connect (verbs::check_gid).
    verbs::qp_settings qp;
    // The worker's peer timeout: without RAILGATE_IB_TIMEOUT (or
    // qp.ack_timeout), the QPs' ACK timeout is the longest of which
    // retry_count + 1 fit in it (verbs::default_ack_timeout), so that a
    // lost packet is resent, and one lost on every resend fails the QP,
    // before the worker gives railgated up.
    std::chrono::milliseconds peer_timeout{1000};
    // A rail's connect: at most connect_timeout in all, in attempts of
    // connect_attempt, then each twice the last (verbs::connect_attempts:
    // 1, 2 and 2 s), since rdma_cm resends a lost connection MAD only
    // after about 4 s. Each attempt that got no answer is told to
    // on_connect_retry (if set) before the next.
    std::chrono::milliseconds connect_timeout{5000};
    std::chrono::milliseconds connect_attempt{1000};
    std::function<void(const std::string&)> on_connect_retry;
    // Offer railgated an eager ring per rail (RAILGATE_VERBS_LL=0 in the
    // environment turns it off, as it may for an A/B or an HCA that
    // reorders a WRITE's 8-byte words).
    bool eager_rings = true;
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
    // "REGION had (1), 2 of 8 slots out, 3 sends posted and not yet
    // completed, 0 control sends in flight, QP RTS" (and the rail's
    // completion error, if any).
    std::string describe(unsigned rail) const override;
    // RDMA writes into railgated's slots: any chunk the protocol has.
    std::size_t max_message_bytes() const noexcept override { return wire::header_bytes + wire::max_chunk_bytes; }

    // For tests and protocol tools: an RDMA WRITE_WITH_IMM of `bytes` bytes
    // of slot `slot`'s buffer into railgated's slot `slot` with an arbitrary
    // immediate. Returns false when the rail is not ready.
    bool write_raw(unsigned rail, unsigned slot, std::uint32_t imm, std::uint32_t bytes) noexcept;
    // The same through rail `rail`'s eager ring: the next entry, holding
    // `imm` and a length word of `len` with `bytes` payload bytes of slot
    // `slot`'s buffer (len is what the entry claims: it may lie). False
    // when the rail has no eager ring or is not ready.
    bool write_raw_eager(unsigned rail, unsigned slot, std::uint32_t imm, std::uint32_t len,
                         std::uint32_t bytes) noexcept;
    // Railgated's memory rail `rail` writes into: this worker's contribution
    // region (its REGION), or with `ring` its eager ring. False when there
    // is none (yet).
    bool peer_memory(unsigned rail, bool ring, wire::region_body& out) const noexcept;
    // This worker's memory railgated writes results into on rail `rail`
    // (what its REGION names). False before the first JOIN_ACK.
    bool own_memory(unsigned rail, wire::region_body& out) const noexcept;
    // For the isolation probe: a plain RDMA WRITE of `bytes` bytes of slot
    // 0's buffer to any address with any rkey. False when not ready.
    bool write_raw_to(unsigned rail, const wire::region_body& to, std::uint32_t bytes) noexcept;
    // How many REGIONs railgated has sent on rail `rail` (each JOIN it
    // takes is answered with a JOIN_ACK and a REGION).
    std::uint64_t regions_received(unsigned rail) const noexcept;
    // Whether rail `rail` carries small chunks through eager rings.
    bool eager(unsigned rail) const noexcept;
    // The GID index and path MTU rail 0's QP uses.
    int gid_index() const noexcept;
    unsigned path_mtu() const noexcept;
    // The RC timers rail 0's QP took (verbs::describe prints them).
    verbs::qp_timers qp_timers() const noexcept;

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
