#!/usr/bin/python3
"""The history checker (histlib.py) on a cluster of many hosts: a lab
(scripts/lab) of 3 etcd hosts, N storage nodes and client hosts, each its
own network namespace and address on shaped links. Clients on the client
hosts run random operations through S3 (each to a node picked at random),
the aquifer:// client (naming every node) and a mount on a client host,
while a nemesis, one fault at a time, partitions a node from etcd (both
ways, or only node -> etcd), a node from the other nodes, the clients from a
node, isolates one etcd member, freezes two (quorum lost, then regained),
kills an etcd member or a node with SIGKILL and restarts it, or freezes a
node; then heals. After the last fault every cut is healed, every process
runs again, and every key is read from every node and listed; the history
is checked as in history_test.py: every acknowledged write stays readable
until overwritten, no read returns a mix or a superseded or deleted value,
listings agree.

Needs root and network namespaces (exit 77 otherwise).

usage: lab_history_test.py path/to/aquifer [--duration S] [--seed N] [--clients N] [--keys N] [--nodes N]
                                           [--replicas N] [--no-mount] [--name LAB] [--subnet A.B.C]
"""
import argparse
import ctypes
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import histlib as H  # noqa: E402
import lablib  # noqa: E402
import s3lib  # noqa: E402
from histlib import BUCKET, Client, anomaly, now  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("aquifer")
ap.add_argument("--duration", type=float, default=60)
ap.add_argument("--seed", type=int, default=None)
ap.add_argument("--clients", type=int, default=4, help="client threads, spread over the client hosts")
ap.add_argument("--client-hosts", type=int, default=2)
ap.add_argument("--keys", type=int, default=6)
ap.add_argument("--nodes", type=int, default=4)
ap.add_argument("--replicas", type=int, default=2)
ap.add_argument("--rate", default="1gbit", help="each node's and etcd host's link")
ap.add_argument("--no-mount", action="store_true")
ap.add_argument("--name", default="hist")
ap.add_argument("--subnet", default="10.79.0")
args = ap.parse_args()
AQ = os.path.abspath(args.aquifer)
SEED = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)

lablib.require_lab()

print(f"lab history: seed {SEED}, {args.duration:.0f} s, {args.nodes} nodes ({args.replicas} replicas), "
      f"{args.clients} clients on {args.client_hosts} hosts, {args.keys} keys", flush=True)
H.setup(SEED, args.keys)
KEYS = H.KEYS
tmp = tempfile.mkdtemp(prefix="aq_labhist_")
creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
NODES = [f"{args.subnet}.{3 + i}" for i in range(1, args.nodes + 1)]  # e1..e3 first, then n1..nN
PORT = 9000


_lab = lablib.runner(args.name)


def lab(*a, check=True, timeout=120):
    return _lab(*a, check=check, timeout=timeout).stdout


libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


def enter_host(host):
    """This thread (and what it starts) joins HOST's network namespace."""
    fd = os.open(f"/run/netns/aqlab-{args.name}-{host}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {host}")
    finally:
        os.close(fd)


class Target:
    """Operations from a client host: S3 to a node picked at random, the
    aquifer:// client naming every node (from a random first one)."""
    aq, creds, tmp = AQ, creds, tmp

    def enter(self, n):
        enter_host(f"c{n % args.client_hosts + 1}")

    def request(self, rng, method, path, query="", body=b"", headers=None, timeout=10):
        return s3lib.request(PORT, method, path, query, body=body, headers=headers, timeout=timeout,
                             host=rng.choice(NODES))

    def aq_url(self, key):
        i = random.randrange(len(NODES))
        nodes = NODES[i:] + NODES[:i]
        return "aquifer://" + ",".join(f"{a}:{PORT}" for a in nodes) + f"/{BUCKET}/{key}"


# ---------------------------------------------------------------- the nemesis

faults = {"node cut from etcd": 0, "node cut from etcd, one way": 0, "node cut from nodes": 0,
          "clients cut from a node": 0, "etcd member isolated": 0, "etcd quorum lost": 0,
          "etcd member killed": 0, "node killed": 0, "node frozen": 0}
windows = []


def faults_loop(stop):
    rng = random.Random(SEED)
    nodes = [f"n{i}" for i in range(1, args.nodes + 1)]
    etcd = ["e1", "e2", "e3"]
    while not stop.is_set():
        if stop.wait(rng.uniform(1.5, 3.5)):
            return
        fault = rng.choice(list(faults))
        n, e = rng.choice(nodes), rng.choice(etcd)
        hold = rng.uniform(1, 6)
        start = now()
        if fault == "node cut from etcd":
            lab("partition", n, "etcd")
        elif fault == "node cut from etcd, one way":
            lab("partition", n, "etcd", "--one-way")
        elif fault == "node cut from nodes":
            lab("partition", n, ",".join(x for x in nodes if x != n))
        elif fault == "clients cut from a node":
            lab("partition", "clients", n)
        elif fault == "etcd member isolated":
            lab("isolate", e)
        elif fault == "etcd quorum lost":
            lab("freeze", *rng.sample(etcd, 2))
        elif fault == "etcd member killed":
            lab("kill", e)
        elif fault == "node killed":
            lab("kill", n)
        else:
            lab("freeze", n)
        stop.wait(hold)
        lab("heal")
        lab("thaw", *etcd, *nodes, check=False)
        if fault in ("etcd member killed", "node killed"):
            lab("restart", e if fault.startswith("etcd") else n)
        faults[fault] += 1
        windows.append((fault, start, now()))


def nemesis(stop):
    try:
        faults_loop(stop)
    except Exception as e:  # noqa: BLE001 -- a nemesis that stops early makes the run a failure
        anomaly(f"the nemesis failed: {e!r}")


def all_up():
    r = subprocess.run([AQ, "cluster", "status", "--meta", lab("meta").strip(), "--json"], capture_output=True,
                       text=True, timeout=30)
    try:
        s = json.loads(r.stdout)
    except ValueError:
        return False
    return len(s.get("nodes", [])) == args.nodes and all(x.get("up") for x in s["nodes"])


# ---------------------------------------------------------------- the run

stop = threading.Event()
code = 1
mnt = None
try:
    if H.self_test():
        raise SystemExit("the checker's self-test failed: it would miss anomalies, or invent them")
    lab("down", check=False)
    t = time.monotonic()
    lab("up", "--nodes", str(args.nodes), "--clients", str(args.client_hosts), "--rate", args.rate,
        "--subnet", args.subnet, "--replicas", str(args.replicas), "--block-size", "64KiB", "--aquifer", AQ,
        "--credentials", creds, "--serve-arg=--reclaim-delay", "--serve-arg=1")
    print(f"lab up in {time.monotonic() - t:.1f} s")
    st, _, b = s3lib.request(PORT, "PUT", "/" + BUCKET, host=NODES[0])
    assert st == 200, b
    if args.no_mount:
        print("no mount clients (--no-mount)")
    elif os.path.exists("/dev/fuse") and os.access("/dev/fuse", os.R_OK | os.W_OK):
        mnt = os.path.join(tmp, "mnt")
        lab("mount", "c1", mnt, BUCKET, "--", "--attr-ttl", "0", "--negative-ttl", "0")
    else:
        print("SKIP part: /dev/fuse is missing, no mount clients")
    H.run_clients(args.clients, mnt, Target, nemesis, args.duration, stop, nemesis_join=120, client_join=180)
    # The last word: everything healed and running, every key read from every node.
    lab("heal")
    lab("thaw", "e1", "e2", "e3", *[f"n{i}" for i in range(1, args.nodes + 1)], check=False)
    dead = [h for h, v in json.loads(lab("status", "--json"))["hosts"].items() if v["process"] == "dead"]
    if dead:
        lab("restart", *dead)
    if not s3lib.until(all_up, 60, 0.5):
        anomaly("the cluster did not come back whole within 60 s of the last fault")
    end = Client(99, threading.Event(), None, Target())
    for node in NODES:
        class One(Target):
            def request(self, rng, method, path, query="", body=b"", headers=None, timeout=10, node=node):
                return s3lib.request(PORT, method, path, query, body=body, headers=headers, timeout=timeout,
                                     host=node)
        end.target = One()
        for key in KEYS:
            end.get(key)
        end.list(None)
    code = H.finish(faults, windows, tmp)
finally:
    stop.set()
    lab("down", check=False)
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(code)
