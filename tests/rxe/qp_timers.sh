#!/usr/bin/env bash
# The verbs QPs' RC timers on a real SoftRoCE stack, in the rxe-vm guest:
# qp_timers (tests/rxe/qp_timers.cpp) measures what each timer does on an
# RC connection of railgate's own queue pairs (a receiver-not-ready NAK's
# wait by min_rnr_timer, a dead peer's failure after retry_count + 1 ACK
# timeouts); then railgated with the timers set on one verbs rail
# ([[rail]] ack_timeout, retry_count, min_rnr_timer) and its other rail's
# ACK timeout set from the stall time, and raillat with its own
# (RAILGATE_IB_TIMEOUT, RAILGATE_IB_RETRY_CNT) and then from its peer
# timeout: each QP took what its side set, as railctl status and raillat
# report (ibv_query_qp); railgated warns of the rail whose ACK timeout is
# not under the stall time; a bad value in the worker's environment is
# refused by name. railctl rail list, show and set gid-index on those
# verbs rails; a worker's RAILGATE_IB_GID_INDEX checked per rail.
#   qp_timers.sh RXE_VM BUILD_DIR
set -u
. "$(dirname "$0")/host.sh" "$0" "$@"
BUILD=$2 WORK=$(mktemp -d)
. "$here/lib.sh"
rxe_counters_on_failure
"$BUILD/tests/rxe/qp_timers" 198.18.0.1 47300 || { echo "FAIL: qp_timers"; exit 1; }

# v0 keeps the defaults (the longest ACK timeout of which retry_count + 1,
# 8, fit in the stall time, 600 ms here: 14, 67 ms; min rnr timer 12); v1
# (the file's last table) gets its own, with an ACK timeout (1.07 s) above
# the stall time.
{ cat "$here/verbs.toml"; printf 'ack_timeout = 18\nretry_count = 5\nmin_rnr_timer = 14\n'
  printf '\n[jobs]\nstall_ms = 600\n'; } > "$WORK/timers.toml"
start_railgated "$BUILD" "$WORK/timers.toml" "$WORK/ctl.sock" "$WORK/railgated.log"
grep -q "railgated: verbs rail v0 .*; ack timeout 14 (67.1 ms), retry 7, rnr retry 7, min rnr timer 12 (0.64 ms)$" \
  "$WORK/railgated.log" || { echo "FAIL: railgated's placement line lacks v0's timers"; cat "$WORK/railgated.log"; exit 1; }
grep -q "railgated: verbs rail v1 .*; ack timeout 18 (1.07 s), retry 5, rnr retry 7, min rnr timer 14 (1.28 ms)$" \
  "$WORK/railgated.log" || { echo "FAIL: railgated's placement line lacks v1's timers"; cat "$WORK/railgated.log"; exit 1; }
# raillat waits 20 s for a JOIN_ACK here, not its default 5: under a loaded
# host the guest has held one longer (a clean-clone CI run: "no JOIN_ACK
# from railgated on rail 0" after 5 s, rxe0 counting ACKs late and sends
# resent, the rxe start-up flake rxe-verbs-faults' workers wait 20 s for).
RAILGATE_IB_TIMEOUT=16 RAILGATE_IB_RETRY_CNT=3 timeout 60 "$BUILD/tools/raillat" --transport verbs --server 198.18.0.1 --join-timeout 20000 \
  --job 5 -s 4 -n 200 -w 10 --bw-size 0 > "$WORK/lat.log" 2>&1 || { echo "FAIL: raillat"; cat "$WORK/lat.log"; exit 1; }
grep "QP timers" "$WORK/lat.log"
grep -q "^raillat: verbs QP timers: ack timeout 16 (268 ms), retry 3, rnr retry 7, min rnr timer 12 (0.64 ms)$" "$WORK/lat.log" ||
  { echo "FAIL: raillat's QP did not take RAILGATE_IB_TIMEOUT and RAILGATE_IB_RETRY_CNT"; cat "$WORK/lat.log"; exit 1; }
# Again without the environment: the worker's defaults (the longest ACK
# timeout of which 8 fit in its peer timeout, 1 s: 14, 67 ms; min rnr
# timer 12), and a
# second QP on each of railgated's rails.
timeout 60 "$BUILD/tools/raillat" --transport verbs --server 198.18.0.1 --join-timeout 20000 --job 7 -s 4 -n 200 -w 10 --bw-size 0 \
  > "$WORK/lat2.log" 2>&1 || { echo "FAIL: raillat"; cat "$WORK/lat2.log"; exit 1; }
grep "QP timers" "$WORK/lat2.log"
grep -q "^raillat: verbs QP timers: ack timeout 14 (67.1 ms), retry 7, rnr retry 7, min rnr timer 12 (0.64 ms)$" \
  "$WORK/lat2.log" || { echo "FAIL: raillat's QP timers without the environment"; cat "$WORK/lat2.log"; exit 1; }
"$BUILD/railctl" --socket "$WORK/ctl.sock" status | tee "$WORK/status.txt"
grep -q "^v1       QP timers: ack timeout 18 (1.07 s), retry 5, rnr retry 7, min rnr timer 14 (1.28 ms)$" "$WORK/status.txt" ||
  { echo "FAIL: railctl status lacks v1's timers"; exit 1; }
"$BUILD/railctl" --socket "$WORK/ctl.sock" --json status > "$WORK/status.json"
python3 - "$WORK/status.json" <<'PY' || { echo "FAIL: railctl --json status: the QPs' timers"; exit 1; }
import json, sys
rails = {r["name"]: r["qp_timers"] for r in json.load(open(sys.argv[1]))["verbs_rails"]}
v0, v1 = rails["v0"], rails["v1"]
assert v1["seen"] == {"ack_timeout": 18, "ack_timeout_ms": 4.096 * 2**18 / 1e3, "retry_count": 5, "rnr_retry": 7,
                      "min_rnr_timer": 14, "min_rnr_timer_ms": 1.28}, v1
assert v1["configured"] == v1["seen"], v1
assert v0["seen"] == v0["configured"] and (v0["seen"]["ack_timeout"], v0["seen"]["retry_count"], v0["seen"]["rnr_retry"],
                                           v0["seen"]["min_rnr_timer"]) == (14, 7, 7, 12), v0
print("v0:", v0["seen_text"], "| v1:", v1["seen_text"])
PY
# railctl rail list and show take verbs rails (their QPs' timers, the last
# QP's source GID, their counters); rail set v1 gid-index: refused for an
# empty entry (rxe0's table holds 1024: 256 and above are refused before
# it is asked), another address's GID and the link-local one (a RoCE
# QP's source GID is the address its packets leave from), an MTU refused;
# the rail's own GID by index, which the next connection's QP takes as
# given where the ones before found it (automatic), then auto again.
ctl=("$BUILD/railctl" --socket "$WORK/ctl.sock")
"${ctl[@]}" rail list | tee "$WORK/list.txt"
grep -qE "^v1 +rxe0 +1 +198.18.1.1 +auto " "$WORK/list.txt" || { echo "FAIL: rail list lacks verbs rail v1"; exit 1; }
"${ctl[@]}" --json gid list rxe0 > "$WORK/gids.json"
gids=$(python3 -c '
import json, sys
g = {x["ipv4"]: x["index"] for x in json.load(open(sys.argv[1]))["gids"]}
print(g["198.18.1.1"], g["198.18.0.1"], g[""])' "$WORK/gids.json") || { echo "FAIL: rxe0's GIDs"; cat "$WORK/gids.json"; exit 1; }
read -r own other ll <<< "$gids"
"${ctl[@]}" rail show v1 | tee "$WORK/show.txt"
grep -qE "^qp_timers +ack timeout 18 \(1.07 s\), retry 5, rnr retry 7, min rnr timer 14 \(1.28 ms\)$" "$WORK/show.txt" &&
  grep -qE "^gid_index +auto, last QP's $own \(::ffff:198.18.1.1, RoCE v2, automatic\)$" "$WORK/show.txt" &&
  grep -qE "^  connects 2, " "$WORK/show.txt" || { echo "FAIL: rail show v1"; exit 1; }
set_fails() { # WHAT EXPECTED ARGS...
  local what=$1 want=$2 out
  shift 2
  if out=$("${ctl[@]}" rail set v1 "$@" 2>&1); then echo "FAIL: rail set v1 $* ($what) was taken: $out"; exit 1; fi
  grep -qF -- "$want" <<< "$out" || { echo "FAIL: rail set v1 $* ($what): $out"; exit 1; }
  echo "refused, $what: $out"
}
set_fails "an empty entry" "GID index 200 of rxe0 port 1 is empty (railctl gid list)" gid-index 200
set_fails "out of range" "GID index 300 out of range 0..255" gid-index 300
gid_why="not a GID of 198.18.1.1, the address the connections are made at: on RoCE a QP's source GID is the address its packets leave from, and the peer's QP drops what comes from another (198.18.1.1's GIDs: $own (RoCE v2); railctl gid list)"
set_fails "another address's GID" "GID index $other of rxe0 port 1 is ::ffff:198.18.0.1 (RoCE v2), $gid_why" gid-index "$other"
set_fails "the link-local GID" "GID index $ll of rxe0 port 1 is fe80::" gid-index "$ll"
set_fails "an MTU" "is a verbs rail: its path MTU is the config's path_mtu" mtu 1024
"${ctl[@]}" rail set v1 gid-index "$own" | tee "$WORK/set.txt"
grep -qF "rail v1: source GID index $own (::ffff:198.18.1.1, RoCE v2) for new connections, automatic (RoCEv2 IPv4) before" \
  "$WORK/set.txt" || { echo "FAIL: rail set v1 gid-index $own"; exit 1; }
# railctl nccl-env: the verbs rails' HCA (their one port, once), no GID
# index where v0 takes the automatic one and v1 index $own, no TC where
# v0's class is 0 and v1's 106.
"${ctl[@]}" nccl-env | tee "$WORK/nccl.txt"
grep -qx "export NCCL_IB_HCA==rxe0:1" "$WORK/nccl.txt" &&
  grep -qx "# verbs rails use different GID indexes (or some automatic): NCCL_IB_GID_INDEX left unset" "$WORK/nccl.txt" &&
  grep -qx "# rails use different traffic classes: NCCL_IB_TC left unset" "$WORK/nccl.txt" &&
  [ "$(grep -c '^export' "$WORK/nccl.txt")" = 1 ] || { echo "FAIL: railctl nccl-env"; exit 1; }
timeout 60 "$BUILD/tools/raillat" --transport verbs --server 198.18.0.1 --join-timeout 20000 --job 8 -s 4 -n 200 -w 10 --bw-size 0 \
  > "$WORK/lat3.log" 2>&1 || { echo "FAIL: raillat after rail set gid-index"; cat "$WORK/lat3.log"; exit 1; }
"${ctl[@]}" --json rail show v1 > "$WORK/show.json"
python3 - "$WORK/show.json" "$own" <<'PY' || { echo "FAIL: rail show v1 after rail set gid-index"; cat "$WORK/show.json"; exit 1; }
import json, sys
v, own = json.load(open(sys.argv[1])), int(sys.argv[2])
assert v["transport"] == "verbs" and v["gid_index"] == own and v["gid_index_configured"] == "auto", v
assert v["gid_seen"] == {"index": own, "gid": "::ffff:198.18.1.1, RoCE v2", "chosen": "given"}, v
assert v["counters"]["connects"] == 3 and v["counters"]["qp_errors"] == 0, v["counters"]
PY
"${ctl[@]}" rail set v1 gid-index auto | grep -qF "rail v1: source GID automatic (RoCEv2 IPv4) for new connections, index $own before" ||
  { echo "FAIL: rail set v1 gid-index auto"; exit 1; }
# A bad value in a worker's environment: refused, named, before any QP.
RAILGATE_IB_TIMEOUT=40 timeout 60 "$BUILD/tools/raillat" --transport verbs --server 198.18.0.1 --join-timeout 20000 --job 6 -s 4 -n 10 \
  -w 0 --bw-size 0 > "$WORK/bad.log" 2>&1 && { echo "FAIL: raillat ran with RAILGATE_IB_TIMEOUT=40"; exit 1; }
grep -q "RAILGATE_IB_TIMEOUT='40': must be an integer 1..31" "$WORK/bad.log" ||
  { echo "FAIL: RAILGATE_IB_TIMEOUT=40 not named"; cat "$WORK/bad.log"; exit 1; }
# A worker's GID index from its environment (RAILGATE_IB_GID_INDEX, as
# NCCL_IB_GID_INDEX): checked against each rail's local address before its
# connect. 198.18.0.1's GID serves rail v0 (raillat's QP there takes it)
# and is refused for v1, named, instead of a connection whose packets
# railgated's QP drops until its retries run out; a bad value is named.
RAILGATE_IB_GID_INDEX=$other timeout 60 "$BUILD/tools/raillat" --transport verbs --server 198.18.0.1 --join-timeout 20000 --job 9 -s 4 -n 10 \
  -w 0 --bw-size 0 > "$WORK/gid.log" 2>&1 && { echo "FAIL: raillat ran with v1's connection from another address's GID"; exit 1; }
grep -E "source GID|GID index $other" "$WORK/gid.log"
grep -q "^raillat: verbs source GID index $other$" "$WORK/gid.log" &&
  grep -qF "verbs connect to 198.18.1.1:47000: GID index $other of rxe0 port 1 is ::ffff:198.18.0.1 (RoCE v2), $gid_why (RAILGATE_IB_GID_INDEX, --gid-index, gid_index)" \
    "$WORK/gid.log" || { echo "FAIL: RAILGATE_IB_GID_INDEX=$other: rail v0's QP, rail v1's refusal"; cat "$WORK/gid.log"; exit 1; }
RAILGATE_IB_GID_INDEX=x timeout 60 "$BUILD/tools/raillat" --transport verbs --server 198.18.0.1 --join-timeout 20000 --job 9 -s 4 -n 10 \
  -w 0 --bw-size 0 > "$WORK/gid2.log" 2>&1 && { echo "FAIL: raillat ran with RAILGATE_IB_GID_INDEX=x"; exit 1; }
grep -q "RAILGATE_IB_GID_INDEX='x': must be an integer 0..255" "$WORK/gid2.log" ||
  { echo "FAIL: RAILGATE_IB_GID_INDEX=x not named"; cat "$WORK/gid2.log"; exit 1; }
kill -TERM $RG_PID; wait $RG_PID || { echo "FAIL: railgated exit $?"; tail "$WORK/railgated.log"; exit 1; }
# v1's ACK timeout (1.07 s) is not under the jobs' stall time (600 ms):
# said once, for v1 alone, though two QPs connected there.
grep "ACK timeout is not under" "$WORK/railgated.log"
[ "$(grep -c "verbs rail v1: its QPs took ack timeout 18 (1.07 s), .*; that ACK timeout is not under the jobs' stall time (600 ms)" \
  "$WORK/railgated.log")" = 1 ] && ! grep -q "verbs rail v0: .*ACK timeout is not under" "$WORK/railgated.log" ||
  { echo "FAIL: the warning of a QP ACK timeout above the stall time, once for v1 and not for v0"; cat "$WORK/railgated.log"; exit 1; }
echo "ok: the RC timers: measured on railgate's QPs, taken by railgated's rails and raillat's QPs, read back"
