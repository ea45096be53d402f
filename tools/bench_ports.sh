#!/usr/bin/env bash
# Which DPDK port should face kernel-UDP workers on the same host: two
# kinds of railgated rail alternated ROUNDS times in one run, WORKERS
# railbench workers over kernel UDP, 2 rails at MTU, SIZE allreduce.
#   tap        net_tap rails, the workers in railgated's namespace on the
#              taps' kernel side (railgated's embedded default)
#   af_packet  net_af_packet (PACKET_MMAP rings) on one end of a veth per
#              rail, the workers in another namespace on the other end
#   af_xdp     net_af_xdp (copy mode) on the same veths; MTU 1500 (its
#              umem cannot be made for larger frames here)
#   udp        udp rails (transport = "udp": the kernel's UDP socket on
#              each rail's address, which railgated's veth ends have), the
#              workers' veth ends checksumming as veths do by default (a
#              DPDK port on the veth needs them to checksum in software)
#   udp-nogro  udp rails whose sockets do not take UDP GRO
#              (RAILGATE_UDP_GRO=0 for railgated: each datagram of a
#              worker's UDP GSO message is received on its own)
# railgated starts afresh for every run. Prints each run's bus bandwidth,
# the medians and the ratio (B / A). Root only; traffic stays in the
# namespaces this script creates.
#   tools/bench_ports.sh [BUILD_DIR] [ROUNDS] [SIZE] [MTU] [KIND_A] [KIND_B] [WORKERS]
set -u
build=${1:-build} rounds=${2:-3} size=${3:-4M} mtu=${4:-1500} a=${5:-tap} b=${6:-af_packet} workers=${7:-2}
src=$(cd "$(dirname "$0")/.." && pwd)
railgated=$build/dataplane/railgated railbench=$build/tools/railbench
case $mtu in 1500 | 9000) ;; *) echo "MTU: 1500 or 9000" >&2; exit 2 ;; esac
[ "$mtu" = 9000 ] && [ "$a" = tap ] && { echo "tap: net_tap carries MTU 1500 at most" >&2; exit 2; }
for k in "$a" "$b"; do
  case $k in tap | af_packet | udp | udp-nogro) ;; af_xdp) [ "$mtu" -le 1500 ] || { echo "af_xdp: MTU up to 1500" >&2; exit 2; } ;;
    *) echo "KIND: tap, af_packet, af_xdp, udp or udp-nogro" >&2; exit 2 ;; esac
done
. "$(dirname "$0")/ab_rounds.sh"
ab_namespaces k
t=rgkt$$
ip netns add "$t" && ip -n "$t" link set lo up || exit 1
ab_two_rails rgk rgl "$mtu"
# The embedded default's configuration until 2026-11-24: tap rails (made
# from local-af_packet.toml, the one after it).
sed -e 's/^devargs = "net_af_packet\([01]\),.*/devargs = "net_tap\1,iface=rgt\1"/' -e '/^veth_peer = /d' \
  "$src/config/local-af_packet.toml" > "$log/tap.toml"
grep -q '^devargs = "net_tap1,iface=rgt1"' "$log/tap.toml" || { echo "bench_ports.sh: config/local-af_packet.toml changed shape" >&2; exit 1; }

run() { # KIND JOB -> prints busbw GB/s
  local ns=$w bw
  case $1 in
    tap) ab_start "$t" "$railgated" --config "$log/tap.toml" --socket "$log/rg.sock" --metrics off; ns=$t ;;
    af_packet) ab_gated "$railgated" rgk "$mtu" ;;
    af_xdp) # railgate's XDP program leaves ARP to the kernel, which must own the address
      for r in 0 1; do ip -n "$d" addr add "198.18.$r.1/24" dev "rgk$r"; done
      ab_start "$d" "$railgated" --socket "$log/rg.sock" --metrics off \
        --rail net_af_xdp0,iface=rgk0 --ip 198.18.0.1 --mtu "$mtu" --rail net_af_xdp1,iface=rgk1 --ip 198.18.1.1 --mtu "$mtu" \
        -- $test_eal_flags ;;
    udp | udp-nogro)
      for r in 0 1; do
        ip -n "$d" addr add "198.18.$r.1/24" dev "rgk$r"
        ip netns exec "$w" ethtool -K "rgl$r" tx on > /dev/null
      done
      ab_start "$d" env RAILGATE_UDP_GRO="$([ "$1" = udp ] && echo 1 || echo 0)" "$railgated" --socket "$log/rg.sock" --metrics off \
        --rail udp --ip 198.18.0.1 --mtu "$mtu" --rail udp --ip 198.18.1.1 --mtu "$mtu" -- $test_eal_flags ;;
  esac
  bw=$(ab_workers "$ns" "$workers" "$size" 10 "$2") || { tail -n 5 "$log/g" >&2; exit 1; }
  kill -INT "$gated"; wait "$gated"; gated=
  case $1 in af_xdp | udp*) for r in 0 1; do ip -n "$d" addr del "198.18.$r.1/24" dev "rgk$r"; done ;; esac
  case $1 in udp*) for r in 0 1; do ip netns exec "$w" ethtool -K "rgl$r" tx off > /dev/null; done ;; esac
  echo "$bw"
}

echo "# $workers kernel-UDP workers, 2 rails at MTU $mtu, $size allreduce: $a against $b, $rounds rounds alternating"
ab_rounds "$rounds" "$a" "$b"
printf "median busbw: %s %s GB/s, %s %s GB/s, ratio %.3f\n" "$a" "$AB_A" "$b" "$AB_B" \
  "$(awk -v x="$AB_A" -v y="$AB_B" 'BEGIN {print y / x}')"
