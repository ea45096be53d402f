#!/usr/bin/env bash
# A model trains through railgate as a user's script would: railgated on two
# udp rails in a namespace (as its embedded default has), tools/ddp_train.py
# in another with the railgate package from the build tree, Debian's
# python3 (torch 1.13, CPU).
#   - 2 ranks, fp32 hook: final parameters bit-identical to gloo's run;
#   - 3 ranks: railgate bit-identical to itself across two runs, and within
#     a tolerance of gloo (whose ring sums in another order);
#   - the loss falls; the bf16 and fp16 hooks train too;
#   - a rank SIGKILLed mid-training: the others fail naming it, no hang.
#   ddp_train.sh BUILD_DIR SOURCE_DIR RAILGATED
set -u
build=$1 src=$2 railgated=$3
. "$src/tests/netns/lib.sh"
require_torch
require_netns
log=$(mktemp -d)
d=rgtd$$ w=rgtw$$
gated_pid=
trap 'cleanup_netns "$d $w" "$log"' EXIT

two_rail_netns "$d" "$w"
start_two_rail_udp_gated "$railgated" "$d" "$w" "$log/railgated.log"

train() { # NAME ARGS...: ddp_train.py in the worker namespace; its summary line in $log/NAME.json
  local name=$1
  shift
  timeout 240 ip netns exec "$w" env PYTHONPATH="$build/client/python" GLOO_SOCKET_IFNAME=lo \
    "$python" "$src/tools/ddp_train.py" --quiet --server 198.18.0.1 --lr 0.02 "$@" > "$log/$name.log" 2>&1
  local rc=$?
  sed -n 's/^result //p' "$log/$name.log" > "$log/$name.json"
  grep "^ddp_train:" "$log/$name.log"
  return $rc
}
field() { "$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$log/$1.json" "$2"; }
falls() { "$python" -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if r["loss"] < r["loss0"] else 1)' "$log/$1.json" ||
  fail "$1: the loss did not fall"; }

steps=20
train gloo2 --backend gloo --world 2 --steps $steps || fail "gloo, 2 ranks"
train rg2 --backend railgate --world 2 --steps $steps || fail "railgate, 2 ranks"
[ "$(field rg2 sha256)" = "$(field gloo2 sha256)" ] || fail "2 ranks: railgate's parameters differ from gloo's"
falls rg2
echo "ok: 2 ranks, fp32 hook: bit-identical to gloo ($(field rg2 sha256))"

train gloo3 --backend gloo --world 3 --steps $steps --save "$log/gloo3.pt" || fail "gloo, 3 ranks"
train rg3a --backend railgate --world 3 --steps $steps --save "$log/rg3a.pt" || fail "railgate, 3 ranks"
train rg3b --backend railgate --world 3 --steps $steps || fail "railgate, 3 ranks, again"
[ "$(field rg3a sha256)" = "$(field rg3b sha256)" ] || fail "3 ranks: two railgate runs differ"
falls rg3a
# gloo's ring adds the 3 terms of each element in an order that depends on
# the chunk, railgate in rank order: a sum differs by at most a rounding
# (2^-24 relative) per step. At lr 0.02 (the tests' rate: the loss falls,
# and training does not yet amplify roundings; at lr 0.1 they grow to ~1e-3
# in 20 steps) the parameters stay within 1.5e-7 of the largest one; the
# bound, 1e-5, is ~65x that.
"$python" - "$log/rg3a.pt" "$log/gloo3.pt" <<'PY' || fail "3 ranks: railgate and gloo differ beyond the tolerance"
import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
diff = (a - b).abs().max().item()
scale = b.abs().max().item()
print(f"ok: 3 ranks: railgate bit-identical across runs; max |railgate - gloo| = {diff:.3g} "
      f"({diff / scale:.3g} of the largest parameter, bound 1e-5)")
sys.exit(0 if diff <= 1e-5 * scale else 1)
PY

train rgbf16 --backend railgate --world 2 --steps $steps --hook bf16 --spans || fail "railgate bf16 hook"
falls rgbf16
# --spans: a line per rank and step; each step's buckets carry every
# parameter's gradient (float32) once, each handed over inside its step.
"$python" - "$log/rgbf16.log" "$(field rgbf16 params)" $steps <<'PY' || fail "ddp_train --spans"
import re, sys
lines = [l for l in open(sys.argv[1]) if re.match(r"rank \d+ step \d+: buckets ", l)]
params, steps = int(sys.argv[2]), int(sys.argv[3])
assert len(lines) == 2 * steps, f"{len(lines)} span lines, expected {2 * steps}"
for l in lines:
    spans = re.findall(r"([0-9.]+) MB ([0-9.]+)\+([0-9.]+) ms", l)
    assert spans, l
    total = sum(float(mb) for mb, _, _ in spans)
    assert abs(total * 1e6 - 4 * params) <= 0.05e6 * len(spans), f"buckets sum to {total} MB, not {4 * params / 1e6}: {l}"
    assert all(float(at) >= 0 and float(took) >= 0 for _, at, took in spans), l
print(f"ok: --spans: {len(lines)} lines, each step's buckets {total:.2f} MB")
PY
train rgfp16 --backend railgate --world 2 --steps $steps --hook fp16 || fail "railgate fp16 hook"
falls rgfp16
echo "ok: bf16 and fp16 hooks train (loss falls)"

# Rank 2 SIGKILLs itself before step 5: ranks 0 and 1 must fail naming it.
start=$(date +%s%N)
train die --backend railgate --world 3 --steps $steps --die-rank 2 --die-step 5 && fail "a dead rank went unnoticed"
took=$(( ($(date +%s%N) - start) / 1000000 ))
for r in 0 1; do
  grep "^rank $r: training failed" "$log/die.log" | grep -q "rank 2" || fail "rank $r did not fail naming rank 2"
done
grep "^rank 0: training failed" "$log/die.log"
echo "ok: rank 2 killed: ranks 0 and 1 failed naming it (whole run ${took} ms)"

stop_gated
echo "PASS"
