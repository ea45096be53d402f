#!/usr/bin/env bash
# railbench over verbs in the rxe-vm guest: railgated serves two verbs rails
# (tests/rxe/verbs.toml) on rxe0, three worker processes allreduce odd
# element counts in every dtype through it, and every result is checked
# bit for bit against the rank-order sum (railbench exits non-zero on any
# wrong element); railctl latency of the verbs rails. railctl job list
# beside a udp rail. Then with 512 KiB
# verbs chunks, and through the C ABI (librailgate's Python binding) over
# verbs.
#   verbs_allreduce.sh RXE_VM BUILD_DIR
set -u
. "$(dirname "$0")/host.sh" "$0" "$@"
BUILD=$2 WORK=$(mktemp -d)
. "$here/lib.sh"
rxe_counters_on_failure
# The guest runs under TCG on a shared host whose slow spells hold its
# processes for a second and more (verbs_faults.sh has the readings): the
# jobs' stall time and the workers' peer timeout are 5 s here, as there
# (the defaults, 1 s, would end a job for a pause of the host's). This test
# judges results, not how soon a failure is found.
# Under TSan (RAILGATE_TSAN=1) 20 s: the guest's CPU (qemu64, SSE4.2) takes
# the scalar sum kernels, which TSan instruments load by load; under TCG a
# 512 KiB job takes 4.3 s and each rail's thread spends 5 to 10 s in
# engine::reduce between its beats (gdb: both rails' threads and TBB's in
# sum_fp32_scalar).
pause_ms=5000
[ "${RAILGATE_TSAN:-0}" = 1 ] && pause_ms=20000
for c in verbs verbs_large; do
  { cat "$here/$c.toml"; printf '\n[jobs]\nstall_ms = %d\n' $pause_ms; } > "$WORK/$c.toml"
done
peer=(--peer-timeout $pause_ms)
# This guest's kernel does not trust its TSC (the vCPUs' TSCs are not in
# step): the workers' and railgated's clock must not read it here.
"$BUILD/tests/unit/test_histogram" --run_test=clocks || { echo "FAIL: the clocks in the guest"; exit 1; }
start_railgated "$BUILD" "$WORK/verbs.toml" "$WORK/ctl.sock" "$WORK/railgated.log"
cat "$WORK/railgated.log"
job=1
for dt in fp32 bf16 fp16 int32; do
  counts=1,1023,100003
  [ $dt = fp32 ] && counts=$counts,1000003
  if ! run_workers 3 "${peer[@]}" --dtype $dt --job $job --count $counts -n 2 -w 1; then
    echo "FAIL: railbench --dtype $dt"; tail -n 5 "$WORK"/w*.log; exit 1
  fi
  grep -q ", 2 rails, dtype $dt" "$WORK/w0.log" || { echo "FAIL: $dt did not stripe over 2 rails"; cat "$WORK/w0.log"; exit 1; }
  grep -E "^ +[0-9]+ +[0-9]+ +$dt" "$WORK/w1.log"
  job=$((job + 1))
done
"$BUILD/railctl" --socket "$WORK/ctl.sock" status
"$BUILD/railctl" --socket "$WORK/ctl.sock" --json stats > "$WORK/stats.json"
"$BUILD/railctl" --socket "$WORK/ctl.sock" stats
python3 - "$WORK/stats.json" <<'PY' || { echo "FAIL: counters"; exit 1; }
import json, sys
rails = {r["rail"]: r for r in json.load(open(sys.argv[1]))["rails"]}
for name in ("v0", "v1"):
    r = rails[name]
    assert r["transport"] == "verbs" and r["aggregations"] > 0, r
    assert r["drops_total"] == 0 and r["qp_errors"] == 0 and r["aborts"] == 0, r
    assert r["joins"] == 12 and r["leaves"] == 12, r
PY
# railctl latency on verbs rails: each rail's aggregation latency has a
# sample for every slot it reduced, all rails' together without --rail;
# --worker, the round trips the workers reported when they left; per job
# or TC refused, named; --reset empties the rail's.
ctl=("$BUILD/railctl" --socket "$WORK/ctl.sock")
for q in v0 v1 all worker; do
  case $q in
    all) "${ctl[@]}" --json latency > "$WORK/lat-$q.json" ;;
    worker) "${ctl[@]}" --json latency --worker > "$WORK/lat-$q.json" ;;
    *) "${ctl[@]}" --json latency --rail $q > "$WORK/lat-$q.json" ;;
  esac || { echo "FAIL: railctl latency ($q)"; exit 1; }
done
python3 - "$WORK" <<'PY' || { echo "FAIL: railctl latency on verbs rails"; exit 1; }
import json, sys
d = sys.argv[1]
agg = {r["rail"]: r["aggregations"] for r in json.load(open(d + "/stats.json"))["rails"]}
lat = {q: json.load(open(f"{d}/lat-{q}.json")) for q in ("v0", "v1", "all", "worker")}
for q in ("v0", "v1"):
    h = lat[q]["histogram"]
    assert lat[q]["rail"] == q and not lat[q]["worker"] and h["count"] == agg[q] > 0, (q, lat[q], agg)
assert lat["all"]["rail"] == "all" and lat["all"]["histogram"]["count"] == agg["v0"] + agg["v1"], lat["all"]
assert lat["worker"]["worker"] and lat["worker"]["histogram"]["count"] > 0, lat["worker"]
print("latency: v0", lat["v0"]["histogram"]["count"], "v1", lat["v1"]["histogram"]["count"],
      "worker round trips", lat["worker"]["histogram"]["count"])
PY
"${ctl[@]}" latency --rail v1
out=$("${ctl[@]}" latency --rail v0 --job 1 2>&1) && { echo "FAIL: latency --job on a verbs rail: $out"; exit 1; }
grep -q "a verbs rail keeps its own aggregation latency and its workers' round trips, not each job's" <<< "$out" ||
  { echo "FAIL: latency --job on a verbs rail: $out"; exit 1; }
out=$("${ctl[@]}" latency --rail v0 --tc 1 2>&1) && { echo "FAIL: latency --tc on a verbs rail: $out"; exit 1; }
grep -q "a verbs rail has no TC scheduler" <<< "$out" || { echo "FAIL: latency --tc on a verbs rail: $out"; exit 1; }
"${ctl[@]}" --json latency --rail v1 --reset > /dev/null &&
  "${ctl[@]}" --json latency --rail v1 | python3 -c 'import json, sys; assert json.load(sys.stdin)["histogram"]["count"] == 0' ||
  { echo "FAIL: latency --rail v1 --reset"; exit 1; }
python3 -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:9477/metrics", timeout=10).read().decode())' \
  > "$WORK/metrics.txt" || { echo "FAIL: metrics endpoint"; exit 1; }
grep -qE '^railgate_verbs_aggregations_total\{rail="v1"\} [1-9][0-9]*$' "$WORK/metrics.txt" ||
  { echo "FAIL: no verbs aggregations in /metrics"; cat "$WORK/metrics.txt"; exit 1; }
grep -qE '^railgate_build_info\{version="[0-9.]+",git="[^"]+",kernels="[a-z0-9_]+"\} 1$' "$WORK/metrics.txt" ||
  { echo "FAIL: a verbs-only railgated's /metrics lacks railgate_build_info"; cat "$WORK/metrics.txt"; exit 1; }
# The verbs rails' aggregation latency (v1's was reset above).
[ "$(grep -c '^# TYPE railgate_aggregation_latency_seconds histogram$' "$WORK/metrics.txt")" = 1 ] &&
  grep -qE '^railgate_aggregation_latency_seconds_count\{rail="v0"\} [1-9][0-9]*$' "$WORK/metrics.txt" &&
  grep -qE '^railgate_aggregation_latency_seconds_bucket\{rail="v0",le="\+Inf"\} [1-9][0-9]*$' "$WORK/metrics.txt" &&
  grep -qE '^railgate_aggregation_latency_seconds_count\{rail="v1"\} 0$' "$WORK/metrics.txt" ||
  { echo "FAIL: a verbs-only railgated's /metrics: the aggregation latency"; grep latency "$WORK/metrics.txt"; exit 1; }
kill -TERM $RG_PID; wait $RG_PID || { echo "FAIL: railgated exit $?"; exit 1; }
grep -q "verbs rail v1: connects 12" "$WORK/railgated.log" || { echo "FAIL: no exit stats"; tail "$WORK/railgated.log"; exit 1; }

# Verbs rails beside a DPDK-side rail (a udp rail on lo): railctl job list
# shows a running verbs job with the verbs rails' names, alone with --rail
# v0, none on the udp rail; railctl job abort ends it.
{ sed -n '/^\[pools\]/,$p' "$WORK/verbs.toml"
  printf '\n[eal]\nhugepages = false\npci = false\ntelemetry = false\nmemory_mb = 256\n'
  printf '\n[[rail]]\nname = "u0"\ntransport = "udp"\ninterface = "lo"\nip = "198.18.7.1"\n'; } > "$WORK/mixed.toml"
start_railgated "$BUILD" "$WORK/mixed.toml" "$WORK/ctl3.sock" "$WORK/railgated3.log"
timeout 100 "$BUILD/tools/raillat" --transport verbs --server 198.18.0.1 --join-timeout 20000 --job 70 -s 4 -n 100000000 -w 0 --bw-size 0 \
  > "$WORK/lat.log" 2>&1 &
lat=$!
listed=
for _ in $(seq 100); do
  "$BUILD/railctl" --socket "$WORK/ctl3.sock" --json job list > "$WORK/jobs.json" 2>&1 &&
    python3 - "$WORK/jobs.json" 2> "$WORK/jobs.err" <<'PY' && { listed=1; break; }
import json, sys
jobs = json.load(open(sys.argv[1]))["jobs"]
assert sorted((j["rail"], j["transport"], j["job"], j["world"], j["joined"]) for j in jobs) == \
    [("v0", "verbs", 70, 1, [0]), ("v1", "verbs", 70, 1, [0])], jobs
PY
  sleep 0.2
done
[ -n "$listed" ] || { echo "FAIL: job list beside a udp rail"; cat "$WORK/jobs.json" "$WORK/jobs.err" "$WORK/railgated3.log"; exit 1; }
"$BUILD/railctl" --socket "$WORK/ctl3.sock" job list
"$BUILD/railctl" --socket "$WORK/ctl3.sock" --json job list --rail v0 |
  python3 -c 'import json, sys; assert [j["rail"] for j in json.load(sys.stdin)["jobs"]] == ["v0"]' ||
  { echo "FAIL: job list --rail v0"; exit 1; }
[ "$("$BUILD/railctl" --socket "$WORK/ctl3.sock" job list --rail u0)" = "no jobs" ] || { echo "FAIL: job list --rail u0"; exit 1; }
# railctl job abort ends it on both verbs rails; raillat fails, told why.
# Each rail's thread takes the request when it next looks at its jobs'
# clocks: told on v0 first, raillat may end the job on v1 itself (its
# abort) before v1's thread looks, and then only v0 counts a member told.
"$BUILD/railctl" --socket "$WORK/ctl3.sock" job abort 70 --why "rxe drill" > "$WORK/abort.log" 2>&1
cat "$WORK/abort.log"
grep -qE "^job 70 ended on (v0: 1 member|v0, v1: 2 members) told" "$WORK/abort.log" || { echo "FAIL: job abort 70"; exit 1; }
wait $lat && { echo "FAIL: raillat finished although its job was aborted"; exit 1; }
grep -q "the operator ended job 70 (railctl job abort): rxe drill" "$WORK/lat.log" ||
  { echo "FAIL: raillat was not told who ended job 70"; tail -n 3 "$WORK/lat.log"; exit 1; }
[ "$("$BUILD/railctl" --socket "$WORK/ctl3.sock" job list)" = "no jobs" ] || { echo "FAIL: job 70 left behind"; exit 1; }
# railctl's rail commands beside a udp rail: rail list has both kinds,
# rail show and set take a verbs rail's name, a DPDK-side command names
# a verbs rail as one.
"$BUILD/railctl" --socket "$WORK/ctl3.sock" --json rail list |
  python3 -c 'import json, sys; d = json.load(sys.stdin); assert [r["name"] for r in d["rails"]] == ["u0"] and [r["name"] for r in d["verbs_rails"]] == ["v0", "v1"], d' ||
  { echo "FAIL: rail list beside a udp rail"; exit 1; }
"$BUILD/railctl" --socket "$WORK/ctl3.sock" --json rail show v0 |
  python3 -c 'import json, sys; d = json.load(sys.stdin); assert d["transport"] == "verbs" and d["counters"]["connects"] >= 1 and d["gid_seen"]["chosen"] == "automatic", d' ||
  { echo "FAIL: rail show v0 beside a udp rail"; exit 1; }
"$BUILD/railctl" --socket "$WORK/ctl3.sock" rail set v0 gid-index auto | grep -q "^rail v0: source GID automatic" ||
  { echo "FAIL: rail set v0 gid-index auto beside a udp rail"; exit 1; }
python3 -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:9477/metrics", timeout=10).read().decode())' \
  > "$WORK/metrics3.txt" || { echo "FAIL: metrics endpoint beside a udp rail"; exit 1; }
[ "$(grep -c '^# TYPE railgate_aggregation_latency_seconds histogram$' "$WORK/metrics3.txt")" = 1 ] &&
  grep -qE '^railgate_aggregation_latency_seconds_count\{rail="u0"\} 0$' "$WORK/metrics3.txt" &&
  grep -qE '^railgate_aggregation_latency_seconds_count\{rail="v0"\} [1-9][0-9]*$' "$WORK/metrics3.txt" ||
  { echo "FAIL: /metrics beside a udp rail: the aggregation latency"; grep latency "$WORK/metrics3.txt"; exit 1; }
"$BUILD/railctl" --socket "$WORK/ctl3.sock" --json latency --rail v0 |
  python3 -c 'import json, sys; d = json.load(sys.stdin); assert d["rail"] == "v0" and d["histogram"]["count"] > 0, d' ||
  { echo "FAIL: latency --rail v0 beside a udp rail"; exit 1; }
out=$("$BUILD/railctl" --socket "$WORK/ctl3.sock" tc list --rail v1 2>&1) && { echo "FAIL: tc list --rail v1: $out"; exit 1; }
grep -q "rail 'v1' is a verbs rail: this applies to DPDK and udp rails (u0)" <<< "$out" || { echo "FAIL: tc list --rail v1: $out"; exit 1; }
kill -TERM $RG_PID; wait $RG_PID || { echo "FAIL: railgated exit $?"; cat "$WORK/railgated3.log"; exit 1; }

# Large verbs chunks (1 MiB and 512 KiB rails: a 512 KiB job chunk, above
# the u16 of the UDP layout): bit-exact, and reduced by the engine.
start_railgated "$BUILD" "$WORK/verbs_large.toml" "$WORK/ctl2.sock" "$WORK/railgated2.log"
for dt in fp32 bf16; do
  if ! run_workers 2 "${peer[@]}" --dtype $dt --job $job --count 1,131071,1000003 -n 2 -w 0; then
    echo "FAIL: railbench --dtype $dt with 512 KiB chunks"; grep -v "^#" "$WORK"/w[01].log | tail -n 20
    tail -n 60 "$WORK/railgated2.log"; exit 1
  fi
  grep -q "chunk 524288 B" "$WORK/w0.log" || { echo "FAIL: the job chunk is not 512 KiB"; cat "$WORK/w0.log"; exit 1; }
  job=$((job + 1))
done
# The C ABI over verbs: librailgate through its Python binding (ctypes), 2
# ranks, fp32 and int32 in one communicator (two jobs); every element checked.
# Not in a sanitized tree: its librailgate needs the sanitizers' runtime,
# which an uninstrumented python3 does not load (the release tree's run).
if [ -z "${RAILGATE_SANITIZED:-}" ]; then
pids=()
for r in 0 1; do
  timeout 120 env PYTHONPATH="$BUILD/client/python" python3 - "$r" > "$WORK/c$r.log" 2>&1 <<'PY' &
import array, os, sys
import railgate
rank, n = int(sys.argv[1]), 100003
with railgate.Comm("198.18.0.1", job=60, token=int(os.environ["RAILGATE_TOKEN"]), rank=rank, world=2,
                   transport="verbs", peer_timeout_ms=5000) as c:
    f = array.array("f", [float(rank * 1000 + i % 977) for i in range(n)])
    c.allreduce(f, n, railgate.FP32)
    k = array.array("i", [rank * 7 + i for i in range(n)])
    c.allreduce(k, n, railgate.INT32)
bad = sum(f[i] != float(1000 + 2 * (i % 977)) for i in range(n)) + sum(k[i] != 7 + 2 * i for i in range(n))
print(f"rank {rank}: the C ABI over verbs, fp32 and int32, {bad} wrong elements")
sys.exit(1 if bad else 0)
PY
  pids+=($!)
done
for r in 0 1; do
  wait "${pids[$r]}" || { echo "FAIL: the C ABI over verbs, rank $r"; cat "$WORK/c$r.log"; exit 1; }
done
cat "$WORK/c0.log"
fi
"$BUILD/railctl" --socket "$WORK/ctl2.sock" --json stats > "$WORK/stats2.json"
python3 - "$WORK/stats2.json" <<'PY' || { echo "FAIL: large-chunk counters"; exit 1; }
import json, sys
rails = {r["rail"]: r for r in json.load(open(sys.argv[1]))["rails"]}
for name in ("v0", "v1"):
    r = rails[name]
    assert r["aggregations"] > 0 and r["engine_reductions"] > 0 and r["drops_total"] == 0, r
print("ok: 512 KiB verbs chunks, engine reductions", [rails[n]["engine_reductions"] for n in ("v0", "v1")])
PY
kill -TERM $RG_PID; wait $RG_PID || { echo "FAIL: railgated exit $?"; exit 1; }

# The eager rings (dataplane/verbs/ll_ring.hpp): railgated busy-polls its
# rail (--idle spin), so it takes the rings the workers offer, and chunks of
# at most 120 bytes go through them (the counts' 4 to 120-byte chunks and
# tails; larger ones stay WRITE_WITH_IMMs). One rail, as a busy-polled rail
# holds a vCPU. Rank 2 turns its ring off (RAILGATE_VERBS_LL=0): the choice
# is per connection, and the sums are bit-exact either way. Then
# verbs_probe's bad entries through the ring: each counted, the job after
# them exact; and a chunk through the ring behind a REGION read late.
{ sed -n '/^\[pools\]/,/^\[\[rail\]\]/p' "$here/verbs.toml" | sed '$d'
  printf '[jobs]\nstall_ms = %d\n\n[[rail]]\nname = "v0"\ntransport = "verbs"\ndevice = "rxe0"\nip = "198.18.0.1"\n' $pause_ms
  printf 'chunk_bytes = 4096\n'; } > "$WORK/eager.toml"
start_railgated "$BUILD" "$WORK/eager.toml" "$WORK/ctl4.sock" "$WORK/railgated4.log" --idle spin
for dt in fp32 bf16; do
  pids=()
  for r in 0 1 2; do
    RAILGATE_VERBS_LL=$([ $r = 2 ] && echo 0 || echo 1) timeout 120 "$BUILD/tools/railbench" --transport verbs \
      --server 198.18.0.1 --rank $r --workers 3 "${peer[@]}" --dtype $dt --job $job --count 1,7,30,31,61,1029,100003 \
      -n 2 -w 1 > "$WORK/e$r.log" 2>&1 &
    pids+=($!)
  done
  for r in 0 1 2; do
    wait "${pids[$r]}" || { echo "FAIL: railbench --dtype $dt through the eager rings, rank $r"; tail -n 5 "$WORK/e$r.log"
                            tail -n 20 "$WORK/railgated4.log"; exit 1; }
  done
  job=$((job + 1))
done
"$BUILD/railctl" --socket "$WORK/ctl4.sock" --json stats > "$WORK/stats4.json"
python3 - "$WORK/stats4.json" <<'PY' || { echo "FAIL: eager counters"; exit 1; }
import json, sys
r = json.load(open(sys.argv[1]))["rails"][0]
# Ranks 0 and 1 of each of the 2 jobs took the ring; rank 2 did not.
assert r["eager_connections"] == 4 and r["connects"] == 6, r
# Each rank's small chunks: both ring ranks' went through it, every result
# of a small slot went back through it to them (and as a WRITE to rank 2).
assert r["eager_contributions"] > 0 and r["eager_results"] == r["eager_contributions"], r
assert r["drops_total"] == 0 and r["aborts"] == 0 and r["qp_errors"] == 0, r
print("ok: eager rings,", r["eager_contributions"], "chunks in and", r["eager_results"], "results out of",
      r["contributions"], "and", r["aggregations"])
PY
timeout 60 "$BUILD/tests/rxe/verbs_probe" 198.18.0.1 47000 eager || { echo "FAIL: verbs_probe eager"; exit 1; }
"$BUILD/railctl" --socket "$WORK/ctl4.sock" --json stats > "$WORK/probe4.json"
python3 - "$WORK/probe4.json" <<'PY' || { echo "FAIL: bad eager entries not counted"; exit 1; }
import json, sys
r = json.load(open(sys.argv[1]))["rails"][0]
d = r["drops"]
# One of each by WRITE_WITH_IMM, then again through the ring, and the
# ring's 0-byte and 121-byte entries.
assert d.get("slot_range") == 2 and d.get("bad_generation") == 2 and d.get("verbs_length") == 4, d
assert r["eager_connections"] == 5, r
PY
# Another tenant's WRITEs into a job's memory on railgated (its region and
# its eager ring): each connection has a PD of its own, so they fail on the
# intruder's QP and the job's sums are exact. railgated counts each (a QP
# error) and logs it, naming the worker.
timeout 60 "$BUILD/tests/rxe/verbs_probe" 198.18.0.1 47000 intrude || { echo "FAIL: verbs_probe intrude"; exit 1; }
"$BUILD/railctl" --socket "$WORK/ctl4.sock" --json stats |
  python3 -c 'import json, sys; r = json.load(sys.stdin)["rails"][0]; assert r["qp_errors"] == 2, r' ||
  { echo "FAIL: the intruders' QP errors not counted"; exit 1; }
[ "$(grep -c "QP of the worker at 198.18.0.1 failed" "$WORK/railgated4.log")" = 2 ] ||
  { echo "FAIL: the intruders' QP errors not logged"; tail -n 20 "$WORK/railgated4.log"; exit 1; }
# A worker's REGION queued behind 16 completions, then its chunk through
# the ring (verbs_probe order stops railgated, posts them, resumes it):
# railgated reads its CQ to the end before it takes the entry, and sums the
# chunk (it had dropped it as region_missing, a rank then judged stalled).
# The 17 copies of the JOIN before them are answered once (joins_again 16;
# before, 8 answers and 9 tx_full drops).
timeout 60 "$BUILD/tests/rxe/verbs_probe" 198.18.0.1 47000 order $RG_PID ||
  { kill -CONT $RG_PID; echo "FAIL: verbs_probe order"; tail -n 20 "$WORK/railgated4.log"; exit 1; }
"$BUILD/railctl" --socket "$WORK/ctl4.sock" --json stats |
  python3 -c 'import json, sys; r = json.load(sys.stdin)["rails"][0]; d = r["drops"]
assert "region_missing" not in d and "tx_full" not in d and r["joins_again"] == 16, r' ||
  { echo "FAIL: a chunk dropped before its REGION was read, or the JOIN's 16 copies answered (tx_full)"; exit 1; }
# Rank 1 of a job left and replaced 4 times by new connections (an elastic
# job's restarts): railgated lets go of each one's registration of the
# job's results when its QP is gone, not when the job ends. While the job
# lives on with ranks 0 and 1 connected (verbs_probe churn holds it until
# its stdin closes), the rail holds their 2 registrations alone; once the
# job ends, none.
result_mrs() { "$BUILD/railctl" --socket "$WORK/ctl4.sock" --json status |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["verbs_rails"][0]["result_mrs"])'; }
mkfifo "$WORK/hold"
timeout 90 "$BUILD/tests/rxe/verbs_probe" 198.18.0.1 47000 churn < "$WORK/hold" > "$WORK/churn.log" 2>&1 &
churn=$!
exec 3> "$WORK/hold"
for _ in $(seq 600); do grep -q "^churned" "$WORK/churn.log" && break; kill -0 $churn 2> /dev/null || break; sleep 0.1; done
grep -q "^churned" "$WORK/churn.log" || { echo "FAIL: verbs_probe churn"; cat "$WORK/churn.log"; exit 1; }
# The replaced connections' teardown (their DISCONNECTED events) may trail.
for _ in $(seq 100); do [ "$(result_mrs)" = 2 ] && break; sleep 0.1; done
held=$(result_mrs)
exec 3>&-
wait $churn || { echo "FAIL: verbs_probe churn exit"; cat "$WORK/churn.log"; exit 1; }
head -n 1 "$WORK/churn.log"
[ "$held" = 2 ] || { echo "FAIL: the job's results registered $held times for its 2 connections"; exit 1; }
for _ in $(seq 100); do [ "$(result_mrs)" = 0 ] && break; sleep 0.1; done
[ "$(result_mrs)" = 0 ] || { echo "FAIL: registrations left after the job: $(result_mrs)"; exit 1; }
echo "ok: 2 registrations of the job's results held after 4 replaced ranks, none after the job"
kill -TERM $RG_PID; wait $RG_PID || { echo "FAIL: railgated exit $?"; cat "$WORK/railgated4.log"; exit 1; }
# verbs_eager_rings = false: a spinning rail declines the ring (verbs_probe
# without `eager` fails if railgated took it).
{ printf '[daemon]\nverbs_eager_rings = false\n\n'; cat "$WORK/eager.toml"; } > "$WORK/no_eager.toml"
start_railgated "$BUILD" "$WORK/no_eager.toml" "$WORK/ctl5.sock" "$WORK/railgated5.log" --idle spin
timeout 60 "$BUILD/tests/rxe/verbs_probe" 198.18.0.1 47000 || { echo "FAIL: verbs_eager_rings = false"; exit 1; }
kill -TERM $RG_PID; wait $RG_PID || { echo "FAIL: railgated exit $?"; cat "$WORK/railgated5.log"; exit 1; }
echo "ok: the eager rings"
