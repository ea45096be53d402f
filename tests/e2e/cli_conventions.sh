#!/bin/sh
# The binaries' shared conventions: a bad MTU is worded alike whether it
# comes from railgated's flags, its config file, railbench or railctl;
# railctl -j answers errors (usage ones too) as JSON; `gid list` with no
# GIDs and no daemon fails instead of printing empty lists; output that
# cannot be written (a full disk: /dev/full) is an error, not exit 0.
#   cli_conventions.sh RAILGATED RAILBENCH RAILCTL SOURCE_DIR RAILLAT
gated=$1 bench=$2 ctl=$3 src=$4 lat=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
range="MTU 70000 out of range 576..9216"
nan="MTU 'abc' is not a number"
expect() { # WANT RC CMD... : CMD exits RC and says WANT on stderr
  want=$1 rc=$2
  shift 2
  "$@" > "$tmp/out" 2> "$tmp/err"
  got=$?
  [ "$got" = "$rc" ] || fail "$* exited $got, not $rc: $(cat "$tmp/err")"
  grep -qF -- "$want" "$tmp/err" || fail "$* did not say \"$want\": $(cat "$tmp/err")"
  echo "ok: $(basename "$1") ${2:-}...: $(grep -F -- "$want" "$tmp/err" | head -n 1)"
}
expect "$range" 2 "$gated" --rail net_null0 --ip 1.2.3.4 --mtu 70000
expect "$nan" 2 "$gated" --rail net_null0 --ip 1.2.3.4 --mtu abc
expect "$range" 2 "$bench" --embedded --mtu 70000
expect "$nan" 2 "$bench" --embedded --mtu abc
expect "$nan" 2 "$ctl" --socket "$tmp/none" rail set r0 mtu abc
sed 's/^mtu = 9000$/mtu = 70000/' "$src/config/embedded.toml" > "$tmp/bad.toml"
grep -q "mtu = 70000" "$tmp/bad.toml" || fail "the test's config edit did not apply"
"$gated" --config "$tmp/bad.toml" --check > "$tmp/out" 2>&1 && fail "--check passed an MTU of 70000"
grep -qF "$range" "$tmp/out" || fail "--check's MTU error: $(cat "$tmp/out")"
echo "ok: railgated --check: $(grep -F "$range" "$tmp/out" | head -n 1)"

# railctl -j: a usage error is JSON on stdout (exit 2), so is a refusal (exit 1).
"$ctl" -j rail frobnicate > "$tmp/out" 2> /dev/null
[ $? = 2 ] || fail "railctl -j with bad usage did not exit 2"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j["ok"] is False and j["usage"] and j["error"] else 1)' \
  "$tmp/out" || fail "railctl -j usage error is not JSON: $(cat "$tmp/out")"
RAILGATE_SYSFS_IB=$tmp/no-ib "$ctl" --socket "$tmp/none" --json gid list > "$tmp/out" 2> /dev/null
[ $? = 1 ] || fail "gid list with no GIDs and no daemon did not fail"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j["ok"] is False and "not reached" in j["error"] else 1)' \
  "$tmp/out" || fail "gid list's failure is not JSON: $(cat "$tmp/out")"
# No daemon at all: exit 3, apart from a refusal (1) and bad usage (2).
"$ctl" --socket "$tmp/none" -j status > "$tmp/out" 2> /dev/null
[ $? = 3 ] || fail "railctl with no daemon did not exit 3"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j["ok"] is False and j["unreachable"] is True else 1)' \
  "$tmp/out" || fail "no daemon: not JSON with unreachable: $(cat "$tmp/out")"
echo "ok: railctl -j: usage errors and refusals as JSON; gid list with nothing to list fails; no daemon exits 3"

# Numbers are read alike and strictly: decimal (a leading 0 is not octal) or
# 0x hex; no sign ("-1" was 2^64 - 1 to railbench's --token), no blanks, no
# overflow once a K/M/G suffix multiplies.
expect "--port -1 out of range 1..65535" 2 "$gated" --check --rail net_null0 --ip 1.2.3.4 --port -1
expect "--pool  64 out of range 1..65535" 2 "$gated" --check --rail net_null0 --ip 1.2.3.4 --pool " 64"
expect "--token: '-1' is not an integer" 2 "$bench" --embedded --token -1
expect "--count: ' 100' is not an integer" 2 "$bench" --embedded --count " 100"
expect "-e: bad size" 2 "$bench" --embedded -e 17179869184G
expect "--token: '-1' is not a token" 2 "$lat" --token -1
expect "-n: '+5' is not a number" 2 "$lat" -n +5
# RAILGATE_TOKEN as the README makes it: od's output keeps its leading blanks.
RAILGATE_TOKEN=" 17823925995838236175" "$bench" --embedded --workers 2 --count 100 -n 1 -w 0 > /dev/null 2> "$tmp/err" ||
  fail "railbench with RAILGATE_TOKEN from od: $(tail -n 2 "$tmp/err")"
RAILGATE_TOKEN=" 17823925995838236175
" "$lat" --transport dpdk -n 20 -w 2 --bw-size 0 > /dev/null 2> "$tmp/err" ||
  fail "raillat with RAILGATE_TOKEN from od: $(tail -n 2 "$tmp/err")"
"$bench" --embedded --workers 2 --count 100 -n 1 -w 0 --token " 17823925995838236175" > /dev/null 2> "$tmp/err" ||
  fail "railbench --token \" N\": $(tail -n 2 "$tmp/err")"
echo "ok: RAILGATE_TOKEN=\$(od -An -N8 -tu8 /dev/urandom), blanks and all, taken by railbench and raillat (and --token \"\$(od ...)\")"
"$bench" --embedded --workers 2 --count 0100,0x40 -n 1 -w 0 > "$tmp/out" 2> "$tmp/err" || fail "--count 0100,0x40: $(tail -n 3 "$tmp/err")"
grep -Eq '^ +400 +100 +float' "$tmp/out" && grep -Eq '^ +256 +64 +float' "$tmp/out" ||
  fail "--count 0100,0x40 is not 100 and 64 elements: $(grep float "$tmp/out")"
echo "ok: railbench --count 0100,0x40: 100 and 64 elements"

# Results written to a full disk are lost: exit 1 and say so, never 0.
full() { # WANT CMD... : CMD with stdout on /dev/full exits 1 and says WANT
  want=$1
  shift
  "$@" > /dev/full 2> "$tmp/err"
  got=$?
  [ "$got" = 1 ] || fail "$* > /dev/full exited $got, not 1: $(tail -n 3 "$tmp/err")"
  grep -qF "$want" "$tmp/err" || fail "$* > /dev/full did not say \"$want\": $(tail -n 3 "$tmp/err")"
  echo "ok: $(basename "$1") $2 > /dev/full: $(grep -F "$want" "$tmp/err" | head -n 1)"
}
full "railctl: writing the answer: No space left on device" "$ctl" --help
full "railbench: writing the results" "$bench" --embedded --workers 2 --count 1000 -n 1 -w 0
full "railbench: writing the results" "$bench" --embedded --workers 2 --count 1000 -n 1 -w 0 --json
full "raillat: writing the results" "$lat" --transport dpdk -n 50 -w 5 --bw-size 0 --json
"$lat" --transport dpdk -n 50 -w 5 --bw-size 0 --dump /dev/full > /dev/null 2> "$tmp/err"
[ $? = 1 ] && grep -qF "raillat: writing --dump /dev/full: No space left on device" "$tmp/err" ||
  fail "raillat --dump /dev/full: $(tail -n 3 "$tmp/err")"
echo "ok: raillat --dump /dev/full: $(grep -F 'writing --dump' "$tmp/err")"
echo PASS
