#!/usr/bin/python3
"""Tiering across the nodes of a cluster on 127.0.0.1: a real etcd, two
all-flash nodes (pool "flash", ssd) and two hybrid ones (pool "archive",
media=hdd). Writes land on the flash nodes; a policy kept in etcd sends a
prefix to "archive" and every block moves to the archive nodes (copy,
verify, layout switch, old copies dropped) while readers read every object
through every node: zero failed reads, every byte verified. Policies on
last access: an object read again moves back to flash, and when the reads
stop it goes back to archive (policies naming a media: the pool of that
media the nodes have). Policies naming a pool no node has are
refused; a restarted node holds no copy its layouts do not name.
usage: cluster_tier_test.py path/to/aquifer"""
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
import s3lib  # noqa: E402  (clears the caller's AWS settings)

AQ = os.path.abspath(sys.argv[1])
check = s3lib.Checks()
tmp = tempfile.mkdtemp(prefix="aq_cluster_tier_test_")
creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
etcd = None
nodes = {}
POOLS = {"f1": "flash", "f2": "flash", "a1": "archive", "a2": "archive"}


aq = s3lib.Cli(AQ, timeout=180, env={"AQUIFER_CREDENTIALS": creds})


def layout(key):
    r = aq("stat-file", f"lake/{key}", "--meta", etcd.url, "--json")
    return json.loads(r.stdout).get("blocks", []) if r.returncode == 0 else []


def where(key):
    """The pools and holders of an object's blocks."""
    bl = layout(key)
    return {b["pool"] for b in bl}, {n for b in bl for n in b["nodes"]}


def files(node, pool):
    return {os.path.basename(p) for p in glob.glob(f"{tmp}/{node}-{pool}/blocks/*/*") if not p.endswith(".tmp")}


try:
    etcd = s3lib.Etcd(tmp)
    for name, pool in POOLS.items():
        media = "media=hdd,latency=1ms" if pool == "archive" else "media=ssd"
        nodes[name] = s3lib.ClusterNode(
            AQ, tmp, name, etcd.url, creds, "--pool", f"{pool}={tmp}/{name}-{pool},{media}", "--replicas", "2",
            "--lease-ttl", "3", "--block-size", "256KiB", "--cache-size", "0", "--prefetch-window", "0",
            "--reclaim-delay", "1", "--repair-interval", "0.5", "--atime-granularity", "1", "--tier-rate", "50")
    c = s3lib.boto(nodes["f1"].port)
    c.create_bucket(Bucket="lake")
    objects = {}
    for i in range(8):
        body = os.urandom(600_000 + 1000 * i)  # 3 blocks each
        objects[f"data/part-{i}"] = hashlib.md5(body).hexdigest()
        c.put_object(Bucket="lake", Key=f"data/part-{i}", Body=body)
    pools, holders = set(), set()
    for k in objects:
        p, h = where(k)
        pools |= p
        holders |= h
    check(pools == {"flash"} and holders == {"f1", "f2"},
          f"writes through a flash node land on the flash nodes: pools {pools}, holders {holders}")

    r = aq("tier", "policy", "add", "bad", "--pool", "tape", "--meta", etcd.url)
    check(r.returncode != 0 and "the cluster has no pool 'tape'" in r.stderr and "archive (hdd, on 2 nodes)" in r.stderr,
          "a policy naming a pool no node has is refused: " + r.stderr)
    # The nodes move as soon as a policy lands. With one of the two archive
    # nodes down no block can move (two replicas need two archive nodes), so
    # the dry run sees the whole move however slow the build is.
    nodes["a2"].stop()
    r = aq("tier", "policy", "add", "cold", "--pool", "archive", "--key", "data/*", "--meta", etcd.url)
    check(r.returncode == 0, "policy add cold (in etcd): " + r.stderr)
    r = aq("tier", "run", "--dry-run", "--meta", etcd.url, "--json")
    dry = json.loads(r.stdout or "{}")
    check(r.returncode == 0 and dry.get("blocks_to_move") == 24, "a dry run counts the 24 blocks to move: " + r.stdout)
    time.sleep(2)  # repair passes that find too few archive nodes
    check(all(where(k)[0] == {"flash"} for k in objects), "nothing moves while the archive pool is too small")
    nodes["a2"].start()

    # The move, under readers on every node.
    stop = threading.Event()
    reads = {"ok": 0, "bad": 0, "err": []}

    def reader(name):
        rc = s3lib.boto(nodes[name].port)
        while not stop.is_set():
            for k, h in objects.items():
                try:
                    got = hashlib.md5(rc.get_object(Bucket="lake", Key=k)["Body"].read()).hexdigest()
                    reads["ok" if got == h else "bad"] += 1
                except Exception as e:  # noqa: BLE001
                    reads["bad"] += 1
                    reads["err"].append(f"{name} {k}: {str(e)[:160]}")

    threads = [threading.Thread(target=reader, args=(n,)) for n in POOLS]
    for t in threads:
        t.start()
    t0 = time.time()
    r = aq("tier", "run", "--meta", etcd.url, "--timeout", "120", "--json")
    moved_in = time.time() - t0
    time.sleep(2)  # reads over the old copies' drop
    stop.set()
    for t in threads:
        t.join()
    rep = json.loads(r.stdout or "{}")
    check(r.returncode == 0 and rep.get("blocks_to_move") == 0, f"tier run waits until nothing is left to move "
          f"({moved_in:.1f} s): " + r.stdout[-300:] + r.stderr[-300:])
    check(reads["bad"] == 0 and reads["ok"] > 0,
          f"reads on every node during the move: {reads['ok']} verified, {reads['bad']} failed {reads['err'][:2]}")
    pools, holders = set(), set()
    for k in objects:
        p, h = where(k)
        pools |= p
        holders |= h
    check(pools == {"archive"} and holders == {"a1", "a2"}, f"every block moved to the archive nodes: {pools} {holders}")
    check(s3lib.until(lambda: not files("f1", "flash") and not files("f2", "flash"), 20),
          f"the flash nodes' old copies are dropped: {len(files('f1', 'flash'))} {len(files('f2', 'flash'))} left")
    st = json.loads(aq("stats", f"127.0.0.1:{nodes['a1'].metrics}", "--json").stdout or "{}")
    moved = sum(json.loads(aq("stats", f"127.0.0.1:{n.metrics}", "--json").stdout or "{}")
                .get("cluster", {}).get("repair", {}).get("tiered", 0) for n in nodes.values())
    check(moved >= 24, f"the nodes count the blocks they moved between pools: {moved}")
    c.put_object(Bucket="lake", Key="data/new", Body=os.urandom(300_000))
    check(where("data/new")[0] == {"archive"} and where("data/new")[1] <= {"a1", "a2"},
          f"a new object written through a flash node goes straight to the archive nodes: {where('data/new')}")
    c.delete_object(Bucket="lake", Key="data/new")
    r = aq("tier", "status", "--meta", etcd.url, "--json")
    ts = json.loads(r.stdout or "{}")
    check(ts.get("pools", {}).get("archive", {}).get("blocks") == 24 and "flash" not in ts.get("pools", {}),
          "tier status: 24 blocks in archive: " + json.dumps(ts.get("pools")))

    # Last access: read within 4 s -> flash; not read for 4 s -> archive.
    aq("tier", "policy", "rm", "cold", "--meta", etcd.url)
    r = aq("tier", "policy", "add", "hot", "--media", "ssd", "--key", "data/*", "--accessed-within", "4s",
           "--meta", etcd.url)
    check(r.returncode == 0, "policy add hot (accessed within, media ssd): " + r.stderr)
    r = aq("tier", "policy", "add", "idle", "--media", "hdd", "--key", "data/*", "--not-accessed-for", "4s",
           "--meta", etcd.url)
    check(r.returncode == 0, "policy add idle (not accessed for, media hdd): " + r.stderr)
    r = aq("tier", "policy", "add", "never", "--pool", "flash", "--not-accessed-for", "5s", "--accessed-within", "4s",
           "--meta", etcd.url)
    check(r.returncode != 0 and "no age" in r.stderr, "contradictory access ages are refused: " + r.stderr)
    # The readers above made every object hot for a moment: once idle, all go (back) to archive.
    time.sleep(5)
    check(s3lib.until(lambda: all(where(k)[0] == {"archive"} for k in objects), 60),
          "objects the readers left idle stay (or go back) on archive")
    stop.clear()

    def hot_reader():
        rc = s3lib.boto(nodes["a2"].port)
        while not stop.is_set():
            hashlib.md5(rc.get_object(Bucket="lake", Key="data/part-1")["Body"].read())
            time.sleep(0.3)

    t = threading.Thread(target=hot_reader)
    t.start()
    back = s3lib.until(lambda: where("data/part-1") == ({"flash"}, {"f1", "f2"}), 60)
    check(back, f"an object read again moves back to the flash nodes: {where('data/part-1')}")
    check(where("data/part-2")[0] == {"archive"}, "objects nobody reads stay on archive")
    stop.set()
    t.join()
    check(s3lib.until(lambda: where("data/part-1")[0] == {"archive"}, 60),
          f"when the reads stop it goes back to archive: {where('data/part-1')}")

    # A restarted node holds exactly the pieces its layouts name; all bytes read back.
    # The access policies go first: reading every object back would make them all
    # hot again and start moving them while the node's files are compared.
    for name in ("hot", "idle"):
        check(aq("tier", "policy", "rm", name, "--meta", etcd.url).returncode == 0, f"policy rm {name}")
    nodes["a1"].stop()
    nodes["a1"].start()
    c = s3lib.boto(nodes["a1"].port)
    same = all(hashlib.md5(c.get_object(Bucket="lake", Key=k)["Body"].read()).hexdigest() == h
               for k, h in objects.items())
    check(same, "every object reads back through the restarted node")
    def named():
        return {b["id"] for k in objects for b in layout(k) if "a1" in b["nodes"]}

    # Generous: every poll runs the CLI once per object (slow in sanitizer builds).
    held_ok = s3lib.until(lambda: files("a1", "archive") == named(), 60)
    held, want = files("a1", "archive"), named()
    check(held_ok, f"the restarted node holds what the layouts name: {len(held)} files, {len(want)} named, "
          f"not named {sorted(held - want)[:4]}, missing {sorted(want - held)[:4]}")
finally:
    for n in nodes.values():
        n.stop()
    if etcd:
        etcd.stop()
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
