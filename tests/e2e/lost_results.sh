#!/bin/sh
# Lost results are asked for: railbench --embedded, 2 workers on 2 rails,
# the virtual switch dropping 20% of the RESULTs (and nothing else), under
# the rail policy and under LAG. railgated holds every contribution, so a
# worker's timeout or tail-probe PING names a chunk that railgated answers
# from the slot (HELD, or the kept result), counted on railgated's "loss:"
# line. Under LAG the job's slots are on its home member, whatever member
# a PING comes in on: until 2026-11-29 a PING there had a plain PONG, the
# chunk went again (16-20 tail probes a run), and LAG counted none. The
# sums stay exact. Counts, not
# times.
#   lost_results.sh RAILBENCH
set -u
rb=$1
fail() { echo "FAIL: $*"; exit 1; }
for policy in rail lag; do
  asked=0
  for seed in 1 2; do
    out=$("$rb" --embedded --workers 2 --rails 2 --policy $policy --count 1048576 -n 3 -w 1 \
      --fault "drop=0.2,type=result,seed=$seed" 2>&1) || fail "$policy, seed $seed: $(echo "$out" | tail -n 3)"
    echo "$out" | grep -q "Out of bounds values : 0 OK" || fail "$policy, seed $seed: wrong values"
    [ $policy = rail ] || echo "$out" | grep -q "^# railbench: embedded railgated, 2 rails (LAG)" ||
      fail "the job did not run under LAG: $(echo "$out" | grep '^# railbench')"
    line=$(echo "$out" | grep '^# retransmits ') || fail "$policy: no retransmit counts: $(echo "$out" | tail -n 3)"
    set -- $(echo "$line" | sed -n 's/^# retransmits [0-9]* ([0-9]* after a timeout, \([0-9]*\) tail probes).*/\1/p')
    [ $# = 1 ] || fail "$policy: unreadable counts: $line"
    # A tail probe's PING finds the chunk (only results are lost): no
    # chunk goes as a probe (LAG sent 16-20 a run before).
    [ "$1" = 0 ] || fail "$policy, seed $seed: $1 chunks sent as tail probes, though railgated had every chunk"
    n=$(echo "$out" | sed -n 's/^  loss: \([0-9]*\) PINGs naming a chunk.*/\1/p' | awk '{s += $1} END {print s + 0}')
    echo "$policy, seed $seed: $line; $n PINGs answered from the slots"
    asked=$((asked + n))
  done
  [ "$asked" -gt 0 ] || fail "$policy: no PING was answered from the slots in 2 runs at 20% of results lost"
done
echo PASS
