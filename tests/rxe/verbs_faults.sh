#!/usr/bin/env bash
# Bad input and failures on verbs rails, in the rxe-vm guest:
#  - a config whose device is not the address's is refused with the reason;
#  - chunks with an out-of-range slot, a wrong generation or a partial
#    element are counted and dropped, and the same QP's next allreduce is
#    exact; JOINs naming a job shape not the plane's are refused;
#  - a worker killed mid-job: the others get an error naming it, railgated
#    keeps running, and the next job completes;
#  - a worker stopped (SIGSTOP, its QP alive, nothing in flight): railctl
#    job list shows a slot waiting for that rank alone; the job stalls and
#    the others are told which rank, the job is gone;
#  - railctl job abort of a running job: every rank fails, told why, none
#    re-joins;
#  - railgated stopped under raillat (timers on the coarse clock): named
#    silent after the peer timeout;
#  - railgated stopped 1.5 times its stall time under workers whose peer
#    timeout waits it out: no rank blamed for its absence, bit-exact;
#  - railgated killed and restarted mid-job: workers with --retry reconnect,
#    re-join and finish bit-exact.
#   verbs_faults.sh RXE_VM BUILD_DIR
set -u
. "$(dirname "$0")/host.sh" "$0" "$@"
BUILD=$2 WORK=$(mktemp -d)
. "$here/lib.sh"
rxe_counters_on_failure

sed 's/device = "rxe0"/device = "mlx5_0"/' "$here/verbs.toml" > "$WORK/wrong.toml"
# The guest runs under TCG on a shared host: on a slow spell its processes
# are held for a second and more (a rank named silent for 1028 ms before
# its first chunk, railgated for 1050 ms, both with nothing stopped; the
# suite's jobs took 100 s against 25; in a CI run, a rank just started sent
# nothing for 3008 ms while the others did, and the job ended as stalled).
# The jobs' stall time and the workers' peer timeout are 5 s here, and the
# steps that time a failure are judged against that.
stall_s=5
{ cat "$here/verbs.toml"; printf '\n[jobs]\nstall_ms = %d\n' $((stall_s * 1000)); } > "$WORK/faults.toml"
peer=(--peer-timeout $((stall_s * 1000)))
"$BUILD/dataplane/railgated" --config "$WORK/wrong.toml" --socket off > "$WORK/wrong.log" 2>&1
rc=$?
cat "$WORK/wrong.log"
[ $rc -ne 0 ] && grep -q "the address is on rxe0, not on mlx5_0" "$WORK/wrong.log" ||
  { echo "FAIL: wrong device not refused (exit $rc)"; exit 1; }

start_railgated "$BUILD" "$WORK/faults.toml" "$WORK/ctl.sock" "$WORK/railgated.log"
timeout 60 "$BUILD/tests/rxe/verbs_probe" 198.18.0.1 47000 || { echo "FAIL: verbs_probe"; exit 1; }
"$BUILD/railctl" --socket "$WORK/ctl.sock" --json stats --rail v0 > "$WORK/probe.json"
"$BUILD/railctl" --socket "$WORK/ctl.sock" stats --rail v0
python3 - "$WORK/probe.json" <<'PY' || { echo "FAIL: bad chunks not counted"; exit 1; }
import json, sys
d = json.load(open(sys.argv[1]))["rails"][0]["drops"]
for reason in ("slot_range", "bad_generation", "verbs_length"):
    assert d.get(reason, 0) == 1, (reason, d)
r = json.load(open(sys.argv[1]))["rails"][0]
assert r["leaves"] == 1 and r["leaves_again"] == 1 and "leave_unknown" not in d, r
assert d.get("join_refused", 0) == 4, d
assert d.get("rg_version", 0) == 1, d  # the JOIN of protocol version 3, answered
PY

# ranks TAG JOB ARGS...: 3 railbench ranks of job JOB on the verbs rails in
# the background (logs $WORK/TAG0..2.log, pids in pid[], the job's id in
# JOB), given ARGS; returns once every rank has joined and started
# (railbench prints the table header after its JOIN), and a second of
# running. Their JOINs may take 20 s (ARGS may say otherwise): three
# ranks connecting at once in the guest have taken over 5 s (CI of
# 3e09ba7: two ranks' "no JOIN_ACK from railgated on rail 1").
# A job that railgated ended at its first slot, a rank named silent there
# though it ran (CI of bf77738 and 3e09ba7: "rank 1 sent nothing to slot
# 0 of job 7 ... for 5052 ms", every rank alive; railgated dropped none of
# its chunks: the rank sent none), is said, with what each rank and
# railgated said, and tried once more as job JOB + 100: the guest held a
# rank just started for the stall time (unexplained; the note of stop 86).
# first_slot_stall JOB LOG_PREFIX: what each rank (LOG_PREFIX0..2.log),
# railgated and the guest's RDMA stack said of a job ended at its first
# slot, a rank named silent there.
first_slot_stall() {
  local r
  for r in 0 1 2; do echo "rank $r:"; grep -v "^#" "$2$r.log" | tail -n 2; done
  grep "job $1 ends" "$WORK/railgated.log"
  "$BUILD/railctl" --socket "$WORK/ctl.sock" stats | grep -E "^rail|connects|contributions|drop "
  rxe_counters
}
ranks() {
  local tag=$1 r try
  JOB=$2
  shift 2
  for try in 1 2; do
    for r in 0 1 2; do
      timeout 200 "$BUILD/tools/railbench" --transport verbs --server 198.18.0.1 --rank $r --workers 3 --job "$JOB" \
        "${peer[@]}" --join-timeout 20000 "$@" > "$WORK/$tag$r.log" 2>&1 &
      pid[$r]=$!
    done
    watch_ranks "$WORK/$tag.watch"
    local started=
    for _ in $(seq 100); do
      grep -q "size" "$WORK/${tag}0.log" && grep -q "size" "$WORK/${tag}1.log" && grep -q "size" "$WORK/${tag}2.log" &&
        { started=1; break; }
      sleep 0.3
    done
    # A rank that has not started after 30 s makes the step meaningless:
    # say so here, with what each rank and railgated last said, rather than
    # in the step's own check.
    [ -n "$started" ] || {
      echo "FAIL: job $JOB's ranks did not all start within 30 s"
      for r in 0 1 2; do echo "rank $r:"; tail -n 3 "$WORK/$tag$r.log"; done
      "$BUILD/railctl" --socket "$WORK/ctl.sock" job list; tail -n 20 "$WORK/railgated.log"
      "$BUILD/railctl" --socket "$WORK/ctl.sock" stats | grep -E "^rail|connects|contributions|drop "
      wait $watch; cat "$WORK/$tag.watch"; exit 1
    }
    sleep 1
    [ $try = 1 ] && grep -q "sent nothing to slot 0 of job $JOB " "$WORK/$tag"[012].log || return 0
    echo "NOTE: job $JOB ended at its first slot, a rank named silent there; once more as job $((JOB + 100))"
    wait $watch; cat "$WORK/$tag.watch"
    first_slot_stall "$JOB" "$WORK/$tag"
    for r in 0 1 2; do kill ${pid[$r]} 2> /dev/null; wait ${pid[$r]}; done
    JOB=$((JOB + 100))
  done
}

# watch_ranks FILE: what railgated and the ranks just started (pid[],
# JOB) do from their start until still_running (15 s at most), to FILE,
# every quarter second or so: the state and CPU time of railgated's
# threads and each rail's view of the job (railctl job list). When a slot
# has waited 2 s on one rank alone, or railgated's rail threads have not
# answered railctl for 2 s, that rank's or railgated's threads (states,
# wait channels, system calls, gdb's stacks), once. A job ended at its
# first slot (above) and a rank gone before its step print FILE: the
# start-up stall that CI and a host with one CPU busy elsewhere show
# (stop 87's note) can then be placed. Only written, not judged; a
# process the step stopped (SIGSTOP) is left alone (gdb's detach would
# continue it).
watch_ranks() {
  python3 - "$BUILD/railctl" "$WORK/ctl.sock" "$JOB" "$RG_PID" "${pid[@]}" > "$1" 2>&1 <<'PY' &
import glob, json, subprocess, sys, time
railctl, sock, job, rg, outer = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5:8]
t0 = time.time()
def state(p):
    return open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0]
def dump(pids, why):
    print(f"watch: {time.time() - t0:.1f} s after the start, {why}")
    try:
        if any(state(p) == "T" for p in pids):
            print("  stopped by the step: left alone")
            return
    except OSError:
        return
    for p in pids:
        for t in sorted(glob.glob(f"/proc/{p}/task/*")):
            try:
                print(f"  thread {t.rsplit('/', 1)[1]} {open(t + '/comm').read().strip()}: state {state(p + '/task/' + t.rsplit('/', 1)[1])}, "
                      f"wchan {open(t + '/wchan').read()}, syscall {open(t + '/syscall').read().strip()}")
            except OSError as e:
                print("  ", e)
        g = subprocess.run(["gdb", "-batch", "-p", p, "-ex", "thread apply all bt 12"], capture_output=True, text=True,
                           timeout=90)
        print("\n".join(l for l in g.stdout.splitlines() if l.startswith(("#", "Thread"))))
failing = None
while time.time() - t0 < 15:
    r = subprocess.run([railctl, "--socket", sock, "--json", "job", "list"], capture_output=True, text=True)
    try:
        jobs = [j for j in json.loads(r.stdout)["jobs"] if j["job"] == job]
        failing = None
    except (ValueError, KeyError):
        jobs = []
        print(f"watch: {time.time() - t0:.1f} s: railctl job list: {r.stderr.strip()}")
        if "did not answer" in r.stderr:
            failing = failing or time.time()
            if time.time() - failing >= 2:
                sys.exit(dump([rg], "railgated's rail threads have not answered for 2 s"))
    threads = []
    for t in sorted(glob.glob(f"/proc/{rg}/task/*")):
        try:
            f = open(t + "/stat").read().rsplit(")", 1)[1].split()
            threads.append(f"{open(t + '/comm').read().strip()} {f[0]} {int(f[11]) + int(f[12])} {open(t + '/wchan').read()}")
        except OSError:
            pass
    print(f"watch: {time.time() - t0:.1f} s: railgated's threads (state, cpu ticks, wchan): {'; '.join(threads)}")
    for j in jobs:
        o = j.get("oldest_partial", {})
        w = o.get("waiting_for", [])
        print(f"watch: {time.time() - t0:.1f} s: rail {j['rail']} age {j['age_ms']} ms op {j['op']} joined "
              f"{j['joined']} heard_ms {j['heard_ms']} partial {j['partial_slots']} oldest {json.dumps(o)}")
        if len(w) == 1 and o["waited_ms"] >= 2000:
            kids = subprocess.run(["pgrep", "-P", outer[w[0]]], capture_output=True, text=True).stdout.split()
            sys.exit(dump(kids, f"rail {j['rail']} waits on rank {w[0]} alone (pid {' '.join(kids)}): {json.dumps(j)}"))
    time.sleep(0.25)
PY
  watch=$!
}

# still_running TAG: the job ranks started has not ended (the step that
# follows needs it in the middle of its operations). If it has, what every
# rank and railgated said: a rank named stalled while it ran (CI of
# bf77738: "rank 1 sent nothing to slot 0 of job 7 ... for 5052 ms" before
# the step) is told apart from a job too short.
still_running() {
  local r q
  for r in 0 1 2; do
    kill -0 ${pid[$r]} 2> /dev/null || {
      echo "FAIL: rank $r ended before the step (a job too short, or a rank judged stalled)"
      for q in 0 1 2; do echo "rank $q:"; tail -n 5 "$WORK/$1$q.log"; done
      echo "railgated:"; tail -n 20 "$WORK/railgated.log"
      "$BUILD/railctl" --socket "$WORK/ctl.sock" stats
      wait $watch; cat "$WORK/$1.watch"
      exit 1
    }
  done
  kill $watch 2> /dev/null; wait $watch 2> /dev/null
}

# Rank 2 dies (SIGKILL) in the middle of a long run.
ranks k 5 --count 100003 -n 1000 -w 0
still_running k
pkill -KILL -P ${pid[2]} # railbench itself, not the timeout around it
for r in 0 1; do
  wait ${pid[$r]} && { echo "FAIL: rank $r succeeded although rank 2 died"; exit 1; }
  cat "$WORK/k$r.log" | tail -n 2
  grep -q "rank 2 failed on rail v[01]" "$WORK/k$r.log" ||
    { echo "FAIL: rank $r was not told rank 2 failed"; tail -n 5 "$WORK"/k*.log; cat "$WORK/railgated.log"; exit 1; }
done
kill -0 $RG_PID || { echo "FAIL: railgated died"; cat "$WORK/railgated.log"; exit 1; }
# The next job: its ranks JOIN with 20 s to do it, and a job ended at its
# first slot, a rank named silent there, is said and tried once more as
# job 106, as ranks() does (the start-up stall: with a host CPU busy
# elsewhere, stop 87 saw it here once, "rank 1 sent nothing to slot 0 of
# job 6").
next_job() { run_workers 3 --job "$1" "${peer[@]}" --join-timeout 20000 --count 4097,65537 -n 2 -w 0; } # JOB
rc=0
next_job 6 || rc=$?
if [ $rc != 0 ] && grep -q "sent nothing to slot 0 of job 6 " "$WORK"/w[012].log; then
  echo "NOTE: job 6 ended at its first slot, a rank named silent there; once more as job 106"
  first_slot_stall 6 "$WORK/w"
  rc=0
  next_job 106 || rc=$?
fi
[ $rc = 0 ] || {
  echo "FAIL: the next job"; tail -n 5 "$WORK"/w*.log; "$BUILD/railctl" --socket "$WORK/ctl.sock" stats
  tail -n 20 "$WORK/railgated.log"; exit 1
}
echo "the next job after the failure: ok"
"$BUILD/railctl" --socket "$WORK/ctl.sock" --json stats | python3 -c '
import json, sys
assert sum(r.get("aborts", 0) for r in json.load(sys.stdin)["rails"]) >= 1' || { echo "FAIL: no abort counted"; exit 1; }
"$BUILD/railctl" --socket "$WORK/ctl.sock" --json status > "$WORK/status.json"
python3 - "$WORK/status.json" <<'PY' || { echo "FAIL: job or connections left behind"; exit 1; }
import json, sys, time
rails = json.load(open(sys.argv[1]))["verbs_rails"]
assert all(r["active_jobs"] == 0 for r in rails), rails
PY

# Rank 1 stopped: its QP lives, nothing of it is in flight; the job stalls.
ranks s 7 --count 100003 -n 1000 -w 0
still_running s
rb1=$(pgrep -P ${pid[1]}) # railbench itself, not the timeout around it
t0=$(date +%s.%N)
kill -STOP "$rb1"
# While it stalls, railctl job list shows what the job waits for: on a
# verbs rail, a slot holding ranks 0 and 2's chunks, waiting for rank 1
# alone, rank 1 unheard (this railgated runs verbs rails only).
# One python3 asks railctl again and again until it shows that (or the
# job ends): a python3 started per try took about a second in the guest
# on a slow host, so that few tries fell inside the stall time (CI of
# be71b84 saw none), and every try is kept, timed, for the failure report.
python3 - "$BUILD/railctl" "$WORK/ctl.sock" "$t0" "$JOB" > "$WORK/jobs.err" 2>&1 <<'PY' || {
import json, subprocess, sys, time
railctl, sock, t0, job = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
def shows(jobs):
    jobs = [j for j in jobs if j["job"] == job]
    if not (len(jobs) == 2 and all(j["transport"] == "verbs" and j["joined"] == [0, 1, 2] and j["world"] == 3 and
                                   j["rails"] == 2 for j in jobs)):
        return False
    return any(j.get("oldest_partial", {}).get("waiting_for") == [1] and "offset" not in j["oldest_partial"] and
               j["heard_ms"][1] >= 300 for j in jobs)
while time.time() - t0 < 30:
    r = subprocess.run([railctl, "--socket", sock, "--json", "job", "list"], capture_output=True, text=True)
    jobs = json.loads(r.stdout)["jobs"] if r.returncode == 0 else None
    print(f"{time.time() - t0:.2f} s after the stop: {json.dumps(jobs) if jobs is not None else r.stderr.strip()}")
    if jobs is not None and shows(jobs):
        sys.exit(0)
    if jobs == [] and time.time() - t0 > 1:
        break   # the job ended
    time.sleep(0.1)
sys.exit(1)
PY
  echo "FAIL: job list never showed job $JOB waiting for rank 1"; cut -c1-600 "$WORK/jobs.err"
  tail -n 5 "$WORK"/s*.log; tail -n 20 "$WORK/railgated.log"; exit 1
}
echo "ok: job list showed job $JOB waiting for rank 1 $(tail -n 1 "$WORK/jobs.err" | cut -d' ' -f1) s after the stop ($(wc -l < "$WORK/jobs.err") tries)"
"$BUILD/railctl" --socket "$WORK/ctl.sock" job list
"$BUILD/railctl" --socket "$WORK/ctl.sock" --json job list --rail v1 |
  python3 -c 'import json, sys; assert {j["rail"] for j in json.load(sys.stdin)["jobs"]} <= {"v1"}' ||
  { echo "FAIL: job list --rail v1 listed another rail"; exit 1; }
"$BUILD/railctl" --socket "$WORK/ctl.sock" job list --rail v9 > "$WORK/jobs.err" 2>&1 &&
  { echo "FAIL: job list of an unknown rail answered"; exit 1; }
grep -q "no rail named 'v9'" "$WORK/jobs.err" || { echo "FAIL: unknown rail: $(cat "$WORK/jobs.err")"; exit 1; }
for r in 0 2; do
  wait ${pid[$r]} && { echo "FAIL: rank $r succeeded although rank 1 stopped"; exit 1; }
  grep -q "rank 1 sent nothing to slot" "$WORK/s$r.log" ||
    { echo "FAIL: rank $r was not told rank 1 stalled"; tail -n 3 "$WORK"/s*.log; exit 1; }
done
t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
kill -KILL "$rb1"; wait ${pid[1]}
echo "a stopped rank 1: ranks 0 and 2 named it after $t s (guest, TCG)"
awk -v t="$t" -v s=$stall_s 'BEGIN { exit !(t <= 2 * s) }' || { echo "FAIL: took $t s"; exit 1; }
"$BUILD/railctl" --socket "$WORK/ctl.sock" --json status | python3 -c '
import json, sys
assert all(r["active_jobs"] == 0 for r in json.load(sys.stdin)["verbs_rails"])' || { echo "FAIL: the stalled job stayed"; exit 1; }

# The operator ends a running job (railctl job abort, a verbs-only
# railgated): each of 3 ranks with --retry fails, told who ended it and
# why, and none re-joins; the job is gone from both rails.
ranks o 11 --count 100003 -n 1000 -w 0 --retry 3
still_running o
"$BUILD/railctl" --socket "$WORK/ctl.sock" job abort $JOB --why "drill" > "$WORK/abort.log" 2>&1
cat "$WORK/abort.log"
# Each rail's thread takes the request when it next looks at its jobs'
# clocks: told on v0 first, the workers may end the job on v1 themselves
# (their abort) before v1's thread looks.
grep -qE "^job $JOB ended on (v0: 3|v0, v1: 6) members told" "$WORK/abort.log" || { echo "FAIL: job abort $JOB"; exit 1; }
for r in 0 1 2; do
  wait ${pid[$r]} && { echo "FAIL: rank $r finished although the operator ended job $JOB"; exit 1; }
  grep -q "the operator ended job $JOB (railctl job abort): drill" "$WORK/o$r.log" ||
    { echo "FAIL: rank $r was not told who ended job $JOB"; tail -n 3 "$WORK/o$r.log"; exit 1; }
  grep -q "re-joining" "$WORK/o$r.log" && { echo "FAIL: rank $r re-joined job $JOB"; exit 1; }
done
[ "$("$BUILD/railctl" --socket "$WORK/ctl.sock" job list)" = "no jobs" ] || { echo "FAIL: job $JOB left behind"; exit 1; }
echo "job abort on verbs rails: 3 ranks told, none re-joined"

# railgated stopped (SIGSTOP: its QPs live, the kernel still acknowledges
# every WRITE) under raillat, whose worker reads no precise clock (no
# per-chunk round trips over a reliable transport: its timers run on the
# coarse clock): it names railgated silent after its 1 s peer timeout.
timeout 60 "$BUILD/tools/raillat" --transport verbs --server 198.18.0.1 -s 4 -n 100000000 -w 0 --bw-size 0 \
  > "$WORK/lat.log" 2>&1 &
lat=$!
for _ in $(seq 100); do "$BUILD/railctl" --socket "$WORK/ctl.sock" --json status |
  python3 -c 'import json, sys; sys.exit(not any(r["active_jobs"] for r in json.load(sys.stdin)["verbs_rails"]))' && break
  sleep 0.2
done
sleep 0.5
t0=$(date +%s.%N)
kill -STOP $RG_PID
wait $lat && { echo "FAIL: raillat finished although railgated stopped"; kill -CONT $RG_PID; exit 1; }
t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
kill -CONT $RG_PID
cat "$WORK/lat.log" | tail -n 1
grep -q "railgated stopped answering on every rail for" "$WORK/lat.log" ||
  { echo "FAIL: raillat did not name railgated silent"; cat "$WORK/lat.log"; exit 1; }
echo "railgated stopped under raillat: named silent after $t s (guest, TCG)"
awk -v t="$t" 'BEGIN { exit !(t >= 0.9 && t <= 4.0) }' || { echo "FAIL: took $t s"; exit 1; }

# railgated stopped for 1.5 times its stall time (5 s) under 3 workers
# whose peer timeout waits it out: what they wrote meanwhile waits in its
# completion queues, and railgated, back, must not take its own absence
# for a rank's silence (each rail's thread counts it, absences); the job
# finishes bit-exact. Rank 2 is stopped a moment before railgated and
# continued half a second after it: ranks 0 and 1 fill slots rank 2 has
# not, and back, railgated has heard nothing of rank 2 for longer than the
# stall time, all but 0.6 s of it its own absence (without the absence
# credit, the job ended as stalled: "rank 2 sent nothing to slot ...").
# 40 operations: about 8 s of running in the guest, about 5 of them done
# when the pause begins (300 took 60 s of the test after it). The counts
# from after the start (which ranks may have tried twice).
ranks p 9 --count 100003 -n 40 -w 0 --peer-timeout 20000
still_running p
before=$("$BUILD/railctl" --socket "$WORK/ctl.sock" --json stats | python3 -c '
import json, sys
rails = json.load(sys.stdin)["rails"]
print(sum(r.get("stalls", 0) for r in rails), sum(r.get("absences", 0) for r in rails))')
rb2=$(pgrep -P ${pid[2]}) # railbench itself, not the timeout around it
kill -STOP "$rb2"
sleep 0.1
kill -STOP $RG_PID
sleep "$(awk -v s=$stall_s 'BEGIN { print 1.5 * s }')"
kill -CONT $RG_PID
sleep 0.5
kill -CONT "$rb2"
for r in 0 1 2; do
  wait ${pid[$r]} || { echo "FAIL: rank $r failed after railgated's pause"; tail -n 3 "$WORK"/p*.log; exit 1; }
done
grep -q "Out of bounds values : 0 OK" "$WORK/p0.log" || { echo "FAIL: wrong values after the pause"; exit 1; }
"$BUILD/railctl" --socket "$WORK/ctl.sock" --json stats | python3 -c '
import json, sys
rails = json.load(sys.stdin)["rails"]
stalls = sum(r.get("stalls", 0) for r in rails) - int(sys.argv[1])
away = sum(r.get("absences", 0) for r in rails) - int(sys.argv[2])
print("railgated stopped 1.5 times its stall time under 3 verbs workers: bit-exact, %d jobs ended as stalled, %d absences counted" % (stalls, away))
assert stalls == 0 and away >= 1' $before || { echo "FAIL: railgated blamed a rank for its own pause, or counted no absence"; exit 1; }

# railgated killed and restarted mid-job: --retry reconnects and finishes.
ranks x 8 --count 100003 -n 30 -w 0 --retry 3 --join-timeout 10000
still_running x
kill -KILL $RG_PID; wait $RG_PID 2> /dev/null
sleep 0.5
start_railgated "$BUILD" "$WORK/faults.toml" "$WORK/ctl.sock" "$WORK/railgated2.log"
for r in 0 1 2; do
  wait ${pid[$r]} || { echo "FAIL: rank $r did not finish after railgated's restart"; tail -n 4 "$WORK"/x*.log; exit 1; }
done
grep -q "Out of bounds values : 0 OK" "$WORK/x0.log" || { echo "FAIL: wrong values after the restart"; exit 1; }
grep -qE "recoveries [1-9]" "$WORK/x0.log" || { echo "FAIL: no recovery counted"; exit 1; }
replays=$(sed -n 's/.*, replays \([0-9]*\).*/\1/p' "$WORK"/x*.log | awk '{ s += $1 } END { print s + 0 }')
echo "railgated killed and restarted mid-job: 3 verbs workers with --retry finished bit-exact ($replays operations replayed for a rank that lost a result)"
kill -TERM $RG_PID; wait $RG_PID || { echo "FAIL: railgated exit $?"; exit 1; }
