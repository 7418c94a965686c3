#!/usr/bin/python3
"""A history checker (Jepsen's idea, on one machine): concurrent clients run
random operations on a small key space through S3 (PUT, GET, DELETE, LIST,
CopyObject, multipart uploads, conditional PUTs), the aquifer:// client (`aquifer cp`) and the
POSIX mount, while a nemesis injects faults: kill -9 and restart of the node,
a full disk (the data directory is a small tmpfs, filled from outside), and a
tiering policy flipping every object between a fast pool and a slow one.
The pools compress (`--compress`, by default lz4 on the fast pool and none
on the slow one), so blocks change form with every tier flip, and both
deduplicate (`--no-dedup` turns that off): a CopyObject's blocks are its
source's, shared until one of them is overwritten or deleted.
Every operation is recorded with its invocation and completion times and its
outcome; the history is then checked:

  - every body read is one that was written, whole: values carry their key,
    id and length, and the rest of their bytes derive from the id, so a short
    body, a mix of two versions or bytes never written cannot pass;
  - reads are regular: a read returns a value (or absence) written by an
    operation that began before the read ended and that no acknowledged
    operation had superseded before the read began; so an acknowledged write
    stays readable until overwritten or deleted, and a delete stays deleted;
  - listings agree with the same rule, key by key (present or absent);
  - conditional writes: a win is a read of its condition, a 412 a read of
    it failing, and of writers racing on one condition exactly one wins.

An operation that failed or timed out may or may not have happened (it is
never treated as acknowledged). Seeded and bounded in time; a failing run
prints its seed (the same seed gives the same operation mix and fault
schedule; thread timing still varies). Needs root for the tmpfs (exit 77
otherwise); the mount part is skipped without /dev/fuse.

usage: history_test.py path/to/aquifer [--duration S] [--seed N] [--clients N] [--keys N] [--no-mount]
                       [--compress FAST,SLOW] [--no-dedup]
"""
import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import histlib as H  # noqa: E402
import s3lib  # noqa: E402
from histlib import BUCKET, Client, anomaly, now  # noqa: E402
from s3lib import request  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("aquifer")
ap.add_argument("--duration", type=float, default=40)
ap.add_argument("--seed", type=int, default=None)
ap.add_argument("--clients", type=int, default=4)
ap.add_argument("--keys", type=int, default=6)
ap.add_argument("--no-mount", action="store_true", help="no clients through the mount")
ap.add_argument("--compress", default="lz4,none",
                help="the fast and the slow pool's compress= policies (lz4, zstd, zstd:LEVEL, none)")
ap.add_argument("--no-dedup", action="store_true", help="pools without the dedup policy")
args = ap.parse_args()
DEDUP = "" if args.no_dedup else ",dedup"
COMPRESS = args.compress.split(",")
if len(COMPRESS) != 2:
    raise SystemExit("--compress wants two policies, FAST,SLOW")
AQ = os.path.abspath(args.aquifer)
SEED = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
print(f"history: seed {SEED}, {args.duration:.0f} s, {args.clients} clients, {args.keys} keys, "
      f"pools compress {COMPRESS[0]} (fast) and {COMPRESS[1]} (slow){'' if args.no_dedup else ', dedup'}", flush=True)

tmp, data = s3lib.small_disk("aq_history_", "48m", "the full-disk fault needs one")
creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
H.setup(SEED, args.keys)
KEYS = H.KEYS


class Target:
    """Where the clients' operations go: the one node, on 127.0.0.1."""
    aq, creds, tmp = AQ, creds, tmp

    def request(self, _rng, method, path, query="", body=b"", headers=None, timeout=10):
        return request(node["port"], method, path, query, body=body, headers=headers, timeout=timeout)

    def aq_url(self, key):
        return f"aquifer://127.0.0.1:{node['port']}/{BUCKET}/{key}"



# ---------------------------------------------------------------- the node

node = {"p": None, "port": s3lib.free_port()}
log = open(os.path.join(tmp, "node.log"), "a")


def start_node():
    p = subprocess.Popen([AQ, "serve", "--data", data, "--listen", f"127.0.0.1:{node['port']}", "--credentials", creds,
                          "--block-size", "64KiB", "--reclaim-delay", "1", "--tier-interval", "1",
                          "--pool", f"fast={data}/fast,media=ssd,compress={COMPRESS[0]}{DEDUP}",
                          "--pool", f"slow={data}/slow,media=hdd,latency=0.005,compress={COMPRESS[1]}{DEDUP}"],
                         stdout=log, stderr=log)
    node["p"] = p
    ok = s3lib.until(lambda: request(node["port"], "GET", "/", timeout=2)[0] == 200, 20, 0.1)
    if not ok:
        raise SystemExit("the node did not come up: " + open(os.path.join(tmp, "node.log")).read()[-2000:])


# ---------------------------------------------------------------- history

# ---------------------------------------------------------------- the nemesis

faults = {"kill -9 and restart": 0, "full disk": 0, "tier flip": 0}
windows = []  # (fault, start, end)


def fill_disk():
    st = os.statvfs(data)
    free = st.f_bavail * st.f_frsize
    filler = os.path.join(data, "filler")
    try:
        with open(filler, "wb") as f:
            f.write(b"\0" * max(0, free))
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        pass  # full already (or now): that is the point
    return filler


def tier(pool):
    subprocess.run([AQ, "tier", "policy", "rm", "flip", "--data", data], capture_output=True)
    subprocess.run([AQ, "tier", "policy", "add", "flip", "--pool", pool, "--key", "*", "--data", data],
                   capture_output=True)


# block files by form, and those named by their content (shared), summed over the nemesis' looks
forms_seen = {"compressed": 0, "plain": 0, "shared": 0}


def count_forms():
    """How many block files of each form the pools hold now (their magic)."""
    for pool in ("fast", "slow"):
        for root, _, files in os.walk(os.path.join(data, pool, "blocks")):
            for name in files:
                if len(name) == 64:
                    forms_seen["shared"] += 1
                try:
                    with open(os.path.join(root, name), "rb") as f:
                        magic = f.read(8)
                except OSError:
                    continue  # removed meanwhile
                if magic == b"AQBLKZ01":
                    forms_seen["compressed"] += 1
                elif magic == b"AQBLK001":
                    forms_seen["plain"] += 1


def nemesis(stop):
    try:
        faults_loop(stop)
    except Exception as e:  # noqa: BLE001 -- a nemesis that stops early makes the run a failure
        anomaly(f"the nemesis failed: {e!r}")


def faults_loop(stop):
    rng = random.Random(SEED)
    pool = "slow"
    while not stop.is_set():
        if stop.wait(rng.uniform(1.5, 3.5)):
            return
        fault = rng.choice(list(faults))
        start = now()
        if fault == "kill -9 and restart":
            node["p"].send_signal(signal.SIGKILL)
            node["p"].wait()
            stop.wait(rng.uniform(0.2, 1.5))
            start_node()
        elif fault == "full disk":
            filler = fill_disk()
            stop.wait(rng.uniform(1, 3))
            if os.path.exists(filler):
                os.unlink(filler)
        else:
            tier(pool)
            pool = "fast" if pool == "slow" else "slow"
        faults[fault] += 1
        windows.append((fault, start, now()))
        count_forms()


# ---------------------------------------------------------------- the checker

# ---------------------------------------------------------------- the run

mnt = None
mount_p = None
stop = threading.Event()
code = 1
try:
    if H.self_test():
        raise SystemExit("the checker's self-test failed: it would miss anomalies, or invent them")
    start_node()
    st, _, b = request(node["port"], "PUT", "/" + BUCKET)
    assert st == 200, b
    if args.no_mount:
        print("no mount clients (--no-mount)")
    elif os.path.exists("/dev/fuse") and os.access("/dev/fuse", os.R_OK | os.W_OK):
        mnt = os.path.join(tmp, "mnt")
        os.mkdir(mnt)
        mount_p = subprocess.Popen([AQ, "--credentials", creds, "mount", "-f",
                                    f"aquifer://127.0.0.1:{node['port']}/{BUCKET}", mnt, "--attr-ttl", "0",
                                    "--negative-ttl", "0"], stdout=log, stderr=log)
        if not s3lib.until(lambda: os.path.ismount(mnt), 15, 0.1):
            print("the mount did not appear; going on without it")
            mount_p.kill()
            mount_p, mnt = None, None
    else:
        print("SKIP part: /dev/fuse is missing, no mount clients")
    H.run_clients(args.clients, mnt, Target, nemesis, args.duration, stop)
    # The last word: a final read of every key once all faults are over.
    if os.path.exists(os.path.join(data, "filler")):
        os.unlink(os.path.join(data, "filler"))
    end = Client(99, threading.Event(), None, Target())
    for key in KEYS:
        s3lib.until(lambda: request(node["port"], "GET", "/", timeout=2)[0] == 200, 20)
        end.get(key)
    end.list(None)
    count_forms()
    print(f"block files seen by form (summed over the nemesis' looks): {forms_seen}")
    if "none" not in COMPRESS[0] and forms_seen["compressed"] == 0:
        anomaly("no block was stored compressed: the run did not test what it says")
    if not args.no_dedup and forms_seen["shared"] == 0:
        anomaly("no block was named by its content: the run did not test what it says")
    code = H.finish(faults, windows, tmp)
finally:
    stop.set()
    if mount_p is not None:
        mount_p.send_signal(signal.SIGTERM)
        try:
            mount_p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            mount_p.kill()
    if mnt and os.path.ismount(mnt):
        subprocess.run(["umount", "-l", mnt])
    if node["p"] is not None and node["p"].poll() is None:
        node["p"].send_signal(signal.SIGTERM)
        try:
            node["p"].wait(timeout=30)
        except subprocess.TimeoutExpired:
            node["p"].kill()
    subprocess.run(["umount", data])
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(code)
