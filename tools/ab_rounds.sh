# Shared by the A/B benchmark scripts (sourced): two modes of one benchmark
# alternated in one run, so that a noisy machine's drift hits both alike.
# The caller defines `run MODE JOB` (prints one figure, GB/s) and $log.
#   ab_rounds ROUNDS MODE_A MODE_B   # prints every round; sets AB_A, AB_B (medians)

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
