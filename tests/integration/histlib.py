"""The history checker's parts (Jepsen's idea, on one machine), shared by
the single-node run (history_test.py) and the many-host one on a lab
cluster (lab_history_test.py): values that carry their key, id and length;
clients that run random operations through S3 (conditional writes
included), the aquifer:// client and the mount and record each with its
invocation and completion times; and the check of a recorded history
(regular registers per key, listings key by key, and conditional writes:
each one's condition held or failed as its answer says, and of writers
racing on one condition exactly one won). See history_test.py for the rules.
"""
import bisect
import hashlib
import json
import os
import random
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse

INF = float("inf")
ABSENT = "<absent>"
BUCKET = "hist"
SEED = 0
KEYS = []


def setup(seed, n_keys, bucket="hist"):
    global SEED, KEYS, BUCKET, t0
    SEED, BUCKET = seed, bucket
    KEYS = [f"k{i}" for i in range(n_keys)] + ["dir/é ü", "dir/a b"]  # odd names too
    t0 = time.monotonic()


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
    """One client's thread of random operations. `target` says where they go:
    request(rng, method, path, query, body, headers, timeout) -> (status,
    headers, body) for S3, aq_url(key) for the aquifer:// client, and aq,
    creds and tmp for running `aquifer cp`; enter(n), if it has one, runs
    first in the thread (a lab's client joins its host's network there)."""

    def __init__(self, n, stop, mnt, target):
        super().__init__(daemon=True)
        self.n, self.stop, self.mnt, self.target = n, stop, mnt, target
        self.rng = random.Random(SEED * 1000 + n)
        self.seq = 0

    def new_value(self, key, big=False):
        self.seq += 1
        vid = f"c{self.n}-{self.seq}"
        length = self.rng.randrange(100, 200_000) if not big else self.rng.randrange(5 << 20, (5 << 20) + 100_000)
        return vid, body_of(key, vid, length)

    def run(self):
        if hasattr(self.target, "enter"):
            self.target.enter(self.n)
        kinds = ["put"] * 6 + ["get"] * 8 + ["delete"] * 2 + ["list"] * 2 + ["copy"] * 2 + ["mpu"]
        kinds += ["create"] * 2 + ["replace"] * 2
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
    def put(self, key, via="s3", headers=None, **extra):
        """A PUT of a new value; `headers` make it conditional (extra: its "cond")."""
        vid, body = self.new_value(key)
        remember(vid, body)
        op = {"kind": "write", "via": via, "key": key, "val": vid, **extra, "inv": now()}
        try:
            st, _, _ = self.target.request(self.rng, "PUT", path(key), body=body, headers=headers, timeout=10)
            op["ok"], op["status"] = st == 200, st
        except OSError as e:
            op["ok"], op["status"] = False, repr(e)[:80]
        op["comp"] = now()
        record(op)

    def get(self, key):
        """A GET, recorded as a read; returns its answer's headers."""
        op = {"kind": "read", "via": "s3", "key": key, "inv": now()}
        h = {}
        try:
            st, h, b = self.target.request(self.rng, "GET", path(key), timeout=10)
        except OSError as e:
            st, b = repr(e)[:80], b""
        op["comp"] = now()
        op["status"] = st
        if st == 200:
            judge(op, f"GET {key}", b)
        elif st == 404:
            op["val"] = ABSENT
        record(op)
        return op, h

    # -- S3 conditional writes: each is a read (its condition) and a write
    def create(self, key):
        """PUT with If-None-Match: *: stores only if the key is absent."""
        self.put(key, "if-none-match", {"If-None-Match": "*"}, cond=ABSENT)

    def replace(self, key):
        """GET the key, then PUT with If-Match: its ETag: stores only if it still holds what was read."""
        read, h = self.get(key)
        if read.get("val", ABSENT) != ABSENT and "etag" in h:
            self.put(key, "if-match", {"If-Match": h["etag"]}, cond=read["val"])

    def delete(self, key):
        op = {"kind": "write", "via": "s3", "key": key, "val": ABSENT, "inv": now()}
        try:
            st, _, _ = self.target.request(self.rng, "DELETE", path(key), timeout=10)
            op["ok"] = st == 204
            op["status"] = st
        except OSError as e:
            op["ok"], op["status"] = False, repr(e)[:80]
        op["comp"] = now()
        record(op)

    def list(self, _key):
        op = {"kind": "list", "inv": now()}
        try:
            st, _, b = self.target.request(self.rng, "GET", "/" + BUCKET, "list-type=2&encoding-type=url", timeout=10)
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
            st, _, b = self.target.request(self.rng, "PUT", path(dst),
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
            st, _, b = self.target.request(self.rng, "POST", path(key), "uploads=", timeout=10)
            if st == 200:
                up = b.split(b"<UploadId>")[1].split(b"</UploadId>")[0].decode()
                q = "uploadId=" + urllib.parse.quote(up, safe="")
                parts = []
                for n, part in ((1, p1), (2, p2)):
                    st, h, _ = self.target.request(self.rng, "PUT", path(key), f"partNumber={n}&{q}", body=part, timeout=20)
                    if st != 200:
                        break
                    parts.append(f"<Part><PartNumber>{n}</PartNumber><ETag>{h['etag']}</ETag></Part>")
                if len(parts) == 2:
                    xml = ("<CompleteMultipartUpload>" + "".join(parts) + "</CompleteMultipartUpload>").encode()
                    st, _, b = self.target.request(self.rng, "POST", path(key), q, body=xml, timeout=20)
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
        t = self.target
        src = os.path.join(t.tmp, f"cp-{self.n}")
        with open(src, "wb") as f:
            f.write(body)
        op = {"kind": "write", "via": "aquifer://", "key": key, "val": vid, "inv": now()}
        r = subprocess.run([t.aq, "--credentials", t.creds, "cp", src, t.aq_url(key)], capture_output=True,
                           timeout=60)
        op["comp"] = now()
        op["ok"] = r.returncode == 0
        record(op)

    def cp_get(self, key):
        t = self.target
        dst = os.path.join(t.tmp, f"cpget-{self.n}")
        if os.path.exists(dst):
            os.unlink(dst)
        op = {"kind": "read", "via": "aquifer://", "key": key, "inv": now()}
        r = subprocess.run([t.aq, "--credentials", t.creds, "cp", t.aq_url(key), dst], capture_output=True, text=True,
                           timeout=60)
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


def run_clients(n, mnt, make_target, nemesis, duration, stop, nemesis_join=60, client_join=120):
    """n clients and the nemesis (a function of the stop event) for
    `duration` seconds; then stop, and wait for them to finish."""
    clients = [Client(i, stop, mnt, make_target()) for i in range(n)]
    for c in clients:
        c.start()
    chaos = threading.Thread(target=nemesis, args=(stop,), daemon=True)
    chaos.start()
    time.sleep(duration)
    stop.set()
    chaos.join(timeout=nemesis_join)
    for c in clients:
        c.join(timeout=client_join)


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

    def may_hold_other(key, val, inv, comp):
        """Whether the key may have held anything but val (absence included) within [inv, comp]."""
        k = keys.get(key)
        if k is None or may_list(key, False, inv, comp):
            return True
        return any(v != val and may_see(key, v, inv, comp) for v in k.by_val if v != ABSENT) or \
            any(first < comp for first in k.copy_from.values())

    # Conditional writes: a success is also a read of its condition (the key
    # absent, or holding the value whose ETag it named) at a point of its
    # interval; a 412 (or If-Match's 404) a read of its condition failing.
    # And of writers racing on one condition exactly one wins: two successful
    # creates of a key need a delete that may have come between them, two
    # successful replaces of one value a write of that value between them.
    conditional = [op for op in history if op["kind"] == "write" and "cond" in op]
    for op in conditional:
        key, inv, comp, cond = op["key"], op["inv"], op["comp"], op["cond"]
        what = f"{op['via']} write of {key} at {inv:.2f}-{comp:.2f}"
        if op.get("ok"):
            if not may_see(key, cond, inv, comp):
                anomaly(f"{what} succeeded, but {key} could not have been {cond} then")
        elif op.get("status") in (412, 404):
            if cond == ABSENT and not may_list(key, True, inv, comp):
                anomaly(f"{what} was refused ({op['status']}), but {key} could not have existed then")
            if cond != ABSENT and not may_hold_other(key, cond, inv, comp):
                anomaly(f"{what} was refused ({op['status']}), but {key} could only have held {cond} then")
    wins = {}
    for op in conditional:
        if op.get("ok"):
            wins.setdefault((op["key"], op["cond"]), []).append(op)
    for (key, cond), ops in wins.items():
        ops.sort(key=lambda o: o["inv"])
        k = keys[key]
        for a, b in zip(ops, ops[1:]):
            between = [w for w in k.acked + k.unknown if w["val"] in (cond, f"?copy:{w.get('src')}")
                       and w is not a and w is not b and w.get("comp", INF) > a["inv"] and w["inv"] < b["comp"]]
            if not between:
                anomaly(f"two conditional writes of {key} on {cond} both won: {a['val']} at "
                        f"{a['inv']:.2f}-{a['comp']:.2f} and {b['val']} at {b['inv']:.2f}-{b['comp']:.2f}")

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
    C = lambda key, val, cond, inv, comp, ok=True, status=200: dict(W(key, val, inv, comp, ok, status), cond=cond)
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
        # conditional writes (C: If-None-Match: * when cond is ABSENT, else If-Match on cond's ETag)
        ([C("k0", "a", ABSENT, 0, 1), C("k0", "b", ABSENT, 0.5, 1.5)], 1),          # two creates both won
        ([C("k0", "a", ABSENT, 0, 1), W("k0", ABSENT, 1.2, 1.4, status=204),
          C("k0", "b", ABSENT, 1.5, 2)], 0),                                          # a delete between
        ([W("k0", "a", 0, 1), C("k0", "b", ABSENT, 2, 3)], 1),                       # created over a value
        ([C("k0", "a", ABSENT, 0, 1, ok=False, status=412)], 1),                     # refused, nothing existed
        ([W("k0", "a", 0, 1), C("k0", "b", ABSENT, 2, 3, ok=False, status=412)], 0),
        ([W("k0", "a", 0, 1), C("k0", "b", "a", 2, 3), C("k0", "c", "a", 2.5, 3.5)], 1),  # one value replaced twice
        ([W("k0", "a", 0, 1), C("k0", "b", "a", 2, 3), C("k0", "c", "b", 4, 5)], 0),
        ([W("k0", "a", 0, 1), C("k0", "b", "a", 2, 3, ok=False, status=412)], 1),   # refused, a was all there was
        ([W("k0", "a", 0, 1), W("k0", "x", 1.5, 2.5), C("k0", "b", "a", 2, 3, ok=False, status=412)], 0),
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




def finish(faults, windows, tmp):
    """Check the history, print what happened (operations by kind and path,
    faults and the operations that overlapped each) and keep the history as
    JSON; 0 when there is no anomaly, 1 otherwise."""
    reads, lists = check_history()
    writes = [op for op in history if op["kind"] == "write"]
    by_via = {}
    for op in history:
        if op["kind"] in ("write", "read"):
            v = by_via.setdefault(f"{op['kind']} via {op['via']}", [0, 0])
            v[0] += 1
            v[1] += 1 if op.get("ok") or (op["kind"] == "read" and "val" in op) else 0
    judged = sum(1 for op in writes if "cond" in op and (op.get("ok") or op.get("status") in (412, 404)))
    print(f"history: {len(history)} operations; {reads} reads, {lists} listings and {judged} conditional writes "
          "(won or refused) checked")
    for k, (n, ok) in sorted(by_via.items()):
        print(f"  {k:22s} {n:5d} ({ok} acknowledged or answered)")
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
        return 0
    return 1
