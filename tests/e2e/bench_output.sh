#!/bin/sh
# railbench speaks nccl-tests: -d float|half|bfloat16|int32 and those names in
# the table's type column, -o sum; --json and --csv put only the results on
# stdout (the commentary on stderr) and they parse. raillat -a sweeps every
# size from 4 to 32768 bytes, a perftest row each (and a JSON result each).
#   bench_output.sh RAILBENCH RAILLAT
rb=$1 rl=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
run() { "$rb" --embedded --workers 2 --rails 2 --count 1,4097 -n 2 -w 0 "$@"; }

run -d half -o sum > "$tmp/t" 2>&1 || fail "railbench -d half: $(cat "$tmp/t")"
grep -qE "^ +8194 +4097 +half +sum " "$tmp/t" || fail "the table's type is not half: $(grep -E '^ +[0-9]' "$tmp/t")"
run -d bfloat16 > "$tmp/t" 2>&1 && grep -qE "^ +8194 +4097 +bfloat16 +sum " "$tmp/t" || fail "-d bfloat16"
run --dtype fp32 > "$tmp/t" 2>&1 && grep -qE "^ +16388 +4097 +float +sum " "$tmp/t" || fail "--dtype fp32 prints float"
echo "ok: -d half|bfloat16|fp32: the table says half, bfloat16, float"

run -d float --json > "$tmp/j" 2> "$tmp/notes" || fail "--json: $(cat "$tmp/notes")"
python3 - "$tmp/j" <<'PY' || fail "--json: $(cat "$tmp/j")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["tool"] == "railbench" and j["mode"] == "embedded" and j["type"] == "float" and j["redop"] == "sum", j
assert j["ranks"] == [0, 1] and j["workers"] == 2 and j["wrong"] == 0, j
assert [(r["size"], r["count"]) for r in j["results"]] == [(4, 1), (16388, 4097)], j["results"]
assert all(r["time_us"] > 0 and r["algbw_GBps"] >= 0 and r["wrong"] == 0 for r in j["results"]), j
assert j["results"][-1]["algbw_GBps"] > 0 and j["results"][-1]["busbw_GBps"] > 0, j
PY
grep -q "Out of bounds values : 0 OK" "$tmp/notes" || fail "--json: the commentary is not on stderr"
echo "ok: --json: one object on stdout, the commentary on stderr"

# The per-chunk round trips, and the same less each contribution's wait in
# railgated for the other rank (its echo): a sample for every chunk sent
# once, never longer than the whole round trip.
python3 - "$tmp/notes" <<'PY' || fail "round trips: $(grep -A1 'per-chunk' "$tmp/notes")"
import re, sys
t = open(sys.argv[1]).read()
def block(title):
    m = re.search(r"# " + re.escape(title) + r", all workers \(us\): samples (\d+)\n#\s+t_min (\S+)\s+t_typical\(p50\) (\S+)", t)
    assert m, title
    return int(m[1]), float(m[2]), float(m[3])
n, lo, p50 = block("per-chunk round trip")
n_own, lo_own, p50_own = block("per-chunk round trip less the wait for the other ranks")
retx = int(re.search(r"# retransmits (\d+)", t)[1])
assert n > 0 and n_own <= n and (retx > 0 or n_own == n), (n, n_own, retx)
assert lo_own <= lo and p50_own <= p50, (lo, lo_own, p50, p50_own)
PY
echo "ok: the round trips less the wait for the other ranks: a sample per chunk, none longer"

# -D instead of -n: each size's timed iterations for that long, counted
# per size in the JSON and in the commentary.
"$rb" --embedded --workers 2 --rails 2 --count 1,4097 -w 0 -D 0.2 --json > "$tmp/d" 2> "$tmp/notes" || fail "-D: $(cat "$tmp/notes")"
python3 - "$tmp/d" <<'PY' || fail "-D: $(cat "$tmp/d")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["duration_s"] == 0.2 and "iters" not in j and j["wrong"] == 0, j
assert all(r["iters"] > 1 for r in j["results"]), j
PY
n=$(python3 -c 'import json,sys; print(" ".join(str(r["iters"]) for r in json.load(open(sys.argv[1]))["results"]))' "$tmp/d")
grep -q "^# timed iterations per size in 0.2 s: $n\$" "$tmp/notes" || fail "-D: the commentary does not count $n"
"$rb" --embedded --workers 2 -D 1 -n 3 > "$tmp/t" 2>&1 && fail "-D with -n accepted"
grep -q "one or the other" "$tmp/t" || fail "-D with -n: $(cat "$tmp/t")"
echo "ok: -D 0.2: $n timed iterations per size, in the JSON and the commentary; -D with -n refused"

run -d int32 --csv > "$tmp/c" 2> /dev/null || fail "--csv"
[ "$(head -n 1 "$tmp/c")" = "size,count,type,redop,time_us,algbw_GBps,busbw_GBps,wrong" ] || fail "CSV header: $(head -n 1 "$tmp/c")"
[ "$(wc -l < "$tmp/c")" -eq 3 ] || fail "CSV rows: $(cat "$tmp/c")"
python3 -c 'import csv,sys; r=list(csv.DictReader(open(sys.argv[1]))); assert [x["count"] for x in r]==["1","4097"] and all(x["type"]=="int32" and x["wrong"]=="0" for x in r), r' "$tmp/c" ||
  fail "CSV: $(cat "$tmp/c")"
echo "ok: --csv: a header and a row per size"

"$rl" --transport dpdk -a -n 20 -w 5 --bw-size 4096 --bw-iters 2 > "$tmp/a" 2>&1 || fail "raillat -a: $(cat "$tmp/a")"
rows=$(grep -cE '^ [0-9]+ +20 ' "$tmp/a")
[ "$rows" -eq 14 ] || fail "raillat -a: $rows rows, not 14 (4..32768): $(cat "$tmp/a")"
grep -qE '^ 4 +20 ' "$tmp/a" && grep -qE '^ 32768 +20 ' "$tmp/a" || fail "raillat -a: not 4..32768"
[ "$(grep -c '#bytes' "$tmp/a")" -eq 1 ] || fail "raillat -a: one header"
[ "$(grep -c '# bandwidth' "$tmp/a")" -eq 1 ] || fail "raillat -a: the bandwidth phase once"
"$rl" --transport dpdk -a -n 10 -w 2 --bw-size 0 --json > "$tmp/aj" 2> /dev/null || fail "raillat -a --json"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); b=[r["bytes"] for r in j["results"]]; assert b==[4<<k for k in range(14)], b' "$tmp/aj" ||
  fail "raillat -a --json: $(cat "$tmp/aj")"
echo "ok: raillat -a: 14 sizes, 4..32768, one header, the bandwidth once; --json a result per size"
echo PASS
