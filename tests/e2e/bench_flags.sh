#!/bin/sh
# The benchmark tools refuse a bad command line before any benchmark starts:
# an unknown flag, a missing value, a number with trailing text or out of
# its range exits 2 with what is wrong on stderr (bench_dataplane's
# --workers 65 overflowed its frame array, and a bad number threw out of
# main); -h and --help print the usage on stdout and exit 0. Each case runs
# under a short timeout: a tool that ignores its arguments and starts
# measuring fails it.
#   bench_flags.sh TOOL... (each a path to a benchmark binary)
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# TOOL WANT-RC WANT-STDERR-TEXT ARGS...
expect() {
  tool=$1 rc=$2 want=$3
  shift 3
  timeout 10 "$tool" "$@" > "$tmp/out" 2> "$tmp/err"
  got=$?
  [ "$got" = "$rc" ] || fail "$(basename "$tool") $* exited $got, not $rc: $(head -c 300 "$tmp/err")"
  [ -z "$want" ] || grep -qF -- "$want" "$tmp/err" || fail "$(basename "$tool") $*: no \"$want\" in: $(cat "$tmp/err")"
  echo "ok: $(basename "$tool") $* -> $got ${want:+($want)}"
}
for t in "$@"; do
  name=$(basename "$t")
  expect "$t" 0 "" --help
  grep -q "^usage: $name" "$tmp/out" || fail "$name --help printed no usage on stdout"
  expect "$t" 0 "" -h
  expect "$t" 2 "unknown flag --bogus" --bogus
  case $name in
    bench_dataplane)
      expect "$t" 2 "--seconds: 'abc' is not a number" --seconds abc
      expect "$t" 2 "--seconds needs a value" --seconds
      expect "$t" 2 "--seconds: nan out of range" --seconds nan
      expect "$t" 2 "--workers: 65 out of range 1..64" --workers 65
      expect "$t" 2 "MTU 'abc' is not a number" --mtu abc
      expect "$t" 2 "--pool: 0 out of range" --pool 0
      expect "$t" 2 "--csum: 'x' is neither sw nor nic" --csum x ;;
    bench_gateway)
      expect "$t" 2 "--sizes: 'abc' is not a number" --sizes 64,abc
      expect "$t" 2 "--sizes: 59 out of range 60..1514" --sizes 59
      expect "$t" 2 "--seconds: '2s' is not a number" --seconds 2s ;;
    bench_reduce) expect "$t" 2 "--reps: '1x' is not a number" --reps 1x ;;
    bench_histogram) expect "$t" 2 "--n: 0 out of range" --n 0 ;;
    bench_xdp) expect "$t" 2 "--rounds: -1 out of range" --rounds -1 ;;
  esac
done
echo PASS
