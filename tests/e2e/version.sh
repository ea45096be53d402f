#!/bin/sh
# --version (and -V) on every binary: exit 0 without starting anything (for
# railgated: no EAL; after "--", where the EAL's options go, it is refused
# by name), one first line
# "NAME VERSION (git DESCRIBE)" with the project's version, and the DPDK and
# libibverbs versions it was built with.
#   version.sh VERSION RAILGATED RAILCTL RAILBENCH RAILLAT
version=$1
shift
for bin in "$@"; do
  name=$(basename "$bin")
  for flag in --version -V; do
    out=$(timeout 10 "$bin" $flag 2>&1) || { echo "FAIL: $name $flag exited $?: $out"; exit 1; }
    first=$(echo "$out" | head -n 1)
    case "$first" in
      "$name $version (git "*")") ;;
      *) echo "FAIL: $name $flag: first line '$first'"; exit 1 ;;
    esac
    echo "$out" | grep -q "built with DPDK [0-9][0-9]*\.[0-9]" || { echo "FAIL: $name: no DPDK version: $out"; exit 1; }
    echo "$out" | grep -q "libibverbs [0-9]" || { echo "FAIL: $name: no libibverbs version: $out"; exit 1; }
    echo "$out" | grep -qi "EAL" && { echo "FAIL: $name $flag started the EAL: $out"; exit 1; }
  done
  echo "ok: $first"
done
out=$(timeout 10 "$1" -- --version 2>&1); rc=$?
[ $rc -eq 2 ] || { echo "FAIL: railgated -- --version exited $rc: $out"; exit 1; }
echo "$out" | grep -q "'--version' is railgated's option, not the EAL's: give it before --" ||
  { echo "FAIL: railgated -- --version: $out"; exit 1; }
echo "$out" | grep -q "EAL:" && { echo "FAIL: railgated -- --version started the EAL: $out"; exit 1; }
echo "ok: railgated -- --version: $out"
echo PASS
