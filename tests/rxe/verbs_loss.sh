#!/usr/bin/env bash
# Verbs rails on a fabric that loses packets (RoCE without PFC), in the
# rxe-vm guest: railgated's rail on rxel0 and the workers on rxel1, the two
# ends of a veth with netem on both (lib.sh: lossy_fabric_up), railgated and
# the workers on the RC timers the defaults choose at their 1 s (ACK timeout
# 14, 67 ms, retry 7), set here, with a stall time and peer timeout of 5 s:
# under TCG on a loaded host a rank just started has sent nothing for over
# a second with no packet lost (a clean-clone CI run: "rank 0 sent nothing
# to slot 0 ... for 1052 ms", netem 0 drops), as rxe-verbs-faults says:
#  - 1% of the packets dropped each way (from when the job has assembled:
#    rdma_cm resends its connection MADs on its own, slower, timer): a
#    3-rank job is bit-exact, with no
#    rank failed and no job ended; netem dropped packets and the QPs resent
#    them (rxe's completer_retry_err), and railctl rail show and /metrics
#    give rail l0's port counters as sysfs has them;
#  - the fabric cut (100%) for 7 s mid-job: workers with --retry 3 get
#    through it (railgated ends the job as stalled, they re-join and run
#    the operation again) and finish bit-exact; railgated serves on.
#  - the fabric cut while the ranks connect, until one says it connects
#    again (rdma_cm resends a lost connection MAD only after about 4 s; a
#    worker drops an attempt that got no answer in 1 s and sends a new one,
#    verbs::connect_attempts), then mended: the job runs bit-exact; a
#    port nobody listens on is refused at once, and a connect that never
#    gets an answer fails after its attempts, named, also through the C
#    ABI (connect_timeout_ms); with only railgated's packets lost (its
#    REPs), the connections it accepted end at the worker's REJs, not at
#    the join deadline.
# tools/bench_verbs_loss.sh measures what the loss costs.
#   verbs_loss.sh RXE_VM BUILD_DIR
set -u
. "$(dirname "$0")/host.sh" "$0" "$@"
BUILD=$2 WORK=$(mktemp -d)
. "$here/lib.sh"
trap 'rc=$?; [ $rc = 0 ] || { rxe_counters; echo "netem dropped $(fabric_dropped)"; }; kill ${RG_PID:-} 2> /dev/null; wait 2> /dev/null; lossy_fabric_down; exit $rc' EXIT
lossy_fabric_up || { echo "FAIL: the lossy fabric (veth, rules, rxel0/rxel1)"; exit 1; }
cat > "$WORK/loss.toml" <<TOML
[pools]
default_slots = 8
[[rail]]
name = "l0"
transport = "verbs"
device = "rxel0"
ip = "198.18.6.1"
ack_timeout = 14
[jobs]
stall_ms = 5000
TOML
start_railgated "$BUILD" "$WORK/loss.toml" "$WORK/ctl.sock" "$WORK/railgated.log"
grep -q "railgated: verbs rail l0 .*; ack timeout 14 (67.1 ms), retry 7," "$WORK/railgated.log" ||
  { echo "FAIL: l0's timers"; cat "$WORK/railgated.log"; exit 1; }
# job TAG JOB ARGS...: 3 railbench ranks at 198.18.6.1; logs $WORK/TAG<rank>.log;
# the status is the number of ranks that failed.
job() {
  local tag=$1 id=$2 r pids=() fails=0
  shift 2
  for r in 0 1 2; do
    RAILGATE_IB_TIMEOUT=14 timeout 200 "$BUILD/tools/railbench" --transport verbs --server 198.18.6.1 --rank $r \
      --workers 3 --job "$id" --peer-timeout 5000 --join-timeout 20000 --count 262144 -w 1 "$@" > "$WORK/$tag$r.log" 2>&1 &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || fails=$((fails + 1)); done
  return $fails
}
exact() { # TAG: every rank's results bit-exact
  local r
  for r in 0 1 2; do
    grep -q "Out of bounds values : 0 OK" "$WORK/$1$r.log" || { echo "FAIL: $1 rank $r"; cat "$WORK/$1$r.log"; exit 1; }
  done
}

# The loss starts once the job has assembled: a connection's rdma_cm MADs
# are resent on the CM's own timer (seconds), past the workers' 5 s
# connect timeout, which is not what this measures.
assembled() { # the one job on railgated has assembled
  "$BUILD/railctl" --socket "$WORK/ctl.sock" --json job list 2> /dev/null | tr -d ' \n' | grep -q '"assembled":true'
}
r0=$(fabric_resends) SECONDS=0
job loss 1 -n 8 -w 4 &
jp=$!
for _ in $(seq 300); do assembled && break; sleep 0.05; done
fabric_loss 1 || { echo "FAIL: netem"; exit 1; }
wait $jp || { echo "FAIL: a job at 1% loss: $? ranks failed"; cat "$WORK"/loss*.log; exit 1; }
exact loss
dropped=$(fabric_dropped) resent=$(($(fabric_resends) - r0))
echo "ok: 1% loss each way once the job assembled: 3 ranks, 12 allreduces of 1 MiB bit-exact in $SECONDS s; netem dropped $dropped packets, the QPs resent $resent times"
[ "$dropped" -gt 0 ] && [ "$resent" -gt 0 ] || { echo "FAIL: no loss, or no resend"; exit 1; }
! grep -q "job 1 ends" "$WORK/railgated.log" || { echo "FAIL: railgated ended job 1"; cat "$WORK/railgated.log"; exit 1; }
# What the fabric did, as railgated reports it: rail l0's RDMA port's own
# counters (sysfs) in railctl rail show and /metrics, as sysfs has them.
"$BUILD/railctl" --socket "$WORK/ctl.sock" rail show l0 | sed -n '/^port counters/,$p' | tee "$WORK/show.txt"
"$BUILD/railctl" --socket "$WORK/ctl.sock" --json rail show l0 > "$WORK/show.json"
python3 - "$WORK/show.json" <<'PY' || { echo "FAIL: l0's port counters"; exit 1; }
import json, os, re, sys, urllib.request
pc = json.load(open(sys.argv[1]))["port_counters"]
assert (pc["device"], pc["port"]) == ("rxel0", 1), pc
m = urllib.request.urlopen("http://127.0.0.1:9477/metrics", timeout=10).read().decode()
# Read last: counters only grow (a connection's late disconnect may still
# be counted), so railgated's readings are at most these.
d = "/sys/class/infiniband/rxel0/ports/1/hw_counters"
sysfs = {f: int(open(os.path.join(d, f)).read()) for f in os.listdir(d) if f != "lifespan"}
hw = pc["hw_counters"]
assert hw.keys() == sysfs.keys() and all(hw[k] <= sysfs[k] for k in hw), (hw, sysfs)
assert sum(hw.get(k, 0) for k in ("completer_retry_err", "duplicate_request", "out_of_seq_request")) > 0, hw
pat = r'^railgate_verbs_port_counter_total\{rail="l0",device="rxel0",port="1",source="hw_counters",counter="completer_retry_err"\} (\d+)$'
got = re.findall(pat, m, re.M)
assert len(got) == 1 and hw["completer_retry_err"] <= int(got[0]) <= sysfs["completer_retry_err"], \
    (got, [l for l in m.splitlines() if "port_counter" in l])
print("ok: l0's port counters in railctl rail show and /metrics, as sysfs has them")
PY
grep -q "^port counters  rxel0 port 1 (sysfs; those not 0)$" "$WORK/show.txt" || { echo "FAIL: rail show l0's port counters"; exit 1; }

fabric_loss 0
job cut 2 -n 60 --retry 3 &
jp=$!
sleep 4
fabric_loss 100
sleep 7
fabric_loss 0
wait $jp || { echo "FAIL: the job through a 7 s cut: $? ranks failed"; cat "$WORK"/cut*.log; exit 1; }
exact cut
grep -h "rank 0: operation" "$WORK/cut0.log"
grep -q "^# retransmits .*recoveries [1-9].*\|^# retransmits .*resumes [1-9]" "$WORK/cut0.log" ||
  { echo "FAIL: rank 0 did not say how it got through the cut"; cat "$WORK/cut0.log"; exit 1; }
echo "ok: the fabric cut for 7 s: 3 ranks with --retry 3 finished bit-exact"
job after 3 -n 2 || { echo "FAIL: the job after the cut"; cat "$WORK"/after*.log; exit 1; }
exact after

fabric_loss 100
SECONDS=0
# 10 s to connect (attempts of 1, 2, 4 and 3 s): the cut is mended only
# after a rank's first attempt, and under TCG a connect has taken over 1 s.
job connect 4 -n 2 --connect-timeout 10000 &
jp=$!
for _ in $(seq 300); do
  grep -q "no answer within 1000 ms; connecting again (attempt 2 of 4, 2000 ms)" "$WORK"/connect?.log 2> /dev/null && break
  sleep 0.05
done
fabric_loss 0
wait $jp || { echo "FAIL: the job that connected through a cut: $? ranks failed"; cat "$WORK"/connect*.log; exit 1; }
exact connect
again=$(cat "$WORK"/connect?.log | grep -c "connecting again")
[ "$again" -gt 0 ] || { echo "FAIL: no rank connected again"; cat "$WORK"/connect*.log; exit 1; }
grep -h "connecting again" "$WORK"/connect?.log
echo "ok: the fabric cut while 3 ranks connected: $again attempts dropped for new ones, the job bit-exact in $SECONDS s"
# What a worker that cannot connect is told: a port nobody listens on is
# refused at once (the CM's REJ; no second attempt), and a fabric cut for
# the whole connect timeout fails it after its attempts, named.
one() { # LOG ARGS...: one rank of a 1-rank job; its status
  local log=$1
  shift
  timeout 60 "$BUILD/tools/railbench" --transport verbs --server 198.18.6.1 --rank 0 --workers 1 --job 9 --count 1024 -n 1 \
    -w 0 "$@" > "$log" 2>&1
}
one "$WORK/refused.log" --port 47999 && { echo "FAIL: a connect to port 47999 (nobody there) went through"; exit 1; }
grep -q "railgated refused the connection" "$WORK/refused.log" && ! grep -q "connecting again" "$WORK/refused.log" ||
  { echo "FAIL: the refused connect"; cat "$WORK/refused.log"; exit 1; }
fabric_loss 100
SECONDS=0
one "$WORK/silent.log" --connect-timeout 3000 && { echo "FAIL: a connect through a cut fabric went through"; exit 1; }
fabric_loss 0
grep -q "no answer within 2000 ms, the last of 2 attempts in 3000 ms" "$WORK/silent.log" &&
  [ "$(grep -c "connecting again (attempt 2 of 2, 2000 ms)" "$WORK/silent.log")" = 1 ] ||
  { echo "FAIL: the connect through a cut fabric"; cat "$WORK/silent.log"; exit 1; }
echo "ok: a connect refused at once; one through a cut fabric failed after its 2 attempts in $SECONDS s: $(grep -o 'verbs connect.*' "$WORK/silent.log" | tail -n 1)"
# A connect whose REQs get through and whose REPs are lost (the fabric cut
# one way: netem on rgl0 alone drops railgated's packets to the workers):
# railgated accepts each attempt and holds its connection; the worker
# drops each attempt unanswered, and the CM's REJ for it (worker to
# railgated, not cut) ends the connection railgated held, long before the
# 10 s join deadline would reap it (plane.cpp: poll_cm, reap).
l0_conns() {
  "$BUILD/railctl" --socket "$WORK/ctl.sock" --json status | tr -d ' \n' | grep -o '"connections":[0-9]*' | head -n 1 | cut -d: -f2
}
tc qdisc add dev rgl0 root netem loss 100% || { echo "FAIL: netem on rgl0"; exit 1; }
SECONDS=0
one "$WORK/half.log" --connect-timeout 3000 &
hp=$! peak=0
while kill -0 $hp 2> /dev/null; do
  n=$(l0_conns)
  [ "${n:-0}" -gt $peak ] && peak=$n
  sleep 0.1
done
wait $hp && { echo "FAIL: a connect whose REPs were all lost went through"; fabric_loss 0; exit 1; }
gave_up=$SECONDS
for _ in $(seq 20); do [ "$(l0_conns)" = 0 ] && break; sleep 0.1; done
left=$(l0_conns)
fabric_loss 0
grep -q "no answer within 2000 ms, the last of 2 attempts in 3000 ms" "$WORK/half.log" ||
  { echo "FAIL: the connect whose REPs were lost"; cat "$WORK/half.log"; exit 1; }
[ "$peak" -ge 1 ] || { echo "FAIL: railgated never held the connection (did the REQs get through?)"; exit 1; }
[ "$left" = 0 ] || {
  echo "FAIL: railgated still held ${left:-?} connection(s) 2 s after the worker gave up at $gave_up s (the REJ not taken)"
  tail -n 20 "$WORK/railgated.log"; exit 1
}
echo "ok: REQs through and REPs lost: railgated held at most $peak connection(s), none 2 s after the worker gave up at $gave_up s"
# The same through the C ABI (librailgate's Python binding):
# config.connect_timeout_ms sets the attempts and config.on_retry is told
# the dropped one. Not in a sanitized tree (verbs_allreduce.sh says why).
if [ -z "${RAILGATE_SANITIZED:-}" ]; then
  fabric_loss 100
  timeout 60 env PYTHONPATH="$BUILD/client/python" python3 - > "$WORK/c_silent.log" 2>&1 <<'PY'
import os, sys, time
import railgate
told, t0 = [], time.monotonic()
try:
    railgate.Comm("198.18.6.1", job=9, token=int(os.environ["RAILGATE_TOKEN"]), rank=0, world=1, transport="verbs",
                  connect_timeout_ms=3000, on_retry=lambda rank, line: told.append(line))
    sys.exit("connected through a cut fabric")
except railgate.RailgateError as e:
    took = time.monotonic() - t0
    print(f"failed after {took:.1f} s: {e}", *(f"told: {line}" for line in told), sep="\n")
    ok = ("no answer within 2000 ms, the last of 2 attempts in 3000 ms" in str(e) and len(told) == 1 and
          "connecting again (attempt 2 of 2, 2000 ms)" in told[0] and 2.9 < took < 20)
    sys.exit(0 if ok else 1)
PY
  rc=$?
  fabric_loss 0
  [ $rc = 0 ] || { echo "FAIL: the C ABI's connect through a cut fabric"; cat "$WORK/c_silent.log"; exit 1; }
  echo "ok: the C ABI's connect_timeout_ms 3000 through a cut fabric: $(head -n 1 "$WORK/c_silent.log")"
fi
kill -TERM $RG_PID; wait $RG_PID || { echo "FAIL: railgated exit $?"; tail "$WORK/railgated.log"; exit 1; }
echo "ok: a job after it bit-exact; railgated exited cleanly"
