#!/usr/bin/env bash
# The kernel-UDP transport's offloads, A/B: railbench workers over kernel
# UDP through railgated's 2 af_packet rails (one veth each, at MTU), with
# VAR=0 (RAILGATE_UDP_GRO: no UDP GRO on receive; RAILGATE_UDP_GSO: no UDP
# GSO on send) alternated with the default, ROUNDS times in one run.
# The workers' veths do GRO in a NAPI thread (gro_veth; AB_GRO=0: plain
# veths, where GRO coalesces next to nothing). Prints each run's bus
# bandwidth and the datagrams the workers received coalesced, the medians
# and the ratio (default / VAR=0). Root only; traffic stays in two
# namespaces this script creates.
#   tools/bench_udp.sh [BUILD_DIR] [ROUNDS] [SIZE] [MTU] [VAR] [WORKERS]
set -u
build=${1:-build} rounds=${2:-3} size=${3:-64M} mtu=${4:-9000} var=${5:-RAILGATE_UDP_GRO} workers=${6:-2}
railgated=$build/dataplane/railgated railbench=$build/tools/railbench
case $var in RAILGATE_UDP_GRO | RAILGATE_UDP_GSO) ;; *) echo "VAR: RAILGATE_UDP_GRO or RAILGATE_UDP_GSO" >&2; exit 2 ;; esac
. "$(dirname "$0")/ab_rounds.sh"
AB_GRO=${AB_GRO:-1}
ab_namespaces u
ab_two_rails rgu rgv "$mtu"
ab_gated "$railgated" rgu "$mtu"

run() { # MODE JOB -> prints busbw GB/s; coalesced datagrams to $log/extra-MODE
  local bw
  [ "$1" = off ] && export "$var=0" || export "$var=1"
  bw=$(ab_workers "$w" "$workers" "$size" 5 "$2") || exit 1
  awk '/arrived coalesced/ {s += $4} END {print s + 0}' "$log"/b* >> "$log/extra-$1"
  echo "$bw"
}

echo "# $workers kernel-UDP workers, 2 af_packet rails at MTU $mtu, $size allreduce, $var=0 (off) against the default (on), $rounds rounds alternating"
ab_rounds "$rounds" off on
for m in off on; do
  printf "  %-3s datagrams received coalesced (all workers, median run) %s\n" "$m" "$(median < "$log/extra-$m")"
done
printf "median busbw: %s=0 %s GB/s, default %s GB/s, ratio %.3f\n" "$var" "$AB_A" "$AB_B" \
  "$(awk -v a="$AB_A" -v b="$AB_B" 'BEGIN {print b / a}')"
