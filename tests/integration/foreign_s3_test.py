#!/usr/bin/python3
"""The aquifer:// client, aquifer.Loader and the mount over an S3 store that
is not aquifer: s3rver (an S3 server from npm, installed into CACHE_DIR once),
which offers the S3 API and none of aquifer's /_aquifer/ routes.

- `aquifer cp -r` uploads an image folder and TFRecord shards into a
  bucket the store already has (it answers 409 BucketAlreadyExists, not
  ...OwnedByYou), `aquifer ls` lists them, `aquifer cp -r` back gives the
  same bytes.
- aquifer.Loader reads both, batch for batch the same as from the local
  copies (pixels and labels), with no bad sample and no plan error (the
  store has no staging: plans are advice).
- The mount reads every file with the same bytes and stores a new one
  (skipped without /dev/fuse).
- s3://BUCKET/KEY paths at the endpoint the AWS settings give
  (AWS_ENDPOINT_URL, endpoint_url of a profile in the config file): ls,
  cp -r and aquifer.Loader; without one, an error naming those settings.
- The same store over HTTPS (s3rver --cert/--key, a test CA): aquifers://
  and s3:// at an https:// endpoint, verified with AWS_CA_BUNDLE; a CA
  that does not verify the store is refused.
Skips (77) where npm, node or the registry is missing.
usage: foreign_s3_test.py path/to/aquifer [CACHE_DIR]"""
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
CACHE = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else os.path.join(tempfile.gettempdir(), "aq-s3rver")
S3RVER_VERSION = "3.7.1"


def install_s3rver():
    """None when s3rver is installed in CACHE, else why it cannot be."""
    if not shutil.which("npm") or not shutil.which("node"):
        return "node and npm are not installed"
    binary = os.path.join(CACHE, "node_modules", ".bin", "s3rver")
    if os.path.exists(binary):
        return None
    os.makedirs(CACHE, exist_ok=True)
    r = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel", "error",
                        f"s3rver@{S3RVER_VERSION}"], cwd=CACHE, capture_output=True, text=True, timeout=600)
    return None if r.returncode == 0 else f"npm install s3rver failed (no registry?): {r.stderr.strip()[-400:]}"


why = install_s3rver()
if why:
    print(f"SKIP: {why}")
    sys.exit(77)
PYTHONPATH = os.path.join(os.path.dirname(AQ), "python")
sys.path.insert(0, PYTHONPATH)
check = s3lib.Checks()
tmp = tempfile.mkdtemp(prefix="aq_foreign_s3_")
keys = os.path.join(tmp, "keys")
with open(keys, "w") as f:
    f.write("# s3rver's own key\nS3RVER S3RVER\n")
os.chmod(keys, 0o600)
server = None


aq = s3lib.Cli(AQ, prefix=["--credentials", keys])


def digests(root):
    out = {}
    for d, _, files in os.walk(root):
        for name in files:
            path = os.path.join(d, name)
            out[os.path.relpath(path, root)] = hashlib.md5(open(path, "rb").read()).hexdigest()
    return out


try:
    port = s3lib.free_port()
    os.mkdir(os.path.join(tmp, "store"))
    server = subprocess.Popen([os.path.join(CACHE, "node_modules", ".bin", "s3rver"), "-d", os.path.join(tmp, "store"),
                               "-a", "127.0.0.1", "-p", str(port), "--configure-bucket", "datasets", "--silent"],
                              stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "s3rver.log"), "w"))
    check(s3lib.until(lambda: aq("wait", f"127.0.0.1:{port}", "-t", "1").returncode == 0, 30, 0.5),
          "s3rver answers")
    base = f"aquifer://127.0.0.1:{port}/datasets"
    raw, tf = os.path.join(tmp, "raw"), os.path.join(tmp, "tf")
    for args in (["dataset", "synth", "--out", raw, "--images", "48", "--classes", "3", "--profile", "tiny"],
                 ["dataset", "pack", raw, "--out", tf, "--shards", "3"]):
        r = aq(*args)
        check(r.returncode == 0, f"aquifer {' '.join(args[:2])}: {r.stderr[-300:]}")

    # ---- the client: up, list, down ----
    for local, name in ((raw, "raw"), (tf, "tf")):
        r = aq("cp", "-r", local, f"{base}/{name}")
        check(r.returncode == 0, f"aquifer cp -r {name} into a bucket the store already has: {r.stderr[-300:]}")
    r = aq("ls", f"{base}/tf")
    check(r.returncode == 0 and r.stdout.count("train-") == 3, f"aquifer ls of the shards: {r.stdout} {r.stderr}")
    back = os.path.join(tmp, "back")
    r = aq("cp", "-r", f"{base}/raw", back)
    check(r.returncode == 0 and digests(back) == digests(raw),
          f"aquifer cp -r back: the same files, the same bytes: {r.stderr[-300:]}")

    # ---- aquifer.Loader ----
    try:
        import numpy as np
        import aquifer
        for local, name in ((raw, "raw"), (tf, "tf")):
            opts = dict(batch_size=8, image_size=32, framework="numpy", shuffle=False, dtype="uint8",
                        threads=2, seed=3)
            want = [(x.copy(), y.copy()) for x, y in aquifer.Loader(local, **opts)]
            loader = aquifer.Loader(f"{base}/{name}", credentials=keys, **opts)
            got = [(x.copy(), y.copy()) for x, y in loader]
            same = len(got) == len(want) and all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
                                                 for a, b in zip(got, want))
            st = loader.stats()
            check(same, f"Loader over the foreign store ({name}): the local copy's batches ({len(got)} vs "
                  f"{len(want)})")
            check(st["bad_samples"] == 0 and not st["plan_error"],
                  f"Loader ({name}): no bad sample, the missing staging is no error: {st['bad_samples']} "
                  f"{st['plan_error']!r}")
    except ImportError as e:
        print(f"SKIP (part): the Python package or numpy: {e}")

    # ---- the mount ----
    if os.access("/dev/fuse", os.R_OK | os.W_OK):
        mnt = os.path.join(tmp, "mnt")
        os.mkdir(mnt)
        m = subprocess.Popen([AQ, "--credentials", keys, "mount", "-f", base, mnt], stdout=subprocess.DEVNULL,
                             stderr=open(os.path.join(tmp, "mount.log"), "w"))
        try:
            check(s3lib.until(lambda: os.path.ismount(mnt), 15, 0.2), "the foreign bucket mounts")
            check(digests(os.path.join(mnt, "tf")) == digests(tf), "every shard reads back through the mount")
            with open(os.path.join(mnt, "raw", "note.txt"), "w") as f:
                f.write("written through the mount\n")
            r = aq("cp", f"{base}/raw/note.txt", os.path.join(tmp, "note.txt"))
            check(r.returncode == 0 and open(os.path.join(tmp, "note.txt")).read() == "written through the mount\n",
                  f"a file written through the mount is in the store: {r.stderr[-200:]}")
        finally:
            m.send_signal(signal.SIGTERM)
            try:
                m.wait(timeout=30)
            except subprocess.TimeoutExpired:
                m.kill()
                aq("umount", mnt)
    else:
        print("SKIP (part): /dev/fuse is missing: the mount is not checked")

    # ---- s3:// paths, the endpoint from the AWS settings ----
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    r = aq("ls", "s3://datasets/tf", env={**env, "AWS_CONFIG_FILE": os.path.join(tmp, "none")})
    check(r.returncode != 0 and "AWS_ENDPOINT_URL" in r.stderr,
          f"s3:// without an endpoint names the settings that give one: {r.stderr[-300:]}")
    r = aq("ls", "s3://datasets/tf", env={**env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"})
    check(r.returncode == 0 and r.stdout.count("train-") == 3, f"s3:// with AWS_ENDPOINT_URL: {r.stdout} {r.stderr}")
    config = os.path.join(tmp, "aws-config")
    with open(config, "w") as f:
        f.write(f"[profile lab]\nregion = us-east-1\ns3 =\n    endpoint_url = http://127.0.0.1:{port}\n")
    lab = {**env, "AWS_CONFIG_FILE": config, "AWS_PROFILE": "lab"}
    back3 = os.path.join(tmp, "back-s3")
    r = aq("cp", "-r", "s3://datasets/raw", back3, env=lab)
    got = {k: v for k, v in digests(back3).items() if k != "note.txt"}  # written through the mount above
    check(r.returncode == 0 and got == digests(raw),
          f"s3:// with endpoint_url in ~/.aws/config's profile: cp -r, the same bytes: {r.stderr[-300:]}")
    try:
        import numpy as np  # noqa: F811
        r = subprocess.run(
            ["/usr/bin/python3", "-c", "import sys, aquifer\n"
             "n = sum(len(y) for _, y in aquifer.Loader('s3://datasets/tf', credentials=sys.argv[1], batch_size=8,"
             " image_size=32, framework='numpy', threads=2))\nprint(n)", keys],
            capture_output=True, text=True, timeout=120, env={**lab, "PYTHONPATH": PYTHONPATH})
        check(r.returncode == 0 and r.stdout.strip() == "48", f"aquifer.Loader('s3://...'): {r.stdout} {r.stderr[-300:]}")
    except ImportError:
        pass

    # ---- the foreign store over HTTPS ----
    ca, cert, key = s3lib.make_certificates(os.path.join(tmp, "pki"), "s3rver")
    tls_port = s3lib.free_port()
    tls_server = subprocess.Popen(
        [os.path.join(CACHE, "node_modules", ".bin", "s3rver"), "-d", os.path.join(tmp, "store"), "-a", "127.0.0.1",
         "-p", str(tls_port), "--key", key, "--cert", cert, "--silent"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "s3rver-tls.log"), "w"))
    try:
        tls_env = {**env, "AWS_CA_BUNDLE": ca}
        check(s3lib.until(lambda: aq("ls", f"aquifers://127.0.0.1:{tls_port}/datasets/tf", env=tls_env).returncode
                          == 0, 30, 0.5), "s3rver answers over HTTPS")
        r = aq("ls", f"aquifers://127.0.0.1:{tls_port}/datasets/tf", env=tls_env)
        check(r.stdout.count("train-") == 3, f"aquifers:// to a foreign store: {r.stdout} {r.stderr[-300:]}")
        back_tls = os.path.join(tmp, "back-tls")
        r = aq("cp", "-r", "s3://datasets/tf", back_tls, env={**tls_env, "AWS_ENDPOINT_URL": f"https://127.0.0.1:{tls_port}"})
        check(r.returncode == 0 and digests(back_tls) == digests(tf),
              f"s3:// at an https:// endpoint, verified with AWS_CA_BUNDLE: {r.stderr[-300:]}")
        r = aq("ls", f"aquifers://127.0.0.1:{tls_port}/datasets/tf", env={**env, "AWS_CA_BUNDLE": "/dev/null"})
        check(r.returncode != 0, "a store whose certificate the CAs do not verify is refused")
    finally:
        tls_server.terminate()
        tls_server.wait(timeout=30)
finally:
    if server:
        server.terminate()
        server.wait(timeout=30)
    if check.failed:
        s3lib.print_logs(tmp, ("s3rver.log", "mount.log"))
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
