/* railgate's XDP steering program for af_xdp rails.
 *
 * The af_xdp PMD loads this object (devarg xdp_prog=) and binds its socket in
 * xsks_map; railgated then fills rg_xdp_cfg. Railgate packets (IPv4/UDP to
 * the rail's address and port) go to the rail's XSK; everything else (ARP,
 * ICMP, TCP, other ports and addresses) goes to the kernel, which owns the
 * rail's address. Railgate packets that cannot be valid are dropped here.
 * Every verdict is counted by reason in rg_xdp_stats (per CPU).
 *
 * Built by meson with clang -target bpf; see xdp_abi.h for the contract. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "xdp_abi.h"

struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, RG_XDP_MAX_QUEUES);
    __type(key, __u32);
    __type(value, __u32);
} xsks_map SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct rg_xdp_config);
} rg_xdp_cfg SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, RG_XDP_REASONS);
    __type(key, __u32);
    __type(value, __u64);
} rg_xdp_stats SEC(".maps");

static __always_inline int verdict(__u32 reason, int action) {
    __u64* n = bpf_map_lookup_elem(&rg_xdp_stats, &reason);
    if (n) *n += 1;
    return action;
}

SEC("xdp")
int railgate_xdp(struct xdp_md* ctx) {
    const void* data = (void*)(long)ctx->data;
    const void* end = (void*)(long)ctx->data_end;
    const __u32 zero = 0;
    const struct rg_xdp_config* cfg = bpf_map_lookup_elem(&rg_xdp_cfg, &zero);
    if (!cfg || !cfg->enabled) return verdict(RG_XDP_PASS_UNCONFIGURED, XDP_PASS);

    const struct ethhdr* eth = data;
    if ((const void*)(eth + 1) > end) return verdict(RG_XDP_PASS_MALFORMED, XDP_PASS);
    const __u16 proto = eth->h_proto;
    if (proto == bpf_htons(ETH_P_ARP)) return verdict(RG_XDP_PASS_ARP, XDP_PASS);
    if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD))
        return verdict(RG_XDP_PASS_VLAN, XDP_PASS);
    if (proto != bpf_htons(ETH_P_IP)) return verdict(RG_XDP_PASS_OTHER_L3, XDP_PASS);

    const struct iphdr* ip = (const void*)(eth + 1);
    if ((const void*)(ip + 1) > end) return verdict(RG_XDP_PASS_MALFORMED, XDP_PASS);
    const __u32 ihl = ip->ihl * 4u;
    if (ip->version != 4 || ihl < sizeof(*ip)) return verdict(RG_XDP_PASS_MALFORMED, XDP_PASS);
    if (ip->daddr != cfg->addr) return verdict(RG_XDP_PASS_OTHER_ADDR, XDP_PASS);
    if (ip->frag_off & bpf_htons(0x3fff)) return verdict(RG_XDP_PASS_FRAGMENT, XDP_PASS);
    if (ip->protocol == IPPROTO_ICMP) return verdict(RG_XDP_PASS_ICMP, XDP_PASS);
    if (ip->protocol == IPPROTO_TCP) return verdict(RG_XDP_PASS_TCP, XDP_PASS);
    if (ip->protocol != IPPROTO_UDP) return verdict(RG_XDP_PASS_OTHER_L4, XDP_PASS);

    /* ihl is 20..60: IP options are allowed, as railgated allows them. */
    const struct udphdr* udp = (const void*)ip + ihl;
    if ((const void*)(udp + 1) > end) return verdict(RG_XDP_PASS_MALFORMED, XDP_PASS);
    if (udp->dest != cfg->udp_port) return verdict(RG_XDP_PASS_OTHER_PORT, XDP_PASS);

    /* From here on the packet is railgate's: invalid ones stop here. */
    const __u8* rg = (const void*)(udp + 1);
    if ((const void*)(rg + RG_XDP_RG_HLEN) > end) return verdict(RG_XDP_DROP_SHORT, XDP_DROP);
    const __u32 frame = (__u32)(end - data);
    const __u32 ip_len = bpf_ntohs(ip->tot_len), udp_len = bpf_ntohs(udp->len);
    if (ip_len > frame - RG_XDP_ETH_HLEN || ip_len < ihl + RG_XDP_UDP_HLEN + RG_XDP_RG_HLEN ||
        udp_len != ip_len - ihl)
        return verdict(RG_XDP_DROP_BAD_LENGTH, XDP_DROP);
    if (rg[0] != cfg->version) return verdict(RG_XDP_DROP_BAD_VERSION, XDP_DROP);

    const __u32 q = ctx->rx_queue_index;
    if (!bpf_map_lookup_elem(&xsks_map, &q)) return verdict(RG_XDP_PASS_NO_XSK, XDP_PASS);
    verdict(RG_XDP_REDIRECT, XDP_REDIRECT);
    return bpf_redirect_map(&xsks_map, q, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
