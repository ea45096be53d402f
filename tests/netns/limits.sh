#!/usr/bin/env bash
# railgated's job limits against the host's memory. Each rail's state holds
# aggregation tables for max_jobs jobs of max_slots slots (up to 64 ranks
# each); --max-jobs 1024 --pool 65535, valid arguments, made the lcore die
# of std::bad_alloc (abort, exit 134).
#  1. Tables over half the host's memory: refused at start, exit 1, sized.
#  2. A rail its lcore cannot allocate a state for, added live (railctl
#     rail add, the address space capped with prlimit just above what
#     railgated holds): refused with the lcore's reason; the rail and its
#     address are gone, railgated keeps serving r0 (a job, bit-exact), and
#     the same rail is taken once the cap is lifted.
#  3. An lcore that cannot allocate its rails' states at start (ulimit -v
#     under the tables, over the rest): exit 1 with the reason, no abort.
# 2 and 3 cap the address space, which ASan's shadow memory cannot live
# under: they run in the release build only.
#   limits.sh RAILGATED RAILBENCH RAILCTL
set -u
railgated=$1 railbench=$2 railctl=$3
. "$(dirname "$0")/lib.sh"
require_netns
ns=rglim$$ log=$(mktemp -d)
gated_pid=
trap 'cleanup_netns "$ns" "$log"' EXIT
ip netns add "$ns" || fail "netns"
ip -n "$ns" link set lo up
ctl() { ip netns exec "$ns" "$railctl" --socket "$log/gated.sock" "$@"; }
kib() { awk -v k="$1" '$1 == k ":" {print $2}' "/proc/$gated_pid/status"; } # Vm* KEY, in KiB

# 1. 1024 jobs of 65535 slots: 101 GiB a rail.
ip netns exec "$ns" "$railgated" --rail udp,interface=lo --ip 198.18.0.1 --max-jobs 1024 --pool 65535 \
  --socket off --metrics off -- $test_eal_flags_4k > "$log/big.log" 2>&1
rc=$?
[ $rc = 1 ] || fail "railgated with 101 GiB of tables a rail exited $rc, not 1"
grep -q "max_jobs 1024 x max_slots 65535: the aggregation tables take [0-9.]* GiB per rail.*lower max_jobs or max_slots" \
  "$log/big.log" || fail "the refusal does not size the tables"
echo "ok: tables over half the host's memory refused: $(grep -o 'max_jobs 1024.*' "$log/big.log")"

if [ "${RAILGATE_SANITIZED:-0}" = 1 ]; then
  echo "ok: the address-space caps (2, 3) run in the release build only"
  echo PASS
  exit 0
fi

# 2. 256 jobs of 1024 slots: about 0.4 GiB a rail.
ip netns exec "$ns" "$railgated" --rail udp,interface=lo --ip 198.18.0.1 --max-jobs 256 --pool 1024 \
  --socket "$log/gated.sock" --metrics off -- $test_eal_flags_4k > "$log/gated.log" 2>&1 &
gated_pid=$!
wait_ready "$log/gated.log"
size=$(kib VmSize)
[ -n "$size" ] || fail "no VmSize for railgated"
prlimit --pid "$gated_pid" --as=$(((size + 128 * 1024) * 1024)): || fail "prlimit"
ctl rail add r1 udp,interface=lo 198.18.1.1 > "$log/add.log" 2>&1 && fail "rail add r1 took a state over the cap"
grep -q "cannot serve the rail: std::bad_alloc" "$log/add.log" || fail "rail add's refusal: $(cat "$log/add.log")"
kill -0 "$gated_pid" || fail "railgated died on the refused rail"
ctl status > "$log/status.log" || fail "railctl status"
grep -qE "^ *r1 " "$log/status.log" && fail "the refused rail r1 is listed"
ip -n "$ns" -4 addr show dev lo | grep -q "198.18.1.1/32" && fail "the refused rail left 198.18.1.1 on lo"
echo "ok: a rail its lcore cannot hold refused ($(cat "$log/add.log")), its address gone"
run_job() { # JOB RAILS
  local k pids=()
  for k in 0 1; do
    timeout 60 ip netns exec "$ns" "$railbench" --transport udp --server 198.18.0.1 --rank $k --workers 2 \
      --count 100003 -n 2 -w 0 --job "$1" > "$log/w-$1-$k.log" 2>&1 &
    pids+=($!)
  done
  for k in 0 1; do wait "${pids[$k]}" || fail "job $1: rank $k"; done
  grep -q "Out of bounds values : 0 OK" "$log/w-$1-0.log" || fail "job $1: wrong values"
  grep -q "server 198.18.0.1, $2 rail" "$log/w-$1-0.log" || fail "job $1 did not stripe over $2 rail(s)"
  echo "ok: job $1: 2 workers over $2 rail(s), bit-exact"
}
run_job 1 1
prlimit --pid "$gated_pid" --as=unlimited: || fail "prlimit unlimited"
ctl rail add r1 udp,interface=lo 198.18.1.1 > "$log/add2.log" 2>&1 || fail "rail add r1 without the cap: $(cat "$log/add2.log")"
run_job 2 2
stop_gated
echo "ok: the same rail taken once the cap was lifted"

# 3. At start: 1024 jobs of 1024 slots (1.6 GiB a rail) under a cap of the
# last run's size (0.4 GiB of it its tables) and 256 MiB.
cap=$((size + 256 * 1024))
(ulimit -v "$cap" && exec ip netns exec "$ns" "$railgated" --rail udp,interface=lo --ip 198.18.0.1 --max-jobs 1024 \
  --pool 1024 --socket off --metrics off -- $test_eal_flags_4k) > "$log/start.log" 2>&1
rc=$?
[ $rc = 1 ] || fail "railgated whose lcore cannot allocate its state exited $rc, not 1"
grep -q "lcore [0-9]* cannot build its rails' states: std::bad_alloc" "$log/start.log" || fail "no reason given"
echo "ok: an lcore that cannot build its state at start: $(grep -o "lcore [0-9]* cannot build.*" "$log/start.log")"
echo PASS
