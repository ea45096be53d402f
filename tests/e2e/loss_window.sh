#!/bin/sh
# The congestion window under random loss: railbench --embedded, 2 workers,
# the virtual switch dropping, duplicating and reordering 5% of the frames
# each way (0.5% corrupted), with the default window (--cc queue) and
# without one (--cc off), alternated. Both bit-exact; the window may cost
# some time under loss, not a multiple of it: a lost chunk once held its
# whole rail until it came back (25x slower than --cc off). The bound is
# generous (3x), so that noise cannot trip it.
#   loss_window.sh RAILBENCH
set -u
rb=$1
fail() { echo "FAIL: $*"; exit 1; }
run() { # CC SEED -> microseconds per operation
  out=$("$rb" --embedded --workers 2 --rails 2 --count 1048576 -n 3 -w 1 --cc "$1" \
    --fault "drop=0.05,dup=0.05,reorder=0.05,corrupt=0.005,seed=$2" 2>&1) || fail "--cc $1: $(echo "$out" | tail -n 3)"
  echo "$out" | grep -q "Out of bounds values : 0 OK" || fail "--cc $1 under loss: wrong values"
  echo "$out" | awk '/^ +[0-9]+ +[0-9]+ +float/ {print int($5)}'
}
best_off=0 best_queue=0
for seed in 1 2; do
  t=$(run off $seed)
  [ "$best_off" = 0 ] || [ "$t" -lt "$best_off" ] && best_off=$t
  t=$(run queue $seed)
  [ "$best_queue" = 0 ] || [ "$t" -lt "$best_queue" ] && best_queue=$t
done
echo "5% loss each way, 4 MiB: --cc queue ${best_queue} us, --cc off ${best_off} us (best of 2)"
[ "$best_queue" -le $((3 * best_off)) ] || fail "the window under loss: ${best_queue} us against ${best_off} us without it"
echo PASS
