#!/usr/bin/python3
"""A cluster on 127.0.0.1: a real etcd and real node processes.
Writes through one node and reads through every node; kills a node with
SIGKILL during a continuous read loop (zero failed reads, every byte
verified), waits for the lost replicas to be rebuilt, restarts it; repairs a
block corrupted on disk on the next read; smartfails a node under read load
(it ends up holding nothing); adds a fourth node (it receives its share);
restarts etcd (nodes reconnect, no metadata lost).
usage: cluster_test.py path/to/aquifer"""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from s3lib import Etcd, free_port  # noqa: E402  (clears the caller's AWS settings)
from s3lib import until as wait_for  # noqa: E402

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
KEY, SECRET = "AQCLUSTERKEY", "aq-cluster-secret-0123456789"
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what, file=sys.stderr)


tmp = tempfile.mkdtemp(prefix="aq_cluster_test_")
creds = os.path.join(tmp, "keys")
with open(creds, "w") as f:
    f.write(f"{KEY} {SECRET}\n")
os.chmod(creds, 0o600)  # the node refuses keys other users can read
ETCD = Etcd(tmp, start=False)
ETCD_PORT = ETCD.port
META = ETCD.url


def start_etcd():
    return ETCD.start()


nodes = {}  # name -> dict(proc, port, metrics)


def start_node(name):
    port = nodes[name]["port"] if name in nodes else free_port()
    mport = nodes[name]["metrics"] if name in nodes else free_port()
    log = open(os.path.join(tmp, name + ".log"), "a")
    proc = subprocess.Popen([AQ, "serve", "--data", os.path.join(tmp, name), "--listen", f"127.0.0.1:{port}",
                             "--metrics", f"127.0.0.1:{mport}", "--credentials", creds, "--meta", META,
                             "--replicas", "2", "--lease-ttl", "3", "--block-size", "64KiB", "--node-id", name,
                             "--cache-size", "8MiB", "--reclaim-delay", "2"],
                            stdout=log, stderr=subprocess.STDOUT)
    nodes[name] = {"proc": proc, "port": port, "metrics": mport}
    ok = wait_for(lambda: "cluster: node" in open(os.path.join(tmp, name + ".log")).read(), 15)
    if not ok:
        raise SystemExit(f"node {name} did not start:\n" + open(os.path.join(tmp, name + ".log")).read())


def client(name):
    return boto3.client("s3", endpoint_url=f"http://127.0.0.1:{nodes[name]['port']}", aws_access_key_id=KEY,
                        aws_secret_access_key=SECRET, region_name="us-east-1",
                        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}, read_timeout=30))


def status():
    r = subprocess.run([AQ, "cluster", "status", "--meta", META, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    return json.loads(r.stdout)


def node_status(st, name):
    return next(n for n in st["nodes"] if n["id"] == name)


etcd = start_etcd()
try:
    for n in ("n1", "n2", "n3"):
        start_node(n)
    st = status()
    check(len(st["nodes"]) == 3 and all(n["up"] for n in st["nodes"]), "three nodes up: " + json.dumps(st["nodes"]))

    # Objects written through one node read identically through every node.
    s3 = client("n1")
    s3.create_bucket(Bucket="train")
    objects = {}
    for i in range(6):
        body = os.urandom(300_000 + 17 * i)
        key = f"shards/train-{i:05d}-of-00006"
        s3.put_object(Bucket="train", Key=key, Body=body)
        objects[key] = hashlib.md5(body).hexdigest()
    for n in ("n1", "n2", "n3"):
        c = client(n)
        same = all(hashlib.md5(c.get_object(Bucket="train", Key=k)["Body"].read()).hexdigest() == h
                   for k, h in objects.items())
        check(same, f"every object reads identically through {n}")
        listed = [o["Key"] for o in c.list_objects_v2(Bucket="train", Prefix="shards/")["Contents"]]
        check(listed == sorted(objects), f"one namespace: {n} lists every object")
    st = status()
    check(st["fully_protected"] and st["blocks"] == sum(5 for _ in objects), "every block has 2 replicas where "
          "placement wants them: " + json.dumps({k: v for k, v in st.items() if k != "nodes"}))
    held = {n["id"]: n["replicas_held"] for n in st["nodes"]}
    check(sum(held.values()) == 2 * st["blocks"] and min(held.values()) > 0, "replicas spread over the nodes: "
          + json.dumps(held))

    # The aquifer:// client reads blocks straight from their holders (the layout
    # comes from the node the path names), least-busy holder first or round-robin.
    env = dict(os.environ, AQUIFER_CREDENTIALS=creds)
    for policy in ("least", "round-robin", "off"):
        dst = os.path.join(tmp, "down-" + policy)
        r = subprocess.run([AQ, "cp", "-r", f"aquifer://127.0.0.1:{nodes['n2']['port']}/train/shards", dst],
                           capture_output=True, text=True, env=dict(env, AQUIFER_BALANCE=policy))
        same = r.returncode == 0 and all(
            hashlib.md5(open(os.path.join(dst, os.path.basename(k)), "rb").read()).hexdigest() == h
            for k, h in objects.items())
        check(same, f"aquifer cp -r from the cluster, balance={policy}: " + r.stderr)
    served = 0
    for n in ("n1", "n2", "n3"):
        st_n = json.loads(subprocess.run([AQ, "stats", f"127.0.0.1:{nodes[n]['metrics']}", "--json"],
                                         capture_output=True, text=True).stdout)
        served += st_n["ops"]["get"]["requests"]
    check(served >= 3 * 6, f"every node served block reads to the client ({served} GETs)")
    # One cache across the cluster: status sums the nodes' published cache figures.
    check(wait_for(lambda: status()["cache_hit_ratio"] > 0 and all("cache_hits" in n["status"] for n in
                                                                   status()["nodes"]), 10),
          "cluster status shows the cluster's cache hits and each node's: " + json.dumps(status().get("nodes")))

    # A continuous read loop through n1, verifying every byte.
    reads = {"ok": 0, "failed": 0, "errors": []}
    stop = threading.Event()

    def reader(name):
        c = client(name)
        while not stop.is_set():
            for k, h in objects.items():
                try:
                    got = hashlib.md5(c.get_object(Bucket="train", Key=k)["Body"].read()).hexdigest()
                    if got == h:
                        reads["ok"] += 1
                    else:
                        reads["failed"] += 1
                        reads["errors"].append(f"{k}: wrong bytes")
                except Exception as e:  # noqa: BLE001 - any failure counts
                    reads["failed"] += 1
                    reads["errors"].append(f"{k}: {e}")

    def run_reads(name, action):
        reads.update(ok=0, failed=0, errors=[])
        stop.clear()
        t = threading.Thread(target=reader, args=(name,))
        t.start()
        time.sleep(0.5)
        try:
            action()
        finally:
            time.sleep(0.5)
            stop.set()
            t.join()
        return reads["ok"], reads["failed"], reads["errors"][:3]

    # kill -9 n3 while n1 serves reads, and while the aquifer:// client reads
    # blocks from their holders (n3 among them).
    client_reads = {"ok": 0, "failed": 0, "why": ""}

    def client_loop(done):
        i = 0
        while not done.is_set():
            dst = os.path.join(tmp, f"loop-{i % 2}")
            shutil.rmtree(dst, ignore_errors=True)
            r = subprocess.run([AQ, "cp", "-r", f"aquifer://127.0.0.1:{nodes['n1']['port']}/train/shards", dst],
                               capture_output=True, text=True, env=env)
            good = r.returncode == 0 and all(
                hashlib.md5(open(os.path.join(dst, os.path.basename(k)), "rb").read()).hexdigest() == h
                for k, h in objects.items())
            client_reads["ok" if good else "failed"] += 1
            if not good:
                client_reads["why"] = r.stderr[-300:]
            i += 1

    def kill_n3():
        done = threading.Event()
        t = threading.Thread(target=client_loop, args=(done,))
        t.start()
        time.sleep(1)
        nodes["n3"]["proc"].send_signal(signal.SIGKILL)
        nodes["n3"]["proc"].wait()
        time.sleep(3)
        done.set()
        t.join()
    ok, bad, errs = run_reads("n1", kill_n3)
    check(bad == 0 and ok > 0, f"kill -9 during reads: {ok} reads verified, {bad} failed {errs}")
    check(client_reads["failed"] == 0 and client_reads["ok"] > 0,
          f"kill -9 during aquifer:// reads: {client_reads['ok']} passes verified, {client_reads['failed']} failed "
          + client_reads["why"])
    check(wait_for(lambda: not node_status(status(), "n3")["up"], 10), "the killed node is marked down")
    check(wait_for(lambda: status()["fully_protected"], 30), "lost replicas rebuilt: full protection with 2 nodes")
    st = status()
    check(node_status(st, "n3")["replicas_held"] == 0, "nothing is placed on the down node")
    start_node("n3")
    check(wait_for(lambda: node_status(status(), "n3")["up"], 10), "the restarted node rejoins")
    check(wait_for(lambda: status()["fully_protected"] and node_status(status(), "n3")["replicas_held"] > 0, 30),
          "the rejoined node gets its share back: " + json.dumps(node_status(status(), "n3")))

    # A block corrupted on one node's disk is detected and repaired on the next
    # read (a fresh object: none of its blocks is in a node's RAM cache yet).
    victim_key = "victim"
    victim = os.urandom(300_000)
    client("n1").put_object(Bucket="train", Key=victim_key, Body=victim)
    objects[victim_key] = hashlib.md5(victim).hexdigest()
    r = subprocess.run([AQ, "stat-file", f"train/{victim_key}", "--meta", META, "--json"], capture_output=True,
                       text=True)
    info = json.loads(r.stdout) if r.returncode == 0 else {}
    check(r.returncode == 0 and len(info.get("blocks", [])) == 5, "stat-file reads a layout from etcd: " + r.stderr)
    blk = info["blocks"][1] if info.get("blocks") else {"id": "", "nodes": []}
    holder = blk["nodes"][0] if blk.get("nodes") else "n1"
    path = os.path.join(tmp, holder, "pool-default", "blocks", blk["id"][:2], blk["id"])
    check(os.path.exists(path), "the replica's file is where stat-file says: " + path)
    if os.path.exists(path):
        with open(path, "r+b") as f:
            f.seek(24 + 1000)
            f.write(b"\x00\xff\x00\xff")
    body = client(holder).get_object(Bucket="train", Key=victim_key)["Body"].read()
    check(hashlib.md5(body).hexdigest() == objects[victim_key], "a read through the damaged node returns good bytes")
    stats = json.loads(subprocess.run([AQ, "stats", f"127.0.0.1:{nodes[holder]['metrics']}", "--json"],
                                      capture_output=True, text=True).stdout or "{}")
    check(stats.get("cluster", {}).get("blocks", {}).get("repaired_on_read", 0) >= 1,
          "the damaged replica was rewritten: " + json.dumps(stats.get("cluster", {}).get("blocks", {})))
    r = subprocess.run([AQ, "stat-file", f"train/{victim_key}", "--data", os.path.join(tmp, holder), "--meta", META,
                        "--verify"], capture_output=True, text=True)
    check(r.returncode == 0, "the repaired replica verifies on disk: " + r.stdout[-300:] + r.stderr)

    # smartfail n2 under read load through n1.
    def smartfail():
        r = subprocess.run([AQ, "cluster", "smartfail", "n2", "--meta", META], capture_output=True, text=True)
        check(r.returncode == 0, "cluster smartfail: " + r.stderr)
        check(wait_for(lambda: node_status(status(), "n2")["state"] == "removed", 40), "the drained node is removed")
    ok, bad, errs = run_reads("n1", smartfail)
    check(bad == 0 and ok > 0, f"smartfail under reads: {ok} reads verified, {bad} failed {errs}")
    st = status()
    check(node_status(st, "n2")["replicas_held"] == 0 and st["fully_protected"],
          "after smartfail the node holds nothing and every block is protected")
    blocks_dir = os.path.join(tmp, "n2", "pool-default", "blocks")
    # (moved replicas are removed once reads of the old layouts are done: 2 s here)
    check(wait_for(lambda: sum(len(fs) for _, _, fs in os.walk(blocks_dir)) == 0, 15),
          f"the drained node's pool is empty ({sum(len(fs) for _, _, fs in os.walk(blocks_dir))} block files)")

    # Add n4: it receives its share, reads never fail meanwhile.
    def add_n4():
        start_node("n4")
        wait_for(lambda: status()["fully_protected"] and node_status(status(), "n4")["replicas_held"] > 0, 40)
    ok, bad, errs = run_reads("n3", add_n4)
    check(bad == 0 and ok > 0, f"adding a node under reads: {ok} reads verified, {bad} failed {errs}")
    st = status()
    total = 2 * st["blocks"]
    share = node_status(st, "n4")["replicas_held"] / total
    check(0.15 <= share <= 0.55, f"the new node holds about its share (1/3 of replicas): {share:.2f}")

    # A bucket's own replica count: 3 for "train" (n1, n3, n4 are active).
    r = subprocess.run([AQ, "cluster", "protect", "train", "--replicas", "5", "--meta", META], capture_output=True,
                       text=True)
    check(r.returncode != 0 and "active nodes" in r.stderr, "more replicas than active nodes refused: " + r.stderr)
    r = subprocess.run([AQ, "cluster", "protect", "train", "--replicas", "3", "--meta", META], capture_output=True,
                       text=True)
    check(r.returncode == 0, "cluster protect: " + r.stderr)
    check(wait_for(lambda: status()["fully_protected"] and
                   sum(n["replicas_held"] for n in status()["nodes"]) == 3 * status()["blocks"], 40),
          "existing blocks re-protected to 3 replicas: " + json.dumps({k: v for k, v in status().items()
                                                                        if k != "nodes"}))
    time.sleep(4.5)  # every node has re-read the bucket settings (each does every 2 s, with its repair passes)
    client("n1").put_object(Bucket="train", Key="three", Body=os.urandom(200_000))
    r = subprocess.run([AQ, "stat-file", "train/three", "--meta", META, "--json"], capture_output=True, text=True)
    info = json.loads(r.stdout) if r.returncode == 0 else {}
    check(info.get("blocks") and all(len(b["nodes"]) == 3 for b in info["blocks"]),
          "new blocks of the bucket get 3 replicas: " + json.dumps([b["nodes"] for b in info.get("blocks", [])])
          + r.stderr)

    # etcd restarted: nodes reconnect; nothing is lost.
    etcd.send_signal(signal.SIGTERM)
    etcd.wait()
    time.sleep(1)
    etcd = start_etcd()
    check(wait_for(lambda: all(node_status(status(), n)["up"] for n in ("n1", "n3", "n4")), 20),
          "nodes are alive again after etcd restarts")
    c = client("n4")
    same = all(hashlib.md5(c.get_object(Bucket="train", Key=k)["Body"].read()).hexdigest() == h
               for k, h in objects.items())
    check(same, "no metadata lost across an etcd restart")
    c.put_object(Bucket="train", Key="after-restart", Body=b"written after etcd came back")
    check(client("n1").get_object(Bucket="train", Key="after-restart")["Body"].read() ==
          b"written after etcd came back", "writes work after etcd restarts")
finally:
    for n in nodes.values():
        if n["proc"].poll() is None:
            n["proc"].send_signal(signal.SIGTERM)
            try:
                n["proc"].wait(timeout=20)
            except subprocess.TimeoutExpired:
                n["proc"].kill()
    etcd.send_signal(signal.SIGTERM)
    etcd.wait()
    if failed == 0:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print("logs kept in", tmp, file=sys.stderr)

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
