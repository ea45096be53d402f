/* The contract between railgate's XDP program (railgate_xdp.c, BPF) and
 * railgated (xdp_steer.cpp): map names, the config record and the counter
 * reasons. Plain C with fixed-width types so both compilers agree on the
 * layout. */
#ifndef RAILGATE_XDP_ABI_H
#define RAILGATE_XDP_ABI_H

#include <linux/types.h>

/* BPF object names are at most 15 characters. */
#define RG_XDP_PROG_NAME "railgate_xdp"
#define RG_XDP_CFG_MAP "rg_xdp_cfg"
#define RG_XDP_STATS_MAP "rg_xdp_stats"
/* The af_xdp PMD looks this map up by name and puts its sockets in it. */
#define RG_XDP_XSK_MAP "xsks_map"
#define RG_XDP_MAX_QUEUES 64

/* Written by railgated once its sockets are bound. Until then (enabled 0)
 * the program passes every packet to the kernel. */
struct rg_xdp_config {
    __u32 enabled;
    __u32 owner_pid;  /* railgated's pid: lets a restart detect a stale program */
    __u32 addr;       /* the rail's IPv4 address, network order */
    __u16 udp_port;   /* network order */
    __u8 version;     /* railgate wire protocol version */
    __u8 pad;
};

/* One per-CPU counter per verdict reason. Keep rg_xdp_reason_name() in
 * xdp_steer.cpp in the same order. */
enum rg_xdp_reason {
    RG_XDP_REDIRECT = 0,      /* railgate packet, into the rail's XSK */
    RG_XDP_PASS_UNCONFIGURED, /* railgated has not configured the program yet */
    RG_XDP_PASS_NO_XSK,       /* railgate packet, but no socket on this queue */
    RG_XDP_PASS_ARP,
    RG_XDP_PASS_VLAN,         /* 802.1Q/802.1ad tagged: the kernel's VLAN devices own it */
    RG_XDP_PASS_OTHER_L3,     /* IPv6 and every other ethertype */
    RG_XDP_PASS_MALFORMED,    /* too short for its Ethernet/IPv4/UDP headers */
    RG_XDP_PASS_FRAGMENT,
    RG_XDP_PASS_ICMP,
    RG_XDP_PASS_TCP,
    RG_XDP_PASS_OTHER_L4,
    RG_XDP_PASS_OTHER_ADDR,   /* not the rail's address */
    RG_XDP_PASS_OTHER_PORT,   /* UDP to another port */
    RG_XDP_DROP_SHORT,        /* to railgate's port, shorter than a railgate header */
    RG_XDP_DROP_BAD_LENGTH,   /* IPv4/UDP lengths disagree with the frame */
    RG_XDP_DROP_BAD_VERSION,  /* railgate header with another protocol version */
    RG_XDP_REASONS
};

#define RG_XDP_ETH_HLEN 14
#define RG_XDP_UDP_HLEN 8
#define RG_XDP_RG_HLEN 40 /* wire::header_bytes */

#endif
