#!/usr/bin/env bash
# railgate as an operator installs it: `meson install` into a scratch root,
# then what is there and whether it holds together:
#   - the binaries, the man pages (railgated(8), railctl(8), railbench(1),
#     raillat(1), railgated.toml(5)) rendering without a groff warning;
#   - the example configs in share/railgate and the service's config in
#     etc/railgate, each valid by the installed railgated --check;
#   - the systemd unit: `systemd-analyze verify` silent with the installed
#     tree mounted at its prefix (a private mount namespace), so its
#     ExecStart and its man: references resolve as on a real host;
#   - Type=notify for real: railgated on its embedded default in a network
#     namespace, with $NOTIFY_SOCKET a datagram socket this test reads,
#     says READY=1 and later STOPPING=1; with $JOURNAL_STREAM naming its
#     stderr it logs journald's <N> priorities instead of timestamps;
#   - the watchdog: with $WATCHDOG_USEC at 2 s it says WATCHDOG=1 every
#     second, and not while an lcore is frozen past a second (railctl
#     fault freeze r0 4000), logging the loop stuck and then back.
#   service.sh BUILD_DIR SOURCE_DIR
set -u
build=$1 src=$2
. "$src/tests/netns/lib.sh"
log=$(mktemp -d) root=$(mktemp -d)
ns=rgsv$$
gated_pid=
cleanup() {
  [ -n "$gated_pid" ] && kill -9 "$gated_pid" 2>/dev/null
  wait 2>/dev/null
  ip netns del "$ns" 2>/dev/null
  rm -rf "$log" "$root"
}
trap cleanup EXIT
ok() { echo "ok: $*"; }

meson install -C "$build" --destdir "$root" --no-rebuild --quiet > "$log/install.log" 2>&1 || fail "meson install"
prefix=$(meson introspect "$build" --buildoptions | python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
sysconf=$(meson introspect "$build" --buildoptions | python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "sysconfdir"))')
case "$sysconf" in /*) ;; *) sysconf=$prefix/$sysconf ;; esac
top=$root$prefix
for b in railgated railctl railbench raillat; do [ -x "$top/bin/$b" ] || fail "bin/$b not installed"; done

# Man pages: present, and clean under groff's warnings.
for m in man8/railgated.8 man8/railctl.8 man1/railbench.1 man1/raillat.1 man5/railgated.toml.5; do
  f=$top/share/man/$m
  [ -s "$f" ] || fail "$m not installed"
  w=$(groff -man -ww -z -Tutf8 "$f" 2>&1)
  [ -z "$w" ] || fail "$m: groff warns: $w"
done
grep -qF 'log\-level' "$top/share/man/man8/railgated.8" || fail "railgated(8) lacks its options"
grep -q "^\.B metrics_public" "$top/share/man/man5/railgated.toml.5" || fail "railgated.toml(5) lacks metrics_public"
ok "5 man pages installed, groff -ww clean"

# Configs: every example and the service's own parse; the host judges them.
n=0
for f in "$top"/share/railgate/*.toml "$root$sysconf/railgate/railgated.toml"; do
  "$top/bin/railgated" --config "$f" --check > "$log/check.log" 2>&1; rc=$?
  [ $rc -le 1 ] && grep -q "is valid" "$log/check.log" || fail "--check $f exited $rc: $(cat "$log/check.log")"
  n=$((n + 1))
done
[ $n -ge 6 ] || fail "only $n configs installed"
ok "$n installed configs valid (--check: exit 0 or 1 by what this host has)"

# The unit, verified where it will live.
unit=$top/lib/systemd/system/railgated.service
[ -s "$unit" ] || fail "railgated.service not installed"
[ -s "$top/lib/sysusers.d/railgate.conf" ] || fail "sysusers.d/railgate.conf not installed"
grep -q "^Type=notify$" "$unit" && grep -q "^WatchdogSec=" "$unit" && grep -q "^RuntimeDirectory=railgate" "$unit" && grep -q "^Group=railgate$" "$unit" &&
  grep -q "^CapabilityBoundingSet=CAP_NET_ADMIN" "$unit" || fail "the unit lacks Type=notify, WatchdogSec, RuntimeDirectory, Group or capabilities"
grep -q "^ExecStart=$prefix/bin/railgated --config $sysconf/railgate/railgated.toml$" "$unit" || fail "ExecStart: $(grep ExecStart "$unit")"
if command -v systemd-analyze > /dev/null && unshare -m true 2> /dev/null; then
  out=$(unshare -m sh -c 'mount --bind "$1" "$2" && systemd-analyze verify "$3"' sh "$top" "$prefix" "$prefix/lib/systemd/system/railgated.service" 2>&1); rc=$?
  [ $rc -eq 0 ] && [ -z "$out" ] || fail "systemd-analyze verify (exit $rc): $out"
  ok "systemd-analyze verify railgated.service: no error, no warning"
else
  echo "SKIP: systemd-analyze or unshare -m not available: the unit not verified"
fi

# Type=notify and the journal's log format, for real.
require_netns
ip netns add "$ns" || fail "netns"
ip netns exec "$ns" ip link set lo up
python3 - "$log/notify.sock" > "$log/notify.txt" 2>&1 <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(30)
seen = []
while not any(m.startswith("STOPPING=1") for m in seen):
    m = s.recv(4096).decode()
    seen.append(m)
    print(f"{time.monotonic():.3f} " + m.replace("\n", " | "), flush=True)
PY
listener=$!
for _ in $(seq 50); do [ -S "$log/notify.sock" ] && break; sleep 0.1; done
touch "$log/railgated.log"
exec 5> "$log/railgated.log"
js=$(stat -c '%d:%i' "$log/railgated.log")
NOTIFY_SOCKET=$log/notify.sock JOURNAL_STREAM=$js WATCHDOG_USEC=2000000 ip netns exec "$ns" "$top/bin/railgated" --socket "$log/rg.sock" \
  --metrics off --log-level info 2>&5 >&5 &
gated_pid=$!
exec 5>&-
for _ in $(seq 150); do grep -q "READY=1" "$log/notify.txt" && break; sleep 0.1; done
grep -q "READY=1" "$log/notify.txt" || fail "no READY=1 on \$NOTIFY_SOCKET: $(cat "$log/notify.txt")"
grep -q "STATUS=serving 2 rail(s) from (embedded default)" "$log/notify.txt" || fail "no STATUS: $(cat "$log/notify.txt")"
"$top/bin/railctl" --socket "$log/rg.sock" status > /dev/null || fail "railctl against the notified railgated"
# The watchdog: told every second; an lcore frozen 4 s (stuck after 1 s,
# half the interval) holds it back, then it is told again.
sleep 1.5
"$top/bin/railctl" --socket "$log/rg.sock" fault freeze r0 4000 > "$log/freeze.txt" || fail "railctl fault freeze: $(cat "$log/freeze.txt")"
grep -q "^rail r0: lcore [0-9]* frozen for 4000 ms$" "$log/freeze.txt" || fail "fault freeze said: $(cat "$log/freeze.txt")"
# A command for the frozen lcore waits for it and then counts as done
# (the lcore took it): what fault show says is what the rail applies.
"$top/bin/railctl" --socket "$log/rg.sock" fault set r0 drop=0.01,seed=3 > /dev/null || fail "fault set during the freeze"
"$top/bin/railctl" --socket "$log/rg.sock" fault show r0 | grep -q "drop=0.01" || fail "fault show after a late fault set"
"$top/bin/railctl" --socket "$log/rg.sock" fault clear r0 > /dev/null || fail "fault clear"
sleep 2.5
# Bad freezes: refused with the reason, nothing frozen.
for bad in "r0 0:a freeze lasts 1..60000 ms" "r0 60001:out of range 0..60000" "r9 10:r9" "r0 1s:not a number"; do
  out=$("$top/bin/railctl" --socket "$log/rg.sock" fault freeze ${bad%%:*} 2>&1) && fail "fault freeze ${bad%%:*} accepted: $out"
  case $out in *"${bad#*:}"*) ;; *) fail "fault freeze ${bad%%:*}: $out" ;; esac
done
# The freeze counts as the lcore's absence (as do the host's own pauses of
# 100 ms and more on a loaded machine: "away N times" then).
"$top/bin/railctl" --socket "$log/rg.sock" stats > "$log/stats.txt"
grep -qE "away (once|[0-9]+ times) \((3\.[5-9]|[4-9]\.|[1-9][0-9]+\.)[0-9]* s\)" "$log/stats.txt" ||
  fail "railctl stats shows no absence of 4 s after the freeze: $(grep lcore "$log/stats.txt")"
kill -TERM "$gated_pid"
wait "$gated_pid" || fail "railgated exited $? on SIGTERM"
gated_pid=
wait "$listener" || fail "no STOPPING=1: $(cat "$log/notify.txt")"
grep -q "^<5>railgated: ready: 2 rail(s)" "$log/railgated.log" || fail "no journald <5> ready line: $(head -n 20 "$log/railgated.log")"
grep -q "^<5>railgated: stopping" "$log/railgated.log" || fail "no <5> stopping line"
grep -qE "^[0-9]{4}-[0-9]{2}-[0-9]{2}T.*railgated:" "$log/railgated.log" && fail "timestamps under the journal"
grep -q "^<3>railgated: lcore [0-9]* has not gone round its loop for [0-9.]* s: systemd's watchdog is no longer told" "$log/railgated.log" ||
  fail "no error line for the frozen lcore: $(grep -v '^ ' "$log/railgated.log" | tail -n 5)"
# fault set waited about 4 s for the lcore on the control thread: that one stuck too.
# (The durations in these lines follow the host's load: not judged.)
grep -q "^<3>railgated: the control thread has not gone round its loop for [0-9.]* s" "$log/railgated.log" ||
  fail "no error line for the control thread: $(grep -v '^ ' "$log/railgated.log" | tail -n 5)"
grep -q "^<4>railgated: lcore [0-9]* took [0-9.]* s to take a control command" "$log/railgated.log" ||
  fail "no warning line for the late command: $(grep -v '^ ' "$log/railgated.log" | tail -n 5)"
grep -q "^<4>railgated: lcore [0-9]* goes round its loop again (it stopped for [0-9.]* s or more)" "$log/railgated.log" ||
  fail "no warning line for the lcore back: $(grep -v '^ ' "$log/railgated.log" | tail -n 5)"
# The pings' gaps: about a second, but one of 1.5 s or more (the freeze).
python3 - "$log/notify.txt" <<'PY' || fail "WATCHDOG=1 pings: $(cat "$log/notify.txt")"
import sys
t = [float(l.split()[0]) for l in open(sys.argv[1]) if " WATCHDOG=1" in l]
gaps = [b - a for a, b in zip(t, t[1:])]
print("ok: WATCHDOG=1 %d times, gaps %s s" % (len(t), " ".join("%.2f" % g for g in gaps)))
assert len(t) >= 5, "too few pings"
assert any(g >= 1.5 for g in gaps), "no gap for the freeze"
assert gaps[-1] < 1.5, "no ping after the freeze"
PY
ok "Type=notify: READY=1 with STATUS, then STOPPING=1; journald priorities on every log line: $(grep -c '^<[0-9]>' "$log/railgated.log") lines"
echo PASS
