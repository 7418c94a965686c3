#!/usr/bin/python3
"""What large request bodies cost the node before they are authorized.

A read plan (POST /_aquifer/plan) may be 8 MiB. 64 of them at once, from a
stored key that may read nothing, must be refused (403) without the node
growing more than 64 MiB over idle (its peak resident size, VmHWM); 8 at
once from a key that may read, each 8 MiB of tiny JSON values (a document
tree of one took ~630 MB), are refused as malformed (400) with the node's
peak growing by less than their bodies plus 64 MiB.

usage: plan_memory_test.py path/to/aquifer
"""
import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
check = s3lib.Checks()
tmp = tempfile.mkdtemp(prefix="aq_planmem_")
node = None
MiB = 1 << 20


def memory_kb(pid, field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def stored_key(name, *grants):
    out = os.path.join(tmp, name + ".key")
    r = subprocess.run([AQ, "key", "add", name, *[a for g in grants for a in ("--grant", g)], "--out", out,
                        "--data", os.path.join(tmp, "data")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for line in open(out):
        parts = line.split()
        if len(parts) == 2 and not line.startswith("#"):
            return parts
    raise SystemExit(f"no key in {out}")


try:
    creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
    node = s3lib.Node(AQ, os.path.join(tmp, "data"), credentials=creds)
    st, _, _ = s3lib.request(node.port, "PUT", "/data")
    assert st == 200
    writer = stored_key("writer", "write:data")  # may write, may read nothing
    reader = stored_key("reader", "ro:data")
    body = b'{"reads": [' + b"{}," * ((8 * MiB - 16) // 3) + b"{}]}"
    assert len(body) <= 8 * MiB

    def post(key, n):
        return s3lib.request(node.port, "POST", "/_aquifer/plan", f"stream=s{n}", body=body, key=key[0],
                             secret=key[1], timeout=120)[0]

    # Keys are re-read by the node within about 2 s of key add.
    s3lib.until(lambda: post(reader, 0) == 400, 10)
    idle = memory_kb(node.p.pid, "VmHWM")
    with concurrent.futures.ThreadPoolExecutor(64) as ex:
        codes = list(ex.map(lambda n: post(writer, n), range(64)))
    grew = (memory_kb(node.p.pid, "VmHWM") - idle) / 1024
    check(all(c == 403 for c in codes), f"64 plans from a key that may read nothing: 403 ({sorted(set(codes))})")
    check(grew < 64, f"... and the node's peak grew {grew:.0f} MiB (under 64)")
    print(f"64 unauthorized 8 MiB plans: peak +{grew:.1f} MiB over {idle / 1024:.0f} MiB idle")

    before = memory_kb(node.p.pid, "VmHWM")
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        codes = list(ex.map(lambda n: post(reader, n), range(8)))
    grew = (memory_kb(node.p.pid, "VmHWM") - before) / 1024
    check(all(c == 400 for c in codes), f"8 malformed 8 MiB plans from a reader: 400 ({sorted(set(codes))})")
    check(grew < 8 * 8 + 64, f"... and the node's peak grew {grew:.0f} MiB (under their bodies + 64)")
    print(f"8 malformed 8 MiB plans from a reader: peak +{grew:.1f} MiB")
    st, _, b = s3lib.request(node.port, "GET", "/")
    check(st == 200, f"the node still serves: {st}")
finally:
    if node is not None:
        node.stop()
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
