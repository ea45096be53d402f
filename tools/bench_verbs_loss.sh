#!/usr/bin/env bash
# What packet loss costs a verbs job, on rxe in the rxe-vm guest (QEMU TCG,
# Debian's kernel): railgated's verbs rail on rxel0 and 3 railbench ranks on
# rxel1, the two ends of a veth with netem dropping on both
# (tests/rxe/lib.sh: lossy_fabric_up). For each ACK timeout (default: the
# one railgated and the workers choose themselves, 14 at their 1 s; a
# number: the rail's ack_timeout and the workers' RAILGATE_IB_TIMEOUT) and
# each loss percentage (each way), one job of ITERATIONS 1 MiB fp32
# allreduces: the time per allreduce, its ratio to the same timeout's
# lossless job in this run, the ranks that failed, the packets netem
# dropped, the QPs' resends (completer_retry_err), and the connect
# attempts the ranks dropped for new ones (the loss is on from the start:
# rdma_cm's connection MADs cross it too).
#   tools/bench_verbs_loss.sh [BUILD_DIR] [ITERATIONS] ["LOSSES"] ["TIMEOUTS"]
#   (defaults: build 8 "0 0.1 1" "default 16 12")
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" != --guest ]; then
  build=$(cd "${1:-$here/../build}" && pwd) || exit 2
  exec "$here/rxe-vm" --timeout 1200 -- bash "$here/bench_verbs_loss.sh" --guest "$build" "${2:-8}" \
    "${3:-0 0.1 1}" "${4:-default 16 12}"
fi
BUILD=$2 iters=$3 losses=$4 timeouts=$5 WORK=$(mktemp -d)
. "$here/../tests/rxe/lib.sh"
trap 'kill ${rg:-} 2> /dev/null; wait 2> /dev/null; lossy_fabric_down' EXIT
lossy_fabric_up || { echo "bench_verbs_loss: the lossy fabric could not be set up" >&2; exit 1; }
echo "# bench_verbs_loss: 3 ranks, 1 MiB fp32 allreduces (-n $iters -w 1), railgated's one verbs rail, rxe in a TCG guest"
printf '%-8s %-6s %14s %9s %6s %8s %8s %9s\n' timeout loss "us/allreduce" "x lossless" failed dropped resends reconnects
job=0
for t in $timeouts; do
  { printf '[pools]\ndefault_slots = 8\n[[rail]]\nname = "l0"\ntransport = "verbs"\ndevice = "rxel0"\nip = "198.18.6.1"\n'
    [ "$t" = default ] || echo "ack_timeout = $t"; } > "$WORK/l.toml"
  "$BUILD/dataplane/railgated" --config "$WORK/l.toml" --socket off --metrics off > "$WORK/rg.log" 2>&1 &
  rg=$!
  for _ in $(seq 100); do grep -q "railgated: ready" "$WORK/rg.log" && break; sleep 0.1; done
  shown=$(grep -o 'ack timeout [0-9]* ([^)]*)' "$WORK/rg.log" | head -1)
  base=
  for loss in $losses; do
    fabric_loss "$loss" || exit 1
    d0=$(fabric_dropped) q0=$(fabric_resends) pids=() fails=0 job=$((job + 1))
    envs=()
    [ "$t" = default ] || envs=(RAILGATE_IB_TIMEOUT="$t")
    for r in 0 1 2; do
      env "${envs[@]}" timeout 300 "$BUILD/tools/railbench" --transport verbs --server 198.18.6.1 --rank $r --workers 3 \
        --job $job --count 262144 -n "$iters" -w 1 > "$WORK/w$r.log" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || fails=$((fails + 1)); done
    us=$(awk '/ float / {print $5}' "$WORK/w0.log")
    [ -z "$base" ] && [ "$loss" = 0 ] && base=$us
    ratio=$([ -n "$us" ] && [ -n "$base" ] && awk -v a="$us" -v b="$base" 'BEGIN {printf "%.2f", a / b}' || echo -)
    printf '%-8s %-6s %14s %9s %6s %8s %8s %9s\n' "$t" "$loss%" "${us:-failed}" "$ratio" "$fails" \
      $(($(fabric_dropped) - d0)) $(($(fabric_resends) - q0)) "$(cat "$WORK"/w?.log | grep -c "connecting again")"
    [ "$fails" = 0 ] || grep -h "allreduce failed" "$WORK"/w*.log | head -1 | sed 's/^/#   /'
  done
  fabric_loss 0
  kill $rg; wait $rg 2> /dev/null
  echo "#   $t: railgated's QPs took $shown"
done
