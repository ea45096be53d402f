# Sourced first by the rxe suite's scripts. On the host (no --guest), it
# skips where no guest can boot, reruns the calling script inside the
# rxe-vm guest with --guest BUILD, reports, and exits with its status; in
# the guest it returns and the script goes on.
#   . host.sh "$0" "$@"     (args on the host: RXE_VM BUILD_DIR)
here=$(cd "$(dirname "$1")" && pwd)
if [ "${2:-}" != --guest ]; then
  command -v qemu-system-x86_64 > /dev/null && ls /boot/vmlinuz-* > /dev/null 2>&1 ||
    { echo "SKIP: no QEMU or no guest kernel (tools/setup.sh deps installs them)"; exit 77; }
  # The guest starts from an environment of its own: a sanitized tree's
  # options (meson test --setup sanitize) go in with the command.
  fwd=()
  for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS RAILGATE_SANITIZED RAILGATE_TSAN; do
    [ -n "${!v:-}" ] && fwd+=("$v=${!v}")
  done
  "$2" --timeout 500 -- env "${fwd[@]}" bash "$here/$(basename "$1")" --guest "$3"
  rc=$?
  [ $rc -eq 0 ] && echo PASS || echo "FAIL: guest exit $rc"
  exit $rc
fi
