#!/usr/bin/env bash
# Runs the CTest suite RUNS times in a row while every core is kept busy by
# another process, and reports each run's failures: timing assumptions in
# tests (a fixed sleep, a deadline too tight for a loaded machine) show up
# here before they show up in CI.
# usage: scripts/check-under-load.sh [RUNS (5)] [BUILD_DIR (build)] [CTEST ARGS...]
#   e.g. scripts/check-under-load.sh 5 build -L integration
# The load: `stress -c N` when installed, else N shell busy loops (N = cores);
# stopped on exit. Exit status: 0 when every run passed.
set -uo pipefail
RUNS=${1:-5}
BUILD=${2:-build}
shift $(( $# >= 2 ? 2 : $# ))
cores=$(nproc)
burners=()
stop_load() { [ ${#burners[@]} -eq 0 ] || kill "${burners[@]}" 2>/dev/null; wait 2>/dev/null; }
trap stop_load EXIT INT TERM
if command -v stress >/dev/null; then
  stress -c "$cores" -q & burners+=($!)
  load="stress -c $cores"
else
  for _ in $(seq "$cores"); do ( while :; do :; done ) & burners+=($!); done
  load="$cores busy loops"
fi
echo "check-under-load: $RUNS run(s) of ctest in $BUILD under $load"
failed_runs=0
for i in $(seq "$RUNS"); do
  t0=$(date +%s)
  log="$BUILD/under-load-$i.log"
  (cd "$BUILD" && ctest -j "$cores" --output-on-failure "$@") > "$log" 2>&1
  rc=$?
  summary=$(grep -E "tests passed|tests failed" "$log" | tail -1)
  echo "  run $i: exit $rc in $(( $(date +%s) - t0 )) s: ${summary:-no summary} ($log)"
  if [ "$rc" -ne 0 ]; then
    failed_runs=$((failed_runs + 1))
    grep -E "^\s+[0-9]+ - " "$log" | sed 's/^/      failed: /'
  fi
done
echo "check-under-load: $((RUNS - failed_runs)) passed, $failed_runs failed"
[ "$failed_runs" -eq 0 ]
