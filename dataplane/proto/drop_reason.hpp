// Every reason railgated drops a received frame, counted per rail.
#pragma once

#include <cstdint>
#include <string_view>

namespace railgate {

#define RAILGATE_DROP_REASONS(X)                                              \
    X(rx_segmented, "frame received in several mbufs")                       \
    X(eth_truncated, "frame shorter than an Ethernet header")                \
    X(ethertype, "not IPv4 or ARP")                                           \
    X(arp_malformed, "ARP that is not Ethernet/IPv4")                         \
    X(arp_not_ours, "ARP for an address this rail does not own")              \
    X(arp_reply_ignored, "ARP reply nobody asked for")             \
    X(ip_truncated, "IPv4 header or total length beyond the frame")           \
    X(ip_bad_header, "IPv4 version or header length invalid")                 \
    X(ip_bad_checksum, "IPv4 header checksum wrong")                          \
    X(ip_fragment, "IPv4 fragment")                                           \
    X(ip_not_ours, "IPv4 destination is not this rail (nor routed)")                       \
    X(ip_proto, "IPv4 protocol other than UDP or ICMP")                       \
    X(icmp_ignored, "ICMP other than a valid echo request")                   \
    X(udp_truncated, "UDP header or length beyond the IPv4 payload")          \
    X(udp_port, "UDP destination port is not railgate's")                     \
    X(rg_truncated, "shorter than the railgate header")                       \
    X(rg_version, "unsupported protocol version")                             \
    X(rg_type, "message type unknown or not sent by workers")                 \
    X(rg_flags, "reserved flag bits set")                                     \
    X(rg_dtype, "dtype unknown")                                              \
    X(rg_world, "world size 0 or above the maximum")                          \
    X(rg_rank, "rank not below world size")                                   \
    X(rg_count_zero, "contribution with no elements")                         \
    X(rg_count_exceeds_payload, "element count larger than the payload")      \
    X(rg_payload_trailing, "payload longer than the element count")           \
    X(rg_offset_range, "offset + count beyond the tensor bound")              \
    X(rg_body, "JOIN or REGION body malformed")                               \
    X(udp_checksum, "UDP checksum missing or wrong")                          \
    X(checksum_partner, "intact, but reduced in place with a corrupted one of its slot; sent again") \
    X(rg_rtt_body, "RTT report empty or body not count entries long")         \
    X(rtt_bucket, "RTT report names a histogram bucket out of range")        \
    X(unknown_job, "no such job on this rail")                                \
    X(bad_token, "job token does not match")                                  \
    X(world_mismatch, "world size differs from the job's")                    \
    X(dtype_mismatch, "dtype differs from the job's")                         \
    X(rank_not_joined, "rank has not joined this job on this rail")           \
    X(not_member, "sender is not where the rank joined from")                \
    X(slot_range, "slot index not below the pool size")                       \
    X(count_range, "count larger than the rail's chunk")                      \
    X(job_offset_range, "offset + count beyond the job's max_count")          \
    X(chunk_misaligned, "offset not a multiple of the job's chunk")           \
    X(wrong_rail_or_slot, "striping puts this chunk on another rail or slot") \
    X(chunk_mismatch, "offset, count or dtype differ from the slot's chunk")  \
    X(bad_generation, "slot generation neither current nor previous")         \
    X(duplicate, "rank already contributed to this slot")                     \
    X(stale_no_result, "retransmit for a result no longer kept")              \
    X(job_table_full, "JOIN refused: no free job entry")                      \
    X(join_refused, "JOIN refused: conflicts with the job")                   \
    X(leave_unknown, "LEAVE or abort for an unknown job, rank or token")      \
    X(region_missing, "verbs chunk before the worker's REGION")              \
    X(region_small, "verbs REGION smaller than pool * chunk")                \
    X(verbs_length, "verbs chunk length not whole elements of the chunk")    \
    X(no_mbuf, "mbuf pool exhausted while building a reply")                  \
    X(tx_full, "transmit queue full, frame freed")                           \
    X(tc_queue_full, "shaped rail: the frame's traffic-class queue is full")  \
    X(no_route, "gateway: no route to the destination")                      \
    X(ttl_expired, "gateway: TTL ran out (ICMP time exceeded sent)")          \
    X(fwd_too_big, "gateway: datagram larger than the out rail's MTU")       \
    X(fwd_queue_full, "gateway: the out rail's forward queue is full")        \
    X(neighbour_unresolved, "gateway: next hop unanswered or too many waiting") \
    X(fault_injected, "dropped by the fault injector (--fault, railctl fault)") \
    X(udp_rail_oversize, "udp rail: datagram larger than the rail's buffers") \
    X(udp_rail_refused, "udp rail: not a datagram from the rail, or the kernel refused it") \
    X(udp_rail_no_mbuf, "udp rail: mbuf pool exhausted while cutting a coalesced (GRO) message")

enum class drop_reason : std::uint8_t {
#define RAILGATE_X(name, text) name,
    RAILGATE_DROP_REASONS(RAILGATE_X)
#undef RAILGATE_X
    count_,
    none = 0xff,
};

inline constexpr unsigned drop_reason_count = static_cast<unsigned>(drop_reason::count_);

std::string_view drop_reason_name(drop_reason r) noexcept;
std::string_view drop_reason_text(drop_reason r) noexcept;

} // namespace railgate
