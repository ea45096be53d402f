#!/usr/bin/env bash
# udp rails (transport = "udp"): railgated serves each rail through the
# kernel's UDP socket on the rail's address, for kernel-UDP workers.
#  1. One namespace, as the embedded default runs: `--rail udp,interface=lo`
#     puts 198.18.0.1 and .1.1 on lo; 3 workers, fp32 with the delay-based
#     window (ECN-capable: the TOS goes through the sockets) and bf16 with
#     odd counts, bit-exact; railctl shows the rails; a datagram railgate
#     cannot parse and one too big for the rail's buffers are counted
#     drops, and the next job is still bit-exact; with the fault injector
#     on (drops, duplicates, reordering, corruption) and under LAG, still
#     bit-exact, corrupted datagrams caught; a JOIN of another protocol
#     version told railgated's, and a worker answered in another names
#     both; a udp rail added live
#     (railctl rail add r2 udp,interface=lo) carries the next job's third
#     stripe, and goes with its address; idle, the loop sleeps on
#     the sockets (a small part of a core); `railctl rail set R mtu
#     1500` gives the next job smaller chunks, bit-exact; at exit the
#     addresses are gone and no buffer leaked.
#  2. An address no interface has, without interface=: refused by name;
#     a worker with no route to its server names it (address and port).
#  3. Two namespaces: the rails' addresses on railgated's veth ends (the
#     kernel's), 2 workers in the other namespace at MTU 9000, bit-exact,
#     results sent as UDP GSO runs and received coalesced (UDP GRO).
#     The stall time is short (150 ms; 450 under the sanitizers), shorter
#     than a rank takes to make 2 x 64 MiB of inputs and check a result:
#     the ranks are alive between operations (railbench's keepalive
#     PINGs), and the job completes rather than ending as a dead rank's.
#   udp_rails.sh RAILGATED RAILBENCH RAILCTL
set -u
railgated=$1 railbench=$2 railctl=$3
. "$(dirname "$0")/lib.sh"
require_netns

d=rgud$$ w=rguw$$ log=$(mktemp -d)
gated_pid=
trap 'cleanup_netns "$d $w" "$log"' EXIT
ctl() { "$railctl" --socket "$log/gated.sock" "$@"; }
drops() { # RAIL REASON
  ctl --json stats --rail "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["rails"][0]["drops"].get(sys.argv[1], 0))' "$2"
}
coalesced() { sed -n 's/^# udp receive: \([0-9]*\) datagrams arrived coalesced.*/\1/p' "$@" | awk '{s += $1} END {print s + 0}'; }

job=1
run_job() { # NS WORKERS DTYPE COUNTS [ARGS...]
  local ns=$1 n=$2 dt=$3 counts=$4 pids=() rank
  shift 4
  for rank in $(seq 0 $((n - 1))); do
    timeout 120 ip netns exec "$ns" "$railbench" --transport udp --server 198.18.0.1 --rank "$rank" --workers "$n" \
      --dtype "$dt" --count "$counts" -n 2 -w 0 --job "$job" "$@" > "$log/w-$job-$rank.log" 2>&1 &
    pids+=($!)
  done
  for rank in $(seq 0 $((n - 1))); do
    wait "${pids[$rank]}" || fail "job $job ($dt, $*): rank $rank"
  done
  grep -q "Out of bounds values : 0 OK" "$log/w-$job-0.log" || fail "job $job ($dt): wrong values"
  echo "ok: job $job: $n workers, $dt $counts $*, bit-exact"
  job=$((job + 1))
}

# 1. One namespace, the addresses on lo.
ip netns add "$d" || fail "netns"
ip -n "$d" link set lo up
ip netns exec "$d" "$railgated" --socket "$log/gated.sock" \
  --rail udp,interface=lo --ip 198.18.0.1 --mtu 9000 --rail udp,interface=lo --ip 198.18.1.1 --mtu 9000 \
  -- $test_eal_flags > "$log/gated-1.log" 2>&1 &
gated_pid=$!
wait_ready "$log/gated-1.log"
for r in 0 1; do
  ip -n "$d" -4 addr show dev lo | grep -q "198.18.$r.1/32" || fail "198.18.$r.1 is not on lo"
done
ctl status > "$log/status.log" || fail "railctl status"
[ "$(grep -cE "^ *r[01] .* udp " "$log/status.log")" = 2 ] || fail "railctl status does not show two udp rails"
ctl --json rail show r0 | python3 -c 'import json,sys; r=json.load(sys.stdin); r=r.get("rail", r)
assert (r["transport"], r["driver"], r["device"], r["ifname"]) == ("udp", "udp", "socket", "lo"), r' ||
  fail "railctl rail show r0 does not say udp"
run_job "$d" 3 fp32 1000003,4097,1 --cc delay
run_job "$d" 3 bf16 1000003,4097,1
# The workers' UDP GSO messages arrived whole (UDP GRO on railgated's
# sockets) and were counted; railctl stats shows it.
ctl --json stats --rail r0 | python3 -c 'import json,sys; r=json.load(sys.stdin)["rails"][0]
assert r["udp_coalesced"] > 0 and r["udp_copied"] < r["udp_coalesced"], r' ||
  fail "railgated counted no coalesced datagrams on r0 (UDP GRO)"
ctl stats --rail r0 | grep -q "datagrams arrived coalesced (GRO)" || fail "railctl stats does not show udp_coalesced"
echo "ok: workers' GSO messages arrived coalesced (UDP GRO), counted and shown"
# What railgated cannot use: counted, never delivered to a job.
before=$(drops r0 rg_truncated)
ip netns exec "$d" bash -c 'printf "hello" > /dev/udp/198.18.0.1/47000' || fail "sending a short datagram"
ip netns exec "$d" bash -c 'head -c 12000 /dev/zero | dd bs=12000 count=1 iflag=fullblock status=none > /dev/udp/198.18.0.1/47000' || fail "sending a big datagram"
for _ in $(seq 50); do [ "$(drops r0 udp_rail_oversize)" = 1 ] && break; sleep 0.1; done
[ "$(drops r0 udp_rail_oversize)" = 1 ] || fail "a 12000-byte datagram was not counted udp_rail_oversize"
[ "$(drops r0 rg_truncated)" = $((before + 1)) ] || fail "a 5-byte datagram was not counted rg_truncated"
echo "ok: a 5-byte and a 12000-byte datagram counted (rg_truncated, udp_rail_oversize)"
# Two protocol versions: a JOIN of version 3 is answered in railgated's
# (ERROR protocol_version naming both); a worker whose server answers in
# version 3 (a stand-in on 127.0.0.1:47999) fails at its join timeout
# naming both, and does not retry.
ip netns exec "$d" python3 - > "$log/version.log" 2>&1 <<'PY' || fail "a JOIN of protocol version 3: $(cat "$log/version.log")"
import socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.sendto(struct.pack(">BBBBIQHHHHQII", 3, 1, 0, 0, 7, 1, 0, 2, 0, 0, 0, 0, 0) + bytes(24), ("198.18.0.1", 47000))
a = s.recv(4096)
version, kind, offset, code = a[0], a[1], struct.unpack(">Q", a[24:32])[0], struct.unpack(">I", a[36:40])[0]
assert (version, kind, code, offset) == (2, 5, 23, 3), (version, kind, code, offset)
print(a[40:].decode())
assert "speaks railgate protocol version 2, not 3" in a[40:].decode()
PY
echo "ok: a JOIN of protocol version 3 told: $(cat "$log/version.log")"
ip netns exec "$d" timeout 20 python3 - <<'PY' &
import socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 47999))
while True:
    m, peer = s.recvfrom(65536)
    s.sendto(struct.pack(">BBBBIQHHHHQII", 3, 5, 0, 0, 0, 0, 0, 1, 0, 0, 2, 0, 23), peer)
PY
standin=$!
sleep 0.5
ip netns exec "$d" "$railbench" --transport udp --server 127.0.0.1 --port 47999 --rank 0 --workers 1 --token 1 \
  --join-timeout 500 --retry 3 > "$log/v3.log" 2>&1 && fail "a worker joined a railgated of protocol version 3"
kill $standin 2> /dev/null
grep -q "railgated speaks railgate protocol version 3, this library 2" "$log/v3.log" ||
  fail "the worker's error does not name both versions: $(cat "$log/v3.log")"
grep -q "retry" "$log/v3.log" && fail "the worker retried a join no retry mends: $(cat "$log/v3.log")"
echo "ok: $(grep -o "railgated speaks.*" "$log/v3.log" | head -1)"
# Idle, its lcore sleeps on the sockets (--idle sleep, the default for udp
# rails): railgated's threads use a small part of a core, where a polling
# loop would take all of it; commands and jobs still wake it.
ticks() { cat /proc/"$gated_pid"/task/*/stat | awk '{s += $14 + $15} END {print s}'; }
sleep 0.5
t0=$(ticks); sleep 2; t1=$(ticks)
[ $((t1 - t0)) -lt 60 ] || fail "idle railgated used $((t1 - t0)) of 200 clock ticks in 2 s: its loop does not sleep"
echo "ok: idle, railgated used $((t1 - t0)) clock ticks in 2 s (polling: 200)"
run_job "$d" 2 fp32 65536
# The fault injector on udp rails (drops, duplicates, reordering,
# corruption of received datagrams): bit-exact, the corrupted ones caught
# (the kernel's checksum verdict no longer vouches for them).
for r in r0 r1; do ctl fault set $r drop=0.05,dup=0.01,reorder=0.05,corrupt=0.01,seed=7 > /dev/null || fail "fault set $r"; done
run_job "$d" 2 fp32 1000003
inj=$(($(drops r0 fault_injected) + $(drops r1 fault_injected)))
bad=$(($(drops r0 udp_checksum) + $(drops r1 udp_checksum) + $(drops r0 checksum_partner) + $(drops r1 checksum_partner)))
[ "$inj" -gt 0 ] && [ "$bad" -gt 0 ] || fail "faults on udp rails: $inj dropped, $bad corrupted caught"
for r in r0 r1; do ctl fault clear $r > /dev/null || fail "fault clear $r"; done
echo "ok: faults on udp rails: $inj datagrams dropped, $bad corrupted ones caught, bit-exact"
# LAG over udp rails.
ctl policy set lag > /dev/null || fail "policy set lag"
run_job "$d" 2 bf16 1000003
ctl policy set rail > /dev/null || fail "policy set rail"
# A udp rail added live (its address on lo): the next job stripes over 3.
ctl rail add r2 udp,interface=lo 198.18.2.1 --mtu 9000 > "$log/add.log" 2>&1 || fail "rail add r2 udp: $(cat "$log/add.log")"
ip -n "$d" -4 addr show dev lo | grep -q "198.18.2.1/32" || fail "rail add put no 198.18.2.1 on lo"
ctl rail add r3 udp,interface=lo,x=1 198.18.3.1 > "$log/add-bad.log" 2>&1 && fail "rail add took udp,interface=lo,x=1"
grep -q "a udp rail takes only interface=IFNAME" "$log/add-bad.log" || fail "the bad udp rail's refusal: $(cat "$log/add-bad.log")"
run_job "$d" 2 fp32 1000003
grep -q "server 198.18.0.1, 3 rails" "$log/w-$((job - 1))-0.log" || fail "the job after rail add did not stripe over 3 rails"
ctl rail remove r2 > /dev/null || fail "rail remove r2"
ip -n "$d" -4 addr show dev lo | grep -q "198.18.2.1/32" && fail "rail remove left 198.18.2.1 on lo"
echo "ok: a udp rail added live (3 rails, bit-exact), a malformed one refused, removed with its address"
for r in r0 r1; do ctl rail set "$r" mtu 1500 > /dev/null || fail "rail set $r mtu 1500"; done
run_job "$d" 2 fp16 1000003
chunk=$(grep -o "chunk [0-9]* B" "$log/w-$((job - 1))-0.log" | head -1 | awk '{print $2}')
[ "${chunk:-}" = 1408 ] || fail "after MTU 1500 the job's chunk is ${chunk:-?} bytes, not 1408"
echo "ok: after rail set mtu 1500 the next job's chunk is $chunk bytes"
stop_gated
grep -q "still in use" "$log/gated-1.log" && fail "buffers leaked ($(grep "still in use" "$log/gated-1.log"))"
ip -n "$d" -4 addr show dev lo | grep -q "198.18" && fail "railgated left its addresses on lo"
echo "ok: addresses removed from lo at exit, no buffer leaked"

# 2. An address no interface has.
ip netns exec "$d" "$railgated" --socket off --rail udp --ip 198.18.5.1 -- $test_eal_flags > "$log/gated-2.log" 2>&1 &&
  fail "railgated started on an address no interface has"
grep -q "198.18.5.1:47000.*no interface has the address" "$log/gated-2.log" || fail "the refusal does not name the address"
echo "ok: $(grep -o "bind 198.18.5.1.*" "$log/gated-2.log" | head -1)"
# A worker whose server has no route names it as an address and port.
ip netns exec "$d" "$railbench" --transport udp --server 10.255.0.1 --rank 0 --workers 1 --token 1 > "$log/noroute.log" 2>&1 &&
  fail "a worker started with no route to its server"
grep -q "connect 10.255.0.1:47000: Network is unreachable" "$log/noroute.log" ||
  fail "the worker's error does not name the server: $(cat "$log/noroute.log")"
echo "ok: $(grep -o "connect 10.255.0.1.*" "$log/noroute.log" | head -1)"
ip netns del "$d"

# 3. Two namespaces over veths, the addresses the kernel's on railgated's side.
two_rail_netns "$d" "$w"
for r in 0 1; do
  ip -n "$d" addr add "198.18.$r.1/24" dev "rgd$r"
  ip -n "$d" link set "rgd$r" mtu 9000
  ip -n "$w" link set "rgw$r" mtu 9000
done
stall=150
[ "${RAILGATE_SANITIZED:-0}" = 1 ] && stall=450
ip netns exec "$d" "$railgated" --socket "$log/gated.sock" --stall-ms "$stall" \
  --rail udp --ip 198.18.0.1 --mtu 9000 --rail udp --ip 198.18.1.1 --mtu 9000 \
  -- $test_eal_flags > "$log/gated-3.log" 2>&1 &
gated_pid=$!
wait_ready "$log/gated-3.log"
# Under TSan 16 MB, not 64 (which took 10.6 s of its run there): it checks
# the threads; the release and ASan runs the long gaps between operations.
big=16777216
[ "${RAILGATE_TSAN:-0}" = 1 ] && big=4194304
run_job "$w" 2 fp32 "$big,1000003"
[ "$(coalesced "$log/w-$((job - 1))-0.log")" -gt 0 ] || fail "the worker received no result coalesced"
stop_gated
echo "ok: across veths, $(coalesced "$log/w-$((job - 1))-0.log") results received coalesced (UDP GRO) by rank 0"
echo "PASS"
