#!/usr/bin/python3
"""No writing command writes through a link planted where it writes.

For each command that writes beside user data (synth, pack in every
format, verify --decode's manifest, resize, expand): run it once into a
clean place and note every file it made; then, in a fresh place, plant a
symbolic link at each of those names and at each name with `.partial` and
`.tmp` added (the temporaries), every link pointing at a file of its own
outside the dataset, and run the command again. It must succeed (a link is
replaced by the file, never followed) or fail naming the path; either way
no file outside changes.

usage: planted_links_test.py path/to/aquifer
"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
check = s3lib.Checks()
tmp = tempfile.mkdtemp(prefix="aq_links_")


aq = s3lib.Cli(AQ, suffix=["--no-progress"])


def files_under(d):
    out = set()
    for root, _, names in os.walk(d):
        for n in names:
            out.add(os.path.relpath(os.path.join(root, n), d))
    return out


def snapshot(d):
    return {p: open(os.path.join(d, p), "rb").read() for p in files_under(d)}


try:
    src = os.path.join(tmp, "src")
    r = aq("dataset", "synth", "--out", src, "--images", "24", "--classes", "3")
    assert r.returncode == 0, r.stderr
    tf = os.path.join(tmp, "tf")
    r = aq("dataset", "pack", src, "--out", tf, "--format", "tfrecord", "--shards", "2")
    assert r.returncode == 0, r.stderr

    # name: (command writing into OUT, where OUT's inputs come from). A
    # command whose output is its input (verify) copies the input first.
    cases = {
        "synth": (lambda out: aq("dataset", "synth", "--out", out, "--images", "12", "--classes", "2", "--overwrite"),
                  None),
        "pack tfrecord": (lambda out: aq("dataset", "pack", src, "--out", out, "--format", "tfrecord",
                                         "--shards", "2", "--overwrite"), None),
        "pack recordio": (lambda out: aq("dataset", "pack", src, "--out", out, "--format", "recordio",
                                         "--shards", "2", "--overwrite"), None),
        "pack webdataset": (lambda out: aq("dataset", "pack", src, "--out", out, "--format", "wds",
                                           "--shards", "2", "--overwrite"), None),
        "verify --decode (folder)": (lambda out: aq("dataset", "verify", out, "--decode"), src),
        "verify --decode (tfrecord)": (lambda out: aq("dataset", "verify", out, "--decode"), tf),
        "resize": (lambda out: aq("dataset", "resize", tf, "--out", out, "--scale", "0.5", "--overwrite"), None),
        "expand": (lambda out: aq("dataset", "expand", tf, "--out", out, "--copies", "2"), None),
    }
    for name, (run, inputs) in cases.items():
        clean = os.path.join(tmp, "clean-" + name.replace(" ", "_"))
        if inputs:
            shutil.copytree(inputs, clean)
        before = files_under(clean) if inputs else set()
        r = run(clean)
        if not check(r.returncode == 0, f"{name}: runs clean ({r.stderr.strip()[-300:]})"):
            continue
        made = files_under(clean) - before
        if inputs:  # verify rewrites what it made (the manifest) and may rewrite inputs' side files
            made = files_under(clean)
        planted = os.path.join(tmp, "planted-" + name.replace(" ", "_"))
        victims = os.path.join(tmp, "victims-" + name.replace(" ", "_"))
        os.makedirs(victims)
        if inputs:
            shutil.copytree(inputs, planted)
        else:
            os.makedirs(planted)
        n = 0
        for rel in sorted(made):
            for suffix in ("", ".partial", ".tmp"):
                at = os.path.join(planted, rel + suffix)
                if os.path.lexists(at) and suffix == "" and inputs:
                    continue  # an input of the command: links only where it writes
                os.makedirs(os.path.dirname(at), exist_ok=True)
                victim = os.path.join(victims, f"v{n}")
                with open(victim, "w") as f:
                    f.write(f"victim {n}: must not change\n")
                if os.path.lexists(at):
                    os.unlink(at)
                os.symlink(victim, at)
                n += 1
        before_v = snapshot(victims)
        r = run(planted)
        after_v = snapshot(victims)
        changed = [p for p in before_v if after_v.get(p) != before_v[p]]
        check(not changed and set(after_v) == set(before_v),
              f"{name}: {n} links planted, files outside changed: {changed[:5]}")
        check(r.returncode == 0 or "planted" in r.stderr or planted in r.stderr,
              f"{name}: succeeds, or fails naming the path: {r.stderr.strip()[-300:]}")
        if r.returncode == 0:
            links_left = [p for p in made if os.path.islink(os.path.join(planted, p))]
            check(not links_left, f"{name}: every output is a file, not the planted link: {links_left[:5]}")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
