#!/usr/bin/env bash
# Shaping accuracy: railgated's rail shaper against Linux HTB configured to
# the same rate, in the same run, from 1 Mbit/s up.
#  - railgate: railbench --embedded, one rail shaped to RATE, one flow; the
#    achieved rate counts what the shaper counts (frames + 24 bytes of
#    preamble, FCS and gap). The pool is sized to about 20 ms of the rate so
#    that results do not wait in the shaper longer than a retransmit timeout.
#  - HTB: one class at RATE (ceil RATE) on a veth between two namespaces
#    this script creates (198.18.9.1 -> .2), iperf3 UDP offered at twice the
#    rate (1400-byte datagrams, 8000 from 1 Gbit/s: the veth has MTU 9000);
#    the achieved rate counts what HTB counts (the frame without FCS), from
#    the receiver's payload rate. Where iperf3 cannot offer twice the rate,
#    the HTB row measures iperf3, not HTB. Its CPU: iperf3's sender CPU per packet
#    (the UDP send path and HTB together).
#   tools/bench_shaping.sh [BUILD_DIR] [RATES_MBIT...]
set -u
build=${1:-build}
shift || true
rates=${*:-1 10 100 1000 4000}
[ "$(id -u)" -eq 0 ] || { echo "needs root (namespaces, tc)"; exit 2; }
command -v iperf3 > /dev/null || { echo "needs iperf3"; exit 2; }
a=rgsa$$ b=rgsb$$
cleanup() { ip netns del $a 2> /dev/null; ip netns del $b 2> /dev/null; }
trap cleanup EXIT
ip netns add $a && ip netns add $b || exit 1
ip link add va$$ netns $a type veth peer name vb$$ netns $b
ip -n $a link set va$$ mtu 9000 && ip -n $b link set vb$$ mtu 9000
ip -n $a addr add 198.18.9.1/24 dev va$$ && ip -n $a link set va$$ up && ip -n $a link set lo up
ip -n $b addr add 198.18.9.2/24 dev vb$$ && ip -n $b link set vb$$ up && ip -n $b link set lo up
ip netns exec $b iperf3 -s -D -1 > /dev/null 2>&1
printf "%-10s %-9s %14s %10s %18s\n" "rate" "shaper" "achieved Mb/s" "ratio" "cpu ns/packet"
for r in $rates; do
  bytes=$(awk -v r="$r" 'BEGIN {b = int(r * 1e6 / 8 * 0.7 / 1024) * 1024; print (b < 65536 ? 65536 : b)}')
  pool=$(awk -v r="$r" 'BEGIN {p = r * 2; print (p < 2 ? 2 : (p > 64 ? 64 : p))}')
  len=1400
  [ "$r" -ge 1000 ] && len=8000 # iperf3 cannot offer Gbit/s of 1400-byte datagrams here
  row=$("$build/tools/railbench" --embedded --rails 1 --rail-rate "${r}Mbit" --flows 1 --policy rail --pool "$pool" \
    -b "$bytes" -e "$bytes" -n 3 -w 1 | awk '$1 == "rail" && $2 == 1 {print $5 * 1000, $6}')
  printf "%-10s %-9s %14.3f %10.4f %18s\n" "${r}Mbit" railgate ${row:-0 0} "(bench_qos)"
  ip netns exec $a tc qdisc del dev va$$ root 2> /dev/null
  ip netns exec $a tc qdisc add dev va$$ root handle 1: htb default 1
  ip netns exec $a tc class add dev va$$ parent 1: classid 1:1 htb rate "${r}mbit" ceil "${r}mbit" 2> /dev/null
  ip netns exec $b iperf3 -s -D -1 > /dev/null 2>&1
  sleep 0.3
  ip netns exec $a iperf3 -c 198.18.9.2 -u -b "$((r * 2))M" -l "$len" -t 3 -J > /tmp/rg_htb_$$.json 2> /dev/null
  /usr/bin/python3 - "$r" /tmp/rg_htb_$$.json "$len" <<'PY'
import json, sys
r = float(sys.argv[1]); d = json.load(open(sys.argv[2])); n = int(sys.argv[3])
end = d["end"]
rx = end["sum_received"]["bits_per_second"] if "sum_received" in end else end["sum"]["bits_per_second"] * (1 - end["sum"]["lost_percent"] / 100)
tx_pkts = end["sum"]["packets"]
secs = end["sum"]["seconds"]
cpu = end["cpu_utilization_percent"]["host_total"] / 100 * secs
achieved = rx * (n + 8 + 20 + 14) / n / 1e6
print("%-10s %-9s %14.3f %10.4f %18.0f" % ("%dMbit" % r, "htb", achieved, achieved / r, cpu / tx_pkts * 1e9 if tx_pkts else 0))
PY
done
rm -f /tmp/rg_htb_$$.json

# CPU per packet of each shaper, as shaper on minus shaper off at a rate
# that never holds a packet back, alternated in one run (median of 7):
#  - HTB (one class at 40 Gbit/s) against pfifo on the veth: the sender's
#    system time per 64-byte UDP datagram (sendto through the qdisc, veth
#    and the receive softirq it runs), 200,000 datagrams a round;
#  - railgate: bench_gateway's routed path with the rail shaped (rate and
#    burst never binding) against unshaped, the same 64-byte frames.
cat > /tmp/rg_send_$$.py <<'PY'
import resource, socket, sys
n = int(sys.argv[1]); s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22); buf = b"x" * 64; dst = ("198.18.9.2", 9)
r0 = resource.getrusage(resource.RUSAGE_SELF)
for _ in range(n): s.sendto(buf, dst)
print((resource.getrusage(resource.RUSAGE_SELF).ru_stime - r0.ru_stime) / n * 1e9)
PY
: > /tmp/rg_cost_$$
for round in 1 2 3 4 5 6 7; do
  for q in pfifo htb; do
    ip netns exec $a tc qdisc del dev va$$ root 2> /dev/null
    if [ $q = htb ]; then
      ip netns exec $a tc qdisc add dev va$$ root handle 1: htb default 1
      ip netns exec $a tc class add dev va$$ parent 1: classid 1:1 htb rate 40gbit ceil 40gbit 2> /dev/null
    else
      ip netns exec $a tc qdisc add dev va$$ root pfifo limit 10000
    fi
    echo "$round $q $(ip netns exec $a /usr/bin/python3 /tmp/rg_send_$$.py 200000)" >> /tmp/rg_cost_$$
  done
done
/usr/bin/python3 - /tmp/rg_cost_$$ <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for r, q, ns in rows: by.setdefault(int(r), {})[q] = float(ns)
d = [v["htb"] - v["pfifo"] for v in by.values()]
print("HTB CPU per packet: sender system time %.0f ns with HTB, %.0f with pfifo: HTB adds %.0f ns (median of %d rounds, deltas %s)" % (
    statistics.median(v["htb"] for v in by.values()), statistics.median(v["pfifo"] for v in by.values()),
    statistics.median(d), len(d), " ".join("%.0f" % x for x in d)))
PY
rm -f /tmp/rg_send_$$.py /tmp/rg_cost_$$
"$build/tools/bench_gateway" --seconds 2 --sizes 64 2> /dev/null | awk '
  $1 == "routed" { r = $5 } $1 == "routed+tc" { t = $5 }
  END { printf "railgate CPU per packet: routed %.1f ns, through a shaped rail %.1f ns: the scheduler adds %.1f ns (bench_gateway)\n", r, t, t - r }'
echo "railgate's scheduler alone (bench_qos): $("$build/tools/bench_qos")"
