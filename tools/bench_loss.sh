#!/usr/bin/env bash
# Throughput under loss, against the same run without it: railbench
# --embedded (2 workers, 2 rails) with the virtual switch dropping,
# duplicating and reordering a fraction P of the frames each way (the same P
# for all three, plus corruption at P/10), alternated round by round with a
# lossless run, so that the machine's drift hits both alike. Every run checks
# every element (bit-exact or it fails).
#   tools/bench_loss.sh [BUILD_DIR] [ROUNDS] [COUNT] [MTU]
#   prints: loss, median busbw lossy and lossless, their ratio, bit-exact
#   (no wrong element in any run), retransmits per run, runs that failed
#   (an operation ended with an error: never a wrong value)
set -u
build=${1:-build} rounds=${2:-5} count=${3:-1048576} mtu=${4:-1500}
railbench=$build/tools/railbench
[ -x "$railbench" ] || { echo "no $railbench (build first)"; exit 2; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
run() { # SPEC -> "busbw wrong retransmits"
  "$railbench" --embedded --workers 2 --rails 2 --mtu "$mtu" --count "$count" -n 10 -w 2 --fault "$1" 2>&1 |
    awk '/^ +[0-9]+ +[0-9]+ +(float|fp32) / {bw = $7; wrong = $8} /^# retransmits/ {r = $3; sub(/,/, "", r)}
         END {print (bw == "" ? 0 : bw), (wrong == "" ? "fail" : wrong), r + 0}'
}
echo "# railbench --embedded --workers 2 --rails 2 --mtu $mtu --count $count (fp32, $((count * 4)) bytes), $rounds rounds"
echo "# each way: drop = dup = reorder = P, corrupt = P/10; lossless run alternated with each"
printf "# %-6s %12s %12s %8s %10s %12s %8s\n" "loss" "busbw GB/s" "lossless" "ratio" "bit-exact" "retransmits" "failed"
for p in 0.001 0.01 0.05 0.2; do
  c=$(awk -v p="$p" 'BEGIN { print p / 10 }')
  spec="drop=$p,dup=$p,reorder=$p,corrupt=$c,seed=1"
  : > /tmp/rgloss.a; : > /tmp/rgloss.b
  exact=yes retx=0 failed=0
  for _ in $(seq "$rounds"); do
    read -r bw wrong r < <(run "$spec")
    echo "$bw" >> /tmp/rgloss.a
    [ "$wrong" = fail ] && failed=$((failed + 1))
    [ "$wrong" = 0 ] || [ "$wrong" = fail ] || exact=no
    retx=$((retx + r))
    read -r bw0 wrong0 _ < <(run off)
    echo "$bw0" >> /tmp/rgloss.b
    [ "$wrong0" = 0 ] || [ "$wrong0" = fail ] || exact=no
  done
  a=$(median < /tmp/rgloss.a) b=$(median < /tmp/rgloss.b)
  printf "  %-6s %12s %12s %8.2f %10s %12d %8s\n" "$(awk -v p="$p" 'BEGIN { printf "%g%%", p * 100 }')" "$a" "$b" \
    "$(awk -v a="$a" -v b="$b" 'BEGIN { print (b > 0 ? a / b : 0) }')" "$exact" "$((retx / rounds))" "$failed/$rounds"
done
rm -f /tmp/rgloss.a /tmp/rgloss.b
