#!/bin/sh
# raillat --stalls counts the times a CPU was taken from a spinning thread.
# Beside a busy task on the same CPU (the scheduler shares the CPU in slices
# of a millisecond or more) it must count stalls over 1 ms and lose a large
# share of the time; --json parses; it gives what a system call and a yield
# cost and the kernel's clocksource, and whether its stalls come at a period;
# bad values are refused.
#   stalls.sh RAILLAT
rl=$1
tmp=$(mktemp -d)
spinner=
trap '[ -n "$spinner" ] && kill "$spinner" 2> /dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cpu=$(taskset -pc $$ | sed 's/.*: //; s/[-,].*//')

taskset -c "$cpu" "$rl" --stalls 0.5 > "$tmp/alone" 2>&1 || fail "--stalls 0.5: $(cat "$tmp/alone")"
awk -v c="$cpu" '$1 == c && NF >= 7 {ok = 1} END {exit !ok}' "$tmp/alone" || fail "no row for CPU $cpu: $(cat "$tmp/alone")"
grep -qE '^# a system call \(getppid\) costs [0-9.]+ us here, a sched_yield [0-9.]+ us; the kernel.s clocksource: [a-z0-9_-]+$' "$tmp/alone" ||
  fail "no crossing costs: $(cat "$tmp/alone")"
echo "ok: alone on CPU $cpu: $(awk -v c="$cpu" '$1 == c {print $6 "% lost, " $3 " stalls over 40 us a second"}' "$tmp/alone")"
# Whether its stalls come at a period: said either way, one line a CPU.
grep -qE "^# cpu $cpu: (a stall every [0-9.]+ us, [0-9.]+ us long \(the median\), [0-9]+ of its [0-9]+ stalls over 20 us: a tick|no period among its [0-9]+ stalls over 20 us)" \
  "$tmp/alone" || fail "no period line for CPU $cpu: $(cat "$tmp/alone")"
echo "ok: $(grep "^# cpu $cpu:" "$tmp/alone" | cut -c3-)"

taskset -c "$cpu" sh -c 'while :; do :; done' &
spinner=$!
sleep 0.2
taskset -c "$cpu" "$rl" --stalls 1 --json > "$tmp/busy" 2>&1 || fail "--stalls 1 --json: $(cat "$tmp/busy")"
kill "$spinner"
spinner=
python3 - "$tmp/busy" "$cpu" <<'PY' || fail "beside a busy task: $(cat "$tmp/busy")"
import json, sys
j = json.load(open(sys.argv[1]))
cpus = {c["cpu"]: c for c in j["cpus"]}
assert list(cpus) == [int(sys.argv[2])], cpus
c = cpus[int(sys.argv[2])]
assert c["pinned"], c
# The busy task takes about half the CPU, in slices of a tick or so.
assert c["lost_pct"] >= 20, c
assert c["over_1ms_per_s"] >= 20 and c["longest_us"] >= 1000, c
assert c["over_10us_per_s"] >= c["over_40us_per_s"] >= c["over_100us_per_s"] >= c["over_1ms_per_s"], c
# A kernel crossing costs something, and not a millisecond (a yield beside
# the busy task may wait for its slice, 50 ms at the most).
assert 0 < j["syscall_us"] < 1000 and 0 < j["yield_us"] <= 50000, j
assert j["clocksource"] and j["clocksource"] != "unknown", j
# The period among its stalls over 20 us: none (0), or one with stalls of
# at least 20 us and most of them its own.
assert c["period_us"] >= 0 and 0 <= c["period_share"] <= 1, c
assert c["period_us"] == 0 or (c["period_stall_us"] >= 20 and c["period_share"] >= 0.5), c
print("ok: beside a busy task: %.0f%% lost, %.0f stalls over 1 ms a second, the longest %.0f us"
      % (c["lost_pct"], c["over_1ms_per_s"], c["longest_us"]))
PY

for a in "--stalls 0" "--stalls abc" "--stalls" "--stalls 1 --compare udp,dpdk" "--stalls 1 -a"; do
  "$rl" $a > /dev/null 2>&1
  rc=$?
  [ $rc -eq 2 ] || fail "raillat $a -> exit $rc"
done
echo "ok: bad --stalls values and mixes are refused (exit 2)"
