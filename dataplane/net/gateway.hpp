// Gateway forwarding inside railgated's rail loop (internal to
// dataplane/net): a datagram sent to a rail's MAC for another address is
// looked up in the routes (fib), its TTL decremented, and handed to the out
// rail, which resolves the next hop by ARP and sends it through its
// traffic-class scheduler. The rail loop calls these; each runs on the lcore
// that serves `rs`.
#pragma once

#include "dataplane/net/tx.hpp"

namespace railgate::net::detail {

// A frame classified `forward` on rs: routed into rs's burst (flush_routed
// hands the burst on), or dropped and counted, with an ICMP error where a
// router sends one.
void route(rail_state& rs, rte_mbuf* m, const frame::info& fi) noexcept;
// Hands the burst's routed datagrams to their out rails: directly when this
// lcore serves the out rail too, else through its ring.
void flush_routed(rail_state& rs) noexcept;
// Sends what other rails routed out of rs, and runs rs's ARP timers.
// Returns whether there was any.
bool pull_routed(rail_state& rs) noexcept;
// What ARP told rs about ip (a request to it, or a reply): frames waiting
// for it leave. `make`: learn it even if rs has no entry yet.
void learn_neighbour(rail_state& rs, std::uint32_t ip, const frame::mac_addr& mac, bool make) noexcept;

} // namespace railgate::net::detail
