#!/usr/bin/python3
"""A cluster's data integrity when things go wrong: a GET in progress
survives an overwrite made through another node; an object whose blocks no
live node holds is refused with 503 before any byte (not 200 and a cut
body); a PUT whose etcd commit stalls is resolved, never acknowledged
wrongly or left pointing at deleted blocks; `cluster status` finds objects
whose blocks are gone; users' keys cannot write or delete replicas.
Real etcd and real node processes on 127.0.0.1.
usage: cluster_integrity_test.py path/to/aquifer"""
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402
from s3lib import Checks, boto, request  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
check = Checks()
tmp = tempfile.mkdtemp(prefix="aq_cluster_integrity_")


free_port, wait_for = s3lib.free_port, s3lib.until


ETCD = s3lib.Etcd(tmp, start=False)
ETCD_PORT = ETCD.port
META = ETCD.url
procs = {}


def start_etcd():
    return ETCD.start()


def start_node(name, creds, meta=None):
    port = procs[name]["port"] if name in procs else free_port()
    meta = meta or (procs[name]["meta"] if name in procs else META)  # a restart keeps its metadata route
    p = subprocess.Popen([AQ, "serve", "--data", os.path.join(tmp, name), "--listen", f"127.0.0.1:{port}",
                          "--meta", meta, "--replicas", "2", "--credentials", creds, "--block-size", "256KiB",
                          "--lease-ttl", "30", "--meta-timeout", "3", "--node-id", name],
                         stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, name + ".log"), "a"), text=True)
    for _ in range(20):
        line = p.stdout.readline()
        if "auth:" in line or "cluster:" in line or not line:
            break
    procs[name] = {"proc": p, "port": port, "meta": meta}
    return port


def status_json():
    r = subprocess.run([AQ, "cluster", "status", "--meta", META, "--json"], capture_output=True, text=True)
    return r.returncode, (json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}), r.stderr


class LossyEtcdProxy:
    """Forwards a node's etcd requests; while `drop_writes` is set, a
    transaction that writes is applied by etcd but its answer is lost (the
    node times out): the case where a commit's outcome is unknown."""

    def __init__(self, upstream_port):
        self.upstream = upstream_port
        self.drop_writes = threading.Event()
        self.dropped = 0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    @staticmethod
    def read_request(c, buf):
        while b"\r\n\r\n" not in buf:
            more = c.recv(65536)
            if not more:
                return None, buf
            buf += more
        head, _, rest = buf.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v.strip())
        while len(rest) < length:
            more = c.recv(65536)
            if not more:
                return None, b""
            rest += more
        return head + b"\r\n\r\n" + rest[:length], rest[length:]

    def serve(self, c):
        up = socket.create_connection(("127.0.0.1", self.upstream))

        def pump():
            try:
                while True:
                    d = up.recv(65536)
                    if not d:
                        break
                    c.sendall(d)
            except OSError:
                pass
            c.close()

        threading.Thread(target=pump, daemon=True).start()
        buf = b""
        try:
            while True:
                req, buf = self.read_request(c, buf)
                if req is None:
                    break
                if self.drop_writes.is_set() and req.startswith(b"POST /v3/kv/txn") and b"request_put" in req:
                    side = socket.create_connection(("127.0.0.1", self.upstream))
                    side.sendall(req)
                    side.recv(65536)  # applied; the answer goes nowhere
                    side.close()
                    self.dropped += 1
                    continue
                up.sendall(req)
        except OSError:
            pass
        up.close()


etcd = None
try:
    creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
    etcd = start_etcd()
    proxy = LossyEtcdProxy(ETCD_PORT)
    ports = {"n1": start_node("n1", creds, f"etcd://127.0.0.1:{proxy.port}")}
    ports.update({n: start_node(n, creds) for n in ("n2", "n3")})
    check(wait_for(lambda: len(status_json()[1].get("nodes", [])) == 3, 20), "three nodes joined")
    a, b = boto(ports["n1"]), boto(ports["n2"])
    a.create_bucket(Bucket="data")

    # ---- internal block API: users' keys may read, never write or delete ----
    body = os.urandom(300_000)
    a.put_object(Bucket="data", Key="obj", Body=body)
    st, _, lay = request(ports["n1"], "GET", "/_aquifer/layout/data/obj")
    layout = json.loads(lay) if st == 200 else {"blocks": []}
    check(st == 200 and len(layout["blocks"]) == 2, "layout readable with a user key")
    blk = layout["blocks"][0]
    q = f"crc={blk['crc32c']}&pool={blk['pool']}&size={blk['size']}"
    holder = int(blk["addresses"][0].split(":")[1])
    st, _, _ = request(holder, "GET", f"/_aquifer/blocks/{blk['id']}", q)
    check(st == 200, "a replica readable with a user key")
    st, _, data = request(holder, "DELETE", f"/_aquifer/blocks/{blk['id']}", q)
    check(st == 403 and b"AccessDenied" in data, f"a user key cannot delete a replica: {st}")
    st, _, data = request(holder, "PUT", f"/_aquifer/blocks/{'0' * 32}", "crc=0&pool=default&size=1", b"x")
    check(st == 403, f"a user key cannot plant a replica: {st}")
    check(a.get_object(Bucket="data", Key="obj")["Body"].read() == body, "object intact")

    # ---- a GET in progress on one node survives an overwrite through another ----
    big = os.urandom(6 << 20)
    a.put_object(Bucket="data", Key="big", Body=big)
    resp = a.get_object(Bucket="data", Key="big")["Body"]
    first = resp.read(256 << 10)
    b.put_object(Bucket="data", Key="big", Body=b"overwritten")
    b.delete_object(Bucket="data", Key="big")
    time.sleep(3)
    rest = resp.read()
    check(first + rest == big, f"the reader finished the old layout: {len(first) + len(rest)} of {len(big)} bytes")

    # ---- unavailable blocks: 503 before any byte ----
    a.put_object(Bucket="data", Key="fragile", Body=os.urandom(600_000))
    st, _, lay = request(ports["n1"], "GET", "/_aquifer/layout/data/fragile")
    holders = {addr for blk in json.loads(lay)["blocks"] for addr in blk["addresses"]}
    by_port = {v: k for k, v in ports.items()}
    victims = [by_port[int(h.split(":")[1])] for h in holders]
    survivor = [n for n in ports if n not in victims]
    if survivor:
        for v in victims:
            procs[v]["proc"].send_signal(signal.SIGKILL)
            procs[v]["proc"].wait()
        time.sleep(1)
        st, h, data = request(ports[survivor[0]], "GET", "/data/fragile", timeout=30)
        check(st == 503 and b"ServiceUnavailable" in data, f"no live holder: 503 before the body, not 200: {st}")
        for v in victims:
            start_node(v, creds)
        check(wait_for(lambda: boto(ports[survivor[0]]).get_object(Bucket="data", Key="fragile")["Body"].read(), 30),
              "readable again once a holder is back")
    else:
        check(True, "every node holds a replica of the object (2 replicas on 3 nodes): nothing to take away")

    # ---- a commit whose answer etcd never sends: resolved, never acknowledged wrongly ----
    payload = os.urandom(700_000)
    proxy.drop_writes.set()
    t0 = time.time()
    etag = error = None
    try:
        etag = boto(ports["n1"], read_timeout=120).put_object(Bucket="data", Key="lost-answer", Body=payload)["ETag"]
    except Exception as e:  # noqa: BLE001 - an error is an outcome to check
        error = str(e)
    proxy.drop_writes.clear()
    check(proxy.dropped >= 1, f"the commit's answer was lost ({proxy.dropped} dropped)")
    check(etag == '"%s"' % hashlib.md5(payload).hexdigest(),
          f"the PUT is acknowledged once the node reads back that it committed: {error}")
    check(a.get_object(Bucket="data", Key="lost-answer")["Body"].read() == payload,
          "the object is whole (its blocks were not deleted as a failed write's)")
    with open(os.path.join(tmp, "n1.log")) as f:
        check("read back: it was committed" in f.read(), "the node logged how it resolved the commit")

    # ---- etcd stalls during a PUT: an error or a whole object, never an empty one ----
    result = {}

    def put():
        try:
            result["etag"] = boto(ports["n2"], read_timeout=120).put_object(Bucket="data", Key="stalled",
                                                                             Body=payload)["ETag"]
        except Exception as e:  # noqa: BLE001
            result["error"] = str(e)

    etcd.send_signal(signal.SIGSTOP)
    t = threading.Thread(target=put)
    t.start()
    time.sleep(5)
    etcd.send_signal(signal.SIGCONT)
    t.join(timeout=90)
    check(not t.is_alive(), "the stalled PUT finished")
    got = None
    if wait_for(lambda: a.head_object(Bucket="data", Key="stalled"), 10):
        got = a.get_object(Bucket="data", Key="stalled")["Body"].read()
    if "etag" in result:
        check(got == payload, "acknowledged after the stall: the object is whole")
    else:
        check("ServiceUnavailable" in result.get("error", ""), "a failed stalled PUT is 503: " + str(result))
        check(got is None or got == payload, "and the object is absent or whole, never empty")
    rc, st, err = status_json()
    check(rc == 0 and st.get("missing_blocks", -1) == 0, f"cluster status finds nothing missing: {rc} {err}")

    # ---- cluster status finds an object whose blocks are gone ----
    a.put_object(Bucket="data", Key="doomed", Body=os.urandom(100_000))
    r = subprocess.run([AQ, "stat-file", "data/doomed", "--meta", META, "--json", "--data",
                        os.path.join(tmp, "n1")], capture_output=True, text=True)
    blk = json.loads(r.stdout)["blocks"][0]
    for n in blk["nodes"]:
        for root, _, files in os.walk(os.path.join(tmp, n)):
            if blk["id"] in files:
                os.remove(os.path.join(root, blk["id"]))
    r = subprocess.run([AQ, "cluster", "status", "--meta", META], capture_output=True, text=True)
    check(r.returncode == 1 and "DAMAGE" in r.stdout and "data/doomed" in r.stdout,
          "cluster status reports the object whose block no node holds: " + r.stdout[-400:] + r.stderr)
    rc, st, _ = status_json()
    check(rc == 1 and st.get("missing_blocks") == 1 and "data/doomed" in st.get("damaged_objects", []),
          "... and in JSON")
    st, _, data = request(ports["n1"], "GET", "/data/doomed", timeout=30)
    check(st in (500, 503) and b"<Error>" in data, f"reading it is an error, not a cut body: {st}")

    # ---- aquifer mount: a node killed under a reader, the read fails over ----
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    if os.access("/dev/fuse", os.R_OK | os.W_OK):
        body = os.urandom(12 << 20)
        a.put_object(Bucket="data", Key="mounted", Body=body)
        stats = os.path.join(tmp, "mount-stats.json")
        mp = subprocess.Popen([AQ, "--credentials", creds, "mount", "-f", f"aquifer://127.0.0.1:{ports['n1']}/data",
                               mnt, "--stats-file", stats], stdout=subprocess.DEVNULL,
                              stderr=open(os.path.join(tmp, "mount.log"), "a"))
        try:
            check(wait_for(lambda: os.path.ismount(mnt), 15), "the cluster mounted")
            st, _, lay = request(ports["n1"], "GET", "/_aquifer/layout/data/mounted")
            late = json.loads(lay)["blocks"][1:]
            holders = {int(h.split(":")[1]) for blk in late for h in blk["addresses"]} - {ports["n1"]}
            victim = next(n for n, p in ports.items() if p in holders)
            with open(os.path.join(mnt, "mounted"), "rb") as f:
                first = f.read(1 << 20)
                procs[victim]["proc"].send_signal(signal.SIGKILL)
                procs[victim]["proc"].wait()
                rest = f.read()
            check(first + rest == body, f"the mount read all 12 MiB with {victim} killed under it")
            time.sleep(1.2)
            with open(stats) as f:
                errors = json.load(f)["read_errors"]
            check(errors == 0, f"no failed reads: {errors}")
        finally:
            mp.send_signal(signal.SIGTERM)
            mp.wait(timeout=20)
        check(not os.path.ismount(mnt), "unmounted")
    else:
        print("SKIP: the mount part: /dev/fuse is not usable here")
finally:
    for info in procs.values():
        p = info["proc"]
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
    if etcd is not None:
        etcd.send_signal(signal.SIGCONT)
        etcd.terminate()
        etcd.wait()
    if not os.environ.get("AQ_KEEP_TMP"):
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print("kept", tmp)
check.finish()
