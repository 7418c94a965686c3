#!/usr/bin/env bash
# The demo's storage half: an embedded node on 127.0.0.1 (a free port), the
# packed shards uploaded to it, the storage-only bench and the training
# bench read back through aquifer://, the node's statistics, then the node
# stopped (also when a step fails).
# usage: scripts/demo-node.sh AQUIFER DEMO_DIR RESULTS_DIR
set -euo pipefail
# The nodes started here accept unsigned requests: keys from the caller's
# environment or ~/.aws would be refused by them, so the clients go unsigned.
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE AQUIFER_CREDENTIALS
export AWS_SHARED_CREDENTIALS_FILE=/dev/null
AQ=$1 DIR=$2 RESULTS=$3
rm -rf "$DIR/node"
"$AQ" serve --data "$DIR/node" --listen 127.0.0.1:0 --metrics 127.0.0.1:0 --anonymous >"$DIR/node.log" 2>&1 &
node=$!
trap 'kill $node 2>/dev/null; wait $node 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  grep -q "auth:" "$DIR/node.log" 2>/dev/null && break
  kill -0 $node 2>/dev/null || { cat "$DIR/node.log"; exit 1; }
  sleep 0.1
done
addr=$(sed -n 's|^aquifer serve: S3 on http://\([^ ]*\) .*|\1|p' "$DIR/node.log")
metrics=$(sed -n 's|^  metrics: http://\([^/]*\)/metrics.*|\1|p' "$DIR/node.log")
[ -n "$addr" ] || { cat "$DIR/node.log"; exit 1; }
url="aquifer://$addr/demo/tfrecord"
echo "demo: storage node at $addr (metrics $metrics)"
set -x
"$AQ" cp -r "$DIR/tfrecord" "$url"
"$AQ" bench storage "$url" --readers 2 --duration 4 --ramp 1 --out "$RESULTS"
"$AQ" bench train "$url" --model resnet50 --gpu v100 --precision fp32 --gpus 1 --batch 64 --epochs 4 \
  --interval 0.5 --out "$RESULTS"
"$AQ" stats "$metrics"
