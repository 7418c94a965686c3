#!/usr/bin/python3
"""aquifer mount against a real node: cp -r and tar round trips, a 10,000
entry directory, Python reads of TFRecord shards, aquifer bench storage and
bench pipeline (TFRecord and WebDataset shards) and fio through the mount, what a write-once store refuses
(with the right errno, the object untouched), a file stored only at its
opener's close (a child's close of an inherited descriptor stores nothing),
a full spool disk (ENOSPC from write and close, nothing stored, the previous
version kept), an object changed behind the
mount, a node killed under a reader (EIO, the mount stays up and recovers),
unmount under load, and a killed mount process cleared by aquifer umount.
Skips (exit 77) where /dev/fuse cannot be used.
usage: mount_test.py path/to/aquifer"""
import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402
from s3lib import Checks, boto  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
s3lib.require_fuse()

check = Checks()
tmp = tempfile.mkdtemp(prefix="aq_mount_")
creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
mnt = os.path.join(tmp, "mnt")
os.mkdir(mnt)


def run(*args, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, **kw)


def wait_for(pred, timeout, step=0.1):
    end = time.time() + timeout
    while time.time() < end:
        try:
            if pred():
                return True
        except OSError:
            pass
        time.sleep(step)
    return False


class Mount:
    def __init__(self, url, *extra, at=None, env=None):
        at = at or mnt
        self.stats = os.path.join(tmp, "mount-stats.json")
        self.log = open(os.path.join(tmp, "mount.log"), "a")
        self.p = subprocess.Popen([AQ, "--credentials", creds, "mount", "-f", url, at, "--stats-file", self.stats,
                                   *extra], stdout=self.log, stderr=self.log, env=env)
        if not wait_for(lambda: os.path.ismount(at), 15):
            self.p.kill()
            raise SystemExit("the mount did not appear: " + open(os.path.join(tmp, "mount.log")).read())

    def counters(self):
        time.sleep(1.2)  # rewritten every second
        with open(self.stats) as f:
            return json.load(f)

    def stop(self, timeout=20):
        self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            return None


def md5(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def errno_of(fn):
    try:
        fn()
    except OSError as e:
        return e.errno
    return 0


node = m = None
try:
    node = s3lib.Node(AQ, os.path.join(tmp, "node"), credentials=creds)
    url = f"aquifer://127.0.0.1:{node.port}"
    s3 = boto(node.port)
    s3.create_bucket(Bucket="data")

    # Local data: a JPEG folder and TFRecord shards of it.
    src = os.path.join(tmp, "src")
    r = run(AQ, "dataset", "synth", "--out", os.path.join(src, "images"), "--classes", "4", "--images", "96",
            "--profile", "small", "--no-progress")
    assert r.returncode == 0, r.stderr
    r = run(AQ, "dataset", "pack", os.path.join(src, "images"), "--out", os.path.join(src, "tf"), "--format",
            "tfrecord", "--shards", "3", "--no-progress")
    assert r.returncode == 0, r.stderr
    r = run(AQ, "dataset", "pack", os.path.join(src, "images"), "--out", os.path.join(src, "wds"), "--format", "wds",
            "--shards", "2", "--no-progress")
    assert r.returncode == 0, r.stderr
    with open(os.path.join(src, "big.bin"), "wb") as f:
        f.write(os.urandom(21 << 20))  # several 4 MiB chunks, a sequential read ahead

    # A dead node is EIO after 3 s of failing over, not the default 60.
    metrics_port = s3lib.free_port()
    # Reads through the node, as from another host (memfds of what the node
    # holds in RAM, no block files): a node killed under a reader is an EIO.
    m = Mount(url + "/data", "--attr-ttl", "1", "--retry-deadline", "3", "--metrics", f"127.0.0.1:{metrics_port}",
              env=dict(os.environ, AQUIFER_SAME_HOST_FILES="0"))
    check(run("mount").stdout.count(f"on {mnt} type fuse.aquifer") == 1, "mounted as fuse.aquifer")

    # ---- round trips ----
    r = run("cp", "-r", src, os.path.join(mnt, "copy"))
    check(r.returncode == 0, f"cp -r into the mount: {r.stderr}")
    r = run("diff", "-r", src, os.path.join(mnt, "copy"))
    check(r.returncode == 0, f"diff -r of the copy: {r.stdout[:300]}")
    got = s3.get_object(Bucket="data", Key="copy/big.bin")["Body"].read()
    check(hashlib.md5(got).hexdigest() == md5(os.path.join(src, "big.bin")), "S3 sees what cp wrote (21 MiB)")
    r = subprocess.run(f"tar -C {src} -cf - . | tar -C {mnt} --one-top-level=untar -xf -", shell=True,
                       capture_output=True, text=True)
    check(r.returncode == 0, f"tar x into the mount: {r.stderr[-300:]}")
    check(run("diff", "-r", src, os.path.join(mnt, "untar")).returncode == 0, "diff -r of the untarred tree")

    # ---- Python reads TFRecord shards through the mount ----
    shards = sorted(n for n in os.listdir(os.path.join(mnt, "copy", "tf")) if n.startswith("train-"))
    check(len(shards) == 3, f"three shards listed: {shards}")
    same = all(open(os.path.join(mnt, "copy", "tf", n), "rb").read() ==
               open(os.path.join(src, "tf", n), "rb").read() for n in shards)
    check(same, "open().read() of each shard gives its bytes")
    with open(os.path.join(mnt, "copy", "big.bin"), "rb") as f:
        f.seek(13_000_001)
        part = f.read(100_000)
    with open(os.path.join(src, "big.bin"), "rb") as f:
        f.seek(13_000_001)
        check(part == f.read(100_000), "a random read in the middle")
    st = os.stat(os.path.join(mnt, "copy", "big.bin"))
    check(st.st_size == 21 << 20 and abs(st.st_mtime - time.time()) < 600, f"stat size and mtime: {st}")

    # ---- a read plan through the mount's plan file, as aquifer.hint writes it ----
    images = os.path.join(mnt, "copy", "images")
    files = sorted(os.path.join(d, n) for d, _, ns in os.walk(images) for n in ns)
    before = node.stats().get("staging", {})
    with open(os.path.join(mnt, ".aquifer-plan"), "w") as plan:
        plan.write("".join(os.path.relpath(f, mnt) + "\n" for f in reversed(files)))
    staged = wait_for(lambda: node.stats()["staging"]["staged"] + node.stats()["staging"]["resident"] -
                      before.get("staged", 0) - before.get("resident", 0) >= len(files), 10)
    check(staged, f"the node staged the {len(files)} planned files: {node.stats().get('staging')}")
    same = all(open(f, "rb").read() == open(os.path.join(src, os.path.relpath(f, os.path.join(mnt, "copy"))),
                                             "rb").read() for f in reversed(files))
    after = node.stats()["staging"]
    check(same, "the planned files read back whole")
    check(after["hits"] + after["late_hits"] + after["resident"] - before.get("hits", 0) - before.get("late_hits", 0) -
          before.get("resident", 0) >= len(files), f"every planned file was served from its staged copy: {after}")
    check(".aquifer-plan" not in os.listdir(mnt), "the plan file is not listed")
    check(errno_of(lambda: open(os.path.join(mnt, ".aquifer-plan")).read()) == errno.EACCES,
          "the plan file is not for reading")

    def plan_line(line):
        with open(os.path.join(mnt, ".aquifer-plan"), "w") as f:
            f.write(line)

    check(errno_of(lambda: plan_line("../outside\n")) == errno.EINVAL, "a plan line outside the mount: EINVAL")
    check(m.counters()["planned"] >= len(files), "the mount counts the planned reads")

    # ---- the mount's /metrics: the same counters, Prometheus' conventions ----
    import urllib.request
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name.split("{")[0]] = values.get(name.split("{")[0], 0) + float(value)
    check(values.get("aquifer_mount_read_bytes_total", 0) > 0 and
          values.get("aquifer_mount_planned_reads_total", 0) >= len(files) and
          values.get("aquifer_mount_read_duration_seconds_count", 0) > 0,
          f"/metrics has the mount's reads, plans and read latency: {sorted(values)[:8]}")
    check(f'mountpoint="{os.path.realpath(mnt)}"' in text, "series carry the mountpoint")
    if shutil.which("promtool"):
        r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        check(r.returncode == 0 and not (r.stdout + r.stderr).strip(),
              f"promtool check metrics on the mount's /metrics: {(r.stdout + r.stderr)[-400:]}")

    # ---- benches and fio through the mount ----
    r = run(AQ, "bench", "storage", os.path.join(mnt, "copy", "tf"), "--readers", "2", "--duration", "2", "--ramp",
            "0", "--json", "--no-progress")
    ok = r.returncode == 0 and json.loads(r.stdout)["summary"]["mb_per_second"] > 0
    check(ok, f"aquifer bench storage through the mount: {r.stderr[-300:]}")
    r = run(AQ, "bench", "pipeline", os.path.join(mnt, "copy", "tf"), "--batch", "16", "--json", "--no-progress")
    res = json.loads(r.stdout) if r.returncode == 0 else {}
    ok = res.get("images", 0) >= 48 and res.get("bad_samples") == 0  # less the warm-up batches
    check(ok, f"aquifer bench pipeline through the mount: {r.stdout[-300:]} {r.stderr[-300:]}")
    r = run(AQ, "bench", "pipeline", os.path.join(mnt, "copy", "wds"), "--batch", "16", "--json", "--no-progress")
    res = json.loads(r.stdout) if r.returncode == 0 else {}
    ok = res.get("images", 0) >= 48 and res.get("bad_samples") == 0
    check(ok, f"WebDataset shards through the mount: {r.stdout[-300:]} {r.stderr[-300:]}")
    if shutil.which("fio"):
        r = run("fio", "--name=mnt", "--readonly", "--rw=read", "--bs=1M", "--numjobs=2", "--group_reporting",
                f"--filename={os.path.join(mnt, 'copy', 'big.bin')}", "--size=21M", "--output-format=json")
        ok = r.returncode == 0 and json.loads(r.stdout)["jobs"][0]["read"]["io_bytes"] >= 21 << 20
        check(ok, f"fio reads the mount: {r.stderr[-300:]}")

    # ---- a large directory ----
    # Uploaded by aquifer cp (C++, 16 at a time): 10,000 PUTs from boto3 cost
    # minutes of client CPU on a 2-core machine. 1,200 under the sanitizers:
    # still two listing pages of 1,000, the same code paths, every request
    # several times slower.
    entries = 1200 if os.environ.get("AQ_SANITIZED") else 10000
    many = os.path.join(tmp, "many")
    os.mkdir(many)
    for i in range(entries):
        with open(os.path.join(many, f"f{i:05d}"), "wb") as f:
            f.write(b"x")
    r = run(AQ, "--credentials", creds, "cp", "-r", "-j", "16", many, f"{url}/data/many")
    check(r.returncode == 0, f"aquifer cp -r of {entries:,} files: {r.stderr[-300:]}")
    shutil.rmtree(many)
    t0 = time.time()
    r = run("ls", "-l", os.path.join(mnt, "many"))
    took = time.time() - t0
    check(r.returncode == 0 and len(r.stdout.splitlines()) == entries + 1,
          f"ls -l of {entries:,} entries: {r.stderr[:200]}")
    check(took < 30, f"ls -l of {entries:,} entries took {took:.1f} s")
    print(f"ls -l of {entries:,} entries: {took:.2f} s")

    # ---- keys no file name can stand for: not shown, but said ----
    s3.put_object(Bucket="data", Key="odd/a//x", Body=b"x")
    s3.put_object(Bucket="data", Key="odd/a/ok", Body=b"x")
    check(os.listdir(f"{mnt}/odd/a") == ["ok"], f"a key with an empty segment is not shown: {os.listdir(f'{mnt}/odd/a')}")
    log = open(os.path.join(tmp, "mount.log")).read()
    check("odd/a//" in log and "not shown" in log, "... and the mount's log says so")
    check(m.counters()["unnameable"] >= 1, "... and counts it")
    for k in ("odd/a//x", "odd/a/ok"):
        s3.delete_object(Bucket="data", Key=k)

    # ---- writes that work ----
    r = subprocess.run(f"echo hello > {mnt}/shell.txt && echo again >> /dev/null", shell=True, capture_output=True,
                       text=True)
    check(r.returncode == 0 and open(f"{mnt}/shell.txt").read() == "hello\n", f"a shell redirect: {r.stderr}")
    os.rename(f"{mnt}/shell.txt", f"{mnt}/renamed.txt")
    check(s3.get_object(Bucket="data", Key="renamed.txt")["Body"].read() == b"hello\n"
          and not os.path.exists(f"{mnt}/shell.txt"), "rename of a file")
    os.mkdir(f"{mnt}/empty")
    check(os.path.isdir(f"{mnt}/empty") and os.listdir(f"{mnt}/empty") == [], "mkdir makes an empty directory")
    check(errno_of(lambda: os.rmdir(f"{mnt}/copy")) == errno.ENOTEMPTY, "rmdir of a full directory: ENOTEMPTY")
    os.rmdir(f"{mnt}/empty")
    check(not os.path.exists(f"{mnt}/empty"), "rmdir of an empty one")
    r = run("mv", f"{mnt}/untar", f"{mnt}/moved")
    check(r.returncode == 0 and run("diff", "-r", src, f"{mnt}/moved").returncode == 0, "mv of a directory")
    os.unlink(f"{mnt}/renamed.txt")
    check(s3lib.error_code(lambda: s3.head_object(Bucket="data", Key="renamed.txt")) == "404",
          "unlink removes the object")
    check(not os.path.exists(f"{mnt}/renamed.txt"), "unlink removes the name")
    with open(f"{mnt}/t.txt", "w") as f:
        f.write("0123456789")
    os.truncate(f"{mnt}/t.txt", 0)
    check(os.path.getsize(f"{mnt}/t.txt") == 0 and
          s3.get_object(Bucket="data", Key="t.txt")["Body"].read() == b"", "truncate to 0 replaces the object")

    # ---- a file is stored at its opener's close, never cut short ----
    # A child inherits the descriptor and exits while the parent still
    # writes: the child's close stores nothing; the previous version stays
    # until the parent's close stores the whole file.
    s3.put_object(Bucket="data", Key="inherit.bin", Body=b"old version")
    half = os.urandom(3 << 20)
    fd = os.open(f"{mnt}/inherit.bin", os.O_WRONLY | os.O_TRUNC)
    os.write(fd, half)
    pid = os.fork()
    if pid == 0:
        os.close(fd)
        os._exit(0)
    os.waitpid(pid, 0)
    seen = s3.get_object(Bucket="data", Key="inherit.bin")["Body"].read()
    check(seen == b"old version", f"a child's close stores nothing: the object is still the old one ({len(seen)} B)")
    os.write(fd, half)
    os.close(fd)
    seen = s3.get_object(Bucket="data", Key="inherit.bin")["Body"].read()
    check(seen == half + half, f"the parent's close stores the whole file ({len(seen)} of {2 * len(half)} B)")
    # A shell redirect (the child opens, dup2s to 1, closes the original)
    # and a writer that dup()s and closes one copy early still store all.
    r = subprocess.run(f"(echo one; sleep 0.2; echo two) > {mnt}/redirect.txt", shell=True, capture_output=True)
    check(r.returncode == 0 and s3.get_object(Bucket="data", Key="redirect.txt")["Body"].read() == b"one\ntwo\n",
          "a shell redirect through a subshell stores every line")
    fd = os.open(f"{mnt}/dup.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    fd2 = os.dup(fd)
    os.write(fd, b"a" * 1000)
    os.close(fd)
    os.write(fd2, b"b" * 1000)
    os.close(fd2)
    check(s3.get_object(Bucket="data", Key="dup.bin")["Body"].read() == b"a" * 1000 + b"b" * 1000,
          "writes after closing a dup() continue the file")

    # ---- what a write-once store refuses ----
    shard = f"{mnt}/copy/tf/{shards[0]}"
    before = md5(shard)

    def rewrite():
        with open(shard, "r+b") as f:
            f.seek(100)
            f.write(b"XXXX")
            f.flush()

    def append():
        with open(shard, "ab") as f:
            f.write(b"tail")

    check(errno_of(rewrite) == errno.EOPNOTSUPP, "a write into an existing object: EOPNOTSUPP")
    check(errno_of(append) == errno.EOPNOTSUPP, "an append to an existing object: EOPNOTSUPP")
    check(errno_of(lambda: os.truncate(shard, 10)) == errno.EOPNOTSUPP, "a truncate to 10 bytes: EOPNOTSUPP")
    check(errno_of(lambda: os.link(shard, f"{mnt}/hard")) == errno.EPERM, "a hard link: EPERM")
    check(errno_of(lambda: os.symlink(shard, f"{mnt}/soft")) == errno.EPERM, "a symbolic link: EPERM")
    check(md5(shard) == before and
          hashlib.md5(s3.get_object(Bucket="data", Key=f"copy/tf/{shards[0]}")["Body"].read()).hexdigest() == before,
          "the object is untouched by what was refused")
    log = open(os.path.join(tmp, "mount.log")).read()
    check("refused to write at byte 100 into an existing object" in log, "a refusal is logged")

    # ---- a full spool disk: the write fails, so does close, nothing is stored ----
    small = os.path.join(tmp, "small")
    os.mkdir(small)
    if run("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", small).returncode != 0:
        print("SKIP part: a 16 MiB tmpfs cannot be mounted here (full-spool checks)")
    else:
        mnt2 = os.path.join(tmp, "mnt2")
        os.mkdir(mnt2)
        good = os.urandom(32 << 20)
        s3.put_object(Bucket="data", Key="full/big.bin", Body=good)
        with open(os.path.join(tmp, "new.bin"), "wb") as f:
            f.write(os.urandom(32 << 20))
        m2 = Mount(url + "/data", at=mnt2, env=dict(os.environ, TMPDIR=small))
        try:
            r = run("cp", os.path.join(tmp, "new.bin"), f"{mnt2}/full/big.bin")
            check(r.returncode != 0 and "No space" in r.stderr, f"cp onto a full spool fails: {r.stderr.strip()}")
            seen = s3.get_object(Bucket="data", Key="full/big.bin")["Body"].read()
            check(seen == good, f"... and the object keeps its previous version ({len(seen)} B)")
            f = open(f"{mnt2}/full/new.bin", "wb", buffering=0)
            errors = []
            try:
                for _ in range(32):
                    f.write(b"z" * (1 << 20))
            except OSError as ex:
                errors.append(ex.errno)
            try:
                f.close()
            except OSError as ex:
                errors.append(ex.errno)
            check(errors == [errno.ENOSPC, errno.ENOSPC], f"a failed write, then close, both ENOSPC: {errors}")
            check(s3lib.error_code(lambda: s3.head_object(Bucket="data", Key="full/new.bin")) == "404",
                  "a file whose write failed is not stored at all")
            check(os.listdir(small) == [], f"the spool is freed: {os.listdir(small)}")
            with open(f"{mnt2}/full/after.txt", "wb") as f:  # the space is back
                f.write(b"fits")
            check(s3.get_object(Bucket="data", Key="full/after.txt")["Body"].read() == b"fits",
                  "a write that fits succeeds afterwards")
        finally:
            m2.stop()
            run("umount", small)

    # ---- an object changed behind the mount; the page cache kept when not ----
    key = "copy/images/synset_labels.txt"
    open(f"{mnt}/{key}").read()
    open(f"{mnt}/{key}").read()
    kept = m.counters()["opens_kept_cache"]
    check(kept >= 1, f"an unchanged object keeps the kernel's pages across opens ({kept})")
    s3.put_object(Bucket="data", Key=key, Body=b"changed\n")
    time.sleep(1.5)  # --attr-ttl 1
    check(open(f"{mnt}/{key}").read() == "changed\n", "a changed object is read anew")

    # ---- the node killed under a reader: EIO, the mount stays up, then recovers ----
    fresh = os.urandom(21 << 20)
    s3.put_object(Bucket="data", Key="fresh.bin", Body=fresh)  # nothing of it in any cache
    reader = open(f"{mnt}/fresh.bin", "rb")
    first = reader.read(1 << 20)
    port = node.port
    node.p.send_signal(signal.SIGKILL)
    node.p.wait()
    reader.seek(17 << 20)
    e = errno_of(lambda: reader.read(1 << 20))
    check(e == errno.EIO, f"a read with the node gone: EIO ({e})")
    check(os.path.ismount(mnt) and m.p.poll() is None, "the mount stays up")
    node = s3lib.Node(AQ, os.path.join(tmp, "node"), credentials=creds, listen=f"127.0.0.1:{port}")
    reader.seek(17 << 20)
    check(first == fresh[:1 << 20] and reader.read(1 << 20) == fresh[17 << 20:18 << 20],
          "the same reader reads again once the node is back")
    reader.close()
    c = m.counters()
    check(c["read_errors"] >= 1 and c["reads"] > 0 and c["read_ahead_used_bytes"] > 0,
          f"stats count reads, errors and read-ahead: {c}")

    # ---- unmount under load ----
    stop = threading.Event()
    outcomes = []

    def load():
        while not stop.is_set():
            try:
                with open(f"{mnt}/copy/big.bin", "rb") as f:
                    while f.read(1 << 20):
                        pass
                outcomes.append("ok")
            except OSError as ex:
                outcomes.append(ex.errno)
                return

    threads = [threading.Thread(target=load) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(1)
    r = run(AQ, "umount", "--lazy", mnt)
    check(r.returncode == 0, f"aquifer umount --lazy under load: {r.stderr}")
    stop.set()
    for t in threads:
        t.join(timeout=30)
    check(not any(t.is_alive() for t in threads), "readers are not hung after the unmount")
    check(wait_for(lambda: m.p.poll() is not None, 20), "the mount process exits after the unmount")
    check(not os.path.ismount(mnt), "nothing mounted afterwards")

    # ---- SIGTERM unmounts cleanly; a killed mount is cleared by aquifer umount ----
    m = Mount(url + "/data")
    check(m.stop() == 0 and not os.path.ismount(mnt), "SIGTERM unmounts and exits 0")
    m = Mount(url + "/data")
    m.p.send_signal(signal.SIGKILL)
    m.p.wait()
    check(errno_of(lambda: os.listdir(mnt)) == errno.ENOTCONN, "a killed mount: ENOTCONN, not a hang")
    r = run(AQ, "umount", mnt)
    check(r.returncode == 0 and not os.path.ismount(mnt), f"aquifer umount clears it: {r.stderr}")
    m = None

    # ---- a source naming several nodes: its commas stay out of FUSE's options ----
    hostport = url[len("aquifer://"):]
    several = f"aquifer://{hostport},{hostport}/data"
    m = Mount(several)
    check(any(line.split()[:2] == [several, mnt] for line in open("/proc/mounts")),
          f"/proc/mounts names the source whole: {several}")
    check(os.path.exists(f"{mnt}/copy/big.bin"), "a mount naming several nodes reads")
    # Directories made through the mount are marker objects ("dir/"): rm -r takes them too.
    os.makedirs(f"{mnt}/rmtree/x/y")
    with open(f"{mnt}/rmtree/x/f.txt", "w") as f:
        f.write("f")
    r = run(AQ, "--credentials", creds, "rm", "-r", f"{url}/data/rmtree")
    left = [o["Key"] for o in s3.list_objects_v2(Bucket="data", Prefix="rmtree").get("Contents", [])]
    check(r.returncode == 0 and not left, f"rm -r leaves no marker objects: {left} {r.stderr.strip()}")
    m.stop()
    m = None

    # ---- clear errors ----
    r = run(AQ, "--credentials", creds, "mount", "-f", url + "/no-such-bucket", mnt)
    check(r.returncode != 0 and "no-such-bucket" in r.stderr and not os.path.ismount(mnt),
          f"a missing bucket is refused before mounting: {r.stderr.strip()}")
    r = run(AQ, "--credentials", creds, "mount", "-f", url + "/data", os.path.join(tmp, "nowhere"))
    check(r.returncode != 0 and "nowhere" in r.stderr, f"a missing mount point: {r.stderr.strip()}")
    r = run(AQ, "mount", "-f", "/local/path", mnt)
    check(r.returncode != 0 and "aquifer://" in r.stderr, f"not an aquifer:// root: {r.stderr.strip()}")
    r = run(AQ, "--credentials", creds, "mount", url + "/data", mnt, "--read-only")
    check(r.returncode == 0 and wait_for(lambda: os.path.ismount(mnt), 10), "a detached read-only mount")
    check(errno_of(lambda: open(f"{mnt}/ro.txt", "w")) == errno.EROFS, "read-only: EROFS")
    check(errno_of(lambda: os.utime(f"{mnt}/copy/big.bin")) == errno.EROFS, "read-only: utime is EROFS too")
    check(errno_of(lambda: plan_line("copy/big.bin\n")) == 0, "a read-only mount takes read plans")
    check(run(AQ, "umount", mnt).returncode == 0 and wait_for(lambda: not os.path.ismount(mnt), 10),
          "the detached mount unmounts")
finally:
    if m is not None:
        m.stop()
    if os.path.ismount(mnt):
        subprocess.run(["umount", "-l", mnt])
    if node is not None:
        node.stop()
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
