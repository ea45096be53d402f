#!/usr/bin/env bash
# railbench throughput through one af_xdp rail with railgate's XDP steering
# program and without it (--no-xdp-steer: the PMD's own program sends every
# packet to the rail), alternating the two modes ROUNDS times in one run.
# Prints each run's bus bandwidth, the medians and their ratio. Root only;
# traffic stays in two network namespaces this script creates.
#   tools/bench_af_xdp.sh [BUILD_DIR] [ROUNDS] [SIZE]
set -u
build=${1:-build} rounds=${2:-5} size=${3:-4M}
railgated=$build/dataplane/railgated railbench=$build/tools/railbench
. "$(dirname "$0")/ab_rounds.sh"
ab_namespaces b
ip link add rgb0 netns "$d" type veth peer name rgw0 netns "$w"
ip -n "$d" addr add 198.18.0.1/24 dev rgb0
ip -n "$w" addr add 198.18.0.10/24 dev rgw0
ip -n "$d" link set rgb0 up; ip -n "$w" link set rgw0 up; ip -n "$w" link set lo up
ip netns exec "$w" ethtool -K rgw0 tx off > /dev/null # UDP checksums in full (railgated verifies them)

run() { # MODE ROUND -> prints busbw GB/s
  local mode=$1 flag=""
  [ "$mode" = plain ] && flag=--no-xdp-steer
  ip netns exec "$d" "$railgated" --socket "$log/rg.sock" --metrics off --rail net_af_xdp0,iface=rgb0 --ip 198.18.0.1 $flag \
    -- --no-huge --no-pci --no-shconf --no-telemetry -l 0-1 -m 512 --log-level lib.eal:error > "$log/g" 2>&1 &
  gated=$!
  for _ in $(seq 150); do grep -q "railgated: ready" "$log/g" && break; sleep 0.1; done
  local pids=()
  for rank in 0 1; do
    ip netns exec "$w" timeout 120 "$railbench" --transport udp --server 198.18.0.1 --rank $rank --workers 2 \
      -b "$size" -e "$size" -n 20 -w 3 --job "$2" > "$log/b$rank" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  kill -INT "$gated"; wait "$gated"; gated=
  grep -q "Out of bounds values : 0 OK" "$log/b0" || { echo "wrong values in $mode run" >&2; tail -n 5 "$log/b0" "$log/g" >&2; exit 1; }
  awk '/Avg bus bandwidth/ {print $(NF-1)}' "$log/b0"
}

echo "# af_xdp rail, 2 UDP workers, $size allreduce, $rounds rounds alternating"
ab_rounds "$rounds" steer plain
s=$AB_A p=$AB_B
printf "median busbw: with XDP steering %s GB/s, without %s GB/s, ratio %.3f\n" "$s" "$p" \
  "$(awk -v s="$s" -v p="$p" 'BEGIN {print s / p}')"
