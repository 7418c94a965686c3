#!/usr/bin/python3
"""Generated image folders with every kind of name and file the OS allows,
given to every command that reads folders: no crash, no hang, valid JSON,
and every file named in a report is one that exists, byte for byte.

Names: non-UTF-8 bytes (Latin-1, cut UTF-8 sequences), spaces, tabs,
newlines, '%', leading '-', quotes, backslashes, 255-byte names, names
that look like shard names. Files: JPEGs, zero-byte and cut files, PNGs
named .jpg, directories named .jpg, FIFOs, sockets, symbolic links
(dangling, to a file, a loop). Each round's seed is printed; rerun one with
--seed N.

usage: odd_folders_test.py path/to/aquifer [--rounds N] [--seed N]"""
import io
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile

from PIL import Image

AQUIFER = None
TIMEOUT = 120


def jpeg(seed, w=48, h=32):
    img = Image.new("RGB", (w, h), ((seed * 37) % 256, (seed * 91) % 256, (seed * 13) % 256))
    out = io.BytesIO()
    img.save(out, "JPEG", quality=90)
    return out.getvalue()


def png(seed):
    out = io.BytesIO()
    Image.new("RGB", (20, 20), (seed % 256, 9, 9)).save(out, "PNG")
    return out.getvalue()


ODD = [b"caf\xe9", b"\xe2\x82", b"sp ace", b"tab\there", b"new\nline", b"100%", b"%25", b"-dash",
       b"qu'ote\"", b"back\\slash", b"\xff\xfe", b"train-00000-of-00001", "ünï".encode(), b"x" * 200]


def name(rng, ext=b".jpg"):
    base = rng.choice(ODD) + str(rng.randrange(1000)).encode()
    if rng.random() < 0.1:
        base = base[:255 - len(ext)].ljust(255 - len(ext), b"y")
    return base + ext


def build(root, rng):
    """A folder of 2-4 classes with odd files; returns the socket objects to keep open."""
    os.makedirs(root)
    keep = []
    for c in range(rng.randint(2, 4)):
        cls = os.path.join(root, rng.choice(ODD) + b"_class%d" % c)
        os.makedirs(cls, exist_ok=True)
        for i in range(rng.randint(3, 8)):
            with open(os.path.join(cls, name(rng)), "wb") as fh:
                fh.write(jpeg(rng.randrange(10**6)))
        kinds = ["empty", "cut", "png", "dir", "fifo", "socket", "dangling", "link", "loop", "text", "nested"]
        for kind in rng.sample(kinds, rng.randint(3, len(kinds))):
            p = os.path.join(cls, name(rng, b".JPEG"))
            if kind == "empty":
                open(p, "wb").close()
            elif kind == "cut":
                with open(p, "wb") as fh:
                    fh.write(jpeg(1)[:rng.randint(1, 300)])
            elif kind == "png":
                with open(p, "wb") as fh:
                    fh.write(png(rng.randrange(256)))
            elif kind == "dir":
                os.makedirs(p, exist_ok=True)
            elif kind == "fifo":
                os.mkfifo(p)
            elif kind == "socket":
                s = socket.socket(socket.AF_UNIX)
                short = os.path.join(cls, b"s%d.jpg" % rng.randrange(1000))
                try:
                    s.bind(short)
                    keep.append(s)
                except OSError:  # a path too long for a socket address
                    s.close()
            elif kind == "dangling":
                os.symlink(b"/nonexistent/" + name(rng), p)
            elif kind == "link":
                target = next(os.path.join(cls, f) for f in os.listdir(cls) if f.endswith(b".jpg"))
                os.symlink(target, p)
            elif kind == "loop":
                os.symlink(cls, os.path.join(cls, b"loop"))
            elif kind == "text":
                with open(os.path.join(cls, name(rng, b".txt")), "wb") as fh:
                    fh.write(b"not an image\n")
            elif kind == "nested":
                sub = os.path.join(cls, rng.choice(ODD))
                os.makedirs(sub, exist_ok=True)
                with open(os.path.join(sub, name(rng)), "wb") as fh:
                    fh.write(jpeg(7))
    return keep


def run(*args):
    """The command's result; fails on a signal, a hang or exit codes other than 0 and 1."""
    cmd = [AQUIFER, *[os.fsencode(a) if isinstance(a, str) else a for a in args]]
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"hung over {TIMEOUT} s: {cmd}")
    if p.returncode not in (0, 1):
        raise AssertionError(f"exit {p.returncode} from {cmd}:\n{p.stderr.decode(errors='replace')[-2000:]}")
    return p


def files_named(report):
    """Every value of a "file" or "path" key in a report."""
    out = []
    if isinstance(report, dict):
        for k, v in report.items():
            if k in ("file", "path") and isinstance(v, str):
                out.append(v)
            else:
                out.extend(files_named(v))
    elif isinstance(report, list):
        for v in report:
            out.extend(files_named(v))
    return out


def check_json(p, what, cwd):
    try:
        report = json.loads(p.stdout)
    except ValueError as e:
        raise AssertionError(f"{what}: not JSON ({e}): {p.stdout[:300]!r}")
    for f in files_named(report):
        raw = os.fsencode(f)  # lone surrogates back to the raw bytes
        if not os.path.lexists(os.path.join(os.fsencode(cwd), raw)):
            raise AssertionError(f"{what}: names {f!r}, which does not exist as {raw!r}")
    return report


def one_round(seed, tmp):
    rng = random.Random(seed)
    root = os.path.join(os.fsencode(tmp), b"raw%d" % seed)
    keep = build(root, rng)
    try:
        for fmt in ("tfrecord", "recordio", "wds"):
            out = os.path.join(os.fsencode(tmp), b"%s%d" % (fmt.encode(), seed))
            p = run("dataset", "pack", root, "-o", out, "-f", fmt, "--on-error", "skip", "--shards", "2",
                    "--no-progress", "--json")
            report = check_json(p, f"pack -f {fmt}", tmp)
            if p.returncode == 0:
                assert report["images"] > 0, report
                v = run("dataset", "verify", out, "--decode", "--json", "--no-progress")
                check_json(v, f"verify {fmt}", tmp)
                assert v.returncode == 0, v.stdout[-2000:]
        check_json(run("dataset", "verify", root, "--decode", "--json", "--max-problems", "1000", "--no-progress"),
                   "verify folder", tmp)
        check_json(run("dataset", "inspect", root, "--json", "-n", "0"), "inspect", tmp)
        b = run("bench", "pipeline", root, "--on-error", "skip", "--batch", "2", "--size", "32", "--json",
                "--no-progress")
        check_json(b, "bench pipeline", tmp)
    finally:
        for s in keep:
            s.close()


def main():
    global AQUIFER
    args = sys.argv[1:]
    rounds, seed = 4, None
    if "--rounds" in args:
        i = args.index("--rounds")
        rounds = int(args[i + 1])
        del args[i:i + 2]
    if "--seed" in args:
        i = args.index("--seed")
        seed = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    AQUIFER = os.path.abspath(args[0])
    seeds = [seed] if seed is not None else [random.SystemRandom().randrange(10**6) for _ in range(rounds)]
    tmp = tempfile.mkdtemp(prefix="aq_odd_")
    failed = 0
    try:
        for s in seeds:
            try:
                one_round(s, tmp)
                print(f"round seed {s}: ok")
            except AssertionError as e:
                failed += 1
                print(f"round seed {s}: FAILED (rerun with --seed {s}): {e}")
    finally:
        shutil.rmtree(tmp)
    print(f"odd_folders: {len(seeds) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
