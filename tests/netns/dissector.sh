#!/usr/bin/env bash
# The Wireshark dissector (tools/wireshark/railgate.lua) on a real capture:
# railgated on two af_packet rails, a 3-rank job over kernel UDP, a JOIN
# refused for another token, and crafted bad messages, captured to pcapng
# on rail 0's worker-side veth (the kernel sees af_packet rails' traffic)
# and decoded by tshark. Per-type message counts must match railgated's own
# counters for rail 0 over the same window; every message must decode; the
# bad ones must carry their expert warnings and be counted as drops.
#   dissector.sh RAILGATED RAILBENCH RAILCTL SOURCE_DIR
set -u
railgated=$1 railbench=$2 railctl=$3 src=$4
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
command -v tshark > /dev/null || { echo "SKIP: no tshark (apt install tshark)"; exit 77; }
require_netns
lua=$src/tools/wireshark/railgate.lua
log=$(mktemp -d)
d=rgwd$$ w=rgww$$
gated_pid=
trap 'cleanup_netns "$d $w" "$log"' EXIT
two_rail_netns "$d" "$w"
start_two_rail_gated "$railgated" "$d" "$w" "$log/railgated.log" 1500 --socket "$log/rg.sock"
ctl() { ip netns exec "$d" "$railctl" --socket "$log/rg.sock" "$@"; }

# Capture before any railgate traffic, so that the window is railgated's whole
# life. tshark's "Capturing on" can come before its socket takes packets (a
# loaded CI machine missed the first JOINs), so probes to port 47009, which
# railgated drops as udp_port and the checks below leave out, go until the
# capture file holds one.
ip netns exec "$w" tshark -q -i rgw0 -F pcapng -w "$log/rail0.pcapng" -f "udp port 47000 or udp port 47009" \
  > "$log/capture.log" 2>&1 &
cap=$!
captured=
for _ in $(seq 100); do
  ip netns exec "$w" python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'probe', ('198.18.0.1', 47009))"
  sleep 0.2
  [ -s "$log/rail0.pcapng" ] && tshark -r "$log/rail0.pcapng" -Y 'udp.dstport == 47009' 2> /dev/null | grep -q . &&
    captured=1 && break
done
[ -n "$captured" ] || fail "tshark did not capture a probe in 20 s: $(cat "$log/capture.log")"

# Ranks 0 and 1 of job 7 join (it assembles, waiting for rank 2); a JOIN
# for job 7 with another token is refused; then rank 2 comes.
pids=()
bench() { # RANK
  ip netns exec "$w" "$railbench" --transport udp --server 198.18.0.1 --rank "$1" --workers 3 --job 7 \
    --count 100003,1000 -n 3 -w 0 > "$log/bench-$1.log" 2>&1 &
  pids+=($!)
}
bench 0
bench 1
sleep 0.3
RAILGATE_TOKEN=$(printf %u $((RAILGATE_TOKEN ^ 1))) ip netns exec "$w" "$railbench" --transport udp --server 198.18.0.1 --rank 2 \
  --workers 3 --job 7 --count 1000 -n 1 -w 0 > "$log/other.log" 2>&1 && fail "another token joined job 7"
bench 2
for r in 0 1 2; do wait "${pids[$r]}" || fail "rank $r"; done
grep -q "Out of bounds values : 0 OK" "$log/bench-0.log" || fail "the job's values"

# Crafted bad messages: version 9; reserved flags; a CONTRIB whose count
# disagrees with its payload; world size 0.
ip netns exec "$w" python3 -c "import sys; sys.path.insert(0, '$here'); import railgate_msgs as m
m.send_crafted(['rg_version', 'rg_flags', 'rg_count_exceeds_payload', 'rg_world'])"
sleep 0.5
ctl --json stats --rail r0 > "$log/r0.json" || fail "railctl stats"
kill -INT "$cap"
wait "$cap"

decode() { tshark -o udp.try_heuristic_first:TRUE -X lua_script:"$lua" -r "$log/rail0.pcapng" "$@"; }
decode -Y railgate -T fields -e ip.dst -e railgate.type -e railgate.job -e _ws.expert.message > "$log/decoded.txt" 2> "$log/tshark.err" ||
  fail "tshark could not read the capture"
grep -v "Running as user" "$log/tshark.err" | grep . && fail "tshark reported errors (the dissector)"
total=$(decode -Y 'udp.port == 47000' | wc -l)
decoded=$(wc -l < "$log/decoded.txt")
[ "$total" -gt 1000 ] && [ "$decoded" = "$total" ] || fail "decoded $decoded of $total datagrams on port 47000"

python3 - "$here" "$log/decoded.txt" "$log/r0.json" <<'PY' || fail "the decoded capture disagrees with railgated's counters"
import collections, json, sys
sys.path.insert(0, sys.argv[1])
import railgate_msgs
to, frm = collections.Counter(), collections.Counter()
bad = []
for line in open(sys.argv[2]):
    dst, t, job, expert = (line.rstrip("\n").split("\t") + ["", "", "", ""])[:4]
    if job == "99":
        bad.append(expert)
        continue
    (to if dst == "198.18.0.1" else frm)[int(t)] += 1
c = json.load(open(sys.argv[3]))["rails"][0]
d = c["drops"]
ok = railgate_msgs.counts_match(to, frm, c)
want = ["Unknown protocol version", "Reserved flag bits set", "Count disagrees with the payload length",
        "World size out of range"]
for w_, got in zip(want, bad):
    print(f"{'ok' if w_ in got else 'MISSING'}: crafted message: expert '{w_}' in '{got}'")
    ok &= w_ in got
ok &= len(bad) == 4
for reason in ("rg_version", "rg_flags", "rg_count_exceeds_payload", "rg_world"):
    if d.get(reason, 0) != 1:
        print(f"MISSING: railgated did not count the crafted message as {reason}")
        ok = False
print("railgated's counters:", json.dumps({k: v for k, v in c.items() if not isinstance(v, dict) and v}), json.dumps(d))
sys.exit(0 if ok else 1)
PY
grep -q "refused the join" "$log/other.log" || fail "the other token's JOIN was not refused"
decode -Y 'railgate.type == 5' -T fields -e railgate.error.code -e railgate.error.text | head -n 1
# RESULTs to the (by default ECN-capable) workers carry railgated's echo:
# the wait, the queue depth (0: this rail does not shape) and CE, decoded.
echo=$(decode -Y 'railgate.type == 4 && ip.dsfield.ecn == 2' -T fields -e railgate.result.wait_us \
  -e railgate.result.depth -e railgate.result.ce | head -n 1)
echo "first echoed RESULT: wait_us, depth, ce = $echo"
[ "$(echo "$echo" | awk -F'\t' '{print NF, $2}')" = "3 0" ] || fail "the RESULT echo was not decoded: '$echo'"

# A worker's ephemeral port that another dissector claims (44818 enip,
# 37008 tzsp, 34962 pn_rt; Wireshark tries the lower port first): its
# JOIN, and the JOIN_ACK back, are still railgate's (the heuristic, with
# udp.try_heuristic_first). CI once had 2 packets of a capture decoded so.
python3 - "$log/ports.pcap" <<'PY'
import struct, sys
def frame(src, sport, dst, dport, payload):
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0, bytes(src), bytes(dst))
    return bytes(6) + bytes(6) + b"\x08\x00" + ip + udp
join = struct.pack(">BBBBIQHHHHQII", 2, 1, 0, 0, 8, 77, 0, 2, 0, 0, 0, 0, 0) + struct.pack(">QHHIQ", 1000, 0, 0, 0, 5)
ack = struct.pack(">BBBBIQHHHHQII", 2, 2, 0, 0, 8, 77, 0, 2, 0, 0, 0, 0, 0)
w, g = [198, 18, 0, 10], [198, 18, 0, 1]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    for port in (44818, 37008, 34962):
        for fr in (frame(w, port, g, 47000, join), frame(g, 47000, w, port, ack)):
            f.write(struct.pack("<IIII", 0, 0, len(fr), len(fr)) + fr)
PY
types=$(tshark -o udp.try_heuristic_first:TRUE -X lua_script:"$lua" -r "$log/ports.pcap" -T fields -e railgate.type 2> /dev/null | tr '\n' ' ')
[ "$types" = "1 2 1 2 1 2 " ] || fail "datagrams from ports other dissectors claim decoded as railgate types '$types', not 1 2 1 2 1 2"
echo "ok: JOINs from ports 44818, 37008 and 34962 and their JOIN_ACKs decoded as railgate"
# A JOIN on a worker's second rail names the job's shape (aux): 1408 B
# chunks under LAG.
python3 - "$log/shape.pcap" <<'PY'
import struct, sys
hdr = struct.pack(">BBBBIQHHHHQII", 2, 1, 0, 0, 8, 77, 1, 2, 0, 0, 0, 0, 0x80000000 | 1408)
join = hdr + struct.pack(">QHHIQ", 1000, 0, 0, 0, 5)
udp = struct.pack("!HHHH", 40001, 47000, 8 + len(join), 0) + join
ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0, bytes([198, 18, 1, 10]), bytes([198, 18, 1, 1]))
fr = bytes(12) + b"\x08\x00" + ip + udp
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    f.write(struct.pack("<IIII", 0, 0, len(fr), len(fr)) + fr)
PY
shape=$(tshark -X lua_script:"$lua" -r "$log/shape.pcap" -T fields -e railgate.join.shape_chunk -e railgate.join.shape_lag 2> /dev/null)
[ "$(echo "$shape" | tr '\t' ' ')" = "1408 1" ] || fail "the JOIN's shape word decoded as '$shape', not 1408 B under LAG"
echo "ok: a JOIN's shape word decoded: 1408 B chunks, LAG"
stop_gated
echo "PASS"
