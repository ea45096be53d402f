#!/usr/bin/env bash
# Faults, as a job meets them: railgated on 2 af_packet rails (veth pairs
# into a worker namespace), 3 railbench workers over kernel UDP.
#  1. loss, duplicates, reordering and corruption both ways on both rails
#     (railctl fault): bit-exact, every injected drop and caught corruption
#     counted;
#     1b. 30% of the LEAVE_ACKs lost: the workers' LEAVEs come again and are
#     answered, costing a retransmit timeout (10 ms or more), not the retries;
#  2. a worker killed (SIGKILL) and 3. a worker stopped (SIGSTOP): the others
#     fail within 2 s naming it, the job is gone, the same job id works again;
#     2b. a worker killed while railgated's ERRORs to another are lost: that
#     one still learns which rank died, when it next sends;
#     3b. railgated and 3c. a worker paused for 0.3 s: the job waits it out,
#     bit-exact, resending nothing railgated holds (each timeout's PING
#     names a chunk: HELD for a late peer, a chunk only when it is lost);
#  4. a worker restarted into a live job: refused, naming where its rank is
#     bound, never handed an old result;
#  5. railgated killed: workers fail within 2 s; killed and restarted:
#     workers with --retry re-join and finish bit-exact; a rank that lost
#     an operation's result: the others replay it for it; railgated silent
#     to one rank past its peer timeout: it keeps the job and resumes it once
#     answered (no rank re-joins), also when the others have finished and left;
#  6. a rail's link goes down mid-job: railgated ends the job, the workers
#     re-join striping around it and finish bit-exact; back up, new jobs use
#     it; a rail that stops answering (its frames all dropped) is found by
#     the workers the same way;
#  7. a JOIN refused part-way (rail 1's job table full of forged, assembling
#     jobs): the worker leaves rail 0; the forged jobs expire;
#  8. railgated exits cleanly with every buffer back.
# Each detection time is printed (the issue's figures).
# Under the sanitizers (RAILGATE_SANITIZED=1) every process is 2-3x slower:
# railgated's stall time, the workers' peer and join timeouts and every bound
# the test judges are scaled by k = 2, so the same faults are found the same
# way (k = 3 until 2026-12-02: 152 s of CI's 30 minutes under ASan, against
# 112-113 s at k = 2, which passed 2 of 2 runs there, a killed rank found
# after 2.21 s against its bound of 4); under TSan k = 3.
# Under TSan (RAILGATE_TSAN=1: 5-10x slower) only the steps where
# railgated's threads meet run: 1 (the fault injector set and cleared from
# the control thread while the lcore runs), 5 (railgated killed and
# restarted), 6 (a link's state from the ethdev's interrupt thread; not
# its silent rail, found by the workers) and 8 (the threads' exit); the
# others are one thread's logic, which the release and ASan runs check
# (TSan ran them all in 110-200 s of CI's 30 minutes; the silent rail took
# 19 s of its 98 here).
#   faults.sh RAILGATED RAILBENCH RAILCTL
set -u
railgated=$1 railbench=$2 railctl=$3
. "$(dirname "$0")/lib.sh"
require_netns

k=1
[ "${RAILGATE_SANITIZED:-0}" = 1 ] && k=2
[ "${RAILGATE_TSAN:-0}" = 1 ] && k=3 # slower still (below)
ms() { echo $(($1 * k)); }                               # MS scaled
secs() { awk -v s="$1" -v k="$k" 'BEGIN { print s * k }'; } # seconds scaled
d=rgfd$$ w=rgfw$$ log=$(mktemp -d)
gated_pid=
trap 'cleanup_netns "$d $w" "$log"' EXIT
two_rail_netns "$d" "$w"

cat > "$log/rg.toml" <<TOML
$test_eal
[daemon]
control_socket = "$log/rg.sock"
metrics = "127.0.0.1:9478"
[pools]
max_jobs = 3
[jobs]
stall_ms = $(ms 1000)
assemble_ms = $(ms 3000)
idle_ms = $(ms 4000)
[[rail]]
name = "r0"
devargs = "net_af_packet0,iface=rgd0,framesz=2048,blocksz=4096,framecnt=1024"
ip = "198.18.0.1"
[[rail]]
name = "r1"
devargs = "net_af_packet1,iface=rgd1,framesz=2048,blocksz=4096,framecnt=1024"
ip = "198.18.1.1"
TOML

start_gated() { # LOGNAME
  ip netns exec "$d" "$railgated" --config "$log/rg.toml" > "$log/railgated-$1.log" 2>&1 &
  gated_pid=$!
  wait_ready "$log/railgated-$1.log"
}
ctl() { ip netns exec "$d" "$railctl" --socket "$log/rg.sock" "$@"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
# worker RANK JOB ARGS...: one railbench rank in the background; its pid in
# $wpid. On the CPUs in $place, if set.
place=
worker() {
  local rank=$1 job=$2
  shift 2
  ip netns exec "$w" ${place:+taskset -c "$place"} "$railbench" --transport udp --server 198.18.0.1 --rank "$rank" --workers 3 --job "$job" \
    --peer-timeout "$(ms 1000)" --join-timeout "$(ms 5000)" "$@" \
    > "$log/w-$job-$rank.log" 2>&1 &
  wpid=$!
}
# job JOB ARGS...: 3 ranks, all must pass bit-exact.
job() {
  local j=$1 pids=() r
  shift
  for r in 0 1 2; do worker "$r" "$j" "$@"; pids+=($wpid); done
  for r in 0 1 2; do wait "${pids[$r]}" || fail "job $j: rank $r failed"; done
  grep -q "Out of bounds values : 0 OK" "$log/w-$j-0.log" || fail "job $j: wrong values"
}
active_jobs() { ctl --json status | python3 -c 'import json,sys; print(sum(r["active_jobs"] for r in json.load(sys.stdin)["rails"]))'; }
# wait_running JOB: until the job's 3 ranks have joined (their table
# headers) and railgated has summed 8 chunks of theirs on rail r0: more
# than the one-element barrier before each operation (one chunk on r0), so
# every rank is into an operation's data. Not a fixed time after the
# headers: what follows (a kill, a pause, a link down) must find the job
# under way, and on a quick run 0.5 s was most of a 6-operation job. (One
# chunk was not enough: right after the barrier a rank paused before it
# had the barrier's result left r0's slot 0 held, not waiting for it, and
# the pause step's look at the job list failed: ci124.)
wait_running() { # JOB
  local base
  for _ in $(seq $((100 * k))); do
    if grep -q "size" "$log/w-$1-0.log" 2> /dev/null && grep -q "size" "$log/w-$1-1.log" 2> /dev/null &&
      grep -q "size" "$log/w-$1-2.log" 2> /dev/null; then
      base=$(rail_stat r0 aggregations)
      for _ in $(seq $((200 * k))); do
        [ "$(rail_stat r0 aggregations)" -ge $((base + 8)) ] && return
        sleep 0.05
      done
      fail "job $1: its ranks joined, but railgated summed under 8 chunks of theirs in $((10 * k)) s"
    fi
    sleep 0.1
  done
  fail "job $1 did not start"
}
# Survivors of a failure: each must exit non-zero within 2 s (k x 2 s) of
# T0, saying ERE. Prints the slowest detection time. (Called in $(...),
# its fail ends only that subshell: the caller checks the status.)
survivors_fail() { # T0 ERE PID...
  local t0=$1 ere=$2 p worst=0 t limit
  limit=$(secs 2.0)
  shift 2
  for p in "$@"; do
    for _ in $(seq $((50 * k))); do kill -0 "$p" 2> /dev/null || break; sleep 0.05; done
    kill -0 "$p" 2> /dev/null && fail "a survivor still runs $(secs 2.5) s after the failure"
    wait "$p" && fail "a survivor succeeded"
    t=$(elapsed "$t0" "$(now)")
    worst=$(awk -v a="$worst" -v b="$t" 'BEGIN { print (b > a ? b : a) }')
  done
  grep -lE "$ere" "$log"/w-*.log > /dev/null || { tail -n 3 "$log"/w-*.log; fail "no survivor said: $ere"; }
  awk -v t="$worst" -v l="$limit" 'BEGIN { exit !(t <= l) }' || fail "survivors took ${worst} s (more than $limit s)"
  echo "$worst"
}
big=(--count 4000000 -n 400 -w 0)
# The operations of the jobs that must outlast a restart or a link going
# down: 16 MB, 4 MB under TSan (where a 16 MB one took 2 s, and these two
# jobs 21 s of its run; its steps check the threads, not the sizes).
op=4000000
[ "${RAILGATE_TSAN:-0}" = 1 ] && op=1000000
# A job of 3 ranks, off railgated's polling core, during which WHO
# (railgated, or a rank) is paused SECONDS (default 0.3; SIGSTOP), the
# workers given ARGS too; every rank must finish bit-exact. Sets $retx:
# the chunks the ranks sent again.
pause_during() { # JOB WHO LABEL [SECONDS [ARGS...]]
  local j=$1 who=$2 label=$3 pause=${4:-0.3} pids=() r victim
  shift 4 2> /dev/null || shift $#
  place=$(cpus_off_lcores "$gated_pid")
  for r in 0 1 2; do worker "$r" "$j" --count 4000000 -n 6 -w 0 "$@"; pids+=($wpid); done
  place=
  wait_running "$j"
  if [ "$who" = railgated ]; then victim=$gated_pid; else victim=${pids[$who]}; fi
  kill -STOP "$victim"
  # $during (a command, if set) looks at railgated meanwhile; the pause
  # lasts until it is done too.
  local look=
  if [ -n "${during:-}" ]; then
    $during &
    look=$!
  fi
  sleep "$pause"
  [ -z "$look" ] || wait "$look" || fail "$label paused: $during failed"
  kill -CONT "$victim"
  # (The job must outlast the pause, or what follows judges nothing.)
  for r in 0 1 2; do
    kill -0 "${pids[$r]}" 2> /dev/null || fail "$label paused: rank $r had ended before the pause did (make the job longer)"
  done
  for r in 0 1 2; do wait "${pids[$r]}" || fail "$label paused: rank $r failed: $(tail -n 2 "$log/w-$j-$r.log")"; done
  grep -q "Out of bounds values : 0 OK" "$log/w-$j-0.log" || fail "$label paused: wrong values"
  retx=0
  for r in 0 1 2; do retx=$((retx + $(sed -n 's/^# retransmits \([0-9]*\).*/\1/p' "$log/w-$j-$r.log"))); done
}

# The steps that run (see above).
all_steps=1
[ "${RAILGATE_TSAN:-0}" = 1 ] && all_steps=0

start_gated 1

# --- 1. loss, duplicates, reordering, corruption, both ways, both rails.
for r in r0 r1; do ctl fault set $r drop=0.05,dup=0.01,reorder=0.05,corrupt=0.01,seed=7 > /dev/null || fail "fault set $r"; done
ctl fault show | grep -q "drop=0.05" || fail "fault show"
job 1 --count 1000003,4097,1 -n 3 -w 0
job 2 --dtype bf16 --count 1000003,4097,1 -n 3 -w 0
inj=$(($(rail_stat r0 fault_injected) + $(rail_stat r1 fault_injected)))
bad=$(($(rail_stat r0 udp_checksum) + $(rail_stat r1 udp_checksum)))
resent=$(($(rail_stat r0 results_resent) + $(rail_stat r1 results_resent)))
[ "$inj" -gt 0 ] && [ "$bad" -gt 0 ] && [ "$resent" -gt 0 ] ||
  fail "faults not counted: injected drops $inj, caught corruptions $bad, results resent $resent"
for r in r0 r1; do ctl fault clear $r > /dev/null || fail "fault clear $r"; done
ctl fault show | grep -q "drop=" && fail "fault clear left a spec"
echo "ok: 5% loss, 1% duplicates, 5% reordering, 1% corruption both ways: fp32 and bf16 bit-exact ($inj injected drops, $bad corrupted datagrams caught by checksum, $resent results resent)"

if [ "$all_steps" = 1 ]; then # steps 1b-4
# --- 1b. 30% of the LEAVE_ACKs lost on both rails: a rank whose ACK was lost
# sends its LEAVE again, after about a retransmit timeout, and railgated
# acknowledges it again (it is no member any more). Four jobs with the
# loss take at most 0.8 s more than four without it (the waits double
# from 10 ms): before, a lost ACK cost its worker every retry, half a
# second (1.5 s more).
timed_jobs() { # FIRST_JOB: 4 small jobs; prints their seconds
  local t0 j
  t0=$(now)
  for j in $1 $(($1 + 1)) $(($1 + 2)) $(($1 + 3)); do job "$j" --count 4097 -n 1 -w 0; done
  elapsed "$t0" "$(now)"
}
# leave_ack_cost CLEAN_JOB LOSSY_JOB: 4 jobs without the loss, 4 with it;
# sets clean, lossy (seconds) and lost (the LEAVE_ACKs dropped).
leave_ack_cost() {
  local inj0
  clean=$(timed_jobs "$1") || { echo "$clean"; exit 1; }
  inj0=$(($(rail_stat r0 fault_injected) + $(rail_stat r1 fault_injected)))
  for r in r0 r1; do ctl fault set $r drop=0.3,type=leave_ack,dir=tx,seed=11 > /dev/null || fail "fault set leave_ack"; done
  lossy=$(timed_jobs "$2") || { echo "$lossy"; exit 1; }
  lost=$(($(rail_stat r0 fault_injected) + $(rail_stat r1 fault_injected) - inj0))
  for r in r0 r1; do ctl fault clear $r > /dev/null; done
  [ "$lost" -ge 2 ] || fail "only $lost LEAVE_ACKs were lost"
}
within_cost() { awk -v a="$lossy" -v b="$clean" -v l="$(secs 0.8)" 'BEGIN { exit !(a - b <= l) }'; }
again0=$(($(rail_stat r0 leaves_again) + $(rail_stat r1 leaves_again)))
leave_ack_cost 20 24
# The bound must hold in one of two tries: a CI run read 0.83 s more once
# (2.12 s against 1.29), on a busy stretch; a regression misses both.
within_cost || {
  echo "(4 jobs took $lossy s with $lost of their LEAVE_ACKs lost, $clean s without: once more, the machine may be busy)"
  leave_ack_cost 50 54
}
within_cost ||
  fail "4 jobs took $lossy s with $lost of their LEAVE_ACKs lost, $clean s without: a lost LEAVE_ACK costs its worker its retries"
again=$(($(rail_stat r0 leaves_again) + $(rail_stat r1 leaves_again) - again0))
[ "$again" -ge 1 ] || fail "no LEAVE was acknowledged again ($lost LEAVE_ACKs lost)"
ctl stats | grep -q "acknowledged again" || fail "railctl stats does not show the LEAVEs acknowledged again"
echo "ok: $lost LEAVE_ACKs lost: 4 jobs of 3 ranks on 2 rails took $lossy s ($clean s without the loss; $again LEAVEs acknowledged again)"

# --- 2. a worker killed: named within 2 s, the job gone, the id free again.
pids=()
for r in 0 1 2; do worker "$r" 10 "${big[@]}"; pids+=($wpid); done
wait_running 10
t0=$(now)
pkill -KILL -P "${pids[2]}" 2> /dev/null || kill -KILL "${pids[2]}"
t=$(survivors_fail "$t0" "rank 2 sent nothing to slot" "${pids[0]}" "${pids[1]}") || { echo "$t"; exit 1; }
wait "${pids[2]}" 2> /dev/null
sleep 0.1
[ "$(active_jobs)" = 0 ] || fail "a killed worker's job is still active"
job 10 --count 1000003,1 -n 2 -w 0
echo "ok: SIGKILL of rank 2: ranks 0 and 1 failed naming it after $t s; no job left; job 10 again bit-exact"

# --- 2b. a worker killed, then everything railgated sends rank 0 lost
# (both rails, so its ERRORs about the job's end too): once the job has
# ended on both rails and the loss stops, rank 0's next message is told
# why the job ended, naming rank 2, not only that the job is gone. Its
# peer timeout is long enough not to take the silence for railgated's.
pids=()
for r in 0 1 2; do
  if [ "$r" = 0 ]; then worker "$r" 13 "${big[@]}" --peer-timeout "$(ms 8000)"; else worker "$r" 13 "${big[@]}"; fi
  pids+=($wpid)
done
wait_running 13
pkill -KILL -P "${pids[2]}" 2> /dev/null || kill -KILL "${pids[2]}"
# (After the kill: with rank 0's results lost while rank 2 still sent, the
# slots would wait on rank 0, which railgated hears retransmitting.)
for r in r0 r1; do ctl fault set $r drop=1,rank=0,dir=tx > /dev/null || fail "fault set rank 0"; done
# (Rail by rail: a stall on one, rank 1's relayed abort on the other.)
for _ in $(seq $((100 * k))); do [ "$(active_jobs)" = 0 ] && break; sleep 0.05; done
[ "$(active_jobs)" = 0 ] || fail "the job did not end on both rails"
wait "${pids[1]}" && fail "rank 1 succeeded although rank 2 died"
grep -q "rank 2 sent nothing to slot" "$log/w-13-1.log" || { grep -h "failed" "$log"/w-13-*.log; fail "rank 1 did not name rank 2"; }
kill -0 "${pids[0]}" 2> /dev/null || { tail -n 3 "$log/w-13-0.log"; fail "rank 0 ended although it heard nothing"; }
t0=$(now)
for r in r0 r1; do ctl fault clear $r > /dev/null; done
for _ in $(seq $((100 * k))); do kill -0 "${pids[0]}" 2> /dev/null || break; sleep 0.05; done
kill -0 "${pids[0]}" 2> /dev/null && fail "rank 0 still runs $(secs 5) s after the loss stopped"
t=$(elapsed "$t0" "$(now)")
wait "${pids[0]}" && fail "rank 0 succeeded although rank 2 died"
wait "${pids[2]}" 2> /dev/null
grep -q "rank 2 sent nothing to slot" "$log/w-13-0.log" || { tail -n 3 "$log/w-13-0.log"; fail "rank 0, whose ERRORs were lost, was not told that rank 2 died"; }
retold=$(($(rail_stat r0 ends_retold) + $(rail_stat r1 ends_retold)))
[ "$retold" -ge 1 ] || fail "no job's end was told again"
ctl stats | grep -q "ends told again" || fail "railctl stats does not show the ends told again"
echo "ok: SIGKILL of rank 2 while rank 0's ERRORs were lost: rank 0 was told which rank died ${t} s after the loss stopped ($retold ends told again)"

# --- 3. a worker stopped: named within 2 s; once resumed it fails too.
pids=()
for r in 0 1 2; do worker "$r" 11 "${big[@]}"; pids+=($wpid); done
wait_running 11
t0=$(now)
kill -STOP "${pids[1]}"
t=$(survivors_fail "$t0" "rank 1 sent nothing to slot" "${pids[0]}" "${pids[2]}") || { echo "$t"; exit 1; }
[ "$(active_jobs)" = 0 ] || fail "a stopped worker's job is still active"
kill -CONT "${pids[1]}"
for _ in $(seq $((60 * k))); do kill -0 "${pids[1]}" 2> /dev/null || break; sleep 0.05; done
kill -0 "${pids[1]}" 2> /dev/null && fail "the resumed worker hangs"
wait "${pids[1]}" && fail "the resumed worker succeeded"
echo "ok: SIGSTOP of rank 1: ranks 0 and 2 failed naming it after $t s; resumed, it failed too"

# --- 3b. railgated paused (SIGSTOP) for 0.3 s, under the peer timeout: the
# workers wait it out and finish bit-exact. Each timeout of the silent
# rail (5 ms, doubling) sends a PING naming its oldest chunk, and nothing
# else: railgated, back, answers from what it holds (HELD, or the kept
# result), and a chunk goes again only when it is not there (a PONG naming
# it: lost in the pause). Until 2026-11-28 each timeout also sent a chunk
# (6-9 in all here, 32 measured once); until 2026-11-27 the window (423),
# and at every timeout 1154.
# The workers run off railgated's polling core, as the guide places
# co-located workers: sharing it, a busy machine's scheduler alone made
# them resend 600-1300 chunks in the same job without a pause.
pause_during 14 railgated railgated
# Per worker and rail: what the pause dropped (railgated's af_packet ring
# holds a window and more; 0 measured in release runs).
[ "$retx" -le $((3 * 2 * (8 + 8 * k))) ] ||
  fail "railgated paused 0.3 s: the workers retransmitted $retx chunks: $(grep -h '^# retransmits\|^# congestion' "$log"/w-14-*.log | tr '\n' ' ')"
echo "ok: railgated paused 0.3 s: the job finished bit-exact, $retx chunks retransmitted by 3 workers on 2 rails"

# --- 3c. a rank paused (SIGSTOP) for 0.3 s, under the stall time: a late
# peer, not a loss. The others' PINGs find their chunks held (railgated
# answers HELD), and they wait, their timers doubling, sending nothing
# again; the job finishes bit-exact.
held0=$(($(rail_stat r0 held) + $(rail_stat r1 held)))
# Meanwhile railctl job list says what job 19 waits for: its oldest partly
# contributed slot waits for rank 1 alone, on both rails (or on r0 alone,
# when the pause found the ranks at a barrier: a one-chunk allreduce), and
# rank 1 has been silent since the pause began (what an operator reads
# when a job does not progress).
waits_for_rank_1() {
  # Until ranks 0 and 2 have filled a slot that rank 1 does not (the pause
  # may find them computing their inputs, before the first barrier): every
  # 50 ms, for at most 5 s. The pause lasts until then, and may pass the
  # stall time: a slot's wait, and so a stall, begins only when ranks 0
  # and 2 fill it, and the pause ends within 50 ms of that. (It was 0.6 of
  # the stall time from the pause's start: on a busy CI host, ranks 0 and
  # 2 were still making their inputs then, no slot was partial, and the
  # check failed.)
  local until
  until=$(awk -v t="$(now)" -v s="$(ms 5000)" 'BEGIN { printf "%.3f", t + s / 1000 }')
  while :; do
    sleep 0.05
    ctl --json job list > "$log/jobs-19.json" || return 1
    # Rank 0's chunk alone makes a slot partial too (waiting for ranks 1
    # and 2: CI caught it 3 ms after rank 0 filled it, rank 2 still making
    # its input): wait until r0's oldest partial slot waits for rank 1
    # alone, and any on r1 too.
    python3 -c 'import json, sys
waits = {j["rail"]: j["oldest_partial"]["waiting_for"] for j in json.load(open(sys.argv[1]))["jobs"]
         if j["job"] == 19 and "oldest_partial" in j}
sys.exit(not (waits.get("r0") == [1] and all(w == [1] for w in waits.values())))' "$log/jobs-19.json" && break
    awk -v t="$(now)" -v u="$until" 'BEGIN { exit !(t > u) }' && break
  done
  python3 - "$log/jobs-19.json" << 'EOF' || { echo "FAIL: job list during rank 1's pause: $(ctl job list 2>&1)"; return 1; }
import json, sys
jobs = [j for j in json.load(open(sys.argv[1]))["jobs"] if j["job"] == 19]
assert sorted(j["rail"] for j in jobs) == ["r0", "r1"], jobs
assert any("oldest_partial" in j for j in jobs if j["rail"] == "r0"), jobs
for j in jobs:
    assert j["joined"] == [0, 1, 2] and j["assembled"], j
    assert "oldest_partial" not in j or j["oldest_partial"]["waiting_for"] == [1] and j["partial_slots"] >= 1, j
    assert j["heard_ms"][1] >= 50, j
EOF
  echo "railctl job list while rank 1 is stopped:"
  ctl job list
}
during=waits_for_rank_1 pause_during 19 1 "rank 1"
held=$(($(rail_stat r0 held) + $(rail_stat r1 held) - held0))
[ "$held" -gt 0 ] || fail "rank 1 paused: no PING of ranks 0 and 2 was answered HELD ($retx retransmits)"
# Nothing is lost, so nothing need go again (0 measured in release runs; a
# few allowed for a busy machine's drops, more under the sanitizers). The
# window at the first timeout and again at every PONG was 600-700; a chunk
# with every timeout's PING, 8.
[ "$retx" -le $((3 * 2 * 2 * k)) ] ||
  fail "rank 1 paused 0.3 s: the workers retransmitted $retx chunks ($held answered HELD): $(grep -h '^# retransmits' "$log"/w-19-*.log | tr '\n' ' ')"
echo "ok: rank 1 paused 0.3 s: the job finished bit-exact, $retx chunks retransmitted by 3 workers on 2 rails, $held answered HELD"

# --- 3d. railgated paused for 1.5 times its stall time, the workers'
# peer timeout longer still (they wait for it): what they sent meanwhile
# waits in railgated's receive queues, and railgated, back, must not take
# its own absence for a rank's silence. Before 2026-11-30 it ended the job
# at once, naming an innocent rank ("rank 1 sent nothing to slot 0 ... for
# 2998 ms while the other ranks did"). Its lcore counts the absence.
stalls0=$(($(rail_stat r0 stalls) + $(rail_stat r1 stalls)))
# 12 operations: 0.2-0.25 s each here, 2 done when the pause begins (40
# took 11 s of CI's 30 minutes, 8 of them after it).
pause_during 24 railgated "railgated (past its stall time)" "$(secs 1.5)" --peer-timeout "$(ms 10000)" -n 12
stalls=$(($(rail_stat r0 stalls) + $(rail_stat r1 stalls) - stalls0))
[ "$stalls" = 0 ] || fail "railgated paused past its stall time: it ended $stalls job(s) as stalled"
away=$(ctl --json stats | python3 -c 'import json,sys; print(sum(l.get("absences", 0) for l in json.load(sys.stdin)["lcores"]))')
[ "$away" -ge 1 ] || fail "railgated paused $(secs 1.5) s: its lcore counted no absence"
ctl stats | grep -q "away" || fail "railctl stats does not show the lcore's absences"
echo "ok: railgated paused $(secs 1.5) s (its stall time $(ms 1000) ms): the job finished bit-exact, no rank blamed, $retx chunks retransmitted, $away absence(s) counted"

# --- 4. a worker restarted into its live job: refused, never an old result.
pids=()
for r in 0 1 2; do worker "$r" 12 "${big[@]}"; pids+=($wpid); done
wait_running 12
pkill -KILL -P "${pids[1]}" 2> /dev/null || kill -KILL "${pids[1]}"
worker 1 12 "${big[@]}" --join-timeout "$(ms 400)"
wait "$wpid" && fail "a restarted rank joined its live job"
# Refused while the old binding is fresh; if the new process's JOIN comes
# after the old one has been silent for the stall time (a loaded machine
# starts it slowly), it takes over and the job restarts; if it comes before
# the job completed a chunk (under the sanitizers the ranks fill their 16 MB
# inputs for seconds after they joined), both claims are named and the job
# ends (since wait_running waits for summed chunks, that case should no
# longer arise; it stays an accepted outcome). Each clearly, and never
# with an old result.
next=12
if grep -q "rank 1 of job 12 is joined from 198.18.0.10" "$log/w-12-1.log"; then
  survivors_fail "$(now)" "rank 1 sent nothing" "${pids[0]}" "${pids[2]}" > /dev/null
  how="was refused (its old process still bound), the job ended naming it"
elif cat "$log"/w-12-*.log | grep -q "two processes claim rank 1 of job 12 .* before it started"; then
  survivors_fail "$(now)" "two processes claim rank 1 of job 12" "${pids[0]}" "${pids[2]}" > /dev/null
  how="claimed rank 1 before the job had completed a chunk: both claims named, the job ended"
  # Job 12's id and token are refused for a while after a clash (the same
  # run started twice, as railgated takes it): the next job is a new one.
  next=21
elif grep -qE "rank 1 re-joined job 12 from 198.18.0.10:[0-9]+ as a new process; the job restarts" "$log/w-12-0.log"; then
  survivors_fail "$(now)" "rank 1 re-joined job 12" "${pids[0]}" "${pids[2]}" > /dev/null
  how="took over (its old process silent past the stall time), the job restarted"
else
  cat "$log"/w-12-*.log
  fail "restart: neither a clear refusal, nor both claims named, nor a clear takeover"
fi
job "$next" --count 100003 -n 2 -w 0
echo "ok: a restarted rank 1 $how, then job $next ran afresh"
fi # steps 1b-4

# --- 5. railgated killed: noticed within 2 s; restarted: --retry finishes.
pids=()
for r in 0 1 2; do worker "$r" 13 "${big[@]}"; pids+=($wpid); done
wait_running 13
t0=$(now)
kill -KILL "$gated_pid"
wait "$gated_pid" 2> /dev/null
gated_pid=
t=$(survivors_fail "$t0" "railgated stopped answering" "${pids[@]}") || { echo "$t"; exit 1; }
echo "ok: railgated killed: every worker failed after at most $t s (railgated stopped answering)"
start_gated 2
pids=()
for r in 0 1 2; do worker "$r" 14 --count "$op" -n 12 -w 0 --retry 3; pids+=($wpid); done
# Killed with the job under way (wait_running): on a quick run, 1 s after
# they started, the 8 operations of 16 MB it had were done and nothing was
# left to recover (CI, 2026-12-04).
wait_running 14
kill -KILL "$gated_pid"
wait "$gated_pid" 2> /dev/null
sleep "$(secs 1)"
start_gated 3
for r in 0 1 2; do wait "${pids[$r]}" || { tail -n 5 "$log"/w-14-*.log; tail -n 30 "$log"/railgated-3.log; fail "railgated restart: rank $r did not finish"; }; done
grep -q "Out of bounds values : 0 OK" "$log/w-14-0.log" || fail "railgated restart: wrong values"
grep -qE "recoveries [1-9]" "$log/w-14-0.log" || fail "railgated restart: no recovery counted"
echo "ok: railgated killed and restarted mid-job: 3 workers with --retry re-joined and finished bit-exact"

if [ "$all_steps" = 1 ]; then
# --- 5b. one rank misses an operation's result while the others move on
# (railgated's sends to rank 2 dropped on rail r0, one way): rank 2 finds
# r0 silent while r1 answers (the rail down, for it), ends the job and
# re-joins around r0 one operation behind the others; they replay that
# operation from the input they kept and all finish bit-exact. (Silent on
# every rail, rank 2 would keep the job and resume it instead: 5c.)
pids=()
for r in 0 1 2; do worker "$r" 18 --count 1000 -n 8000 -w 0 --retry 5; pids+=($wpid); done
wait_running 18
ctl fault set r0 drop=1,rank=2,dir=tx > /dev/null || fail "fault set rank 2"
sleep "$(secs 2.5)"
ctl fault clear r0 > /dev/null
for r in 0 1 2; do wait "${pids[$r]}" || { tail -n 5 "$log"/w-18-*.log; fail "replay: rank $r did not finish"; }; done
for r in 0 1 2; do grep -q "Out of bounds values : 0 OK" "$log/w-18-$r.log" || fail "replay: rank $r wrong values"; done
# (Which comes first decides whether rank 2's JOIN ends the others' job
# or theirs is refused; either way ranks 0 and 1 replay.)
for r in 0 1; do
  grep -qE "replays [1-9]" "$log/w-18-$r.log" || { tail -n 3 "$log/w-18-$r.log"; fail "replay: rank $r replayed nothing"; }
done
echo "ok: rank 2 lost an operation's result (railgated's sends to it dropped on r0 $(secs 2.5) s): ranks 0 and 1 replayed that operation for it and all finished bit-exact"

# --- 5c. railgated silent to one rank past its peer timeout (everything it
# sends rank 1 but the JOIN_ACKs dropped, 2.5 s; peer timeout 1 s, join
# timeout 5 s) while the others wait for it: rank 1 keeps the job, asks
# again (resume: railgated still holds the job and the results it kept),
# and once answered goes on; no rank re-joins, all finish bit-exact. Before,
# rank 1 ended the job and every rank re-joined and replayed; a rank whose
# peers had finished and left re-joined alone, a job that expired at each
# retry.
# 5000 operations: about 0.45 ms each here, about 1,100 done when the
# silence begins, the rest (2.3 s) after it; a job that ended first fails
# the resume check below. (12000 took 7.5 s after the silence.)
pids=()
for r in 0 1 2; do worker "$r" 31 --count 1000 -n 5000 -w 0 --retry 2; pids+=($wpid); done
wait_running 31
for r in r0 r1; do
  ctl fault set $r drop=1,rank=1,type=result+pong+held,dir=tx > /dev/null || fail "fault set: silent to rank 1"
done
sleep "$(secs 2.5)"
for r in r0 r1; do ctl fault clear $r > /dev/null; done
for r in 0 1 2; do wait "${pids[$r]}" || { tail -n 4 "$log"/w-31-*.log; fail "silent to rank 1: rank $r failed"; }; done
for r in 0 1 2; do grep -q "Out of bounds values : 0 OK" "$log/w-31-$r.log" || fail "silent to rank 1: rank $r wrong values"; done
grep -q "recoveries 0, replays 0, resumes 1" "$log/w-31-1.log" ||
  { grep -h "recoveries" "$log"/w-31-*.log; fail "silent to rank 1: rank 1 did not resume once without a re-join"; }
for r in 0 2; do
  grep -q "recoveries 0, replays 0, resumes 0" "$log/w-31-$r.log" ||
    { grep -h "recoveries" "$log"/w-31-*.log; fail "silent to rank 1: rank $r re-joined"; }
done
echo "ok: railgated silent to rank 1 for $(secs 2.5) s (its peer timeout $(ms 1000) ms): it resumed the job, no rank re-joined, all finished bit-exact"

# --- 5d. the lone survivor: railgated silent to rank 1 from the start (but
# its JOIN_ACKs) while ranks 0 and 2 get their results, finish and leave
# (one operation of two chunks per rail, no barrier: rank 1 sends it all
# in its first window). Rank 1 keeps the job, which railgated still holds
# with the results it kept, and once answered finishes bit-exact. Before,
# it ended the job and re-joined alone, a job that expired at each retry.
for r in r0 r1; do
  ctl fault set $r drop=1,rank=1,type=result+pong+held,dir=tx > /dev/null || fail "fault set: silent to rank 1"
done
pids=()
for r in 0 1 2; do worker "$r" 32 --count 1400 -n 1 -w 0 --no-barrier --retry 2; pids+=($wpid); done
for r in 0 2; do wait "${pids[$r]}" || { tail -n 3 "$log/w-32-$r.log"; fail "lone survivor: rank $r failed"; }; done
sleep "$(secs 1.5)" # past rank 1's peer timeout
kill -0 "${pids[1]}" 2> /dev/null || { tail -n 3 "$log/w-32-1.log"; fail "lone survivor: rank 1 ended before railgated answered it"; }
for r in r0 r1; do ctl fault clear $r > /dev/null; done
wait "${pids[1]}" || { tail -n 4 "$log/w-32-1.log"; fail "lone survivor: rank 1 did not finish"; }
grep -q "Out of bounds values : 0 OK" "$log/w-32-1.log" || fail "lone survivor: wrong values"
grep -q "recoveries 0, replays 0, resumes 1" "$log/w-32-1.log" ||
  { grep "recoveries" "$log/w-32-1.log"; fail "lone survivor: rank 1 did not resume once without a re-join"; }
echo "ok: railgated silent to rank 1 while ranks 0 and 2 finished and left: rank 1 resumed the job alone and finished bit-exact"
fi # steps 5b-5d

# --- 6. a rail down mid-job: the job restripes and finishes.
pids=()
for r in 0 1 2; do worker "$r" 15 --count "$op" -n 6 -w 0 --retry 3; pids+=($wpid); done
wait_running 15
t0=$(now)
ip -n "$w" link set rgw1 down
for r in 0 1 2; do wait "${pids[$r]}" || { tail -n 5 "$log"/w-15-*.log; fail "rail down: rank $r did not finish"; }; done
t=$(elapsed "$t0" "$(now)")
grep -q "Out of bounds values : 0 OK" "$log/w-15-0.log" || fail "rail down: wrong values"
grep -q "after recovering: striping over 1 of 2 rails (0x2 excluded" "$log/w-15-0.log" ||
  { tail -n 4 "$log/w-15-0.log"; fail "rail down: the job did not restripe around rail 1"; }
ctl --json status | python3 -c 'import json,sys; r={x["name"]: x["link"] for x in json.load(sys.stdin)["rails"]}; assert r == {"r0": "up", "r1": "down"}, r' ||
  fail "status does not show r1's link down"
grep -q "rail r1: link down" "$log/railgated-3.log" || fail "railgated did not log the link going down"
ip -n "$w" link set rgw1 up
for _ in $(seq $((30 * k))); do ctl status | grep -qE "^r1 .* up$" && break; sleep 0.1; done
job 16 --count 1000003 -n 2 -w 0
grep -q "striping over" "$log/w-16-0.log" && fail "rail back up: the next job still stripes around it"
echo "ok: rail 1's link down mid-job: railgated ended the job, the workers re-joined over rail 0 and finished bit-exact ($t s for the whole run); back up, job 16 used both rails"
if [ "$all_steps" = 1 ]; then # the silent rail
# A rail that stops answering mid-job (every frame dropped), its link up.
pids=()
for r in 0 1 2; do worker "$r" 17 --count 4000000 -n 6 -w 0 --retry 3; pids+=($wpid); done
wait_running 17
ctl fault set r1 drop=1 > /dev/null
for r in 0 1 2; do wait "${pids[$r]}" || { tail -n 5 "$log"/w-17-*.log; fail "silent rail: rank $r did not finish"; }; done
grep -q "Out of bounds values : 0 OK" "$log/w-17-0.log" || fail "silent rail: wrong values"
grep -q "striping over 1 of 2 rails (0x2 excluded" "$log/w-17-0.log" || fail "silent rail: no restripe"
ctl fault clear r1 > /dev/null
# The job's entry on the silent rail heard no abort (dropped with the rest)
# and, with no slot part-filled, nothing stalls: it goes at idle_ms.
t0=$(now)
for _ in $(seq $((80 * k))); do [ "$(active_jobs)" = 0 ] && break; sleep 0.1; done
[ "$(active_jobs)" = 0 ] || fail "silent rail: the job's entry on it stayed past idle_ms"
echo "ok: rail 1 silent (all its frames dropped): the workers found it down and finished over rail 0; the job's entry there went after $(elapsed "$t0" "$(now)") s (idle_ms $(secs 4) s)"

# --- 7. a JOIN refused part-way leaves nothing behind; forged JOINs expire.
forge() { # RAIL_IP JOB: a JOIN of rank 0 of 2 nobody will complete
  ip netns exec "$w" python3 - "$1" "$2" <<'PY'
import socket, struct, sys
hdr = struct.pack(">BBBBIQHHHHQII", 2, 1, 0, 0, int(sys.argv[2]), 12345, 0, 2, 0, 0, 0, 0, 0)
body = struct.pack(">QHHIQ", 1000, 0, 0, 0, 99)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(hdr + body, (sys.argv[1], 47000))
PY
}
for j in 900 901 902; do forge 198.18.1.1 "$j"; done
sleep 0.2
ip netns exec "$w" "$railbench" --transport udp --server 198.18.0.1 --rank 0 --workers 1 --job 30 --count 1000 -n 1 -w 0 \
  > "$log/w-30.log" 2>&1 && fail "a job joined with rail 1's table full"
grep -q "refused the join on rail 1: job table full" "$log/w-30.log" || { cat "$log/w-30.log"; fail "part-way refusal: message"; }
[ "$(ctl --json status | python3 -c 'import json,sys; print(json.load(sys.stdin)["rails"][0]["active_jobs"])')" = 0 ] ||
  fail "the refused job stayed on rail 0"
sleep "$(secs 3.2)"
[ "$(rail_stat r1 expirations)" -ge 3 ] || fail "the forged jobs did not expire"
ip netns exec "$w" "$railbench" --transport udp --server 198.18.0.1 --rank 0 --workers 1 --job 30 --count 1000 -n 1 -w 0 \
  > "$log/w-30b.log" 2>&1 || fail "job 30 after the forged jobs expired"
echo "ok: a JOIN refused on rail 1 (its table full) left rail 0 clean; the 3 forged, assembling jobs expired after $(secs 3) s"
fi # the silent rail, step 7

# --- 8. railgated exits cleanly, every buffer back.
stop_gated
grep -q "every rail's buffers came back" "$log/railgated-3.log" || fail "no buffer check at exit"
echo "PASS"
