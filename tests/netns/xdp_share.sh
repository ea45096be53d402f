#!/usr/bin/env bash
# Host traffic and railgate traffic share one af_xdp rail. railgated runs on
# af_xdp over a veth with railgate's XDP program; the kernel owns the rail's
# address. While 3 railbench UDP workers allreduce through the rail (every
# dtype, bit-exact), a kernel TCP stream (iperf3) to the same address runs
# and ping is answered. The XDP counters must show each kind. After railgated
# exits no XDP program is left; after a SIGKILL the next railgated clears the
# stale program and works, and SIGHUP stops it as cleanly as SIGINT, as
# does a SIGTERM during the start-up.
#   xdp_share.sh RAILGATED RAILBENCH
set -u
railgated=$1 railbench=$2
. "$(dirname "$0")/lib.sh"
require_netns
command -v iperf3 > /dev/null || { echo "FAIL: iperf3 missing (tools/setup.sh deps installs it)"; exit 1; }

d=rgxd$$ w=rgxw$$ log=$(mktemp -d)
gated_pid= iperf_pid=
cleanup() {
  [ -n "$gated_pid" ] && kill -9 "$gated_pid" 2>/dev/null
  [ -n "$iperf_pid" ] && kill "$iperf_pid" 2>/dev/null
  wait 2>/dev/null
  ip netns del "$d" 2>/dev/null
  ip netns del "$w" 2>/dev/null
  rm -rf "$log"
}
trap cleanup EXIT

ip netns add "$d" && ip netns add "$w" || fail "netns"
ip link add rgx0 netns "$d" type veth peer name rgw0 netns "$w" || fail "veth"
ip -n "$d" addr add 198.18.0.1/24 dev rgx0
ip -n "$w" addr add 198.18.0.10/24 dev rgw0
for ns in "$d" "$w"; do ip -n "$ns" link set lo up; done
ip -n "$d" link set rgx0 up
ip -n "$w" link set rgw0 up
csum_in_software "$w" rgw0

xdp_attached() { ip -n "$d" -d link show rgx0 | grep -q "prog/xdp"; }

start_gated() { # LOGNAME
  ip netns exec "$d" "$railgated" --socket "$log/railgated.sock" --rail net_af_xdp0,iface=rgx0 --ip 198.18.0.1 \
    -- $test_eal_flags > "$log/$1" 2>&1 &
  gated_pid=$!
  wait_ready "$log/$1"
}

run_workers() { # JOB DTYPE COUNTS -> 0 if every rank passed and rank 0 saw 0 wrong values
  local job=$1 dt=$2 counts=$3 pids=() rc=0
  for rank in 0 1 2; do
    timeout 120 ip netns exec "$w" "$railbench" --transport udp --server 198.18.0.1 --rank "$rank" \
      --workers 3 --dtype "$dt" --count "$counts" -n 3 -w 1 --job "$job" \
      > "$log/bench-$job-$rank.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  [ $rc -eq 0 ] && grep -q "Out of bounds values : 0 OK" "$log/bench-$job-0.log"
}

counter() { # NAME LOG -> the XDP counter's value in railgated's exit stats
  grep -E "^  xdp rgx0:" "$log/$2" | tail -1 | grep -oE " $1 [0-9]+" | awk '{print $2}'
}

# 1. Shared rail: railgate + TCP + ping at once.
start_gated gated-1.log
grep -q "xdp: railgate program id" "$log/gated-1.log" || fail "railgated did not report XDP steering"
xdp_attached || fail "no XDP program on rgx0 while railgated runs"
ip netns exec "$d" iperf3 -s -1 -B 198.18.0.1 -p 5201 > "$log/iperf-server.log" 2>&1 &
iperf_pid=$!
for _ in $(seq 50); do ip netns exec "$d" ss -ltn | grep -q "198.18.0.1:5201" && break; sleep 0.1; done
ip netns exec "$w" iperf3 -c 198.18.0.1 -p 5201 -t 120 -i 1 -f m > "$log/iperf-client.log" 2>&1 &
tcp_pid=$!
sleep 1
ip netns exec "$w" ping -c 10 -i 0.2 -W 2 198.18.0.1 > "$log/ping.log" 2>&1 &
ping_pid=$!
job=1
for dt in fp32 bf16 fp16 int32; do
  run_workers "$job" "$dt" 1000003,4097,1 || fail "railbench $dt over the shared af_xdp rail"
  echo "ok: $dt, 3 workers, bit-exact over af_xdp with XDP steering"
  job=$((job + 1))
done
# The TCP stream ran all along: still running, and every 1 s interval moved data.
kill -0 "$tcp_pid" 2>/dev/null || fail "kernel TCP (iperf3) to the rail address ended early"
kill -INT "$tcp_pid"; wait "$tcp_pid"
wait "$iperf_pid"; iperf_pid=
intervals=$(grep -cE "^\[ *[0-9]+\] +[0-9.]+-[0-9.]+ +sec .*Mbits/sec" "$log/iperf-client.log")
[ "$intervals" -ge 2 ] || fail "iperf3 reported $intervals intervals"
grep -E "^\[ *[0-9]+\] +[0-9.]+-[0-9.]+ +sec +0.00 Bytes" "$log/iperf-client.log" | grep -vE "sender|receiver" &&
  fail "TCP stalled during railbench"
echo "ok: TCP to the rail address ran for $intervals s alongside railbench"
wait "$ping_pid" || fail "ping to the rail address failed"
grep -E "packets transmitted" "$log/ping.log" | sed 's/^/  ping: /'
stop_gated
grep -E "^  xdp rgx0:" "$log/gated-1.log"
[ "$(counter redirect gated-1.log)" -gt 1000 ] || fail "XDP redirect counter too small"
[ "$(counter pass_tcp gated-1.log)" -gt 100 ] || fail "XDP pass_tcp counter too small"
[ "$(counter pass_icmp gated-1.log)" -ge 10 ] || fail "XDP pass_icmp counter below 10 pings"
[ -n "$(counter pass_arp gated-1.log)" ] || fail "no ARP passed to the kernel"
xdp_attached && fail "XDP program left on rgx0 after railgated exited"
echo "ok: no XDP program left after exit"

# 2. SIGKILL leaves the program behind; the next railgated clears it.
start_gated gated-2.log
kill -9 "$gated_pid"; wait "$gated_pid" 2>/dev/null; gated_pid=
xdp_attached || fail "expected a stale program after SIGKILL"
start_gated gated-3.log
grep -q "removed a stale railgate XDP program from rgx0" "$log/gated-3.log" || fail "stale program not reported"
run_workers "$job" fp32 4097 || fail "railbench after restart"
echo "ok: restart after SIGKILL clears the stale program"
# 3. SIGHUP (a closed terminal, a reload railgated does not have) stops it
#    as cleanly as SIGINT: before, its default action left the program behind.
stop_gated HUP
grep -q "railgated: stopping (SIGHUP)" "$log/gated-3.log" || fail "no 'stopping (SIGHUP)' in the log"
xdp_attached && fail "XDP program left on rgx0 after SIGHUP"
echo "ok: SIGHUP stops railgated cleanly, no XDP program left"
# 4. SIGTERM in the start-up (systemd's stop of a unit still starting), sent
#    once its first log line is out, before the EAL and the port are up:
#    the start-up finishes, then the clean stop. Before, the signal's
#    default action came before railgated's handlers and left the program.
ip netns exec "$d" "$railgated" --socket "$log/railgated.sock" --rail net_af_xdp0,iface=rgx0 --ip 198.18.0.1 \
  -- $test_eal_flags > "$log/gated-4.log" 2>&1 &
gated_pid=$!
for _ in $(seq 500); do grep -q "railgated: engine:" "$log/gated-4.log" && break; sleep 0.01; done
grep -q "railgated: ready" "$log/gated-4.log" && echo "note: railgated was ready before the signal"
stop_gated TERM
grep -qE "railgated: stopping \(SIGTERM( during the start-up)?\)" "$log/gated-4.log" || fail "no 'stopping (SIGTERM...)' in the log"
xdp_attached && fail "XDP program left on rgx0 after a SIGTERM in the start-up"
echo "ok: SIGTERM in the start-up: a clean stop, no XDP program left"
echo "PASS"
