#!/usr/bin/python3
"""Deduplication on a real node, with photographs aquifer did not make:

  - scikit-image's photographs packed by `aquifer dataset pack` as TFRecord
    shards of their JPEGs and as WebDataset shards of raw pixels, copied to
    a node whose pool has the dedup policy (the pixels' pool compresses too),
    then `aquifer dataset expand -n 10` over aquifer://: the pools' files
    take at most 1.1x one copy's bytes; every copy reads back byte for byte
    (boto3, and `aquifer cp`); `/stats`, `aquifer stats` and `/metrics`
    count what was saved (promtool has nothing to say);
  - the node is killed (SIGKILL) while the expansion runs and again and
    again while the copies are deleted, and restarted each time: every
    object left reads whole, never damaged; a rerun of the expansion still
    stores one copy;
  - deleting all copies but the originals, then those, leaves no block file;
  - restarted without the policy the node reads shared blocks as before;
  - per bucket: a node whose default pool stores blocks as written and a
    second pool deduplicating and compressing, with a tier policy placing
    one bucket's new objects there: that bucket's copies share compressed
    blocks, the other bucket's are stored plain, each copy whole;
  - a cluster's node refuses the policy before it starts.

usage: dedup_test.py path/to/aquifer"""
import glob
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
import s3lib  # noqa: E402  (clears the caller's AWS settings)
import damaged_photos  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
check = s3lib.Checks()
tmp = tempfile.mkdtemp(prefix="aq_dedup_test_")
creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
os.environ["AQUIFER_CREDENTIALS"] = creds
aq = s3lib.Cli(AQ, timeout=240)
photos = damaged_photos.photo_dir(None, os.path.join(os.path.dirname(AQ), "photo-cache"))
DATA = os.path.join(tmp, "node")
BLOCK = 256 << 10
COPIES = 10
POOLS = ["--pool", f"fast={DATA}/fast,dedup", "--pool", f"deep={DATA}/deep,media=hdd,dedup,compress=zstd"]


def block_files(data=DATA, pools=("fast", "deep")):
    """(path, bytes) of every block file in the node's pools."""
    out = []
    for pool in pools:
        for p in glob.glob(os.path.join(data, pool, "blocks", "*", "*")):
            if not p.endswith(".tmp"):
                out.append((p, os.path.getsize(p)))
    return out


def start(*pools):
    return s3lib.Node(AQ, DATA, "--block-size", str(BLOCK), "--cache-size", "0", "--reclaim-delay", "0",
                      *(pools or POOLS), credentials=creds)


def kill(node):
    node.p.send_signal(signal.SIGKILL)
    node.p.wait()


def digest(body):
    return hashlib.sha256(body).hexdigest()


def listing(c):
    keys = {}
    for page in c.get_paginator("list_objects_v2").paginate(Bucket="data"):
        for o in page.get("Contents", []):
            keys[o["Key"]] = o["Size"]
    return keys


MANIFEST = "aquifer-manifest.json"  # rewritten by expand: read, not compared


def original(key):
    """The file a key (or its copy: train-00000-of-00002-copy-003.idx) was made from."""
    name = key.split("/")[-1]
    if "-copy-" not in name:
        return name
    stem, tail = name.split("-copy-")
    return stem + tail[3:]


def unreadable(c, want):
    """Objects listed whose bytes are not their original's."""
    bad = []
    for key in listing(c):
        body = c.get_object(Bucket="data", Key=key)["Body"].read()
        # (A temporary of expand's killed with it is not an original's copy.)
        if not key.endswith((MANIFEST, ".tmp")) and digest(body) != want.get(original(key)):
            bad.append(key)
    return bad


node = None
try:
    # Two real datasets: the JPEG files as shipped, and their pixels.
    folder = os.path.join(tmp, "folder")
    for i, p in enumerate(sorted(glob.glob(os.path.join(photos, "*.jpg")) + glob.glob(os.path.join(photos, "*.png")))):
        os.makedirs(os.path.join(folder, f"c{i % 2}"), exist_ok=True)
        shutil.copy(p, os.path.join(folder, f"c{i % 2}", os.path.basename(p)))
    jpegs, pixels = os.path.join(tmp, "jpegs"), os.path.join(tmp, "pixels")
    r = aq("dataset", "pack", folder, "-o", jpegs, "--shards", "2", "--no-progress")
    check(r.returncode == 0, f"pack the photographs as TFRecord shards: {r.stderr[-300:]}")
    r = aq("dataset", "pack", folder, "-o", pixels, "-f", "wds", "--shards", "2", "--image-form", "raw",
           "--max-side", "512", "--no-progress")
    check(r.returncode == 0, f"pack their pixels as WebDataset shards: {r.stderr[-300:]}")
    want = {}
    for d in (jpegs, pixels):
        for p in glob.glob(os.path.join(d, "*")) + glob.glob(os.path.join(d, "idx", "*")):
            if os.path.isfile(p):
                want[os.path.basename(p)] = digest(open(p, "rb").read())

    node = start()
    url = f"aquifer://127.0.0.1:{node.port}/data"
    check(aq("mb", url).returncode == 0, "make bucket")
    r = aq("tier", "policy", "add", "deep", "--pool", "deep", "--key", "pixels/*", "--data", DATA)
    check(r.returncode == 0, f"tier policy for pixels/*: {r.stderr}")
    time.sleep(2.5)  # the node re-reads the policies every 2 s
    for name, d in (("jpegs", jpegs), ("pixels", pixels)):
        r = aq("cp", "-r", d, f"{url}/{name}")
        check(r.returncode == 0, f"cp -r {name}: {r.stderr[-300:]}")
    one_copy = sum(size for _, size in block_files())
    logical = sum(listing(s3lib.boto(node.port)).values())
    print(f"  {len(want)} files, {logical / 1e6:.1f} MB, stored in {one_copy / 1e6:.1f} MB")

    # Expand, killed once midway: the objects there read whole.
    expand = subprocess.Popen([AQ, "dataset", "expand", f"{url}/jpegs", "-n", str(COPIES), "--no-progress", "-j", "2"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.4)
    kill(node)
    expand.kill()
    expand.wait()
    node = start()
    url = f"aquifer://127.0.0.1:{node.port}/data"
    c = s3lib.boto(node.port)
    bad = unreadable(c, want)
    check(not bad, f"after a kill -9 during expand every object reads whole: {bad[:5]}")
    for name in ("jpegs", "pixels"):
        r = aq("dataset", "expand", f"{url}/{name}", "-n", COPIES, "--no-progress", "--json")
        check(r.returncode == 0, f"expand {name} x{COPIES}: {r.stderr[-300:]}")
    keys = listing(c)
    copies = [k for k in keys if "-copy-" in k]
    logical = sum(keys.values())
    physical = sum(size for _, size in block_files())
    print(f"  x{COPIES}: {len(keys)} objects, {logical / 1e6:.1f} MB held in {physical / 1e6:.1f} MB of block files"
          f" ({physical / one_copy:.3f}x one copy)")
    expected = COPIES * sum(1 for name in want if name != MANIFEST)
    check(len(copies) == expected, f"the copies are there ({len(copies)} of {expected})")
    check(physical <= 1.1 * one_copy, f"{COPIES} copies take at most 1.1x one copy: {physical} vs {one_copy}")
    bad = unreadable(c, want)
    check(not bad, f"every copy reads back byte for byte: {bad[:5]}")
    some = sorted(copies)[len(copies) // 2]
    out = os.path.join(tmp, "copy.out")
    r = aq("cp", f"{url}/{some}", out)
    check(r.returncode == 0 and digest(open(out, "rb").read()) == want[original(some)],
          f"aquifer cp of a copy has its original's bytes: {r.stderr[-200:]}")
    r = aq("stat-file", f"data/{some}", "--data", DATA)
    check(r.returncode == 0 and ", shared" in r.stdout, f"stat-file shows a copy's blocks shared: {r.stdout[-300:]}")

    st = node.stats()
    pools = {p["name"]: p for p in st.get("pools", [])}
    saved = sum(p.get("dedup_saved_bytes", 0) for p in pools.values())
    held = sum(p.get("logical_bytes", 0) for p in pools.values())
    check(held == logical, f"/stats: the pools hold the objects' bytes ({held} vs {logical})")
    check(saved > 0.85 * logical, f"/stats: deduplication saved most of them ({saved} of {logical})")
    check(all(p.get("dedup") for p in pools.values()) and pools["deep"].get("ratio", 1) < 0.1,
          f"/stats: both pools dedup, the pixels' stored at under a tenth: {json.dumps(pools)[:500]}")
    writes = pools["fast"].get("dedup_writes", {})
    check(writes.get("found", 0) > 0 and writes.get("written", 0) > 0,
          f"/stats counts blocks found stored and written: {writes}")
    text = aq("stats", f"127.0.0.1:{node.metrics}").stdout
    check("dedup:" in text and "shared blocks" in text, f"aquifer stats shows what dedup saved: {text[-400:]}")
    m = urllib.request.urlopen(f"http://127.0.0.1:{node.metrics}/metrics", timeout=10).read().decode()
    check('aquifer_pool_dedup_saved_bytes{pool="fast"}' in m and
          'aquifer_pool_dedup_writes_total{pool="fast",content="found"}' in m,
          "/metrics has the saved bytes and the dedup counters")
    if shutil.which("promtool"):
        p = subprocess.run(["promtool", "check", "metrics"], input=m, capture_output=True, text=True)
        check(p.returncode == 0 and not (p.stdout + p.stderr).strip(),
              f"promtool has nothing to say of /metrics: {p.stdout}{p.stderr}")

    # Delete every copy, the node killed now and then: whatever is left reads whole.
    rng = random.Random(3)
    kills = 0
    todo = list(copies)
    rng.shuffle(todo)
    while todo:
        stop = threading.Event()
        c = s3lib.boto(node.port)

        def delete(c=c):
            while todo and not stop.is_set():
                try:
                    c.delete_object(Bucket="data", Key=todo[-1])
                    todo.pop()
                except Exception:  # noqa: BLE001 -- the node was killed under it
                    return
        t = threading.Thread(target=delete)
        t.start()
        time.sleep(rng.uniform(0.002, 0.03))
        if todo and kills < 10:
            kill(node)
            kills += 1
            stop.set()
            t.join()
            node = start()
            bad = unreadable(s3lib.boto(node.port), want)
            check(not bad, f"after kill -9 #{kills} during deletes every object left reads whole: {bad[:5]}")
        else:
            t.join()
    print(f"  copies deleted with {kills} kill -9s")
    c = s3lib.boto(node.port)
    left = listing(c)
    check(all("-copy-" not in k for k in left), f"the copies are gone: {[k for k in left if '-copy-' in k][:3]}")
    check(not unreadable(c, want), "the originals read whole")
    physical = sum(size for _, size in block_files())
    check(physical <= 1.01 * one_copy, f"the originals' blocks are what is left: {physical} vs {one_copy}")

    # Restarted without the policy: the shared blocks read as before.
    node.stop()
    node = start("--pool", f"fast={DATA}/fast", "--pool", f"deep={DATA}/deep,media=hdd")
    c = s3lib.boto(node.port)
    check(not unreadable(c, want), "without the policy every object reads whole")
    c.put_object(Bucket="data", Key="plain/again", Body=b"x" * 1000)
    node.stop()
    node = start()
    c = s3lib.boto(node.port)
    for key in listing(c):
        c.delete_object(Bucket="data", Key=key)
    left = s3lib.until(lambda: not block_files(), 20)
    check(left, f"deleting the last objects removes every block file: {block_files()[:3]}")
    node.stop()
    node = None

    # Per bucket: the reduction policies are the pools', and a tier policy
    # places a bucket's new objects in the pool whose policy it wants.
    data2 = os.path.join(tmp, "per-bucket")
    node = s3lib.Node(AQ, data2, "--block-size", str(BLOCK), "--cache-size", "0", "--pool", f"plain={data2}/plain",
                      "--pool", f"reduced={data2}/reduced,dedup,compress=zstd", credentials=creds)
    r = aq("tier", "policy", "add", "pixels", "--pool", "reduced", "--bucket", "pixels", "--data", data2)
    check(r.returncode == 0, f"tier policy for the bucket 'pixels': {r.stderr}")
    time.sleep(2.5)  # the node re-reads the policies every 2 s
    c = s3lib.boto(node.port)
    shard = sorted(glob.glob(os.path.join(pixels, "*.tar")))[0]
    body = open(shard, "rb").read()
    for bucket in ("pixels", "plain"):
        c.create_bucket(Bucket=bucket)
        for i in range(3):
            c.put_object(Bucket=bucket, Key=f"copy-{i}.tar", Body=body)
    reduced = sum(size for _, size in block_files(data2, ("reduced",)))
    plain = sum(size for _, size in block_files(data2, ("plain",)))
    blocks = -(-len(body) // BLOCK)
    print(f"  per bucket: 3 copies of {len(body) / 1e6:.1f} MB of pixels: {reduced / 1e6:.1f} MB in the reduced "
          f"pool, {plain / 1e6:.1f} MB in the plain one")
    check(0 < len(block_files(data2, ("reduced",))) <= blocks and reduced <= 0.7 * len(body),
          f"the bucket placed in the reduced pool keeps one compressed copy: {reduced} bytes in "
          f"{len(block_files(data2, ('reduced',)))} files for {len(body)} bytes in {blocks} blocks")
    check(len(block_files(data2, ("plain",))) == 3 * blocks and plain >= 3 * len(body),
          f"the other bucket's copies are stored as written: {plain} bytes for 3 x {len(body)}")
    same = all(digest(c.get_object(Bucket=b, Key=f"copy-{i}.tar")["Body"].read()) == digest(body)
               for b in ("pixels", "plain") for i in range(3))
    check(same, "every copy in both buckets reads back whole")

    r = aq("serve", "--anonymous", "--data", os.path.join(tmp, "cnode"), "--meta", "etcd://127.0.0.1:9", "--pool",
           f"p={tmp}/cnode/p,dedup", timeout=30)
    check(r.returncode != 0 and "dedup" in r.stderr and "cluster" in r.stderr,
          f"a cluster's node refuses the dedup policy: rc {r.returncode} {r.stderr[-300:]}")
finally:
    if node is not None and node.p.poll() is None:
        node.stop()
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
