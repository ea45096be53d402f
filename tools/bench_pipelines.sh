#!/usr/bin/env bash
# Worker pipelines: railbench over kernel UDP through railgated's 2 af_packet
# rails (one veth each), 2 workers in another namespace, each worker either
# driving both rails from its one thread or with one pipeline per rail on
# the TBB engine (--rail-threads); the two modes alternated ROUNDS times in
# one run. Prints each run's bus bandwidth, the medians and their ratio.
# Root only; traffic stays in two network namespaces this script creates.
#   tools/bench_pipelines.sh [BUILD_DIR] [ROUNDS] [SIZE]
set -u
build=${1:-build} rounds=${2:-5} size=${3:-4M}
railgated=$build/dataplane/railgated railbench=$build/tools/railbench
. "$(dirname "$0")/ab_rounds.sh"
ab_namespaces p
ab_two_rails rgp rgq
ab_gated "$railgated" rgp

run() { # MODE JOB -> prints busbw GB/s
  local flag=()
  [ "$1" = pipelines ] && flag=(--rail-threads)
  local pids=()
  for rank in 0 1; do
    ip netns exec "$w" timeout 120 "$railbench" --transport udp --server 198.18.0.1 --rank $rank --workers 2 \
      -b "$size" -e "$size" -n 20 -w 3 --job "$2" "${flag[@]}" > "$log/b$rank" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  grep -q "Out of bounds values : 0 OK" "$log/b0" || { echo "wrong values in $1 run" >&2; cat "$log/b0" >&2; exit 1; }
  awk '/Avg bus bandwidth/ {print $(NF-1)}' "$log/b0"
}

echo "# 2 af_packet rails, 2 UDP workers, $size allreduce, $rounds rounds alternating"
ab_rounds "$rounds" serial pipelines
s=$AB_A p=$AB_B
printf "median busbw: one thread %s GB/s, one pipeline per rail %s GB/s, ratio %.3f\n" "$s" "$p" \
  "$(awk -v s="$s" -v p="$p" 'BEGIN {print p / s}')"
