#!/usr/bin/env bash
# railgate.torch's hooks on every bucket type they take (float32 through
# each hook; bfloat16 and float16 summed as such; CUDA buckets where torch
# sees a device), 2 and 3 ranks, and 4 in two process groups with a State
# each, each result bit-exact against the average
# computed from every rank's input (tests/install/torch_hooks.py). railgated
# on two udp rails in a namespace, the ranks in another, Debian's python3.
#   torch_hooks.sh BUILD_DIR SOURCE_DIR RAILGATED
set -u
build=$1 src=$2 railgated=$3
. "$src/tests/netns/lib.sh"
require_torch
require_netns
log=$(mktemp -d)
d=rgkd$$ w=rgkw$$
gated_pid=
trap 'cleanup_netns "$d $w" "$log"' EXIT

two_rail_netns "$d" "$w"
start_two_rail_udp_gated "$railgated" "$d" "$w" "$log/railgated.log"
for world in 2 3; do
  timeout 240 ip netns exec "$w" env PYTHONPATH="$build/client/python" GLOO_SOCKET_IFNAME=lo \
    "$python" "$src/tests/install/torch_hooks.py" --server 198.18.0.1 --world $world > "$log/hooks$world.log" 2>&1 ||
    fail "$world ranks"
  cat "$log/hooks$world.log"
done
# Two process groups of 2, a State each, at once: each its own job.
timeout 240 ip netns exec "$w" env PYTHONPATH="$build/client/python" GLOO_SOCKET_IFNAME=lo \
  "$python" "$src/tests/install/torch_hooks.py" --server 198.18.0.1 --world 4 --groups 2 > "$log/groups.log" 2>&1 ||
  fail "2 process groups: $(tail -n 5 "$log/groups.log")"
cat "$log/groups.log"
stop_gated
echo "PASS"
