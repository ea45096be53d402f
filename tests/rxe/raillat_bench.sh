#!/usr/bin/env bash
# raillat over all three transports and the verbs benchmark's plumbing, in
# the rxe-vm guest (2 vCPUs, for the EAL): tools/bench_verbs.sh with few
# iterations and rounds must print ib_write_lat's row, raillat's verbs row, the compare
# table with figures for udp, dpdk and verbs, railbench over verbs, and the
# summary ratios, and the verbs latency must stay within the guard's bound.
#   raillat_bench.sh SOURCE_ROOT BUILD_DIR
set -u
src=$1 build=$2
command -v qemu-system-x86_64 > /dev/null && ls /boot/vmlinuz-* > /dev/null 2>&1 ||
  { echo "SKIP: no QEMU or no guest kernel (tools/setup.sh deps installs them)"; exit 77; }
command -v ib_write_lat > /dev/null || { echo "SKIP: perftest not installed"; exit 77; }
# 2 rounds, not the tool's 3: each took 7-8 s of CI's 30 minutes, and the
# guard's bound (below) is 2-3x the ratios measured here.
out=$("$src/tools/bench_verbs.sh" "$build" 100 2)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: bench_verbs.sh exit $rc"; exit 1; }
for t in udp dpdk verbs; do
  echo "$out" | grep -qE "^$t +100 +[0-9.]+ +[0-9.]+ .*x$" || { echo "FAIL: no $t row in the compare table"; exit 1; }
done
echo "$out" | grep -qE "^verbs latency: raillat t_typical [0-9.]+ us, ib_write_lat t_typical [0-9.]+ us, ratio [0-9.]+$" ||
  { echo "FAIL: no latency summary"; exit 1; }
# The latency guard: raillat verbs within 3x the ratio to ib_write_lat (same
# guest, same run, medians of alternated rounds) that doc/performance.md
# records: 1.23x on 2026-11-26, since the worker's timers and the verbs
# plane's lifecycle read the coarse clock (this guest's precise clock reads
# the HPET: 0.7 us). The regression of commit 8523a2a (9-13x) could not
# pass it.
recorded=1.23
ratio=$(echo "$out" | sed -nE 's/^verbs latency: .*, ratio ([0-9.]+)$/\1/p')
bound=$(awk -v x="$recorded" 'BEGIN {print 3 * x}')
awk -v r="$ratio" -v b="$bound" 'BEGIN {exit !(r > 0 && r <= b)}' ||
  { echo "FAIL: raillat verbs is ${ratio}x ib_write_lat, past the bound ${bound}x"; exit 1; }
echo "latency guard: raillat verbs ${ratio}x ib_write_lat (bound ${bound}x)"
echo "$out" | grep -qE "^verbs bandwidth: railbench 4 MiB algbw [0-9.]+ GB/s, ib_write_bw [0-9.]+ MB/s, ratio [0-9.]+$" ||
  { echo "FAIL: no bandwidth summary"; exit 1; }
echo PASS
