#!/usr/bin/python3
"""A node whose data directory is a 24 MiB file system filled to 100%:
PUTs answer 507 InsufficientStorage (never 500 or 503) and leave nothing
half-written; DELETE, DeleteObjects, a multipart abort and `aquifer rm`
still work (the metadata keeps a reserve for them); a PUT right after a
delete succeeds (freed blocks go at once, not after the reclaim delay);
every object acknowledged before reads back whole after a restart.
Skips (exit 77) where a tmpfs cannot be mounted (needs root).
usage: full_disk_test.py path/to/aquifer"""
import base64
import hashlib
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402
from s3lib import Checks, request  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
tmp, data = s3lib.small_disk("aq_full_", "24m", "a full disk needs a small file system")

check = Checks()
creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
node = None


def md5_header(body):
    return {"Content-MD5": base64.b64encode(hashlib.md5(body).digest()).decode()}


try:
    node = s3lib.Node(AQ, data, credentials=creds)
    port = node.port
    check(request(port, "PUT", "/bkt")[0] == 200, "bucket created")
    stored = {}
    # Fill it: 1 MiB objects, then smaller ones until even one byte fails.
    statuses = set()
    for size in (1 << 20, 65536, 4096, 512, 1):
        for i in range(10000):
            body = os.urandom(size)
            st, _, resp = request(port, "PUT", f"/bkt/f{size}-{i}", body=body)
            if st == 200:
                stored[f"f{size}-{i}"] = body
                continue
            statuses.add(st)
            check(b"<Code>InsufficientStorage</Code>" in resp, f"a full disk is 507 InsufficientStorage: {st} {resp[:200]}")
            break
    df = os.statvfs(data)
    print(f"filled: {len(stored)} objects, {df.f_bavail * df.f_frsize} bytes left")
    check(statuses == {507}, f"every refused PUT answered 507: {statuses}")
    check(len(stored) > 10, f"objects stored before the disk filled: {len(stored)}")

    # A multipart upload started earlier is aborted on the full disk.
    st, _, resp = request(port, "POST", "/bkt/mp", query="uploads=")
    upload = resp.split(b"<UploadId>")[1].split(b"</UploadId>")[0].decode() if st == 200 else ""
    if st == 200:
        st, _, resp = request(port, "DELETE", "/bkt/mp", query="uploadId=" + upload)
        check(st == 204, f"a multipart abort on a full disk: {st} {resp[:200]}")
    else:
        check(st == 507, f"a new upload on a full disk: 507 ({st})")

    # Deletes work on the full disk.
    keys = sorted(stored, key=lambda k: -len(stored[k]))
    st, _, resp = request(port, "DELETE", f"/bkt/{keys[0]}")
    check(st == 204, f"DELETE on a full disk: {st} {resp[:300]}")
    del stored[keys[0]]
    body = f"<Delete><Object><Key>{keys[1]}</Key></Object><Object><Key>{keys[2]}</Key></Object></Delete>".encode()
    st, _, resp = request(port, "POST", "/bkt", query="delete=", body=body, headers=md5_header(body))
    check(st == 200 and resp.count(b"<Deleted>") == 2 and b"<Error>" not in resp,
          f"DeleteObjects on a full disk: {st} {resp[:300]}")
    del stored[keys[1]], stored[keys[2]]
    env = dict(os.environ, AWS_SHARED_CREDENTIALS_FILE="")
    r = subprocess.run([AQ, "--credentials", creds, "rm", f"aquifer://127.0.0.1:{port}/bkt/{keys[3]}"],
                       capture_output=True, text=True, env=env)
    check(r.returncode == 0, f"aquifer rm on a full disk: {r.stderr}")
    del stored[keys[3]]

    # The space is usable at once (not after the reclaim delay).
    body = os.urandom(1 << 20)
    st, _, resp = request(port, "PUT", "/bkt/after", body=body)
    check(st == 200, f"a PUT right after the deletes: {st} {resp[:200]}")
    if st == 200:
        stored["after"] = body

    # Every acknowledged object reads back whole, before and after a restart.
    def all_whole():
        bad = [k for k, v in stored.items() if request(port, "GET", f"/bkt/{k}")[2] != v]
        return bad
    check(all_whole() == [], "every acknowledged object reads back whole")
    node.stop()
    node = s3lib.Node(AQ, data, credentials=creds, listen=f"127.0.0.1:{port}")
    check(all_whole() == [], "... and after a restart")
    leftovers = [n for _, _, files in os.walk(data) for n in files if n.endswith(".tmp")]
    check(leftovers == [], f"no half-written block files: {leftovers[:5]}")
finally:
    if node is not None:
        node.stop()
    subprocess.run(["umount", data])
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
