#!/usr/bin/env bash
# librailgate's C ABI against a real railgated, from the build tree (the
# install test, tests/install/c_abi.sh, does the same from installed files
# but only in the release tree): in the sanitized tree this runs the library
# and tests/install/rg_abi_check.c under ASan+UBSan against a sanitized
# railgated on two af_packet rails in a namespace. Three ranks run every
# dtype, blocking and async, in place and out of place, bit-exact; a join
# with another token is refused; a rank that dies is named in the others'
# errors.
#   c_abi_live.sh RG_ABI_CHECK RAILGATED
set -u
check=$1 railgated=$2
. "$(dirname "$0")/lib.sh"
require_netns
log=$(mktemp -d)
d=rgld$$ w=rglw$$
gated_pid=
trap 'cleanup_netns "$d $w" "$log"' EXIT
"$check" usage || fail "argument checks"
two_rail_netns "$d" "$w"
start_two_rail_gated "$railgated" "$d" "$w" "$log/railgated.log"
abi_ranks "$check" "$w" run 3 10
abi_token_refused "$check" "$w"
abi_ranks "$check" "$w" die 3 40 3
stop_gated
grep -q "still in use" "$log/railgated.log" && fail "buffers leaked ($(grep "still in use" "$log/railgated.log"))"
echo PASS
