#!/usr/bin/env bash
# The verbs figures, each against perftest on the same SoftRoCE device in
# the same guest run (tools/rxe-vm: QEMU TCG, Debian's kernel, rxe0):
#   latency:   raillat --transport verbs (4-byte ping-pong through
#              railgated, half round trip) vs ib_write_lat -s 4 (and
#              ib_send_lat), ROUNDS rounds alternated (default 3): the
#              medians and their ratio;
#   bandwidth: railbench --transport verbs (one worker) vs ib_write_bw.
# Then raillat --compare udp,dpdk,verbs side by side: railgated's verbs rail
# (rxe0, 198.18.0.1), a DPDK tap rail (198.18.5.1) for the udp row, and
# raillat's own embedded railgated for the dpdk row.
#   tools/bench_verbs.sh [BUILD_DIR] [ITERATIONS] [ROUNDS]
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" != --guest ]; then
  build=$(cd "${1:-$here/../build}" && pwd) || exit 2
  exec "$here/rxe-vm" --smp 2 --timeout 1200 -- bash "$here/bench_verbs.sh" --guest "$build" "${2:-1000}" "${3:-3}"
fi
B=$2 N=$3 rounds=$4 W=$(mktemp -d)
export RAILGATE_TOKEN=${RAILGATE_TOKEN:-$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}
ip link set lo up
# Two railgated: one with the verbs rail only, one with the DPDK tap rail
# only (the udp row), so that each measurement has just its own pollers on
# the guest's two vCPUs, as perftest's two processes have.
cat > "$W/verbs.toml" <<TOML
[[rail]]
name = "v0"
transport = "verbs"
device = "rxe0"
ip = "198.18.0.1"
TOML
cat > "$W/tap.toml" <<TOML
[eal]
lcores = "0-1"
memory_mb = 256
hugepages = false
pci = false
telemetry = false
log_levels = ["lib.eal:error"]
[[rail]]
name = "t0"
devargs = "net_tap0,iface=rgt0"
ip = "198.18.5.1"
host_ip = "198.18.5.254/24"
TOML
start() { # NAME CONFIG ARGS...: starts railgated, sets $rg
  local name=$1 cfg=$2
  shift 2
  "$B/dataplane/railgated" --config "$cfg" --socket off --metrics off "$@" > "$W/$name.log" 2>&1 &
  rg=$!
  for _ in $(seq 300); do
    grep -q "railgated: ready" "$W/$name.log" && return 0
    kill -0 $rg 2> /dev/null || break
    sleep 0.1
  done
  echo "railgated ($name) did not start:"; cat "$W/$name.log"; exit 1
}
# perftest: server, wait until it listens, client. Under TCG perftest's
# clock calibration sometimes fails ("Correlation coefficient r^2 < 0.9:
# Can't produce a report", or a row of "inf" with no word why): such a run
# is made again, up to three times.
perftest() { # TOOL ARGS...
  local s try out
  for try in 1 2 3; do
    "$@" > "$W/server.log" 2>&1 &
    s=$!
    for _ in $(seq 100); do ss -ltn | grep -q ":18515 " && break; sleep 0.1; done
    out=$(timeout 300 "$@" 127.0.0.1 2>&1)
    wait $s
    echo "$out" | grep -qE "Can't produce a report|[[:space:]]inf[[:space:]]" || break
    echo "(perftest could not calibrate its clock, run $try; again)" >&2
    echo "$out" | grep -vE "^ *[-*]|^ *$" | head -n 8 >&2
  done
  echo "$out"
}

# Latency: ROUNDS alternated rounds of ib_write_lat, ib_send_lat and raillat
# (railgated up for raillat's turn only: it busy-polls a vCPU), and the
# median of each; one pair under TCG swings by a third from run to run.
for k in $(seq "$rounds"); do
  echo "== round $k/$rounds: ib_write_lat -s 4 -n $N (rxe0, GID 1)"
  perftest ib_write_lat -d rxe0 -x 1 -s 4 -n "$N" | tee "$W/ib_lat.$k.log" | grep -E "^ *#bytes|^ *4 "
  echo "== round $k/$rounds: ib_send_lat -s 4 -n $N (SEND/RECV: the receiver takes a completion, as railgated's WRITE_WITH_IMM does)"
  perftest ib_send_lat -d rxe0 -x 1 -s 4 -n "$N" | tee "$W/ib_send_lat.$k.log" | grep -E "^ *#bytes|^ *4 "
  start verbs "$W/verbs.toml" --idle spin
  echo "== round $k/$rounds: raillat --transport verbs -s 4 -n $N (railgated busy-polls its verbs rail, raillat busy-polls: the eager rings)"
  "$B/tools/raillat" --transport verbs --server 198.18.0.1 -s 4 -n "$N" -w $((N / 10)) --bw-size 0 | tee "$W/raillat.$k.log"
  [ "$k" = "$rounds" ] || { kill -INT $rg; wait $rg; }
done
echo "== railbench --transport verbs, one worker"
timeout 600 "$B/tools/railbench" --transport verbs --server 198.18.0.1 --rank 0 --workers 1 -b 64K -e 4M -f 4 -n 5 -w 1 |
  tee "$W/railbench.log" | grep -E "^ +[0-9]|railbench:"
kill -INT $rg; wait $rg
echo "== ib_write_bw -s 65536"
perftest ib_write_bw -d rxe0 -x 1 -s 65536 -n 200 | tee "$W/ib_bw.log" | grep -E "^ *#bytes|^ *65536 "

echo "== raillat --compare udp,dpdk,verbs -s 4 -n $N (both railgated up, idle ones sleeping or yielding)"
start verbs "$W/verbs.toml"
verbs_pid=$rg
modprobe tun # the tap rail's /dev/net/tun
start tap "$W/tap.toml" --idle yield
"$B/tools/raillat" --compare udp,dpdk,verbs --udp-server 198.18.5.1 --verbs-server 198.18.0.1 -s 4 -n "$N" \
  -w $((N / 10)) --bw-size 1M --bw-iters 5 | tee "$W/compare.log"
kill -INT $rg $verbs_pid; wait $rg $verbs_pid

typical() { # LOG...: each run's 4-byte t_typical, space-separated
  awk '$1 == 4 && NF >= 9 {printf "%s%s", sep, $5; sep = " "}' "$@"
}
median() { tr ' ' '\n' | sort -g | awk '{v[NR] = $1} END {if (NR) print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
ib_runs=$(for k in $(seq "$rounds"); do typical "$W/ib_lat.$k.log"; echo; done | tr '\n' ' ')
send_runs=$(for k in $(seq "$rounds"); do typical "$W/ib_send_lat.$k.log"; echo; done | tr '\n' ' ')
rl_runs=$(for k in $(seq "$rounds"); do typical "$W/raillat.$k.log"; echo; done | tr '\n' ' ')
ib_lat=$(echo $ib_runs | median)
send_lat=$(echo $send_runs | median)
rl_lat=$(echo $rl_runs | median)
ib_bw=$(awk '$1 == 65536 && NF >= 4 {print $4}' "$W/ib_bw.log") # MB/s
rb_bw=$(awk '$1 == 4194304 {print $6}' "$W/railbench.log")      # algbw GB/s
echo "== summary (same guest, same run; latency: medians of $rounds alternated rounds)"
echo "per round t_typical (us): raillat $rl_runs/ ib_write_lat $ib_runs/ ib_send_lat $send_runs"
echo "verbs latency: raillat t_typical ${rl_lat:-?} us, ib_write_lat t_typical ${ib_lat:-?} us," \
  "ratio $(awk -v a="$rl_lat" -v b="$ib_lat" 'BEGIN {if (a > 0 && b > 0) printf "%.2f", a / b; else print "?"}')"
echo "verbs latency vs ib_send_lat t_typical ${send_lat:-?} us:" \
  "ratio $(awk -v a="$rl_lat" -v b="$send_lat" 'BEGIN {if (a > 0 && b > 0) printf "%.2f", a / b; else print "?"}')"
echo "verbs bandwidth: railbench 4 MiB algbw ${rb_bw:-?} GB/s, ib_write_bw ${ib_bw:-?} MB/s," \
  "ratio $(awk -v a="$rb_bw" -v b="$ib_bw" 'BEGIN {if (a > 0 && b > 0) printf "%.2f", a * 1000 / b; else print "?"}')"
[ -n "$ib_lat" ] && [ -n "$rl_lat" ] && [ -n "$ib_bw" ] && [ -n "$rb_bw" ] && grep -qE "^verbs +[0-9]" "$W/compare.log"
