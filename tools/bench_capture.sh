#!/usr/bin/env bash
# What a running `railctl capture` costs a job: 2 railbench workers over
# kernel UDP through railgated's 2 af_packet rails (MTU 1500), 4 MiB fp32,
# with no capture and with `railctl capture r0,r1 --rx --tx` writing pcapng,
# alternated ROUNDS times in one run. Prints each run's bus bandwidth, the
# medians and the ratio (capture on / off). Root only; traffic stays in two
# namespaces this script creates.
#   tools/bench_capture.sh [BUILD_DIR] [ROUNDS] [SIZE]
set -u
build=${1:-build} rounds=${2:-5} size=${3:-4M}
railgated=$build/dataplane/railgated railbench=$build/tools/railbench railctl=$build/railctl
. "$(dirname "$0")/ab_rounds.sh"
ab_namespaces p
ab_two_rails rgp rgq
ab_gated "$railgated" rgp

run() { # MODE JOB -> prints busbw GB/s
  local bw cap=
  if [ "$1" = on ]; then
    ip netns exec "$d" "$railctl" --socket "$log/rg.sock" capture r0,r1 --rx --tx -w "$log/c.pcapng" 2> "$log/cap" &
    cap=$!
    for _ in $(seq 100); do grep -q capturing "$log/cap" && break; sleep 0.05; done
    grep -q capturing "$log/cap" || { echo "the capture did not start: $(cat "$log/cap")" >&2; exit 1; }
  fi
  bw=$(ab_workers "$w" 2 "$size" 8 "$2") || exit 1
  if [ -n "$cap" ]; then
    kill -INT "$cap"
    wait "$cap" || { echo "railctl capture failed: $(cat "$log/cap")" >&2; exit 1; }
    rm -f "$log/c.pcapng"
  fi
  echo "$bw"
}

echo "# 2 kernel-UDP workers, 2 af_packet rails (MTU 1500), $size allreduce, railctl capture off/on, $rounds rounds alternating"
ab_rounds "$rounds" off on
printf "median busbw: capture off %s GB/s, on %s GB/s, ratio %.3f\n" "$AB_A" "$AB_B" \
  "$(awk -v a="$AB_A" -v b="$AB_B" 'BEGIN {print b / a}')"
