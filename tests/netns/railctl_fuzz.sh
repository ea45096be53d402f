#!/usr/bin/env bash
# railctl's commands with bad arguments against railgated on two udp rails
# (tests/netns/railctl_fuzz.py: a seeded stream, RAILGATE_FUZZ_SEED,
# default 1; RAILGATE_FUZZ_COMMANDS, default 4000, 600 under the
# sanitizers): none may crash railctl or railgated, hang, or end with a
# status railctl does not document, and railgated answers after each. Then, with its faults cleared, a job of 2
# kernel-UDP workers on what rails are left is bit-exact, and railgated
# exits with every buffer back.
#   railctl_fuzz.sh RAILGATED RAILBENCH RAILCTL
set -u
railgated=$1 railbench=$2 railctl=$3
here=$(dirname "$0")
. "$here/lib.sh"
require_netns
d=rgfz$$ log=$(mktemp -d)
gated_pid=
trap 'cleanup_netns "$d" "$log"' EXIT
ctl() { "$railctl" --socket "$log/gated.sock" "$@"; }

ip netns add "$d" || fail "netns"
ip -n "$d" link set lo up
ip netns exec "$d" "$railgated" --socket "$log/gated.sock" --metrics off \
  --rail udp,interface=lo --ip 198.18.0.1 --mtu 9000 --rail udp,interface=lo --ip 198.18.1.1 --mtu 9000 \
  -- $test_eal_flags > "$log/gated.log" 2>&1 &
gated_pid=$!
wait_ready "$log/gated.log"
n=${RAILGATE_FUZZ_COMMANDS:-4000}
[ "${RAILGATE_SANITIZED:-0}" = 1 ] && n=${RAILGATE_FUZZ_COMMANDS:-600}
# A count of 0 is refused, not taken as no limit (the fuzz found stats
# --watch --count 0 running forever; capture's took the same path).
timeout 10 "$railctl" --socket "$log/gated.sock" capture r0 --count 0 -w "$log/zero.pcapng" > "$log/zero.out" 2>&1
[ $? = 1 ] && grep -q "count 0" "$log/zero.out" || fail "capture --count 0: $(cat "$log/zero.out")"
timeout 10 "$railctl" --socket "$log/gated.sock" stats --watch 0.1 --count 0 > "$log/zero.out" 2>&1
[ $? = 2 ] && grep -q "at least 1" "$log/zero.out" || fail "stats --count 0: $(cat "$log/zero.out")"
echo "ok: --count 0 refused by capture and stats"
python3 "$here/railctl_fuzz.py" "$railctl" "$log/gated.sock" "$n" \
  "${RAILGATE_FUZZ_SEED:-1}" "$log" || fail "railctl's bad arguments"

left=$(ctl --json rail list | python3 -c 'import json,sys; print(" ".join(r["name"] for r in json.load(sys.stdin)["rails"]))') ||
  fail "railctl rail list"
echo "rails left: $left"
echo "$left" | grep -q r0 || fail "r0 is gone (the rail workers join first cannot be removed)"
for r in $left; do
  ctl fault clear "$r" > /dev/null || fail "fault clear $r"
done
ctl policy set rail > /dev/null || fail "policy set rail"
pids=()
for rank in 0 1; do
  timeout 120 ip netns exec "$d" "$railbench" --transport udp --server 198.18.0.1 --rank $rank --workers 2 \
    --count 1000003,4097 -n 2 -w 0 --job 1 > "$log/w-$rank.log" 2>&1 &
  pids+=($!)
done
for rank in 0 1; do wait "${pids[$rank]}" || fail "the job after the commands: rank $rank"; done
grep -q "Out of bounds values : 0 OK" "$log/w-0.log" || fail "the job after the commands: wrong values"
echo "ok: a job of 2 workers after the commands, bit-exact"
stop_gated
echo "ok: railgated exited with every buffer back"
