#!/usr/bin/env bash
# The SoftRoCE test bed itself: in the rxe-vm guest, perftest's
# ib_write_lat runs server and client over rxe0 (GID index 1, RoCEv2) and
# completes. The verbs work measures against this same run shape.
#   testbed.sh RXE_VM
set -u
rxe_vm=$1
command -v qemu-system-x86_64 > /dev/null && ls /boot/vmlinuz-* > /dev/null 2>&1 ||
  { echo "SKIP: no QEMU or no guest kernel (tools/setup.sh deps installs them)"; exit 77; }
command -v ib_write_lat > /dev/null || { echo "SKIP: perftest not installed"; exit 77; }
out=$("$rxe_vm" --timeout 240 -- sh -c 'ip link set lo up
ib_write_lat -d rxe0 -x 1 -n 200 > /tmp/server.log 2>&1 &
# wait for the server to listen before starting the client
for i in $(seq 50); do ss -ltn | grep -q ":18515 " && break; sleep 0.1; done
timeout 60 ib_write_lat -d rxe0 -x 1 -n 200 127.0.0.1; rc=$?; wait; exit $rc')
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: ib_write_lat in the guest exit $rc"; exit 1; }
echo "$out" | grep -qE "^ 2 +200 " || { echo "FAIL: no ib_write_lat result row"; exit 1; }
echo "PASS"
