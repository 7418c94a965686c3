#!/usr/bin/python3
"""Writes small seed inputs for the fuzz targets (valid records of every
format, built with the independent implementations in tests/compat/spec.py).
usage: make_seeds.py OUTDIR"""
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
ex = spec.imagenet_example(small, 3, 8, 16, "a.JPEG", "n00000001", "thing", [(0.1, 0.2, 0.3, 0.4)])
ser = ex.SerializeToString(deterministic=True)
put("fuzz_example", "imagenet", ser)
put("fuzz_tfrecord", "two", spec.tfrecord_frame(ser) + spec.tfrecord_frame(b"x"))
put("fuzz_tfrecord", "empty_record", spec.tfrecord_frame(b""))
magic = spec.recordio_frame(spec.pack_header(1, 7) + b"abcd" + spec._MAGIC_BYTES + b"efgh")
put("fuzz_recordio", "split", magic + spec.recordio_frame(spec.pack_header(0, 1, labels=[1.0, 2.0]) + small))
put("fuzz_index", "tf", b"0 100\n100 20\n")
put("fuzz_index", "rec", b"0\t0\n1\t64\n")
