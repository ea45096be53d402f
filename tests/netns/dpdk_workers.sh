#!/usr/bin/env bash
# DPDK workers as separate processes: railgated on 2 af_packet rails (a veth
# each), and one job of 3 workers in another namespace that reach it through
# a bridge per rail: rank 0 a DPDK worker on af_xdp ports, rank 1 a DPDK
# worker on af_packet ports (each with its own EAL), rank 2 a kernel-UDP
# worker. Odd element counts in fp32 and bf16 must come back bit-exact; in
# bf16 the af_packet worker runs one pipeline per rail (--rail-threads).
# af_packet and af_xdp ports do not offload checksums: those workers sum
# their frames in software, and say so. Then a DPDK worker on net_tap
# ports, which offload them, beside a kernel-UDP worker.
# Then, given the build's Python package, a job of two C-ABI communicators:
# one over dpdk running every dtype in turns on its one EAL's ports, one
# over kernel UDP.
#   dpdk_workers.sh RAILGATED RAILBENCH [PYTHONPATH]
set -u
railgated=$1 railbench=$2 pypath=${3:-}
. "$(dirname "$0")/lib.sh"
require_netns
d=rgkd$$ w=rgkw$$ log=$(mktemp -d)
gated_pid=
trap 'cleanup_netns "$d $w" "$log"' EXIT
ip netns add "$d" && ip netns add "$w" || fail "netns"
ip -n "$w" link set lo up
for r in 0 1; do
  ip link add "rgk$r" netns "$d" type veth peer name "rgb$r" netns "$w" || fail "veth $r"
  ip -n "$d" link set "rgk$r" up
  ip -n "$w" link add "br$r" type bridge && ip -n "$w" link set "br$r" up || fail "bridge $r"
  ip -n "$w" link set "rgb$r" master "br$r" up
  for k in 0 1 2; do # worker k's port on rail r, and its bridge end
    ip -n "$w" link add "wk$k$r" type veth peer name "wb$k$r" || fail "veth worker $k rail $r"
    ip -n "$w" link set "wb$k$r" master "br$r" up
    ip -n "$w" link set "wk$k$r" up
  done
  ip -n "$w" addr add "198.18.$r.12/24" dev "wk2$r" # the UDP worker's kernel address
  csum_in_software "$w" "wk2$r"
done

ip netns exec "$d" "$railgated" --socket "$log/railgated.sock" --metrics off \
  --rail "net_af_packet0,iface=rgk0,framesz=2048,blocksz=4096,framecnt=1024" --ip 198.18.0.1 \
  --rail "net_af_packet1,iface=rgk1,framesz=2048,blocksz=4096,framecnt=1024" --ip 198.18.1.1 \
  -- $test_eal_flags > "$log/railgated.log" 2>&1 &
gated_pid=$!
wait_ready "$log/railgated.log"

job=1
for dt in fp32 bf16; do
  common=(--server 198.18.0.1 --workers 3 --dtype "$dt" --count 1000003,4097,1 -n 2 -w 1 --job "$job")
  threads=()
  [ "$dt" = bf16 ] && threads=(--rail-threads)
  ip netns exec "$w" timeout 120 "$railbench" --transport dpdk --rank 0 "${common[@]}" \
    --dpdk-rail net_af_xdp0,iface=wk00@198.18.0.10 --dpdk-rail net_af_xdp1,iface=wk01@198.18.1.10 \
    > "$log/bench-$dt-0.log" 2>&1 &
  p0=$!
  ip netns exec "$w" timeout 120 "$railbench" --transport dpdk --rank 1 "${common[@]}" "${threads[@]}" \
    --dpdk-rail net_af_packet0,iface=wk10@198.18.0.11 --dpdk-rail net_af_packet1,iface=wk11@198.18.1.11 \
    > "$log/bench-$dt-1.log" 2>&1 &
  p1=$!
  ip netns exec "$w" timeout 120 "$railbench" --transport udp --rank 2 "${common[@]}" > "$log/bench-$dt-2.log" 2>&1 &
  p2=$!
  wait $p0 || fail "rank 0 (dpdk, af_xdp), $dt"
  wait $p1 || fail "rank 1 (dpdk, af_packet), $dt"
  wait $p2 || fail "rank 2 (udp), $dt"
  for k in 0 1 2; do
    grep -q "Out of bounds values : 0 OK" "$log/bench-$dt-$k.log" || fail "rank $k: wrong values in $dt"
  done
  grep -q "transport dpdk, checksums software" "$log/bench-$dt-0.log" || fail "rank 0 did not run over dpdk, checksums in software"
  grep -q "transport dpdk, checksums software" "$log/bench-$dt-1.log" || fail "rank 1 did not run over dpdk, checksums in software"
  [ "$dt" != bf16 ] || grep -q "one pipeline per rail: 2 rails" "$log/bench-$dt-1.log" || fail "rank 1 ran no pipelines"
  echo "ok: $dt, ranks over dpdk/af_xdp, dpdk/af_packet and udp in one job, bit-exact"
  job=$((job + 1))
done
# A DPDK worker on ports that offload UDP checksums: net_tap advertises
# both offloads (its PMD sums and verifies on the port's behalf, as a NIC
# does), so the worker leaves its frames' sums to the port (the pseudo
# header's sum in the field) and takes the port's verdict on results.
# railgated's af_packet rails check every sum in software: a wrong seed
# would be dropped there and the job would not come back bit-exact.
# The PMD gives the tap's kernel end the port's own MAC, and a bridge
# keeps frames for its ports' MACs to itself: once the port has started,
# the kernel end gets another MAC and joins the rail's bridge.
ip netns exec "$w" timeout 120 "$railbench" --transport dpdk --rank 0 --server 198.18.0.1 --workers 2 \
  --count 1000003,4097,1 -n 2 -w 1 --job "$job" \
  --dpdk-rail net_tap0,iface=wt0@198.18.0.13 --dpdk-rail net_tap1,iface=wt1@198.18.1.13 \
  > "$log/bench-tap-0.log" 2>&1 &
p0=$!
attached=0
for _ in $(seq 300); do
  if ip -n "$w" link show wt1 2> /dev/null | grep -q ",UP"; then
    sleep 0.5 # the port's start restores its MAC on the kernel end after bringing it up
    for r in 0 1; do
      ip -n "$w" link set "wt$r" address "02:00:00:74:61:7$r" &&
        ip -n "$w" link set "wt$r" master "br$r" up || fail "tap $r into the bridge"
    done
    attached=1
    break
  fi
  kill -0 $p0 2> /dev/null || break
  sleep 0.1
done
[ $attached = 1 ] || fail "the net_tap worker's ports did not come up: $(tail -n 5 "$log/bench-tap-0.log")"
ip netns exec "$w" timeout 120 "$railbench" --transport udp --rank 1 --server 198.18.0.1 --workers 2 \
  --count 1000003,4097,1 -n 2 -w 1 --job "$job" > "$log/bench-tap-1.log" 2>&1 &
p1=$!
wait $p0 || fail "rank 0 (dpdk, net_tap): $(tail -n 5 "$log/bench-tap-0.log")"
wait $p1 || fail "rank 1 (udp) beside the net_tap worker"
for k in 0 1; do
  grep -q "Out of bounds values : 0 OK" "$log/bench-tap-$k.log" || fail "rank $k: wrong values beside the net_tap worker"
done
grep -q "transport dpdk, checksums port" "$log/bench-tap-0.log" || fail "the net_tap worker did not leave its checksums to the port"
echo "ok: a dpdk worker on net_tap ports with the UDP checksum offloads, bit-exact"
job=$((job + 1))
# The C ABI over dpdk: one communicator (librailgate through the Python
# package) runs every dtype in turns on its one EAL's af_packet ports; the
# other rank is a kernel-UDP communicator. (Not in the sanitized tree: its
# librailgate needs the sanitizer's runtime loaded before python3.)
if [ -n "${RAILGATE_SANITIZED:-}" ]; then
  echo "(the C ABI over dpdk runs in the release tree only)"
elif [ -n "$pypath" ]; then
  comm() { # RANK TRANSPORT [RAILS]
    ip netns exec "$w" env PYTHONPATH="$pypath" timeout 120 /usr/bin/python3 "$(dirname "$0")/dtypes_on_dpdk.py" \
      "$1" 2 $((job + 10)) "${@:2}" > "$log/dtypes-$1.log" 2>&1
  }
  comm 0 dpdk "net_af_packet0,iface=wk00@198.18.0.10;net_af_packet1,iface=wk01@198.18.1.10" &
  p0=$!
  comm 1 udp &
  p1=$!
  wait $p0 || fail "C ABI rank 0 (dpdk): $(tail -n 3 "$log/dtypes-0.log")"
  wait $p1 || fail "C ABI rank 1 (udp): $(tail -n 3 "$log/dtypes-1.log")"
  cat "$log"/dtypes-*.log
fi
# A DPDK worker whose af_packet or af_xdp ports cannot carry railgated's
# chunks is refused at its JOIN_ACK, naming the port and what would carry
# them (its chunks were dropped in its ring or its kernel interface,
# unseen, and the job waited out its timeouts): ring frames too small for
# MTU 1500's chunks, then a kernel interface at MTU 1000 behind an
# af_packet port, and behind an af_xdp one.
refused_port() { # TAG RAIL0-DEVARGS EXPECTED
  ip netns exec "$w" timeout 30 "$railbench" --transport dpdk --rank 0 --server 198.18.0.1 --workers 1 \
    --count 1024 -n 1 -w 0 --job $((job + 20)) --dpdk-rail "$2@198.18.0.11" \
    --dpdk-rail net_af_packet1,iface=wk11@198.18.1.11 > "$log/refused-$1.log" 2>&1
  local rc=$?
  cat "$log/refused-$1.log"
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -qF "$3" "$log/refused-$1.log" ||
    fail "a worker on $2 was not refused with \"$3\" (exit $rc)"
  job=$((job + 1))
}
# (Not under TSan, RAILGATE_TSAN=1: a refusal is one thread's control path,
# which the release and ASan+UBSan runs check, and each refused worker's
# EAL took 5 s to start there: 15 of the test's 46 s.)
if [ "${RAILGATE_TSAN:-0}" = 1 ]; then
  echo "(the refusals of ports that cannot carry the chunks run in the release and ASan+UBSan trees)"
else
  refused_port frames "net_af_packet0,iface=wk10,framesz=1024,blocksz=4096" \
    "port 0 (net_af_packet on wk10) carries MTU 944 in ring frames of 1024 B, 1476 wanted: give its devargs framesz=1568 or more"
  ip -n "$w" link set wk10 mtu 1000
  refused_port ifmtu "net_af_packet0,iface=wk10" \
    "port 0 (net_af_packet on wk10): its kernel interface has MTU 1000, 1476 wanted (ip link set wk10 mtu 1476"
  ip -n "$w" link set wk10 mtu 1500
  ip -n "$w" link set wk00 mtu 1000
  refused_port xdp-ifmtu "net_af_xdp0,iface=wk00" \
    "port 0 (net_af_xdp on wk00): its kernel interface has MTU 1000, 1476 wanted (ip link set wk00 mtu 1476"
  ip -n "$w" link set wk00 mtu 1500
  echo "ok: af_packet and af_xdp ports that cannot carry the chunks refused, named"
fi
# A bad --dpdk-rail is refused before any EAL starts.
"$railbench" --transport dpdk --server 198.18.0.1 --rank 0 --workers 1 --dpdk-rail net_null0 > "$log/bad.log" 2>&1
[ $? -eq 2 ] && grep -q "is not DEVARGS@IP" "$log/bad.log" || fail "a --dpdk-rail without an address was not refused"
stop_gated
grep -E "^rail r[01]:" "$log/railgated.log"
echo PASS
