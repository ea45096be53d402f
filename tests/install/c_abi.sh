#!/usr/bin/env bash
# librailgate as a user gets it: `meson install` into a scratch root, a C
# program built from the installed railgate.h and library with
# `pkg-config --cflags --libs railgate` only, then run against railgated on
# two af_packet rails in a namespace: every dtype, blocking and async, in
# place and out of place, bit-exact; a join with the wrong token refused; a
# rank that dies named in the others' errors.
#   c_abi.sh BUILD_DIR SOURCE_DIR RAILGATED
set -u
build=$1 src=$2 railgated=$3
. "$src/tests/netns/lib.sh"
log=$(mktemp -d) root=$(mktemp -d)
d=rgad$$ w=rgaw$$
gated_pid=
trap 'cleanup_netns "$d $w" "$log $root"' EXIT

meson install -C "$build" --destdir "$root" --no-rebuild --quiet > "$log/install.log" 2>&1 || fail "meson install"
pc=$(find "$root" -name railgate.pc | head -n 1)
[ -n "$pc" ] || fail "no railgate.pc installed"
hdr=$(find "$root" -name railgate.h | head -n 1)
lib=$(find "$root" -name 'librailgate.so.0' | head -n 1)
[ -n "$hdr" ] && [ -n "$lib" ] || fail "railgate.h or librailgate.so.0 not installed"
lic=$(find "$root" -path '*/doc/railgate/LICENSE' | head -n 1)
[ -n "$lic" ] && grep -q "BSD 3-Clause" "$lic" || fail "LICENSE not installed in share/doc/railgate"
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$root
flags=$(pkg-config --cflags --libs railgate) || fail "pkg-config railgate"
echo "pkg-config --cflags --libs railgate: $flags"

# The header is C, self-contained, and names no DPDK, verbs or C++ type.
grep -nE '(struct|union|enum) (rte|ibv|rdma)_|^ *(namespace|class|template)\b|std::|#include <' "$hdr" |
  grep -vE '#include <(stddef|stdint)\.h>' && fail "railgate.h leaks an implementation type"
echo '#include <railgate.h>' | g++ -x c++ -std=c++17 -fsyntax-only -Wall -Wextra -Werror $(pkg-config --cflags railgate) - ||
  fail "railgate.h does not compile as C++"
# Only the C ABI is exported.
other=$(nm -D --defined-only "$lib" | awk '$3 != "" && $3 !~ /^rg_/ && $3 !~ /^RAILGATE_/ {print $3}')
[ -z "$other" ] || fail "librailgate exports more than rg_*: $(echo "$other" | head -n 5)"
# Programs built against 0.1 keep its rg_get_stats (rg_stats without
# struct_size) at RAILGATE_0; new ones get 0.2's by default.
syms=$(objdump -T "$lib" | awk '$NF == "rg_get_stats" {print $(NF-1)}' | sort | tr '\n' ' ')
[ "$syms" = "(RAILGATE_0) RAILGATE_0.2 " ] || fail "rg_get_stats's versions: '$syms', expected (RAILGATE_0) RAILGATE_0.2"

cc -std=c11 -Wall -Wextra -Werror -pedantic "$src/tests/install/rg_abi_check.c" $flags -o "$log/rg_abi_check" ||
  fail "the C program does not build against the installed files"
export LD_LIBRARY_PATH=$(dirname "$lib")
check=$log/rg_abi_check
"$check" usage || fail "argument checks"

require_netns
two_rail_netns "$d" "$w"
start_two_rail_gated "$railgated" "$d" "$w" "$log/railgated.log"

ranks() { abi_ranks "$check" "$w" "$@"; } # MODE WORLD JOB [ARGS...]
ranks run 3 10
ranks run 1 20

abi_token_refused "$check" "$w"

# The installed Python package: its library path is the installed one; from
# the scratch root it is pointed at with $RAILGATE_LIBRARY.
pkg=$(find "$root" -path '*/railgate/__init__.py' | head -n 1)
[ -n "$pkg" ] || fail "the railgate Python package was not installed"
grep -q "LIBRARY = \"/.*/librailgate.so.0\"" "$(dirname "$pkg")/_paths.py" || fail "installed _paths.py does not name the installed library"
python=${RAILGATE_TEST_PYTHON:-/usr/bin/python3}
timeout 60 ip netns exec "$w" env PYTHONPATH="$(dirname "$(dirname "$pkg")")" RAILGATE_LIBRARY="$lib" "$python" - <<'PY' ||
import array, os, railgate
assert railgate.__file__.startswith(os.environ["PYTHONPATH"]), railgate.__file__
tok = int(os.environ["RAILGATE_TOKEN"])
with railgate.Comm("198.18.0.1", job=50, token=tok, rank=0, world=1) as c:
    a = array.array("f", [1.5, -2.0, 3.25])
    c.allreduce(a, len(a))
    c.allreduce_compressed(a, len(a), railgate.BF16, divisor=2.0)
    assert list(a) == [0.75, -1.0, 1.625], list(a)
try:
    railgate.Comm("198.18.0.1", job=51, token=0, rank=0, world=1)
    raise SystemExit("token 0 accepted")
except railgate.RailgateError as e:
    assert e.status == "RG_ERR_USAGE", e
    print(f"ok: the installed Python package ({railgate.version()}) allreduces; errors are RailgateError: {e}")
PY
  fail "the installed Python package"

# A rank that computes 3 s between two allreduces (three times railgated's
# stall time) while the other already contributes to the second: alive (the
# communicator PINGs between operations), so slow, not dead; both finish.
skew() { # RANK
  timeout 60 ip netns exec "$w" env PYTHONPATH="$(dirname "$(dirname "$pkg")")" RAILGATE_LIBRARY="$lib" "$python" - "$1" <<'PY'
import array, os, sys, time, railgate
rank = int(sys.argv[1])
with railgate.Comm("198.18.0.1", job=60, token=int(os.environ["RAILGATE_TOKEN"]), rank=rank, world=2) as c:
    for step in range(2):
        if rank == 1 and step == 1:
            time.sleep(3)
        a = array.array("f", [float(rank + 1)] * 1000)
        c.allreduce(a, len(a))
        assert set(a) == {3.0}, set(a)
print(f"ok: rank {rank} finished")
PY
}
skew 0 > "$log/skew-0.log" 2>&1 &
s0=$!
skew 1 > "$log/skew-1.log" 2>&1 || { cat "$log"/skew-*.log; fail "skew: the slow rank failed"; }
wait "$s0" || { cat "$log"/skew-*.log; fail "skew: the waiting rank failed (was the slow one taken for dead?)"; }
echo "ok: a rank computing 3 s between allreduces (stall 1 s) is waited for, not ended"

# Rank 2 exits without leaving after 3 allreduces: ranks 0 and 1 fail naming it.
start=$(date +%s%N)
ranks die 3 40 3
echo "ok: a dead rank named in $(( ($(date +%s%N) - start) / 1000000 )) ms"

stop_gated
echo "PASS"
