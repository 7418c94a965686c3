#!/usr/bin/python3
"""Checkpoints through aquifer:// against a real node.

- aquifer.open: torch.save / torch.load round trip; a `with` block left by an
  exception, and a file dropped unclosed, store nothing.
- Tiering: a checkpoint lands on the ssd pool and, once older than the
  policy's age, `aquifer tier run` drains it to the hdd pool; it restores
  exactly from there.
- A 2-rank data-parallel job (gloo) saving every 5 steps through
  aquifer.checkpoint.save (each rank writing its share), killed with SIGKILL at a random moment,
  resumes from checkpoint.latest() and ends with weights bit-identical to
  an uninterrupted run's.
- `aquifer bench checkpoint`: 2 ranks on the local disk and through
  aquifer://, two saves and two restores, every rank timed, the slowest
  counting, everything it wrote removed; an unreachable store is an error.
- Crash trials: a saver (or, every other trial, the node) killed with
  SIGKILL at random moments, --trials times. After each kill the newest complete checkpoint restores exactly
  the state of its step, every checkpoint the saver reported saved is
  complete, and the rest are torn (no .metadata) or absent: never a
  .metadata over missing or short files. keep_last then keeps the newest
  complete ones.
usage: checkpoint_test.py path/to/aquifer [--trials N] [--seed S]"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "checkpoint"))
import s3lib  # noqa: E402
from s3lib import Checks  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("aquifer")
ap.add_argument("--trials", type=int, default=8)
ap.add_argument("--seed", type=int, default=None)
args = ap.parse_args()
AQ = os.path.abspath(args.aquifer)
PYTHONPATH = os.path.join(os.path.dirname(AQ), "python")
sys.path.insert(0, PYTHONPATH)
try:
    import torch
except ImportError:
    print("SKIP: python3-torch is not installed")
    sys.exit(77)
import aquifer  # noqa: E402
from aquifer import checkpoint  # noqa: E402
import saver  # noqa: E402

seed = args.seed if args.seed is not None else random.randrange(1 << 30)
print(f"seed {seed} (rerun: --seed {seed})")
rng = random.Random(seed)
check = Checks()
tmp = tempfile.mkdtemp(prefix="aq_ckpt_")
creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
env = dict(os.environ, PYTHONPATH=PYTHONPATH + os.pathsep + os.environ.get("PYTHONPATH", ""))


def equal(a, b):
    if torch.is_tensor(a):
        return torch.is_tensor(b) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    return a == b


def run_job(root, out, resume=False, kill_after=None):
    """Both ranks of ddp_job.py; killed with SIGKILL kill_after seconds past
    its first saved checkpoint when given. Returns (exit codes, output)."""
    port = s3lib.free_port()
    procs, logs = [], []
    for rank in range(2):
        log = open(os.path.join(tmp, f"job-{rank}.log"), "w+")
        e = dict(env, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        cmd = ["/usr/bin/python3", os.path.join(HERE, "checkpoint", "ddp_job.py"), "--root", root, "--out", out,
               "--credentials", creds, "--steps", "120", "--every", "5"] + (["--resume"] if resume else [])
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=e))
        logs.append(log)
    if kill_after is not None:
        s3lib.until(lambda: "saved" in open(logs[0].name).read(), 120, step=0.05)
        time.sleep(kill_after)
        for p in procs:
            p.send_signal(signal.SIGKILL)
    codes = [p.wait(timeout=300) for p in procs]
    text = ""
    for log in logs:
        log.seek(0)
        text += log.read()
        log.close()
    return codes, text


node = None
try:
    node = s3lib.Node(AQ, os.path.join(tmp, "node"), credentials=creds)
    s3lib.boto(node.port).create_bucket(Bucket="ckpt")
    base = f"aquifer://127.0.0.1:{node.port}/ckpt"

    # ---- aquifer.open ----
    torch.manual_seed(1)
    model = torch.nn.Linear(1500, 3000)  # 18 MB: several parts
    with aquifer.open(base + "/one/model.pt", "wb", credentials=creds) as f:
        torch.save(model.state_dict(), f)
    with aquifer.open(base + "/one/model.pt", "rb", credentials=creds) as f:
        back = torch.load(f)
    check(all(equal(back[k], v) for k, v in model.state_dict().items()), "torch.save/torch.load via aquifer.open")
    try:
        with aquifer.open(base + "/one/failed.pt", "wb", credentials=creds) as f:
            torch.save(model.state_dict(), f)
            raise RuntimeError("the job failed mid-save")
    except RuntimeError:
        pass
    f = aquifer.open(base + "/one/dropped.pt", "wb", credentials=creds)
    f.write(b"half a checkpoint")
    import warnings
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        del f
    names = sorted(e[0] for e in aquifer._aquifer.list_dir(base + "/one", creds))
    check(names == ["model.pt"], f"an exception in the with block or a dropped file stores nothing: {names}")
    try:
        aquifer.open(base + "/one/absent.pt", "rb", credentials=creds)
        check(False, "opening a missing checkpoint raises")
    except FileNotFoundError:
        pass

    # ---- a single-process round trip; a view saves only its own elements ----
    want = saver.expected(5, mib=2)
    want["view"] = want["a"][10:20]
    checkpoint.save(want, base + "/single/step-5", credentials=creds)
    got = checkpoint.load(base + "/single/step-5", credentials=creds)
    check(sorted(got) == sorted(want) and all(equal(got[k], v) for k, v in want.items()), "save/load round trip")
    check(got["view"].storage().size() == 10, "a view is saved as its 10 elements, not its base")
    check(checkpoint.load(base + "/single/step-5", keys=["step"], credentials=creds) == {"step": torch.tensor(5)},
          "load(keys=...) reads only those")

    # ---- tiered: checkpoints land on the fast pool, drain to the slow one ----
    import glob
    tiered = os.path.join(tmp, "tiered")
    tnode = s3lib.Node(AQ, os.path.join(tiered, "data"), "--pool", f"ssd={tiered}/ssd,media=ssd", "--pool",
                       f"hdd={tiered}/hdd,media=hdd", "--tier-interval", "0", "--cache-size", "0",
                       credentials=creds)
    try:
        s3lib.boto(tnode.port).create_bucket(Bucket="ckpt")

        def blocks(pool):
            return len(glob.glob(f"{tiered}/{pool}/blocks/*/*"))

        def tier(*argv):
            return subprocess.run([AQ, "tier", *argv, "--data", os.path.join(tiered, "data")], capture_output=True,
                                  text=True, timeout=120)
        r1 = tier("policy", "add", "land", "--media", "ssd", "--key", "run/*")
        r2 = tier("policy", "add", "drain", "--media", "hdd", "--key", "run/*", "--older-than", "2s", "--at", "0")
        check(r1.returncode == 0 and r2.returncode == 0, f"tier policies: {r1.stderr} {r2.stderr}")
        troot = f"aquifer://127.0.0.1:{tnode.port}/ckpt/run"
        want = saver.expected(3, mib=4)
        checkpoint.save(want, troot + "/step-3", credentials=creds)
        check(blocks("ssd") > 0 and blocks("hdd") == 0, f"a new checkpoint lands on ssd ({blocks('ssd')} blocks)")
        time.sleep(2.5)
        r = tier("run", "--timeout", "60")
        st = tier("status", "--json")
        pools = json.loads(st.stdout or "{}").get("pools", {})
        check(r.returncode == 0 and pools.get("ssd", {}).get("blocks", 0) == 0 and
              pools.get("hdd", {}).get("blocks", 0) > 0,
              f"older than 2 s, it drains to hdd (blocks by pool: {pools}): {r.stdout[-300:]} {r.stderr[-300:]}")
        got = checkpoint.load(checkpoint.latest(troot, credentials=creds), credentials=creds)
        check(all(equal(got[k], v) for k, v in want.items()), "the drained checkpoint restores exactly")
    finally:
        tnode.stop()

    # ---- a DDP job killed and resumed ----
    ref_out, resumed_out = os.path.join(tmp, "ref.pt"), os.path.join(tmp, "resumed.pt")
    codes, text = run_job(base + "/ref", ref_out)
    check(codes == [0, 0], f"the uninterrupted job: {codes}\n{text[-2000:]}")
    kill_after = rng.uniform(0.0, 1.5)
    codes, text = run_job(base + "/job", resumed_out, kill_after=kill_after)
    last = checkpoint.latest(base + "/job", credentials=creds)
    print(f"killed {kill_after:.2f} s after the first save; newest complete checkpoint: {last}")
    check(last is not None, "a complete checkpoint survived the kill")
    check(last is None or int(last.rsplit("-", 1)[1]) < 120, f"the kill came before the job's end ({last})")
    codes, text = run_job(base + "/job", resumed_out, resume=True)
    check(codes == [0, 0] and "resumed from" in text, f"the resumed job: {codes}\n{text[-2000:]}")
    if os.path.exists(ref_out) and os.path.exists(resumed_out):
        ref, res = torch.load(ref_out), torch.load(resumed_out)
        check(all(equal(ref[k], res[k]) for k in ref), "resumed weights are bit-identical to the uninterrupted run's")

    # ---- aquifer bench checkpoint: 2 ranks, local disk and aquifer:// ----
    local = os.path.join(tmp, "bench-local")
    os.makedirs(local)
    r = subprocess.run([AQ, "--credentials", creds, "bench", "checkpoint", "--ranks", "2", "--size", "12MiB",
                        "--saves", "2", "--url", base + "/bench", "--local", local, "--json"],
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"aquifer bench checkpoint: {r.stderr[-500:]}")
    if r.returncode == 0:
        res = json.loads(r.stdout)
        s = res["summary"]
        check(res["command"] == "bench checkpoint" and s["ranks"] == 2 and s["bytes_per_rank"] == 12 << 20,
              f"the result names its shape: {s['ranks']} x {s['bytes_per_rank']}")
        for name in ("local disk", "aquifer://"):
            t = s["targets"].get(name, {})
            for op in ("save", "restore"):
                runs = t.get(op, {}).get("runs", [])
                check(len(runs) == 2 and all(len(x["rank_seconds"]) == 2 and x["slowest_seconds"] ==
                                             max(x["rank_seconds"]) for x in runs),
                      f"{name} {op}: two runs of two ranks, the slowest counting: {runs}")
                check(t[op]["median_total_mb_per_second"] > 0, f"{name} {op}: a rate")
        check(abs(s["targets"]["local disk"]["save_vs_local"] - 1) < 1e-9, "local disk is the baseline (1.00x)")
        check(not os.listdir(local), f"the local files are removed afterwards: {os.listdir(local)}")
        left = s3lib.boto(node.port).list_objects_v2(Bucket="ckpt", Prefix="bench/").get("KeyCount", 0)
        check(left == 0, f"the store's files are removed afterwards: {left} left")
    # A store that cannot be reached fails the command, naming it.
    r = subprocess.run([AQ, "--credentials", creds, "bench", "checkpoint", "--ranks", "1", "--size", "1MiB",
                        "--saves", "1", "--url", "aquifer://127.0.0.1:1/ckpt", "--local", local],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, AQUIFER_RETRY_DEADLINE="1"))
    check(r.returncode != 0 and "127.0.0.1:1" in r.stderr, f"an unreachable store is an error: {r.stderr[-300:]}")
    # A bucket that does not exist fails before the first save, naming it.
    started = time.time()
    r = subprocess.run([AQ, "--credentials", creds, "bench", "checkpoint", "--ranks", "2", "--size", "64MiB",
                        "--saves", "3", "--url", f"aquifer://127.0.0.1:{node.port}/no-such-bucket", "--local", local],
                       capture_output=True, text=True, timeout=300)
    check(r.returncode != 0 and "no-such-bucket" in r.stderr and "local disk   save" not in r.stdout,
          f"a missing bucket is refused before any save: {r.returncode} {r.stdout[-300:]} {r.stderr[-300:]}")
    check(time.time() - started < 30 and not os.listdir(local), "nothing was run or left for the refused target")

    # ---- crash trials ----
    root = base + "/crash"
    reported = set()
    torn_seen = set()
    start = 1
    node_kills = 0
    for trial in range(args.trials):
        log = open(os.path.join(tmp, "saver.log"), "w+")
        p = subprocess.Popen(["/usr/bin/python3", os.path.join(HERE, "checkpoint", "saver.py"), "--root", root,
                              "--credentials", creds, "--start", str(start)], stdout=log, stderr=subprocess.STDOUT,
                             env=dict(env, AQUIFER_RETRY_DEADLINE="2"))
        # The kill lands at a random point of the saves: after the saver has
        # reported 0, 1 or 2 of them, then up to a second into the next
        # (a save of ~16 MB takes a fraction of a second). Counting saves
        # rather than sleeping keeps the trials meaningful on a loaded
        # machine, where torch's import alone can take seconds.
        waits = rng.randrange(3)
        lines = lambda: open(log.name).read().splitlines()  # noqa: E731
        s3lib.until(lambda: p.poll() is not None or "ready" in lines() and sum(x.startswith("saved ") for x in lines()) >= waits,
                    180, step=0.02)
        time.sleep(rng.uniform(0.0, 1.0))
        if trial % 2 == 1:
            # The node killed instead: the save in flight fails (after the
            # 2 s retry deadline), the saver stops; the node restarts on its
            # data and must hold every save the saver reported.
            node.p.send_signal(signal.SIGKILL)
            node.p.wait()
            node_kills += 1
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGKILL)
                p.wait()
            node = s3lib.Node(AQ, os.path.join(tmp, "node"), credentials=creds, listen=f"127.0.0.1:{node.port}")
        else:
            p.send_signal(signal.SIGKILL)
            p.wait()
        log.seek(0)
        out = log.read()
        log.close()
        saved = {int(line.split()[1]) for line in out.splitlines() if line.startswith("saved ")}
        reported |= saved
        found = checkpoint.checkpoints(root, credentials=creds)
        complete = {int(f.rsplit("-", 1)[1]) for f, ok in found if ok}
        torn = {int(f.rsplit("-", 1)[1]) for f, ok in found if not ok}
        torn_seen |= torn
        check(reported <= complete, f"trial {trial}: every save reported is complete: missing {reported - complete}")
        last = checkpoint.latest(root, credentials=creds)
        if last is not None:
            step = int(last.rsplit("-", 1)[1])
            want = saver.expected(step)
            got = checkpoint.load(last, credentials=creds)
            check(sorted(got) == sorted(want) and all(equal(got[k], v) for k, v in want.items()),
                  f"trial {trial}: {last} restores exactly")
        for s in sorted(complete)[-3:-1]:  # earlier ones stay intact too
            want = saver.expected(s)
            got = checkpoint.load(f"{root}/step-{s}", credentials=creds)
            check(all(equal(got[k], v) for k, v in want.items()), f"trial {trial}: step-{s} restores exactly")
        start = max(complete | torn | {0}) + 1
    print(f"{args.trials} kills ({node_kills} of the node): {len(reported)} saves reported, {len(torn_seen)} torn saves left without .metadata")
    removed = checkpoint.keep_last(root, 2, credentials=creds)
    left = checkpoint.checkpoints(root, credentials=creds)
    kept = [int(f.rsplit("-", 1)[1]) for f, ok in left if ok]
    newer = [int(f.rsplit("-", 1)[1]) for f, ok in left if not ok]
    check(reported, "the trials saw saves complete")
    check(kept == sorted(complete)[-2:] and all(not kept or n > kept[-1] for n in newer),
          f"keep_last(2) keeps the newest two complete checkpoints (and a torn newer one): removed {len(removed)}, "
          f"left {left}")
finally:
    if node is not None:
        node.stop()
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
