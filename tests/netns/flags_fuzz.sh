#!/usr/bin/env bash
# railgated's, railbench's and raillat's own flags with bad values
# (tests/netns/flags_fuzz.py: a seeded stream, RAILGATE_FUZZ_SEED, default
# 1; RAILGATE_FUZZ_RUNS per binary, default 150, 60 under the sanitizers;
# and railgated --check with every option and every value): none may
# crash, hang or end with a status the binary does not document, and a
# railgated that starts stops cleanly on SIGTERM. In a namespace with only
# lo, so that no address or device a value names is the host's.
#   flags_fuzz.sh RAILGATED RAILBENCH RAILLAT
set -u
railgated=$1 railbench=$2 raillat=$3
here=$(dirname "$0")
. "$here/lib.sh"
require_netns
d=rgff$$ log=$(mktemp -d)
trap 'cleanup_netns "$d" "$log"' EXIT
ip netns add "$d" || fail "netns"
ip -n "$d" link set lo up
n=${RAILGATE_FUZZ_RUNS:-150}
[ "${RAILGATE_SANITIZED:-0}" = 1 ] && n=${RAILGATE_FUZZ_RUNS:-60}
mkdir "$log/work"
# shellcheck disable=SC2086 # the EAL flags are words
ip netns exec "$d" python3 "$here/flags_fuzz.py" "$railgated" "$railbench" "$raillat" "$n" \
  "${RAILGATE_FUZZ_SEED:-1}" "$log/work" $test_eal_flags || fail "the binaries' bad flags"
echo PASS
