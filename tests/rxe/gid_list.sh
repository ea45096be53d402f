#!/usr/bin/env bash
# railctl gid list against a real SoftRoCE device: tools/rxe-vm boots
# Debian's kernel in QEMU with rxe0 on dummy0 (198.18.0.1), and railctl
# reads the kernel's own /sys/class/infiniband there.
#   gid_list.sh RXE_VM RAILCTL
set -u
rxe_vm=$1 railctl=$2
command -v qemu-system-x86_64 > /dev/null && ls /boot/vmlinuz-* > /dev/null 2>&1 ||
  { echo "SKIP: no QEMU or no guest kernel (tools/setup.sh deps installs them)"; exit 77; }
out=$("$rxe_vm" --timeout 240 -- sh -c "'$railctl' --socket /nonexistent gid list; echo ---; \
  '$railctl' --socket /nonexistent gid list rxe0; echo ---; '$railctl' --socket /nonexistent --json gid list dummy0")
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: rxe-vm / railctl exit $rc"; exit 1; }
# show_gids layout: DEV PORT INDEX GID IPv4 VER DEV
echo "$out" | grep -qE "^rxe0 +1 +1 +0000:0000:0000:0000:0000:ffff:c612:0001 198.18.0.1 +v2 +dummy0$" ||
  { echo "FAIL: no RoCEv2 IPv4 GID row for rxe0"; exit 1; }
echo "$out" | grep -qE "^rxe0 +1 +0 +fe80:" || { echo "FAIL: no link-local GID row"; exit 1; }
echo "$out" | grep -q "railgated not reached" || { echo "FAIL: no note about the missing daemon"; exit 1; }
json=$(echo "$out" | awk 'f; /^---$/ {n++; if (n == 2) f = 1}')
echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
g = [x for x in d["gids"] if x["index"] == 1]
assert g and g[0]["ipv4"] == "198.18.0.1" and g[0]["version"] == "v2" and g[0]["device"] == "rxe0", d' ||
  { echo "FAIL: gid list --json"; exit 1; }
echo "PASS"
