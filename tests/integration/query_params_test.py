#!/usr/bin/python3
"""docs/s3.md's table of query parameters, checked against a real node.

Every row names parameters, the requests they go on and what the node does
(implemented, ignored or refused). Each parameter is sent on each request:
an implemented or ignored one must not be refused (no 501), a refused one
must be 501 NotImplemented, and after every probe the object and bucket
are as they were (a refused PUT, POST or DELETE touches nothing). Rows on
presigned URLs are checked where presigned URLs are (s3_test,
js_presign_test). A parameter S3 does not document is refused too.

usage: query_params_test.py path/to/aquifer
"""
import os
import re
import shutil
import sys
import tempfile
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "s3.md")

# Values that make a probe a well-formed request (others are sent empty).
VALUES = {"max-keys": "5", "max-buckets": "5", "max-uploads": "5", "max-parts": "5", "list-type": "2",
          "encoding-type": "url", "fetch-owner": "true", "bucket-region": "us-east-1", "versionId": "null",
          "partNumber": "1", "select-type": "2", "part-number-marker": "0", "response-content-type": "text/plain",
          "x-id": "GetObject"}


def rows():
    text = open(DOC, encoding="utf-8").read()
    section = text.split("## Query parameters", 1)[1].split("\n## ", 1)[0]
    out = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`([^`]+)`", cells[0])
        requests = [r.strip() for r in cells[1].split(",")]
        out.append((names, requests, cells[2]))
    return out


check = s3lib.Checks()
tmp = tempfile.mkdtemp(prefix="aq_query_")
node = None
try:
    creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
    node = s3lib.Node(AQ, os.path.join(tmp, "data"), credentials=creds)
    port = node.port
    req = lambda *a, **k: s3lib.request(port, *a, **k)  # noqa: E731
    check(req("PUT", "/qpb")[0] == 200, "bucket")
    body = b"the object the probes must not change"

    def reset():
        st, _, _ = req("PUT", "/qpb/obj", body=body)
        assert st == 200

    def upload():
        st, _, b = req("POST", "/qpb/obj", "uploads=")
        assert st == 200, b
        return re.search(rb"<UploadId>([^<]+)</UploadId>", b).group(1).decode()

    table = rows()
    check(len(table) >= 25, f"the table has its rows: {len(table)}")
    probes = 0
    for names, requests, here in table:
        if requests == ["presigned URL"]:
            continue
        for spec in requests:
            method, target = spec.split(" ", 1)
            target, _, extra = target.partition("?")
            path = {"service": "/", "bucket": "/qpb", "object": "/qpb/obj"}[target]
            for name in names:
                reset()
                query = {}
                if extra == "upload":
                    query["uploadId"] = upload()
                    if method == "PUT":
                        query["partNumber"] = "1"
                elif extra:
                    query[extra] = ""
                if name == "uploadId" and "uploadId" not in query:
                    query["uploadId"] = upload()
                query.setdefault(name, VALUES.get(name, ""))
                q = "&".join(f"{urllib.parse.quote(k, safe='')}={urllib.parse.quote(v, safe='')}"
                             for k, v in query.items())
                st, _, b = req(method, path, q)
                probes += 1
                what = f"{method} {path}?{q} ({here})"
                if here == "refused":
                    check(st == 501 and b"NotImplemented" in b, f"{what}: 501 NotImplemented: {st} {b[:200]}")
                else:
                    check(st != 501 and st < 500, f"{what}: answered, not refused: {st} {b[:200]}")
                if method in ("PUT", "POST", "DELETE") and here == "refused":
                    st, _, got = req("GET", "/qpb/obj")
                    check(st == 200 and got == body, f"{what}: the object is unchanged: {st}")
                    check(req("HEAD", "/qpb")[0] == 200, f"{what}: the bucket is still there")
    check(probes >= 140, f"every row probed: {probes} requests")
    # Parameters S3 does not document: refused, nothing changed.
    reset()
    for method, path, q in [("GET", "/qpb/obj", "frobnicate="), ("PUT", "/qpb/obj", "append="),
                            ("DELETE", "/qpb/obj", "purge=1"), ("GET", "/qpb", "inventory-x="),
                            ("POST", "/qpb/obj", "uploads=&shard=2")]:
        st, _, b = req(method, path, q, body=b"new bytes" if method == "PUT" else b"")
        check(st == 501 and b"NotImplemented" in b, f"{method} {path}?{q}: an unknown parameter is refused: {st}")
    st, _, got = req("GET", "/qpb/obj")
    check(st == 200 and got == body, "the object is unchanged by every refused request")
finally:
    if node is not None:
        node.stop()
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
