#!/usr/bin/python3
"""Tiering on a real node with an ssd and an hdd pool: policies added,
listed and removed with `aquifer tier policy`; a dry run counts; a pass
(`aquifer tier run`) moves the matching objects' blocks to the hdd pool
while readers read every object in a loop and a writer overwrites one of
them: zero failed reads, every byte verified; `stat-file` shows each
block's pool and media; `tier status` has nothing left to move; after a
restart every object reads back and no pool holds a copy its layout does
not name. Bad policies are refused.
usage: tier_test.py path/to/aquifer"""
import glob
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
check = s3lib.Checks()
tmp = tempfile.mkdtemp(prefix="aq_tier_test_")
creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
data = f"{tmp}/data"
args = ["--pool", f"ssd={tmp}/ssd,media=ssd", "--pool", f"hdd={tmp}/hdd,media=hdd,latency=1ms",
        "--block-size", "64KiB", "--tier-interval", "0", "--tier-rate", "20", "--cache-size", "0",
        "--atime-granularity", "1"]


aq = s3lib.Cli(AQ, timeout=120)


def files(pool):
    return len(glob.glob(f"{tmp}/{pool}/blocks/*/*"))


try:
    node = s3lib.Node(AQ, data, *args, credentials=creds)
    c = s3lib.boto(node.port)
    c.create_bucket(Bucket="lake")
    objects = {}
    for i in range(6):
        for prefix in ("train", "archive"):
            body = os.urandom(300_000 + 1000 * i)
            objects[f"{prefix}/part-{i}"] = hashlib.md5(body).hexdigest()
            c.put_object(Bucket="lake", Key=f"{prefix}/part-{i}", Body=body)
    check(files("hdd") == 0 and files("ssd") > 0, "writes land in the first pool")

    r = aq("tier", "policy", "add", "cold", "--pool", "nosuch", "--key", "archive/*", "--data", data)
    check(r.returncode != 0 and "no pool 'nosuch'" in r.stderr, "a policy naming no pool is refused: " + r.stderr)
    r = aq("tier", "policy", "add", "cold", "--pool", "hdd", "--key", "archive/*", "--data", data)
    check(r.returncode == 0, "policy add cold: " + r.stderr)
    r = aq("tier", "policy", "add", "keep", "--pool", "ssd", "--key", "archive/part-0", "--at", "0", "--data", data)
    check(r.returncode == 0, "policy add keep first: " + r.stderr)
    r = aq("tier", "policy", "add", "cold", "--pool", "hdd", "--data", data)
    check(r.returncode != 0 and "exists" in r.stderr, "a second policy of the same name is refused")
    r = aq("tier", "policy", "add", "x", "--pool", "hdd", "--older-than", "soon", "--data", data)
    check(r.returncode != 0 and "expected an age" in r.stderr, "a bad age is refused: " + r.stderr)
    r = aq("tier", "policy", "list", "--data", data, "--json")
    names = [p["name"] for p in json.loads(r.stdout or "[]")]
    check(names == ["keep", "cold"], f"policies in order of precedence: {names}")

    r = aq("tier", "run", "--dry-run", "--data", data, "--timeout", "30", "--json")
    rep = json.loads(r.stdout or "{}")
    check(r.returncode == 0 and rep.get("dry_run") and rep.get("blocks_to_move", 0) > 0 and rep.get(
        "blocks_moved") == 0, "a dry run counts and moves nothing: " + r.stdout[-300:] + r.stderr)
    check(files("hdd") == 0, "... nothing moved")

    # The pass, under reads of every object and an overwrite of one.
    stop = threading.Event()
    reads = {"ok": 0, "bad": 0, "err": []}
    seen = {k: {h} for k, h in objects.items()}  # every version a reader may see

    def reader():
        rc = s3lib.boto(node.port)
        while not stop.is_set():
            for k, h in list(objects.items()):
                try:
                    got = hashlib.md5(rc.get_object(Bucket="lake", Key=k)["Body"].read()).hexdigest()
                    reads["ok" if got in seen[k] else "bad"] += 1
                except Exception as e:  # noqa: BLE001
                    reads["bad"] += 1
                    reads["err"].append(str(e)[:200])

    def writer():
        wc = s3lib.boto(node.port)
        for n in range(5):
            body = os.urandom(200_000 + n)
            seen["archive/part-3"].add(hashlib.md5(body).hexdigest())
            wc.put_object(Bucket="lake", Key="archive/part-3", Body=body)
            objects["archive/part-3"] = hashlib.md5(body).hexdigest()

    threads = [threading.Thread(target=reader) for _ in range(2)] + [threading.Thread(target=writer)]
    for t in threads:
        t.start()
    r = aq("tier", "run", "--data", data, "--timeout", "60", "--json")
    stop.set()
    for t in threads:
        t.join()
    rep = json.loads(r.stdout or "{}")
    check(r.returncode == 0 and rep.get("blocks_moved", 0) > 0, "tier run moved blocks: " + r.stdout[-400:] + r.stderr)
    check(reads["bad"] == 0 and reads["ok"] > 0,
          f"reads during the move: {reads['ok']} verified, {reads['bad']} failed {reads['err'][:2]}")
    r = aq("tier", "run", "--data", data, "--timeout", "60", "--json")  # what the overwrite left behind
    check(r.returncode == 0, "a second pass: " + r.stderr)

    r = aq("stat-file", "lake/archive/part-1", "--data", data, "--verify", "--json")
    blocks = json.loads(r.stdout or "{}").get("blocks", [])
    check(r.returncode == 0 and blocks and all(b["pool"] == "hdd" and b.get("media") == "hdd" for b in blocks),
          "stat-file: an archive object's blocks are on the hdd pool: " + json.dumps(blocks)[:400] + r.stderr)
    r = aq("stat-file", "lake/archive/part-0", "--data", data, "--json")
    check(all(b["pool"] == "ssd" for b in json.loads(r.stdout or "{}").get("blocks", [])),
          "the first policy wins: archive/part-0 stays on ssd")
    r = aq("tier", "status", "--data", data, "--json")
    st = json.loads(r.stdout or "{}")
    cold = next((p for p in st.get("policies", []) if p["name"] == "cold"), {})
    check(cold.get("objects") == 5 and cold.get("misplaced_blocks") == 0, "tier status: cold has nothing left to "
          f"move: {cold}")
    check(st.get("pools", {}).get("hdd", {}).get("blocks", 0) > 0, "tier status counts blocks per pool")

    r = aq("tier", "policy", "rm", "keep", "--data", data)
    check(r.returncode == 0, "policy rm: " + r.stderr)
    r = aq("tier", "policy", "rm", "keep", "--data", data)
    check(r.returncode != 0 and "no policy" in r.stderr, "removing it twice is refused")

    node.stop()
    node = s3lib.Node(AQ, data, *args, credentials=creds)
    c = s3lib.boto(node.port)
    same = all(hashlib.md5(c.get_object(Bucket="lake", Key=k)["Body"].read()).hexdigest() == h
               for k, h in objects.items())
    check(same, "every object reads back after a restart")
    # Only the blocks the layouts name, each in its pool (old copies are gone).
    named = {"ssd": 0, "hdd": 0}
    for k in objects:
        for b in json.loads(aq("stat-file", f"lake/{k}", "--data", data, "--json").stdout or "{}").get("blocks", []):
            named[b["pool"]] += 1
    check(files("ssd") == named["ssd"] and files("hdd") == named["hdd"],
          f"no stray copies: files ssd {files('ssd')} hdd {files('hdd')}, layouts {named}")

    # Last access: train/part-0 is read, the other train objects are not.
    r = aq("tier", "policy", "add", "idle", "--media", "tape", "--key", "train/*", "--data", data)
    check(r.returncode != 0 and "expected ssd or hdd" in r.stderr, "an unknown media is refused: " + r.stderr)
    r = aq("tier", "policy", "add", "idle", "--media", "hdd", "--pool", "hdd", "--data", data)
    check(r.returncode != 0 and "either --pool" in r.stderr, "a pool and a media are refused: " + r.stderr)
    r = aq("tier", "policy", "add", "idle", "--media", "hdd", "--key", "train/*", "--not-accessed-for", "3s",
           "--data", data)
    check(r.returncode == 0, "policy add idle (not accessed for 3s): " + r.stderr)
    t_end = time.time() + 4.5
    while time.time() < t_end:
        c.get_object(Bucket="lake", Key="train/part-0")["Body"].read()
        time.sleep(0.3)
    r = aq("tier", "run", "--data", data, "--timeout", "60", "--json")
    check(r.returncode == 0 and json.loads(r.stdout or "{}").get("blocks_moved", 0) > 0, "an idle pass: " + r.stderr)
    pools = {k: {b["pool"] for b in json.loads(aq("stat-file", f"lake/{k}", "--data", data, "--json").stdout or "{}")
                 .get("blocks", [])} for k in ("train/part-0", "train/part-1")}
    check(pools == {"train/part-0": {"ssd"}, "train/part-1": {"hdd"}},
          f"the object being read stays on ssd, the idle one moves: {pools}")
    # A new object matching a policy is written to its pool at once (no pass).
    c.put_object(Bucket="lake", Key="archive/new", Body=os.urandom(200_000))
    r = aq("stat-file", "lake/archive/new", "--data", data, "--json")
    check({b["pool"] for b in json.loads(r.stdout or "{}").get("blocks", [])} == {"hdd"},
          "a new object goes straight to its policy's pool: " + r.stdout[-300:])
    c.put_object(Bucket="lake", Key="other/new", Body=os.urandom(100_000))
    r = aq("stat-file", "lake/other/new", "--data", data, "--json")
    check({b["pool"] for b in json.loads(r.stdout or "{}").get("blocks", [])} == {"ssd"},
          "one no policy matches goes to the first pool")
    node.stop()
    r = aq("tier", "run", "--data", data, "--timeout", "2")
    check(r.returncode != 0 and "no node serving" in r.stderr, "tier run without a node says so: " + r.stderr)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
