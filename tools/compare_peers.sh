#!/usr/bin/env bash
# railgate end to end against torch.distributed gloo, measured alternately in
# one run (the machine is shared: only ratios from the same run count).
#   tools/compare_peers.sh [BUILD_DIR] [ROUNDS]
# For 2 and 4 workers, each round runs railbench --embedded (railgated and
# the workers in one process over in-process rings, MTU 1500 and 9000) and
# tools/gloo_allreduce.py (gloo over loopback, one process per rank), fp32 at
# 256 KiB, 4 MiB and 64 MiB. It prints each one's median busbw (GB/s,
# nccl-tests' definition, as both print it) over the rounds and railgate's
# ratio to gloo. Missing (issue 17): the kernel-UDP workers through railgated
# in a namespace, and OpenMPI.
set -euo pipefail
build=${1:-build}
rounds=${2:-2}
iters=${ITERS:-10}
railbench=$build/tools/railbench
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$railbench" ] || { echo "compare_peers: no $railbench (build first)" >&2; exit 2; }
/usr/bin/python3 -c 'import torch' 2> /dev/null || { echo "compare_peers: /usr/bin/python3 has no torch (apt-get install python3-torch)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
sizes="262144 4194304 67108864"
counts=$(for b in $sizes; do echo -n "$((b / 4)),"; done)
counts=${counts%,}
echo "# compare_peers: $rounds round(s), $iters iterations per size; $(date -u +%F) $(git -C "$here/.." rev-parse --short HEAD 2> /dev/null || echo '?')"
for w in 2 4; do
  for r in $(seq "$rounds"); do
    for mtu in 1500 9000; do
      "$railbench" --embedded --workers "$w" --count "$counts" -n "$iters" -w 2 --mtu "$mtu" 2> /dev/null |
        awk -v w="$w" -v m="$mtu" '$1 ~ /^[0-9]+$/ && NF >= 8 && $8 == 0 {print "railgate-" m, w, $1, $7}' >> "$out/rows"
    done
    timeout 600 /usr/bin/python3 "$here/gloo_allreduce.py" --world "$w" --bytes "${sizes// /,}" --iters "$iters" |
      awk '{print "gloo", $2, $3, $6}' >> "$out/rows"
  done
done
/usr/bin/python3 - "$out/rows" <<'PY'
import collections, statistics, sys
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    who, w, b, bus = line.split()
    v[(who, int(w), int(b))].append(float(bus))
med = {k: statistics.median(x) for k, x in v.items()}
print(f"{'workers':>7} {'bytes':>9} {'gloo':>8} {'rg-1500':>8} {'rg-9000':>8} {'x gloo 1500':>11} {'x gloo 9000':>11}   (busbw GB/s)")
for w in (2, 4):
    for b in (262144, 4194304, 67108864):
        g = med.get(("gloo", w, b))
        a, j = med.get(("railgate-1500", w, b)), med.get(("railgate-9000", w, b))
        f = lambda x: f"{x:8.3f}" if x is not None else "       -"
        r = lambda x: f"{x / g:11.2f}" if x is not None and g else "          -"
        print(f"{w:>7} {b:>9} {f(g)} {f(a)} {f(j)} {r(a)} {r(j)}")
PY
