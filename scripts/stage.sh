#!/usr/bin/env bash
# stage.sh NAME COMMAND...: runs COMMAND and, when $AQ_TIMING names a file,
# appends "NAME<TAB>seconds<TAB>exit status" to it, so `make check` and
# .ci/run can print where their time went (scripts/timing_report.py).
# Plain bash and awk: it also times the step that installs python3.
set -u
name=$1
shift
start=$(date +%s.%N)
"$@"
rc=$?
end=$(date +%s.%N)
if [ -n "${AQ_TIMING:-}" ]; then
  mkdir -p "$(dirname "$AQ_TIMING")"
  awk -v n="$name" -v s="$start" -v e="$end" -v r="$rc" 'BEGIN { printf "%s\t%.1f\t%d\n", n, e - s, r }' >> "$AQ_TIMING"
fi
exit "$rc"
