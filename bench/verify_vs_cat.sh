#!/usr/bin/env bash
# aquifer dataset verify vs `cat > /dev/null` on the same packed shards, in
# one run. Both from page cache (warm; the CPU-side cost), and, when this
# user may drop the page cache, both from disk (cold). Prints medians of
# REPEATS runs and the ratio verify/cat: 1.0 means verifying every CRC,
# Example and JPEG header costs nothing beyond reading the bytes.
#
# usage: bench/verify_vs_cat.sh [aquifer] [dataset-dir] [repeats]
# Without a dataset dir it synthesizes and packs one (2000 small images).
set -euo pipefail
AQ=${1:-build/aquifer}
DIR=${2:-}
REPEATS=${3:-5}
if [ -z "$DIR" ]; then
  DIR=$(mktemp -d /tmp/aq_verify_bench_XXXXXX)
  trap 'rm -rf "$DIR"' EXIT
  "$AQ" dataset synth --out "$DIR/raw" --classes 20 --images 2000 --seed 1 >/dev/null
  "$AQ" dataset pack "$DIR/raw" --out "$DIR/tf" --shards 16 >/dev/null
  DIR="$DIR/tf"
fi
FILES=("$DIR"/train-*)
BYTES=$(cat "${FILES[@]}" | wc -c)

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
now() { date +%s.%N; }
drop() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; }
can_drop=0
if [ -w /proc/sys/vm/drop_caches ] && drop; then can_drop=1; fi

run_mode() {  # run_mode warm|cold
  local mode=$1 cat_t=() ver_t=()
  for _ in $(seq "$REPEATS"); do
    [ "$mode" = cold ] && drop
    [ "$mode" = warm ] && cat "${FILES[@]}" >/dev/null
    t0=$(now); cat "${FILES[@]}" >/dev/null; t1=$(now)
    cat_t+=("$(echo "$t1 - $t0" | bc -l)")
    [ "$mode" = cold ] && drop
    t0=$(now); "$AQ" dataset verify "$DIR" >/dev/null; t1=$(now)
    ver_t+=("$(echo "$t1 - $t0" | bc -l)")
  done
  local c v
  c=$(printf '%s\n' "${cat_t[@]}" | median)
  v=$(printf '%s\n' "${ver_t[@]}" | median)
  printf '%-5s  cat %8.1f MB/s   verify %8.1f MB/s   verify/cat %.2f   (median of %d, %d files, %.1f MB)\n' \
    "$mode" "$(echo "$BYTES / $c / 1000000" | bc -l)" "$(echo "$BYTES / $v / 1000000" | bc -l)" \
    "$(echo "$c / $v" | bc -l)" "$REPEATS" "${#FILES[@]}" "$(echo "$BYTES / 1000000" | bc -l)"
}

echo "verify vs cat on $DIR ($(nproc) cores)"
run_mode warm
if [ "$can_drop" = 1 ]; then run_mode cold; else echo "cold   skipped: cannot drop the page cache here (needs root)"; fi
