#!/usr/bin/python3
"""Abandoned multipart uploads, with boto3 and the node's own sweep: an
upload older than --upload-expiry is aborted and its parts' blocks freed;
a bucket lifecycle rule (AbortIncompleteMultipartUpload, by prefix) aborts
sooner; rules the node would not carry out (Expiration, tag filters) are
refused with 501 and nothing is stored; DeleteBucket aborts the uploads in
progress of a bucket without objects (as S3), refuses one with objects and
touches nothing; /stats and `aquifer stats` count uploads and expiries.
A lifecycle day is 1 s here (--lifecycle-day), the expiry 6 s.
usage: uploads_test.py path/to/aquifer"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402
from s3lib import Checks, Node, boto, error_code, request, until  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
check = Checks()
tmp = tempfile.mkdtemp(prefix="aq_uploads_")
node = None


def uploads(s3, bucket):
    return sorted(u["Key"] for u in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []))


def start_upload(s3, bucket, key, size=100_000):
    u = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    s3.upload_part(Bucket=bucket, Key=key, UploadId=u, PartNumber=1, Body=os.urandom(size))
    return u


def blocks_on_disk():
    return sum(len(files) for _, _, files in os.walk(os.path.join(tmp, "node", "pool-default", "blocks")))


try:
    creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
    node = Node(AQ, os.path.join(tmp, "node"), "--upload-expiry", "6s", "--lifecycle-day", "1s",
                "--reclaim-delay", "0", credentials=creds)
    s3 = boto(node.port)
    s3.create_bucket(Bucket="bkt")

    # ---- lifecycle configuration: stored, returned, refused when not carried out ----
    check(error_code(lambda: s3.get_bucket_lifecycle_configuration(Bucket="bkt")) == "NoSuchLifecycleConfiguration",
          "no lifecycle configuration at first")
    refused = [
        {"ID": "exp", "Filter": {"Prefix": ""}, "Status": "Enabled", "Expiration": {"Days": 1}},
        {"ID": "tag", "Filter": {"Tag": {"Key": "a", "Value": "b"}}, "Status": "Enabled",
         "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
        {"ID": "tr", "Filter": {"Prefix": "x/"}, "Status": "Enabled",
         "Transitions": [{"Days": 30, "StorageClass": "GLACIER"}]},
    ]
    for rule in refused:
        code = error_code(lambda: s3.put_bucket_lifecycle_configuration(
            Bucket="bkt", LifecycleConfiguration={"Rules": [rule]}))
        check(code == "NotImplemented", f"lifecycle rule {rule['ID']} refused as not implemented: {code}")
    check(error_code(lambda: s3.get_bucket_lifecycle_configuration(Bucket="bkt")) == "NoSuchLifecycleConfiguration",
          "... and nothing stored")
    st, _, body = request(node.port, "PUT", "/bkt", "lifecycle", b"<LifecycleConfiguration><Rule><Status>Maybe"
                          b"</Status></Rule></LifecycleConfiguration>")
    check(st == 400 and b"MalformedXML" in body, f"a malformed rule: 400 MalformedXML ({st})")
    rules = [{"ID": "tmp-1d", "Filter": {"Prefix": "tmp/"}, "Status": "Enabled",
              "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
             {"ID": "off", "Filter": {"Prefix": ""}, "Status": "Disabled",
              "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}]
    s3.put_bucket_lifecycle_configuration(Bucket="bkt", LifecycleConfiguration={"Rules": rules})
    got = s3.get_bucket_lifecycle_configuration(Bucket="bkt")["Rules"]
    check([(r["ID"], r["Filter"]["Prefix"], r["Status"], r["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"])
           for r in got] == [("tmp-1d", "tmp/", "Enabled", 1), ("off", "", "Disabled", 1)],
          f"the rules read back as stored: {got}")

    # ---- expiry: the rule (1 "day" = 1 s) first, the node's limit (6 s) later ----
    before = blocks_on_disk()
    start_upload(s3, "bkt", "tmp/by-rule")
    start_upload(s3, "bkt", "keep/by-limit")
    check(blocks_on_disk() == before + 2, "each upload's part holds a block")
    check(uploads(s3, "bkt") == ["keep/by-limit", "tmp/by-rule"], "two uploads in progress")
    check(until(lambda: uploads(s3, "bkt") == ["keep/by-limit"], 5),
          f"the rule aborts the upload under tmp/ after a day: {uploads(s3, 'bkt')}")
    check(until(lambda: uploads(s3, "bkt") == [], 10), f"the node's limit aborts the other: {uploads(s3, 'bkt')}")
    check(until(lambda: blocks_on_disk() == before, 5), f"the parts' blocks are freed: {blocks_on_disk()} vs {before}")
    stats = node.stats()["uploads"]
    check(stats["expired"] == 2 and stats["in_progress"] == 0 and stats["expiry_seconds"] == 6,
          f"/stats counts the expired uploads: {stats}")
    # A completed upload is not touched by the sweep.
    u = start_upload(s3, "bkt", "tmp/done", 5 << 20)
    etag = s3.list_parts(Bucket="bkt", Key="tmp/done", UploadId=u)["Parts"][0]["ETag"]
    s3.complete_multipart_upload(Bucket="bkt", Key="tmp/done", UploadId=u,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
    time.sleep(2)
    check(len(s3.get_object(Bucket="bkt", Key="tmp/done")["Body"].read()) == 5 << 20,
          "a completed upload's object is whole after sweeps")
    s3.delete_bucket_lifecycle(Bucket="bkt")
    check(error_code(lambda: s3.get_bucket_lifecycle_configuration(Bucket="bkt")) == "NoSuchLifecycleConfiguration",
          "DeleteBucketLifecycle removes the rules")

    # ---- stats while uploads are in progress ----
    start_upload(s3, "bkt", "live/a")
    check(until(lambda: node.stats()["uploads"]["in_progress"] == 1, 5), "/stats counts an upload in progress")
    r = subprocess.run([AQ, "stats", f"127.0.0.1:{node.metrics}"],
                       capture_output=True, text=True)
    check(r.returncode == 0 and "uploads" in r.stdout and "in progress" in r.stdout,
          f"aquifer stats shows uploads: {r.stdout[-400:]} {r.stderr}")

    # ---- DeleteBucket aborts uploads of an empty bucket, refuses a full one ----
    s3.create_bucket(Bucket="gone")
    start_upload(s3, "gone", "x")
    start_upload(s3, "gone", "y")
    s3.put_object(Bucket="gone", Key="obj", Body=b"data")
    check(error_code(lambda: s3.delete_bucket(Bucket="gone")) == "BucketNotEmpty", "a bucket with objects: 409")
    check(uploads(s3, "gone") == ["x", "y"], "... and its uploads untouched")
    s3.delete_object(Bucket="gone", Key="obj")
    s3.delete_bucket(Bucket="gone")
    check(error_code(lambda: s3.head_bucket(Bucket="gone")) == "404",
          "an empty bucket with uploads in progress is deleted (they are aborted)")
    s3.create_bucket(Bucket="gone")
    check(uploads(s3, "gone") == [], "a new bucket of that name has no uploads")
    check(error_code(lambda: s3.get_bucket_lifecycle_configuration(Bucket="gone")) ==
          "NoSuchLifecycleConfiguration", "... and no rules")
    check(node.stop() == 0, "node stops cleanly")
    node = None
finally:
    if node is not None:
        node.stop()
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
