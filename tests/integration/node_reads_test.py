"""bench train --node-stats against a real node: the node's block reads by
source (staged ahead of the loader's plan, RAM cache, media) per epoch in the
summary and the text output, the series and the report's charts; a node
that cannot be asked is refused before the run.
usage: node_reads_test.py AQUIFER"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
check = s3lib.Checks()
os.environ["AWS_SHARED_CREDENTIALS_FILE"] = "/dev/null"


run = s3lib.Cli(AQ).ok


with tempfile.TemporaryDirectory(prefix="aq_node_reads_") as tmp:
    run("dataset", "synth", "--out", f"{tmp}/img", "--images", 400, "--profile", "small", "--no-progress")
    # A cache of a few blocks: most reads come from the pool, staged ahead of the plan.
    node = s3lib.Node(AQ, f"{tmp}/node", "--anonymous", "--cache-size", "1MiB")
    try:
        url = f"aquifer://127.0.0.1:{node.port}/train/img"
        run("cp", "-r", f"{tmp}/img", url)
        stats = f"127.0.0.1:{node.metrics}"
        # Epochs end at rank 0's steps: reads the pipeline makes ahead (a few
        # batches) count in the epoch before, so epochs are many steps long.
        args = ["bench", "train", url, "--batch", 8, "--size", 64, "--step-time", 0.01, "--epochs", 2,
                "--min-steps", 1, "--node-stats", stats, "--no-progress"]
        r = run(*args, "--json", "--out", f"{tmp}/res")
        result = json.loads(r.stdout)
        reads = result["summary"].get("node_reads", {})
        epochs = reads.get("epochs", [])
        check(len(epochs) == result["config"]["epochs"] == 2, f"one reading per epoch: {reads}")
        for e in epochs:
            total = e["staged"] + e["cache"] + e["media"]
            check(total >= 300, f"epoch {e['epoch']}: about one block read per image: {e}")
            share = e["staged_fraction"] + e["cache_fraction"] + e["media_fraction"]
            check(abs(share - 1) < 1e-6, f"epoch {e['epoch']}: the fractions add up: {e}")
        check(reads["staged"] + reads["cache"] + reads["media"] >= 800, f"every image read each epoch: {reads}")
        check(reads.get("staged", 0) > 0, f"the loader's plan staged blocks: {reads}")
        check(abs(reads["staged"] - sum(e["staged"] for e in epochs)) < 1e-6, f"the epochs add up to the run: {reads}")
        names = [c["name"] for c in result.get("series", {}).get("columns", [])]
        check({"node.reads.staged", "node.reads.cache", "node.reads.media"} <= set(names), f"series: {names}")
        r = run(*args)
        check("node reads" in r.stdout and "epoch 2:" in r.stdout, f"text output: {r.stdout}")
        r = run("report", f"{tmp}/res", "--output", f"{tmp}/report.html")
        html = open(f"{tmp}/report.html", encoding="utf-8").read()
        check("Node block reads by source, per epoch" in html and "epoch 2: staged" in html, "report charts")
        # A node that is not there: refused before the run, naming the flag.
        r = run("bench", "train", url, "--batch", 8, "--size", 64, "--node-stats", "127.0.0.1:1", expect=2)
        check("--node-stats" in r.stderr, f"names the flag: {r.stderr}")
    finally:
        node.stop()
check.finish()
