#!/usr/bin/python3
"""No single point of failure, no cut bodies: a real etcd and six real node
processes on 127.0.0.1, a bucket protected with ec:4+2 holding TFRecord
shards of real JPEGs.

  1. A Loader epoch through aquifer://NODE1/... with the seed fixed: NODE1,
     the node the URL names, is killed with SIGKILL part way. The epoch
     delivers every sample exactly once, in the order of an undisturbed run
     of the same seed (no sample replaced, none skipped), because the client
     learned the other members and fails over to them.
  2. Concurrent readers (boto3 through live nodes, the aquifer:// client
     through a URL naming a dead node and a live one) while etcd is frozen
     with SIGSTOP and then another node is killed: every GET either returns
     the whole object, verified, or fails loudly. A 200 whose body is short
     or wrong and that the client takes as complete is counted; there must
     be none.
  2b. The only holder of a block (a 1-replica bucket) killed and restarted
     while a GET streams the object through another node: the node waits
     for the holder and continues the same body, counted as resumed.
  3. An object whose second block lost more than M fragments (one holder
     dead, two fragments flipped on disk): boto3, awscli (when installed),
     `aquifer cp` and the mount (when /dev/fuse exists) each report an
     error; none gets the object's first block as if it were the object.
  4. PUTs the cluster cannot place answer 503 with Retry-After.

usage: cluster_failover_test.py path/to/aquifer [path/to/build]"""
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
import s3lib  # noqa: E402  (clears the caller's AWS settings)

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
BUILD = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else os.path.dirname(AQ)
sys.path.insert(0, os.path.join(BUILD, "python"))
check = s3lib.Checks()
tmp = tempfile.mkdtemp(prefix="aq_failover_test_")
creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
os.environ["AQUIFER_CREDENTIALS"] = creds
free_port, until = s3lib.free_port, s3lib.until

etcd = s3lib.Etcd(tmp)
META = etcd.url
nodes = {}
solo = None


def start(name, port=None, mport=None):
    port, mport = port or free_port(), mport or free_port()
    log = os.path.join(tmp, name + ".log")
    proc = subprocess.Popen([AQ, "serve", "--data", os.path.join(tmp, name), "--listen", f"127.0.0.1:{port}",
                             "--metrics", f"127.0.0.1:{mport}", "--credentials", creds, "--meta", META,
                             "--replicas", "2", "--lease-ttl", "3", "--block-size", "1MiB", "--node-id", name,
                             "--cache-size", "0"], stdout=open(log, "w"), stderr=subprocess.STDOUT)
    nodes[name] = {"proc": proc, "port": port, "metrics": mport, "log": log}
    if not until(lambda: "cluster: node" in open(log).read(), 20):
        raise SystemExit(f"node {name} did not start:\n" + open(log).read())


def addr(name):
    return f"127.0.0.1:{nodes[name]['port']}"


def kill(name):
    nodes[name]["proc"].send_signal(signal.SIGKILL)
    nodes[name]["proc"].wait()


def s3(name, attempts=1):
    return boto3.client("s3", endpoint_url=f"http://{addr(name)}", aws_access_key_id=s3lib.KEY,
                        aws_secret_access_key=s3lib.SECRET, region_name="us-east-1",
                        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                      retries={"max_attempts": attempts}, read_timeout=60))


aq = s3lib.Cli(AQ)


def node_stats(name):
    r = aq("stats", f"127.0.0.1:{nodes[name]['metrics']}", "--json")
    return json.loads(r.stdout or "{}")


def layout(key, bucket="ecb"):
    r = aq("stat-file", f"{bucket}/{key}", "--meta", META, "--json")
    return json.loads(r.stdout) if r.returncode == 0 else {}


def epoch(url, kill_at=None, victim=None):
    """One epoch's sample ids in delivery order (and how many were replaced)."""
    import aquifer
    # A small shuffle buffer and one batch ahead: samples are read as the
    # epoch goes, so most reads come after the kill.
    loader = aquifer.Loader(url, batch_size=16, image_size=32, seed=11, threads=2, framework="numpy", ids=True,
                            shuffle_buffer=16, prefetch=1, readers=1, retry_deadline=60)
    order = []
    for step, (_, _, ids) in enumerate(loader):
        order.extend(int(i) for i in ids)
        if kill_at is not None and step == kill_at:
            kill(victim)
    bad = (loader.stats() or {}).get("bad_samples", 0)
    loader.close()
    return order, bad


T0 = time.time()


def phase(what):
    print(f"  [{time.time() - T0:5.1f} s] {what}", flush=True)


try:
    for n in ("n1", "n2", "n3", "n4", "n5", "n6"):
        start(n)
    c = s3("n3")
    r = aq("cluster", "protect", "ecb", "--ec", "4+2", "--meta", META)
    check(r.returncode != 0 and "aquifer mb" in r.stderr, "protect before the bucket exists says how to make it: "
          + r.stderr.strip())
    r = aq("mb", f"aquifer://{addr('n3')}/ecb")
    check(r.returncode == 0 and "make_bucket: ecb" in r.stdout, "aquifer mb: " + r.stdout + r.stderr)
    r = aq("cluster", "protect", "ecb", "--ec", "4+2", "--meta", META)
    check(r.returncode == 0, "cluster protect ecb --ec 4+2: " + r.stderr)
    c.create_bucket(Bucket="one")
    r = aq("cluster", "protect", "one", "--replicas", "1", "--meta", META)
    check(r.returncode == 0, "cluster protect one --replicas 1: " + r.stderr)
    time.sleep(2.5)  # every node re-reads the policies every 2 s

    # A real image dataset, packed, copied in: shards of several 1 MiB blocks.
    raw, tf = os.path.join(tmp, "raw"), os.path.join(tmp, "tf")
    for cmd in (["dataset", "synth", "--out", raw, "--classes", "8", "--images", "240", "--seed", "5",
                 "--no-progress"], ["dataset", "pack", raw, "--out", tf, "--shards", "4", "--no-progress"]):
        r = aq(*cmd)
        if r.returncode != 0:
            raise SystemExit(" ".join(cmd) + ": " + r.stderr)
    r = aq("cp", "-r", tf, f"aquifer://{addr('n3')}/ecb/tf")
    check(r.returncode == 0, "the shards are copied in: " + r.stderr)
    shard = sorted(n for n in os.listdir(tf) if n.startswith("train-"))[0]
    blocks = layout("tf/" + shard).get("blocks", [])
    check(len(blocks) >= 3 and all(b.get("ec") == "4+2" for b in blocks),
          f"a shard is {len(blocks)} erasure-coded blocks")

    # Written while all six nodes are up: ec:4+2 places a stripe on six.
    objects = {}
    for i in range(4):
        body = os.urandom((3 << 20) + 4096 * i)
        c.put_object(Bucket="ecb", Key=f"obj/{i}", Body=body)
        objects[f"obj/{i}"] = (len(body), hashlib.md5(body).hexdigest())
    body = os.urandom(3 << 20)
    c.put_object(Bucket="ecb", Key="bad/x", Body=body)

    phase("loader epochs")
    # 1. The node the URL names dies part way through an epoch.
    url = f"aquifer://{addr('n1')}/ecb/tf"
    calm, _ = epoch(url)
    check(len(calm) == 240 and len(set(calm)) == 240, f"an undisturbed epoch: {len(calm)} samples, "
          f"{len(set(calm))} distinct")
    hurt, bad = epoch(url, kill_at=1, victim="n1")
    check(hurt == calm, f"kill -9 of the URL's node mid-epoch: the same {len(calm)} samples in the same order "
          f"({len(hurt)} delivered, {len(set(hurt))} distinct, "
          f"{sum(a != b for a, b in zip(hurt, calm))} positions differ)")
    check(bad == 0, f"no sample counted bad, so none replaced by another ({bad})")

    phase("readers under faults")
    # 2. Readers under a frozen etcd and another kill -9.
    tally = {"whole": 0, "errors": 0, "short_as_complete": 0, "why": []}
    lock = threading.Lock()
    stop = threading.Event()

    def boto_reader(name):
        client = s3(name)
        while not stop.is_set():
            for k, (size, digest) in objects.items():
                try:
                    body = client.get_object(Bucket="ecb", Key=k)["Body"].read()
                except Exception as e:  # noqa: BLE001 (an error is an honest outcome)
                    with lock:
                        tally["errors"] += 1
                        tally["why"].append(str(e)[:160])
                    continue
                with lock:
                    if len(body) == size and hashlib.md5(body).hexdigest() == digest:
                        tally["whole"] += 1
                    else:
                        tally["short_as_complete"] += 1

    client_tally = {"ok": 0, "failed": 0, "wrong": 0, "why": ""}

    def client_reader():
        i = 0
        while not stop.is_set():
            d = os.path.join(tmp, f"cp-{i}")
            i += 1
            r = aq("cp", "-r", f"aquifer://{addr('n1')},{addr('n4')}/ecb/obj", d)
            if r.returncode != 0:
                client_tally["failed"] += 1
                client_tally["why"] = r.stderr[-300:]
            else:
                good = all(hashlib.md5(open(os.path.join(d, k.split("/")[1]), "rb").read()).hexdigest() == h
                           for k, (_, h) in objects.items())
                client_tally["ok" if good else "wrong"] += 1
            shutil.rmtree(d, ignore_errors=True)

    threads = [threading.Thread(target=boto_reader, args=(n,)) for n in ("n3", "n4", "n5")]
    threads.append(threading.Thread(target=client_reader))
    for t in threads:
        t.start()
    time.sleep(1)
    etcd.p.send_signal(signal.SIGSTOP)
    time.sleep(6)
    etcd.p.send_signal(signal.SIGCONT)
    time.sleep(1)
    kill("n2")
    time.sleep(6)
    stop.set()
    for t in threads:
        t.join()
    check(tally["short_as_complete"] == 0 and tally["whole"] > 0,
          f"GETs under etcd SIGSTOP and kill -9: {tally['whole']} whole, {tally['errors']} errors, "
          f"{tally['short_as_complete']} short or wrong bodies taken as complete {tally['why'][:2]}")
    check(client_tally["wrong"] == 0 and client_tally["ok"] > 0 and client_tally["failed"] == 0,
          f"aquifer cp through aquifer://DEAD,LIVE: {client_tally}")
    live = [n for n in nodes if nodes[n]["proc"].poll() is None]
    resumed = sum(node_stats(n).get("bodies", {}).get("resumed", 0) for n in live)
    cut = sum(node_stats(n).get("bodies", {}).get("cut", 0) for n in live)
    print(f"  bodies resumed {resumed}, reset {cut}, GET errors seen by boto3 {tally['errors']}")

    # 2b. The only holder of a block restarted while a GET streams: the
    # node serving it waits for the holder and continues the same body.
    phase("a holder restarted under a GET")
    big = os.urandom(40 << 20)
    c.put_object(Bucket="one", Key="big", Body=big)
    held = [b["nodes"][0] for b in layout("big", "one")["blocks"]]
    victim = next(n for n in held[32:] if n != "n4")
    resumed_before = node_stats("n4").get("bodies", {}).get("resumed", 0)
    stream = s3("n4").get_object(Bucket="one", Key="big")["Body"]
    got = [stream.read(1 << 20)]  # n4 is now blocked on its send, a few MiB ahead
    port_v, mport_v = nodes[victim]["port"], nodes[victim]["metrics"]
    kill(victim)
    failure = []

    def rest():
        try:
            got.append(stream.read())
        except Exception as e:  # noqa: BLE001
            failure.append(e)

    reader = threading.Thread(target=rest)
    reader.start()
    # The holder comes back only once n4 has tripped on it mid-body.
    tripped = until(lambda: "continuing from other holders" in open(nodes["n4"]["log"]).read(), 20, 0.1)
    check(tripped, "n4 finds the block's holder gone while the GET streams")
    start(victim, port_v, mport_v)
    reader.join()
    whole = b"".join(got)
    check(not failure and whole == big, f"a GET across its block holder's restart: {len(whole)} of {len(big)} "
          f"bytes, {'equal' if whole == big else 'different'} {failure[:1]}")
    resumed = node_stats("n4").get("bodies", {}).get("resumed", 0) - resumed_before
    check(resumed >= 1, f"the node counts the body it continued ({resumed})")

    phase("an unreadable object")
    # 3. More than M fragments of block 1 unreadable: everyone sees an error.
    frags = layout("bad/x")["blocks"][1]["fragments"]
    flipped = 0
    for fr in frags:
        if fr["node"] in ("n1", "n2") or flipped == 1:
            continue  # n1 and n2 are dead: one more lost fragment makes 3 > M
        path = os.path.join(tmp, fr["node"], "pool-default", "blocks", fr["id"][:2], fr["id"])
        with open(path, "r+b") as f:
            f.seek(100)
            b = f.read(1)
            f.seek(100)
            f.write(bytes([b[0] ^ 0xFF]))
        flipped += 1
    lost = sum(fr["node"] in ("n1", "n2") for fr in frags) + flipped
    check(lost > 2, f"block 1 of bad/x has {lost} of 6 fragments unreadable")
    cut_before = node_stats("n3").get("bodies", {}).get("cut", 0)
    try:
        got = s3("n3").get_object(Bucket="ecb", Key="bad/x")["Body"].read()
        check(False, f"boto3 took a {len(got)}-byte body of a {len(body)}-byte object without an error")
    except Exception as e:  # noqa: BLE001
        check(True, f"boto3 reports the unreadable object: {type(e).__name__}")
    cut = node_stats("n3").get("bodies", {}).get("cut", 0) - cut_before
    check(cut == 1, f"the node reset that one response and counts it ({cut})")
    if shutil.which("aws") or os.path.exists("/usr/bin/aws"):
        env = dict(os.environ, AWS_ACCESS_KEY_ID=s3lib.KEY, AWS_SECRET_ACCESS_KEY=s3lib.SECRET,
                   AWS_DEFAULT_REGION="us-east-1", AWS_MAX_ATTEMPTS="1")
        env.pop("AWS_CA_BUNDLE", None)
        r = subprocess.run(["aws", "--endpoint-url", f"http://{addr('n4')}", "s3", "cp", "s3://ecb/bad/x",
                            os.path.join(tmp, "aws-x")], capture_output=True, text=True, env=env)
        check(r.returncode != 0, "awscli reports the unreadable object: " + r.stderr.strip()[-200:])
    r = aq("cp", f"aquifer://{addr('n5')}/ecb/bad/x", os.path.join(tmp, "cp-x"), extra_env={"AQUIFER_RETRY_DEADLINE": "5"})
    check(r.returncode != 0, "aquifer cp reports the unreadable object: " + r.stderr.strip()[-200:])
    if os.path.exists("/dev/fuse") and os.geteuid() == 0:
        mnt = os.path.join(tmp, "mnt")
        os.makedirs(mnt)
        m = aq("mount", f"aquifer://{addr('n5')}/ecb", mnt, extra_env={"AQUIFER_RETRY_DEADLINE": "5"})
        if m.returncode == 0:
            try:
                with open(os.path.join(mnt, "bad", "x"), "rb") as f:
                    data = f.read()
                check(False, f"the mount read {len(data)} bytes of a {len(body)}-byte object without an error")
            except OSError as e:
                check(True, f"the mount reports the unreadable object: {e}")
            finally:
                aq("umount", mnt)
        else:
            check(False, "mount: " + m.stderr)

    phase("a PUT that cannot be placed")
    # 4. Too few nodes for the policy (four of six up, ec:4+2 needs six):
    # 503 with Retry-After, which clients retry.
    try:
        s3("n4").put_object(Bucket="ecb", Key="late", Body=os.urandom(2 << 20))
        check(False, "a PUT with 3 of 6 nodes up for ec:4+2 was accepted")
    except Exception as e:  # noqa: BLE001
        resp = getattr(e, "response", {})
        code = resp.get("ResponseMetadata", {}).get("HTTPStatusCode")
        headers = resp.get("ResponseMetadata", {}).get("HTTPHeaders", {})
        check(code == 503 and "retry-after" in headers,
              f"a PUT the cluster cannot place: HTTP {code}, Retry-After {headers.get('retry-after')}")

    # 5. Past the deadline an outage is raised as one, never skipped as damage.
    phase("an outage past the deadline")
    import aquifer
    solo = subprocess.Popen([AQ, "serve", "--data", os.path.join(tmp, "solo"), "--listen", "127.0.0.1:0",
                             "--credentials", creds], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    solo_port = int(solo.stdout.readline().split("http://127.0.0.1:")[1].split()[0])
    r = aq("cp", "-r", tf, f"aquifer://127.0.0.1:{solo_port}/solo/tf")
    check(r.returncode == 0, "shards copied to a single node: " + r.stderr)
    loader = aquifer.Loader(f"aquifer://127.0.0.1:{solo_port}/solo/tf", batch_size=16, image_size=32, seed=11,
                            threads=2, framework="numpy", shuffle_buffer=16, prefetch=1, readers=1, on_error="skip",
                            retry_deadline=2)
    raised, delivered = None, 0
    try:
        for step, _ in enumerate(loader):
            delivered += 1
            if step == 0:
                solo.kill()
                solo.wait()
    except Exception as e:  # noqa: BLE001
        raised = e
    check(isinstance(raised, ConnectionError) and f"127.0.0.1:{solo_port}" in str(raised),
          f"the only node killed under on_error='skip': ConnectionError naming it after {delivered} batches, "
          f"not replaced samples: {type(raised).__name__}: {str(raised)[:300]}")
    loader.close()
finally:
    if solo is not None and solo.poll() is None:
        solo.kill()
        solo.wait()
    for n in nodes.values():
        if n["proc"].poll() is None:
            n["proc"].kill()
            n["proc"].wait()
    try:
        etcd.p.send_signal(signal.SIGCONT)
    except Exception:  # noqa: BLE001
        pass
    etcd.stop()
    if check.failed == 0:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print("kept", tmp)
check.finish()
