#!/usr/bin/python3
"""examples/slurm/train.sbatch on a real Slurm (Debian's slurmctld, slurmd
and munged, started here on one machine) against a real 3-node cluster.

The job has 2 tasks: its first step (python3 -m aquifer.stage) sends both
ranks' read plans for the first epoch and waits for the nodes to stage
them, printing the staged fraction; its second runs
examples/train_imagenet.py in both tasks (DDP over gloo, ranks and world
size from Slurm) reading through aquifer.Loader. Checks: the job ends 0;
the nodes staged at least 90% of the plan before the training step
started; the training step's loaders found every block they planned
staged already (nothing read from the pools for them) and their reads were
served from staging without waiting; both ranks trained. Skips (77) where Slurm, munge or torch is missing or the daemons
cannot start.
usage: slurm_test.py path/to/aquifer SOURCE_DIR"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
SRC = os.path.abspath(sys.argv[2])
for tool in ("slurmctld", "slurmd", "sbatch", "scontrol", "munged"):
    if not shutil.which(tool):
        print(f"SKIP: {tool} is missing (Debian packages slurm-wlm and munge)")
        sys.exit(77)
try:
    import torch  # noqa: F401
except ImportError:
    print("SKIP: python3-torch is not installed")
    sys.exit(77)
if os.geteuid() != 0:
    print("SKIP: the Slurm daemons here run as root (SlurmUser=root)")
    sys.exit(77)

check = s3lib.Checks()
tmp = tempfile.mkdtemp(prefix="aq_slurm_")
creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
PYTHONPATH = os.path.join(os.path.dirname(AQ), "python")
daemons, nodes, etcd = [], [], None


def start_slurm():
    """munged, slurmctld and slurmd on free ports under tmp; the env for the
    Slurm commands. Exits 77 if they do not come up."""
    d = os.path.join(tmp, "slurm")
    for sub in ("state", "spool", "log"):
        os.makedirs(os.path.join(d, sub))
    key = os.path.join(d, "munge.key")
    with open(key, "wb") as f:
        f.write(os.urandom(1024))
    os.chmod(key, 0o600)
    sock = os.path.join(d, "munge.sock")
    r = subprocess.run(["munged", "--force", f"--socket={sock}", f"--key-file={key}",
                        f"--pid-file={d}/munged.pid", f"--log-file={d}/log/munged.log", f"--seed-file={d}/munge.seed"],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        print(f"SKIP: munged does not start here: {r.stderr.strip()}")
        sys.exit(77)
    conf = os.path.join(d, "slurm.conf")
    with open(conf, "w") as f:
        f.write(f"""ClusterName=aqtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={s3lib.free_port()}
SlurmdPort={s3lib.free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
NodeName=aqnode NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 2} State=UNKNOWN
PartitionName=debug Nodes=aqnode Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
""")
    env = dict(os.environ, SLURM_CONF=conf)
    daemons.append(subprocess.Popen(["slurmctld", "-D", "-i"], env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL))
    daemons.append(subprocess.Popen(["slurmd", "-D", "-N", "aqnode"], env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL))

    def idle():
        r = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True, timeout=10)
        return r.stdout.strip() == "idle"
    if not s3lib.until(idle, 30, 0.5):
        logs = "".join(open(os.path.join(d, "log", n)).read()[-800:] for n in ("slurmctld.log", "slurmd.log")
                       if os.path.exists(os.path.join(d, "log", n)))
        print(f"SKIP: Slurm did not come up here:\n{logs}")
        sys.exit(77)
    return env, d


def staging(n):
    with urllib.request.urlopen(f"http://127.0.0.1:{n.metrics}/stats", timeout=10) as r:
        return json.loads(r.read())["staging"]


try:
    env, sdir = start_slurm()
    # A 3-node cluster whose pool answers like a disk (3 ms a block read),
    # with no RAM cache: a block is in memory only if it was staged.
    etcd = s3lib.Etcd(tmp)
    for name in ("n1", "n2", "n3"):
        pool = f"default={os.path.join(tmp, name, 'pool')},media=hdd,latency=3ms"
        nodes.append(s3lib.ClusterNode(AQ, tmp, name, etcd.url, creds, "--pool", pool, "--cache-size", "0",
                                       "--block-size", "256KiB", "--prefetch-window", "0"))
    raw, tf = os.path.join(tmp, "raw"), os.path.join(tmp, "tf")
    for args in (["dataset", "synth", "--out", raw, "--images", "192", "--classes", "4", "--profile", "tiny"],
                 ["dataset", "pack", raw, "--out", tf, "--shards", "6"]):
        r = subprocess.run([AQ, *args], capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, f"aquifer {args[0]} {args[1]}: {r.stderr[-300:]}")
    s3lib.boto(nodes[0].port).create_bucket(Bucket="imagenet")
    r = subprocess.run([AQ, "--credentials", creds, "cp", "-r", tf, f"aquifer://127.0.0.1:{nodes[0].port}/imagenet/tf"],
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"the shards uploaded: {r.stderr[-300:]}")

    data = "aquifer://" + ",".join(f"127.0.0.1:{n.port}" for n in nodes) + "/imagenet/tf"
    before = [staging(n) for n in nodes]
    out = os.path.join(tmp, "job.out")
    job_env = dict(env, AQUIFER_DATA=data, AQUIFER_CREDENTIALS=creds, TRAIN_BATCH="16", TRAIN_SEED="7",
                   AQUIFER_NODE_STATS=",".join(f"127.0.0.1:{n.metrics}" for n in nodes), PYTHON="/usr/bin/python3",
                   PYTHONPATH=PYTHONPATH + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    t0 = time.time()
    try:
        r = subprocess.run(["sbatch", "--wait", "--ntasks=2", f"--output={out}",
                            os.path.join(SRC, "examples", "slurm", "train.sbatch"),
                            "--arch", "smallcnn", "--num-classes", "4", "--epochs", "1", "--image-size", "64",
                            "--threads", "1"],
                           env=job_env, capture_output=True, text=True, timeout=300, cwd=tmp)
    except subprocess.TimeoutExpired:
        r = subprocess.CompletedProcess([], 124, "", "the job did not end within 300 s")
    text = open(out).read() if os.path.exists(out) else ""
    print(f"the job took {time.time() - t0:.0f} s; its output:\n{text[-1500:]}")
    check(r.returncode == 0, f"sbatch --wait: the job ended 0: {r.returncode} {r.stderr[-300:]}")
    check("2 ranks on aqnode" in text, "Slurm ran the job's 2 tasks")
    staged_line = next((line for line in text.splitlines() if line.startswith("staged: ")), "")
    check(staged_line != "", "the staging step printed the staged fraction")
    staged = 0
    if staged_line:
        staged, of = int(staged_line.split()[1]), int(staged_line.split()[3])
        check(of > 0 and staged >= 0.9 * of, f"at least 90% staged before the first step: {staged_line}")
    check("train_imagenet: smallcnn, 2 process(es)" in text, "the training step ran 2 ranks of one process group")
    check("epoch 0:" in text, "the job trained its epoch")
    after = [staging(n) for n in nodes]
    delta = {k: sum(a[k] - b[k] for a, b in zip(after, before)) for k in ("planned", "staged", "shared", "resident", "hits", "late_hits", "expired", "skipped")}
    print("staging deltas:", delta)
    hits = delta["hits"] + delta["late_hits"]
    print(f"nodes: {delta['planned']} block reads planned (the staging step's and the loaders' own), "
          f"{delta['staged']} blocks read from the pools ahead, {hits} reads served by staged blocks")
    # The loaders send plans of their own as they read: every block they
    # named was found staged already (shared), none had to be staged again,
    # and no read waited for a staging read.
    # (`staged` counts blocks two ranks' plans shared once per plan: at least
    # the blocks the first step read from the pools.)
    check(staged > 0 and delta["staged"] <= staged and delta["shared"] > 0,
          f"the training step's own plans found every block staged by the first step: {delta}")
    check(hits > 0 and delta["late_hits"] == 0, f"its reads were served from staging without waiting: {delta}")
    check("plans cancelled: 2 stream(s)" in text, "the job's exit trap cancelled its 2 plans on the nodes")

    # A plan cancelled after the nodes staged it: the blocks held for it are
    # freed at once, not after their 30 s.
    def held():
        return sum(staging(n)["bytes_held"] for n in nodes)
    script = ("import sys, aquifer.stage as s\n"
              "kw = dict(world_size=2, stream='cancel-check', credentials=sys.argv[2])\n"
              "if sys.argv[3] == 'stage':\n"
              "    print(s.stage(sys.argv[1], batch_size=16, seed=11, node_stats=sys.argv[4].split(','), **kw))\n"
              "else:\n"
              "    print(s.cancel(sys.argv[1], **kw))\n")
    stats_addrs = ",".join(f"127.0.0.1:{n.metrics}" for n in nodes)
    # Other objects than the job's (whose blocks its loaders' plans still hold).
    r = subprocess.run([AQ, "--credentials", creds, "cp", "-r", tf, f"aquifer://127.0.0.1:{nodes[0].port}/imagenet/tf2"],
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"a second copy of the shards uploaded: {r.stderr[-300:]}")
    data2 = data[:-len("/tf")] + "/tf2"
    held_before = held()
    r = subprocess.run(["/usr/bin/python3", "-c", script, data2, creds, "stage", stats_addrs], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, PYTHONPATH=PYTHONPATH))
    held_staged = held()
    check(r.returncode == 0 and held_staged > held_before,
          f"a second plan staged: {held_before} -> {held_staged} bytes held; {r.stdout[-300:]} {r.stderr[-300:]}")
    r = subprocess.run(["/usr/bin/python3", "-c", script, data2, creds, "cancel"], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, PYTHONPATH=PYTHONPATH))
    check(r.returncode == 0 and "cancel-check-rank1" in r.stdout, f"cancel(): {r.stdout} {r.stderr[-300:]}")
    check(s3lib.until(lambda: held() <= held_before, 5, 0.2),
          f"the cancelled plan's blocks are freed at once: {held_staged} -> {held()} bytes held (was {held_before})")
finally:
    subprocess.run(["scancel", "--full", "--quiet", "-u", "root"], env=dict(os.environ, SLURM_CONF=os.path.join(
        tmp, "slurm", "slurm.conf")), capture_output=True, timeout=30)
    for p in daemons:
        p.terminate()
    for p in daemons:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
    pid = os.path.join(tmp, "slurm", "munged.pid")
    if os.path.exists(pid):
        try:
            os.kill(int(open(pid).read().strip()), 15)
        except (OSError, ValueError):
            pass
    for n in nodes:
        n.stop()
    if etcd:
        etcd.stop()
    if check.failed:
        s3lib.print_logs(tmp, ("slurm/log/slurmctld.log", "slurm/log/slurmd.log", "n1.log"), 15)
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
