#!/usr/bin/env bash
# Multi-process integration: railgated on 2 af_packet rails, each over its own
# veth pair into a worker namespace; 3 railbench worker processes over kernel
# UDP. Element counts that are multiples of nothing, every dtype, MTU 1500
# and 9000, workers serial, paced, with one pipeline per rail, and with the
# delay-based window (fp32; rank 2 there without UDP GSO); results must be
# bit-exact. The workers' rail-0 veth does GRO (rail 1's does not): at each
# MTU rank 0 must receive results coalesced (UDP GRO) and cut them apart
# right, while rank 1 of the fp16 run, without UDP GRO (RAILGATE_UDP_GRO=0),
# receives none coalesced.
# Namespaces are removed on any exit.
#   two_rails.sh RAILGATED RAILBENCH
set -u
railgated=$1 railbench=$2
. "$(dirname "$0")/lib.sh"
require_netns

d=rgd$$ w=rgw$$ log=$(mktemp -d)
gated_pid=
cleanup() {
  [ -n "$gated_pid" ] && kill "$gated_pid" 2>/dev/null && wait "$gated_pid" 2>/dev/null
  ip netns del "$d" 2>/dev/null
  ip netns del "$w" 2>/dev/null
  rm -rf "$log"
}
trap cleanup EXIT

two_rail_netns "$d" "$w"
gro_veth "$w" rgw0 "$d" rgd0 || fail "GRO on rgw0" # rail 0 coalesces results, rail 1 does not

start_gated() { # MTU
  local mtu=$1 fs=2048 bs=4096
  [ "$mtu" -gt 1500 ] && fs=10240 bs=20480
  for r in 0 1; do
    ip -n "$d" link set "rgd$r" mtu "$mtu"
    ip -n "$w" link set "rgw$r" mtu "$mtu"
  done
  ip netns exec "$d" "$railgated" --socket "$log/railgated.sock" \
    --rail "net_af_packet0,iface=rgd0,framesz=$fs,blocksz=$bs,framecnt=1024" --ip 198.18.0.1 --mtu "$mtu" \
    --rail "net_af_packet1,iface=rgd1,framesz=$fs,blocksz=$bs,framecnt=1024" --ip 198.18.1.1 --mtu "$mtu" \
    -- $test_eal_flags > "$log/railgated-$mtu.log" 2>&1 &
  gated_pid=$!
  wait_ready "$log/railgated-$mtu.log"
  # railgated answers ARP and ping for its rail addresses.
  for r in 0 1; do
    ip netns exec "$w" ping -c 1 -W 2 "198.18.$r.1" > "$log/ping-$mtu-$r.log" 2>&1 || fail "ping rail $r at MTU $mtu"
  done
}

# Datagrams the workers' logs say arrived coalesced (UDP GRO), summed.
coalesced() { sed -n 's/^# udp receive: \([0-9]*\) datagrams arrived coalesced.*/\1/p' "$@" | awk '{s += $1} END {print s + 0}'; }

job=1
for mtu in 1500 9000; do
  start_gated "$mtu"
  for dt in fp32 bf16 fp16 int32; do
    # bf16 and int32: one pipeline per rail (TBB engine) on every worker;
    # fp16: paced workers; fp32: the delay-based window (ECN-capable, with
    # railgated's echo).
    extra=()
    case $dt in bf16|int32) extra=(--rail-threads) ;; fp16) extra=(--pace 400Mbit) ;; fp32) extra=(--cc delay) ;; esac
    pids=()
    if [ "$dt" = int32 ]; then
      # As mpirun and srun start them: no --rank, no --workers, each rank
      # from a different launcher's variables; rank 0 reports JSON.
      launch=("env OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=3" "env PMI_RANK=1 PMI_SIZE=3"
              "env SLURM_PROCID=2 SLURM_NTASKS=3")
      for rank in 0 1 2; do
        out=(); [ $rank = 0 ] && out=(--json)
        # shellcheck disable=SC2086
        timeout 120 ip netns exec "$w" ${launch[$rank]} "$railbench" --transport udp --server 198.18.0.1 \
          --dtype int32 --count 1000003,4097,1 -n 2 -w 0 --job "$job" "${extra[@]}" "${out[@]}" \
          > "$log/bench-$mtu-$dt-$rank.out" 2> "$log/bench-$mtu-$dt-$rank.log" &
        pids+=($!)
      done
    else
      for rank in 0 1 2; do
        offload=()
        [ "$dt" = fp32 ] && [ "$rank" = 2 ] && offload=(env RAILGATE_UDP_GSO=0) # one datagram per send
        [ "$dt" = fp16 ] && [ "$rank" = 1 ] && offload=(env RAILGATE_UDP_GRO=0) # one datagram per receive
        timeout 120 ip netns exec "$w" "${offload[@]}" "$railbench" --transport udp --server 198.18.0.1 --rank "$rank" \
          --workers 3 --dtype "$dt" --count 1000003,4097,1 -n 2 -w 0 --job "$job" "${extra[@]}" \
          > "$log/bench-$mtu-$dt-$rank.log" 2>&1 &
        pids+=($!)
      done
    fi
    for i in 0 1 2; do
      wait "${pids[$i]}" || fail "rank $i, $dt at MTU $mtu"
    done
    if [ "$dt" = int32 ]; then
      python3 - "$log/bench-$mtu-$dt-0.out" <<'PY' || fail "rank 0's JSON ($(cat "$log/bench-$mtu-$dt-0.out"))"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ranks"] == [0] and j["workers"] == 3 and j["type"] == "int32" and j["wrong"] == 0, j
assert [r["count"] for r in j["results"]] == [1000003, 4097, 1], j["results"]
assert all(r["time_us"] > 0 and r["algbw_GBps"] >= 0 and r["wrong"] == 0 for r in j["results"]), j["results"]
assert j["results"][0]["busbw_GBps"] > 0, j["results"]
PY
      grep -q "Out of bounds values : 0 OK" "$log/bench-$mtu-$dt-0.log" || fail "rank 0's notes, $dt at MTU $mtu"
    else
      grep -q "Out of bounds values : 0 OK" "$log/bench-$mtu-$dt-0.log" || fail "wrong values, $dt at MTU $mtu"
    fi
    echo "ok: MTU $mtu $dt ${extra[*]}, 3 workers, bit-exact"
    job=$((job + 1))
  done
  stop_gated
  grep -E "^rail r[01]:" "$log/railgated-$mtu.log"
  gro=$(coalesced "$log"/bench-$mtu-{fp32,bf16,fp16}-0.log)
  [ "$gro" -gt 0 ] || fail "MTU $mtu: rank 0 received nothing coalesced (UDP GRO)"
  [ "$(coalesced "$log/bench-$mtu-fp16-1.log")" = 0 ] || fail "MTU $mtu: RAILGATE_UDP_GRO=0 still received coalesced datagrams"
  echo "ok: MTU $mtu: rank 0 received $gro datagrams coalesced (UDP GRO), bit-exact"
done
echo "PASS"
