#!/usr/bin/python3
"""aquifer serve driven by real S3 clients: boto3 (Signature V4) and s3cmd.
Starts the node on 127.0.0.1 (a free port), runs every supported operation
and the error cases, checks each byte, then stops it.
usage: s3_test.py path/to/aquifer"""
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

import boto3
import botocore
from botocore.config import Config

AQ = os.path.abspath(sys.argv[1])
KEY, SECRET = "AQTESTKEY", "aq-test-secret-0123456789"
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what, file=sys.stderr)


def error_code(fn):
    try:
        fn()
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"]
    return None


METRICS = {}


def start(data, *extra):
    p = subprocess.Popen([AQ, "serve", "--data", data, "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0", *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if "http://" not in line:
        p.kill()
        raise SystemExit("serve did not start: " + line + p.stderr.read())
    port = int(line.split("http://127.0.0.1:")[1].split()[0])
    for _ in range(10):
        more = p.stdout.readline()
        if "metrics: http://127.0.0.1:" in more:
            METRICS[port] = int(more.split("metrics: http://127.0.0.1:")[1].split("/")[0])
        if "auth:" in more:
            break
    return p, port


def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=30)
    return p.returncode


def client(port, secret=SECRET):
    return boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", aws_access_key_id=KEY,
                        aws_secret_access_key=secret, region_name="us-east-1",
                        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}))


tmp = tempfile.mkdtemp(prefix="aq_s3_test_")
node = None
try:
    creds = os.path.join(tmp, "credentials")
    with open(creds, "w") as f:
        f.write(f"# test key\n{KEY} {SECRET}\n")
    os.chmod(creds, 0o600)  # the node refuses keys other users can read
    data = os.path.join(tmp, "node")
    # Refuses to start without credentials or --anonymous.
    r = subprocess.run([AQ, "serve", "--data", data, "--listen", "127.0.0.1:0"], capture_output=True, text=True)
    check(r.returncode == 2 and "--anonymous" in r.stderr, "serve without auth is a usage error")
    # Keys other users can read are refused, with the fix, by the node and the client.
    shared = os.path.join(tmp, "shared-keys")
    with open(shared, "w") as f:
        f.write(f"{KEY} {SECRET}\n")
    os.chmod(shared, 0o644)
    r = subprocess.run([AQ, "serve", "--data", data, "--listen", "127.0.0.1:0", "--credentials", shared],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode != 0 and f"chmod 600 {shared}" in r.stderr, "serve refuses a 0644 key file: " + r.stderr)
    r = subprocess.run([AQ, "--credentials", shared, "ls", "aquifer://127.0.0.1:1/x"], capture_output=True, text=True)
    check(r.returncode != 0 and "chmod 600" in r.stderr, "the client refuses a 0644 key file: " + r.stderr)

    node, port = start(data, "--credentials", creds, "--block-size", "64KiB")
    s3 = client(port)
    s3.create_bucket(Bucket="train")
    s3.create_bucket(Bucket="train")  # one's own bucket again: success, as in us-east-1
    check(error_code(lambda: s3.create_bucket(Bucket="Bad_Name")) == "InvalidBucketName", "bucket name rules")
    check([b["Name"] for b in s3.list_buckets()["Buckets"]] == ["train"], "list buckets")
    s3.head_bucket(Bucket="train")

    body = os.urandom(1_000_003)  # 16 blocks of 64 KiB, the last one short
    r = s3.put_object(Bucket="train", Key="shards/train-00000-of-00002", Body=body)
    check(r["ETag"].strip('"') == hashlib.md5(body).hexdigest(), "ETag is the MD5")
    got = s3.get_object(Bucket="train", Key="shards/train-00000-of-00002")["Body"].read()
    check(got == body, "object bytes round-trip")
    # Private on disk: the data directory 0700, what the node writes 0600.
    modes = {os.path.relpath(os.path.join(d, n), data): os.stat(os.path.join(d, n)).st_mode & 0o777
             for d, _, names in os.walk(data) for n in names if not n.endswith(".tmp")}
    check(os.stat(data).st_mode & 0o777 == 0o700 and modes and all(m & 0o077 == 0 for m in modes.values()),
          f"data directory 0700, files private: {oct(os.stat(data).st_mode & 0o777)} "
          f"{ {k: oct(v) for k, v in modes.items() if v & 0o077} }")
    part = s3.get_object(Bucket="train", Key="shards/train-00000-of-00002", Range="bytes=65530-65545")
    check(part["Body"].read() == body[65530:65546], "ranged read across a block boundary")
    check(part["ContentRange"] == f"bytes 65530-65545/{len(body)}", "Content-Range")
    tail = s3.get_object(Bucket="train", Key="shards/train-00000-of-00002", Range="bytes=-10")["Body"].read()
    check(tail == body[-10:], "suffix range")
    head = s3.head_object(Bucket="train", Key="shards/train-00000-of-00002")
    check(head["ContentLength"] == len(body), "HEAD size")
    check(error_code(lambda: s3.get_object(Bucket="train", Key="shards/train-00000-of-00002",
                                           Range=f"bytes={len(body)}-")) == "InvalidRange", "InvalidRange")

    for k in ["shards/train-00001-of-00002", "shards/idx/a.idx", "README", "empty"]:
        s3.put_object(Bucket="train", Key=k, Body=b"" if k == "empty" else k.encode())
    check(s3.get_object(Bucket="train", Key="empty")["Body"].read() == b"", "empty object")
    lst = s3.list_objects_v2(Bucket="train", Prefix="shards/", Delimiter="/")
    check([o["Key"] for o in lst["Contents"]] == ["shards/train-00000-of-00002", "shards/train-00001-of-00002"],
          "list v2 keys")
    check([p["Prefix"] for p in lst.get("CommonPrefixes", [])] == ["shards/idx/"], "list v2 common prefixes")
    keys, token = [], None
    while True:
        kw = {"ContinuationToken": token} if token else {}
        page = s3.list_objects_v2(Bucket="train", MaxKeys=2, **kw)
        keys += [o["Key"] for o in page.get("Contents", [])]
        if not page["IsTruncated"]:
            break
        token = page["NextContinuationToken"]
    check(keys == sorted(["README", "empty", "shards/idx/a.idx", "shards/train-00000-of-00002",
                          "shards/train-00001-of-00002"]), "list v2 pagination")
    v1 = s3.list_objects(Bucket="train", Prefix="shards/", Delimiter="/")
    check(len(v1["Contents"]) == 2, "list v1")

    check(error_code(lambda: s3.get_object(Bucket="train", Key="nope")) == "NoSuchKey", "NoSuchKey")
    check(error_code(lambda: s3.get_object(Bucket="nobucket", Key="x")) == "NoSuchBucket", "NoSuchBucket")
    check(error_code(lambda: s3.put_object(Bucket="train", Key="../escape", Body=b"x")) == "InvalidArgument",
          "path traversal refused")
    check(error_code(lambda: s3.put_object(Bucket="train", Key="a/../../b", Body=b"x"))
          in ("InvalidArgument", "InvalidRequest"), "path traversal in the middle refused")
    check(error_code(lambda: client(port, "wrong-secret").list_buckets()) == "SignatureDoesNotMatch",
          "wrong secret is 403")
    import urllib.request
    import urllib.error
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/train/README", timeout=5)
        code = 200
    except urllib.error.HTTPError as e:
        code = e.code
        check(b"AccessDenied" in e.read(), "unsigned request says AccessDenied")
    check(code == 403, "unsigned request is 403")

    # Overwrite: the new bytes replace the old ones whole.
    s3.put_object(Bucket="train", Key="README", Body=b"second version")
    check(s3.get_object(Bucket="train", Key="README")["Body"].read() == b"second version", "overwrite")
    s3.delete_object(Bucket="train", Key="README")
    check(error_code(lambda: s3.head_object(Bucket="train", Key="README")) in ("404", "NoSuchKey"), "deleted")
    s3.delete_object(Bucket="train", Key="README")  # deleting a missing key is fine in S3
    check(error_code(lambda: s3.delete_bucket(Bucket="train")) == "BucketNotEmpty", "bucket not empty")

    # A client that disconnects mid-upload leaves nothing visible.
    import socket
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"PUT /train/partial HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + b"x" * 1000)
    sock.close()
    check(error_code(lambda: s3.head_object(Bucket="train", Key="partial")) in ("404", "NoSuchKey"),
          "no partial object after a disconnect")
    # Malformed HTTP gets an HTTP error, and the node keeps serving.
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
    reply = sock.recv(100)
    sock.close()
    check(reply.startswith(b"HTTP/1.1 4"), "malformed request answered with 4xx")
    check(s3.list_buckets()["Buckets"][0]["Name"] == "train", "still serving")

    # Multipart upload: boto3's transfer manager cuts a file into parts and
    # uploads them in parallel; the object is their concatenation.
    from boto3.s3.transfer import TransferConfig
    big = os.urandom(17 * 1024 * 1024 + 12345)
    big_path = os.path.join(tmp, "big.bin")
    with open(big_path, "wb") as f:
        f.write(big)
    mib5 = 5 * 1024 * 1024
    s3.upload_file(big_path, "train", "big/shard.bin",
                   Config=TransferConfig(multipart_threshold=mib5, multipart_chunksize=mib5, max_concurrency=4))
    head = s3.head_object(Bucket="train", Key="big/shard.bin")
    digests = b"".join(hashlib.md5(big[i:i + mib5]).digest() for i in range(0, len(big), mib5))
    check(head["ETag"] == '"%s-4"' % hashlib.md5(digests).hexdigest(), "multipart ETag is S3's: " + head["ETag"])
    check(head["ContentLength"] == len(big), "multipart size")
    got = s3.get_object(Bucket="train", Key="big/shard.bin")["Body"].read()
    check(got == big, "multipart object bytes round-trip")
    rng = s3.get_object(Bucket="train", Key="big/shard.bin", Range=f"bytes={mib5 - 3}-{mib5 + 2}")["Body"].read()
    check(rng == big[mib5 - 3:mib5 + 3], "ranged read across a part boundary")
    out = os.path.join(tmp, "big.down")
    s3.download_file("train", "big/shard.bin", out,
                     Config=TransferConfig(multipart_threshold=mib5, multipart_chunksize=mib5, max_concurrency=4))
    check(open(out, "rb").read() == big, "boto3 parallel ranged download")

    # The low-level calls, and their errors.
    up = s3.create_multipart_upload(Bucket="train", Key="mp/manual")["UploadId"]
    e1 = s3.upload_part(Bucket="train", Key="mp/manual", UploadId=up, PartNumber=1, Body=big[:mib5])["ETag"]
    e2 = s3.upload_part(Bucket="train", Key="mp/manual", UploadId=up, PartNumber=2, Body=b"tail")["ETag"]
    parts = s3.list_parts(Bucket="train", Key="mp/manual", UploadId=up)["Parts"]
    check([(p["PartNumber"], p["Size"]) for p in parts] == [(1, mib5), (2, 4)], "ListParts")
    uploads = s3.list_multipart_uploads(Bucket="train").get("Uploads", [])
    check([u["UploadId"] for u in uploads] == [up], "ListMultipartUploads")
    check(error_code(lambda: s3.head_object(Bucket="train", Key="mp/manual")) in ("404", "NoSuchKey"),
          "no object before completion")
    check(error_code(lambda: s3.complete_multipart_upload(
        Bucket="train", Key="mp/manual", UploadId=up,
        MultipartUpload={"Parts": [{"PartNumber": 2, "ETag": e2}, {"PartNumber": 1, "ETag": e1}]})) ==
        "InvalidPartOrder", "parts out of order refused")
    check(error_code(lambda: s3.complete_multipart_upload(
        Bucket="train", Key="mp/manual", UploadId=up,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e2}]})) == "InvalidPart", "wrong ETag refused")
    check(error_code(lambda: s3.complete_multipart_upload(
        Bucket="train", Key="mp/manual", UploadId=up,
        MultipartUpload={"Parts": [{"PartNumber": 2, "ETag": e2}, {"PartNumber": 3, "ETag": e2}]})) ==
        "InvalidPart", "missing part refused")
    small = s3.create_multipart_upload(Bucket="train", Key="mp/small")["UploadId"]
    f1 = s3.upload_part(Bucket="train", Key="mp/small", UploadId=small, PartNumber=1, Body=b"x" * 100)["ETag"]
    f2 = s3.upload_part(Bucket="train", Key="mp/small", UploadId=small, PartNumber=2, Body=b"y")["ETag"]
    check(error_code(lambda: s3.complete_multipart_upload(
        Bucket="train", Key="mp/small", UploadId=small,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": f1}, {"PartNumber": 2, "ETag": f2}]})) ==
        "EntityTooSmall", "a small part before the last refused")
    s3.abort_multipart_upload(Bucket="train", Key="mp/small", UploadId=small)
    check(error_code(lambda: s3.list_parts(Bucket="train", Key="mp/small", UploadId=small)) == "NoSuchUpload",
          "aborted upload is gone")
    check(error_code(lambda: s3.upload_part(Bucket="train", Key="mp/manual", UploadId="nope", PartNumber=1,
                                            Body=b"x")) == "NoSuchUpload", "NoSuchUpload")
    check(error_code(lambda: s3.upload_part(Bucket="train", Key="mp/manual", UploadId=up, PartNumber=10001,
                                            Body=b"x")) == "InvalidArgument", "part number over 10000")
    r = s3.complete_multipart_upload(Bucket="train", Key="mp/manual", UploadId=up,
                                     MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1},
                                                                {"PartNumber": 2, "ETag": e2}]})
    check(r["ETag"].endswith('-2"'), "CompleteMultipartUpload answers the ETag")
    got = s3.get_object(Bucket="train", Key="mp/manual")["Body"].read()
    check(got == big[:mib5] + b"tail", "completed object is the parts in order")
    check(s3.list_multipart_uploads(Bucket="train").get("Uploads", []) == [], "no uploads left")
    # A malformed completion body is MalformedXML, not a crash.
    up3 = s3.create_multipart_upload(Bucket="train", Key="mp/bad")["UploadId"]
    from botocore.awsrequest import AWSRequest
    from botocore.auth import S3SigV4Auth
    from botocore.credentials import Credentials
    bad_xml = b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
    req = AWSRequest(method="POST", url=f"http://127.0.0.1:{port}/train/mp/bad?uploadId={up3}", data=bad_xml)
    S3SigV4Auth(Credentials(KEY, SECRET), "s3", "us-east-1").add_auth(req)
    try:
        urllib.request.urlopen(urllib.request.Request(req.url, data=bad_xml, method="POST", headers=dict(req.headers)))
        code, text = 200, b""
    except urllib.error.HTTPError as e:
        code, text = e.code, e.read()
    check(code == 400 and b"MalformedXML" in text, "malformed completion body is MalformedXML")
    s3.abort_multipart_upload(Bucket="train", Key="mp/bad", UploadId=up3)
    # DeleteObjects: several keys in one request, missing ones count as deleted.
    s3.put_object(Bucket="train", Key="del/a", Body=b"a")
    s3.put_object(Bucket="train", Key="del/b", Body=b"b")
    r = s3.delete_objects(Bucket="train", Delete={"Objects": [{"Key": "del/a"}, {"Key": "del/b"}, {"Key": "del/c"}]})
    check(sorted(d["Key"] for d in r["Deleted"]) == ["del/a", "del/b", "del/c"] and not r.get("Errors"),
          "DeleteObjects")
    check("Contents" not in s3.list_objects_v2(Bucket="train", Prefix="del/"), "deleted in one request")
    # Statistics: per operation, as Prometheus text and through aquifer stats.
    mport = METRICS.get(port)
    check(mport is not None, "metrics address printed")
    if mport:
        import time
        for _ in range(30):  # the node samples once a second; wait for its first sample
            text = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5).read().decode()
            if "aquifer_cpu_user_ratio" in text:
                break
            time.sleep(0.1)
        gets = [float(line.split()[1]) for line in text.splitlines()
                if line.startswith('aquifer_s3_requests_total{operation="get"}')]
        check(gets and gets[0] >= 4 and "aquifer_cpu_user_ratio" in text and
              'aquifer_s3_request_duration_seconds_bucket{operation="get",le="+Inf"}' in text, "node /metrics")
        if shutil.which("promtool"):
            r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
            check(r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(),
                  f"promtool check metrics finds nothing to say: {r.stdout} {r.stderr}")
        else:
            print("SKIP: promtool (Debian's prometheus) is not installed: /metrics conventions not checked")
        r = subprocess.run([AQ, "stats", f"127.0.0.1:{mport}"], capture_output=True, text=True)
        get_line = [l for l in r.stdout.splitlines() if l.strip().startswith("get ")]
        check(r.returncode == 0 and get_line and int(get_line[0].split()[1]) >= 4, "aquifer stats: " + r.stdout)
        check("cache" in r.stdout and "NetIn" in r.stdout, "stats shows cache and network")
        r = subprocess.run([AQ, "stats", f"127.0.0.1:{mport}", "--json"], capture_output=True, text=True)
        import json
        j = json.loads(r.stdout)
        check(j["ops"]["put"]["bytes_in"] >= len(body) and j["ops"]["get"]["client_errors"] >= 1 and
              j["client_errors"] >= 1, "stats JSON counts")
        pf = j.get("prefetch", {})
        check(pf.get("issued", 0) > 0 and pf.get("hits", 0) + pf.get("late_hits", 0) > 0,
              "stream prefetch read ahead for the whole-object GETs: " + json.dumps(pf))
    check(stop(node) == 0, "serve stops cleanly on SIGTERM")

    # stat-file: where the blocks are; a block damaged on disk is found, and a
    # read of it fails instead of returning bad bytes.
    r = subprocess.run([AQ, "stat-file", "train/shards/train-00000-of-00002", "--data", data, "--verify", "--json"],
                       capture_output=True, text=True)
    import json
    info = json.loads(r.stdout) if r.returncode == 0 else {}
    check(r.returncode == 0 and len(info.get("blocks", [])) == 16 and info["size"] == len(body),
          f"stat-file (exit {r.returncode}): " + r.stderr)
    if info.get("blocks"):
        victim = info["blocks"][3]["path"]
        with open(victim, "r+b") as f:
            f.seek(24 + 100)
            f.write(b"\xff\x00")
        r = subprocess.run([AQ, "stat-file", "train/shards/train-00000-of-00002", "--data", data, "--verify"],
                           capture_output=True, text=True)
        check(r.returncode == 1 and info["blocks"][3]["id"] in r.stdout + r.stderr, "stat-file finds the damage")

    # Restart: everything is still there.
    node, port = start(data, "--credentials", creds)
    s3 = client(port)
    got = s3.get_object(Bucket="train", Key="shards/train-00000-of-00002", Range="bytes=0-65535")["Body"].read()
    check(got == body[:65536], "objects survive a restart")
    # The damaged block (the fourth) is never served: the response ends short.
    try:
        got = s3.get_object(Bucket="train", Key="shards/train-00000-of-00002")["Body"].read()
        check(got != body and len(got) < len(body), "damaged block not served")
    except Exception:
        check(True, "damaged block not served")

    # s3cmd, configured the way a person would.
    if shutil.which("s3cmd"):
        cfg = os.path.join(tmp, "s3cfg")
        with open(cfg, "w") as f:
            f.write(f"[default]\naccess_key = {KEY}\nsecret_key = {SECRET}\nhost_base = 127.0.0.1:{port}\n"
                    f"host_bucket = 127.0.0.1:{port}\nuse_https = False\nsignature_v2 = False\n"
                    "bucket_location = us-east-1\n")
        src = os.path.join(tmp, "upload.bin")
        with open(src, "wb") as f:
            f.write(os.urandom(300_000))
        s3c = ["s3cmd", "-c", cfg, "--no-progress"]
        r = subprocess.run(s3c + ["mb", "s3://viacli"], capture_output=True, text=True)
        check(r.returncode == 0, "s3cmd mb: " + r.stderr)
        r = subprocess.run(s3c + ["put", src, "s3://viacli/dir/upload.bin"], capture_output=True, text=True)
        check(r.returncode == 0, "s3cmd put: " + r.stderr)
        r = subprocess.run(s3c + ["ls", "s3://viacli/dir/"], capture_output=True, text=True)
        check(r.returncode == 0 and "upload.bin" in r.stdout, "s3cmd ls: " + r.stdout + r.stderr)
        dst = os.path.join(tmp, "download.bin")
        r = subprocess.run(s3c + ["get", "s3://viacli/dir/upload.bin", dst], capture_output=True, text=True)
        check(r.returncode == 0 and open(dst, "rb").read() == open(src, "rb").read(), "s3cmd get: " + r.stderr)
        r = subprocess.run(s3c + ["del", "s3://viacli/dir/upload.bin"], capture_output=True, text=True)
        check(r.returncode == 0, "s3cmd del: " + r.stderr)
        # s3cmd's multipart upload (5 MiB parts), and its recursive delete (DeleteObjects).
        src = os.path.join(tmp, "upload-big.bin")
        with open(src, "wb") as f:
            f.write(os.urandom(12 * 1024 * 1024 + 7))
        r = subprocess.run(s3c + ["put", "--multipart-chunk-size-mb=5", src, "s3://viacli/dir/big.bin"],
                           capture_output=True, text=True)
        etag = s3.head_object(Bucket="viacli", Key="dir/big.bin")["ETag"] if r.returncode == 0 else ""
        check(etag.endswith('-3"'), "s3cmd multipart put, 3 parts: " + etag + r.stdout + r.stderr)
        r = subprocess.run(s3c + ["get", "--force", "s3://viacli/dir/big.bin", dst], capture_output=True, text=True)
        check(r.returncode == 0 and open(dst, "rb").read() == open(src, "rb").read(),
              "s3cmd get of a multipart object: " + r.stderr)
        r = subprocess.run(s3c + ["multipart", "s3://viacli"], capture_output=True, text=True)
        check(r.returncode == 0, "s3cmd multipart (list uploads): " + r.stdout + r.stderr)
        r = subprocess.run(s3c + ["put", src, "s3://viacli/dir/copy.bin"], capture_output=True, text=True)
        r = subprocess.run(s3c + ["del", "--recursive", "s3://viacli/dir/"], capture_output=True, text=True)
        check(r.returncode == 0, "s3cmd del --recursive: " + r.stdout + r.stderr)
        r = subprocess.run(s3c + ["ls", "s3://viacli/dir/"], capture_output=True, text=True)
        check(r.returncode == 0 and r.stdout.strip() == "", "recursive delete left nothing: " + r.stdout)
    else:
        check(False, "s3cmd is not installed (scripts/install-deps.sh installs it)")
    # The aquifer:// client: the same node through aquifer's own file system.
    env = dict(os.environ, AQUIFER_CREDENTIALS=creds)
    raw, tf = os.path.join(tmp, "raw"), os.path.join(tmp, "tf")
    subprocess.run([AQ, "dataset", "synth", "--out", raw, "--classes", "3", "--images", "48", "--no-progress"],
                   check=True, capture_output=True)
    subprocess.run([AQ, "dataset", "pack", raw, "--out", tf, "--shards", "3", "--no-progress"], check=True,
                   capture_output=True)
    url = f"aquifer://127.0.0.1:{port}/datasets/tf"

    def aq(*args):
        return subprocess.run([AQ, *args], capture_output=True, text=True, env=env)

    r = aq("cp", "-r", tf, url)
    check(r.returncode == 0 and "copied" in r.stdout, "aquifer cp -r up: " + r.stderr)
    r = aq("ls", url)
    check(r.returncode == 0 and "train-00000-of-00003" in r.stdout and "idx/" in r.stdout, "aquifer ls: " + r.stderr)
    r = aq("dataset", "verify", url, "--num-classes", "3")
    check(r.returncode == 0, "verify through aquifer://: " + r.stdout + r.stderr)
    r = aq("bench", "pipeline", url, "--batch", "8", "--size", "32", "--json")
    check(r.returncode == 0 and '"images"' in r.stdout, "pipeline through aquifer://: " + r.stderr)
    r = aq("bench", "storage", url, "-r", "2", "-d", "1", "--ramp", "0.2", "--json")
    check(r.returncode == 0 and '"mb_per_second"' in r.stdout, "bench storage through aquifer://: " + r.stderr)
    back = os.path.join(tmp, "back")
    r = aq("cp", "-r", url, back)
    same = r.returncode == 0 and all(
        open(os.path.join(tf, f), "rb").read() == open(os.path.join(back, f), "rb").read()
        for f in os.listdir(tf) if os.path.isfile(os.path.join(tf, f)))
    check(same, "aquifer cp -r down, byte for byte: " + r.stderr)
    # A tree with 300 small files, a non-ASCII name and empty directories,
    # copied 8 files at a time: up and down again, the same tree; the empty
    # directories are kept in the store as "name/" markers.
    tree = os.path.join(tmp, "tree")
    for d in ("many", "empty", os.path.join("deep", "also empty"), "ü"):
        os.makedirs(os.path.join(tree, d))
    for i in range(300):
        with open(os.path.join(tree, "many", f"{i:03d}.bin"), "wb") as f:
            f.write(os.urandom(i * 37))
    with open(os.path.join(tree, "ü", "naïve ✓.txt"), "w") as f:
        f.write("x\n")
    r = aq("cp", "-r", "-j", "8", tree, f"aquifer://127.0.0.1:{port}/datasets/tree")
    check(r.returncode == 0 and "copied 301 file(s)" in r.stdout, f"cp -r -j 8 up: {r.stdout} {r.stderr}")
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket="datasets", Prefix="tree/", MaxKeys=1000).get("Contents", [])}
    check({"tree/empty/", "tree/deep/also empty/"} <= keys and "tree/many/" not in keys,
          f"empty directories kept as markers, and only those: {sorted(k for k in keys if k.endswith('/'))}")
    tree_back = os.path.join(tmp, "tree.back")
    r = aq("cp", "-r", f"aquifer://127.0.0.1:{port}/datasets/tree", tree_back)
    r2 = subprocess.run(["diff", "-r", tree, tree_back], capture_output=True, text=True)
    check(r.returncode == 0 and r2.returncode == 0 and os.path.isdir(os.path.join(tree_back, "deep", "also empty")),
          f"cp -r down gives the same tree, empty directories included: {r.stderr} {r2.stdout[:300]}")
    # Keys no file name can stand for (the node refuses '.' and '..'
    # segments, S3 takes empty ones) are reported, never passed over in
    # silence.
    for k in ("odd/fine", "odd/a//x", "odd//abs"):
        s3.put_object(Bucket="datasets", Key=k, Body=b"x")
    odd = os.path.join(tmp, "odd")
    r = aq("cp", "-r", f"aquifer://127.0.0.1:{port}/datasets/odd", odd)
    check(r.returncode != 0 and os.path.exists(os.path.join(odd, "fine")) and
          all(f"/datasets/odd/{k} (and every key below it)" in r.stderr for k in ("a//", "/")) and
          "2 key(s) or prefix(es) not copied" in r.stderr,
          f"cp -r of keys with empty path segments: reported, exit {r.returncode}: {r.stderr}")
    r = aq("rm", "-r", f"aquifer://127.0.0.1:{port}/datasets/odd")
    check(r.returncode != 0 and "odd/a//" in r.stderr and "not removed" in r.stderr,
          f"rm -r reports what it could not remove: {r.stderr}")
    for k in ("odd/a//x", "odd//abs"):
        s3.delete_object(Bucket="datasets", Key=k)
    # A 17 MB object copied down in 16 MiB reads, each fetched as 4 parallel ranges.
    r = aq("cp", f"aquifer://127.0.0.1:{port}/train/big/shard.bin", os.path.join(tmp, "big.back"))
    check(r.returncode == 0 and open(os.path.join(tmp, "big.back"), "rb").read() == big,
          "parallel ranged download, byte for byte: " + r.stderr)
    # The client's own read-ahead for sequential readers (off by default).
    ra = dict(env, AQUIFER_READAHEAD="1")
    r = subprocess.run([AQ, "dataset", "verify", url, "--num-classes", "3"], capture_output=True, text=True, env=ra)
    check(r.returncode == 0, "verify through aquifer:// with client read-ahead: " + r.stdout + r.stderr)
    r = subprocess.run([AQ, "bench", "pipeline", url, "--batch", "8", "--size", "32", "--readers", "2", "--json"],
                       capture_output=True, text=True, env=ra)
    import json
    res = json.loads(r.stdout) if r.returncode == 0 else {}
    check(res.get("catalog_samples") == 48 and res.get("bad_samples") == 0 and
          res.get("batches", 0) + res.get("warmup_batches", 0) == res.get("steps_per_epoch", -1) == 6,
          "pipeline with client read-ahead: " + json.dumps({k: v for k, v in res.items() if not isinstance(v, (dict, list))}) + r.stderr)
    r = subprocess.run([AQ, "ls", url], capture_output=True, text=True)  # no credentials
    check(r.returncode == 1 and "403" in r.stderr, "unsigned client refused: " + r.stderr)
    r = aq("rm", "-r", url)
    check(r.returncode == 0, "aquifer rm -r: " + r.stderr)
    r = aq("ls", url)
    check(r.returncode == 0 and r.stdout.strip() == "", "prefix empty after rm: " + r.stdout)
    r = aq("ls", "aquifer://127.0.0.1:1/x")
    check(r.returncode == 1 and "127.0.0.1:1" in r.stderr, "unreachable node named: " + r.stderr)
    check(stop(node) == 0, "second stop")
finally:
    if node is not None and node.poll() is None:  # a check raised: never leave a node behind
        node.kill()
        node.wait()
    shutil.rmtree(tmp, ignore_errors=True)

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
