#!/usr/bin/env bash
# Runs every libFuzzer target for FUZZ_SECONDS each, JOBS of them at a time
# (each target is one process on one core, so the run takes
# targets x seconds / JOBS). Each target keeps its corpus in
# FUZZ_BUILD/corpus/<target> between runs and starts from the seeds of
# fuzz/make_seeds.py; a crash leaves its input in FUZZ_BUILD/ and fails the
# run with the end of that target's log.
# usage: scripts/fuzz_run.sh FUZZ_BUILD SECONDS JOBS TARGET...
set -euo pipefail
build=$1 seconds=$2 jobs=$3
shift 3
rm -rf "$build/seeds"
/usr/bin/python3 fuzz/make_seeds.py "$build/seeds"
one() {
  local build=$1 seconds=$2 t=$3
  mkdir -p "$build/corpus/$t"
  if ! "$build/fuzz/$t" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -print_final_stats=0 \
    -artifact_prefix="$build/" "$build/corpus/$t" "$build/seeds/$t" >"$build/$t.log" 2>&1; then
    echo "fuzz: $t FAILED"
    tail -40 "$build/$t.log"
    return 1
  fi
  echo "fuzz: $t for ${seconds}s: $(grep -E '^#[0-9]+.*DONE' "$build/$t.log" | tail -1)"
}
export -f one
printf '%s\n' "$@" | xargs -P "$jobs" -I{} bash -c 'one "$@"' _ "$build" "$seconds" {}
