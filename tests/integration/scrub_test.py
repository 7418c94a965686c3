#!/usr/bin/python3
"""The scrubber on a real cluster (etcd and four node processes on
127.0.0.1) and on a single node:

  - pieces of 20 objects damaged on disk behind the nodes' backs (bytes
    flipped, files truncated, files deleted; erasure-code fragments of an
    ec:2+1 bucket and replicas of a 2-replica bucket, on nodes whose pools
    compress with lz4, zstd, zstd:9 or not at all): one scrub pass on each
    node finds every one and rebuilds it from the good pieces; every object
    then reads back whole; `cluster status` reports what was found and exits 0;
  - a stripe with more pieces damaged than it can lose: the scrubber cannot
    rebuild it, `cluster status` names the object and exits non-zero;
  - a single node (no other copy): a flipped block is reported with its
    object by `aquifer stats`, never "repaired".

usage: scrub_test.py path/to/aquifer"""
import hashlib
import glob
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402  (clears the caller's AWS settings)


AQ = os.path.abspath(sys.argv[1])
check = s3lib.Checks()
tmp = tempfile.mkdtemp(prefix="aq_scrub_test_")
creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
os.environ["AQUIFER_CREDENTIALS"] = creds
until = s3lib.until
SCRUB = ["--scrub-interval", "2s", "--scrub-rate", "500"]

etcd = s3lib.Etcd(tmp)
META = etcd.url
# The nodes' pools compress differently (one not at all): a piece rebuilt
# onto a node takes that node's form, and every form is verified.
COMPRESS = {"n1": "lz4", "n2": "zstd", "n3": "none", "n4": "zstd:9"}
nodes = {n: s3lib.ClusterNode(AQ, tmp, n, META, creds, "--replicas", "2", "--lease-ttl", "3", "--block-size", "1MiB",
                              "--cache-size", "0", "--pool",
                              f"default={os.path.join(tmp, n, 'pool-default')},compress={COMPRESS[n]}", *SCRUB)
         for n in ("n1", "n2", "n3", "n4")}
single = None


aq = s3lib.Cli(AQ)


client = s3lib.boto


def scrub(name):
    r = aq("stats", f"127.0.0.1:{nodes[name].metrics}", "--json")
    return json.loads(r.stdout or "{}").get("scrub", {})


def status():
    r = aq("cluster", "status", "--meta", META, "--json")
    return r.returncode, json.loads(r.stdout or "{}"), r.stderr


def pieces(bucket, key):
    """(node, piece id) of every stored piece of the object's blocks."""
    r = aq("stat-file", f"{bucket}/{key}", "--meta", META, "--json")
    out = []
    for b in json.loads(r.stdout).get("blocks", []):
        if b.get("fragments"):
            out += [(f["node"], f["id"]) for f in b["fragments"]]
        else:
            out += [(n, b["id"]) for n in b["nodes"]]
    return out


def path_of(root, piece):
    return os.path.join(root, "pool-default", "blocks", piece[:2], piece)


def damage(path, how):
    if how == "flip":
        with open(path, "r+b") as f:
            f.seek(os.path.getsize(path) - 10)
            b = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([b[0] ^ 0x5A]))
    elif how == "truncate":
        os.truncate(path, os.path.getsize(path) // 2)
    else:
        os.unlink(path)


def one_pass_everywhere():
    """Waits until every node has finished a pass that started after now."""
    start = {n: scrub(n).get("passes", 0) for n in nodes}
    return until(lambda: all(scrub(n).get("passes", 0) >= start[n] + 2 for n in nodes), 60, 0.5)


try:
    c = client(nodes["n1"].port)
    for b in ("ecs", "rep"):
        r = aq("mb", f"aquifer://127.0.0.1:{nodes['n1'].port}/{b}")
        check(r.returncode == 0, f"mb {b}: {r.stderr}")
    r = aq("cluster", "protect", "ecs", "--ec", "2+1", "--meta", META)
    check(r.returncode == 0, "protect ecs --ec 2+1: " + r.stderr)
    r = aq("cluster", "protect", "rep", "--replicas", "2", "--meta", META)
    check(r.returncode == 0, "protect rep --replicas 2: " + r.stderr)
    time.sleep(2.5)  # the nodes re-read the policies every 2 s
    objects = {}
    for i in range(12):
        body = os.urandom((2 << 20) + 777 * i)
        c.put_object(Bucket="ecs", Key=f"e/{i:02d}", Body=body)
        objects[("ecs", f"e/{i:02d}")] = hashlib.md5(body).hexdigest()
    # Text compresses (random bytes, above, do not): the rep bucket's
    # replicas are stored compressed on n1, n2 and n4.
    text = open("/usr/share/common-licenses/GPL-3", "rb").read()
    for i in range(10):
        n = (1 << 20) + 333 * i
        body = (os.urandom(16).hex().encode() + text * (n // len(text) + 1))[:n]
        c.put_object(Bucket="rep", Key=f"r/{i:02d}", Body=body)
        objects[("rep", f"r/{i:02d}")] = hashlib.md5(body).hexdigest()
    rc, st, err = status()
    check(rc == 0 and st.get("fully_protected"), f"fully protected after the writes: rc {rc} {err}")

    # One piece of each of 20 objects, damaged three ways.
    before = {n: scrub(n) for n in nodes}
    damaged = []
    hows = ("flip", "truncate", "delete")
    for i, (bucket, key) in enumerate(sorted(objects)[:20]):
        node, piece = pieces(bucket, key)[i % 2]
        damage(path_of(os.path.join(tmp, node), piece), hows[i % 3])
        damaged.append((node, piece, f"{bucket}/{key}", hows[i % 3]))
    check(one_pass_everywhere(), "every node finishes a scrub pass")
    after = {n: scrub(n) for n in nodes}
    found = sum(after[n].get("corrupt", 0) + after[n].get("missing", 0) - before[n].get("corrupt", 0)
                - before[n].get("missing", 0) for n in nodes)
    repaired = sum(after[n].get("repaired", 0) - before[n].get("repaired", 0) for n in nodes)
    check(found == 20 and repaired == 20, f"one pass finds the 20 damaged pieces ({found}) and rebuilds them "
          f"({repaired}): " + json.dumps({n: after[n].get("findings", [])[:3] for n in nodes})[:800])
    whole = [p for node, p, _, _ in damaged if os.path.exists(path_of(os.path.join(tmp, node), p))]
    check(len(whole) == 20, f"every damaged piece is on its node again ({len(whole)} of 20)")
    # A rebuilt replica of a text block has its node's form again.
    forms = {}
    for node, p, name, how in damaged:
        if name.startswith("rep/"):
            with open(path_of(os.path.join(tmp, node), p), "rb") as f:
                forms[(node, p)] = f.read(8)
    wrong_form = {k: v for k, v in forms.items()
                  if v != (b"AQBLK001" if COMPRESS[k[0]] == "none" else b"AQBLKZ01")}
    check(forms and not wrong_form, f"rebuilt text replicas take their node's form: {len(forms)} looked at, "
          f"wrong: {wrong_form}")
    verified = sum(hashlib.md5(client(nodes["n2"].port).get_object(Bucket=b, Key=k)["Body"].read()).hexdigest() == h
                   for (b, k), h in objects.items())
    check(verified == len(objects), f"every object reads back whole ({verified} of {len(objects)})")
    # The nodes publish their counts with their status every 2 s: wait for the last repair to show.
    until(lambda: status()[1].get("scrub", {}).get("repaired", 0) >= 20, 15, 0.5)
    rc, st, err = status()
    sc = st.get("scrub", {})
    check(rc == 0 and sc.get("repaired", 0) >= 20 and sc.get("unrepaired", 1) == 0,
          f"cluster status reports what the scrubbers found and exits 0: rc {rc} {json.dumps(sc)} {err}")
    def reduction():
        """(the text line, physical bytes, logical bytes) cluster status shows (nodes publish every 10 s)."""
        line = [t for t in aq("cluster", "status", "--meta", META).stdout.splitlines() if "data reduction" in t]
        js = status()[1].get("nodes", [])
        return (line, sum(n.get("status", {}).get("pool_bytes", 0) for n in js),
                sum(n.get("status", {}).get("pool_logical_bytes", 0) for n in js))
    until(lambda: reduction()[1] < 0.9 * reduction()[2], 25, 1)
    red = reduction()
    check(red[0] and 0 < red[1] < 0.9 * red[2],
          f"cluster status shows the data reduction, physical below logical: {red}")
    per_node_verified = sum(after[n].get("pieces_verified", 0) for n in nodes)
    print(f"  {per_node_verified} pieces verified, {found} found bad, {repaired} rebuilt")

    # Two of the three pieces of a stripe: nothing left to rebuild from.
    lost = pieces("ecs", "e/11")[:2]
    for node, piece in lost:
        damage(path_of(os.path.join(tmp, node), piece), "flip")
    check(one_pass_everywhere(), "a pass after the stripe is lost")
    rc, st, err = status()
    text = aq("cluster", "status", "--meta", META)
    check(rc != 0 and "ecs/e/11" in st.get("scrub", {}).get("objects_at_risk", [])
          and "AT RISK ecs/e/11" in text.stdout,
          f"cluster status names the object it cannot rebuild and exits non-zero: rc {rc} "
          f"{json.dumps(st.get('scrub'))} {text.stdout[-300:]}")
    # The lost stripe's damaged fragments are not deleted: each is kept,
    # byte for byte as damaged, in its pool's quarantine folder, and named.
    kept = []
    for node, piece in lost:
        kept += glob.glob(os.path.join(tmp, node, "pool-default", "quarantine", piece + ".*"))
    quarantined = st.get("scrub", {}).get("quarantined", {})
    check(len(kept) >= 2 and sum(v.get("files", 0) for v in quarantined.values()) >= 2 and "QUARANTINE" in text.stdout,
          f"the damaged pieces of the lost stripe are kept in quarantine, not deleted: {kept} {quarantined} "
          f"{text.stdout[-400:]}")

    def metric(name, line_name):
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{nodes[name].metrics}/metrics") as r:
            for line in r.read().decode().splitlines():
                if line.startswith(line_name + " "):
                    return float(line.split()[1])
        return None
    bad_pieces = [metric(n, "aquifer_scrub_unrepaired_pieces") for n in nodes]
    check(None not in bad_pieces and sum(bad_pieces) >= 2,
          f"/metrics has the pieces the scrubbers could not rebuild: {bad_pieces}")

    # A single node: reported, never repaired.
    single = s3lib.Node(AQ, os.path.join(tmp, "single"), *SCRUB, credentials=creds)
    sc1 = client(single.port)
    sc1.create_bucket(Bucket="one")
    sc1.put_object(Bucket="one", Key="k", Body=os.urandom(300_000))
    ids = [n for _, _, fs in os.walk(os.path.join(tmp, "single", "pool-default", "blocks")) for n in fs]
    damage(path_of(os.path.join(tmp, "single"), ids[0]), "flip")
    first = json.loads(aq("stats", f"127.0.0.1:{single.metrics}", "--json").stdout).get("scrub", {}).get("passes", 0)
    until(lambda: json.loads(aq("stats", f"127.0.0.1:{single.metrics}", "--json").stdout)["scrub"]["passes"]
          >= first + 2, 30, 0.5)
    st1 = json.loads(aq("stats", f"127.0.0.1:{single.metrics}", "--json").stdout)["scrub"]
    text = aq("stats", f"127.0.0.1:{single.metrics}").stdout
    check(st1.get("unrepaired") == 1 and st1.get("objects_at_risk") == ["one/k"] and "at risk: one/k" in text,
          f"a single node reports the damaged object: {json.dumps(st1)[:400]}")
finally:
    for n in nodes.values():
        if n.p.poll() is None:
            n.p.kill()
            n.p.wait()
    if single is not None:
        single.stop()
    etcd.stop()
    if check.failed == 0:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print("kept", tmp)
check.finish()
