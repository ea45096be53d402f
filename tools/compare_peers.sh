#!/usr/bin/env bash
# railgate end to end against torch.distributed gloo and OpenMPI, measured
# alternately in one run (the machine is shared: only ratios from the same
# run count).
#   tools/compare_peers.sh [BUILD_DIR] [ROUNDS]
# For 2 and 4 workers, each round runs, fp32 at 256 KiB, 4 MiB and 64 MiB:
#   - railbench --embedded (railgated and the workers in one process over
#     in-process rings), MTU 1500 and 9000;
#   - railbench --transport udp workers (kernel UDP, one process per rank)
#     in a namespace, through railgated in another on two rails at MTU
#     9000 over veths: udp rails, as its embedded default has
#     (KERNEL_PORT=af_packet: DPDK af_packet rails instead); needs root,
#     skipped otherwise. The workers run on the CPUs railgated's lcore does
#     not (taskset; lib.sh cpus_off_lcores), as they would beside a
#     poll-mode data plane;
#   - tools/gloo_allreduce.py (gloo over loopback, one process per rank);
#   - tools/mpi_allreduce.c, MPI_Allreduce under mpirun over TCP on
#     loopback and over shared memory (vader), when OpenMPI is installed
#     (openmpi-bin, libopenmpi-dev; skipped otherwise).
# It prints each one's median busbw (GB/s, nccl-tests' definition, as all of
# them print it) over the rounds, and railgate's ratios to gloo and to
# OpenMPI over TCP; then the kernel-UDP workers' retransmits (all ranks,
# sizes and rounds: none where nothing is lost); then where the CPUs were.
# On a virtual machine the hypervisor moves the vCPUs between cores that
# share a cache and cores that do not, every few seconds: on this runner a
# cache line crosses between the two CPUs in 50-70 ns one moment and
# 320-350 ns the next, and every figure that moves data between two CPUs
# follows (kernel-UDP workers at 64 MiB: 1.03-1.33 GB/s near, 0.60-0.67
# far, in the same hour; doc/performance.md, 2026-12-04 sixth session).
# raillat's floor-ring (a cache line's half round trip, the median) is
# taken before and after each run; a run with a probe at more than twice
# the comparison's fastest was made far apart. When there were such runs,
# the table is printed again over the near runs alone (its lines behind a
# '#'), and a line counts the far runs of each kind.
set -euo pipefail
build=${1:-build}
rounds=${2:-2}
iters=${ITERS:-10}
railbench=$build/tools/railbench
railgated=$build/dataplane/railgated
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$railbench" ] || { echo "compare_peers: no $railbench (build first)" >&2; exit 2; }
/usr/bin/python3 -c 'import torch' 2> /dev/null || { echo "compare_peers: /usr/bin/python3 has no torch (apt-get install python3-torch)" >&2; exit 2; }
out=$(mktemp -d)
log=$out # lib.sh's fail() shows the logs there
sizes="262144 4194304 67108864"
counts=$(for b in $sizes; do echo -n "$((b / 4)),"; done)
counts=${counts%,}
# railbench's table rows (size in bytes, busbw, wrong elements 0) as rows,
# each with the run it came from ($run, counted by probe).
rows() { awk -v who="$1" -v w="$2" -v run="$run" '$1 ~ /^[0-9]+$/ && NF >= 8 && $8 == 0 {print who, w, $1, $7, run}'; }
# probe WHO W: where the CPUs are now (floor-ring's median, us) into
# $out/place, as "RUN WHO W us"; the probe before a run (`probe before`)
# starts the next run.
run=0
probe() {
  [ "$1" = before ] && run=$((run + 1))
  "$build/tools/raillat" --transport floor-ring -n 20000 -w 2000 --json 2> /dev/null |
    /usr/bin/python3 -c 'import json, sys; print(*sys.argv[1:], json.load(sys.stdin)["results"][0]["t_typical_us"])' \
      "$run" "$2" "$3" >> "$out/place" || true
}

# The kernel-UDP workers' railgated, in namespaces of its own, up only for
# their runs: idle, it still wakes on its lcore's CPU (about 10% of it on
# this 2-CPU machine), and left up through the others it halved the
# embedded rows (4 MiB at MTU 9000: 3.7-7.2 GB/s alone, 1.6-3.3 beside it,
# 3 alternated pairs; doc/performance.md, 2026-12-06 evening).
udp= pin=()
if [ "$(id -u)" = 0 ] && [ -x "$railgated" ]; then
  set +e
  . "$here/../tests/netns/lib.sh"
  set -e
  d=rgcd$$ wn=rgcw$$ gated_pid=
  trap 'cleanup_netns "$d $wn" "$out"' EXIT
  two_rail_netns "$d" "$wn"
  udp_gated_up() {
    local r
    for r in 0 1; do ip -n "$d" addr flush dev "rgd$r"; done # start_two_rail_udp_gated adds them
    start_kernel_port_gated "$railgated" "$d" "$wn" "$out/railgated.log" 9000
  }
  udp_gated_down() { kill "$gated_pid" && wait "$gated_pid" 2> /dev/null || true; gated_pid=; }
  udp_gated_up
  udp=1
  # The workers keep off railgated's polling CPU (none left: unpinned).
  off=$(cpus_off_lcores "$gated_pid")
  [ -n "$off" ] && pin=(taskset -c "$off")
  udp_gated_down
else
  trap 'rm -rf "$out"' EXIT
  echo "# no kernel-UDP rows: they need root and $railgated" >&2
fi
mpi=
if command -v mpicc > /dev/null && command -v mpirun > /dev/null; then
  mpicc -O2 -o "$out/mpi_allreduce" "$here/mpi_allreduce.c" && mpi=1
else
  echo "# no OpenMPI rows: mpicc/mpirun not installed (apt-get install openmpi-bin libopenmpi-dev)" >&2
fi
mpirun_() { # W BTL
  timeout 600 mpirun --allow-run-as-root --oversubscribe -np "$1" --mca btl "self,$2" --mca btl_tcp_if_include lo \
    "$out/mpi_allreduce" "${sizes// /,}" "$iters" 2> /dev/null | awk -v who="mpi-$2" '$1 == "mpi" {print who, $2, $3, $6}'
}

echo "# compare_peers: $rounds round(s), $iters iterations per size; $(date -u +%F) $(git -C "$here/.." rev-parse --short HEAD 2> /dev/null || echo '?')"
for w in 2 4; do
  for r in $(seq "$rounds"); do
    for mtu in 1500 9000; do
      probe before "railgate-$mtu" "$w"
      "$railbench" --embedded --workers "$w" --count "$counts" -n "$iters" -w 2 --mtu "$mtu" 2> /dev/null |
        rows "railgate-$mtu" "$w" >> "$out/rows"
      probe after "railgate-$mtu" "$w"
    done
    if [ -n "$udp" ]; then
      udp_gated_up
      probe before railgate-udp "$w"
      pids=()
      for k in $(seq 0 $((w - 1))); do
        ip netns exec "$wn" "${pin[@]}" "$railbench" --transport udp --server 198.18.0.1 --rank "$k" --workers "$w" \
          --job $((100 + r * 10 + w)) --count "$counts" -n "$iters" -w 2 > "$out/udp-$k.log" 2>&1 &
        pids+=($!)
      done
      for p in "${pids[@]}"; do wait "$p" || echo "# a kernel-UDP worker failed: $(tail -n 1 "$out"/udp-*.log | tr '\n' ' ')" >&2; done
      rows railgate-udp "$w" < "$out/udp-0.log" >> "$out/rows"
      # Each rank's "# retransmits N (...)" over its sizes (the goal: none
      # where nothing is lost).
      cat "$out"/udp-*.log | awk -v w="$w" '$2 == "retransmits" {n += $3} END {print w, n + 0}' >> "$out/retx"
      probe after railgate-udp "$w"
      udp_gated_down
    fi
    probe before gloo "$w"
    timeout 600 /usr/bin/python3 "$here/gloo_allreduce.py" --world "$w" --bytes "${sizes// /,}" --iters "$iters" |
      awk -v run="$run" '{print "gloo", $2, $3, $6, run}' >> "$out/rows"
    probe after gloo "$w"
    if [ -n "$mpi" ]; then
      for btl in tcp vader; do
        probe before "mpi-$btl" "$w"
        mpirun_ "$w" "$btl" | awk -v run="$run" '{print $0, run}' >> "$out/rows"
        probe after "mpi-$btl" "$w"
      done
    fi
  done
done
# The table of medians over every run; then, when some runs were made
# with the vCPUs far apart (a probe before or after at more than twice the
# comparison's fastest), the same table over the near runs alone, each
# line behind a '#' (tools/perf_report.sh reads the first).
touch "$out/place"
/usr/bin/python3 - "$out/rows" "$out/place" <<'PY'
import collections, statistics, sys
probes = [line.split() for line in open(sys.argv[2])]
fastest = min((float(p[3]) for p in probes), default=0)
far = {p[0] for p in probes if float(p[3]) > 2 * fastest}
rows = [line.split() for line in open(sys.argv[1])]
cols = [("gloo", "gloo"), ("railgate-1500", "rg-1500"), ("railgate-9000", "rg-9000"), ("railgate-udp", "rg-udp"),
        ("mpi-tcp", "mpi-tcp"), ("mpi-vader", "mpi-shm")]
ratios = [("railgate-1500", "gloo"), ("railgate-9000", "gloo"), ("railgate-udp", "gloo"),
          ("railgate-1500", "mpi-tcp"), ("railgate-9000", "mpi-tcp")]
label = dict(cols)
def table(keep, lead):
    v = collections.defaultdict(list)
    for who, w, b, bus, run in rows:
        if keep(run):
            v[(who, int(w), int(b))].append(float(bus))
    med = {k: statistics.median(x) for k, x in v.items()}
    print(lead + f"{'workers':>7} {'bytes':>9} " + " ".join(f"{l:>8}" for _, l in cols) + "   " +
          " ".join(f"{label[a] + '/' + label[b]:>15}" for a, b in ratios) + "   (busbw GB/s)")
    for w in (2, 4):
        for b in (262144, 4194304, 67108864):
            f = lambda x: f"{x:8.3f}" if x is not None else "       -"
            def r(a, c):
                x, y = med.get((a, w, b)), med.get((c, w, b))
                return f"{x / y:15.2f}" if x is not None and y else "              -"
            print(lead + f"{w:>7} {b:>9} " + " ".join(f(med.get((k, w, b))) for k, _ in cols) + "   " +
                  " ".join(r(a, c) for a, c in ratios))
table(lambda run: True, "")
if far and any(run not in far for *_, run in rows):
    print("# the same over the runs made with the vCPUs near (no probe before or after above twice the fastest):")
    table(lambda run: run not in far, "# ")
# Then how many runs of each kind were far (tools/perf_report.sh quotes it).
if probes:
    kind = {p[0]: p[1] for p in probes}
    runs = collections.Counter(kind.values())
    nfar = collections.Counter(kind[r] for r in far)
    print(f"# the CPUs (raillat floor-ring, median half round trip {fastest:.3f}-{max(float(p[3]) for p in probes):.3f} us):"
          " runs far apart:" + "".join(f" {k} {nfar[k]} of {n}" for k, n in runs.items()))
PY
if [ -s "$out/retx" ]; then
  awk '{n[$1] += $2} END {printf "# rg-udp retransmits, every size and round:"; for (w = 2; w <= 4; w += 2) if (w in n) printf " %d workers %d", w, n[w]; print ""}' "$out/retx"
fi
