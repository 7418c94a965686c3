"""Staging a training job's first reads before the job starts.

    import aquifer.stage
    report = aquifer.stage.stage("aquifer://node:9000/imagenet/train", world_size=8, batch_size=256, seed=1,
                                 node_stats=["node1:9100", "node2:9100"], wait=120)
    print(report["staged_fraction"])

or, as a step of a Slurm job before the training step (examples/slurm):

    srun --ntasks=1 python3 -m aquifer.stage aquifer://node:9000/imagenet/train --world-size 8 \\
        --batch-size 256 --seed 1 --node-stats node1:9100,node2:9100

Every rank's read plan for the epoch (the order aquifer.Loader with the
same data, batch_size, seed, shuffle, shuffle_buffer, remainder and
world_size reads in) is sent to the nodes, which read the blocks it names
from their pools into their staging memory (`serve --stage-memory`, 512 MiB
by default: what does not fit waits its turn, and a staged block nobody
reads within 30 s is dropped). Nothing is read back here. With node_stats
(the nodes' --metrics addresses) it waits until their staging queues are
empty and reports the fraction of the planned block reads the nodes hold in
RAM (staged, shared by two reads, or already cached); the nodes' counters
are shared by every reader, so a busy cluster blurs the figure.

After the job (or when it is cancelled), `cancel()` / `--cancel` tells the
nodes to forget the plan: reads not yet staged are dropped and the blocks
held for it are freed at once instead of after their 30 s:

    srun --ntasks=1 python3 -m aquifer.stage aquifer://node:9000/imagenet/train --world-size 8 --cancel
"""
import argparse
import json
import os
import sys
import time
import urllib.request

from . import _aquifer

_COUNTS = ("planned", "staged", "shared", "resident", "skipped", "failed")


def _staging(address):
    url = address if "://" in address else f"http://{address}"
    with urllib.request.urlopen(url.rstrip("/") + "/stats", timeout=10) as r:
        j = json.loads(r.read())
    if "staging" not in j:
        raise RuntimeError(f"{address}: the node does not stage plans (serve --stage-memory 0?)")
    return j["staging"]


def stage(data, *, world_size=1, batch_size=256, seed=1, shuffle=True, shuffle_buffer=1024, remainder="drop",
          epoch=0, format="auto", ranks=None, stream=None, node_stats=None, wait=120.0, credentials=None,
          profile=None):
    """Sends the plan of `ranks` (default: every rank of world_size) for
    `epoch` and returns {reads, bytes, taken_up, streams}; with node_stats,
    waits at most `wait` seconds for the nodes to stage it and adds
    {staged_fraction, planned_blocks, staged_blocks, seconds, nodes}."""
    ranks = list(range(world_size)) if ranks is None else list(ranks)
    name = _stream_name(stream)
    before = {a: _staging(a) for a in node_stats or ()}
    t0 = time.monotonic()
    report = {"reads": 0, "bytes": 0, "taken_up": 0, "streams": []}
    for rank in ranks:
        sent = _aquifer.send_plan(
            f"{name}-rank{rank}", data=str(data), batch_size=batch_size, seed=seed, shuffle=shuffle,
            shuffle_buffer=shuffle_buffer if shuffle else 1, remainder=remainder, format=format, first_epoch=epoch,
            epochs=1, rank=rank, world_size=world_size, credentials=credentials, profile=profile)
        for k in ("reads", "bytes", "taken_up"):
            report[k] += sent[k]
        report["streams"].append(sent["stream"])
    if not node_stats:
        return report
    deadline = t0 + wait
    while True:
        now = {a: _staging(a) for a in node_stats}
        busy = sum(s["queued"] + s["reading"] for s in now.values())
        if busy == 0 or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    delta = {k: sum(now[a][k] - before[a][k] for a in node_stats) for k in _COUNTS}
    held = delta["staged"] + delta["shared"] + delta["resident"]
    report.update(planned_blocks=delta["planned"], staged_blocks=held, skipped_blocks=delta["skipped"],
                  failed_blocks=delta["failed"], waiting_blocks=busy,
                  staged_fraction=held / delta["planned"] if delta["planned"] else 0.0,
                  seconds=time.monotonic() - t0, nodes=len(node_stats))
    return report


def _stream_name(stream):
    return stream or f"stage-{os.environ.get('SLURM_JOB_ID', os.getpid())}"


def cancel(data, *, world_size=1, ranks=None, stream=None, credentials=None, profile=None):
    """Tells the nodes to forget the plans stage() sent for `ranks` (default:
    every rank of world_size) under `stream` (default: this Slurm job's):
    what is not yet staged is dropped, what was staged for it is freed.
    Returns the streams cancelled."""
    ranks = list(range(world_size)) if ranks is None else list(ranks)
    name = _stream_name(stream)
    done = []
    for rank in ranks:
        _aquifer.cancel_plan(f"{name}-rank{rank}", str(data), credentials or "", profile or "")
        done.append(f"{name}-rank{rank}")
    return done


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m aquifer.stage", description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="what the job's aquifer.Loader reads (aquifer://HOST:PORT/BUCKET/PREFIX)")
    ap.add_argument("--world-size", type=int, default=int(os.environ.get("SLURM_NTASKS", 1)),
                    help="the job's ranks (default: $SLURM_NTASKS, else 1)")
    ap.add_argument("--batch-size", type=int, default=256, help="per rank, as the job's Loader")
    ap.add_argument("--seed", type=int, default=1, help="the job's Loader seed")
    ap.add_argument("--no-shuffle", action="store_true", help="the job reads in order (shuffle=False)")
    ap.add_argument("--shuffle-buffer", type=int, default=1024)
    ap.add_argument("--remainder", choices=["drop", "pad"], default="drop")
    ap.add_argument("--epoch", type=int, default=0, help="the epoch the job starts at")
    ap.add_argument("--format", default="auto")
    ap.add_argument("--node-stats", default="", help="the nodes' --metrics addresses, comma-separated: wait for "
                    "them to stage the plan and print the staged fraction")
    ap.add_argument("--wait", type=float, default=120, help="seconds to wait for staging at most")
    ap.add_argument("--credentials", default=None, help="keys file (default: AQUIFER_CREDENTIALS, AWS's)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("--cancel", action="store_true", help="forget this job's plans instead (after the job, or in an "
                    "epilog): what is not staged yet is dropped, what was staged is freed")
    ap.add_argument("--stream", default=None, help="the plans' name (default: stage-$SLURM_JOB_ID)")
    a = ap.parse_args(argv)
    if a.cancel:
        try:
            streams = cancel(a.data, world_size=a.world_size, stream=a.stream, credentials=a.credentials)
        except (OSError, RuntimeError, ValueError) as e:
            print(f"aquifer.stage: {e}", file=sys.stderr)
            return 1
        print(json.dumps({"cancelled": streams}) if a.json else
              f"plans cancelled: {len(streams)} stream(s) ({streams[0]} ...)")
        return 0
    try:
        r = stage(a.data, world_size=a.world_size, batch_size=a.batch_size, seed=a.seed, shuffle=not a.no_shuffle,
                  shuffle_buffer=a.shuffle_buffer, remainder=a.remainder, epoch=a.epoch, format=a.format,
                  node_stats=[s for s in a.node_stats.split(",") if s], wait=a.wait, credentials=a.credentials,
                  stream=a.stream)
    except (OSError, RuntimeError, ValueError, TypeError) as e:
        print(f"aquifer.stage: {e}", file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps(r))
    else:
        print(f"plan sent: {r['reads']} reads, {r['bytes'] / 1e6:.1f} MB, for {a.world_size} rank(s), "
              f"epoch {a.epoch}; {r['taken_up']} taken up for staging")
        if "staged_fraction" in r:
            print(f"staged: {r['staged_blocks']} of {r['planned_blocks']} planned block reads "
                  f"({100 * r['staged_fraction']:.0f}%) in {r['seconds']:.1f} s on {r['nodes']} node(s)"
                  + (f"; {r['waiting_blocks']} still waiting" if r["waiting_blocks"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
