#!/usr/bin/python3
"""Presigned URLs as current SDKs make them, against a real node: the AWS
SDK for JavaScript v3's getSignedUrl (installed from npm into CACHE_DIR,
versions pinned in js_presign/package.json) and boto3's
generate_presigned_url. The JavaScript SDK signs headers into the query
(X-Amz-Content-Sha256, x-amz-checksum-mode, x-amz-checksum-crc32,
x-amz-sdk-checksum-algorithm, x-id); S3 reads those as headers, so must the
node: a checksum there is checked against the body (the SDK's default PUT
URL carries the CRC32 of an empty body, which S3 refuses for any other
body, and so does the node), and a signed header the node does not
implement (x-amz-meta-*) is refused before anything is stored.

Exit 77 when npm or its registry is not reachable.

usage: js_presign_test.py path/to/aquifer [CACHE_DIR]
"""
import base64
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
HERE = os.path.dirname(os.path.abspath(__file__))
cache = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else os.path.join(tempfile.gettempdir(), "aq-js-presign")
why = s3lib.js_sdk(cache, "presign.mjs")
if why is not None:
    print(f"SKIP: {why}")
    sys.exit(77)

check = s3lib.Checks()
tmp = tempfile.mkdtemp(prefix="aq_jspresign_")
node = None
try:
    creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
    node = s3lib.Node(AQ, os.path.join(tmp, "data"), credentials=creds)
    port = node.port
    st, _, b = s3lib.request(port, "PUT", "/presign")
    assert st == 200, b
    key = "dir/é x.bin"
    body = os.urandom(70_000)
    crc = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
    r = subprocess.run(["node", "presign.mjs", f"http://127.0.0.1:{port}", "presign", key, s3lib.KEY, s3lib.SECRET, crc],
                       cwd=cache, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    urls = json.loads(r.stdout)
    check("x-amz-checksum-crc32=AAAAAA%3D%3D" in urls["put_default"] and "x-id=PutObject" in urls["put_default"],
          f"the SDK's default PUT URL signs the empty body's CRC32 into its query: {urls['put_default']}")
    check("x-amz-checksum-mode=ENABLED" in urls["get"], f"its GET URL asks for checksums: {urls['get']}")

    def call(method, url, data=b""):
        u = urllib.parse.urlsplit(url)
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        c.request(method, u.path + "?" + u.query, body=data if method == "PUT" else None,
                  headers={"Content-Length": str(len(data))} if method == "PUT" else {})
        res = c.getresponse()
        out = res.read()
        c.close()
        return res.status, {k.lower(): v for k, v in res.getheaders()}, out

    def stored():
        st, _, b = s3lib.request(port, "GET", "/presign/" + urllib.parse.quote(key))
        return b if st == 200 else None

    st, _, b = call("PUT", urls["put_when_required"], body)
    check(st == 200, f"PUT through a URL with no checksum: {st} {b[:200]}")
    st, h, b = call("GET", urls["get"])
    check(st == 200 and b == body, f"GET through the SDK's URL (x-amz-checksum-mode, x-id): {st} {b[:200]}")
    st, h, _ = call("HEAD", urls["head"])
    check(st == 200 and h.get("content-length") == str(len(body)), f"HEAD through the SDK's URL: {st} {h}")
    st, h, _ = call("GET", urls["get_as_text"])
    check(st == 200 and h.get("content-type") == "text/plain", f"response-content-type: {st} {h.get('content-type')}")

    st, _, b = call("PUT", urls["put_default"], b"other bytes")
    check(st == 400 and b"BadDigest" in b, f"the default URL's empty-body CRC32 refuses another body: {st} {b[:200]}")
    check(stored() == body, "a refused PUT leaves the object as it was")
    st, _, b = call("PUT", urls["put_wrong_crc32"], body)
    check(st == 400 and b"BadDigest" in b, f"a signed CRC32 that does not match: {st} {b[:200]}")
    check(stored() == body, "... and the object is unchanged")
    st, _, b = call("PUT", urls["put_default"], b"")
    check(st == 200 and stored() == b"", f"the default URL takes the empty body it was signed for: {st} {b[:200]}")
    st, _, b = call("PUT", urls["put_crc32"], body)
    check(st == 200 and stored() == body, f"a URL signed with the body's CRC32: {st} {b[:200]}")
    st, _, b = call("PUT", urls["put_metadata"], b"metadata")
    check(st == 501 and stored() == body, f"x-amz-meta-* signed into the query is refused, nothing stored: {st} {b[:200]}")

    tampered = urls["get"].replace("/presign/dir/", "/presign/other/")
    st, _, b = call("GET", tampered)
    check(st == 403 and b"SignatureDoesNotMatch" in b, f"a URL whose key was changed: {st} {b[:120]}")
    u = urllib.parse.urlsplit(urls["get"])
    q = u.query.replace("x-amz-checksum-mode=ENABLED", "x-amz-checksum-mode=DISABLED")
    st, _, b = call("GET", f"http://{u.netloc}{u.path}?{q}")
    check(st == 403, f"a signed query parameter changed: {st} {b[:120]}")

    # boto3's presigned URLs, for comparison.
    s3 = s3lib.boto(port)
    get = s3.generate_presigned_url("get_object", Params={"Bucket": "presign", "Key": key}, ExpiresIn=600)
    put = s3.generate_presigned_url("put_object", Params={"Bucket": "presign", "Key": key}, ExpiresIn=600)
    st, _, b = call("PUT", put, b"from boto3")
    check(st == 200, f"boto3's presigned PUT: {st} {b[:200]}")
    st, _, b = call("GET", get)
    check(st == 200 and b == b"from boto3", f"boto3's presigned GET: {st} {b[:200]}")
finally:
    if node is not None:
        node.stop()
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
