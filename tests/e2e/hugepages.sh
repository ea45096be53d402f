#!/bin/sh
# The embedded EAL's memory (railbench --embedded, raillat, the benchmarks):
# hugepages where 1 GiB of them is free, else 4 KiB pages; $RAILGATE_HUGEPAGES
# decides instead (0 never, 1 always). The test reserves 2 MiB hugepages
# for itself and gives them back: on them and on 4 KiB pages the allreduce
# is bit-exact and railbench's header names the memory it ran on; with none
# free, RAILGATE_HUGEPAGES=1 is refused, saying so; a bad value is refused.
# On hugepages a NUMA node has EAL memory only where they are: the rail
# loop's placement case (a rail on node 1, which has none) must fall back
# to any node for its pools and its forward ring, and a refused daemon must
# free what it made (before, the ring's failure left the pools behind, and
# every later daemon in the process failed "mempool rg_pool_0: File exists").
#   hugepages.sh RAILBENCH TEST_RAIL_LOOP
rb=$1 rail_loop=$2
tmp=$(mktemp -d)
nr=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
[ -w "$nr" ] || { echo "SKIP: cannot reserve hugepages here (not root, or no 2 MiB hugepages)"; exit 77; }
before=$(cat "$nr")
trap 'echo "$before" > "$nr"; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export RAILGATE_TOKEN=7
run() { # LABEL [ENV...]: a short bit-exact allreduce; its header line into $tmp/LABEL
  label=$1
  shift
  env "$@" "$rb" --embedded --workers 2 --count 262144 -n 3 -w 1 > "$tmp/$label" 2>&1 || fail "$label: $(cat "$tmp/$label")"
  awk '$4 == "sum" && $NF != 0 {bad = 1} $4 == "sum" {rows++} END {exit bad || rows != 1}' "$tmp/$label" ||
    fail "$label: not bit-exact: $(cat "$tmp/$label")"
  grep -m 1 '^# railbench: embedded' "$tmp/$label" | sed 's/.*, memory //'
}

echo $((before + 520)) > "$nr"
free=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages)
[ "$free" -ge 512 ] || fail "reserved $((before + 520)) hugepages of 2 MiB, $free free: the kernel found too little contiguous memory"
m=$(run auto)
[ "$m" = hugepages ] || fail "1 GiB of hugepages free, unset RAILGATE_HUGEPAGES: ran on '$m'"
echo "ok: $free hugepages of 2 MiB free: railbench --embedded ran on them, bit-exact"
m=$(run off RAILGATE_HUGEPAGES=0)
[ "$m" = "4 KiB pages (no hugepages)" ] || fail "RAILGATE_HUGEPAGES=0: ran on '$m'"
echo "ok: RAILGATE_HUGEPAGES=0: on 4 KiB pages beside them, bit-exact"
RAILGATE_HUGEPAGES=1 "$rail_loop" --run_test=daemon_placement_follows_the_nic_node > "$tmp/placement" 2>&1 ||
  fail "the placement case on hugepages: $(tail -n 20 "$tmp/placement")"
grep -q "rail far: forward ring: .* on NUMA node 1; allocating on any node" "$tmp/placement" ||
  fail "the placement case on hugepages: no fallback of the forward ring: $(tail -n 20 "$tmp/placement")"
echo "ok: on hugepages, a rail on a node without EAL memory: its pools and forward ring on any node, and a refused daemon freed them"

echo 0 > "$nr"
if [ "$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages)" -eq 0 ] &&
   ! grep -qsv '^0$' /sys/kernel/mm/hugepages/hugepages-*/free_hugepages; then
  m=$(run none)
  [ "$m" = "4 KiB pages (no hugepages)" ] || fail "no hugepages: ran on '$m'"
  RAILGATE_HUGEPAGES=1 "$rb" --embedded -n 1 > "$tmp/forced" 2>&1 && fail "RAILGATE_HUGEPAGES=1 without hugepages ran"
  grep -q "RAILGATE_HUGEPAGES=1: this host has no free hugepages" "$tmp/forced" || fail "RAILGATE_HUGEPAGES=1 without hugepages: $(cat "$tmp/forced")"
  echo "ok: no hugepages: 4 KiB pages, and RAILGATE_HUGEPAGES=1 refused, saying why"
else
  echo "note: hugepages of another size are free here: the no-hugepages case is not run"
fi
RAILGATE_HUGEPAGES=yes "$rb" --embedded -n 1 > "$tmp/bad" 2>&1 && fail "RAILGATE_HUGEPAGES=yes ran"
grep -q "RAILGATE_HUGEPAGES='yes': give 0" "$tmp/bad" || fail "RAILGATE_HUGEPAGES=yes: $(cat "$tmp/bad")"
echo "ok: RAILGATE_HUGEPAGES=yes refused"
