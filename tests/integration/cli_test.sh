#!/usr/bin/env bash
# The aquifer command end to end, as a person or a script uses it: help
# everywhere, exit codes, JSON output, clear errors on bad input.
# usage: cli_test.sh path/to/aquifer
set -u
AQ=$(realpath "$1")
T=$(mktemp -d /tmp/aq_cli_test_XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
# expect <exit code> <description> -- command...
expect() {
  local want=$1 what=$2
  shift 3
  "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ "$rc" -eq "$want" ]; then ok; else bad "$what: exit $rc, wanted $want"; sed 's/^/  | /' "$T/out" "$T/err" >&2; fi
}
contains() {  # contains <file> <text> <description>
  if grep -qF -- "$2" "$1"; then ok; else bad "$3: '$2' not in output"; sed 's/^/  | /' "$1" >&2; fi
}
json_ok() { /usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$1" && ok || bad "$2: not valid JSON"; }

# Help on every command.
expect 0 "top help" -- "$AQ" --help
contains "$T/out" "dataset" "top help lists groups"
for c in synth pack expand resize verify inspect; do
  expect 0 "help $c" -- "$AQ" dataset "$c" --help
  contains "$T/out" "Usage" "help $c"
done
expect 0 "version" -- "$AQ" --version
contains "$T/out" "aquifer" "version"

# Usage errors exit 2 and say what is wrong.
expect 2 "no subcommand" -- "$AQ"
expect 2 "unknown flag" -- "$AQ" dataset verify "$T" --no-such-flag
expect 2 "bad enum" -- "$AQ" dataset pack "$T" --out "$T/x" --format parquet
contains "$T/err" "unknown format 'parquet'" "bad enum message"
expect 2 "missing required" -- "$AQ" dataset synth

# The main job.
expect 0 "synth" -- "$AQ" dataset synth --out "$T/raw" --classes 4 --images 32 --seed 7
contains "$T/out" "32 images in 4 classes" "synth summary"
if grep -q $'\r' "$T/err"; then bad "progress drawn although stdout is not a terminal"; else ok; fi
expect 0 "pack tfrecord" -- "$AQ" dataset pack "$T/raw" --out "$T/tf" --shards 4 --json
json_ok "$T/out" "pack --json"
expect 0 "pack recordio" -- "$AQ" dataset pack "$T/raw" --out "$T/rec" --format recordio
expect 0 "verify tfrecord" -- "$AQ" dataset verify "$T/tf" --num-classes 4
contains "$T/out" "OK" "verify tfrecord"
expect 0 "verify recordio --decode" -- "$AQ" dataset verify "$T/rec" --decode --json
json_ok "$T/out" "verify --json"
contains "$T/out" '"records": 32' "verify record count"
expect 0 "verify folder" -- "$AQ" dataset verify "$T/raw"
expect 0 "inspect" -- "$AQ" dataset inspect "$T/tf" --limit 3
contains "$T/out" "train-00000-of-00004" "inspect rows"
expect 0 "expand" -- "$AQ" dataset expand "$T/tf" --copies 2 --out "$T/big"
contains "$T/out" "expand: 16 files" "expand summary"
expect 0 "verify expanded" -- "$AQ" dataset verify "$T/big" --json
contains "$T/out" '"records": 64' "expanded record count"
expect 0 "resize" -- "$AQ" dataset resize "$T/rec" --out "$T/rec3" --scale 1.5 --quality 90 -j 2
expect 0 "verify resized" -- "$AQ" dataset verify "$T/rec3"

# Refuses to clobber.
expect 1 "synth into non-empty dir" -- "$AQ" dataset synth --out "$T/raw" --images 1
contains "$T/err" "not empty" "clobber message"
expect 1 "pack over existing shards" -- "$AQ" dataset pack "$T/raw" --out "$T/tf" --shards 4
contains "$T/err" "--overwrite" "overwrite hint"

# Bad input: every case a clear error naming what and where, exit 1, no crash.
expect 1 "missing path" -- "$AQ" dataset verify "$T/nope"
contains "$T/err" "$T/nope" "missing path named"
mkdir -p "$T/emptyds" && : >"$T/emptyds/train-00000-of-00001"
expect 0 "empty shard verifies as zero records" -- "$AQ" dataset verify "$T/emptyds"
cp "$T/tf/train-00001-of-00004" "$T/trunc"
truncate -s -7 "$T/trunc"
expect 1 "truncated shard" -- "$AQ" dataset verify "$T/trunc" -f tfrecord
contains "$T/out" "truncated" "truncation reported"
contains "$T/out" "DAMAGED" "verdict"
head -c 5000 /dev/urandom >"$T/garbage.rec"
expect 1 "garbage .rec" -- "$AQ" dataset verify "$T/garbage.rec"
contains "$T/out" "bad magic" "garbage rec"
expect 1 "inspect garbage fails cleanly" -- "$AQ" dataset inspect "$T/garbage.rec"
contains "$T/err" "garbage.rec: record 0 at offset 0" "inspect names where"
mkdir -p "$T/withbad/cls" && cp "$T/raw/synset_labels.txt" "$T/withbad/" && echo "not a jpeg" >"$T/withbad/cls/x.jpg"
cp "$(find "$T/raw" -name '*.JPEG' | head -1)" "$T/withbad/cls/good.jpg"
expect 1 "pack non-JPEG fails" -- "$AQ" dataset pack "$T/withbad" --out "$T/wb"
contains "$T/err" "x.jpg" "non-JPEG named"
expect 0 "pack non-JPEG skipped" -- "$AQ" dataset pack "$T/withbad" --out "$T/wb2" --on-error skip
contains "$T/out" "left out   1" "skip reported"
if [ "$(id -u)" -ne 0 ]; then
  mkdir -p "$T/locked/a" && chmod 000 "$T/locked/a"
  expect 1 "unreadable class dir" -- "$AQ" dataset verify "$T/locked" -f folder
  chmod 755 "$T/locked/a"
fi

# bench pipeline on the packed data: table, JSON, bad flags, bad data.
expect 0 "help bench pipeline" -- "$AQ" bench pipeline --help
contains "$T/out" "--shuffle-buffer" "bench pipeline help"
expect 0 "bench pipeline table" -- "$AQ" bench pipeline "$T/tf" --batch 8 --size 64
contains "$T/out" "images/s" "bench table"
contains "$T/out" "limiting" "limiting stage named"
expect 0 "bench pipeline json" -- "$AQ" bench pipeline "$T/rec" --batch 8 --size 64 --eval --dtype fp16 --layout nhwc --json
json_ok "$T/out" "bench --json"
contains "$T/out" '"limiting_stage"' "bench json stage"
expect 0 "bench pipeline rank from env" -- env RANK=1 WORLD_SIZE=2 "$AQ" bench pipeline "$T/raw" --batch 4 --size 32 --json
contains "$T/out" '"world": 2' "rank from environment"
expect 2 "bench bad dtype" -- "$AQ" bench pipeline "$T/tf" --dtype int7
contains "$T/err" "int7" "bad dtype named"
expect 1 "bench memory limit" -- "$AQ" bench pipeline "$T/tf" --batch 16 --memory-limit 10M
contains "$T/err" "memory limit" "memory limit explained"
expect 2 "bench rank out of range" -- "$AQ" bench pipeline "$T/tf" --rank 3 --world 2
mkdir -p "$T/badfolder/a" && cp "$(find "$T/raw" -name '*.JPEG' | head -3 | tail -1)" "$T/badfolder/a/1.jpg"
cp "$T/badfolder/a/1.jpg" "$T/badfolder/a/2.jpg" && echo "garbage" >"$T/badfolder/a/3.jpg" && cp "$T/badfolder/a/1.jpg" "$T/badfolder/a/4.jpg"
expect 0 "bench skips a bad image" -- "$AQ" bench pipeline "$T/badfolder" --batch 2 --size 32 --json
contains "$T/out" '"bad_samples": 1' "bad sample counted"
contains "$T/out" "3.jpg" "bad sample named"
expect 1 "bench fails on a bad image by policy" -- "$AQ" bench pipeline "$T/badfolder" --batch 2 --size 32 --on-error fail
contains "$T/err" "3.jpg" "bad sample named on failure"

# Several mounts of the same data: reads spread over roots, or pinned by rank.
mkdir -p "$T/mnt2" && cp -r "$T/tf" "$T/mnt2/tf"
expect 0 "multi-root spread" -- "$AQ" bench pipeline "$T/tf:$T/mnt2/tf" --batch 8 --size 32 --json
contains "$T/out" "$T/mnt2/tf" "second root reported"
expect 0 "multi-root pinned" -- "$AQ" bench pipeline "$T/tf:$T/mnt2/tf" --root-policy pinned --rank 1 --world 2 --batch 8 --size 32
contains "$T/out" "root" "roots in the table"
expect 1 "multi-root missing mount" -- "$AQ" bench pipeline "$T/tf:$T/nomount" --root-policy pinned --rank 1 --world 2 --batch 8 --size 32 --on-error fail
contains "$T/err" "$T/nomount" "missing mount named"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
