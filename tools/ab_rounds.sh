# Shared by the A/B benchmark scripts (sourced): two modes of one benchmark
# alternated in one run, so that a noisy machine's drift hits both alike.
# The caller defines `run MODE JOB` (prints one figure, GB/s).
#   ab_namespaces TAG                # namespaces $d (railgated) and $w (workers), logs in $log
#   ab_rounds ROUNDS MODE_A MODE_B   # prints every round; sets AB_A, AB_B (medians)
# The job token every worker of a job shares (railbench and raillat take it
# from here): random, as a training job's rendezvous makes it.
export RAILGATE_TOKEN=${RAILGATE_TOKEN:-$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}

# Two fresh namespaces and a log directory, removed on exit together with
# the railgated whose pid is in $gated (if still running).
ab_namespaces() { # TAG
  d=rg${1}d$$ w=rg${1}w$$ log=$(mktemp -d) gated=
  trap ab_cleanup EXIT
  ip netns add "$d" && ip netns add "$w" || exit 1
}
ab_cleanup() {
  [ -n "$gated" ] && kill -9 "$gated" 2>/dev/null
  wait 2>/dev/null
  ip netns del "$d" 2>/dev/null; ip netns del "$w" 2>/dev/null
  rm -rf "$log"
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

ab_rounds() {
  local rounds=$1 a=$2 b=$3 job=1 r mode v
  : > "$log/ab-$a"; : > "$log/ab-$b"
  for r in $(seq "$rounds"); do
    for mode in "$a" "$b"; do
      v=$(run "$mode" "$job"); job=$((job + 1))
      echo "$v" >> "$log/ab-$mode"
      printf "  round %d %-9s busbw %s GB/s\n" "$r" "$mode" "$v"
    done
  done
  AB_A=$(median < "$log/ab-$a") AB_B=$(median < "$log/ab-$b")
}
