#!/usr/bin/env bash
# The measurement method end to end through the aquifer command: bench
# storage / train / sweep, size, model cache, results on disk, Prometheus
# while running, and the HTML report (report_browser_test.py opens it in
# headless Chromium).
# usage: measure_test.sh path/to/aquifer
set -u
AQ=$(realpath "$1")
T=$(mktemp -d /tmp/aq_measure_test_XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$T"' EXIT
PY=/usr/bin/python3
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
expect() {  # expect <exit code> <description> -- command...
  local want=$1 what=$2
  shift 3
  "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ "$rc" -eq "$want" ]; then ok; else bad "$what: exit $rc, wanted $want"; sed 's/^/  | /' "$T/out" "$T/err" >&2; fi
}
contains() {  # contains <file> <text> <description>
  if grep -qF -- "$2" "$1"; then ok; else bad "$3: '$2' not in output"; sed 's/^/  | /' "$1" >&2; fi
}
jq_py() {  # jq_py <file> <python expression over j> <description>: the expression must be true
  if $PY -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"; then ok; else
    bad "$3: ($2) is false"; head -c 2000 "$1" | sed 's/^/  | /' >&2; fi
}

"$AQ" dataset synth --out "$T/raw" --classes 4 --images 96 --seed 3 --no-progress >/dev/null
"$AQ" dataset pack "$T/raw" --out "$T/tf" --shards 4 --no-progress >/dev/null

for c in storage train sweep pipeline; do
  expect 0 "help bench $c" -- "$AQ" bench "$c" --help
  contains "$T/out" "Usage" "help bench $c"
done
for c in "size" "model cache" "report"; do
  expect 0 "help $c" -- "$AQ" $c --help
done

# bench storage: JSON in the common result format, file on disk, CSV beside it.
expect 0 "bench storage" -- "$AQ" bench storage "$T/tf" -r 2 -d 1.5 --ramp 0.5 --interval 0.25 --json --out "$T/res"
cp "$T/out" "$T/storage.json"
jq_py "$T/storage.json" 'j["schema"]=="aquifer-result/1" and j["command"]=="bench storage"' "storage schema"
jq_py "$T/storage.json" 'j["summary"]["mb_per_second"]>0 and j["summary"]["files"]>0' "storage read something"
jq_py "$T/storage.json" 'j["summary"]["latency"]["p99_us"]>=j["summary"]["latency"]["p50_us"]>0' "latency percentiles"
jq_py "$T/storage.json" 'len(j["series"]["t"])>=3 and any(c["name"]=="bench.read" for c in j["series"]["columns"])' \
  "per-second series"
jq_py "$T/storage.json" 'j["machine"]["cores"]>0 and j["machine"]["roots"][0]["fs_type"]!=""' "machine facts"
[ "$(ls "$T"/res/bench-storage-*.json | wc -l)" = 1 ] && ok || bad "result JSON written under --out"
ls "$T"/res/bench-storage-*-series.csv >/dev/null 2>&1 && ok || bad "series CSV written"
expect 0 "bench storage sync round-robin iodepth" -- "$AQ" bench storage "$T/tf" -r 2 -d 1 --ramp 0.2 --mode sync \
  --step-size 1MB --selection round-robin --iodepth 4 --drop-caches
contains "$T/out" "sync" "sync steps reported"
contains "$T/out" "fadvise" "cache drop reported"
expect 0 "bench storage processes" -- "$AQ" bench storage "$T/tf" -p 2 -r 1 -d 1.5 --ramp 0.3 --interval 0.25 --json
jq_py "$T/out" 'len(j["summary"]["processes"])==2 and j["summary"]["mb_per_second"]>0' "two processes summed"
jq_py "$T/out" 'sorted(p["rank"] for p in j["summary"]["processes"])==[0,1]' "a rank per process"
expect 2 "bad mode" -- "$AQ" bench storage "$T/tf" --mode parallel
contains "$T/err" "--mode parallel" "bad mode named"
expect 2 "ramp longer than run" -- "$AQ" bench storage "$T/tf" -d 1 --ramp 2
expect 1 "missing data" -- "$AQ" bench storage "$T/none" -d 1 --ramp 0
contains "$T/err" "$T/none" "missing data named"
expect 2 "bad request size" -- "$AQ" bench storage "$T/tf" --request-size lots

# Prometheus while a bench runs.
port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$AQ" bench storage "$T/tf" -r 1 -d 4 --ramp 0.5 --interval 0.2 --prometheus "$port" --no-progress >"$T/prom_run" 2>&1 &
bench_pid=$!
got=""
for _ in $(seq 40); do
  got=$($PY -c "import urllib.request,sys; print(urllib.request.urlopen('http://127.0.0.1:$port/metrics', timeout=1).read().decode())" 2>/dev/null) && \
    echo "$got" | grep -q aquifer_bench_read_bytes_per_second && break
  sleep 0.1
done
echo "$got" >"$T/metrics"
contains "$T/metrics" "# TYPE aquifer_bench_read_bytes_per_second gauge" "prometheus exposition"
contains "$T/metrics" "aquifer_cpu_user_ratio" "prometheus system metrics"
if command -v promtool >/dev/null; then
  promtool check metrics <"$T/metrics" >"$T/promtool" 2>&1 && ok || bad "promtool check metrics: $(cat "$T/promtool")"
else
  echo "SKIP: promtool (Debian's prometheus) is not installed: the exposition's conventions are not checked"
fi
wait "$bench_pid" && ok || bad "bench with --prometheus exited non-zero"

# bench train with an emulated GPU: GPU-bound when slow, input-bound when not.
# The slow GPU's step (0.2 s for 8 small images) leaves the loader room to
# keep up even when the machine is loaded by the tests running beside this one
# (at 0.05 s a loaded CI machine once measured AU at exactly the 90% threshold).
expect 0 "bench train slow GPU" -- "$AQ" bench train "$T/tf" --batch 8 --size 64 --step-time 0.2 --epochs 2 \
  --interval 0.25 --json --out "$T/res"
cp "$T/out" "$T/train.json"
jq_py "$T/train.json" 'j["summary"]["au_ok"] and j["summary"]["bound"]=="gpu"' "slow GPU is GPU-bound"
jq_py "$T/train.json" 'j["summary"]["images"]==(96*2//8-1)*8 and j["summary"]["mb_per_second_per_gpu"]>0' "images counted"
expect 0 "bench train fast GPUs" -- "$AQ" bench train "$T/tf" --batch 8 --size 64 --gpus 2 --gpu h100 --model alexnet
contains "$T/out" "input-bound" "fast GPUs starve"
contains "$T/out" "rank 1" "per-GPU lines"
expect 0 "bench train inference" -- "$AQ" bench train "$T/tf" --batch 8 --size 64 --inference --steps 4
contains "$T/out" "inference" "inference mode shown"
contains "$T/out" "not enough samples" "3 measured steps give no verdict"
expect 1 "bench train unknown model" -- "$AQ" bench train "$T/tf" --model gpt
contains "$T/err" "resnet50" "known models listed"
expect 1 "bench train too few steps" -- "$AQ" bench train "$T/tf" --batch 32 --gpus 2 --steps 1
contains "$T/err" "at least 2" "too few steps explained"
# One step per GPU per pass: the run takes as many passes as a verdict needs.
expect 0 "bench train short passes" -- "$AQ" bench train "$T/tf" --batch 32 --gpus 2 --step-time 0.001 --json
jq_py "$T/out" 'j["summary"]["measured_steps"]>=20 and j["config"]["epochs"]>=21' "passes repeated to 20 steps"
jq_py "$T/out" 'j["summary"]["measured_step_seconds"]["min"]<=j["summary"]["measured_step_seconds"]["max"]' "spread"

# bench infer: forward only at several batch sizes; ones the data cannot fill are left out, said so.
expect 0 "help bench infer" -- "$AQ" bench infer --help
contains "$T/out" "--batches" "infer help names its batch sizes"
expect 0 "bench infer" -- "$AQ" bench infer "$T/tf" --size 64 --batches 4,8,500 --json --no-progress
jq_py "$T/out" 'j["command"]=="bench infer" and [p["batch"] for p in j["summary"]["points"]]==[4,8]' "two batch sizes ran"
jq_py "$T/out" 'len(j["summary"]["skipped"])==1 and "500" in j["summary"]["skipped"][0]' "the third is named as skipped"
jq_py "$T/out" 'all(p["measured_steps"]>=20 and p["au"]>0 for p in j["summary"]["points"])' "each point measured"
jq_py "$T/out" 'j["summary"]["points"][0]["step_seconds"]<j["summary"]["points"][1]["step_seconds"]' "bigger batches take longer"
expect 0 "bench infer text" -- "$AQ" bench infer "$T/tf" --size 64 --batches 4 --no-progress
contains "$T/out" "assumes" "assumptions printed"
expect 1 "bench infer no batch fits" -- "$AQ" bench infer "$T/tf" --batches 500
contains "$T/err" "no batch size could run" "nothing runnable explained"
expect 1 "bench infer batch 0" -- "$AQ" bench infer "$T/tf" --batches 0
expect 2 "bench infer has no --batch" -- "$AQ" bench infer "$T/tf" --batch 8
expect 1 "bench infer missing checkpoint" -- "$AQ" bench infer "$T/tf" --size 64 --batches 4 --checkpoint "$T/none.pt"
contains "$T/err" "aquifer.evaluate" "the failing evaluation named"

# bench sweep: scaling curve and the cold/warm pair.
expect 0 "sweep readers" -- "$AQ" bench sweep --param readers --values 1,2 --out "$T/res" -- storage "$T/tf" -d 1 --ramp 0.2
contains "$T/out" "1.00x" "sweep table"
expect 0 "sweep cache pair" -- "$AQ" bench sweep --cache-pair --json -- storage "$T/tf" -d 1 --ramp 0.2
jq_py "$T/out" 'len(j["summary"]["points"])==2 and j["summary"]["cold_over_warm"]>0' "cold/warm pair"
expect 2 "sweep without values" -- "$AQ" bench sweep -- storage "$T/tf"
expect 1 "sweep run fails" -- "$AQ" bench sweep --param readers --values 1 -- storage "$T/none" -d 1 --ramp 0
contains "$T/err" "failed" "failing run reported"

# size: the documents' table and examples.
expect 0 "size table" -- "$AQ" size --table
contains "$T/out" "training, small images, ResNet-50                      90              27               7" "table low"
contains "$T/out" "inference, small images, ResNet-50                    160              20               5" "table medium"
contains "$T/out" "training, large images, Inception-v4                  300               9               2" "table high"
expect 0 "size example 1" -- "$AQ" size --gpus 72 --mbps-per-gpu 80 --out "$T/res"
contains "$T/out" "5760 MB/s" "72 x 80"
contains "$T/out" "2.37 -> 3" "2.4 nodes"
expect 0 "size example 3" -- "$AQ" size --gpus 72 --workload inception4-train-large --json
jq_py "$T/out" 'j["summary"]["nodes"]==8 and j["summary"]["demand_mb_per_second"]==21600' "eight nodes"
expect 0 "size from measured result" -- "$AQ" size --from "$T/train.json" --gpus 8
contains "$T/out" "measured by bench train" "measured demand used"
# The same run as if it had been input-bound: sized from the demand, with a warning.
$PY -c 'import json,sys; j=json.load(open(sys.argv[1])); j["summary"].update(au_ok=False, bound="decode", au=0.41); json.dump(j, open(sys.argv[2], "w"))' "$T/train.json" "$T/input_bound.json"
expect 0 "size from an input-bound result" -- "$AQ" size --from "$T/input_bound.json" --gpus 8
contains "$T/err" "WARNING" "input-bound result warned about"
contains "$T/out" "NOT GPU-bound" "the demand's source says so"
expect 2 "size unknown node" -- "$AQ" size --gpus 8 --node f900
contains "$T/err" "f800" "known nodes listed"
expect 1 "size from non-result" -- "$AQ" size --from "$T/raw" --gpus 8

# model cache: the documents' example, measured residency and a result's hit fraction.
expect 0 "cache model" -- "$AQ" model cache --dataset 22.2TB --client-cache 512GB --storage-cache 2TB --out "$T/res"
contains "$T/out" "2.3%" "client hits"
contains "$T/out" "91.0%" "storage media"
expect 0 "cache measured" -- "$AQ" model cache --data "$T/tf" --client-cache 1GB --result "$T/storage.json"
contains "$T/out" "measured: the page cache holds" "residency measured"
contains "$T/out" "served from the client cache" "result hits measured"
expect 2 "cache bad size" -- "$AQ" model cache --dataset huge

# The report: every result in one HTML file whose charts render in Chromium.
expect 0 "report" -- "$AQ" report "$T/res" -o "$T/report.html" --json
jq_py "$T/out" 'j["results"]>=5 and j["charts"]>=8' "report has charts"
expect 1 "report of a non-result" -- "$AQ" report "$T/raw/class_000" -o "$T/x.html"
echo '{"schema":"other"}' >"$T/other.json"
expect 1 "report rejects other JSON" -- "$AQ" report "$T/other.json" -o "$T/x.html"
contains "$T/err" "$T/other.json" "bad result named"
# The report in a real browser, with every kind of result: report_browser_test.py.

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
