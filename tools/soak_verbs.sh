#!/usr/bin/env bash
# Soak of the verbs rails, in the rxe-vm guest (SoftRoCE; tools/rxe-vm):
# JOBS jobs back to back through one railgated on tests/rxe/verbs.toml's
# two verbs rails, of 1 to 3 ranks, mixed dtypes and counts. A job is one
# of:
#  - plain: every rank must finish bit-exact (railbench checks each element);
#  - kill: its last rank is SIGKILLed half way: the others must fail, told
#    that rank failed on a rail;
#  - abort: `railctl job abort` ends it half way: every rank must fail,
#    told the operator ended it;
#  - churn: before the job, verbs_probe churn (a job of its own, 96, whose
#    rank 1 is taken and left by 4 connections): nothing of it may stay.
# After each job, within 10 s: no job, no connection and no registration
# of results (railctl status: active_jobs, connections, result_mrs) on
# either rail. At the end: railgated's resident memory no larger than after
# the first 10 jobs (RSS_MARGIN_KB, 1 MiB by default), and a clean exit.
# Prints how many jobs of each kind passed; exits 1 at the first failure.
#   tools/soak_verbs.sh [BUILD_DIR] [JOBS] [SEED]
# On the host it boots a guest of its own (about 8 s) and runs itself in
# it; a job takes 1-2 s under TCG (150 jobs: 245 s). Against the ASan tree
# (build-sanitize), with ASAN_OPTIONS=quarantine_size_mb=0: ASan's
# allocator grew railgated by 4.6 MB over jobs 10 to 30, then held (28.2-
# 28.5 MB to job 120; LSan clean at exit): RSS_MARGIN_KB=8192 there.
set -u
if [ "${1:-}" != --guest ]; then
  build=$(cd "${1:-build}" && pwd) jobs=${2:-40} seed=${3:-1}
  # The guest starts from an environment of its own: a sanitized tree's
  # options go in with the command (tests/rxe/host.sh does the same).
  fwd=(RSS_MARGIN_KB="${RSS_MARGIN_KB:-1024}")
  for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS; do [ -n "${!v:-}" ] && fwd+=("$v=${!v}"); done
  exec "$(dirname "$0")/rxe-vm" --timeout $((120 + 15 * jobs)) -- \
    env "${fwd[@]}" bash "$(cd "$(dirname "$0")" && pwd)/$(basename "$0")" --guest "$build" "$jobs" "$seed"
fi
build=$2 jobs=$3 seed=$4 margin=${RSS_MARGIN_KB:-1024}
here=$(cd "$(dirname "$0")/../tests/rxe" && pwd)
BUILD=$build WORK=$(mktemp -d)
. "$here/lib.sh"
fail() { echo "FAIL: $*"; tail -n 20 "$WORK/railgated.log"; exit 1; }
ctl() { "$BUILD/railctl" --socket "$WORK/ctl.sock" "$@"; }
# Stall time and peer timeout 5 s, as the rxe suite has them (TCG's pauses).
{ cat "$here/verbs.toml"; printf '\n[jobs]\nstall_ms = 5000\n'; } > "$WORK/soak.toml"
start_railgated "$BUILD" "$WORK/soak.toml" "$WORK/ctl.sock" "$WORK/railgated.log"
rss() { awk '/^VmRSS/ {print $2}' "/proc/$RG_PID/status"; }
# Every rail's jobs, connections and result registrations, summed: "J C M".
held() { ctl --json status | python3 -c '
import json, sys
v = json.load(sys.stdin)["verbs_rails"]
print(sum(r["active_jobs"] for r in v), sum(r["connections"] for r in v), sum(r["result_mrs"] for r in v))'; }
settled() {
  for _ in $(seq 50); do [ "$(held)" = "0 0 0" ] && return 0; sleep 0.2; done
  return 1
}

RANDOM=$seed
dtypes=(fp32 bf16 fp16 int32)
counts=(1 4097 100003 262144)
declare -A done_kind=([plain]=0 [kill]=0 [abort]=0 [churn]=0)
rss0= trail= t0=$(date +%s)
for j in $(seq 1 "$jobs"); do
  world=$((1 + RANDOM % 3)) dt=${dtypes[$((RANDOM % 4))]} count=${counts[$((RANDOM % 4))]} iters=2
  kind=plain
  case $((RANDOM % 6)) in
    0) [ "$world" -gt 1 ] && kind=kill ;;
    1) kind=abort ;;
    2) [ "$world" -gt 1 ] && kind=churn ;;
  esac
  [ "$kind" = kill ] || [ "$kind" = abort ] && count=100003 iters=1000 # long enough to end in
  if [ "$kind" = churn ]; then
    # verbs_probe churn replaces rank 1 of its job 96 and holds the job
    # until its stdin closes: here at once.
    timeout 60 "$BUILD/tests/rxe/verbs_probe" 198.18.0.1 47000 churn < /dev/null > "$WORK/churn.log" 2>&1 ||
      { cat "$WORK/churn.log"; fail "job $j: verbs_probe churn"; }
    settled || fail "job $j: the churn left $(held) (jobs, connections, registrations)"
  fi
  pids=()
  for r in $(seq 0 $((world - 1))); do
    timeout 200 "$BUILD/tools/railbench" --transport verbs --server 198.18.0.1 --rank "$r" --workers "$world" \
      --job "$((1000 + j))" --peer-timeout 5000 --dtype "$dt" --count "$count" -n "$iters" -w 0 \
      > "$WORK/w$r.log" 2>&1 &
    pids+=($!)
  done
  if [ "$kind" = kill ] || [ "$kind" = abort ]; then
    for r in $(seq 0 $((world - 1))); do
      for _ in $(seq 100); do grep -q size "$WORK/w$r.log" && break; sleep 0.1; done
    done
    sleep 0.5
    last=$((world - 1))
    if [ "$kind" = kill ]; then
      # (stderr: bash's notice of the killed job, wherever it reaps it)
      {
        pkill -KILL -P "${pids[$last]}" # railbench itself, not the timeout around it
        for r in $(seq 0 $((world - 2))); do
          wait "${pids[$r]}" && fail "job $j: rank $r succeeded although rank $last died"
          grep -q "rank $last failed on rail v[01]" "$WORK/w$r.log" ||
            { tail -n 3 "$WORK/w$r.log"; fail "job $j: rank $last not named"; }
        done
        wait "${pids[$last]}"
      } 2> /dev/null
    else
      ctl job abort "$((1000 + j))" --why soak > "$WORK/abort.log" 2>&1 ||
        { cat "$WORK/abort.log"; fail "job $j: railctl job abort"; }
      for r in $(seq 0 "$last"); do
        wait "${pids[$r]}" && fail "job $j: rank $r finished although the operator ended it"
        grep -q "the operator ended job $((1000 + j)) (railctl job abort): soak" "$WORK/w$r.log" ||
          { tail -n 3 "$WORK/w$r.log"; fail "job $j: rank $r not told who ended it"; }
      done
    fi
  else
    for r in $(seq 0 $((world - 1))); do
      wait "${pids[$r]}" || { tail -n 3 "$WORK/w$r.log"; fail "job $j ($world x $dt x $count, $kind): rank $r failed"; }
    done
  fi
  done_kind[$kind]=$((done_kind[$kind] + 1))
  settled || fail "job $j ($world x $dt x $count, $kind): left $(held) (jobs, connections, registrations) after 10 s"
  [ "$j" = 10 ] && rss0=$(rss)
  [ $((j % 10)) = 0 ] && trail+=" $(rss)"
done
rss1=$(rss)
echo "soak_verbs: $jobs jobs in $(($(date +%s) - t0)) s: ${done_kind[plain]} bit-exact, ${done_kind[churn]} bit-exact" \
  "after a replaced rank, ${done_kind[kill]} lost a rank (named), ${done_kind[abort]} aborted by railctl (told)"
echo "soak_verbs: railgated RSS after 10 jobs ${rss0:-?} KiB, at the end $rss1 KiB (every 10 jobs:$trail)"
[ -z "$rss0" ] || [ $((rss1 - rss0)) -le "$margin" ] || fail "railgated grew from $rss0 to $rss1 KiB (margin $margin KiB)"
kill -TERM $RG_PID
wait $RG_PID || fail "railgated exit $?"
echo PASS
