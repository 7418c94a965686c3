#!/usr/bin/python3
"""Writes small seed inputs for the fuzz targets (valid records of every
format, built with the independent implementations in tests/compat/spec.py).
usage: make_seeds.py OUTDIR"""
import crcmod.predefined
import io
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "compat"))
import spec  # noqa: E402
from PIL import Image  # noqa: E402

out = sys.argv[1]


def put(target, name, data):
    os.makedirs(f"{out}/{target}", exist_ok=True)
    with open(f"{out}/{target}/{name}", "wb") as fh:
        fh.write(data)


def jpeg(w, h, mode="RGB", q=80):
    b = io.BytesIO()
    Image.new(mode, (w, h), 90 if mode == "L" else (10, 200, 30)).save(b, format="JPEG", quality=q)
    return b.getvalue()


small = jpeg(16, 8)
put("fuzz_jpeg", "rgb", small)
put("fuzz_jpeg", "gray", jpeg(8, 8, "L"))
put("fuzz_jpeg", "cmyk", jpeg(8, 8, "CMYK"))
put("fuzz_region_decode", "rgb", bytes([40, 60, 200, 180]) + jpeg(64, 48))
put("fuzz_region_decode", "gray", bytes([0, 0, 255, 255]) + jpeg(40, 40, "L"))
put("fuzz_region_decode", "cmyk", bytes([10, 200, 100, 30]) + jpeg(32, 24, "CMYK"))


def encoded(img, fmt, **kw):
    b = io.BytesIO()
    img.save(b, format=fmt, **kw)
    return b.getvalue()


pixels = Image.new("RGB", (12, 7), (10, 200, 30))
pixels.putpixel((3, 2), (250, 0, 90))
put("fuzz_image_decode", "png_rgb", encoded(pixels, "PNG"))
put("fuzz_image_decode", "png_rgba", encoded(pixels.convert("RGBA"), "PNG"))
put("fuzz_image_decode", "png_palette", encoded(pixels.quantize(4), "PNG", transparency=1))
gray16 = Image.new("I;16", (5, 3))
gray16.putpixel((1, 1), 40000)
put("fuzz_image_decode", "png_gray16", encoded(gray16, "PNG"))
put("fuzz_image_decode", "gif", encoded(pixels.quantize(4), "GIF"))
put("fuzz_image_decode", "gif_interlaced", encoded(pixels.quantize(4), "GIF", interlace=True))
put("fuzz_image_decode", "bmp", encoded(pixels, "BMP"))
put("fuzz_image_decode", "bmp_palette", encoded(pixels.quantize(4), "BMP"))
put("fuzz_image_decode", "bmp_1bit", encoded(pixels.convert("1"), "BMP"))
put("fuzz_image_decode", "webp_lossy", encoded(pixels, "WEBP", quality=70))
put("fuzz_image_decode", "webp_lossless_alpha", encoded(pixels.convert("RGBA"), "WEBP", lossless=True))
put("fuzz_image_decode", "tiff_lzw", encoded(pixels, "TIFF", compression="tiff_lzw"))
put("fuzz_image_decode", "tiff_gray", encoded(pixels.convert("L"), "TIFF"))
put("fuzz_image_decode", "ppm", encoded(pixels, "PPM"))
exif = pixels.getexif()
exif[0x0112] = 6
put("fuzz_image_decode", "jpeg_exif_orientation", encoded(pixels, "JPEG", exif=exif.tobytes()))
put("fuzz_image_decode", "pgm", encoded(pixels.convert("L"), "PPM"))
put("fuzz_image_decode", "jpeg", jpeg(8, 8))
ex = spec.imagenet_example(small, 3, 8, 16, "a.JPEG", "n00000001", "thing", [(0.1, 0.2, 0.3, 0.4)])
ser = ex.SerializeToString(deterministic=True)
put("fuzz_example", "imagenet", ser)
put("fuzz_tfrecord", "two", spec.tfrecord_frame(ser) + spec.tfrecord_frame(b"x"))
put("fuzz_tfrecord", "empty_record", spec.tfrecord_frame(b""))
magic = spec.recordio_frame(spec.pack_header(1, 7) + b"abcd" + spec._MAGIC_BYTES + b"efgh")
put("fuzz_recordio", "split", magic + spec.recordio_frame(spec.pack_header(0, 1, labels=[1.0, 2.0]) + small))
put("fuzz_index", "tf", b"0 100\n100 20\n")
put("fuzz_index", "rec", b"0\t0\n1\t64\n")

# Result files as the benches write them (shapes of every command the report draws).
import json  # noqa: E402

put("fuzz_plan", "two", json.dumps({"reads": [{"bucket": "train", "key": "n01440764/x.JPEG"},
                                                 {"bucket": "train", "key": "shard-0", "offset": 4096, "length": 1048576}]}).encode())
put("fuzz_plan", "empty", json.dumps({"reads": []}).encode())
put("fuzz_plan", "pieces", json.dumps({"pieces": [{"id": "0123456789abcdef0123456789abcdef", "pool": "default",
                                                   "size": 262144, "crc": 3735928559}]}).encode())
put("fuzz_plan", "cluster_map", json.dumps({"replicas": 2, "self": "n1", "nodes": [
    {"id": "n1", "address": "127.0.0.1:9000", "state": "active", "up": True},
    {"id": "n2", "address": "[::1]:9001", "state": "smartfailed", "up": False}]}).encode())
put("fuzz_plan", "inventory", json.dumps(["0123456789abcdef0123456789abcdef", "ab.c"]).encode())
put("fuzz_plan", "block_slice", b"blocks/0123456789abcdef0123456789abcdef\ncrc=7&length=10&offset=5&pool=a%20b&size=99")
# Same-host grants: 8 bytes of object size (big-endian), then the header's JSON.
put("fuzz_same_host", "two", (12 << 20).to_bytes(8, "big") + json.dumps(
    {"socket": "aquifer-42-0123456789abcdef", "token": "0123456789abcdef0123456789abcdef",
     "blocks": [[4194304, 4194304], [8388608, 4194304]]}).encode())
# POST Object forms: a piece size byte, then a multipart/form-data body (boundary xYz) with a policy.
policy = json.dumps({"expiration": "2030-01-01T00:00:00Z",
                     "conditions": [{"bucket": "bucket"}, ["starts-with", "$key", "up/"],
                                    ["content-length-range", 0, 1024], {"acl": "private"}]})
put("fuzz_post_form", "form", b"\x07" + (
    "--xYz\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\nup/${filename}\r\n"
    "--xYz\r\nContent-Disposition: form-data; name=\"acl\"\r\n\r\nprivate\r\n"
    f"--xYz\r\nContent-Disposition: form-data; name=\"policy\"\r\n\r\n{policy}\r\n"
    "--xYz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n"
    "Content-Type: text/plain\r\n\r\nbytes\r\n--xY not yet\r\n--xYz--\r\n").encode())
put("fuzz_manifest", "one", json.dumps({"aquifer_manifest": 1, "damage_rules": 1, "verified_by": "dataset pack",
                                        "created": "2026-11-26T10:55:48Z",
                                        "files": [{"name": "train-00000-of-00001", "bytes": 100, "records": 3,
                                                   "image_crc32c": [1, 4294967295, 0], "unverified": [1]}]}).encode())

series = {"interval_seconds": 1, "t": [1.0, 2.0],
          "columns": [{"name": "bench.read", "unit": "MB/s", "values": [10.0, 20.0]},
                      {"name": "disk.vda.read", "unit": "MB/s", "values": [1.0, 2.0]},
                      {"name": "cpu.user", "unit": "%", "values": [5.0, 6.0]}], "notes": []}
base = {"schema": "aquifer-result/1", "argv": ["aquifer"], "machine": {"cores": 2}, "series": series}
results = {
    "storage": {"command": "bench storage", "config": {"readers": 2},
                "summary": {"mb_per_second": 15.0, "latency": {"p50_us": 3.0, "p99_us": 9.0}}},
    "train": {"command": "bench train", "config": {"gpus": 1, "au_threshold": 0.9},
              "summary": {"images_per_second": 800.0, "au": 0.99, "au_ok": True, "verdict": "GPU-bound",
                          "stages": [{"name": "read", "threads": 1, "utilisation": 0.1}]}},
    "sweep": {"command": "bench sweep", "config": {},
              "summary": {"parameter": "readers", "metric": "mb_per_second",
                          "points": [{"label": "1", "value": 1, "metric_value": 5.0, "au": 0.5},
                                     {"label": "2", "value": 2, "metric_value": 9.0, "au": 0.4}]}},
    "size": {"command": "size", "config": {"node": "f800", "gpus": 72},
             "summary": {"nodes": 3, "nodes_exact": 2.37, "demand_mb_per_second": 5760.0,
                         "node_mb_per_second": 2430.0, "assumptions": ["a"]}},
    "cache": {"command": "model cache", "config": {},
              "summary": {"client_hit": 0.02, "storage_hit": 0.09, "storage_media": 0.91,
                          "measured": {"client_hit": 0.5}}},
}
for name, r in results.items():
    put("fuzz_report", name, json.dumps({**base, **r}).encode())

# S3 request bodies: what boto3 and s3cmd send, and near misses.
put("fuzz_s3_xml", "complete",
    b'<?xml version="1.0" encoding="UTF-8"?>\n<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
    b'<Part><ETag>"0123456789abcdef0123456789abcdef"</ETag><PartNumber>1</PartNumber></Part>'
    b'<Part><ETag>&quot;fedcba98765432100123456789abcdef&quot;</ETag><PartNumber>2</PartNumber></Part>'
    b'</CompleteMultipartUpload>')
put("fuzz_s3_xml", "delete",
    b'<Delete><Quiet>true</Quiet><Object><Key>a/b.tfrecord</Key></Object><Object><Key>x&amp;y</Key></Object></Delete>')
put("fuzz_s3_xml", "lifecycle",
    b"<LifecycleConfiguration><Rule><ID>t</ID><Filter><Prefix>tmp/</Prefix></Filter><Status>Enabled</Status>"
    b"<AbortIncompleteMultipartUpload><DaysAfterInitiation>3</DaysAfterInitiation></AbortIncompleteMultipartUpload>"
    b"</Rule></LifecycleConfiguration>")
put("fuzz_s3_xml", "doctype", b'<!DOCTYPE d [<!ENTITY a "aaaa">]><Delete><Object><Key>&a;</Key></Object></Delete>')

# Raw requests to the node, as S3 clients send them (anonymous), and broken ones.
reqs = {
    "get": b"GET /bkt/obj HTTP/1.1\r\nHost: n\r\nRange: bytes=10-200\r\n\r\n",
    "list": b"GET /bkt?list-type=2&prefix=o&delimiter=%2F&encoding-type=url HTTP/1.1\r\nHost: n\r\n\r\n",
    "put": b"PUT /bkt/new HTTP/1.1\r\nHost: n\r\nContent-Length: 5\r\nx-amz-meta-a: b\r\n\r\nhello",
    "put-meta": b"PUT /bkt/m HTTP/1.1\r\nHost: n\r\nContent-Length: 1\r\nx-amz-meta-a: =?UTF-8?B?Y2Fmw6k=?= x\r\n"
                b"x-amz-meta-b: =?iso-8859-1?Q?caf=E9?=\r\nx-amz-meta-c: caf\xe9\r\n\r\nz",
    "lifecycle": b"PUT /bkt?lifecycle HTTP/1.1\r\nHost: n\r\nContent-Length: 231\r\n\r\n<LifecycleConfiguration><Rule>"
                 b"<Filter><Prefix>t/</Prefix></Filter><Status>Enabled</Status><AbortIncompleteMultipartUpload>"
                 b"<DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>"
                 b"</LifecycleConfiguration>",
    "chunked": b"PUT /bkt/c HTTP/1.1\r\nHost: n\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    "awschunked": b"PUT /bkt/a HTTP/1.1\r\nHost: n\r\nContent-Encoding: aws-chunked\r\n"
                  b"x-amz-content-sha256: STREAMING-UNSIGNED-PAYLOAD-TRAILER\r\nx-amz-decoded-content-length: 3\r\n"
                  b"x-amz-trailer: x-amz-checksum-crc32\r\nContent-Length: 47\r\n\r\n"
                  b"3\r\nabc\r\n0\r\nx-amz-checksum-crc32:NSRBwg==\r\n\r\n",
    "copy": b"PUT /bkt/copy HTTP/1.1\r\nHost: n\r\nx-amz-copy-source: /bkt/obj\r\n"
            b"x-amz-metadata-directive: REPLACE\r\nContent-Length: 0\r\n\r\n",
    "multipart": b"POST /bkt/mp?uploads HTTP/1.1\r\nHost: n\r\nContent-Length: 0\r\n\r\n",
    "delete": b"POST /bkt?delete HTTP/1.1\r\nHost: n\r\nContent-Length: 61\r\n\r\n"
              b"<Delete><Object><Key>obj</Key></Object><Quiet>true</Quiet></Delete>",
    "tagging": b"PUT /bkt/obj?tagging HTTP/1.1\r\nHost: n\r\nContent-Length: 19\r\n\r\n<Tagging></Tagging>",
    "pipelined": b"HEAD /bkt/obj HTTP/1.1\r\n\r\nGET /bkt/obj?partNumber=1 HTTP/1.1\r\nIf-None-Match: *\r\n\r\n",
    "garbage": b"GET /\x00\xff HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
}
for name, data in reqs.items():
    put("fuzz_s3_request", name, data)

put("fuzz_layout", "replicated",
    b'{"size":300,"version":2,"etag":"\\"x\\"","blocks":[{"id":"a","size":100,"crc32c":1,"pool":"p",'
    b'"addresses":["127.0.0.1:1"]},{"id":"b","size":200,"crc32c":2,"pool":"p","addresses":[]}]}')
put("fuzz_layout", "erasure_coded",
    b'{"size":10,"version":1,"etag":"","blocks":[{"id":"c","size":10,"crc32c":3,"pool":"p","addresses":[],"k":4,'
    b'"fragments":[{"id":"f0","size":3,"crc32c":0,"addresses":["h:1"]},{"id":"f1","size":3,"crc32c":0},'
    b'{"id":"f2","size":3,"crc32c":0},{"id":"f3","size":3,"crc32c":0},{"id":"p0","size":3,"crc32c":0}]}]}')
put("fuzz_layout", "block_list",
    b'[{"id":"0123456789abcdef0123456789abcdef","size":1000,"crc32c":5,"pool":"default",'
    b'"nodes":["n1","n2","n3"],"ec":[2,1],"fcrc":[1,2,3]},{"id":"x","size":1,"crc32c":0,"pool":"d"}]')

# A node's /stats, as a node in a cluster with every section writes it.
put("fuzz_node_stats", "cluster_node", json.dumps({
    "uptime_seconds": 12.5, "client_errors": 1, "server_errors": 0, "errors_by_status": {"404": 1},
    "bytes_in": 4096, "bytes_out": 1 << 30, "bodies": {"resumed": 1, "cut": 0}, "denied": 0,
    "ops": {"get": {"requests": 9, "client_errors": 1, "server_errors": 0, "bytes_in": 0, "bytes_out": 900,
                    "latency": {"count": 9, "mean_us": 120.5, "p50_us": 100, "p90_us": 200, "p99_us": 300,
                                "p999_us": 300, "max_us": 310}}},
    "cache": {"policy": "tinylfu", "capacity_bytes": 1 << 30, "bytes": 5, "entries": 1, "hits": 3, "misses": 1,
              "hit_ratio": 0.75, "evicted": 0, "rejected": 0},
    "staging": {"planned": 4, "staged": 4, "hits": 2, "late_hits": 1},
    "reclaim": {"freed": 1, "removed": 1, "pending": 0, "readers": 0},
    "pools": [{"name": "default", "blocks": 3, "bytes": 300, "logical_bytes": 600, "ratio": 0.5, "media": "ssd",
               "compression": "zstd:3", "dedup": True, "size_bytes": 1e12, "available_bytes": 5e11,
               "dedup_writes": {"written": 2, "found": 1, "hash_seconds": 0.01}}],
    "machine": {"cpu.user": 12.0, "net.eth0.rx": 1.5, "disk.sda.write": None},
    "scrub": {"enabled": True, "passes": 1, "objects_at_risk": ["b/k"], "quarantine": [{"path": "q/x", "bytes": 9}],
              "findings": [{"object": "b/k", "piece": "x", "problem": "missing", "also": ["b/j"]}]},
    "same_host": None, "uploads": {"in_progress": 0, "expiry_seconds": 604800, "last_error": ""},
    "connections": {"open": 3, "accepted": 40, "requests": 90, "header_timeouts": 2, "bad_heads": 1},
    "cluster": {"node": "n1", "replicas": 2, "policy": "ec:4+2", "bucket_policies": {"b": "replicas:3"},
                "blocks": {"local_reads": 5}, "repair": {"fully_protected": True, "last_error": ""}}}).encode())
put("fuzz_node_stats", "wrong_types", b'{"cache": {"hits": "3"}, "pools": [{"bytes": -1}], "ops": []}')

# Values echoed into response headers: byte 0 picks the carrier.
for i, v in enumerate([b"text/plain", b"attachment; filename=\"a b.txt\"", b"max-age=60", b"a\r\nSet-Cookie: x",
                       b"caf\xc3\xa9", b"=?UTF-8?B?Y2Fmw6k=?="]):
    put("fuzz_header_echo", f"v{i}", bytes([i]) + v)
    put("fuzz_header_echo", f"s{i}", bytes([6 + i % 7]) + v)

# WebDataset tar shards as Python's tarfile writes them, in its three formats.
import io as _io  # noqa: E402
import tarfile  # noqa: E402

for fmt_name, fmt in (("ustar", tarfile.USTAR_FORMAT), ("gnu", tarfile.GNU_FORMAT), ("pax", tarfile.PAX_FORMAT)):
    buf = _io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for key, label in (("a/000001", 3), ("b/" + "long" * 30 + "x", 7)):
            for ext, data in (("jpg", small), ("cls", str(label).encode()), ("json", b'{"k": 1}')):
                if fmt == tarfile.USTAR_FORMAT and len(key) > 90:
                    continue
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                t.addfile(info, _io.BytesIO(data))
    put("fuzz_tar", fmt_name, buf.getvalue())

# Block files: byte 0 odd: the payload is data to encode (and flip a byte of);
# even: the payload is a block file, here a plain one with good checksums.
text = b"".join(b"line %d of a block that compresses\n" % i for i in range(40))
put("fuzz_block_file", "lz4", bytes([1, 0, 40, 0, 4]) + text)
put("fuzz_block_file", "zstd", bytes([1, 1, 7, 1, 128]) + text)
put("fuzz_block_file", "noise", bytes([1, 3, 0, 0, 0]) + bytes((i * 7919) % 251 for i in range(6000)))
crc = crcmod.predefined.mkCrcFun("crc-32c")
body = b"plain block bytes"
head = b"AQBLK001" + len(body).to_bytes(8, "little") + crc(body).to_bytes(4, "little")
put("fuzz_block_file", "plain", bytes([0, 0, 0, 0, 0]) + head + crc(head).to_bytes(4, "little") + body)
