#!/usr/bin/env bash
# DDP training through railgate's hooks against gloo, in one run:
# tools/ddp_train.py --model large (10.6 M parameters, 42 MB of fp32
# gradients a step) with 2 ranks, alternating gloo (DDP's allreduce hook on
# the gloo process group), railgate's fp32 hook and its bf16 hook, ROUNDS
# times; prints the median step time and communication time per step (the
# slowest rank's median), the ratios to gloo and the chunks railgate
# resent (median over rounds, summed over ranks). railgated runs on two
# udp rails in a namespace at MTU (default 9000), as its embedded default
# has them (KERNEL_PORT=af_packet: DPDK af_packet rails instead); the
# trainers in another, over kernel UDP.
# CC=off|delay gives the railgate runs that congestion control (default:
# the library's, queue). TRAINERS=off-lcore runs every trainer (gloo's
# too) off the CPUs railgated's lcores are pinned to, as on an aggregation
# node of its own: railgated's core is not taken from the trainers (on this
# 2-CPU machine the trainers then share the other CPU); the default lets
# the kernel place them.
#   tools/bench_ddp.sh [BUILD_DIR] [ROUNDS] [STEPS] [MTU]
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd) rounds=${2:-3} steps=${3:-12} mtu=${4:-9000}
python=${RAILGATE_TEST_PYTHON:-/usr/bin/python3}
. "$src/tests/netns/lib.sh"
require_netns
log=$(mktemp -d)
d=rgbd$$ w=rgbw$$
gated_pid=
trap 'cleanup_netns "$d $w" "$log"' EXIT
two_rail_netns "$d" "$w"
start_kernel_port_gated "$build/dataplane/railgated" "$d" "$w" "$log/railgated.log" "$mtu"
pin=()
case ${TRAINERS:-shared} in
  shared) ;;
  off-lcore)
    off=$(cpus_off_lcores "$gated_pid")
    [ -n "$off" ] || fail "TRAINERS=off-lcore: railgated's lcores cover every CPU"
    pin=(taskset -c "$off") ;;
  *) fail "TRAINERS is shared or off-lcore" ;;
esac

run() { # NAME ROUND ARGS...
  local name=$1 round=$2
  shift 2
  ip netns exec "$w" "${pin[@]}" env PYTHONPATH="$build/client/python" GLOO_SOCKET_IFNAME=lo \
    "$python" "$src/tools/ddp_train.py" --quiet --model large --world 2 --steps "$steps" --server 198.18.0.1 "$@" \
    > "$log/$name-$round.log" 2>&1 || fail "$name, round $round"
  sed -n 's/^result //p' "$log/$name-$round.log" >> "$log/$name.jsonl"
}
for round in $(seq "$rounds"); do
  run gloo "$round" --backend gloo
  run rg_fp32 "$round" --backend railgate --hook fp32 --cc "${CC:-queue}"
  run rg_bf16 "$round" --backend railgate --hook bf16 --cc "${CC:-queue}"
done
stop_gated
"$python" - "$log" "$rounds" "$steps" "$mtu" "${KERNEL_PORT:-udp}" "${TRAINERS:-shared}" <<'PY'
import json, statistics, sys
log, rounds, steps, mtu, kind, trainers = sys.argv[1:7]
rows = {}
for name in ("gloo", "rg_fp32", "rg_bf16"):
    rs = [json.loads(l) for l in open(f"{log}/{name}.jsonl")]
    rows[name] = (statistics.median(r["step_ms"] for r in rs), statistics.median(r["comm_ms"] for r in rs), rs[0]["params"],
                  statistics.median(r.get("retransmits", 0) for r in rs))
g_step, g_comm, params, _ = rows["gloo"]
print(f"# ddp_train --model large ({params} parameters), 2 ranks, {steps} steps, {rounds} rounds alternated, "
      f"railgated on 2 {kind} rails at MTU {mtu}; trainers {'off railgated' + chr(39) + 's lcore CPUs' if trainers == 'off-lcore' else 'placed by the kernel'}; "
      f"medians of the slowest rank's per-step medians")
print(f"{'backend':<16}{'step ms':>10}{'comm ms':>10}{'step x gloo':>13}{'comm x gloo':>13}{'resent':>8}")
for name, label in (("gloo", "gloo fp32"), ("rg_fp32", "railgate fp32"), ("rg_bf16", "railgate bf16")):
    s, c, _, retx = rows[name]
    print(f"{label:<16}{s:>10.1f}{c:>10.1f}{s / g_step:>13.2f}{c / g_comm:>13.2f}{retx:>8g}")
PY
