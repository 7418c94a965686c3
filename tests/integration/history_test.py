#!/usr/bin/python3
"""A history checker (Jepsen's idea, on one machine): concurrent clients run
random operations on a small key space through S3 (PUT, GET, DELETE, LIST,
CopyObject, multipart uploads), the aquifer:// client (`aquifer cp`) and the
POSIX mount, while a nemesis injects faults: kill -9 and restart of the node,
a full disk (the data directory is a small tmpfs, filled from outside), and a
tiering policy flipping every object between a fast pool and a slow one.
Every operation is recorded with its invocation and completion times and its
outcome; the history is then checked:

  - every body read is one that was written, whole: values carry their key,
    id and length, and the rest of their bytes derive from the id, so a short
    body, a mix of two versions or bytes never written cannot pass;
  - reads are regular: a read returns a value (or absence) written by an
    operation that began before the read ended and that no acknowledged
    operation had superseded before the read began; so an acknowledged write
    stays readable until overwritten or deleted, and a delete stays deleted;
  - listings agree with the same rule, key by key (present or absent).

An operation that failed or timed out may or may not have happened (it is
never treated as acknowledged). Seeded and bounded in time; a failing run
prints its seed (the same seed gives the same operation mix and fault
schedule; thread timing still varies). Needs root for the tmpfs (exit 77
otherwise); the mount part is skipped without /dev/fuse.

usage: history_test.py path/to/aquifer [--duration S] [--seed N] [--clients N] [--keys N] [--no-mount]
"""
import argparse
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
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402
from s3lib import request  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("aquifer")
ap.add_argument("--duration", type=float, default=40)
ap.add_argument("--seed", type=int, default=None)
ap.add_argument("--clients", type=int, default=4)
ap.add_argument("--keys", type=int, default=6)
ap.add_argument("--no-mount", action="store_true", help="no clients through the mount")
args = ap.parse_args()
AQ = os.path.abspath(args.aquifer)
SEED = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
print(f"history: seed {SEED}, {args.duration:.0f} s, {args.clients} clients, {args.keys} keys", flush=True)

tmp, data = s3lib.small_disk("aq_history_", "48m", "the full-disk fault needs one")
creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
BUCKET = "hist"
KEYS = [f"k{i}" for i in range(args.keys)] + ["dir/é ü", "dir/a b"]  # odd names too
INF = float("inf")
ABSENT = "<absent>"

# ---------------------------------------------------------------- values


def body_of(key, vid, length):
    head = f"{key}|{vid}|{length}|".encode()
    seed = hashlib.sha256(vid.encode()).digest()
    reps = (length - len(head)) // len(seed) + 1
    return (head + seed * reps)[:length]


def parse_body(b):
    """(vid, problem) of a body read back: problem is None when it is whole and was written as such."""
    try:
        key, vid, length, _ = b.split(b"|", 3)
        vid, length = vid.decode(), int(length)
    except ValueError:
        return None, f"not a value written here: {b[:40]!r} ({len(b)} bytes)"
    if len(b) != length:
        return vid, f"{len(b)} bytes of {length}"
    if b != body_of(key.decode(), vid, length):
        return vid, "bytes differ from the value written (a mix, or never written)"
    return vid, None


md5_to_vid = {}  # ETag -> value id (copies answer the ETag of what they copied)
md5_lock = threading.Lock()


def remember(vid, body, etag=None):
    with md5_lock:
        md5_to_vid[etag or ('"' + hashlib.md5(body).hexdigest() + '"')] = vid


# ---------------------------------------------------------------- the node

node = {"p": None, "port": s3lib.free_port()}
log = open(os.path.join(tmp, "node.log"), "a")


def start_node():
    p = subprocess.Popen([AQ, "serve", "--data", data, "--listen", f"127.0.0.1:{node['port']}", "--credentials", creds,
                          "--block-size", "64KiB", "--reclaim-delay", "1", "--tier-interval", "1",
                          "--pool", f"fast={data}/fast,media=ssd",
                          "--pool", f"slow={data}/slow,media=hdd,latency=0.005"],
                         stdout=log, stderr=log)
    node["p"] = p
    ok = s3lib.until(lambda: request(node["port"], "GET", "/", timeout=2)[0] == 200, 20, 0.1)
    if not ok:
        raise SystemExit("the node did not come up: " + open(os.path.join(tmp, "node.log")).read()[-2000:])


# ---------------------------------------------------------------- history

history = []
hist_lock = threading.Lock()
t0 = time.monotonic()
anomalies = []


def now():
    return time.monotonic() - t0


def record(op):
    with hist_lock:
        history.append(op)


quiet = False  # the self-test's anomalies are expected: not printed


def anomaly(what):
    with hist_lock:
        anomalies.append(what)
    if not quiet:
        print("ANOMALY:", what, flush=True)


def judge(op, what, body):
    """A successful read's body: its value id into op, or an anomaly."""
    vid, problem = parse_body(body)
    if problem:
        anomaly(f"{what} at {op['inv']:.2f}-{op['comp']:.2f}: answered with {problem}")
    else:
        op["val"] = vid


def path(key):
    return "/" + BUCKET + "/" + urllib.parse.quote(key, safe="/")


class Client(threading.Thread):
    def __init__(self, n, stop, mnt):
        super().__init__(daemon=True)
        self.n, self.stop, self.mnt = n, stop, mnt
        self.rng = random.Random(SEED * 1000 + n)
        self.seq = 0

    def new_value(self, key, big=False):
        self.seq += 1
        vid = f"c{self.n}-{self.seq}"
        length = self.rng.randrange(100, 200_000) if not big else self.rng.randrange(5 << 20, (5 << 20) + 100_000)
        return vid, body_of(key, vid, length)

    def run(self):
        kinds = ["put"] * 6 + ["get"] * 8 + ["delete"] * 2 + ["list"] * 2 + ["copy"] * 2 + ["mpu"]
        kinds += ["cp_put", "cp_get"]
        if self.mnt:
            kinds += ["mnt_put", "mnt_get"] * 2
        while not self.stop.is_set():
            kind = self.rng.choice(kinds)
            key = self.rng.choice(KEYS)
            try:
                getattr(self, kind)(key)
            except Exception as e:  # noqa: BLE001 -- a client's own failure is an outcome, not a crash
                record({"kind": "error", "op": kind, "key": key, "why": repr(e)[:200], "inv": now(), "comp": now()})

    # -- S3
    def put(self, key):
        vid, body = self.new_value(key)
        remember(vid, body)
        op = {"kind": "write", "via": "s3", "key": key, "val": vid, "inv": now()}
        try:
            st, _, _ = request(node["port"], "PUT", path(key), body=body, timeout=10)
            op["ok"] = st == 200
            op["status"] = st
        except OSError as e:
            op["ok"], op["status"] = False, repr(e)[:80]
        op["comp"] = now()
        record(op)

    def get(self, key):
        op = {"kind": "read", "via": "s3", "key": key, "inv": now()}
        try:
            st, h, b = request(node["port"], "GET", path(key), timeout=10)
        except OSError as e:
            st, b = repr(e)[:80], b""
        op["comp"] = now()
        op["status"] = st
        if st == 200:
            judge(op, f"GET {key}", b)
        elif st == 404:
            op["val"] = ABSENT
        record(op)

    def delete(self, key):
        op = {"kind": "write", "via": "s3", "key": key, "val": ABSENT, "inv": now()}
        try:
            st, _, _ = request(node["port"], "DELETE", path(key), timeout=10)
            op["ok"] = st == 204
            op["status"] = st
        except OSError as e:
            op["ok"], op["status"] = False, repr(e)[:80]
        op["comp"] = now()
        record(op)

    def list(self, _key):
        op = {"kind": "list", "inv": now()}
        try:
            st, _, b = request(node["port"], "GET", "/" + BUCKET, "list-type=2&encoding-type=url", timeout=10)
        except OSError as e:
            st, b = repr(e)[:80], b""
        op["comp"] = now()
        if st == 200:
            keys = [urllib.parse.unquote_plus(k.split(b"</Key>")[0].decode()) for k in b.split(b"<Key>")[1:]]
            op["keys"] = set(keys)
            if b"<IsTruncated>true" in b:
                anomaly("a listing of a few keys was truncated")
        record(op)

    def copy(self, dst):
        src = self.rng.choice(KEYS)
        if src == dst:
            return
        op = {"kind": "write", "via": "copy", "key": dst, "src": src, "val": f"?copy:{src}", "inv": now()}
        try:
            st, _, b = request(node["port"], "PUT", path(dst),
                               headers={"x-amz-copy-source": urllib.parse.quote("/" + BUCKET + "/" + src)}, timeout=10)
            ok = st == 200 and b"<Error>" not in b and b"<ETag>" in b
            op["ok"], op["status"] = ok, st
            if ok:
                etag = b.split(b"<ETag>")[1].split(b"</ETag>")[0].decode().replace("&quot;", '"')
                with md5_lock:
                    op["val"] = md5_to_vid.get(etag, op["val"])
                if op["val"].startswith("?"):
                    anomaly(f"copy {src} -> {dst}: ETag {etag} is no value ever written")
        except OSError as e:
            op["ok"], op["status"] = False, repr(e)[:80]
        op["comp"] = now()
        record(op)

    def mpu(self, key):
        vid, body = self.new_value(key, big=True)
        p1, p2 = body[:5 << 20], body[5 << 20:]
        etag = '"' + hashlib.md5(hashlib.md5(p1).digest() + hashlib.md5(p2).digest()).hexdigest() + '-2"'
        remember(vid, body, etag)
        remember(vid, body)  # a copy of it has the plain MD5 as its ETag
        op = {"kind": "write", "via": "multipart", "key": key, "val": vid, "inv": now(), "ok": False}
        try:
            st, _, b = request(node["port"], "POST", path(key), "uploads=", timeout=10)
            if st == 200:
                up = b.split(b"<UploadId>")[1].split(b"</UploadId>")[0].decode()
                q = "uploadId=" + urllib.parse.quote(up, safe="")
                parts = []
                for n, part in ((1, p1), (2, p2)):
                    st, h, _ = request(node["port"], "PUT", path(key), f"partNumber={n}&{q}", body=part, timeout=20)
                    if st != 200:
                        break
                    parts.append(f"<Part><PartNumber>{n}</PartNumber><ETag>{h['etag']}</ETag></Part>")
                if len(parts) == 2:
                    xml = ("<CompleteMultipartUpload>" + "".join(parts) + "</CompleteMultipartUpload>").encode()
                    st, _, b = request(node["port"], "POST", path(key), q, body=xml, timeout=20)
                    op["ok"] = st == 200 and b"<Error>" not in b
                op["status"] = st
        except OSError as e:
            op["status"] = repr(e)[:80]
        op["comp"] = now()
        record(op)

    # -- the aquifer:// client
    def cp_put(self, key):
        vid, body = self.new_value(key)
        remember(vid, body)
        src = os.path.join(tmp, f"cp-{self.n}")
        with open(src, "wb") as f:
            f.write(body)
        op = {"kind": "write", "via": "aquifer://", "key": key, "val": vid, "inv": now()}
        r = subprocess.run([AQ, "--credentials", creds, "cp", src,
                            f"aquifer://127.0.0.1:{node['port']}/{BUCKET}/{key}"], capture_output=True, timeout=60)
        op["comp"] = now()
        op["ok"] = r.returncode == 0
        record(op)

    def cp_get(self, key):
        dst = os.path.join(tmp, f"cpget-{self.n}")
        if os.path.exists(dst):
            os.unlink(dst)
        op = {"kind": "read", "via": "aquifer://", "key": key, "inv": now()}
        r = subprocess.run([AQ, "--credentials", creds, "cp", f"aquifer://127.0.0.1:{node['port']}/{BUCKET}/{key}",
                            dst], capture_output=True, text=True, timeout=60)
        op["comp"] = now()
        if r.returncode == 0:
            b = open(dst, "rb").read()
            judge(op, f"aquifer cp of {key}", b)
        elif "404" in r.stderr or "not found" in r.stderr.lower() or "no object" in r.stderr.lower():
            op["val"] = ABSENT
        record(op)

    # -- the mount
    def mnt_put(self, key):
        vid, body = self.new_value(key)
        remember(vid, body)
        op = {"kind": "write", "via": "mount", "key": key, "val": vid, "inv": now()}
        try:
            os.makedirs(os.path.dirname(os.path.join(self.mnt, key)), exist_ok=True)
            with open(os.path.join(self.mnt, key), "wb") as f:
                f.write(body)
            op["ok"] = True
        except OSError as e:
            op["ok"], op["status"] = False, repr(e)[:80]
        op["comp"] = now()
        record(op)

    def mnt_get(self, key):
        op = {"kind": "read", "via": "mount", "key": key, "inv": now()}
        try:
            with open(os.path.join(self.mnt, key), "rb") as f:
                b = f.read()
            op["comp"] = now()
            judge(op, f"mount read of {key}", b)
        except FileNotFoundError:
            op["comp"] = now()
            op["val"] = ABSENT
        except OSError as e:
            op["comp"] = now()
            op["status"] = repr(e)[:80]
        record(op)


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


# ---------------------------------------------------------------- the checker

def unknown(op):
    """Whether a failed write may still have happened: no answer (a kill, a
    timeout), a 500 or 503 (the node could not tell), or a tool's exit
    status. A 4xx or 507 answer is a refusal: nothing was written."""
    st = op.get("status")
    return not isinstance(st, int) or st in (500, 503)


def check_history():
    """Regular-register check per key, over reads and listings. A read over
    [inv, comp] may see a write w that began before comp and that no
    acknowledged write superseded before inv: superseded means some
    acknowledged w2 began after w ended and ended before inv, i.e. w ended
    before M(inv), the latest start of an acknowledged write that ended
    before inv. Indexed, so a 30-minute history checks in seconds."""
    import bisect
    keys = {}

    class Key:
        def __init__(self):
            self.acked = []      # acknowledged writes, by completion
            self.unknown = []    # may have happened: (inv, op)
            self.by_val = {}     # value -> writes
            self.copies = []     # unknown copies: the source's values may appear

    for op in history:
        if op["kind"] != "write":
            continue
        k = keys.setdefault(op["key"], Key())
        k.first_unknown = getattr(k, "first_unknown", {True: INF, False: INF})
        k.copy_from = getattr(k, "copy_from", {})
        if op.get("ok"):
            k.acked.append(op)
        elif unknown(op):
            k.unknown.append(op)
            if op["val"].startswith("?copy:"):
                src = op["val"][6:]
                k.copy_from[src] = min(k.copy_from.get(src, INF), op["inv"])
                for present in (True, False):
                    k.first_unknown[present] = min(k.first_unknown[present], op["inv"])
            else:
                present = op["val"] != ABSENT
                k.first_unknown[present] = min(k.first_unknown[present], op["inv"])
        else:
            continue  # refused: never happened
        if not op["val"].startswith("?copy:"):
            k.by_val.setdefault(op["val"], []).append(op)
    written_to = {key: set(k.by_val) for key, k in keys.items()}
    for k in keys.values():
        k.acked.sort(key=lambda w: w["comp"])
        k.comps = [w["comp"] for w in k.acked]
        k.prefmax, m = [], -INF
        for w in k.acked:
            m = max(m, w["inv"])
            k.prefmax.append(m)

    def horizon(k, inv):
        """M(inv): the latest start of an acknowledged write ended before inv."""
        i = bisect.bisect_left(k.comps, inv)
        return k.prefmax[i - 1] if i > 0 else -INF

    def possible(k, w, inv, comp):
        wcomp = w["comp"] if w.get("ok") else INF
        return w["inv"] < comp and wcomp >= horizon(k, inv)

    def may_see(key, val, inv, comp):
        k = keys.get(key)
        if k is None:
            return val == ABSENT
        if val == ABSENT and horizon(k, inv) == -INF:
            return True  # nothing acknowledged yet: the initial absence
        if any(possible(k, w, inv, comp) for w in k.by_val.get(val, [])):
            return True
        # A copy with no answer may have written anything its source held.
        return any(first < comp and (val == ABSENT or val in written_to.get(src, ()))
                   for src, first in k.copy_from.items())

    def may_list(key, present, inv, comp):
        k = keys.get(key)
        if k is None:
            return not present
        if not present and horizon(k, inv) == -INF:
            return True
        m = horizon(k, inv)
        i = bisect.bisect_left(k.comps, m)
        for w in k.acked[i:]:  # ended at or after M: a candidate if it began before comp
            if w["comp"] > comp + 300:
                break
            if w["inv"] < comp and ((w["val"] != ABSENT) == present or w["val"].startswith("?copy:")):
                return True
        return k.first_unknown[present] < comp

    reads = lists = 0
    for op in history:
        if op["kind"] == "read" and "val" in op:
            reads += 1
            if not may_see(op["key"], op["val"], op["inv"], op["comp"]):
                k = keys.get(op["key"])
                last = None
                if k is not None:
                    i = bisect.bisect_left(k.comps, op["inv"])
                    last = k.acked[i - 1] if i > 0 else None
                anomaly(f"read of {op['key']} via {op['via']} at {op['inv']:.2f}-{op['comp']:.2f} returned "
                        f"{op['val']}; last acknowledged before it: "
                        f"{last and (last['val'], last['via'], round(last['inv'], 2), round(last['comp'], 2))}")
        elif op["kind"] == "list" and "keys" in op:
            lists += 1
            for key in KEYS:
                present = key in op["keys"]
                if not may_list(key, present, op["inv"], op["comp"]):
                    anomaly(f"listing at {op['inv']:.2f}-{op['comp']:.2f} has {key} "
                            f"{'present' if present else 'absent'}")
    return reads, lists


def self_test():
    """The checker on histories made by hand: it must flag what it exists to flag."""
    global history, quiet
    quiet = True
    W = lambda key, val, inv, comp, ok=True, status=200: {"kind": "write", "via": "s3", "key": key, "val": val,
                                                         "inv": inv, "comp": comp, "ok": ok, "status": status}
    R = lambda key, val, inv, comp: {"kind": "read", "via": "s3", "key": key, "val": val, "inv": inv, "comp": comp}
    L = lambda keys, inv, comp: {"kind": "list", "keys": set(keys), "inv": inv, "comp": comp}
    cases = [
        ([W("k0", "a", 0, 1), R("k0", "a", 2, 3)], 0),
        ([W("k0", "a", 0, 1), W("k0", "b", 2, 3), R("k0", "a", 4, 5)], 1),        # stale: b acknowledged first
        ([W("k0", "a", 0, 1), W("k0", "b", 2, 3), R("k0", "a", 2.5, 3.5)], 0),    # b still in flight
        ([W("k0", "a", 0, 1), W("k0", ABSENT, 2, 3, status=204), R("k0", "a", 4, 5)], 1),  # a delete undone
        ([W("k0", "a", 0, 1), R("k0", ABSENT, 2, 3)], 1),                         # an acknowledged write lost
        ([W("k0", "a", 0, 1, False, "ConnectionResetError"), R("k0", "a", 2, 3)], 0),  # maybe happened
        ([W("k0", "a", 0, 1, False, 507), R("k0", "a", 2, 3)], 1),                # refused: never happened
        ([R("k0", "zz", 0, 1)], 1),                                               # never written
        ([W("k0", "a", 0, 1), L([], 2, 3)], 1),                                   # listing lost it
        ([W("k0", "a", 0, 1), W("k0", ABSENT, 2, 3, status=204), L(["k0"], 4, 5)], 1),
        ([W("k0", "a", 0, 1), L(["k0"], 2, 3)], 0),
    ]
    failures = 0
    for n, (h, want) in enumerate(cases):
        history = h
        before = len(anomalies)
        check_history()
        got = len(anomalies) - before
        del anomalies[before:]
        if (got > 0) != (want > 0):
            print(f"self-test case {n}: {'missed' if want else 'false'} anomaly: {h}")
            failures += 1
    history = []
    quiet = False
    return failures


# ---------------------------------------------------------------- the run

mnt = None
mount_p = None
stop = threading.Event()
code = 1
try:
    if self_test():
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
    clients = [Client(i, stop, mnt) for i in range(args.clients)]
    for c in clients:
        c.start()
    chaos = threading.Thread(target=nemesis, args=(stop,), daemon=True)
    chaos.start()
    time.sleep(args.duration)
    stop.set()
    chaos.join(timeout=60)
    for c in clients:
        c.join(timeout=120)
    # The last word: a final read of every key once all faults are over.
    if os.path.exists(os.path.join(data, "filler")):
        os.unlink(os.path.join(data, "filler"))
    end = Client(99, threading.Event(), None)
    for key in KEYS:
        s3lib.until(lambda: request(node["port"], "GET", "/", timeout=2)[0] == 200, 20)
        end.get(key)
    end.list(None)
    reads, lists = check_history()
    writes = [op for op in history if op["kind"] == "write"]
    by_via = {}
    for op in history:
        if op["kind"] in ("write", "read"):
            v = by_via.setdefault(f"{op['kind']} via {op['via']}", [0, 0])
            v[0] += 1
            v[1] += 1 if op.get("ok") or (op["kind"] == "read" and "val" in op) else 0
    print(f"history: {len(history)} operations; {reads} reads and {lists} listings checked")
    for k, (n, ok) in sorted(by_via.items()):
        print(f"  {k:22s} {n:5d} ({ok} acknowledged or answered)")
    import bisect
    timed = sorted((op["inv"], op["comp"]) for op in history if "inv" in op and "comp" in op)
    invs = [t[0] for t in timed]
    for fault, n in faults.items():
        during = 0
        for f, start, end in windows:
            if f != fault:
                continue
            lo, hi = bisect.bisect_left(invs, start - 120), bisect.bisect_left(invs, end)  # ops last < 120 s
            during += sum(1 for inv, comp in timed[lo:hi] if comp > start)
        print(f"  fault {fault:20s} {n:3d} times, {during} operations overlapped it")
    errors = [op for op in history if op["kind"] == "error"]
    if errors:
        print(f"  client-side errors: {len(errors)} (first: {errors[0]['op']} {errors[0]['why']})")
    if not writes or reads < 10:
        anomaly(f"too little happened to check: {len(writes)} writes, {reads} reads")
    with open(os.path.join(tmp, "history.json"), "w") as f:
        json.dump({"seed": SEED, "history": [{k: (sorted(v) if isinstance(v, set) else v) for k, v in op.items()}
                                             for op in history]}, f, default=str)
    if anomalies:
        keep = os.path.join(tempfile.gettempdir(), f"aq_history_{SEED}.json")
        shutil.copy(os.path.join(tmp, "history.json"), keep)
        print(f"history: {len(anomalies)} anomalies; replay with --seed {SEED}; the history is in {keep}")
    else:
        print(f"history: 0 anomalies (seed {SEED})")
        code = 0
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
