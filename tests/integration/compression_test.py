#!/usr/bin/python3
"""Inline compression on a real node, with files aquifer did not make:

  - a node whose default pool compresses with lz4 and whose second pool
    (chosen for keys under z/ by a tiering policy) with zstd:9 stores, through
    boto3, scikit-image's photographs (JPEG and PNG as shipped), a tar shard of
    the JPEGs, the same photographs as raw pixels (PPM, what `dataset pack
    --image-form raw` stores), Debian's license texts and the aquifer binary;
  - every object reads back whole and in 200 random ranges (across block
    boundaries), byte for byte;
  - text, pixels and the binary are stored compressed, the JPEGs and the
    PNG plain (their block files' magic), and `/stats`, `aquifer stats` and
    `/metrics` count logical against physical bytes (promtool has nothing to
    say of the metrics);
  - restarted without any compression policy the node reads every object
    as before, and new writes are plain;
  - a byte flipped in a compressed block file on disk makes its reads fail
    (an error, never other bytes; `aquifer cp` says the node could not read
    a block at once rather than waiting out an outage) and `stat-file
    --verify` names the piece.

usage: compression_test.py path/to/aquifer"""
import glob
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
import s3lib  # noqa: E402  (clears the caller's AWS settings)
import damaged_photos  # noqa: E402

from boto3.s3.transfer import TransferConfig  # noqa: E402
from PIL import Image  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
check = s3lib.Checks()
tmp = tempfile.mkdtemp(prefix="aq_compression_test_")
creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
os.environ["AQUIFER_CREDENTIALS"] = creds
aq = s3lib.Cli(AQ)
photos = damaged_photos.photo_dir(None, os.path.join(os.path.dirname(AQ), "photo-cache"))
DATA = os.path.join(tmp, "node")
BLOCK = 256 << 10
POOLS = ["--pool", f"fast={DATA}/fast,compress=lz4", "--pool", f"deep={DATA}/deep,media=hdd,compress=zstd:9"]


def ppm(path):
    img = Image.open(path).convert("RGB")
    return f"P6\n{img.width} {img.height}\n255\n".encode() + img.tobytes()


def objects():
    """key -> (bytes, whether its blocks should compress: True, False, or None for either).

    Pixels do not shrink by a tenth under lz4 (it has no entropy coder), so
    the fast pool may keep them plain; zstd (with its delta filter) must
    compress them. Photographs as their own files (JPEG, PNG) are mostly
    plain, but a block of one may shrink (retina.jpg's black border): the
    rule checked for them is that no block is ever stored larger, and that
    any compressed block saved at least the policy's tenth."""
    out = {}
    jpegs = sorted(glob.glob(os.path.join(photos, "*.jpg")))
    pngs = sorted(glob.glob(os.path.join(photos, "*.png")))
    for p in jpegs:
        out[f"jpeg/{os.path.basename(p)}"] = (open(p, "rb").read(), False)
    out[f"png/{os.path.basename(pngs[0])}"] = (open(pngs[0], "rb").read(), False)
    shard = io.BytesIO()
    with tarfile.open(fileobj=shard, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for p in jpegs:
            t.add(p, arcname=os.path.basename(p))
    out["shards/jpegs-000000.tar"] = (shard.getvalue(), False)
    for p in pngs[:3] + jpegs[:1]:
        name = os.path.splitext(os.path.basename(p))[0]
        out[f"raw/{name}.ppm"] = (ppm(p), None)
        out[f"z/raw/{name}.ppm"] = (ppm(p), True)  # the zstd pool
    licenses = b"".join(open(p, "rb").read() for p in sorted(glob.glob("/usr/share/common-licenses/*"))
                        if os.path.isfile(p))
    out["text/licenses.txt"] = (licenses, True)
    out["z/text/licenses.txt"] = (licenses, True)
    out["bin/aquifer"] = (open(AQ, "rb").read()[:6 << 20], True)
    return out


def blocks_of(key, bucket="data"):
    r = aq("stat-file", f"{bucket}/{key}", "--data", DATA, "--json")
    return json.loads(r.stdout).get("blocks", []) if r.returncode == 0 else []


def magic(path):
    with open(path, "rb") as f:
        return f.read(8)


def metrics(port):
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


node = None
try:
    node = s3lib.Node(AQ, DATA, "--block-size", str(BLOCK), "--cache-size", "0", *POOLS, credentials=creds)
    r = aq("tier", "policy", "add", "deep", "--pool", "deep", "--key", "z/*", "--data", DATA)
    check(r.returncode == 0, f"tier policy for z/*: {r.stderr}")
    time.sleep(2.5)  # the node re-reads the policies every 2 s
    c = s3lib.boto(node.port)
    c.create_bucket(Bucket="data")
    want = objects()
    multipart = TransferConfig(multipart_threshold=1 << 20, multipart_chunksize=1 << 20)
    for key, (body, _) in want.items():
        c.upload_fileobj(io.BytesIO(body), "data", key, Config=multipart)
    logical = sum(len(b) for b, _ in want.values())
    print(f"  {len(want)} objects, {logical / 1e6:.1f} MB")

    # Whole and in ranges, byte for byte.
    whole = sum(c.get_object(Bucket="data", Key=k)["Body"].read() == b for k, (b, _) in want.items())
    check(whole == len(want), f"every object reads back whole ({whole} of {len(want)})")
    rng = random.Random(7)
    bad_ranges = []
    keys = sorted(want)
    for i in range(200):
        key = keys[i % len(keys)]
        body = want[key][0]
        if i % 4 == 0:  # across a block boundary
            edge = BLOCK * rng.randrange(1, max(2, len(body) // BLOCK + 1))
            start = max(0, min(len(body) - 1, edge - rng.randrange(1, 5000)))
        else:
            start = rng.randrange(len(body))
        end = min(len(body) - 1, start + rng.randrange(1, 3 * BLOCK))
        got = c.get_object(Bucket="data", Key=key, Range=f"bytes={start}-{end}")["Body"].read()
        if got != body[start:end + 1]:
            bad_ranges.append((key, start, end))
    check(not bad_ranges, f"200 random ranges read back byte for byte: wrong {bad_ranges[:5]}")

    # Each block file's form: compressible data compressed, JPEG/PNG plain.
    forms = {}
    for key, (body, compressible) in want.items():
        blocks = [b for b in blocks_of(key) if b.get("path")]
        files = [b["path"] for b in blocks]
        kinds = {magic(p) for p in files}
        forms[key] = sorted(k.decode() for k in kinds)
        pool = "deep" if key.startswith("z/") else "fast"
        check(files and all(f"/{pool}/" in p for p in files), f"{key}: its blocks are in pool {pool}: {files[:2]}")
        if compressible:
            check(b"AQBLKZ01" in kinds, f"{key}: stored compressed ({kinds})")
        # Never larger; compressed only where it saved at least a tenth.
        for b in blocks:
            size = os.path.getsize(b["path"])
            if magic(b["path"]) == b"AQBLKZ01":
                check(size - 40 <= 0.9 * b["size"], f"{key}: a compressed block saves a tenth ({size} of {b['size']})")
            else:
                check(size == b["size"] + 24, f"{key}: a plain block is its bytes and the header ({size})")
    shown = aq("stat-file", "data/z/raw/chelsea.ppm", "--data", DATA).stdout
    check("zstd:" not in shown and "zstd+delta 0." in shown,
          f"stat-file shows each block's stored form and ratio: {shown[-500:]}")
    check(all(b.get("stored") == "plain" for b in blocks_of("jpeg/rocket.jpg")),
          f"stat-file --json says a JPEG's blocks are plain: {blocks_of('jpeg/rocket.jpg')[:1]}")
    plain_photos = [k for k in ("jpeg/rocket.jpg", "jpeg/hubble_deep_field.jpg", "shards/jpegs-000000.tar")
                    if forms.get(k) == ["AQBLK001"]]
    check(len(plain_photos) >= 2, f"JPEG photographs and their shard are stored plain: {forms}")
    print("  forms: " + json.dumps(forms))

    # Logical against physical: /stats, aquifer stats, /metrics.
    st = node.stats()
    pools = {p["name"]: p for p in st.get("pools", [])}
    check(pools.get("fast", {}).get("logical_bytes", 0) + pools.get("deep", {}).get("logical_bytes", 0) == logical,
          f"the pools' logical bytes are the objects' bytes ({logical}): {json.dumps(pools)[:600]}")
    physical = {name: p.get("bytes", 0) for name, p in pools.items()}
    ratios = {name: p.get("ratio") for name, p in pools.items()}
    check(all(0 < r < 0.9 for r in ratios.values()), f"both pools store less than they hold: {ratios} {physical}")
    check(pools.get("deep", {}).get("compression") == "zstd:9" and pools.get("fast", {}).get("compression") == "lz4",
          f"/stats names each pool's policy: {[(n, p.get('compression')) for n, p in pools.items()]}")
    writes = pools.get("fast", {}).get("compression_writes", {})
    check(writes.get("compressed", 0) > 0 and writes.get("plain", 0) > 0,
          f"the fast pool counts blocks stored compressed and plain: {writes}")
    text = aq("stats", f"127.0.0.1:{node.metrics}").stdout
    check("policy lz4" in text and "policy zstd:9" in text and "blocks compressed" in text,
          f"aquifer stats shows each pool's logical bytes and policy: {text[-600:]}")
    m = metrics(node.metrics)
    check('aquifer_pool_logical_bytes{pool="fast"}' in m and
          'aquifer_pool_compression_writes_total{pool="fast",stored="plain"}' in m,
          "/metrics has the logical bytes and the compression counters")
    if shutil.which("promtool"):
        p = subprocess.run(["promtool", "check", "metrics"], input=m, capture_output=True, text=True)
        check(p.returncode == 0 and not (p.stdout + p.stderr).strip(),
              f"promtool has nothing to say of /metrics: {p.stdout}{p.stderr}")
    print(f"  stored: {json.dumps({n: (physical[n], round(ratios[n], 3)) for n in physical})}")

    # Restarted without compression: everything reads back; new writes plain.
    node.stop()
    node = s3lib.Node(AQ, DATA, "--block-size", str(BLOCK), "--cache-size", "0",
                      "--pool", f"fast={DATA}/fast", "--pool", f"deep={DATA}/deep,media=hdd", credentials=creds)
    c = s3lib.boto(node.port)
    whole = sum(c.get_object(Bucket="data", Key=k)["Body"].read() == b for k, (b, _) in want.items())
    check(whole == len(want), f"without the policy every object still reads back whole ({whole} of {len(want)})")
    body = want["text/licenses.txt"][0]
    c.put_object(Bucket="data", Key="text/again.txt", Body=body)
    kinds = {magic(b["path"]) for b in blocks_of("text/again.txt")}
    check(kinds == {b"AQBLK001"}, f"a pool without the policy writes plain blocks: {kinds}")
    pools = {p["name"]: p for p in node.stats().get("pools", [])}
    check(sum(p.get("logical_bytes", 0) for p in pools.values()) == logical + len(body),
          "the logical count survives the restart (read from the block files' headers)")

    # A flipped byte in a compressed block: an error, never other bytes.
    victim = "raw/" + os.path.splitext(os.path.basename(sorted(glob.glob(os.path.join(photos, "*.png")))[0]))[0] + \
        ".ppm"
    blocks = blocks_of(victim)
    path = next(b["path"] for b in blocks if magic(b["path"]) == b"AQBLKZ01")
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        x = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([x[0] ^ 0x20]))
    got = None
    try:
        got = c.get_object(Bucket="data", Key=victim)["Body"].read()
    except Exception as e:  # noqa: BLE001 -- a refused or cut read is the right answer
        got = e
    check(not isinstance(got, bytes) or got != want[victim][0] and len(got) < len(want[victim][0]),
          f"a damaged compressed block fails its read: {type(got).__name__} "
          f"{len(got) if isinstance(got, bytes) else got}")
    r = aq("cp", f"aquifer://127.0.0.1:{node.port}/data/{victim}", os.path.join(tmp, "out.ppm"))
    check(r.returncode != 0 and not os.path.exists(os.path.join(tmp, "out.ppm")) and
          "could not read a block" in r.stderr,
          f"aquifer cp of the damaged object fails and writes nothing: rc {r.returncode} {r.stderr[-300:]}")
    r = aq("stat-file", f"data/{victim}", "--data", DATA, "--verify")
    check(r.returncode != 0 and "checksum" in (r.stdout + r.stderr),
          f"stat-file names the damaged piece: rc {r.returncode} {(r.stdout + r.stderr)[-400:]}")
finally:
    if node is not None and node.p.poll() is None:
        node.stop()
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
