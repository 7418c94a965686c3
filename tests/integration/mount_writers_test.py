#!/usr/bin/python3
"""Writers that seek back, through aquifer mount against a real node.

np.savez (zip: each member's local header is written again after its data),
zipfile with deflated members, torch.save (its zip format), h5py (HDF5
writes its superblock and B-trees all over the file) and a file written
backwards with pwrite: each is made once on a local disk and once on the
mount by the same code, and the stored object (read back over S3, not
through the mount) must be byte for byte the local file. The large ones pass
the multipart threshold, so parts already sent are sent again. Also: the
save-to-temporary-then-rename pattern leaves only the final name; a write
the mount refuses fails the write and the close and stores nothing.
Skips (exit 77) where /dev/fuse cannot be used.
usage: mount_writers_test.py path/to/aquifer"""
import errno
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402
from s3lib import Checks, boto  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
s3lib.require_fuse()

import numpy as np  # noqa: E402

# zipfile stamps each member with the time it is written; pinned, so the
# local file and the mount's are the same bytes when written seconds apart.
class _PinnedTime:
    localtime = staticmethod(time.localtime)

    @staticmethod
    def time():
        return 1_700_000_000.0


zipfile.time = _PinnedTime
check = Checks()
tmp = tempfile.mkdtemp(prefix="aq_mwriters_")
creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
mnt = os.path.join(tmp, "mnt")
local = os.path.join(tmp, "local")
os.mkdir(mnt)
os.mkdir(local)
rng = np.random.default_rng(7)


def digest(data):
    return hashlib.sha256(data).hexdigest()[:16]


def same_bytes(name, s3, write):
    """write(path) runs on the local disk and on the mount; the stored object must be the local file."""
    write(os.path.join(local, name))
    t0 = time.time()
    write(os.path.join(mnt, name))
    took = time.time() - t0
    with open(os.path.join(local, name), "rb") as f:
        want = f.read()
    got = s3.get_object(Bucket="data", Key=name)["Body"].read()
    check(got == want, f"{name}: {len(want):,} bytes stored as written locally "
                       f"({digest(got)} vs {digest(want)}, {took:.1f} s on the mount)")
    return want


def savez_big(path):
    np.savez(path, weights=rng_big, bias=np.arange(1000, dtype=np.float32))


def savez_compressed(path):
    np.savez_compressed(path, a=rng_small, b=np.zeros((300, 300)))


def zip_members(path):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for i in range(5):
            with z.open(f"m{i}.bin", "w", force_zip64=(i == 3)) as w:
                w.write(bytes(rng_bytes[i * 1000:(i + 1) * 700_000]))
        z.writestr("ü/名前.txt", "non-ASCII member\n")


def backwards(path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        block = 1 << 20
        for i in reversed(range(20)):  # 20 MiB from its end to its start
            os.pwrite(fd, bytes([i]) * block, i * block)
        os.pwrite(fd, b"end", 25 << 20)  # a hole before it
        os.ftruncate(fd, (25 << 20) + 2)  # and a cut
    finally:
        os.close(fd)


rng_big = rng.standard_normal((3_000_000, 4), dtype=np.float32)  # 48 MB: past the 8 MiB threshold
rng_small = rng.standard_normal((200, 200))
rng_bytes = rng.integers(0, 256, 4_000_000, dtype=np.uint8).tobytes()

node = m = None
log = open(os.path.join(tmp, "mount.log"), "a")
try:
    node = s3lib.Node(AQ, os.path.join(tmp, "node"), credentials=creds)
    s3 = boto(node.port)
    s3.create_bucket(Bucket="data")
    # Small parts and threshold, so the large files are multipart uploads
    # whose early parts are sent before the writer goes back into them.
    env = dict(os.environ, AQUIFER_PART_SIZE="5MiB", AQUIFER_MULTIPART_THRESHOLD="8MiB")
    m = subprocess.Popen([AQ, "--credentials", creds, "mount", "-f", f"aquifer://127.0.0.1:{node.port}/data", mnt],
                         stdout=log, stderr=log, env=env)
    if not s3lib.until(lambda: os.path.ismount(mnt), 15):
        raise SystemExit("the mount did not appear: " + open(os.path.join(tmp, "mount.log")).read())

    same_bytes("big.npz", s3, savez_big)
    same_bytes("small.npz", s3, savez_compressed)
    same_bytes("members.zip", s3, zip_members)
    same_bytes("backwards.bin", s3, backwards)
    with np.load(os.path.join(mnt, "big.npz")) as z:
        check(np.array_equal(z["weights"], rng_big), "np.load through the mount gives the saved array")

    try:
        import torch
    except ImportError:
        torch = None
        print("note: python3-torch is not installed; torch.save not tried")
    if torch is not None:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 1000))
        opt = torch.optim.Adam(model.parameters())
        model(torch.randn(4, 512)).sum().backward()
        opt.step()
        state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 7}
        same_bytes("model.pt", s3, lambda p: torch.save(state, p))
        back = torch.load(os.path.join(mnt, "model.pt"))
        check(all(torch.equal(back["model"][k], v) for k, v in state["model"].items()) and back["step"] == 7,
              "torch.load through the mount gives the saved weights")
        # The pattern frameworks use: save to a temporary name, rename into place.
        tmp_name, final = os.path.join(mnt, "ckpt", "step-7.pt.tmp"), os.path.join(mnt, "ckpt", "step-7.pt")
        os.makedirs(os.path.dirname(tmp_name), exist_ok=True)
        torch.save(state, tmp_name)
        os.replace(tmp_name, final)
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="data", Prefix="ckpt/").get("Contents", []))
        check(keys == ["ckpt/", "ckpt/step-7.pt"] or keys == ["ckpt/step-7.pt"],
              f"save then rename leaves only the final name: {keys}")
        torch.save(state, os.path.join(local, "step-7.pt.tmp"))  # (the archive inside is named after the file)
        check(s3.get_object(Bucket="data", Key="ckpt/step-7.pt")["Body"].read() ==
              open(os.path.join(local, "step-7.pt.tmp"), "rb").read(), "the renamed checkpoint is the saved bytes")

    try:
        import h5py
    except ImportError:
        h5py = None
        print("note: python3-h5py is not installed; HDF5 not tried")
    if h5py is not None:
        def hdf5(path):
            # The newest format, creation order tracked, and no timestamps
            # anywhere (HDF5 stamps groups to the second: a local write and
            # the mount's a second apart would differ in those bytes alone).
            fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
            fcpl.set_obj_track_times(False)
            fcpl.set_link_creation_order(h5py.h5p.CRT_ORDER_TRACKED | h5py.h5p.CRT_ORDER_INDEXED)
            fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
            fapl.set_libver_bounds(h5py.h5f.LIBVER_LATEST, h5py.h5f.LIBVER_LATEST)
            with h5py.File(h5py.h5f.create(path.encode(), h5py.h5f.ACC_TRUNC, fcpl=fcpl, fapl=fapl)) as f:
                f.attrs["epoch"] = 3
                f.create_dataset("x", data=rng_big[:1_000_000], chunks=(65536, 4), track_times=False)
                gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
                gcpl.set_obj_track_times(False)
                gcpl.set_link_creation_order(h5py.h5p.CRT_ORDER_TRACKED | h5py.h5p.CRT_ORDER_INDEXED)
                g = h5py.Group(h5py.h5g.create(f.id, b"opt", gcpl=gcpl))
                d = g.create_dataset("grow", shape=(0, 16), maxshape=(None, 16), chunks=(1024, 16),
                                     dtype="f4", track_times=False)
                for i in range(8):  # grown in place: the writer goes back to its index and header
                    d.resize((i + 1) * 5000, axis=0)
                    d[i * 5000:] = i
        same_bytes("state.h5", s3, hdf5)
        with h5py.File(os.path.join(mnt, "state.h5"), "r") as f:
            check(f.attrs["epoch"] == 3 and f["opt/grow"].shape == (40000, 16) and float(f["opt/grow"][-1, 0]) == 7,
                  "h5py reads the file back through the mount")

    # A write the mount cannot take fails the write and the close, and
    # stores nothing: an existing object opened without O_TRUNC.
    before = s3.get_object(Bucket="data", Key="small.npz")["Body"].read()
    fd = os.open(os.path.join(mnt, "small.npz"), os.O_WRONLY)
    write_err = close_err = 0
    try:
        os.pwrite(fd, b"PK", 0)
    except OSError as e:
        write_err = e.errno
    try:
        os.close(fd)
    except OSError as e:
        close_err = e.errno
    check(write_err == errno.EOPNOTSUPP and close_err == errno.EOPNOTSUPP,
          f"a write into an existing object: EOPNOTSUPP from the write ({write_err}) and the close ({close_err})")
    check(s3.get_object(Bucket="data", Key="small.npz")["Body"].read() == before, "the object keeps its bytes")
    uploads = s3.list_multipart_uploads(Bucket="data").get("Uploads", [])
    check(not uploads, f"no multipart upload left open: {[u['Key'] for u in uploads]}")
    spools = [n for n in os.listdir(os.environ.get("TMPDIR", "/tmp")) if n.startswith("aquifer-put-")]
    check(not spools, f"no spool file left behind: {spools}")
finally:
    if m is not None:
        m.send_signal(signal.SIGTERM)
        try:
            m.wait(timeout=20)
        except subprocess.TimeoutExpired:
            m.kill()
            m.wait()
        subprocess.run([AQ, "umount", mnt], capture_output=True)
    if node is not None:
        node.stop()
    if check.failed or sys.exc_info()[0] is not None:
        print(open(os.path.join(tmp, "mount.log")).read()[-3000:])
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
