#!/usr/bin/python3
"""The L3 cache on a real node: an hdd pool (latency=), a small RAM cache
and an L3 directory. Checks: reads after the first pass are served by RAM
and L3 (hits counted per level in /stats), every byte verified; a restart
finds L3's blocks again and serves from them at once; a damaged copy in L3
is never served (the block comes from its pool) and is dropped; deleting an
object erases its copies; bad flags are refused with a message.
usage: l3_test.py path/to/aquifer"""
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
check = s3lib.Checks()
tmp = tempfile.mkdtemp(prefix="aq_l3_test_")
creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
args = ["--pool", f"hdd={tmp}/hdd,media=hdd,latency=2ms", "--block-size", "256KiB", "--cache-size", "1MiB",
        "--prefetch-window", "0", "--l3", f"{tmp}/l3", "--l3-size", "64MiB"]


def read_all(c, objects):
    return all(hashlib.md5(c.get_object(Bucket="data", Key=k)["Body"].read()).hexdigest() == h
               for k, h in objects.items())


try:
    # Flags that cannot work are refused before anything starts.
    for bad, words in ((["--l3", f"{tmp}/x"], "go together"),
                       (["--l3", f"{tmp}/x", "--l3-size", "1GiB"], "no pool has media=hdd"),
                       (["--pool", f"h={tmp}/h,media=hdd", "--l3", f"{tmp}/x", "--l3-size", "0"], "more than 0")):
        r = subprocess.run([AQ, "serve", "--data", f"{tmp}/bad", "--anonymous", *bad], capture_output=True, text=True,
                           timeout=30)
        check(r.returncode != 0 and words in r.stderr, f"serve {' '.join(bad)} is refused: {r.stderr.strip()}")

    node = s3lib.Node(AQ, f"{tmp}/data", *args, credentials=creds)
    c = s3lib.boto(node.port)
    c.create_bucket(Bucket="data")
    objects = {}
    for i in range(24):
        body = os.urandom(600_000 + i)
        objects[f"obj-{i:02d}"] = hashlib.md5(body).hexdigest()
        c.put_object(Bucket="data", Key=f"obj-{i:02d}", Body=body)
    check(read_all(c, objects), "first pass reads every byte")
    check(read_all(c, objects), "second pass reads every byte")
    l3 = node.stats().get("l3", {})
    check(l3.get("entries", 0) > 20 and l3.get("hits", 0) > 20, "L3 holds the blocks RAM does not and serves "
          f"them: {l3}")
    # Copies reach the SSD behind the reads: once the backlog has drained,
    # the directory and the index agree exactly.
    deadline = time.time() + 15
    while time.time() < deadline and l3.get("queued_writes", 1) > 0:
        time.sleep(0.05)
        l3 = node.stats().get("l3", {})
    files = len(glob.glob(f"{tmp}/l3/blocks/*/*"))
    check(l3.get("queued_writes") == 0 and files == l3.get("entries"),
          f"one file per L3 entry once its writes have drained ({files} files, {l3})")
    node.stop()

    # A restart: L3's blocks are found again and serve the first pass.
    node = s3lib.Node(AQ, f"{tmp}/data", *args, credentials=creds)
    c = s3lib.boto(node.port)
    l3 = node.stats().get("l3", {})
    check(l3.get("restored", 0) > 20, f"the restarted node found L3's blocks: {l3}")
    check(read_all(c, objects), "every byte after the restart")
    l3 = node.stats().get("l3", {})
    check(l3.get("hits", 0) > 20, f"... mostly from L3 at once: {l3}")

    # A damaged copy is never served.
    victims = sorted(glob.glob(f"{tmp}/l3/blocks/*/*"))[:3]
    for v in victims:
        with open(v, "r+b") as f:
            f.seek(100)
            f.write(b"\xde\xad\xbe\xef")
    check(read_all(c, objects), "damaged L3 copies: every byte still right")
    l3 = node.stats().get("l3", {})
    check(l3.get("damaged", 0) >= 1, f"damaged copies found and dropped: {l3}")

    # Deleting an object erases its copies: once the freed-block delay
    # (2 s) has passed on a running node, and at the next start for blocks
    # freed just before a stop.
    before = node.stats().get("l3", {}).get("entries", 0)
    for k in list(objects)[:6]:
        c.delete_object(Bucket="data", Key=k)
    deadline = time.time() + 15
    while time.time() < deadline and node.stats().get("l3", {}).get("entries", 0) >= before:
        time.sleep(0.5)
    after = node.stats().get("l3", {}).get("entries", 0)
    check(after < before, f"deleted objects' copies are erased from L3 ({before} -> {after})")
    for k in list(objects)[6:10]:
        c.delete_object(Bucket="data", Key=k)
    node.stop()
    node = s3lib.Node(AQ, f"{tmp}/data", *args, credentials=creds)
    again = node.stats().get("l3", {}).get("entries", 0)
    check(again < after, f"copies of blocks freed at the stop are gone after the restart ({after} -> {again})")
    node.stop()
finally:
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
