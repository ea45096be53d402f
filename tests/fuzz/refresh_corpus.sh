#!/usr/bin/env bash
# Regenerates the fuzz targets' grown corpora (tests/fuzz/corpus/NAME.tar.gz):
# each target runs SECONDS (two at a time, one CPU each) from its
# hand-written seeds and its current archive, then libFuzzer's -merge=1
# keeps the smallest set of inputs that reaches every feature they reached,
# and the archive is rewritten reproducibly (sorted names, no dates or
# owners). The tests start from seeds and archive, so a CI run's few seconds
# of fuzzing begin where this run's minutes ended.
#   tests/fuzz/refresh_corpus.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
secs=${2:-300}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
targets="packets worker control config"
for t in $targets; do
  [ -x "$build/tests/fuzz/fuzz_$t" ] || { echo "refresh_corpus: no $build/tests/fuzz/fuzz_$t (build with clang installed)" >&2; exit 2; }
  mkdir -p "$work/$t/grown" "$work/$t/old" "$work/$t/min"
  archive=$root/tests/fuzz/corpus/$t.tar.gz
  if [ -f "$archive" ]; then tar -xzf "$archive" -C "$work/$t/old"; fi
done
grow() { # NAME
  "$build/tests/fuzz/fuzz_$1" -max_total_time="$secs" -rss_limit_mb=2048 "$work/$1/grown" \
    "$root/tests/fuzz/corpus/$1" "$work/$1/old" > "$work/$1.log" 2>&1 || { tail -n 30 "$work/$1.log"; exit 1; }
}
# Two at a time, one CPU each; a failure (a crash found) stops the refresh.
grow packets & a=$!
grow worker & b=$!
wait "$a"
wait "$b"
grow control & a=$!
grow config & b=$!
wait "$a"
wait "$b"
for t in $targets; do
  "$build/tests/fuzz/fuzz_$t" -merge=1 -rss_limit_mb=2048 "$work/$t/min" \
    "$root/tests/fuzz/corpus/$t" "$work/$t/old" "$work/$t/grown" > "$work/$t-merge.log" 2>&1
  # The hand-written seeds stay where they are, not in the archive too.
  for f in "$root/tests/fuzz/corpus/$t"/*; do
    sum=$(sha1sum < "$f" | cut -d' ' -f1)
    rm -f "$work/$t/min/$sum"
  done
  tar -C "$work/$t/min" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - . | gzip -9n \
    > "$root/tests/fuzz/corpus/$t.tar.gz"
  echo "refresh_corpus: $t: $(find "$work/$t/min" -type f | wc -l) inputs; $(grep -o 'INITED cov: [0-9]*' "$work/$t.log" | head -n 1) at the start, $(grep -o 'DONE *cov: [0-9]*' "$work/$t.log" | tail -n 1) after $secs s"
done
