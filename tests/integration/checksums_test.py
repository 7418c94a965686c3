#!/usr/bin/python3
"""Stored checksums (x-amz-checksum-*), end to end against real nodes.

Every object carries one: the algorithm the client names or sends
(CRC32, CRC32C, CRC64NVME, SHA1, SHA256), CRC64NVME when it sends none, as
S3 does. It is returned on GET and HEAD with x-amz-checksum-mode: ENABLED,
and on PUT, UploadPart, CompleteMultipartUpload, ListParts and copies.
Multipart objects carry a COMPOSITE checksum (of the parts' checksums,
"-N") or a FULL_OBJECT one (the parts' CRCs combined into the whole's).

The values are checked three ways: against this file's own implementations
(zlib, hashlib, and table CRC-32C and CRC-64/NVME written from their
definitions), by boto3 and by the AWS SDK for JavaScript v3 (from npm, as
js_presign installs it), both of which validate a GET's body against the
checksum the node returns. A cluster (etcd metadata) keeps part checksums
across nodes.

usage: checksums_test.py path/to/aquifer [NPM_CACHE_DIR]
"""
import base64
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
HERE = os.path.dirname(os.path.abspath(__file__))
NPM = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else os.path.join(tempfile.gettempdir(), "aq-js-presign")
MiB = 1 << 20


def _table(poly):
    t = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        t.append(c)
    return t


_T32C, _T64 = _table(0x82F63B78), _table(0x9A6C9329AC4BC9B5)


def _crc(table, mask, data):
    c = mask
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ mask


def b64(data):
    return base64.b64encode(data).decode()


def checksum(algorithm, data):
    """The base64 checksum S3 gives these bytes."""
    a = algorithm.lower()
    if a == "crc32":
        return b64(zlib.crc32(data).to_bytes(4, "big"))
    if a == "crc32c":
        return b64(_crc(_T32C, 0xFFFFFFFF, data).to_bytes(4, "big"))
    if a == "crc64nvme":
        return b64(_crc(_T64, (1 << 64) - 1, data).to_bytes(8, "big"))
    return b64(hashlib.new(a, data).digest())


def composite(algorithm, part_values):
    raw = b"".join(base64.b64decode(v) for v in part_values)
    return f"{checksum(algorithm, raw)}-{len(part_values)}"


def headers(response):
    return {k: v for k, v in response["ResponseMetadata"]["HTTPHeaders"].items() if k.startswith("x-amz-checksum")}


check = s3lib.Checks()
tmp = tempfile.mkdtemp(prefix="aq_checksums_")
creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
ALGS = ["CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"]


def boto_checks(port, where):
    s3 = s3lib.boto(port)
    s3.create_bucket(Bucket="sums")
    body = os.urandom(200_001)
    # boto3 (1.26) knows four algorithms; CRC64NVME arrives by header.
    for alg in ALGS:
        key = f"put/{alg}"
        if alg == "CRC64NVME":
            st, h, b = s3lib.request(port, "PUT", "/sums/" + key, body=body,
                                     headers={"x-amz-checksum-crc64nvme": checksum(alg, body)})
            check(st == 200 and h.get("x-amz-checksum-crc64nvme") == checksum(alg, body),
                  f"{where}: PUT with x-amz-checksum-crc64nvme: {st} {h} {b[:200]}")
        else:
            r = s3.put_object(Bucket="sums", Key=key, Body=body, ChecksumAlgorithm=alg)
            check(headers(r).get(f"x-amz-checksum-{alg.lower()}") == checksum(alg, body),
                  f"{where}: PUT answers its {alg}: {headers(r)}")
        g = s3.get_object(Bucket="sums", Key=key, ChecksumMode="ENABLED")
        got = g["Body"].read()
        h = headers(g)
        check(got == body and h.get(f"x-amz-checksum-{alg.lower()}") == checksum(alg, body)
              and h.get("x-amz-checksum-type") == "FULL_OBJECT", f"{where}: GET returns the stored {alg}: {h}")
        head = headers(s3.head_object(Bucket="sums", Key=key, ChecksumMode="ENABLED"))
        check(head == h, f"{where}: HEAD returns it too: {head}")
    # No checksum sent: CRC64NVME, as S3 stores by default.
    s3.put_object(Bucket="sums", Key="plain", Body=body)
    h = headers(s3.head_object(Bucket="sums", Key="plain", ChecksumMode="ENABLED"))
    check(h.get("x-amz-checksum-crc64nvme") == checksum("crc64nvme", body),
          f"{where}: a PUT without a checksum stores CRC64NVME: {h} (expected {checksum('crc64nvme', body)})")
    check(headers(s3.head_object(Bucket="sums", Key="plain")) == {}, f"{where}: nothing unless asked")
    a = s3.get_object_attributes(Bucket="sums", Key="put/SHA1", ObjectAttributes=["Checksum", "ObjectSize",
                                                                                   "StorageClass", "ObjectParts"])
    check(a.get("Checksum", {}).get("ChecksumSHA1") == checksum("sha1", body) and a.get("ObjectSize") == len(body)
          and a.get("StorageClass") == "STANDARD" and "ObjectParts" not in a,
          f"{where}: get_object_attributes of a single PUT: {a}")
    st, _, b = s3lib.request(port, "GET", "/sums/plain", "attributes=", headers={"x-amz-object-attributes": "Owner"})
    check(st == 400 and b"InvalidArgument" in b, f"{where}: an unknown attribute is 400: {st} {b[:200]}")
    r = s3.get_object(Bucket="sums", Key="plain", ChecksumMode="ENABLED", Range="bytes=10-99")
    check(r["Body"].read() == body[10:100] and headers(r) == {},
          f"{where}: a range answers no whole-object checksum: {headers(r)}")
    # A checksum that does not match: refused, nothing stored.
    st, _, b = s3lib.request(port, "PUT", "/sums/bad", body=body, headers={"x-amz-checksum-crc64nvme": "AAAAAAAAAAA="})
    check(st == 400 and b"BadDigest" in b, f"{where}: a wrong CRC64NVME is 400 BadDigest: {st} {b[:200]}")
    check(s3lib.request(port, "HEAD", "/sums/bad")[0] == 404, f"{where}: ... and nothing is stored")
    # Copies carry the checksum of the bytes copied.
    cp = s3.copy_object(Bucket="sums", Key="copy", CopySource="sums/put/SHA256")["CopyObjectResult"]
    check(cp.get("ChecksumSHA256") == checksum("sha256", body), f"{where}: a copy keeps the algorithm: {cp}")
    cp = s3.copy_object(Bucket="sums", Key="copy2", CopySource="sums/plain", ChecksumAlgorithm="CRC32C")
    h = headers(s3.head_object(Bucket="sums", Key="copy2", ChecksumMode="ENABLED"))
    check(h.get("x-amz-checksum-crc32c") == checksum("crc32c", body), f"{where}: a copy in another algorithm: {h}")

    # Multipart: COMPOSITE by default, FULL_OBJECT on request, CRC64NVME when none is named.
    chunks = [os.urandom(5 * MiB), os.urandom(5 * MiB), os.urandom(4321)]
    whole = b"".join(chunks)
    for alg, kind in [("CRC32", None), ("SHA256", None), ("CRC32C", "FULL_OBJECT"), (None, None)]:
        key = f"mpu/{alg}-{kind}"
        extra = {"ChecksumAlgorithm": alg} if alg else {}
        if kind:
            # boto3 1.26 has no ChecksumType: the header goes on by hand.
            def add_type(request, **_):
                request.headers["x-amz-checksum-type"] = kind
            s3.meta.events.register_first("before-sign.s3.CreateMultipartUpload", add_type, unique_id="type")
        u = s3.create_multipart_upload(Bucket="sums", Key=key, **extra)
        s3.meta.events.unregister("before-sign.s3.CreateMultipartUpload", unique_id="type")
        algorithm = (alg or "CRC64NVME").lower()
        ctype = kind or ("FULL_OBJECT" if algorithm == "crc64nvme" else "COMPOSITE")
        check(headers(u).get("x-amz-checksum-type") == ctype, f"{where}: {key}: created as {headers(u)}")
        parts, values = [], []
        for i, c in enumerate(chunks, 1):
            p = s3.upload_part(Bucket="sums", Key=key, UploadId=u["UploadId"], PartNumber=i, Body=c, **extra)
            v = headers(p).get(f"x-amz-checksum-{algorithm}")
            check(v == checksum(algorithm, c), f"{where}: {key}: part {i} answers its checksum: {headers(p)}")
            values.append(v)
            parts.append({"PartNumber": i, "ETag": p["ETag"], **({f"Checksum{alg}": v} if alg else {})})
        # (boto3 1.26 does not parse ChecksumCRC64NVME: the XML is read here)
        st, _, b = s3lib.request(port, "GET", "/sums/" + key, "uploadId=" + u["UploadId"])
        text = b.decode()
        check(st == 200 and f"<ChecksumAlgorithm>{algorithm.upper()}</ChecksumAlgorithm>" in text and
              f"<ChecksumType>{ctype}</ChecksumType>" in text and
              all(f"<Checksum{algorithm.upper()}>{v}</Checksum{algorithm.upper()}>" in text for v in values),
              f"{where}: {key}: ListParts names the algorithm, the type and each part's value: {text[:600]}")
        s3.complete_multipart_upload(Bucket="sums", Key=key, UploadId=u["UploadId"], MultipartUpload={"Parts": parts})
        expected = composite(algorithm, values) if ctype == "COMPOSITE" else checksum(algorithm, whole)
        g = s3.get_object(Bucket="sums", Key=key, ChecksumMode="ENABLED")
        check(g["Body"].read() == whole and headers(g).get(f"x-amz-checksum-{algorithm}") == expected and
              headers(g).get("x-amz-checksum-type") == ctype, f"{where}: {key}: GET returns {expected}: {headers(g)}")
        g = s3.get_object(Bucket="sums", Key=key, ChecksumMode="ENABLED", PartNumber=2)
        check(g["Body"].read() == chunks[1] and headers(g).get(f"x-amz-checksum-{algorithm}") == values[1],
              f"{where}: {key}: GET partNumber=2 returns the part's own: {headers(g)}")
        # GetObjectAttributes: the same values, and the parts a page at a time.
        st, _, b = s3lib.request(port, "GET", "/sums/" + key, "attributes=", headers={
            "x-amz-object-attributes": "ETag,Checksum,ObjectParts,ObjectSize,StorageClass", "x-amz-max-parts": "2"})
        text = b.decode()
        el = f"Checksum{algorithm.upper()}"
        check(st == 200 and f"<{el}>{expected}</{el}><ChecksumType>{ctype}</ChecksumType>" in text and
              "<PartsCount>3</PartsCount>" in text and f"<ObjectSize>{len(whole)}</ObjectSize>" in text and
              f"<Part><PartNumber>2</PartNumber><Size>{len(chunks[1])}</Size><{el}>{values[1]}</{el}></Part>" in text
              and "<IsTruncated>true</IsTruncated>" in text and "<NextPartNumberMarker>2</NextPartNumberMarker>" in text
              and "<PartNumber>3</PartNumber>" not in text,
              f"{where}: {key}: GetObjectAttributes, first page of parts: {st} {text[:900]}")
        if alg in ("CRC32", "SHA256", "CRC32C"):
            a = s3.get_object_attributes(Bucket="sums", Key=key, ObjectAttributes=["ObjectParts", "Checksum", "ETag"],
                                         PartNumberMarker=2)
            check(a["Checksum"].get(f"Checksum{alg}") == expected and a["ObjectParts"]["TotalPartsCount"] == 3 and
                  [p["PartNumber"] for p in a["ObjectParts"]["Parts"]] == [3] and
                  a["ObjectParts"]["Parts"][0].get(f"Checksum{alg}") == values[2] and a["ETag"] in g["ETag"],
                  f"{where}: {key}: boto3's get_object_attributes, from part 3: {a}")
    # A completion naming a part's checksum that is not the part's: refused.
    u = s3.create_multipart_upload(Bucket="sums", Key="mpu/wrong", ChecksumAlgorithm="CRC32")
    p = s3.upload_part(Bucket="sums", Key="mpu/wrong", UploadId=u["UploadId"], PartNumber=1, Body=b"x" * 100,
                       ChecksumAlgorithm="CRC32")
    code = s3lib.error_code(lambda: s3.complete_multipart_upload(
        Bucket="sums", Key="mpu/wrong", UploadId=u["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": p["ETag"], "ChecksumCRC32": "AAAAAA=="}]}))
    check(code == "InvalidPart", f"{where}: a completion naming a wrong part checksum: {code}")
    st, _, b = s3lib.request(port, "POST", "/sums/x", "uploads",
                             headers={"x-amz-checksum-algorithm": "SHA1", "x-amz-checksum-type": "FULL_OBJECT"})
    check(st == 400 and b"InvalidRequest" in b, f"{where}: SHA1 cannot be FULL_OBJECT: {st} {b[:200]}")
    st, _, b = s3lib.request(port, "POST", "/sums/x", "uploads", headers={"x-amz-checksum-algorithm": "MD5"})
    check(st == 400 and b"InvalidRequest" in b, f"{where}: an unknown algorithm: {st} {b[:200]}")


def js_checks(port):
    why = s3lib.js_sdk(NPM, "checksums.mjs")
    if why is not None:
        print(f"SKIP (JavaScript part): {why}")
        return
    s3lib.request(port, "PUT", "/jssums")
    r = subprocess.run(["node", "checksums.mjs", f"http://127.0.0.1:{port}", "jssums", s3lib.KEY, s3lib.SECRET,
                        str(5 * MiB)], cwd=NPM, capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"the JavaScript SDK's calls all succeed (its GETs validate checksums): {r.stderr[-1500:]}")
    if r.returncode != 0:
        return
    out = json.loads(r.stdout)
    for name, res in out["puts"].items():
        alg = "CRC32" if name == "default" else name  # the SDK's default: CRC32 on every PUT
        key = f"Checksum{alg}"
        check(res["get"]["sha256"] == out["body_sha256"] and res["get"]["checksums"].get(key) and
              res["get"]["checksums"].get(key) == res["put"].get(key) == res["head"].get(key) and
              res["get"]["checksums"].get("ChecksumType") == "FULL_OBJECT",
              f"JS SDK: PUT {name}: the SDK validated a GET against the node's {alg}: {res}")
    for name, res in out["multipart"].items():
        alg, kind = name.split("-", 1)
        key = f"Checksum{alg}"
        values = [p[key] for p in res["parts"]]
        ok = (res["created"] == {"algorithm": alg, "type": kind} and res["listed"]["algorithm"] == alg and
              [p.get(key) for p in res["listed"]["parts"]] == values and res["get"]["sha256"] == out["object_sha256"]
              and res["get"]["checksums"].get(key) == res["complete"].get(key)
              and res["get"]["checksums"].get("ChecksumType") == kind)
        if kind == "COMPOSITE":
            ok = ok and res["complete"].get(key) == composite(alg, values) and \
                res["part2"]["checksums"].get(key) == values[1]
        check(ok, f"JS SDK: multipart {name}: {res}")
    errs = out["errors"]
    check(errs["wrong_put"] == "BadDigest", f"JS SDK: a wrong CRC32 on PUT: {errs['wrong_put']}")
    check(errs["sha256_full_object"] == "InvalidRequest", f"JS SDK: SHA256 FULL_OBJECT: {errs['sha256_full_object']}")
    check(errs["wrong_part"] == "InvalidPart", f"JS SDK: a completion with a wrong part checksum: {errs['wrong_part']}")


def stat_file_checks(data):
    """`aquifer stat-file --verify` reads every block and checks the object's
    stored checksum too: the end-to-end check of what the client sent."""
    for key in ("put/SHA256", "plain", "mpu/CRC32-None", "mpu/CRC32C-FULL_OBJECT", "mpu/None-None"):
        r = subprocess.run([AQ, "stat-file", "sums/" + key, "--data", data, "--verify", "--json"], capture_output=True,
                           text=True)
        got = json.loads(r.stdout).get("checksum", {}) if r.stdout.strip() else {}
        check(r.returncode == 0 and got.get("state") == "ok", f"stat-file --verify {key}: {got} {r.stderr[-200:]}")
    # A stored checksum that the blocks do not give (blocks whole, the value
    # not the bytes'): found, exit 1.
    db = sqlite3.connect(os.path.join(data, "meta.db"))
    (attrs,) = db.execute("SELECT attrs FROM objects WHERE bucket = 'sums' AND key = 'plain'").fetchone()
    a = json.loads(attrs)
    a["checksum"]["value"] = checksum("crc64nvme", b"something else")
    db.execute("UPDATE objects SET attrs = ? WHERE bucket = 'sums' AND key = 'plain'", (json.dumps(a),))
    db.commit()
    db.close()
    r = subprocess.run([AQ, "stat-file", "sums/plain", "--data", data, "--verify"], capture_output=True, text=True)
    check(r.returncode == 1 and "mismatch" in r.stdout and "do not give the object's crc64nvme" in r.stderr,
          f"stat-file --verify finds a checksum the blocks do not give: {r.returncode} {r.stdout[-300:]} {r.stderr}")


def payload_signing_checks():
    """What aquifer's client signs of a body: its SHA-256 over plain HTTP to
    another host; UNSIGNED-PAYLOAD to a node on this machine's loopback,
    where no network lies between the two (a SHA-256 pass saved on each
    side); the CRC32C the node checks either way. Seen by a server that
    records each request's headers."""
    import http.server
    import socket
    import threading
    seen = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def answer(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
            if self.command == "PUT" and body:
                seen.append((self.headers.get("x-amz-content-sha256"), self.headers.get("x-amz-checksum-crc32c"),
                             body))
            self.send_response(200 if self.command == "PUT" else 404)
            self.send_header("ETag", '"e"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_PUT = do_GET = do_HEAD = do_POST = answer

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        other = None  # an address of this machine off the loopback, if it has one
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            try:
                u.connect(("192.0.2.1", 9))  # no packet is sent: the route names the address
                other = u.getsockname()[0]
            except OSError:
                pass
        body = os.urandom(3000)
        f = os.path.join(tmp, "signed.bin")
        with open(f, "wb") as fh:
            fh.write(body)
        crc = checksum("crc32c", body)
        for host in ["127.0.0.1"] + ([other] if other and not other.startswith("127.") else []):
            seen.clear()
            r = subprocess.run([AQ, "--credentials", creds, "cp", f, f"aquifer://{host}:{server.server_address[1]}/b/k"],
                               capture_output=True, text=True)
            check(r.returncode == 0 and len(seen) == 1 and seen[0][1:] == (crc, body),
                  f"{host}: one PUT with the body and its CRC32C: {r.stderr} {[x[:2] for x in seen]}")
            if seen:
                want = "UNSIGNED-PAYLOAD" if host == "127.0.0.1" else hashlib.sha256(body).hexdigest()
                check(seen[0][0] == want, f"{host}: x-amz-content-sha256 {seen[0][0]}, expected {want}")
        if other is None:
            print("SKIP (signed half): no address off the loopback")
    finally:
        server.shutdown()


def etag_checks(port):
    """The aquifer:// client spares the node its MD5 pass: objects it writes
    get an ETag unique per write ("<32 hex>-1", or "-N" for N parts), which
    no client takes for an MD5; AQUIFER_MD5_ETAG=1 asks for S3's MD5 ETags;
    copies and other clients get MD5 ETags as ever."""
    import re
    s3 = s3lib.boto(port)
    s3.create_bucket(Bucket="etags")
    small, big = os.urandom(300_000), os.urandom(12 * MiB + 5)
    paths = {}
    for name, body in (("small", small), ("big", big)):
        paths[name] = os.path.join(tmp, name + ".bin")
        with open(paths[name], "wb") as fh:
            fh.write(body)
    parts = dict(os.environ, AQUIFER_MULTIPART_THRESHOLD="5MiB", AQUIFER_PART_SIZE="5MiB")

    def cp(name, key, env=parts):
        r = subprocess.run([AQ, "--credentials", creds, "cp", paths[name], f"aquifer://127.0.0.1:{port}/etags/{key}"],
                           capture_output=True, text=True, env=env)
        check(r.returncode == 0, f"cp {name} -> {key}: {r.stderr[-300:]}")
        h = s3.head_object(Bucket="etags", Key=key)
        return h["ETag"]

    e1, e2 = cp("small", "a"), cp("small", "b")
    check(re.fullmatch(r'"[0-9a-f]{32}-1"', e1) is not None, f"a PUT's ETag is unique per write: {e1}")
    check(e1 != e2, f"the same bytes written twice: two ETags ({e1}, {e2})")
    eb = cp("big", "c")
    check(re.fullmatch(r'"[0-9a-f]{32}-3"', eb) is not None, f"three parts: '-3': {eb}")
    check(s3.get_object(Bucket="etags", Key="c")["Body"].read() == big, "the multipart object reads back whole")
    check(s3.get_object(Bucket="etags", Key="a")["Body"].read() == small, "the PUT object reads back whole")
    md5 = dict(parts, AQUIFER_MD5_ETAG="1")
    e = cp("small", "d", md5)
    check(e == '"%s"' % hashlib.md5(small).hexdigest(), f"AQUIFER_MD5_ETAG=1: the MD5 ETag: {e}")
    e = cp("big", "e", md5)
    want = hashlib.md5(b"".join(hashlib.md5(big[i:i + 5 * MiB]).digest() for i in range(0, len(big), 5 * MiB)))
    check(e == '"%s-3"' % want.hexdigest(), f"AQUIFER_MD5_ETAG=1, three parts: S3's multipart ETag: {e}")
    cp_etag = s3.copy_object(Bucket="etags", Key="f", CopySource="etags/a")["CopyObjectResult"]["ETag"]
    check(cp_etag == '"%s"' % hashlib.md5(small).hexdigest(), f"a copy of it has the MD5 ETag: {cp_etag}")
    put = s3.put_object(Bucket="etags", Key="g", Body=small)["ETag"]
    check(put == '"%s"' % hashlib.md5(small).hexdigest(), f"boto3's PUT: the MD5 ETag: {put}")


node = etcd = None
nodes = []
try:
    payload_signing_checks()
    node = s3lib.Node(AQ, os.path.join(tmp, "single"), credentials=creds)
    boto_checks(node.port, "one node")
    etag_checks(node.port)
    js_checks(node.port)
    node.stop()
    node = None
    stat_file_checks(os.path.join(tmp, "single"))

    if shutil.which("etcd"):
        etcd = s3lib.Etcd(tmp)
        nodes = [s3lib.ClusterNode(AQ, tmp, f"n{i}", etcd.url, creds, "--replicas", "2") for i in (1, 2)]
        boto_checks(nodes[0].port, "cluster")
        # Parts written through one node, completed and read through the other.
        s3a, s3b = s3lib.boto(nodes[0].port), s3lib.boto(nodes[1].port)
        u = s3a.create_multipart_upload(Bucket="sums", Key="across", ChecksumAlgorithm="SHA1")
        c = [os.urandom(5 * MiB), b"tail"]
        ps = [s3a.upload_part(Bucket="sums", Key="across", UploadId=u["UploadId"], PartNumber=i, Body=d,
                              ChecksumAlgorithm="SHA1") for i, d in enumerate(c, 1)]
        s3b.complete_multipart_upload(Bucket="sums", Key="across", UploadId=u["UploadId"], MultipartUpload={
            "Parts": [{"PartNumber": i, "ETag": p["ETag"], "ChecksumSHA1": p["ChecksumSHA1"]}
                      for i, p in enumerate(ps, 1)]})
        h = headers(s3b.head_object(Bucket="sums", Key="across", ChecksumMode="ENABLED"))
        check(h.get("x-amz-checksum-sha1") == composite("sha1", [checksum("sha1", d) for d in c]),
              f"cluster: parts from one node, completed on the other: {h}")
    else:
        print("SKIP (cluster part): etcd is not installed")
finally:
    for n in nodes:
        n.stop()
    if node is not None:
        node.stop()
    if etcd is not None:
        etcd.stop()
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
