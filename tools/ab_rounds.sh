# Shared by the A/B benchmark scripts (sourced): two modes of one benchmark
# alternated in one run, so that a noisy machine's drift hits both alike.
# The caller defines `run MODE JOB` (prints one figure, GB/s).
#   ab_namespaces TAG                # namespaces $d (railgated) and $w (workers), logs in $log
#   ab_two_rails DP WP [MTU]         # veths DP0-1/WP0-1 between them, 198.18.{0,1}.10 on the workers' side
#   ab_gated RAILGATED DP [MTU]      # railgated on af_packet rails DP0-1 (MTU default 1500); sets $gated
#   ab_start NS RAILGATED ARGS...    # railgated with ARGS in NS, waited for; sets $gated
#   ab_workers NS N SIZE ITERS JOB [ARGS...]  # N kernel-UDP railbench workers ($railbench); prints busbw
#   ab_rounds ROUNDS MODE_A MODE_B   # prints every round; sets AB_A, AB_B (medians)
# The netns tests' helpers: the job token (RAILGATE_TOKEN, random, as a
# training job's rendezvous makes it) and gro_veth.
. "$(dirname "${BASH_SOURCE[0]}")/../tests/netns/lib.sh"

# Two fresh namespaces and a log directory, removed on exit together with
# the railgated whose pid is in $gated (if still running) and a third
# namespace the caller may name in $t.
ab_namespaces() { # TAG
  d=rg${1}d$$ w=rg${1}w$$ log=$(mktemp -d) gated=
  trap ab_cleanup EXIT
  ip netns add "$d" && ip netns add "$w" || exit 1
}
ab_cleanup() {
  [ -n "$gated" ] && kill -9 "$gated" 2>/dev/null
  wait 2>/dev/null
  ip netns del "$d" 2>/dev/null; ip netns del "$w" 2>/dev/null
  [ -n "${t:-}" ] && ip netns del "$t" 2>/dev/null
  [ -n "${AB_KEEP:-}" ] && echo "logs kept in $log" >&2 || rm -rf "$log"
}

# With AB_GRO=1 the workers' veths do GRO (gro_veth).
ab_two_rails() { # DP WP [MTU]
  local r mtu=${3:-1500}
  for r in 0 1; do
    ip link add "$1$r" netns "$d" mtu "$mtu" type veth peer name "$2$r" netns "$w" mtu "$mtu"
    ip -n "$w" addr add "198.18.$r.10/24" dev "$2$r"
    ip -n "$d" link set "$1$r" up; ip -n "$w" link set "$2$r" up
    ip netns exec "$w" ethtool -K "$2$r" tx off > /dev/null # UDP checksums in full (railgated verifies them)
    [ "${AB_GRO:-0}" = 1 ] && gro_veth "$w" "$2$r" "$d" "$1$r"
  done
  ip -n "$w" link set lo up
}
ab_gated() { # RAILGATED DP [MTU]
  local fs=2048 bs=4096 mtu=${3:-1500}
  [ "$mtu" -gt 1500 ] && fs=10240 bs=20480
  ab_start "$d" "$1" --socket "$log/rg.sock" --metrics off \
    --rail "net_af_packet0,iface=${2}0,framesz=$fs,blocksz=$bs,framecnt=1024" --ip 198.18.0.1 --mtu "$mtu" \
    --rail "net_af_packet1,iface=${2}1,framesz=$fs,blocksz=$bs,framecnt=1024" --ip 198.18.1.1 --mtu "$mtu" \
    -- $test_eal_flags
}
# Starts railgated in NS with ARGS (its log in $log/g) and waits until it
# is ready; exits when it is not.
ab_start() { # NS RAILGATED ARGS...
  local ns=$1
  shift
  ip netns exec "$ns" "$@" > "$log/g" 2>&1 &
  gated=$!
  for _ in $(seq 150); do grep -q "railgated: ready" "$log/g" && return; sleep 0.1; done
  echo "railgated did not start: $(tail -3 "$log/g")" >&2
  exit 1
}

# N railbench workers over kernel UDP in NS (railgated's rail 0 at
# 198.18.0.1), one SIZE allreduce ITERS times after 2 warm-ups, in job JOB,
# railbench's ARGS after; logs in $log/b<rank>. Checks rank 0's values and
# prints its bus bandwidth (GB/s).
ab_workers() { # NS N SIZE ITERS JOB [ARGS...]
  local ns=$1 n=$2 size=$3 iters=$4 job=$5 pids=() rank
  shift 5
  for rank in $(seq 0 $((n - 1))); do
    ip netns exec "$ns" timeout 300 "$railbench" --transport udp --server 198.18.0.1 --rank "$rank" \
      --workers "$n" -b "$size" -e "$size" -n "$iters" -w 2 --job "$job" "$@" > "$log/b$rank" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  grep -q "Out of bounds values : 0 OK" "$log/b0" || { echo "wrong values in job $job" >&2; tail -n 5 "$log/b0" >&2; return 1; }
  awk '/Avg bus bandwidth/ {print $(NF-1)}' "$log/b0"
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

ab_rounds() {
  local rounds=$1 a=$2 b=$3 job=1 r mode v
  : > "$log/ab-$a"; : > "$log/ab-$b"
  for r in $(seq "$rounds"); do
    for mode in "$a" "$b"; do
      v=$(run "$mode" "$job") && [ -n "$v" ] || { echo "ab_rounds: the $mode run of round $r failed" >&2; exit 1; }
      job=$((job + 1))
      echo "$v" >> "$log/ab-$mode"
      printf "  round %d %-9s busbw %s GB/s\n" "$r" "$mode" "$v"
    done
  done
  AB_A=$(median < "$log/ab-$a") AB_B=$(median < "$log/ab-$b")
}
