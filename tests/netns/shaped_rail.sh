#!/usr/bin/env bash
# A shaped rail end to end, from the config file and railctl: railgated on one
# af_packet rail over a veth with rate = "40Mbit" and traffic classes
# ([[rail.tc]]); one kernel-UDP railbench worker in another namespace.
# The worker's throughput must follow the rate (results leave railgated no
# faster), results stay bit-exact, `railctl rail show` reports the shaping,
# and a bad shaping entry is refused with its location.
#   shaped_rail.sh RAILGATED RAILBENCH RAILCTL
set -u
railgated=$1 railbench=$2 railctl=$3
. "$(dirname "$0")/lib.sh"
require_netns
d=rgsd$$ w=rgsw$$ log=$(mktemp -d)
chmod 755 "$log"
gated_pid=
trap 'cleanup_netns "$d $w" "$log"' EXIT
ip netns add "$d" && ip netns add "$w" || fail "netns"
ip link add rgs0 netns "$d" type veth peer name rgs1 netns "$w" || fail "veth"
ip -n "$w" addr add 198.18.0.10/24 dev rgs1
ip -n "$d" link set rgs0 up && ip -n "$w" link set rgs1 up && ip -n "$w" link set lo up && ip -n "$d" link set lo up
csum_in_software "$w" rgs1

cat > "$log/shaped.toml" <<TOML
$test_eal
[daemon]
[[rail]]
name = "s0"
devargs = "net_af_packet0,iface=rgs0,framesz=2048,blocksz=4096,framecnt=1024"
ip = "198.18.0.1"
rate = "40Mbit"
dscp = { 46 = 6 }
[[rail.tc]]
id = 0
weight = 3
[[rail.tc]]
id = 6
strict = true
rate = "1Mbit"
TOML
printf '[[rail]]\nname = "s0"\ndevargs = "net_null0"\nip = "198.18.0.1"\n[[rail.tc]]\nid = 9\n' > "$log/bad.toml"
"$railgated" --config "$log/bad.toml" --check > "$log/bad.log" 2>&1 && fail "a TC id of 9 was accepted"
grep -q "bad.toml:6:6: rail\[0\].tc\[0\].id: 9 out of range 0..7" "$log/bad.log" || fail "bad TC not located"
ip netns exec "$d" "$railgated" --config "$log/shaped.toml" --check > "$log/check.log" 2>&1 || fail "--check of the shaped config"
grep -q "rail s0       shaped: rate 0.040 Gbit/s, TCs 0:w3 6:strict@1Mbit" "$log/check.log" || fail "--check does not show the shaping"

ip netns exec "$d" "$railgated" --config "$log/shaped.toml" --socket "$log/ctl.sock" --metrics 127.0.0.1:9478 \
  > "$log/railgated.log" 2>&1 &
gated_pid=$!
wait_ready "$log/railgated.log"
ip netns exec "$w" ping -c 1 -W 2 198.18.0.1 > /dev/null 2>&1 || fail "ping through the shaped rail"
# 1 MiB at 40 Mbit/s of wire (1024-byte chunks: 90.6% payload) is ~0.23 s.
timeout 120 ip netns exec "$w" "$railbench" --transport udp --server 198.18.0.1 --rank 0 --workers 1 \
  --pool 32 -b 1M -e 1M -n 4 -w 1 > "$log/bench.log" 2>&1 || fail "railbench through the shaped rail"
cat "$log/bench.log"
grep -q "Out of bounds values : 0 OK" "$log/bench.log" || fail "wrong values"
mbs=$(awk '$1 == 1048576 {printf "%.3f", $1 / $5}' "$log/bench.log") # bytes per us = MB/s
# Expected goodput: 40e6 b/s * 0.906 (1024-byte chunks in 1130 wire bytes) / 8 = 4.53 MB/s.
awk -v a="$mbs" 'BEGIN { exit !(a > 3.0 && a < 5.0) }' ||
  fail "throughput $mbs MB/s does not follow the 40 Mbit/s rate (expected ~4.53)"
echo "ok: railbench through a 40 Mbit/s rail: $mbs MB/s (expected ~4.53)"
"$railctl" --socket "$log/ctl.sock" --json rail show s0 > "$log/show.json" || fail "railctl rail show"
/usr/bin/python3 - "$log/show.json" <<'PY' || fail "rail show: shaping"
import json, sys
d = json.load(open(sys.argv[1]))
r = d["rail"] if "rail" in d else d
s = r["shaping"]
assert s["rate_bps"] == 40000000, s
assert {t["tc"]: t for t in s["tcs"]}[6]["strict"], s
PY

# Live: railctl tc. Results travel in TC 0 (the rail's TOS 0).
ctl() { "$railctl" --socket "$log/ctl.sock" "$@"; }
ctl --json tc list --rail s0 > "$log/tc.json" || fail "railctl tc list"
ctl tc list
/usr/bin/python3 - "$log/tc.json" <<'PY' || fail "tc list counters"
import json, sys
t = json.load(open(sys.argv[1]))["rails"][0]["tcs"]
assert t[0]["packets"] > 1000 and t[0]["bytes"] > 1000000 and t[0]["weight"] == 3, t[0]
assert t[6]["strict"] and t[6]["rate_bps"] == 1000000, t[6]
assert json.load(open(sys.argv[1]))["rails"][0]["dscp"] == {"46": 6}
PY
ctl tc set s0 rate 80Mbit > /dev/null || fail "tc set s0 rate 80Mbit"
timeout 120 ip netns exec "$w" "$railbench" --transport udp --server 198.18.0.1 --rank 0 --workers 1 --job 2 \
  --pool 32 -b 1M -e 1M -n 4 -w 1 > "$log/bench80.log" 2>&1 || fail "railbench after tc set"
mbs=$(awk '$1 == 1048576 {printf "%.3f", $1 / $5}' "$log/bench80.log")
awk -v a="$mbs" 'BEGIN { exit !(a > 6.5 && a < 10.0) }' || fail "after tc set rate 80Mbit: $mbs MB/s (expected ~9.06)"
echo "ok: after railctl tc set s0 rate 80Mbit: $mbs MB/s (expected ~9.06)"
for bad in "tc set s0 tc 9 weight 2" "tc set s0 tc 1 weight 0" "tc set s0 rate fast" "tc set s0 tc 1 weight 2 strict" \
           "tc set nosuch rate 1Gbit" "tc set s0 weight 3" "tc set s0 tc 2 burst 10"; do
  # shellcheck disable=SC2086
  ctl $bad > "$log/bad-tc.log" 2>&1; rc=$?
  [ $rc -eq 1 ] || fail "railctl $bad exited $rc, not 1"
  grep -q "^railctl: " "$log/bad-tc.log" || fail "railctl $bad: no reason"
done
ctl --json tc list --rail s0 > "$log/tc2.json"
/usr/bin/python3 - "$log/tc2.json" <<'PY' || fail "a refused tc set changed the configuration"
import json, sys
r = json.load(open(sys.argv[1]))["rails"][0]
assert r["rate_bps"] == 80000000 and r["tcs"][1]["weight"] == 1 and not r["tcs"][1]["strict"], r
PY
echo "ok: railctl tc list shows TC 0's traffic; bad tc set refused, nothing changed"
ctl latency --rail s0 --tc 0 | head -n 4
ctl --json latency --rail s0 --tc 0 > "$log/lat.json" || fail "railctl latency --tc 0"
/usr/bin/python3 - "$log/lat.json" <<'PY' || fail "TC 0 wait histogram"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["tc"] == 0 and d["histogram"]["count"] > 1000, d["histogram"]["count"]
PY
ctl latency --rail s0 --tc 8 > /dev/null 2>&1 && fail "latency --tc 8 accepted"
echo "ok: railctl latency --tc 0 has the TC's waits"
ip netns exec "$d" /usr/bin/python3 -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:9478/metrics", timeout=5).read().decode())' \
  > "$log/metrics.txt" || fail "metrics endpoint"
grep -qE '^railgate_tc_bytes_total\{rail="s0",tc="0"\} [1-9][0-9]*$' "$log/metrics.txt" || fail "no per-TC bytes in /metrics"
echo "ok: /metrics has the per-TC bytes"
stop_gated
echo PASS
