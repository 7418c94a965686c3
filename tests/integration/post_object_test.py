#!/usr/bin/python3
"""POST Object (browser form uploads) against a real node: presigned POSTs
as boto3 makes them (Signature Version 4) and forms signed as older tools
and S3's browser-upload examples sign them (Version 2), sent by
python3-requests the way a browser sends a form.

What must hold: the policy's expiration and every condition
(exact, starts-with, content-length-range, the bucket), every field covered
by a condition, signatures and keys checked, a key's grants respected, and
nothing stored by any refused form; fields after the file ignored; files
larger than a read, with bytes that look like the boundary, stored
byte-identical; success_action_status / success_action_redirect answered.

usage: post_object_test.py path/to/aquifer
"""
import base64
import datetime
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys
import tempfile

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
check = s3lib.Checks()
tmp = tempfile.mkdtemp(prefix="aq_post_")


def expiry(minutes=10):
    return (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=minutes)).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def v2_form(doc, access_key=s3lib.KEY, secret=s3lib.SECRET, **fields):
    """The fields of a form signed with Signature Version 2, in order, the file last."""
    policy = base64.b64encode(json.dumps(doc).encode()) if not isinstance(doc, bytes) else doc
    sig = base64.b64encode(hmac.new(secret.encode(), policy, hashlib.sha1).digest())
    out = [("AWSAccessKeyId", access_key), ("policy", policy), ("signature", sig)]
    out += list(fields.items())
    return out


def conditions(bucket="posts", prefix="up/", extra=()):
    return [{"bucket": bucket}, ["starts-with", "$key", prefix], ["starts-with", "$Content-Type", "text/"],
            ["content-length-range", 0, 10 << 20], *extra]


node = None
try:
    creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
    node = s3lib.Node(AQ, os.path.join(tmp, "data"), credentials=creds)
    port = node.port
    url = f"http://127.0.0.1:{port}/posts"
    s3 = s3lib.boto(port)
    s3.create_bucket(Bucket="posts")

    def stored(key):
        try:
            return s3.get_object(Bucket="posts", Key=key)["Body"].read()
        except s3.exceptions.NoSuchKey:
            return None

    def post(fields, file=b"bar", name="f.txt"):
        return requests.post(url, files=[(k, (None, v)) for k, v in fields] + [("file", (name, file))], timeout=30)

    # boto3's presigned POST (Signature Version 4), with ${filename}.
    p = s3.generate_presigned_post("posts", "up/${filename}", Fields={"Content-Type": "text/plain"},
                                   Conditions=[{"Content-Type": "text/plain"}, ["starts-with", "$key", "up/"],
                                               ["content-length-range", 1, 1 << 20]], ExpiresIn=600)
    r = requests.post(p["url"], data=p["fields"], files={"file": ("é x.txt", b"hello form")}, timeout=30)
    check(r.status_code == 204 and r.headers.get("etag") == '"' + hashlib.md5(b"hello form").hexdigest() + '"',
          f"boto3's presigned POST: {r.status_code} {r.text[:300]}")
    head = s3.head_object(Bucket="posts", Key="up/é x.txt", ChecksumMode="ENABLED")
    check(stored("up/é x.txt") == b"hello form" and head["ContentType"] == "text/plain",
          f"... stored under the file's name with its Content-Type: {head.get('ContentType')}")
    check(head["ResponseMetadata"]["HTTPHeaders"].get("x-amz-checksum-crc64nvme") is not None,
          "... with a stored checksum")
    r = requests.post(p["url"], data=p["fields"], files={"file": ("big.txt", os.urandom(2 << 20))}, timeout=30)
    check(r.status_code == 400 and b"EntityTooLarge" in r.content and stored("up/big.txt") is None,
          f"over the policy's content-length-range: {r.status_code} {r.content[:200]}")
    r = requests.post(p["url"], data=p["fields"], files={"file": ("zero.txt", b"")}, timeout=30)
    check(r.status_code == 400 and b"EntityTooSmall" in r.content and stored("up/zero.txt") is None,
          f"under it: {r.status_code} {r.content[:200]}")

    # Version 2 forms, the shapes of S3's browser-upload examples.
    good = dict(key="up/a.txt", acl="private", **{"Content-Type": "text/plain"})
    doc = {"expiration": expiry(), "conditions": conditions(extra=[{"acl": "private"}])}
    r = post(v2_form(doc, **good))
    check(r.status_code == 204 and stored("up/a.txt") == b"bar", f"a V2 form: {r.status_code} {r.text[:300]}")
    r = post(v2_form(doc, **good, success_action_status="201"))
    check(r.status_code == 403, f"a field the policy does not cover is refused: {r.status_code}")
    doc201 = {"expiration": expiry(), "conditions": conditions(extra=[{"acl": "private"},
                                                                      {"success_action_status": "201"}])}
    r = post(v2_form(doc201, **good, success_action_status="201"))
    check(r.status_code == 201 and "<Key>up/a.txt</Key>" in r.text and "<ETag>" in r.text,
          f"success_action_status=201 answers a PostResponse: {r.status_code} {r.text[:300]}")
    doc_redirect = {"expiration": expiry(), "conditions": conditions(
        extra=[{"acl": "private"}, ["starts-with", "$success_action_redirect", "http://example.invalid/"]])}
    r = requests.post(url, files=[(k, (None, v)) for k, v in v2_form(
        doc_redirect, **good, success_action_redirect="http://example.invalid/done")] + [("file", ("f", b"x"))],
        allow_redirects=False, timeout=30)
    check(r.status_code == 303 and r.headers["location"].startswith("http://example.invalid/done?bucket=posts&key=up%2Fa.txt&etag="),
          f"success_action_redirect: {r.status_code} {r.headers.get('location')}")
    doc_meta = {"expiration": expiry(), "conditions": conditions(extra=[{"acl": "private"},
                                                                        ["starts-with", "$x-amz-meta-who", ""]])}
    r = post(v2_form(doc_meta, **good, **{"x-amz-meta-who": "labeller 7", "x-ignore-note": "not checked"}))
    meta = s3.head_object(Bucket="posts", Key="up/a.txt")["Metadata"]
    check(r.status_code == 204 and meta == {"who": "labeller 7"}, f"x-amz-meta-* stored, x-ignore-* ignored: {meta}")
    # Fields after the file are not part of the form.
    r = requests.post(url, files=[(k, (None, v)) for k, v in v2_form(doc, **good)] +
                      [("file", ("f", b"first")), ("key", (None, "up/other.txt"))], timeout=30)
    check(r.status_code == 204 and stored("up/a.txt") == b"first" and stored("up/other.txt") is None,
          "a field after the file is ignored")
    # A large file whose bytes hold the boundary's start, crossing read boundaries.
    tricky = (b"\r\n--" + os.urandom(1000) + b"\r\n-") * 3000 + os.urandom(3 << 20)
    r = post(v2_form(doc, **dict(good, key="up/tricky.bin")), file=tricky)
    check(r.status_code == 204 and stored("up/tricky.bin") == tricky,
          f"a {len(tricky)}-byte file with boundary-like bytes stored byte-identical: {r.status_code}")

    # What must be refused, and store nothing.
    def refused(fields, status, code, what, file=b"never"):
        before = stored("up/a.txt")
        r = post(fields, file=file)
        check(r.status_code == status and code.encode() in r.content and stored("up/a.txt") == before,
              f"{what}: {status} {code}, nothing stored: {r.status_code} {r.content[:240]}")

    refused(v2_form({"expiration": expiry(-1), "conditions": conditions()}, **good), 403, "AccessDenied",
            "an expired policy")
    refused(v2_form({"conditions": conditions()}, **good), 400, "InvalidPolicyDocument", "no expiration")
    refused(v2_form({"EXPIRATION": expiry(), "conditions": conditions()}, **good), 400, "InvalidPolicyDocument",
            "policy names are case-sensitive (EXPIRATION)")
    refused(v2_form({"expiration": "tomorrow", "conditions": conditions()}, **good), 400, "InvalidPolicyDocument",
            "an expiration that is not a date")
    refused(v2_form({"expiration": expiry(), "CONDITIONS": conditions()}, **good), 400, "InvalidPolicyDocument",
            "no conditions list")
    refused(v2_form({"expiration": expiry(), "conditions": [{}]}, **good), 400, "InvalidPolicyDocument",
            "an empty condition")
    refused(v2_form({"expiration": expiry(), "conditions": conditions(extra=[["content-length-range", -1, 0]])},
                    **good), 400, "InvalidPolicyDocument", "a negative content-length-range")
    refused(v2_form({"expiration": expiry(), "conditions": conditions(bucket="other")}, **good), 403,
            "AccessDenied", "a policy for another bucket")
    refused(v2_form({"expiration": expiry(), "conditions": conditions(prefix="else/")}, **good), 403,
            "AccessDenied", "a key outside the policy's starts-with")
    refused(v2_form({"expiration": expiry(), "conditions": conditions(extra=[{"acl": "private"},
                                                                            ["eq", "$x-amz-meta-foo", ""]])},
                    **good, **{"x-amz-meta-foo": "bar"}), 403, "AccessDenied", "an eq condition that fails")
    refused(v2_form({"expiration": expiry(), "conditions": conditions(extra=[{"acl": "private"},
                                                                            ["starts-with", "$x-amz-meta-foo", "b"]])},
                    **good), 403, "AccessDenied", "a condition on a field the form lacks")
    refused(v2_form(doc, secret="wrong secret", **good), 403, "SignatureDoesNotMatch", "a wrong signature")
    refused(v2_form(doc, access_key="NOSUCHKEY", **good), 403, "InvalidAccessKeyId", "an unknown access key")
    refused([(k, v) for k, v in v2_form(doc, **good) if k != "signature"], 400, "InvalidArgument",
            "a policy without its signature")
    refused([(k, v) for k, v in v2_form(doc, **good) if k not in ("signature", "policy", "AWSAccessKeyId")], 403,
            "AccessDenied", "an unsigned form on a node that requires signatures")
    refused([(k, v) for k, v in v2_form(doc, **good) if k != "key"], 400, "InvalidArgument", "no key field")
    any_acl = {"expiration": expiry(), "conditions": conditions(extra=[["starts-with", "$acl", ""]])}
    refused(v2_form(any_acl, **dict(good, acl="public-read")), 501, "NotImplemented", "a public ACL")
    r = requests.post(url, files=[(k, (None, v)) for k, v in v2_form(doc, **good)], timeout=30)
    check(r.status_code == 400 and b"InvalidArgument" in r.content, f"no file field: {r.status_code}")
    r = requests.post(url, data=b"--xYz\r\nnot a part", headers={"Content-Type": "multipart/form-data; boundary=xYz"},
                      timeout=30)
    check(r.status_code == 400 and b"MalformedPOSTRequest" in r.content, f"a malformed form: {r.status_code}")
    r = post(v2_form(doc, **dict(good, **{"x-ignore-pad": "p" * 30000})))
    check(r.status_code == 400 and b"MaxPostPreDataLengthExceeded" in r.content,
          f"fields over 20 KB before the file: {r.status_code} {r.content[:200]}")

    # A user's key: its grants decide, as for PUT (this one may write under up/ only).
    path = os.path.join(tmp, "uploader.key")
    out = subprocess.run([AQ, "key", "add", "uploader", "--grant", "write:posts/up/", "--out", path,
                          "--data", os.path.join(tmp, "data")], capture_output=True, text=True)
    check(out.returncode == 0, f"key add: {out.stderr}")
    ak, sk = [ln for ln in open(path) if ln.strip() and not ln.startswith("#")][0].split()[:2]
    anywhere = {"expiration": expiry(), "conditions": [{"bucket": "posts"}, ["starts-with", "$key", ""],
                                                       ["starts-with", "$Content-Type", ""], {"acl": "private"}]}
    r = post(v2_form(anywhere, access_key=ak, secret=sk, **dict(good, key="up/by-user.txt")), file=b"user")
    check(r.status_code == 204 and stored("up/by-user.txt") == b"user", f"a user key inside its grant: {r.status_code}")
    r = post(v2_form(anywhere, access_key=ak, secret=sk, **dict(good, key="elsewhere.txt")), file=b"user")
    check(r.status_code == 403 and b"AccessDenied" in r.content and stored("elsewhere.txt") is None,
          f"a user key outside its grant: {r.status_code} {r.content[:200]}")
finally:
    if node is not None:
        node.stop()
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
