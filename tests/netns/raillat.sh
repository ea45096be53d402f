#!/usr/bin/env bash
# raillat end to end on this machine: railgated on its embedded default (two
# udp rails on lo) in a network namespace; raillat pings it over kernel UDP, over
# an in-process DPDK railgated, and tries verbs, which this kernel lacks: the
# compare table must show udp and dpdk with figures and verbs as unavailable
# with the reason; udp and dpdk must stay within 3x of their ratio to the
# floors measured in the same run (the latency guard); --json and --dump
# must carry the same samples; udp stays fast beside a busy task on every
# CPU, on udp rails and on af_packet ones, and railctl stats counts the
# lcore's CPU as shared then; bad arguments are refused. (Verbs itself is
# measured in the rxe suite.)
#   raillat.sh RAILGATED RAILLAT RAILCTL
set -u
railgated=$1 raillat=$2 railctl=$3
. "$(dirname "$0")/lib.sh"
require_netns
ns=rglat$$ dir=$(mktemp -d) prefix=rglat$$
log=$dir
gated_pid=
trap 'cleanup_netns "$ns" "$dir /var/run/dpdk/$prefix"' EXIT
ip netns add "$ns" || fail "netns"
ip netns exec "$ns" ip link set lo up
# The floors first: railgated's poll-mode lcore would take one of the two
# cores they ping-pong between.
ip netns exec "$ns" "$raillat" --compare floor-udp,floor-ring -n 2000 -w 200 --bw-size 0 > "$dir/floors.log" 2>&1 ||
  fail "raillat floors"
cat "$dir/floors.log"
# The machine's own stalls, also before any railgated runs (beside one,
# the spinning threads would be a busy task to its lcore, and its lcore a
# task taking their CPU): the most times a second any CPU was taken away
# for over 40 us, by which the p99 bounds beside busy tasks are judged
# (beside_busy_tasks).
measure_stalls() {
  stalls=$("$raillat" --stalls 2 --json 2> /dev/null | python3 -c 'import json, sys
print("%.0f" % max(c["over_40us_per_s"] for c in json.load(sys.stdin)["cpus"]))' 2> /dev/null)
  echo "# this machine took a CPU away for over 40 us ${stalls:-?} times a second"
}
measure_stalls
# A floor after the EAL pinned raillat's thread (the dpdk row first, as
# tools/bench_verbs.sh orders them): its peer thread must still get the
# other CPU, not take turns with it by the scheduler's tick (4 ms). Three
# runs, one after the other (seconds apart: each starts an EAL): the dpdk
# latency guard (below) is judged on them, railgated not yet running.
for i in 1 2 3; do
  ip netns exec "$ns" "$raillat" --compare dpdk,floor-ring -n 300 -w 30 --bw-size 0 > "$dir/pinned-$i.log" 2>&1 ||
    fail "raillat dpdk,floor-ring"
  awk '$1 == "floor-ring" && $4 + 0 < 100 {ok = 1} END {exit !ok}' "$dir/pinned-$i.log" ||
    { cat "$dir/pinned-$i.log"; fail "floor-ring after the EAL: not a cross-CPU ping-pong"; }
  echo "ok: floor-ring after the EAL: $(awk '$1 == "floor-ring" {print $4}' "$dir/pinned-$i.log") us"
done
ctl() { ip netns exec "$ns" "$railctl" --socket "$dir/gated.sock" "$@"; }
# The rails' lcore: how often it counted its CPU as shared, and how long
# it waited for it, from railctl's JSON stats: the KEYs' values on one
# line, in one call (three back to back, python each, kept a just started
# lcore waiting behind them long enough to count its core as shared).
lcore_stats() { # KEY...
  ctl --json stats | python3 -S -c 'import json,sys
l = json.load(sys.stdin)["lcores"][0]
print(*(l[k] for k in sys.argv[1:]))' "$@"
}
# The lcore thread's nice, read from /proc with no command run: a ps every
# 100 ms (beside_busy_tasks polls) is a task the lcore waits behind, and
# kept its core counted as shared.
lcore_nice() {
  local task comm stat
  for task in /proc/"$gated_pid"/task/*; do
    read -r comm < "$task/comm" 2> /dev/null || continue
    [[ $comm == rte-worker* ]] || continue
    read -r stat < "$task/stat" || return
    read -ra stat <<< "${stat##*) }" # from the state on: the nice is the 17th
    echo "${stat[16]}"
    return
  done
}
# Whether a figure was read (above 0) and is under MAX.
under() { awk -v x="$1" -v m="$2" 'BEGIN {exit !(x + 0 > 0 && x + 0 < m)}'; } # VALUE MAX
start_udp() { # [CONFIG] LOG
  local config=()
  [ $# = 2 ] && { config=(--config "$1"); shift; }
  ip netns exec "$ns" "$railgated" "${config[@]}" --socket "$dir/gated.sock" --metrics off -- -l 0-1 --no-huge --no-pci \
    -m 512 --file-prefix "$prefix" --log-level lib.eal:error --log-level pmd.net.tap:critical > "$1" 2>&1 &
  gated_pid=$!
  wait_ready "$1"
}
start_udp "$dir/railgated.log"
# The embedded default with the lcore's weight off ([daemon] shared_nice =
# 0): the baseline a udp rails' p99 over its bound is judged by.
weightless_udp() {
  sed 's/^\[daemon\]$/[daemon]\nshared_nice = 0/' "$(dirname "$0")/../../config/embedded.toml" > "$dir/weightless-udp.toml"
  start_udp "$dir/weightless-udp.toml" "$dir/railgated-weightless-udp.log"
}

ip netns exec "$ns" "$raillat" --compare udp,dpdk,verbs --server 198.18.0.1 -n 300 -w 30 --bw-size 256K --bw-iters 4 \
  --dump "$dir/samples.txt" > "$dir/compare.log" 2>&1
rc=$?
cat "$dir/compare.log"
[ $rc -eq 1 ] || fail "compare with verbs unavailable exited $rc, not 1"
grep -qE "^udp +300 +[0-9.]+ +[0-9.]+ .* [0-9.]+x +[0-9.]+x$" "$dir/compare.log" || fail "no udp row"
grep -qE "^dpdk +300 +[0-9.]+ +[0-9.]+ .* [0-9.]+x +[0-9.]+x$" "$dir/compare.log" || fail "no dpdk row"
grep -qE "^verbs +unavailable: .*RDMA CM" "$dir/compare.log" || fail "verbs not reported unavailable with the reason"
grep -qE " 1\.00x " "$dir/compare.log" || fail "no transport is the 1.00x reference"
# The latency guard: each transport against its floor measured in this run
# (floor-udp: kernel UDP ping-pong on loopback; floor-ring: a cache-line
# ping-pong between two threads), within 3x the ratio doc/performance.md records
# (udp 2.0x, dpdk 6.9x of their floors on 2026-11-23). Noise cannot trip
# it; the 3-13x regression of commit 8523a2a (udp 5.6x, dpdk 37x) could not
# pass it. Under the sanitizers (RAILGATE_SANITIZED=1) the transports run
# 2-3x slower and their floors do not (dpdk 2.08 us against a 0.1 us floor,
# 20.8x, on an AMD EPYC runner): the bounds are 3x wider there, and the
# release build's run is the guard.
# udp: the compare run's row against the floors' run. dpdk: the lowest of
# the three pinned runs' ratios, each dpdk row against the floor-ring
# measured right after it in the same process, that floor taken within
# 0.10-0.20 us. This host flips between two modes for seconds at a time
# (2026-12-01, 5 runs of `raillat --compare dpdk,floor-ring` back to back:
# dpdk 1.96 / 0.72 / 1.78 / 1.71 / 0.86 us, floor-ring 0.24 / 0.07 / 0.21 /
# 0.07 / 0.06), and the floor does not always flip with the dpdk row: one
# run against one floor read 17.4x (1.74 us against 0.07, taken as 0.10)
# beside the 20.7x bound with nothing wrong, and 2.6x (0.66 against 0.25)
# in another, where a 9x regression of the README's 0.50 us (4.5 us) would
# have read 18x and passed. A regression slows all three runs; the lowest
# ratio is the one the host's slow mode did not inflate. Within 0.10-0.20
# us, a 9x regression of 0.50 us reads 22.5x or more whatever the floor.
k=1
[ "${RAILGATE_SANITIZED:-0}" = 1 ] && k=3
python3 - "$k" "$dir/compare.log" "$dir/floors.log" "$dir"/pinned-[123].log <<'PY' || fail "latency guard"
import sys
k = float(sys.argv[1])
def typical(path):
    return {l.split()[0]: float(l.split()[3]) for l in open(path)
            if l.split() and l.split()[0] in ("udp", "dpdk", "floor-udp", "floor-ring")}
compare, floors = typical(sys.argv[2]), typical(sys.argv[3])
pinned = [typical(p) for p in sys.argv[4:]]
def judge(t, floor, bound, runs, most=None):
    seen = []
    for lat, fl in runs:
        # A floor under 0.1 us is a same-core hand-off: judged against 0.1.
        base = max(fl, 0.1) if most is None else min(max(fl, 0.1), most)
        seen.append((lat / base, lat, fl, base))
    ratio, lat, fl, base = min(seen)
    taken = "" if base == fl else f", taken as {base:.2f}"
    others = "; the other runs " + ", ".join(f"{r:.1f}x ({l:.2f} us against {f:.2f})" for r, l, f, _ in sorted(seen)[1:]) \
        if len(seen) > 1 else ""
    print(f"latency guard: {t} {lat:.2f} us = {ratio:.1f}x {floor} {fl:.2f} us{taken} (bound {bound:.1f}x; "
          f"9x slower would read {9 * ratio:.0f}x{others})")
    assert ratio <= bound, f"{t} is {ratio:.1f}x its floor, past the bound {bound:.1f}x"
judge("udp", "floor-udp", k * 3 * 2.0, [(compare["udp"], floors["floor-udp"])])
judge("dpdk", "floor-ring", k * 3 * 6.9, [(p["dpdk"], p["floor-ring"]) for p in pinned], most=0.20)
PY
[ "$(grep -c '^udp ' "$dir/samples.txt")" -eq 300 ] && [ "$(grep -c '^dpdk ' "$dir/samples.txt")" -eq 300 ] ||
  fail "--dump does not hold 300 samples per transport"

ip netns exec "$ns" "$raillat" --transport udp --server 198.18.0.1 -s 1024 -n 200 -w 20 --bw-size 0 --json \
  > "$dir/udp.json" 2> "$dir/udp.err" || fail "raillat --json udp"
python3 - "$dir/udp.json" <<'PY' || fail "--json"
import json, sys
d = json.load(open(sys.argv[1]))
r = d["results"][0]
assert d["bytes"] == 1024 and r["transport"] == "udp" and r["iterations"] == 200, d
assert 0 < r["t_min_us"] <= r["t_typical_us"] <= r["p99_us"] <= r["p999_us"] <= r["t_max_us"], r
PY
ip netns exec "$ns" "$raillat" --transport udp --server 198.18.0.1 -n 100 -w 10 --bw-size 0 > "$dir/perftest.log" 2>&1 ||
  fail "raillat udp"
cat "$dir/perftest.log"
grep -q "t_typical\[usec\]" "$dir/perftest.log" || fail "no perftest-style header"

# Beside a busy task on every CPU: railgated's lcore sees its core shared
# and, when idle, sleeps on its sockets (udp rails) or naps (DPDK
# ports) instead of yielding, so that a datagram does not wait for the busy
# task's 4 ms tick (udp rails: t_typical 3995 us yielding, 9-16 us
# sleeping; af_packet rails: 2006 us against 35-75 us). railctl stats
# counts it. p99 stays low too: the sleeping or napping lcore weighs as
# nice -10 against the busy task, or a wake-up after a burst of round trips
# waits for the task's slice (with the client at nice -10: udp rails p99
# 0.7-3.4 ms at nice 0, 19-97 us at -10; af_packet rails, runs of 100,000,
# 0.93-0.97 ms against 58-62 us). raillat runs at nice -10 too: busy-polling
# beside a busy task on its own CPU at nice 0 it waits for that task's
# slices itself, and those waits made its p99 (2 ms on af_packet rails
# whatever railgated did). P99_MAX, when given, is the bound (k times it
# under the sanitizers, as above: the release build's run is the guard);
# N the ping-pongs (5000). The kernel's own UDP ping-pong runs beside the
# same tasks in the same raillat run (floor-udp), as the figure to read
# these by (tools/perf_report.sh's rows). The busy tasks end by themselves
# after 60 s if the test dies (CI on a slow stretch: two tries of 20,000
# took 18 s, past the 20 s they had).
# The p99 bound is judged on a calm machine only: one that takes a CPU
# away for over 40 us at most calm_stalls times a second (raillat
# --stalls, measured at the start; 70-170 idle here). A CI run in a stretch of
# 340-590 read af_packet rails' p99 at 400-530 us twice in a row, the
# lcore weighed as it should (the nice check below, which always holds)
# and the kernel's own ping-pong's p99 twice its calm figure; a build
# without the weight reads 1-2 ms on a calm one.
calm_stalls=300
# Over the bound in a minute called calm, the p99 still has to stay under
# half that of the lcore without its weight, measured right after
# (WEIGHTLESS starts that railgated), or, for a napping lcore (af_packet
# rails), under a third of the busy task's slice (3-4 ms here: the p99 of
# a loop that yields to it). CI of d27293e read udp rails' p99 at 599 and
# 797 us in a minute of 242 stalls a second (the kernel's ping-pong beside
# them at 20 us, the lcore weighed as it should); forced down this path
# here, udp rails read 27-97 us with the weight and 3127-3371 us without.
slice_third=1000
# A busy task on every CPU (hogs_start), and raillat's udp ping-pong beside
# them: N round trips, the table in FILE, the udp row's p99 on stdout.
hogs=()
hogs_start() {
  local c
  for c in $(seq 0 $(($(nproc) - 1))); do
    timeout 60 taskset -c "$c" sh -c 'while :; do :; done' &
    hogs+=($!)
  done
  sleep 0.5
}
hogs_stop() { kill "${hogs[@]}" 2> /dev/null; wait "${hogs[@]}" 2> /dev/null; hogs=(); }
busy_ping() { # N FILE
  ip netns exec "$ns" nice -n -10 "$raillat" --compare udp,floor-udp --server 198.18.0.1 -n "$1" -w 100 \
    --bw-size 0 > "$2" 2>&1
}
p99_of() { awk '$1 == "udp" && NF >= 10 {print $6}' "$1"; } # FILE
beside_busy_tasks() { # WHAT [P99_MAX [N [WEIGHTLESS [NAPPING]]]]
  local rc try t n=${3:-5000} typical p99 ftypical fp99 shared0 wait0 seconds0 shared1 wait1 seconds1 carried=0
  local nice_busy nice_alone p99_off
  # Read before the busy tasks start: the lcore sees them within about
  # 80 ms, and a railctl call on a busy host can take longer (CI read
  # core_shared 2 -> 2 once, the count taken after the lcore had seen them).
  # And read with the core its own where it comes back: a busy-polling
  # raillat beside the lcore a moment ago is a busy task too, for up to
  # 0.5 s after it has gone (the lcore weighs as shared_nice while its core
  # counts as shared and its traffic is light, none here). Another task
  # there can keep it shared longer: then the episode must last through
  # the busy tasks instead of being a new one.
  for t in $(seq 30); do
    nice_alone=$(lcore_nice)
    [ "$nice_alone" = 0 ] && break
    sleep 0.1
  done
  read -r shared0 wait0 seconds0 < <(lcore_stats core_shared runq_wait_seconds core_shared_seconds)
  [ -n "$seconds0" ] || fail "railctl stats: no lcores"
  [ "$nice_alone" = 0 ] || { echo "note: $1: the lcore's core still counts as shared after 3 s (another task there): the episode must last through the busy tasks"; carried=1; }
  hogs_start
  for try in 1 2; do
    busy_ping "$n" "$dir/busy.log"
    rc=$?
    p99=$(p99_of "$dir/busy.log")
    { [ $rc -ne 0 ] || [ -z "${2:-}" ] || under "$p99" "$2"; } && break
    # One run in a busy stretch may miss (ASan's read 1008 us once, under
    # its 3 ms): the bound must hold in one of two; a regression misses both.
    [ "$try" = 1 ] && { cat "$dir/busy.log"; echo "(p99 ${p99:-?} us, not under $2: once more, the machine may be busy)"; }
  done
  # The lcore's thread weighs as [daemon] shared_nice (-10) beside the busy
  # tasks, whose CPU time keeps its core counted as shared with or without
  # traffic (shared_core's probe: before it, CI read nice 0 here 0.8 s
  # after they started), and is back at its own nice once they are gone.
  nice_busy=$(lcore_nice)
  read -r shared1 wait1 seconds1 < <(lcore_stats core_shared runq_wait_seconds core_shared_seconds)
  ctl stats | grep '^lcore '
  hogs_stop
  # Back within 3 s: 0.5 s after the last probe that saw the tasks (0.5-0.6
  # s here; before the probes alone kept it shared, a busy host's waits
  # kept a napping lcore's core shared 1.4 s).
  for t in $(seq 30); do
    sleep 0.1
    nice_alone=$(lcore_nice)
    [ "$nice_alone" = 0 ] && break
  done
  [ "$nice_busy" = -10 ] && [ "$nice_alone" = 0 ] ||
    fail "$1: the lcore's nice beside the busy tasks ${nice_busy:-?}, not -10, or 3 s after them ${nice_alone:-?}, not 0"
  echo "ok: $1: the lcore weighed as nice $nice_busy beside the busy tasks, $nice_alone $((t / 10)).$((t % 10)) s after them"
  cat "$dir/busy.log"
  [ $rc -eq 0 ] || fail "$1: raillat udp beside busy tasks exited $rc"
  read -r typical p99 < <(awk '$1 == "udp" && NF >= 10 {print $4, $6}' "$dir/busy.log")
  read -r ftypical fp99 < <(awk '$1 == "floor-udp" && NF >= 10 {print $4, $6}' "$dir/busy.log")
  under "$typical" 500 ||
    fail "$1 beside a busy task on every CPU: t_typical ${typical:-?} us, not under 500 (yielding: 4 ms ticks)"
  # railctl stats saw it: the lcore waited for its CPU and counted it
  # shared (a new episode, or the one going on through the busy tasks: the
  # 0.5 s they ran before raillat at least). One going on may have begun
  # just before the first read, its nice not yet lowered: a clean-clone CI
  # run read core_shared 1 -> 1 with core_shared_seconds 0.011 -> 3.6.
  awk -v s0="$shared0" -v s1="$shared1" -v w0="$wait0" -v w1="$wait1" -v t0="$seconds0" -v t="$seconds1" -v c="$carried" \
    'BEGIN {exit !(w1 > w0 && t > 0 && (t - t0 >= 0.5 || !c && s1 > s0))}' ||
    fail "$1: railctl stats beside a busy task: core_shared $shared0 -> $shared1, runq_wait_seconds $wait0 -> $wait1, core_shared_seconds $seconds0 -> $seconds1"
  echo "ok: $1: railctl stats: core shared $shared0 -> $shared1 times ($seconds1 s), waited $wait0 -> $wait1 s for the CPU"
  if [ -n "${2:-}" ] && ! under "$p99" "$2"; then
    # A minute called calm at the start may not be one now: a clean-clone
    # CI run of cbd40e1 read udp rails' p99 at 512 and 439 us in a row,
    # the lcore weighed as it should, 40 s after the start's count. The
    # stalls are counted again, the busy tasks gone (an idle udp rails'
    # lcore sleeps, a napping one naps), and the busier count judges.
    local stalls_before=$stalls
    measure_stalls
    [ -n "$stalls_before" ] && { [ -z "$stalls" ] || [ "$stalls_before" -gt "$stalls" ]; } && stalls=$stalls_before
    if [ -n "$stalls" ] && [ "$stalls" -gt "$calm_stalls" ]; then
      echo "note: $1: p99 $p99 us, over $2, not judged: this machine took a CPU away for over 40 us $stalls times a second (the bound is judged at $calm_stalls or fewer)"
    elif [ -n "${5:-}" ] && under "$p99" "$slice_third"; then
      # A napping lcore's p99 follows how late the next request comes:
      # each nap in a row is twice the last (50 us to 1 ms), and a client
      # the busy host held up may find it in a nap of 200-400 us.
      echo "note: $1: p99 $p99 us, over $2 in a minute the stall count called calm ($stalls/s), but under $slice_third us, a third of the 3-4 ms slice a woken lcore that waits for the busy task reads"
    elif [ -n "${4:-}" ]; then
      # A busy minute the stall count missed, or a regression: the same
      # measurement on railgated without the weight (WEIGHTLESS starts it)
      # tells them apart. The weight must at least halve the p99.
      stop_gated
      "$4"
      hogs_start
      busy_ping "$n" "$dir/weightless.log"
      hogs_stop
      cat "$dir/weightless.log"
      p99_off=$(p99_of "$dir/weightless.log")
      awk -v on="$p99" -v off="$p99_off" 'BEGIN {exit !(on + 0 > 0 && 2 * on <= off + 0)}' ||
        fail "$1 beside a busy task on every CPU: p99 ${p99:-?} us, not under $2, and not half of ${p99_off:-?} us, the lcore's without its weight in the same minute (a woken lcore waited for the task's slice)"
      echo "note: $1: p99 $p99 us, over $2 in a busy minute the stall count missed ($stalls/s): under half the lcore's without its weight in the same minute, $p99_off us"
    else
      fail "$1 beside a busy task on every CPU: p99 ${p99:-?} us, not under $2 (a woken lcore waited for the task's slice)"
    fi
  fi
  echo "ok: $1 beside a busy task on every CPU: t_typical $typical us, p99 $p99 us (the kernel's ping-pong beside them: t_typical ${ftypical:-?} us, p99 ${fp99:-?} us; $n ping-pongs; stalls over 40 us ${stalls:-?}/s)"
}
beside_busy_tasks "udp rails" $((300 * k)) 5000 weightless_udp

for bad in "--size 3" "--transport tcp" "--compare udp,rdma" "--transport verbs" "-n 0" "--connect-timeout 0" \
  "--connect-timeout 3600001" "--bogus"; do
  # shellcheck disable=SC2086
  "$raillat" $bad > "$dir/bad.log" 2>&1; rc=$?
  [ $rc -eq 2 ] || fail "raillat $bad exited $rc"
  grep -q "^raillat: " "$dir/bad.log" || fail "raillat $bad: no message"
done
echo "ok: bad arguments refused"
stop_gated
# Measured again with no railgated running: the af_packet rails' p99 is
# judged by the machine's stalls of this minute, not of the test's start
# (a CI run read 411 and 479 us there on a host calm at the start).
measure_stalls

# The same on DPDK af_packet rails over veth pairs (config/local-af_packet.toml,
# whose lcore yields when idle: it has no socket to sleep on).
start_af_packet() { # CONFIG LOG
  ip netns exec "$ns" "$railgated" --config "$1" --socket "$dir/gated.sock" --metrics off -- -l 0-1 --no-huge --no-pci \
    -m 512 --file-prefix "$prefix" --log-level lib.eal:error > "$2" 2>&1 &
  gated_pid=$!
  wait_ready "$2"
}
af_packet_toml=$(dirname "$0")/../../config/local-af_packet.toml
start_af_packet "$af_packet_toml" "$dir/railgated-af_packet.log"
# The same rails with the lcore's weight off ([daemon] shared_nice = 0):
# the baseline a p99 over the bound is judged by.
sed 's/^\[daemon\]$/[daemon]\nshared_nice = 0/' "$af_packet_toml" > "$dir/weightless.toml"
weightless_af_packet() { start_af_packet "$dir/weightless.toml" "$dir/railgated-weightless.log"; }
# Its p99 is judged in the release build only (runs of 5000 at nice 0
# read 67-1973 us: 20,000 here). Over the bound on a calm machine, it
# must be under slice_third, or under half the p99 of the lcore without
# its weight, measured right after: in 4 of some 20 clean-clone CI runs
# here, a minute the stall count called calm read 411-725 us with the
# weight (the kernel's own ping-pong beside them at its calm p99, 25 us).
# The half alone failed a clean-clone CI run of 4eb3731: 386 and 468 us
# with the weight, 424 without it in that minute (279 stalls a second).
# Without the weight the p99 is mostly a slice: 3 runs here (1014-1081
# stalls a second) read 4015, 4101 and 4015 us, against 500, 348 and 132
# us with it.
if [ "$k" = 1 ]; then
  beside_busy_tasks "af_packet rails" 300 20000 weightless_af_packet napping
else
  beside_busy_tasks "af_packet rails"
fi
stop_gated
echo PASS
