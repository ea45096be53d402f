#!/bin/sh
# One worker embedded: no switch, its ports read railgated's rings (a link).
# What the switch did to each frame (the checksum offloads' marks, the fault
# injector's draws toward the worker) is done as the worker receives: with
# frames lost, duplicated, reordered and corrupted both ways, on 2 rails,
# with offloaded and with software checksums, the sums stay exact and the
# faults toward the worker were drawn; without faults nothing is resent and
# the switch drops nothing.
#   one_worker_link.sh RAILBENCH
set -u
rb=$1
fail() { echo "FAIL: $*"; exit 1; }
for sums in offload software; do
  out=$("$rb" --embedded --workers 1 --rails 2 --checksums $sums --count 1,255,4097,100003 -n 3 -w 1 \
    --fault "drop=0.02,dup=0.02,reorder=0.02,corrupt=0.02,seed=5" 2>&1) || fail "$sums: $(echo "$out" | tail -n 3)"
  echo "$out" | grep -q "Out of bounds values : 0 OK" || fail "$sums: wrong values"
  line=$(echo "$out" | grep "^# faults injected to the workers") || fail "$sums: no faults toward the worker: $(echo "$out" | tail -n 3)"
  set -- $(echo "$line" | sed -n 's/.*dropped \([0-9]*\), duplicated \([0-9]*\), reordered \([0-9]*\), corrupted \([0-9]*\)$/\1 \2 \3 \4/p')
  [ $# = 4 ] || fail "$sums: unreadable: $line"
  for n in "$@"; do [ "$n" -gt 0 ] || fail "$sums: a fault never drawn toward the worker: $line"; done
  echo "ok: $sums checksums: exact through $line"
done
out=$("$rb" --embedded --workers 1 --rails 2 --count 1,255,4097,100003 -n 3 -w 1 2>&1) || fail "no faults: $(echo "$out" | tail -n 3)"
echo "$out" | grep -q "Out of bounds values : 0 OK" || fail "no faults: wrong values"
echo "$out" | grep -q "^# retransmits 0 (0 after a timeout, 0 tail probes).*virtual switch drops 0$" ||
  fail "no faults, yet: $(echo "$out" | grep '^# retransmits')"
echo "ok: without faults: nothing resent, nothing dropped"
