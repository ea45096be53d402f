#!/usr/bin/env bash
# railgated's control plane end to end, the way an operator uses it:
# railgated on config/local-af_packet.toml (two af_packet rails on veth
# pairs it makes, and deletes at exit; a pair a killed railgated left is
# taken over, an interface in the way refused) in a network namespace,
# every railctl command against it, bad input of every kind (each must fail
# clearly, leave the state as it was and the daemon running), an MTU change
# during a running railbench (0 wrong values), the LAG policy, the metrics
# endpoint, DPDK telemetry, and railgated --config/--check on files.
#   control_plane.sh RAILGATED RAILCTL RAILBENCH SOURCE_ROOT
set -u
railgated=$1 railctl=$2 railbench=$3 src=$4
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
require_netns

ns=rgcp$$ dir=$(mktemp -d) prefix=rgcp$$
log=$dir
chmod 755 "$dir"
sock=$dir/railgated.sock
export RAILGATE_SOCKET=$sock
gated_pid=
cleanup() {
  [ -n "$gated_pid" ] && kill -9 "$gated_pid" 2>/dev/null
  wait 2>/dev/null
  ip netns del "$ns" 2>/dev/null
  rm -rf "$dir" "/var/run/dpdk/$prefix"
}
trap cleanup EXIT
ok() { echo "ok: $*"; }
in_ns() { ip netns exec "$ns" "$@"; }
ctl() { in_ns "$railctl" "$@"; }

ip netns add "$ns" || fail "netns"
in_ns ip link set lo up

# --- config files: --check on the shipped examples and on a broken file.
# --check judges the host too: exit 0 ready, 1 not (each problem named), 2 a
# bad file. This host has what the embedded default and local-af_packet
# need, but none of the real nodes' NICs or RDMA devices.
"$railgated" --check > "$dir/check-default.log" 2>&1 || fail "--check of the embedded default: $(cat "$dir/check-default.log")"
grep -q "eal: -l 0-1 --no-huge -m 512 --no-pci --no-shconf --no-telemetry" "$dir/check-default.log" || fail "embedded EAL flags"
grep -q "the host is ready for (embedded default)" "$dir/check-default.log" || fail "--check: host not ready"
grep -q "host: ok: rail r0 (udp 198.18.0.1:47000): the kernel's socket on 198.18.0.1, which railgated puts on lo" \
  "$dir/check-default.log" || fail "--check does not report the udp rail's address: $(cat "$dir/check-default.log")"
# [daemon] shared_nice: the weight an idle lcore takes beside a busy task.
grep -q "lcores beside a busy task: nice -10 while idle" "$dir/check-default.log" || fail "--check: no shared_nice -10"
sed 's/^\[daemon\]$/[daemon]\nshared_nice = 0/' "$src/config/embedded.toml" > "$dir/own-nice.toml"
"$railgated" --config "$dir/own-nice.toml" --check > "$dir/check-own-nice.log" 2>&1 &&
  grep -q "lcores beside a busy task: their own nice" "$dir/check-own-nice.log" ||
  fail "--check: shared_nice = 0: $(cat "$dir/check-own-nice.log")"
sed 's/^\[daemon\]$/[daemon]\nshared_nice = 3/' "$src/config/embedded.toml" > "$dir/bad-nice.toml"
"$railgated" --config "$dir/bad-nice.toml" --check > "$dir/check-bad-nice.log" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "daemon.shared_nice: 3 out of range -20..0" "$dir/check-bad-nice.log" ||
  fail "--check: shared_nice = 3 (exit $rc): $(cat "$dir/check-bad-nice.log")"
echo "ok: --check: shared_nice -10 by default, 0 keeps the lcores' own nice, 3 refused"
for f in embedded local-af_packet lab-2node dgx-8rail gateway; do
  "$railgated" --config "$src/config/$f.toml" --check > "$dir/check-$f.log" 2>&1; rc=$?
  grep -q "configuration $src/config/$f.toml is valid" "$dir/check-$f.log" || fail "--check $f.toml: $(cat "$dir/check-$f.log")"
  case $f in embedded | local-af_packet) want=0 ;; *) want=1 ;; esac
  [ $rc -eq $want ] || fail "--check $f.toml exited $rc, not $want"
done
grep -q "host: problem: rail p0 (mlx5_0 port 1): no RDMA device mlx5_0" "$dir/check-lab-2node.log" || fail "lab-2node: no RDMA problem"
grep -q "host: problem: rail gpu0 (0000:0c:00.0): no such PCI device" "$dir/check-dgx-8rail.log" || fail "dgx: no PCI problem"
grep -q "eal: -l 0,2-9,66-73 --socket-mem 2048,2048 --in-memory$" "$dir/check-dgx-8rail.log" || fail "dgx: a real EAL"
"$railgated" --rail net_af_packet0,iface=rg-none0 --ip 10.0.0.1 --check > "$dir/check-iface.log" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "no interface rg-none0 in this network namespace" "$dir/check-iface.log" ||
  fail "--check of a missing interface (exit $rc): $(cat "$dir/check-iface.log")"
"$railgated" --check --metrics 0.0.0.0:9477 > "$dir/check-public.log" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "is not a loopback address" "$dir/check-public.log" || fail "--metrics 0.0.0.0 accepted (exit $rc)"
"$railgated" --check --metrics 0.0.0.0:9477 --metrics-public > "$dir/check-public.log" 2>&1 ||
  fail "--metrics-public refused: $(cat "$dir/check-public.log")"
ok "--check: the embedded default and local-af_packet ready here; lab-2node, dgx-8rail and gateway valid with their host problems named"
printf '[[rail]]\nname = "r0"\ndevargs = "net_null0"\nip = "10.0.0.1"\nmtu = 70000\nmttu = 1\n' > "$dir/bad.toml"
"$railgated" --config "$dir/bad.toml" --check > "$dir/check-bad.log" 2>&1; rc=$?
[ $rc -eq 2 ] || fail "--check of a bad file exited $rc"
grep -q "bad.toml:5:7: rail\[0\].mtu: MTU 70000 out of range 576..9216" "$dir/check-bad.log" || fail "bad.toml: mtu error"
grep -q "bad.toml:6:1: rail\[0\].mttu: unknown key (did you mean 'mtu'?)" "$dir/check-bad.log" || fail "bad.toml: key error"
ok "config --check: 3 examples valid, a broken file rejected with file:line:col errors"

# --- railgated on its embedded default (no config, no --rail): two udp
# rails, their addresses put on lo, a job over them, the addresses gone at exit.
ip netns exec "$ns" "$railgated" --socket "$sock" --metrics off > "$dir/embedded.log" 2>&1 &
gated_pid=$!
wait_ready "$dir/embedded.log"
ctl status > "$dir/status-embedded.log" || fail "status of the embedded default"
for r in 0 1; do
  grep -qE "^r$r +socket +udp +lo .* 198.18.$r.1 .* 9000 " "$dir/status-embedded.log" || fail "status: r$r is not a udp rail on lo at MTU 9000: $(cat "$dir/status-embedded.log")"
  in_ns ip -4 addr show dev lo | grep -q "198.18.$r.1/32" || fail "198.18.$r.1 is not on lo"
done
pids=()
for k in 0 1; do
  in_ns "$railbench" --transport udp --server 198.18.0.1 --rank $k --workers 2 --count 1000003 -n 2 -w 1 --job 77 \
    > "$dir/embedded-$k.log" 2>&1 &
  pids+=($!)
done
wait "${pids[0]}" && wait "${pids[1]}" || fail "a job on the embedded default"
grep -q "Out of bounds values : 0 OK" "$dir/embedded-0.log" || fail "the embedded default's job: wrong values"
stop_gated
in_ns ip -4 addr show dev lo | grep -q "198.18" && fail "the embedded default left its addresses on lo"
ok "the embedded default: two udp rails at MTU 9000 on lo, a job bit-exact, the addresses removed at exit"

# --- railgated on local-af_packet.toml (DPDK af_packet rails on veth pairs),
# its silent clients dropped after 1 s, not 5 (client_timeout_ms: an
# unfinished request and a client that does not read, below).
sed '/^\[daemon\]/a client_timeout_ms = 1000' "$src/config/local-af_packet.toml" > "$dir/local-af_packet.toml"
grep -q "^client_timeout_ms = 1000" "$dir/local-af_packet.toml" || fail "client_timeout_ms not set"
ip netns exec "$ns" "$railgated" --config "$dir/local-af_packet.toml" --socket "$sock" -- -l 0-1 --no-huge --no-pci -m 512 --file-prefix "$prefix" \
  --log-level lib.eal:error --log-level pmd.net.tap:critical > "$dir/railgated.log" 2>&1 &
gated_pid=$!
wait_ready "$dir/railgated.log"
alive() { kill -0 "$gated_pid" 2>/dev/null || fail "railgated died: $*"; }

# Every command's --help.
for c in "" status rail gid policy stats latency nccl-env; do
  "$railctl" $c --help > /dev/null || fail "railctl $c --help"
done
ok "--help on every command"

ctl status > "$dir/status.log" || fail "status"
grep -qE "^r0 +net_af_packet0 +net_af_packet +rgp0 .* 198.18.0.1 " "$dir/status.log" || fail "status lists r0"
ctl --json status | python3 -c 'import json,sys; d=json.load(sys.stdin); assert len(d["rails"]) == 2 and d["daemon"]["policy"] == "rail"
assert [(r["ifname"], r["host_ifname"]) for r in d["rails"]] == [("rgp0", "rg0"), ("rgp1", "rg1")], d["rails"]' \
  || fail "status --json"
ctl rail list | grep -q "^r1 " || fail "rail list"
ctl rail show r1 | grep -qE "^ip +198.18.1.1" || fail "rail show"
ctl --json rail show r0 | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["mtu"] == 1500 and "counters" in d' \
  || fail "rail show --json"
ok "status, rail list, rail show (text and --json)"
# railctl built with ASan skips its leak check unless asked
# (control/railctl_asan.cpp): asked here, on a table, JSON and a refusal.
# A leak ends railctl with LeakSanitizer's report (abort_on_error: 134).
for args in "status" "--json stats" "rail show nosuch"; do
  # shellcheck disable=SC2086
  ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=1 ctl $args > "$dir/out.log" 2> "$dir/err.log"; rc=$?
  case $args in rail*) want=1 ;; *) want=0 ;; esac
  [ $rc -eq $want ] || fail "railctl $args with its leak check: exit $rc, not $want: $(cat "$dir/err.log")"
done

snapshot() { ctl --json rail list | python3 -c 'import json,sys; print([(r["name"], r["mtu"], r["mtu_target"]) for r in json.load(sys.stdin)["rails"]])'; }
policy_now() { ctl --json policy show | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["mode"], d["hash"])'; }
before=$(snapshot) policy_before=$(policy_now)
expect_fail() { # WHAT EXPECTED_MESSAGE ARGS...
  local what=$1 msg=$2; shift 2
  ctl "$@" > "$dir/out.log" 2> "$dir/err.log"; local rc=$?
  [ $rc -ne 0 ] || fail "$what: exit 0"
  grep -qF -- "$msg" "$dir/err.log" || { cat "$dir/err.log"; fail "$what: message"; }
  [ "$(snapshot)" = "$before" ] || fail "$what changed the rails"
  [ "$(policy_now)" = "$policy_before" ] || fail "$what changed the policy"
  alive "$what"
}
expect_fail "mtu 0" "MTU 0 out of range" rail set r0 mtu 0
expect_fail "mtu 70000" "MTU 70000 out of range 576..9216" rail set r0 mtu 70000
expect_fail "mtu abc" "MTU 'abc' is not a number" rail set r0 mtu abc
expect_fail "mtu beyond the rail" "out of range 576..9000 (the rail's mtu_max)" rail set r0 mtu 9216
expect_fail "unknown rail" "rail 'r9' does not exist (rails: r0, r1)" rail set r9 mtu 1500
expect_fail "gid index beyond the table" "GID index 300 out of range 0..255" rail set r0 gid-index 300
expect_fail "gid index on a DPDK rail" "has no GID table" rail set r0 gid-index 3
expect_fail "gid index auto on a DPDK rail" "has no GID table" rail set r0 gid-index auto
expect_fail "misspelt policy" "'lga' is not rail or lag" policy set lga
expect_fail "hash with rail policy" "--hash l2|l3l4 goes with lag" policy set rail --hash l2
expect_fail "rail add with a taken address" "address 198.18.0.1 is rail r0's" rail add r2 net_tap2,iface=rg2 198.18.0.1
expect_fail "rail add of a bad device" "cannot probe bogus_dev" rail add r2 bogus_dev 198.18.2.1
expect_fail "rail add with a taken name" "rail 'r1' exists" rail add r1 net_tap2,iface=rg2 198.18.2.1
expect_fail "rail remove of the join rail" "it cannot be removed" rail remove r0
expect_fail "unknown command" "unknown command 'frobnicate'" frobnicate
expect_fail "unknown rail for stats" "rail 'nope' does not exist" stats --rail nope
expect_fail "unknown rail for job list" "rail 'nope' does not exist" job list --rail nope
expect_fail "job without list" "job needs list" job show
expect_fail "job list with an extra word" "job list: unexpected 'now'" job list now
[ "$(ctl job list)" = "no jobs" ] || fail "job list with no job running: $(ctl job list 2>&1)"
# Garbage straight on the socket: an error line each, then a good request works.
in_ns python3 - "$sock" > "$dir/garbage.log" <<'PY' || fail "garbage on the socket"
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rwb")
for g in [b"hello\n", b"\x00\xff\xfe\n", b"{\"version\":1}\n", b"{\"version\":9,\"command\":\"status\"}\n",
          b"{\"version\":1,\"command\":\"rail.set\",\"args\":{\"rail\":\"r0\",\"mtu\":\"9000\"}}\n",
          b"{\"version\":1,\"command\":\"rail.set\",\"args\":{\"rail\":\"r0\",\"mtu\":1500,\"x\":1}}\n"]:
    f.write(g); f.flush()
    r = json.loads(f.readline()); assert r["ok"] is False and r["error"], r; print(r["error"])
f.write(b"{\"version\":1,\"command\":\"status\"}\n"); f.flush()
assert json.loads(f.readline())["ok"] is True
PY
# A peer that never finishes its request, and one far too large.
in_ns python3 - "$sock" >> "$dir/garbage.log" <<'PY' || fail "unfinished / oversized requests"
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"{\"version\":1,"); s.settimeout(15)
r = json.loads(s.makefile("rb").readline()); assert "incomplete request: no newline within 1000 ms" in r["error"], r
print(r["error"])
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(15)
try:
    s.sendall(b"x" * 200000)
except OSError:
    pass
r = json.loads(s.makefile("rb").readline()); assert "larger than" in r["error"], r; print(r["error"])
PY
[ "$(snapshot)" = "$before" ] || fail "garbage changed the rails"
alive "garbage"
# A client without permission (socket 0660 root:root; nobody is neither).
setpriv --reuid=65534 --regid=65534 --clear-groups "$railctl" --socket "$sock" status > "$dir/out.log" 2> "$dir/err.log"; rc=$?
[ $rc -eq 3 ] || fail "unprivileged client exit $rc (3: railgated not reachable)"
grep -q "permission denied" "$dir/err.log" || fail "unprivileged client message"
alive "unprivileged client"
ok "bad input: 15 bad commands, 8 bad socket requests, no permission: all refused clearly, state unchanged"

# --- an MTU change while railbench runs: 0 wrong values.
# run_bench JOB WORKERS: 2 operations of each size ($RUN: other railbench
# arguments, as "-D 3"); rank 0's log in $dir/bench-JOB-0.log
run_bench() {
  local pids=() rc=0
  for r in $(seq 0 $(($2 - 1))); do
    # shellcheck disable=SC2086 # RUN is words
    in_ns timeout 120 "$railbench" --transport udp --server 198.18.0.1 --rank "$r" --workers "$2" \
      --count 4000037,1001 ${RUN:--n 2} -w 0 --job "$1" > "$dir/bench-$1-$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  [ $rc -eq 0 ] && grep -q "Out of bounds values : 0 OK" "$dir/bench-$1-0.log"
}
# -D: the ranks agree when to stop. Rank 0's time is up after 0.3 s, rank
# 1's after 60: both stop after the same operation, rank 1 at rank 0's time
# (had it gone on alone, its next operation would never end).
for r in 0 1; do
  in_ns timeout 30 "$railbench" --transport udp --server 198.18.0.1 --rank $r --workers 2 --count 1001,100003 \
    -w 1 -D "$([ $r = 0 ] && echo 0.3 || echo 60)" --job 9 --json > "$dir/dur-$r.json" 2> "$dir/dur-$r.log" &
  pids[r]=$!
done
started=$(date +%s)
for r in 0 1; do wait "${pids[r]}" || fail "railbench -D, rank $r: $(tail -n 3 "$dir/dur-$r.log")"; done
[ $(($(date +%s) - started)) -lt 15 ] || fail "railbench -D: rank 1 ran on to its own time"
python3 - "$dir/dur-0.json" "$dir/dur-1.json" <<'PY' || fail "railbench -D: $(cat "$dir"/dur-*.json)"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert a["duration_s"] == 0.3 and b["duration_s"] == 60 and "iters" not in a, (a, b)
n = [r["iters"] for r in a["results"]]
assert n == [r["iters"] for r in b["results"]] and all(x >= 1 for x in n) and n[0] > 1, (a, b)
assert a["wrong"] == 0 and b["wrong"] == 0, (a, b)
PY
grep -q "^# timed iterations per size in 0.3 s: [0-9]" "$dir/dur-0.log" || fail "railbench -D: no count of timed iterations"
ok "railbench -D: rank 0's 0.3 s and rank 1's 60 s end after the same operation ($(sed -n 's/^# timed iterations per size in 0.3 s: //p' "$dir/dur-0.log") per size)"

# 2 s of each size (-D is per size), the changes done in under a second
# once the job runs (the check below fails if it ended first).
RUN="-D 2" run_bench 10 2 &
bench=$!
for _ in $(seq 100); do ctl job list 2>/dev/null | grep -q "^r0 *10 " && break; sleep 0.05; done
sleep 0.2
ctl rail set r0 mtu 1000 > "$dir/mtu1.log" || fail "set mtu 1000"
ctl rail set r1 mtu 1000 > "$dir/mtu2.log" || fail "set mtu 1000 on r1"
sleep 0.5
ctl rail set r0 mtu 1500 > "$dir/mtu3.log" || fail "set mtu 1500"
kill -0 $bench 2>/dev/null || fail "railbench ended before the MTU changes (make it longer)"
wait $bench || fail "railbench across MTU changes"
cat "$dir"/mtu*.log
ok "MTU 1500->1000->1500 on r0 and 1500->1000 on r1 during railbench: 0 wrong values"
run_bench 11 2 || fail "railbench after the MTU changes"
grep -q "chunk 896 B" "$dir/bench-11-0.log" || fail "new job did not get the new chunk (r1 at MTU 1000: 896 B)"
ok "the next job uses the new chunk size"
ctl rail set r1 mtu 1500 > /dev/null || fail "restore r1"
# Jumbo frames on both rails: the veth peers the workers send on follow.
ctl rail set r0 mtu 9000 > /dev/null && ctl rail set r1 mtu 9000 > /dev/null || fail "set mtu 9000"
for i in rg0 rg1; do in_ns ip link show "$i" | grep -q " mtu 9000 " || fail "$i did not follow its rail to MTU 9000"; done
run_bench 12 2 || fail "railbench at MTU 9000"
grep -q "chunk 8896 B" "$dir/bench-12-0.log" || fail "the job at MTU 9000 did not get 8896-byte chunks"
ctl rail set r0 mtu 1500 > /dev/null && ctl rail set r1 mtu 1500 > /dev/null || fail "restore mtu 1500"
in_ns ip link show rg0 | grep -q " mtu 1500 " || fail "rg0 did not follow r0 back to MTU 1500"
ok "MTU 9000 on both rails: the workers' veth peers follow, the next job uses 8896-byte chunks"

# --- rails added live and removed between jobs
ctl rail add r2 net_tap2,iface=rg2 198.18.2.1 --host-ip 198.18.2.254/24 | grep -q "rail r2 added" || fail "rail add"
ctl rail list | grep -q "^r2 .*198.18.2.1" || fail "rail list after add"
run_bench 13 2 || fail "railbench after rail add"
grep -q "3 rails" "$dir/bench-13-0.log" || fail "the next job did not stripe over the added rail"
# 1 s of each size over 3 rails, the removal asked once the job is listed
# on r2 (a job that ended first lets it through: "removed a rail in use").
RUN="-D 1" run_bench 14 2 &
bench=$!
for _ in $(seq 100); do ctl job list 2>/dev/null | grep -q "^r2 *14 " && break; sleep 0.05; done
ctl rail remove r2 > "$dir/out.log" 2> "$dir/err.log" && fail "removed a rail in use"
grep -q "carries 1 job(s); remove it between jobs" "$dir/err.log" || fail "remove in use: message"
wait $bench || fail "railbench while a removal was refused"
ctl rail remove r2 | grep -q "rail r2 removed" || fail "rail remove"
in_ns ip link show rg2 > /dev/null 2>&1 && fail "the removed tap rail's interface is still there"
run_bench 15 2 || fail "railbench after rail remove"
grep -q "2 rails" "$dir/bench-15-0.log" || fail "the next job still used the removed rail"
ok "rail add (live, next job stripes over 3 rails), remove refused while a job uses it, remove between jobs"

# An af_packet rail added again on an interface that a removed rail had
# lowered: railgated gives the interface the rail's MTU, and a job at MTU
# 9000 runs over it. Before, it took the interface as it found it (af_packet
# states a 1500 limit, beyond which the kernel interface carries the rail):
# the kernel dropped every frame above 1500 unseen, while small PINGs were
# answered (live_changes.sh seed 3: a job retransmitted for 60 s).
in_ns ip link add rgx mtu 9000 type veth peer name rgxp mtu 9000 || fail "veth rgx"
in_ns ip addr add 198.18.2.254/24 dev rgxp && in_ns ip link set rgx up && in_ns ip link set rgxp up || fail "rgx up"
csum_in_software "$ns" rgxp
mtu_of() { in_ns cat "/sys/class/net/$1/mtu"; }
ctl rail add r2 net_af_packet9,iface=rgx 198.18.2.1 --mtu 9000 > "$dir/out.log" 2> "$dir/err.log" &&
  fail "an af_packet rail at MTU 9000 in 2048-byte ring frames"
grep -q "MTU 9000 is more than net_af_packet carries (1968) in ring frames of 2048 B: give its devargs framesz=9088" \
  "$dir/err.log" || fail "af_packet ring frames too small: $(cat "$dir/err.log")"
af="framesz=10240,blocksz=20480,framecnt=1024"
ctl rail add r2 "net_af_packet9,iface=rgx,$af" 198.18.2.1 --mtu 9000 | grep -q "rail r2 added" || fail "af_packet rail add"
ctl rail set r2 mtu 1500 > /dev/null || fail "r2 mtu 1500"
[ "$(mtu_of rgx)" = 1500 ] || fail "rgx did not follow r2 to MTU 1500 ($(mtu_of rgx))"
ctl rail remove r2 | grep -q "rail r2 removed" || fail "af_packet rail remove"
ctl rail add r2 "net_af_packet10,iface=rgx,$af" 198.18.2.1 --mtu 9000 | grep -q "rail r2 added" ||
  fail "af_packet rail added again"
[ "$(mtu_of rgx)" = 9000 ] || fail "rail r2 added at MTU 9000 on rgx, which kept MTU $(mtu_of rgx)"
ctl rail set r0 mtu 9000 > /dev/null && ctl rail set r1 mtu 9000 > /dev/null || fail "r0, r1 mtu 9000"
run_bench 19 2 || fail "railbench over the af_packet rail added again: $(tail -n 2 "$dir/bench-19-0.log")"
grep -q "3 rails, dtype fp32, chunk 8896 B" "$dir/bench-19-0.log" || fail "job 19: not 3 rails of 8896 B chunks"
ctl rail set r0 mtu 1500 > /dev/null && ctl rail set r1 mtu 1500 > /dev/null || fail "r0, r1 back to mtu 1500"
ctl rail remove r2 > /dev/null || fail "af_packet rail removed again"
in_ns ip link del rgx
ok "af_packet rail: refused at MTU 9000 in 2048-byte frames; added again at 9000 on a veth a removed rail left at 1500, the veth follows, a 3-rail job of 8896 B chunks is bit-exact"

# --- policy. Under LAG each worker's flow uses one member (l3l4: hashed
# per rank; l2: all on the job's home member) and the home member aggregates.
# Jobs 16 and 17 with 4 workers on 2 rails: by wire::lag_member, with this
# token (the hash takes it in), job 16's flows land on both members (home
# r0), job 17's home is r1.
lag_token=8241984707376542821 # 0x7261696c67617465
contribs() { ctl --json stats | python3 -c 'import json,sys; print(" ".join(str(r["contributions"]) for r in json.load(sys.stdin)["rails"]))'; }
ctl policy set lag --hash l3l4 | grep -q "policy lag (hash l3l4)" || fail "policy set lag"
[ "$(policy_now)" = "lag l3l4" ] || fail "policy show after set lag"
read -r a0 a1 <<< "$(contribs)"
RAILGATE_TOKEN=$lag_token run_bench 16 4 || fail "railbench under lag l3l4"
read -r b0 b1 <<< "$(contribs)"
[ $((b0 - a0)) -gt 0 ] && [ $((b1 - a1)) -gt 0 ] || fail "lag l3l4: flows did not use both members ($a0/$a1 -> $b0/$b1)"
ctl policy set lag --hash l2 | grep -q "policy lag (hash l2)" || fail "policy set lag l2"
RAILGATE_TOKEN=$lag_token run_bench 17 4 || fail "railbench under lag l2"
read -r c0 c1 <<< "$(contribs)"
[ $((c0 - b0)) -eq 0 ] && [ $((c1 - b1)) -gt 0 ] || fail "lag l2: flows not all on member r1 ($b0/$b1 -> $c0/$c1)"
ctl policy set rail | grep -q "policy rail" || fail "policy set rail"
run_bench 18 2 || fail "railbench back under rail"
ok "policy lag l3l4 (4 flows over both members: +$((b0 - a0))/+$((b1 - a1)) contributions), lag l2 (one member: +$((c0 - b0))/+$((c1 - b1))), then rail; all bit-exact"

# --- stats and latency
ctl stats > "$dir/stats.log" || fail "stats"
grep -qE "contributions [1-9]" "$dir/stats.log" || fail "stats counts contributions"
ctl stats --rail r1 | grep -q "^rail r1" || fail "stats --rail"
grep -qE "^lcore [0-9]+ \(r0, r1\): waited [0-9.]+ s for its CPU" "$dir/stats.log" || fail "stats: no lcore line"
ctl --json stats --rail r1 | python3 -c '
import json, sys
l = json.load(sys.stdin)["lcores"]
assert len(l) == 1 and "r1" in l[0]["rails"] and l[0]["runq_wait_seconds"] >= 0, l
assert l[0]["core_shared"] >= 0 and l[0]["core_shared_seconds"] >= 0, l' ||
  fail "stats --rail r1: not its lcore, or no CPU-sharing counters"
ctl stats --watch 0.2 --count 2 | grep -q "rate: rx" || fail "stats --watch"
# A reader that stops early ends the watch: exit 0, not 141 (SIGPIPE).
(set -o pipefail; timeout 20 ip netns exec "$ns" "$railctl" stats --watch 0.1 | head -n 1 > /dev/null) ||
  fail "stats --watch | head: exit $? (the watch must end quietly when its reader does)"
ctl latency > "$dir/latency.log" || fail "latency"
grep -qE "min [0-9.]+ +p50 [0-9.]+ +p90 [0-9.]+ +p99 [0-9.]+ +p99.9 [0-9.]+ +p99.99 [0-9.]+ +max" "$dir/latency.log" || fail "latency figures"
grep -q "t_typical\[usec\]" "$dir/latency.log" || fail "perftest summary"
grep -qE "\|#+" "$dir/latency.log" || fail "bar chart"
ctl latency --rail r0 --job 11 | grep -q "rail r0, job 11" || fail "latency --job"
# A job the rail keeps no histograms of (never run, or past the last 8 ended): said so, not "no samples".
ctl latency --rail r0 --job 999 > /dev/null 2> "$dir/err.log" && fail "latency --job of a job never run"
grep -q "job 999 neither runs on rail r0 nor is among the 8 joined last of the jobs that ended there" "$dir/err.log" ||
  fail "latency --job 999: $(cat "$dir/err.log")"
ctl latency --plot "$dir/lat.svg" > /dev/null || fail "latency --plot"
grep -q "<polyline" "$dir/lat.svg" || fail "svg"
ctl latency --rail r1 --reset > /dev/null || fail "latency --reset"
ctl latency --rail r1 | grep -q "no samples" || fail "reset cleared r1"
ctl latency --rail r0 | grep -q "no samples" && fail "reset of r1 cleared r0"
ctl latency --worker > "$dir/worker-rtt.log" || fail "latency --worker"
grep -q "worker round trip, rail all (contribution sent -> result received" "$dir/worker-rtt.log" || fail "worker rtt title"
grep -q "no samples" "$dir/worker-rtt.log" && fail "no worker round trips reported"
ctl latency --worker --rail r0 --job 11 | grep -qE "p99 [0-9.]+" || fail "latency --worker --job"
ctl --json stats --rail r0 | python3 -c 'import json,sys; assert json.load(sys.stdin)["rails"][0]["rtt_reports"] > 0' ||
  fail "rtt_reports counter"
ok "stats (all, --rail, --watch) and latency (all, --rail, --job, --plot, --reset, --worker)"
# A running job's histograms outlast the jobs that come and go beside it.
# Before, a rail kept 8 entries for all jobs, least recently joined first:
# a running job lost its own once 8 more had joined after it.
job_samples() { ctl --json latency --rail r0 --job "$1" 2> /dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["count"])' 2> /dev/null; }
# 5 s of each size, against the 10 short jobs' 2 s here in release (about
# 4 under ASan).
RUN="-D 5" run_bench 31 2 &
long=$!
for _ in $(seq 100); do
  before=$(job_samples 31)
  [ "${before:-0}" -gt 0 ] && break
  sleep 0.1
done
[ "${before:-0}" -gt 0 ] || fail "job 31 recorded no aggregation latency"
for j in $(seq 40 49); do
  shorts=()
  for r in 0 1; do
    in_ns timeout 60 "$railbench" --transport udp --server 198.18.0.1 --rank $r --workers 2 --count 1001 -n 1 -w 0 \
      --job "$j" > "$dir/short-$j-$r.log" 2>&1 &
    shorts+=($!)
  done
  for p in "${shorts[@]}"; do wait "$p" || fail "short job $j: $(tail -n 3 "$dir/short-$j-0.log")"; done
done
kill -0 "$long" 2> /dev/null || fail "job 31 ended before the 10 short jobs did (make it longer)"
after=$(job_samples 31)
[ "${after:-0}" -ge "$before" ] || fail "job 31's histogram lost beside 10 short jobs: $before samples, then ${after:-none}"
wait "$long" || fail "job 31 beside 10 short jobs"
ok "a running job's latency histogram kept beside 10 jobs that came and went ($before, then $after samples)"

# --- a job's run that left without its LEAVEs (killed, or its LEAVEs
# lost): job 20's two ranks join both rails for 1000 elements and go
# silent, assembled with nothing in flight, which only the 10-minute idle
# time would end. The job's next run, with another count, takes it over
# once its ranks have been silent for the stall time (before 08a00e5 it was
# refused, "job 20 has max_count 1000", for those 10 minutes).
in_ns python3 - "$RAILGATE_TOKEN" "$here" <<'PY' || fail "the left-behind job's JOINs"
import os, socket, sys
sys.path.insert(0, sys.argv[2])
import railgate_msgs as m
token = int(sys.argv[1])
for rank in (0, 1):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    nonce = int.from_bytes(os.urandom(8), "big")
    for rail in ("198.18.0.1", "198.18.1.1"):
        s.sendto(m.join(20, token, rank, 2, 1000, nonce), (rail, 47000))
        a = s.recv(2048)
        assert a[1] == m.JOIN_ACK, f"rank {rank} on {rail}: not a JOIN_ACK (type {a[1]})"
PY
sleep 1.5
run_bench 20 2 || fail "the job's next run, with another count: $(grep -h railbench "$dir"/bench-20-*.log | head -n 2)"
ok "a job's part left without its LEAVEs gives way to the job's next run with another count after the stall time"

# --- a rank that joins after an MTU change runs the job as the ranks
# before it did: its chunk is the job's, fixed when the job was created
# (before, its JOIN_ACK gave the rail's new chunk and the ranks chunked the
# job differently). Rank 0 of job 19 joins at MTU 1500 (1408 B chunks) and
# waits; both rails are lowered to 1000 (their ports drain: job 19 holds
# them at 1500), then raised to 9000; rank 1 joins after each change.
jobs_on() { ctl --json status | python3 -c 'import json,sys; print(min(r["active_jobs"] for r in json.load(sys.stdin)["rails"]))'; }
across_change() { # JOB MTU
  local pids=() r
  in_ns timeout 60 "$railbench" --transport udp --server 198.18.0.1 --rank 0 --workers 2 --count 1000003 -n 2 -w 0 \
    --job "$1" > "$dir/across-$1-0.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do [ "$(jobs_on)" -ge 1 ] && break; sleep 0.05; done
  [ "$(jobs_on)" -ge 1 ] || fail "job $1: rank 0 did not join both rails"
  # railctl job list: the job on both rails, rank 0 in it, rank 1 not yet;
  # on r0, rank 0's barrier (a one-element allreduce) waits in slot 0 for
  # rank 1; r1 has nothing of it yet. Polled: rank 0 sends its barrier
  # after its JOINs are answered, so the first list may come before it.
  local listed=
  for _ in $(seq 100); do
    ctl --json job list > "$dir/jobs-$1.json" || fail "job list"
    python3 - "$dir/jobs-$1.json" "$1" 2> "$dir/jobs-$1.err" << 'EOF' && { listed=1; break; }
import json, sys
jobs = [j for j in json.load(open(sys.argv[1]))["jobs"] if j["job"] == int(sys.argv[2])]
assert sorted(j["rail"] for j in jobs) == ["r0", "r1"], jobs
for j in jobs:
    assert j["world"] == 2 and j["joined"] == [0] and not j["assembled"], j
    assert j["chunk_bytes"] == 1408 and j["policy"] == "rail" and j["rails"] == 2, j
    assert j["heard_ms"][1] == -1 and 0 <= j["heard_ms"][0] < 10000, j
    if j["rail"] == "r1":
        assert "oldest_partial" not in j, j
    else:
        o = j["oldest_partial"]
        assert o["slot"] == 0 and o["gen"] == 0 and o["offset"] == 0 and o["waiting_for"] == [1], j
EOF
    sleep 0.05
  done
  [ -n "$listed" ] || fail "job list while job $1 assembles: $(cat "$dir/jobs-$1.err"; ctl job list 2>&1)"
  ctl job list | grep -q "assembling" || fail "railctl job list does not say the job assembles: $(ctl job list 2>&1)"
  ctl rail set r0 mtu "$2" > "$dir/across-$1-mtu0.log" && ctl rail set r1 mtu "$2" > "$dir/across-$1-mtu1.log" ||
    fail "job $1: rail set mtu $2"
  in_ns timeout 60 "$railbench" --transport udp --server 198.18.0.1 --rank 1 --workers 2 --count 1000003 -n 2 -w 0 \
    --job "$1" > "$dir/across-$1-1.log" 2>&1 &
  pids+=($!)
  for r in 0 1; do wait "${pids[$r]}" || fail "job $1 across MTU $2: rank $r failed: $(tail -n 2 "$dir/across-$1-$r.log")"; done
  grep -q "Out of bounds values : 0 OK" "$dir/across-$1-0.log" || fail "job $1 across MTU $2: wrong values"
  for r in 0 1; do grep -q "chunk 1408 B" "$dir/across-$1-$r.log" || fail "job $1: rank $r did not run the job's 1408 B chunks"; done
}
across_change 19 1000
grep -q "draining" "$dir/across-19-mtu0.log" || fail "MTU 1000 under job 19 did not drain: $(cat "$dir/across-19-mtu0.log")"
[ "$(ctl --json rail show r0 | python3 -c 'import json,sys; print(json.load(sys.stdin)["mtu"])')" = 1000 ] ||
  fail "r0's port did not move to MTU 1000 once job 19 left"
ctl rail set r0 mtu 1500 > /dev/null && ctl rail set r1 mtu 1500 > /dev/null || fail "restore mtu 1500"
across_change 20 9000
ctl rail set r0 mtu 1500 > /dev/null && ctl rail set r1 mtu 1500 > /dev/null || fail "restore mtu 1500"
ok "a rank joining after MTU 1500->1000 (the ports draining) and 1500->9000 runs the job's 1408 B chunks: bit-exact"

# --- railctl job abort: rank 0 of job 21 (--retry 3) joins both rails and
# waits in its barrier for rank 1; the operator ends the job. Rank 0 fails
# at once, told who ended it and why, and does not re-join; no rail holds
# the job any more; a second abort, and bad arguments, are refused.
in_ns timeout 60 "$railbench" --transport udp --server 198.18.0.1 --rank 0 --workers 2 --count 1000 -n 2 -w 0 \
  --retry 3 --job 21 > "$dir/abort-21.log" 2>&1 &
abort_pid=$!
for _ in $(seq 100); do [ "$(jobs_on)" -ge 1 ] && break; sleep 0.05; done
[ "$(jobs_on)" -ge 1 ] || fail "job 21: rank 0 did not join both rails"
ctl job abort 21 --why "maintenance window" > "$dir/abort.log" 2>&1 || fail "job abort 21: $(cat "$dir/abort.log")"
grep -q "^job 21 ended on r0, r1: 2 members told; they do not re-join$" "$dir/abort.log" ||
  fail "job abort said: $(cat "$dir/abort.log")"
wait $abort_pid && fail "rank 0 of job 21 finished although the operator ended its job"
grep -q "the operator ended job 21 (railctl job abort): maintenance window" "$dir/abort-21.log" ||
  fail "rank 0 was not told who ended job 21: $(tail -n 3 "$dir/abort-21.log")"
grep -q "re-joining" "$dir/abort-21.log" && fail "rank 0 re-joined the job the operator ended: $(cat "$dir/abort-21.log")"
[ "$(ctl job list)" = "no jobs" ] || fail "job 21 left behind: $(ctl job list 2>&1)"
[ "$(ctl --json stats | python3 -c 'import json,sys; print(sum(r.get("operator_aborts", 0) for r in json.load(sys.stdin)["rails"]))')" = 2 ] ||
  fail "operator_aborts: $(ctl --json stats)"
before=$(snapshot) policy_before=$(policy_now) # the rails as the MTU changes above left them
expect_fail "job abort of a job no rail holds" "job 21 runs on no rail" job abort 21
expect_fail "job abort without a job" "job abort J [--why TEXT]" job abort
expect_fail "job abort of a word" "job 'x' is not a job id" job abort x
expect_fail "job abort of an id past 32 bits" "job '4294967296' is not a job id (0..4294967295)" job abort 4294967296
expect_fail "latency of an id past 32 bits" "job '4294967296' is not a job id" latency --job 4294967296
# Ten-digit ids reach railgated (the PyTorch hook's go to 2^30 + 4; railctl
# took 9 digits at most for --job): 1073741828 runs on no rail.
expect_fail "job abort of a ten-digit id" "job 1073741828 runs on no rail" job abort 1073741828
expect_fail "latency of a ten-digit id" "job 1073741828 neither runs on any rail" latency --job 1073741828
expect_fail "job abort with an unprintable why" "printable ASCII only" job abort 5 --why $'a\tb'
ok "job abort: rank 0 of job 21 told the operator ended it, not re-joined (--retry 3), the job gone from both rails"

# --- gid list on a fixture sysfs tree, and nccl-env
mkdir -p "$dir/ib/rxe0/ports/1/gids" "$dir/ib/rxe0/ports/1/gid_attrs/types" "$dir/ib/rxe0/ports/1/gid_attrs/ndevs"
echo 0000:0000:0000:0000:0000:ffff:c612:0001 > "$dir/ib/rxe0/ports/1/gids/1"
echo "RoCE v2" > "$dir/ib/rxe0/ports/1/gid_attrs/types/1"
echo dummy0 > "$dir/ib/rxe0/ports/1/gid_attrs/ndevs/1"
RAILGATE_SYSFS_IB=$dir/ib ctl gid list > "$dir/gid.log" || fail "gid list"
grep -qE "^rxe0 +1 +1 +0000:0000:0000:0000:0000:ffff:c612:0001 198.18.0.1 +v2 +dummy0" "$dir/gid.log" || fail "gid list rxe0"
grep -qE "^r0 .*198.18.0.1 .*rg0" "$dir/gid.log" || fail "gid list dpdk rail"
RAILGATE_SYSFS_IB=$dir/ib ctl gid list r1 | grep -q "^r1 " || fail "gid list r1"
RAILGATE_SYSFS_IB=$dir/ib ctl gid list nothing > /dev/null 2>&1 && fail "gid list of an unknown name"
ctl nccl-env | grep -q "^export NCCL_SOCKET_IFNAME==rg0,rg1" || fail "nccl-env"
ok "gid list (fixture sysfs + DPDK rails), nccl-env"

# --- rail add, remove, show and set in every order (rails by name, never by
# a position in a list that skips removed ones): each step answers or fails
# clearly, railgated lives, and the rails come back as they were.
# (Each add probes a new tap device: DPDK 22.11 does not attach a vdev name
# again after it was detached in the same process.)
# Every third of the 24 orders (each rail add probes a tap device: seconds;
# RAILGATE_ORDERS=all runs them all), every sixth under the sanitizers
# (RAILGATE_SANITIZED=1, `meson test --setup sanitize`).
every=3
[ "${RAILGATE_ORDERS:-}" = all ] && every=1
[ "${RAILGATE_SANITIZED:-0}" = 1 ] && every=6
n_orders=0
for p in $(python3 -c "import itertools; [print(''.join(map(str, o))) for i, o in enumerate(itertools.permutations(range(4))) if i % $every == 0]"); do
  ops=("rail add r2 net_tap$((40 + n_orders)),iface=rgo$n_orders 198.18.2.1" "rail remove r1" "rail show r2" "rail set r2 mtu 1400")
  for i in $(seq 0 3); do
    # shellcheck disable=SC2086
    ctl ${ops[${p:$i:1}]} > "$dir/out.log" 2> "$dir/err.log"
    [ $? -le 1 ] || fail "order $p: '${ops[${p:$i:1}]}' exit $?"
    [ -s "$dir/out.log" ] || [ -s "$dir/err.log" ] || fail "order $p: '${ops[${p:$i:1}]}' said nothing"
    alive "order $p, step $i (${ops[${p:$i:1}]})"
  done
  ctl rail show r1 > /dev/null 2>&1 || ctl rail add r1 "net_tap$((80 + n_orders)),iface=rgr$n_orders" 198.18.1.1 > /dev/null ||
    fail "order $p: r1 back"
  ctl rail show r2 > /dev/null 2>&1 && { ctl rail remove r2 > /dev/null || fail "order $p: r2 away"; }
  n_orders=$((n_orders + 1))
done
ctl --json rail list | python3 -c 'import json,sys; assert sorted(r["name"] for r in json.load(sys.stdin)["rails"]) == ["r0", "r1"]' ||
  fail "rails after every order"
grep -qE "railgated: control: uid 0 pid [0-9]+: rail.add r2" "$dir/railgated.log" || fail "no uid/pid (SO_PEERCRED) logged for a change"
ok "rail add/remove/show/set in $n_orders of the 24 orders: answered or refused clearly, railgated alive; changes logged with uid and pid"

# --- hostile control clients: one that never reads, deeply nested JSON,
# 10^5 commands; railgated's memory stays bounded and it answers the next.
rss() { awk '/^VmRSS/ {print $2}' "/proc/$gated_pid/status"; }
rss0=$(rss)
python3 - "$sock" <<'PY' || fail "hostile clients"
import json, os, socket, sys, time
path = sys.argv[1]
def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s
def ask(s, line):
    s.sendall(line.encode() + b"\n")
    return json.loads(s.makefile("rb").readline())
# Never reads: keeps sending status requests; railgated stops reading it
# once its replies back up, then cuts it off.
lazy = connect()
lazy.setblocking(False)
req = b'{"version":1,"command":"status"}\n'
sent = 0
cut = False
deadline = time.time() + 20
while time.time() < deadline:
    try:
        sent += lazy.send(req * 64)
    except BlockingIOError:
        time.sleep(0.05)
    except (BrokenPipeError, ConnectionResetError):
        cut = True
        break
    # Meanwhile another client is answered.
    if sent and sent % (len(req) * 64 * 50) == 0:
        other = connect()
        assert ask(other, '{"version":1,"command":"status"}')["ok"], "status while a client does not read"
        other.close()
assert cut, f"a client that never reads was not cut off ({sent} bytes sent)"
print(f"a client that never read was cut off after {sent} request bytes")
# Deeply nested JSON, within and beyond the request size limit.
for depth in (5000, 200000):
    s = connect()
    line = '{"version":1,"command":"status","args":' + "[" * depth + "]" * depth + "}"
    try:
        r = ask(s, line)
        assert not r["ok"], r
        print(f"nesting {depth}: {r['error'][:80]}")
    except (BrokenPipeError, ConnectionResetError, json.JSONDecodeError):
        print(f"nesting {depth}: cut off")
    s.close()
# 10^5 commands on one connection, pipelined 100 at a time (10^4 under
# the sanitizers).
s = connect()
f = s.makefile("rb")
rounds = 100 if os.environ.get("RAILGATE_SANITIZED") == "1" else 1000
for _ in range(rounds):
    s.sendall(req * 100)
    for _ in range(100):
        assert json.loads(f.readline())["ok"]
s.close()
print(f"{rounds * 100} status commands answered")
PY
alive "hostile clients"
ctl status > /dev/null || fail "status after the hostile clients"
rss1=$(rss)
echo "railgated RSS ${rss0} -> ${rss1} KiB"
# (ASan keeps freed memory in quarantine: no bound on RSS there.)
[ "${RAILGATE_SANITIZED:-0}" = 1 ] || [ $((rss1 - rss0)) -lt 16384 ] ||
  fail "railgated grew by $((rss1 - rss0)) KiB over the hostile clients"
ok "a client that never reads cut off, nested JSON refused, 10^5 commands answered; RSS +$((rss1 - rss0)) KiB; the next client answered"

# --- metrics and telemetry
in_ns bash -c 'exec 3<>/dev/tcp/127.0.0.1/9477; printf "GET /metrics HTTP/1.0\r\n\r\n" >&3; cat <&3' > "$dir/metrics.log" || fail "metrics"
grep -q "^HTTP/1.0 200 OK" "$dir/metrics.log" || fail "metrics status"
grep -qE '^railgate_contributions_total\{rail="r0"\} [1-9]' "$dir/metrics.log" || fail "metrics counter"
grep -qE '^railgate_aggregation_latency_seconds_bucket\{rail="r1",le="\+Inf"\}' "$dir/metrics.log" || fail "metrics histogram"
in_ns bash -c 'exec 3<>/dev/tcp/127.0.0.1/9477; printf "GET /nope HTTP/1.0\r\n\r\n" >&3; cat <&3' | grep -q "404" || fail "metrics 404"
grep -qE '^railgate_build_info\{version="[0-9.]+",git="[^"]+",kernels="[a-z0-9_]+"\} 1$' "$dir/metrics.log" ||
  fail "no railgate_build_info"
for m in railgate_rail_mtu_bytes railgate_rail_busy_seconds_total railgate_rail_poll_seconds_total railgate_rail_up \
  railgate_results_resent_total railgate_aborts_total railgate_join_errors_total railgate_neighbours_learned_total; do
  grep -qE "^$m\{rail=\"r0\"\} [0-9]" "$dir/metrics.log" || fail "no $m for r0 in /metrics"
done
for m in railgate_lcore_runqueue_wait_seconds_total railgate_lcore_core_shared_total \
  railgate_lcore_core_shared_seconds_total railgate_lcore_absences_total railgate_lcore_absent_seconds_total; do
  grep -qE "^$m\{lcore=\"[0-9]+\"\} [0-9]" "$dir/metrics.log" || fail "no $m in /metrics"
done
# An lcore going round its loop: its last pass well under a second ago.
grep -qE '^railgate_lcore_seconds_since_pass\{lcore="[0-9]+"\} 0\.[0-9]{3}$' "$dir/metrics.log" ||
  fail "railgate_lcore_seconds_since_pass: $(grep since_pass "$dir/metrics.log")"
# The exposition, linted the way Prometheus does (names, units, types).
if command -v promtool > /dev/null; then
  sed '1,/^\r\?$/d' "$dir/metrics.log" | promtool check metrics > "$dir/promtool.log" 2>&1 ||
    fail "promtool check metrics: $(cat "$dir/promtool.log")"
  ok "promtool check metrics: clean"
fi
if command -v dpdk-telemetry.py > /dev/null; then
  printf '/railgate/status\n/railgate/rail,r0\n' | in_ns dpdk-telemetry.py -f "$prefix" > "$dir/telemetry.log" 2>&1
  grep -q '"policy": "rail"' "$dir/telemetry.log" || fail "telemetry /railgate/status"
  grep -qE '"contributions": [1-9]' "$dir/telemetry.log" || fail "telemetry /railgate/rail"
  ok "metrics endpoint and DPDK telemetry (/railgate/status, /railgate/rail)"
else
  ok "metrics endpoint (dpdk-telemetry.py not installed: telemetry not checked)"
fi

stop_gated
[ -e "$sock" ] && fail "control socket left behind"
for i in rg0 rgp0 rg1 rgp1; do in_ns ip link show "$i" > /dev/null 2>&1 && fail "veth $i left behind"; done
ok "railgated's veth pairs deleted at exit"

# A pair a killed railgated left is taken over; an interface in the way is
# refused by name, and nothing is started.
veth_gated() { # LOG
  ip netns exec "$ns" "$railgated" --config "$src/config/local-af_packet.toml" --socket off --metrics off -- -l 0-1 --no-huge --no-pci -m 512 --file-prefix "$prefix" \
    --log-level lib.eal:error > "$1" 2>&1 &
  gated_pid=$!
}
in_ns ip link add rgp0 type veth peer name rg0 || fail "a stale pair"
veth_gated "$dir/takeover.log"
wait_ready "$dir/takeover.log"
grep -q "rail r0: veth rgp0 (port) / rg0 (host), taken over" "$dir/takeover.log" || fail "the stale pair was not taken over"
in_ns ping -c 1 -W 2 198.18.0.1 > /dev/null || fail "ping rail r0 over the pair taken over"
stop_gated
in_ns ip link add rg1 type veth peer name rgx1 || fail "an rg1 of another pair"
veth_gated "$dir/in-the-way.log"
wait "$gated_pid" && fail "railgated started with rg1 in the way"
gated_pid=
grep -q "interface rg1 exists and is not one end of this pair (ip link del rg1)" "$dir/in-the-way.log" ||
  fail "rg1 in the way: $(cat "$dir/in-the-way.log")"
in_ns ip link show rgp0 > /dev/null 2>&1 && fail "the refused start left rgp0 behind"
ok "a stale veth pair taken over; an interface in the way refused by name"
echo "PASS"
