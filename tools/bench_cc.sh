#!/usr/bin/env bash
# Congestion control on the kernel-UDP path: railbench workers over kernel
# UDP through railgated's 2 af_packet rails (one veth each, MTU 1500), the
# workers' side of each rail shaped by HTB to RATE (or not: RATE none), the
# workers' window either the slot pool (--cc off) or controlled (MODE:
# --cc delay, the default, or --cc queue), alternated ROUNDS times in one
# run. Prints each run's bus bandwidth, retransmits and median chunk round
# trip, the medians and the ratios. Root only; traffic stays in two
# namespaces this script creates.
#   tools/bench_cc.sh [BUILD_DIR] [ROUNDS] [WORKERS] [RATE] [SIZE] [MODE]
set -u
build=${1:-build} rounds=${2:-3} workers=${3:-2} rate=${4:-200mbit} size=${5:-4M} mode=${6:-delay}
case $mode in delay | queue) ;; *) echo "MODE: delay or queue" >&2; exit 2 ;; esac
railgated=$build/dataplane/railgated railbench=$build/tools/railbench
. "$(dirname "$0")/ab_rounds.sh"
ab_namespaces c
ab_two_rails rgc rgk
if [ "$rate" != none ]; then
  for r in 0 1; do
    ip netns exec "$w" tc qdisc add dev "rgk$r" root handle 1: htb default 1 &&
      ip netns exec "$w" tc class add dev "rgk$r" parent 1: classid 1:1 htb rate "$rate" quantum 9000 || exit 1
  done
fi
ab_gated "$railgated" rgc

run() { # MODE JOB -> prints busbw GB/s; retransmits and the median round trip to $log/extra-MODE
  local bw retx p50
  bw=$(ab_workers "$w" "$workers" "$size" 5 "$2" --cc "$1") || exit 1
  retx=$(awk '$2 == "retransmits" {sub(/,/, "", $3); s += $3} END {print s + 0}' "$log"/b*)
  p50=$(awk '/t_typical/ {print $5; exit}' "$log/b0") # the whole round trip's
  echo "$retx $p50" >> "$log/extra-$1"
  echo "$bw"
}

echo "# $workers kernel-UDP workers, 2 af_packet rails shaped to $rate (HTB), $size allreduce, $rounds rounds alternating"
ab_rounds "$rounds" off "$mode"
for m in off "$mode"; do
  printf "  %-5s retransmits (all workers) median %s, chunk round trip p50 median %s us\n" "$m" \
    "$(cut -d' ' -f1 "$log/extra-$m" | median)" "$(cut -d' ' -f2 "$log/extra-$m" | median)"
done
printf "median busbw: --cc off %s GB/s, --cc %s %s GB/s, ratio %.3f\n" "$AB_A" "$mode" "$AB_B" \
  "$(awk -v a="$AB_A" -v b="$AB_B" 'BEGIN {print b / a}')"
