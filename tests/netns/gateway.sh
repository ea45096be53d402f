#!/usr/bin/env bash
# Gateway forwarding end to end: host A (10.1.0.2) and host B (10.2.0.2), each
# in its own namespace, reach each other only through railgated's two
# af_packet rails (g0 10.1.0.1, g1 10.2.0.1), routed by the config's
# [[route]] tables. Ping and a TCP transfer go through (bit-exact, TTL - 1);
# g1's 40 Mbit/s shaper paces what B receives; DSCP picks the TC; ICMP time
# exceeded, net unreachable and frag needed come back; railctl adds and
# deletes a route live and refuses bad ones.
#   gateway.sh RAILGATED RAILCTL
set -u
railgated=$1 railctl=$2
. "$(dirname "$0")/lib.sh"
require_netns
a=rgga$$ g=rggg$$ b=rggb$$ log=$(mktemp -d)
chmod 755 "$log"
gated_pid=
trap 'cleanup_netns "$a $g $b" "$log"' EXIT
for n in "$a" "$g" "$b"; do ip netns add "$n" || fail "netns $n"; ip -n "$n" link set lo up; done
ip link add rgga0 netns "$g" type veth peer name rgga1 netns "$a" || fail "veth a"
ip link add rggb0 netns "$g" type veth peer name rggb1 netns "$b" || fail "veth b"
ip -n "$a" addr add 10.1.0.2/24 dev rgga1
ip -n "$b" addr add 10.2.0.2/24 dev rggb1
ip -n "$b" addr add 10.3.0.1/32 dev lo
for l in "$g rgga0" "$g rggb0" "$a rgga1" "$b rggb1"; do set -- $l; ip -n "$1" link set "$2" up; done
ip -n "$a" route add 10.2.0.0/16 via 10.1.0.1
ip -n "$a" route add 10.3.0.0/16 via 10.1.0.1
ip -n "$a" route add 10.9.0.0/16 via 10.1.0.1
ip -n "$b" route add 10.1.0.0/16 via 10.2.0.1
# The hosts' kernels leave TCP checksums to the "NIC" (CHECKSUM_PARTIAL on a
# veth); af_packet hands railgated the frame as is, so have them compute it.
ip netns exec "$a" ethtool -K rgga1 tx off > /dev/null || fail "ethtool -K rgga1 tx off"
ip netns exec "$b" ethtool -K rggb1 tx off > /dev/null || fail "ethtool -K rggb1 tx off"

cat > "$log/gw.toml" <<TOML
$test_eal
[daemon]
[[rail]]
name = "g0"
devargs = "net_af_packet0,iface=rgga0,framesz=2048,blocksz=4096,framecnt=1024"
ip = "10.1.0.1"
[[rail]]
name = "g1"
devargs = "net_af_packet1,iface=rggb0,framesz=2048,blocksz=4096,framecnt=1024"
ip = "10.2.0.1"
mtu = 1400
rate = "40Mbit"
dscp = { 46 = 6 }
[[rail.tc]]
id = 6
strict = true
[[route]]
prefix = "10.1.0.0/24"
rail = "g0"
[[route]]
prefix = "10.2.0.0/24"
rail = "g1"
TOML
printf '[[rail]]\nname = "g0"\ndevargs = "net_null0"\nip = "10.1.0.1"\n[[route]]\nprefix = "10.2.0.0/16"\nrail = "g9"\n' > "$log/bad.toml"
"$railgated" --config "$log/bad.toml" --check > "$log/bad.log" 2>&1 && fail "a route by a missing rail was accepted"
grep -q "bad.toml:7:8: route\[0\].rail: no rail 'g9'" "$log/bad.log" || fail "bad route not located"

ip netns exec "$g" "$railgated" --config "$log/gw.toml" --check > "$log/check.log" 2>&1 || fail "--check of the gateway config"
grep -q "route 10.2.0.0/24 *-> rail g1 (on-link)" "$log/check.log" || fail "--check does not show the routes"
ip netns exec "$g" "$railgated" --config "$log/gw.toml" --socket "$log/ctl.sock" --metrics 127.0.0.1:9479 \
  > "$log/railgated.log" 2>&1 &
gated_pid=$!
wait_ready "$log/railgated.log"
ctl() { "$railctl" --socket "$log/ctl.sock" "$@"; }

ip netns exec "$a" ping -c 3 -i 0.2 -W 2 10.2.0.2 > "$log/ping.log" 2>&1 || fail "ping A -> B through railgated"
grep -q "ttl=63" "$log/ping.log" || fail "B's echo replies should arrive with TTL 63 (one hop)"
echo "ok: ping A -> B through the gateway, ttl=63"

# railctl capture sees routed traffic: A's echo request arrives on g0 (TTL
# 64) and leaves on g1 (TTL 63), each in its rail's interface and direction.
if command -v tshark > /dev/null; then
  "$railctl" --socket "$log/ctl.sock" capture g0,g1 --count 64 --seconds 3 -w "$log/gw.pcapng" 2> "$log/capture.err" &
  cap=$!
  for _ in $(seq 100); do grep -q capturing "$log/capture.err" && break; sleep 0.05; done
  ip netns exec "$a" ping -c 1 -s 333 -W 2 10.2.0.2 > /dev/null 2>&1 || fail "ping during the capture"
  wait "$cap" || fail "railctl capture: $(cat "$log/capture.err")"
  tshark -r "$log/gw.pcapng" -Y "icmp.type == 8 && ip.len == 361" -T fields -e frame.interface_name \
    -e frame.packet_flags_direction -e ip.ttl > "$log/gw.txt" 2> /dev/null || fail "tshark on the gateway capture"
  printf 'g0\t0x00000001\t64\ng1\t0x00000002\t63\n' | cmp -s - "$log/gw.txt" ||
    fail "the routed echo request in the capture: $(cat "$log/gw.txt")"
  echo "ok: railctl capture g0,g1 shows the routed echo request in on g0 (ttl 64) and out on g1 (ttl 63)"
fi

# ICMP errors from the gateway.
ip netns exec "$a" ping -c 1 -W 2 -t 1 10.2.0.2 > "$log/ttl.log" 2>&1
grep -q "From 10.1.0.1 .*Time to live exceeded" "$log/ttl.log" || fail "no time exceeded from 10.1.0.1"
ip netns exec "$a" ping -c 1 -W 2 10.9.0.1 > "$log/unreach.log" 2>&1
grep -q "From 10.1.0.1 .*Destination Net Unreachable" "$log/unreach.log" || fail "no net unreachable"
ip netns exec "$a" ping -c 1 -W 2 -M do -s 1450 10.2.0.2 > "$log/frag.log" 2>&1
grep -q "From 10.1.0.1 .*Frag needed and DF set (mtu = 1400)" "$log/frag.log" || fail "no frag needed (mtu 1400)"
echo "ok: ICMP time exceeded, net unreachable and frag needed (mtu = 1400) from the gateway"

# TCP, 6 MB A -> B: bit-exact, and paced by g1's 40 Mbit/s.
cat > "$log/tcp.py" <<'PY'
import hashlib, os, socket, sys, time
if sys.argv[1] == "serve":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("10.2.0.2", 7000)); s.listen(1)
    open(sys.argv[2], "w").write("up")
    c, _ = s.accept(); h = hashlib.sha256(); n = 0
    while True:
        d = c.recv(1 << 16)
        if not d: break
        h.update(d); n += len(d)
    c.sendall(h.hexdigest().encode()); c.close()
else:
    data = os.urandom(6 * 1000 * 1000)
    c = socket.create_connection(("10.2.0.2", 7000), timeout=60)
    t = time.time(); c.sendall(data); c.shutdown(socket.SHUT_WR)
    got = c.recv(100).decode(); dt = time.time() - t
    ok = got == hashlib.sha256(data).hexdigest()
    print("sha256 %s; %.2f Mbit/s" % ("match" if ok else "MISMATCH", len(data) * 8 / dt / 1e6))
    sys.exit(0 if ok else 1)
PY
ip netns exec "$b" /usr/bin/python3 "$log/tcp.py" serve "$log/up" > "$log/tcp-server.log" 2>&1 &
for _ in $(seq 50); do [ -s "$log/up" ] && break; sleep 0.1; done
timeout 120 ip netns exec "$a" /usr/bin/python3 "$log/tcp.py" send > "$log/tcp.log" 2>&1 || fail "TCP A -> B"
cat "$log/tcp.log"
mbit=$(sed -n 's/.*; \([0-9.]*\) Mbit.*/\1/p' "$log/tcp.log")
awk -v m="$mbit" 'BEGIN { exit !(m > 20 && m < 41) }' || fail "TCP through a 40 Mbit/s rail ran at $mbit Mbit/s"
ip netns exec "$a" ip route get 10.2.0.2 | grep -q "mtu 1400" || fail "A did not learn the path MTU 1400 from the gateway"
echo "ok: 6 MB over TCP through the gateway, sha256 matches, $mbit Mbit/s on a 40 Mbit/s rail"

# DSCP 46 (EF) -> TC 6 by the rail's table: counted in g1's TC 6.
ip netns exec "$a" /usr/bin/python3 - <<'PY' || fail "UDP with DSCP 46"
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 46 << 2)
for i in range(50): s.sendto(b"x" * 100, ("10.2.0.2", 9))
PY
sleep 0.5
ctl --json tc list --rail g1 > "$log/tc.json" || fail "tc list"
/usr/bin/python3 - "$log/tc.json" <<'PY' || fail "DSCP 46 should be counted in TC 6"
import json, sys
t = json.load(open(sys.argv[1]))["rails"][0]["tcs"]
assert t[6]["packets"] >= 50, t[6]
assert t[0]["packets"] > 1000, t[0]
PY
echo "ok: DSCP 46 forwarded in TC 6 (strict), bulk TCP in TC 0"

# Live routes.
ip netns exec "$a" ping -c 1 -W 1 10.3.0.1 > /dev/null 2>&1 && fail "10.3.0.1 reachable before its route"
ctl route add 10.3.0.0/24 g1 via 10.2.0.2 || fail "route add"
ip netns exec "$a" ping -c 2 -i 0.2 -W 2 10.3.0.1 > "$log/ping3.log" 2>&1 || fail "ping 10.3.0.1 via B after route add"
ctl route list | tee "$log/routes.log"
grep -qE "^10.3.0.0/24 +g1 +10.2.0.2 +[1-9][0-9]* +[1-9][0-9]*$" "$log/routes.log" || fail "route list (with the route's packets and bytes)"
for bad in "route add 10.3.0.0/24 g0" "route add 10.4.0.1/24 g1" "route add 10.4.0.0/24 g9" "route add 10.4.0.0/24 g1 via 10.2.0.1" \
           "route del 10.5.0.0/24" "route add 10.4.0.0/33 g1"; do
  # shellcheck disable=SC2086
  ctl $bad > "$log/bad-route.log" 2>&1; rc=$?
  [ $rc -eq 1 ] || fail "railctl $bad exited $rc, not 1"
  grep -q "^railctl: " "$log/bad-route.log" || fail "railctl $bad: no reason"
done
[ "$(ctl --json route list | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["routes"]))')" = 3 ] ||
  fail "a refused route changed the table"
ip netns exec "$g" /usr/bin/python3 -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:9479/metrics", timeout=5).read().decode())' \
  > "$log/metrics.txt" || fail "metrics endpoint"
grep -qE '^railgate_route_packets_total\{prefix="10.3.0.0/24",rail="g1"\} [1-9][0-9]*$' "$log/metrics.txt" ||
  fail "no per-route packets in /metrics"
grep -qE '^railgate_forwarded_bytes_total\{rail="g1"\} [1-9][0-9]*$' "$log/metrics.txt" || fail "no forwarded bytes in /metrics"
ctl route del 10.3.0.0/24 > /dev/null || fail "route del"
ip netns exec "$a" ping -c 1 -W 1 10.3.0.1 > /dev/null 2>&1 && fail "10.3.0.1 reachable after route del"
echo "ok: railctl route add/del apply live; 6 bad route commands refused, nothing changed"

ctl --json stats --rail g1 > "$log/stats.json" || fail "stats"
/usr/bin/python3 - "$log/stats.json" <<'PY' || fail "forwarding counters"
import json, sys
r = json.load(open(sys.argv[1]))["rails"][0]
assert r["fwd_packets"] > 4000 and r["fwd_bytes"] > 6000000, r
assert r["neighbours"] >= 1 and r["arp_requests"] >= 1, r
PY
ctl stats --rail g0 | grep -E "drops|no_route|ttl" | head -n 5
stop_gated
echo PASS
