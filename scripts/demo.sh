#!/usr/bin/env bash
# make demo: the whole method on the embedded default, end to end, from a
# fresh clone. Installs missing Debian packages, builds only the aquifer
# binary (make check builds the tests and benchmarks), then: synthesize a
# small ImageNet-like dataset, pack it (TFRecord and RecordIO) and verify
# both; serve it from an embedded storage node and read it back through
# aquifer:// (storage-only bench, then training ResNet-50 on one simulated
# GPU this machine can feed); a readers sweep on the local files; the cache
# model beside what was measured; the sizing answer for 72 such GPUs; a
# one-screen summary and an HTML report at DEMO_DIR/report.html. Prints how
# long each part took.
# usage: scripts/demo.sh BUILD_DIR DEMO_DIR JOBS BUILD_TYPE [IMAGES]
set -euo pipefail
BUILD=${1:-build} DIR=${2:-demo-data} JOBS=${3:-$(nproc)} TYPE=${4:-RelWithDebInfo} IMAGES=${5:-600}
AQ=$BUILD/aquifer
RESULTS=$DIR/results
t0=$(date +%s)
step() { echo; echo "== demo: $* ($(( $(date +%s) - t0 )) s)"; }

step "Debian packages"
bash scripts/install-deps.sh
step "building aquifer"
[ -f "$BUILD/build.ninja" ] || cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE="$TYPE"
cmake --build "$BUILD" -j "$JOBS" --target aquifer
t_built=$(date +%s)

rm -rf "$DIR"
step "a synthetic dataset, packed and verified"
"$AQ" dataset synth --out "$DIR/images" --classes 10 --images "$IMAGES" --seed 1
"$AQ" dataset pack "$DIR/images" --out "$DIR/tfrecord" --format tfrecord --shards 8
"$AQ" dataset pack "$DIR/images" --out "$DIR/recordio" --format recordio
"$AQ" dataset verify "$DIR/tfrecord" --num-classes 10
"$AQ" dataset verify "$DIR/recordio" --num-classes 10
"$AQ" dataset inspect "$DIR/tfrecord" --limit 3
step "served by a storage node, measured through it"
bash scripts/demo-node.sh "$AQ" "$DIR" "$RESULTS"
step "a readers sweep, the cache model, sizing"
"$AQ" bench sweep --param readers --values 1,2 --out "$RESULTS" -- storage "$DIR/tfrecord" -d 3 --ramp 1
"$AQ" model cache --data "$DIR/tfrecord" --client-cache "$(awk '/MemTotal/ {print $2 "k"}' /proc/meminfo)" \
  --result "$(ls "$RESULTS"/bench-storage-*.json | head -1)" --out "$RESULTS"
"$AQ" size --from "$(ls "$RESULTS"/bench-train-*.json | head -1)" --gpus 72 --out "$RESULTS"
echo
echo "== demo summary: $IMAGES synthetic images packed, verified, served by a storage node and measured the documents' way =="
"$AQ" report "$RESULTS" -o "$DIR/report.html" --title "aquifer demo"
t1=$(date +%s)
echo
echo "demo: done in $(( t1 - t0 )) s (packages and build $(( t_built - t0 )) s, the demo itself $(( t1 - t_built )) s)"
