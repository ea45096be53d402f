#!/usr/bin/env bash
# Soak: jobs back to back while a rail goes in and out. railgated on 2
# af_packet rails at MTU 9000 (veth pairs into a worker namespace) under
# POLICY (lag: `policy set lag --hash l3l4`, the default; rail: striping),
# two tenants of kernel-UDP workers (job 11: 2 ranks, job 12: 3 ranks)
# running 3-operation jobs back to back, while a third rail r2 is added
# (af_packet on a third veth pair, a new port name each time), kept for
# 1.5 s and removed (retried while railctl says a job uses or lists it)
# CYCLES times. Every job must finish bit-exact. Prints the jobs that
# finished and failed, each failure's last lines, and the adds and removes
# with their times; exits 1 if a job failed.
# What it found (2026-12-01, 15 cycles a run): up to 139 failed jobs a run,
# from a rail removed while a job on another rail listed it, JOINs taking a
# rail list the lcores were still changing, parts left by a given-up join
# refusing the rank's next process, and an af_packet rail added again on a
# veth a removed rail had left at MTU 1500 (1faaf2a, 54e7819, 3897087);
# 0 of about 7,900 jobs after.
#   tools/soak_rail_changes.sh [BUILD_DIR] [CYCLES] [POLICY]
set -u
build=$(cd "${1:-build}" && pwd) cycles=${2:-15} policy=${3:-lag}
railgated=$build/dataplane/railgated railbench=$build/tools/railbench railctl=$build/railctl
usage() { echo "usage: $0 [BUILD_DIR] [CYCLES] [lag|rail]: $1" >&2; exit 2; }
[[ $cycles =~ ^[1-9][0-9]*$ ]] || usage "CYCLES '$cycles' is not a positive number"
case $policy in lag | rail) ;; *) usage "POLICY '$policy' is neither lag nor rail" ;; esac
[ -x "$railgated" ] && [ -x "$railbench" ] && [ -x "$railctl" ] || usage "$build has no railgated, railbench and railctl"
. "$(dirname "$0")/../tests/netns/lib.sh"
require_netns
d=rgrd$$ w=rgrw$$ log=$(mktemp -d)
gated_pid=
trap 'cleanup_netns "$d $w" "$log"' EXIT
two_rail_netns "$d" "$w"
start_two_rail_gated "$railgated" "$d" "$w" "$log/railgated.log" 9000 --socket "$log/rg.sock" --metrics off
ctl() { ip netns exec "$d" "$railctl" --socket "$log/rg.sock" "$@"; }
ip link add rgd2 netns "$d" mtu 9000 type veth peer name rgw2 netns "$w" mtu 9000 || fail "veth 2"
ip -n "$w" addr add 198.18.2.10/24 dev rgw2
ip -n "$d" link set rgd2 up
ip -n "$w" link set rgw2 up
csum_in_software "$w" rgw2
if [ "$policy" = lag ]; then ctl policy set lag --hash l3l4 > /dev/null || fail "policy lag"; fi

# tenant JOB WORLD: the job's ranks, 3 operations at a time, until $log/stop;
# a line per job in $log/t-JOB.txt ("ok N", or "FAIL N" and each rank's last line).
tenant() {
  local i=0 r pids p rc
  while [ ! -e "$log/stop" ]; do
    i=$((i + 1)) pids=() rc=0
    for r in $(seq 0 $(($2 - 1))); do
      ip netns exec "$w" timeout 60 "$railbench" --transport udp --server 198.18.0.1 --rank "$r" --workers "$2" \
        --job "$1" --count 16514 -n 3 -w 0 --peer-timeout 5000 --join-timeout 10000 > "$log/w-$1-$i-$r.log" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    if [ $rc = 0 ] && grep -q "Out of bounds values : 0 OK" "$log/w-$1-$i-0.log"; then
      echo "ok $i"
      rm -f "$log/w-$1-$i-"*.log
    else
      echo "FAIL $i $(date +%T.%3N)"
      for r in $(seq 0 $(($2 - 1))); do
        echo "  rank $r: $(grep -v '^#' "$log/w-$1-$i-$r.log" | tail -n 1 | cut -c1-230)"
      done
    fi
  done > "$log/t-$1.txt"
}
tenant 11 2 &
t1=$!
tenant 12 3 &
t2=$!
for n in $(seq "$cycles"); do
  ctl rail add r2 "net_af_packet$((10 + n)),iface=rgd2,framesz=10240,blocksz=20480,framecnt=1024" 198.18.2.1 \
    --mtu 9000 > "$log/add.txt" 2>&1 || fail "rail add, cycle $n: $(cat "$log/add.txt")"
  echo "$(date +%T.%3N) add" >> "$log/plug.txt"
  sleep 1.5
  tries=0
  until ctl rail remove r2 > /dev/null 2>&1; do
    tries=$((tries + 1))
    [ $tries -lt 3000 ] || fail "rail remove, cycle $n: still refused after 30 s"
    sleep 0.01
  done
  echo "$(date +%T.%3N) remove (refused $tries times first)" >> "$log/plug.txt"
  sleep 0.2
done
touch "$log/stop"
wait $t1 $t2
ok=$(cat "$log"/t-*.txt | grep -c "^ok")
bad=$(cat "$log"/t-*.txt | grep -c "^FAIL")
echo "policy $policy, $cycles adds and removes of r2: jobs bit-exact $ok, failed $bad"
cat "$log/plug.txt"
grep -h -A3 "^FAIL" "$log"/t-*.txt | head -40
stop_gated
[ "$bad" = 0 ]
