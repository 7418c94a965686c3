#!/usr/bin/env python3
"""Per-key permissions against real nodes and real clients.

A one-node cluster (real etcd) holds the stored keys; every S3 operation
boto3 makes is tried with each kind of requester — the administrator
(credentials file), no key, an unknown key, a wrong secret, a read-only key
(ro:data), another bucket's key (all:other), a key limited to a prefix
(rw:data/train/) and the cluster's node key presented by a user — against a
table of expected outcomes; presigned URLs inherit their key's rights.
After the table, every object a denied request targeted is still there with
its bytes, nothing it would have created exists, and the node counted the
denials. Then the aquifer:// client (aquifer cp/ls/rm) and, where /dev/fuse
is usable, the mount with a read-only key; and on a single node (SQLite) a
key added, used, narrowed and removed while the node runs, each change
effective without a restart.
usage: permissions_test.py AQUIFER"""
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402

AQ = sys.argv[1]
tmp = tempfile.mkdtemp(prefix="aq-perm-")
check = s3lib.Checks()
creds = s3lib.write_credentials(os.path.join(tmp, "creds"))
DENIED = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403"}  # 403: a HEAD (no body)


def client(port, key, secret, unsigned=False):
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config
    cfg = dict(s3={"addressing_style": "path"}, retries={"max_attempts": 1})
    cfg["signature_version"] = UNSIGNED if unsigned else "s3v4"
    return boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", aws_access_key_id=key or "x",
                        aws_secret_access_key=secret or "x", region_name="us-east-1", config=Config(**cfg))


def outcome(fn):
    """'ok', or the S3 error code; a denial is one of DENIED."""
    import botocore
    try:
        fn()
        return "ok"
    except botocore.exceptions.ClientError as e:
        code = e.response["Error"]["Code"]
        return code if code else str(e.response["ResponseMetadata"]["HTTPStatusCode"])


def key_file(path):
    line = [ln for ln in open(path) if ln.strip() and not ln.startswith("#")][0]
    return line.split()


aq = s3lib.Cli(AQ, timeout=120)


def node_secret(etcd_port):
    body = json.dumps({"key": base64.b64encode(b"/aquifer/config").decode()}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{etcd_port}/v3/kv/range", data=body, method="POST")
    kv = json.loads(urllib.request.urlopen(req, timeout=10).read())["kvs"][0]
    return json.loads(base64.b64decode(kv["value"]))["node_secret"]


# The operations, each a function of (client, who): `who` names the
# requester so that what each creates or deletes is its own.
def ops():
    def multipart(c, w):
        u = c.create_multipart_upload(Bucket="data", Key=f"train/mp-{w}")["UploadId"]
        e = c.upload_part(Bucket="data", Key=f"train/mp-{w}", UploadId=u, PartNumber=1, Body=b"m" * 100)["ETag"]
        c.complete_multipart_upload(Bucket="data", Key=f"train/mp-{w}", UploadId=u,
                                    MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]})

    lifecycle = {"Rules": [{"ID": "r", "Status": "Enabled", "Filter": {"Prefix": ""},
                            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 3}}]}
    return [
        # (name, kind, fn): kind is what the operation needs
        ("HeadBucket", "touch", lambda c, w: c.head_bucket(Bucket="data")),
        ("GetBucketLocation", "touch", lambda c, w: c.get_bucket_location(Bucket="data")),
        ("GetBucketVersioning", "touch", lambda c, w: c.get_bucket_versioning(Bucket="data")),
        ("GetBucketAcl", "touch", lambda c, w: c.get_bucket_acl(Bucket="data")),
        ("ListObjectsV2", "list", lambda c, w: c.list_objects_v2(Bucket="data")),
        ("ListObjects", "list", lambda c, w: c.list_objects(Bucket="data")),
        ("ListObjectsV2 train/", "list-train", lambda c, w: c.list_objects_v2(Bucket="data", Prefix="train/")),
        ("ListObjectVersions", "list", lambda c, w: c.list_object_versions(Bucket="data")),
        ("ListMultipartUploads", "list", lambda c, w: c.list_multipart_uploads(Bucket="data")),
        ("HeadObject", "read", lambda c, w: c.head_object(Bucket="data", Key="train/a.jpg")),
        ("GetObject", "read", lambda c, w: c.get_object(Bucket="data", Key="train/a.jpg")["Body"].read()),
        ("GetObject val/", "read-val", lambda c, w: c.get_object(Bucket="data", Key="val/b.jpg")["Body"].read()),
        ("GetObjectAcl", "read", lambda c, w: c.get_object_acl(Bucket="data", Key="train/a.jpg")),
        ("GetObjectTagging", "read", lambda c, w: c.get_object_tagging(Bucket="data", Key="train/a.jpg")),
        ("PutObject", "write", lambda c, w: c.put_object(Bucket="data", Key=f"train/new-{w}", Body=b"new")),
        ("PutObject val/", "write-val", lambda c, w: c.put_object(Bucket="data", Key=f"val/new-{w}", Body=b"new")),
        ("CopyObject", "copy", lambda c, w: c.copy_object(Bucket="data", Key=f"train/copy-{w}",
                                                          CopySource={"Bucket": "data", "Key": "train/a.jpg"})),
        ("CopyObject from other", "copy-other",
         lambda c, w: c.copy_object(Bucket="data", Key=f"train/stolen-{w}",
                                    CopySource={"Bucket": "other", "Key": "secret.bin"})),
        ("MultipartUpload", "write", multipart),
        ("PutObjectTagging", "write", lambda c, w: c.put_object_tagging(Bucket="data", Key="train/a.jpg",
                                                                        Tagging={"TagSet": []})),
        ("PutObjectAcl", "write", lambda c, w: c.put_object_acl(Bucket="data", Key="train/a.jpg", ACL="private")),
        ("DeleteObject", "delete", lambda c, w: c.delete_object(Bucket="data", Key=f"train/victim-{w}")),
        ("DeleteObjects", "delete-batch",
         lambda c, w: check_batch(c.delete_objects(Bucket="data", Delete={"Objects": [{"Key": f"train/batch-{w}"}]}))),
        ("GetBucketLifecycle", "touch-lc", lambda c, w: c.get_bucket_lifecycle_configuration(Bucket="data")),
        ("PutBucketLifecycle", "admin",
         lambda c, w: c.put_bucket_lifecycle_configuration(Bucket="data", LifecycleConfiguration=lifecycle)),
        ("DeleteBucketLifecycle", "admin", lambda c, w: c.delete_bucket_lifecycle(Bucket="data")),
        ("CreateBucket", "create", lambda c, w: c.create_bucket(Bucket=f"made-{w}")),
        ("DeleteBucket", "drop", lambda c, w: c.delete_bucket(Bucket=f"empty-{w}")),
        ("presigned GET", "read", lambda c, w: presigned(c, "get_object", {"Bucket": "data", "Key": "train/a.jpg"})),
        ("presigned PUT", "write", lambda c, w: presigned(c, "put_object",
                                                           {"Bucket": "data", "Key": f"train/pre-{w}"}, b"p")),
    ]


def check_batch(result):
    """DeleteObjects answers 200 with per-key errors: a per-key denial counts as one."""
    import botocore
    errs = result.get("Errors", [])
    if errs:
        raise botocore.exceptions.ClientError({"Error": {"Code": errs[0]["Code"], "Message": errs[0]["Message"]}},
                                              "DeleteObjects")


def presigned(c, op, params, body=None):
    import botocore
    url = c.generate_presigned_url(op, Params=params, ExpiresIn=300)
    req = urllib.request.Request(url, data=body, method="PUT" if body is not None else "GET")
    try:
        urllib.request.urlopen(req, timeout=10).read()
    except urllib.error.HTTPError as e:
        text = e.read().decode(errors="replace")
        code = text.split("<Code>")[1].split("</Code>")[0] if "<Code>" in text else str(e.code)
        raise botocore.exceptions.ClientError({"Error": {"Code": code, "Message": text}}, op)


# What each requester may do, by operation kind.
EVERYTHING = {"touch", "list", "list-train", "read", "read-val", "touch-lc", "write", "write-val", "copy",
              "copy-other", "delete", "delete-batch", "admin", "create", "drop"}
EXPECTED = {
    "admin": EVERYTHING,
    "unsigned": set(),
    "unknown-key": set(),
    "wrong-secret": set(),
    "read-only": {"touch", "list", "list-train", "read", "read-val", "touch-lc"},
    "other-bucket": set(),
    "train-rw": {"touch", "list-train", "read", "write", "copy", "delete", "delete-batch", "touch-lc"},
    "node-key": set(),
}

etcd = n1 = None
try:
    etcd = s3lib.Etcd(tmp)
    n1 = s3lib.ClusterNode(AQ, tmp, "n1", etcd.url, creds, "--replicas", "1", "--lease-ttl", "3")
    admin = s3lib.boto(n1.port)
    admin.create_bucket(Bucket="data")
    admin.create_bucket(Bucket="other")
    bodies = {"train/a.jpg": os.urandom(300_000), "val/b.jpg": os.urandom(2000)}
    for k, v in bodies.items():
        admin.put_object(Bucket="data", Key=k, Body=v)
    admin.put_object(Bucket="other", Key="secret.bin", Body=b"s" * 1000)

    keys = {}
    for who, grants in (("read-only", ["ro:data"]), ("other-bucket", ["all:other"]),
                        ("train-rw", ["rw:data/train/"])):
        path = os.path.join(tmp, who + ".key")
        r = aq("key", "add", who, *[f"--grant={g}" for g in grants], "--out", path, "--meta", etcd.url)
        check(r.returncode == 0, f"key add {who}: {r.stderr}")
        check(oct(os.stat(path).st_mode & 0o777) == "0o600", f"key add --out writes a private file ({who})")
        keys[who] = key_file(path)
    r = aq("key", "list", "--meta", etcd.url, "--json")
    listed = json.loads(r.stdout) if r.returncode == 0 else []
    check(sorted(k["name"] for k in listed) == ["other-bucket", "read-only", "train-rw"], f"key list: {r.stdout}")
    check(all(k[1] not in r.stdout for k in keys.values()), "key list never shows a secret")

    requesters = {
        "admin": client(n1.port, s3lib.KEY, s3lib.SECRET),
        "unsigned": client(n1.port, None, None, unsigned=True),
        "unknown-key": client(n1.port, "AQNOSUCHKEY000000000", "x" * 40),
        "wrong-secret": client(n1.port, keys["read-only"][0], "y" * 40),
        "read-only": client(n1.port, *keys["read-only"]),
        "other-bucket": client(n1.port, *keys["other-bucket"]),
        "train-rw": client(n1.port, *keys["train-rw"]),
        "node-key": client(n1.port, "aquifer-node", node_secret(etcd.port)),
    }
    for who in requesters:  # what each may delete, and an empty bucket each
        admin.put_object(Bucket="data", Key=f"train/victim-{who}", Body=b"v" * 10)
        admin.put_object(Bucket="data", Key=f"train/batch-{who}", Body=b"b" * 10)
        admin.create_bucket(Bucket=f"empty-{who}")
    denials = 0
    table = []
    for who, c in requesters.items():
        for name, kind, fn in ops():
            got = outcome(lambda: fn(c, who))
            allowed = kind in EXPECTED[who]
            ok = (got not in DENIED) if allowed else (got in DENIED)
            if not allowed and got in DENIED and who in ("read-only", "other-bucket", "train-rw", "node-key"):
                denials += 1
            table.append((who, name, "allow" if allowed else "deny", got))
            check(ok, f"{who} {name}: expected {'allowed' if allowed else 'denied'}, got {got}")
    # The table as answered: one row per operation, one column per
    # requester; "-" denied (403), "ok", or the S3 error that is no denial.
    width = max(len(n) for _, n, _, _ in table)
    print(f"{'operation':{width}} " + " ".join(f"{w[:12]:>12}" for w in requesters))
    for name, _, _ in ops():
        cells = [got for who, n, _, got in table if n == name]
        print(f"{name:{width}} " + " ".join(f"{('-' if c in DENIED else c)[:12]:>12}" for c in cells))

    # ListBuckets: a user's key sees only the buckets its grants name.
    names = lambda c: sorted(b["Name"] for b in c.list_buckets()["Buckets"])  # noqa: E731
    check(names(requesters["read-only"]) == ["data"], "read-only key lists only its bucket")
    check(names(requesters["other-bucket"]) == ["other"], "other bucket's key lists only its bucket")
    check(outcome(lambda: requesters["node-key"].list_buckets()) in DENIED, "the node key cannot list buckets")

    # Nothing a denial guarded changed.
    for k, v in bodies.items():
        check(admin.get_object(Bucket="data", Key=k)["Body"].read() == v, f"{k} intact")
    present = {o["Key"] for o in admin.list_objects_v2(Bucket="data", MaxKeys=1000).get("Contents", [])}
    buckets = {b["Name"] for b in admin.list_buckets()["Buckets"]}
    for who in requesters:
        allowed = EXPECTED[who]
        check((f"train/victim-{who}" in present) != ("delete" in allowed), f"victim of {who}: deleted iff allowed")
        check((f"train/batch-{who}" in present) != ("delete-batch" in allowed), f"batch of {who}: deleted iff allowed")
        check((f"train/new-{who}" in present) == ("write" in allowed), f"new object of {who}: written iff allowed")
        check((f"val/new-{who}" in present) == ("write-val" in allowed), f"val object of {who}")
        check((f"train/stolen-{who}" in present) == ("copy-other" in allowed), f"copy from other by {who}")
        check((f"made-{who}" in buckets) == ("create" in allowed), f"bucket made by {who}: iff allowed")
        check((f"empty-{who}" in buckets) != ("drop" in allowed), f"bucket dropped by {who}: iff allowed")
    stats = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{n1.metrics}/stats", timeout=10).read())
    check(stats.get("requests", stats).get("denied", stats.get("denied", 0)) >= denials,
          f"the node counted its denials ({denials} at least): {stats.get('denied')}")

    # ---- the aquifer:// client with the read-only key ----
    url = f"aquifer://127.0.0.1:{n1.port}/data"
    ro = os.path.join(tmp, "read-only.key")
    local = os.path.join(tmp, "a.jpg")
    r = aq("--credentials", ro, "cp", f"{url}/train/a.jpg", local)
    check(r.returncode == 0 and open(local, "rb").read() == bodies["train/a.jpg"],
          f"aquifer cp reads with a read-only key: {r.stderr}")
    r = aq("--credentials", ro, "ls", f"{url}/train/")
    check(r.returncode == 0 and "a.jpg" in r.stdout, f"aquifer ls with a read-only key: {r.stderr}")
    r = aq("--credentials", ro, "cp", local, f"{url}/train/from-cli")
    check(r.returncode != 0 and "403" in r.stderr and ro in r.stderr,
          f"aquifer cp to the store with a read-only key fails naming the key file: {r.stderr}")
    r = aq("--credentials", ro, "rm", f"{url}/train/a.jpg")
    check(r.returncode != 0, f"aquifer rm with a read-only key fails: {r.stderr}")
    check(admin.head_object(Bucket="data", Key="train/a.jpg")["ContentLength"] == len(bodies["train/a.jpg"]),
          "the object is still there")
    r = aq("--credentials", os.path.join(tmp, "other-bucket.key"), "cp", f"{url}/train/a.jpg", local + ".2")
    check(r.returncode != 0 and not os.path.exists(local + ".2"),
          f"another bucket's key reads nothing through aquifer://: {r.stderr}")

    # ---- the mount with the read-only key ----
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    if os.path.exists("/dev/fuse") and os.access("/dev/fuse", os.R_OK | os.W_OK):
        log = open(os.path.join(tmp, "mount.log"), "w")
        m = subprocess.Popen([AQ, "--credentials", ro, "mount", "-f", url, mnt],
                             stdout=log, stderr=log)
        try:
            if not check(s3lib.until(lambda: os.path.ismount(mnt), 15), "mounted with a read-only key"):
                raise SystemExit(open(os.path.join(tmp, "mount.log")).read())
            with open(os.path.join(mnt, "train", "a.jpg"), "rb") as f:
                check(f.read() == bodies["train/a.jpg"], "the mount reads with a read-only key")
            try:
                with open(os.path.join(mnt, "train", "via-mount"), "wb") as f:
                    f.write(b"x" * 100)
                got = 0
            except OSError as e:
                got = e.errno
            check(got == 13, f"a write through the mount with a read-only key fails with EACCES (got {got})")
            try:
                os.unlink(os.path.join(mnt, "train", "a.jpg"))
                got = 0
            except OSError as e:
                got = e.errno
            check(got == 13, f"an unlink through the mount with a read-only key fails with EACCES (got {got})")
            check(admin.head_object(Bucket="data", Key="train/a.jpg")["ContentLength"] > 0, "still there")
        finally:
            m.send_signal(signal.SIGTERM)
            try:
                m.wait(timeout=20)
            except subprocess.TimeoutExpired:
                m.kill()
                m.wait()
            subprocess.run(["umount", "-l", mnt], capture_output=True)
    else:
        print("SKIP (part): /dev/fuse is missing or not accessible; the mount was not tried")

    # The cluster key never becomes a user's: key rm of it is refused, and
    # a user's key cannot touch replicas.
    r = aq("key", "rm", "aquifer-node", "--meta", etcd.url)
    check(r.returncode != 0, "the node key is no stored key")
    status = s3lib.request(n1.port, "PUT", "/_aquifer/blocks/" + "0" * 32, "crc=0&pool=default&size=1", b"x",
                           key=keys["train-rw"][0], secret=keys["train-rw"][1])[0]
    check(status == 403, f"a user's key cannot plant a replica: {status}")
    status = s3lib.request(n1.port, "GET", "/_aquifer/inventory", key=keys["read-only"][0],
                           secret=keys["read-only"][1])[0]
    check(status == 403, f"a user's key cannot list the node's blocks: {status}")
    # Nor can an administrator's (docs/security.md: the inventory is the node key's alone).
    status = s3lib.request(n1.port, "GET", "/_aquifer/inventory")[0]
    check(status == 403, f"an administrator's key cannot list the node's blocks: {status}")
    status = s3lib.request(n1.port, "PUT", "/_aquifer/blocks/" + "0" * 32, "crc=0&pool=default&size=1", b"x")[0]
    check(status == 403, f"an administrator's key cannot plant a replica: {status}")
    status = s3lib.request(n1.port, "GET", "/_aquifer/layout/data/train/a.jpg")[0]
    check(status == 200, f"an administrator's key reads layouts: {status}")
finally:
    if n1:
        n1.stop()
    if etcd:
        etcd.stop()

# ---- a single node (SQLite): keys change while it runs ----
node = None
try:
    data = os.path.join(tmp, "single")
    node = s3lib.Node(AQ, data, credentials=creds)
    admin = s3lib.boto(node.port)
    admin.create_bucket(Bucket="data")
    admin.put_object(Bucket="data", Key="x", Body=b"x" * 100)
    path = os.path.join(tmp, "single.key")
    r = aq("key", "add", "job", "--grant", "ro:data", "--out", path, "--data", data)
    check(r.returncode == 0, f"key add on a running single node: {r.stderr}")
    r = aq("key", "add", "job2", "--grant", "ro:data", "--out", path, "--data", data)
    check(r.returncode != 0 and "exists" in r.stderr, f"key add never overwrites a key file: {r.stderr}")
    kid, secret = key_file(path)
    c = client(node.port, kid, secret)
    got = outcome(lambda: c.get_object(Bucket="data", Key="x")["Body"].read())
    check(got == "ok", f"the new key reads at once: {got}")
    check(outcome(lambda: c.put_object(Bucket="data", Key="y", Body=b"y")) in DENIED, "and cannot write")
    r = aq("key", "grant", kid, "write", "data/uploads/", "--data", data)
    check(r.returncode == 0, f"key grant: {r.stderr}")
    check(s3lib.until(lambda: outcome(lambda: c.put_object(Bucket="data", Key="uploads/y", Body=b"y")) == "ok", 10),
          "a grant takes effect within seconds")
    check(outcome(lambda: c.put_object(Bucket="data", Key="y", Body=b"y")) in DENIED, "only under its prefix")
    r = aq("key", "revoke", kid, "data", "--actions", "read", "--data", data)
    check(r.returncode == 0, f"key revoke: {r.stderr}")
    check(s3lib.until(lambda: outcome(lambda: c.get_object(Bucket="data", Key="x")) in DENIED, 10),
          "a revoked action stops within seconds")
    r = aq("key", "rm", kid, "--data", data)
    check(r.returncode == 0, f"key rm: {r.stderr}")
    check(s3lib.until(lambda: outcome(lambda: c.put_object(Bucket="data", Key="uploads/z", Body=b"z")) in DENIED, 10),
          "a removed key is refused within seconds")
    r = aq("key", "grant", kid, "read", "data", "--data", data)
    check(r.returncode != 0 and "no stored key" in r.stderr, f"grant to a removed key: {r.stderr}")
    r = aq("key", "grant", kid, "fly", "data", "--data", data)
    check(r.returncode != 0 and "not an action" in r.stderr, f"a bad action is refused: {r.stderr}")
    mode = os.stat(os.path.join(data, "meta.db")).st_mode & 0o777
    check(mode & 0o077 == 0, f"the metadata holding the secrets is private: {oct(mode)}")
finally:
    if node:
        node.stop()
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
