"""The HTML report reviewed in a real browser: every kind of result (bench
storage from the page cache, from a cold disk and over aquifer:// from a real
node; bench train GPU-bound, input-bound and with too few steps; bench
pipeline, sweep, infer, size with a small and a huge cluster, model cache of
a 22 TB dataset) rendered by `aquifer report` and opened in headless Chromium
at a wide and a narrow window. In the browser the report checks its own
layout (every SVG text inside its chart, no two texts overlapping, no
exponent notation, nan or inf in what is shown); the test reads that back,
checks each card names its data path, and keeps PNG screenshots for people
(under the build directory's report-screenshots/, or --screenshots DIR).

usage: report_browser_test.py path/to/aquifer [--screenshots DIR]"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
SHOTS = (sys.argv[sys.argv.index("--screenshots") + 1] if "--screenshots" in sys.argv
         else os.path.join(os.path.dirname(AQ), "report-screenshots"))
check = s3lib.Checks()


aq = s3lib.Cli(AQ).ok


def chromium(html, width, out_dir):
    """The DOM after the report's script ran, and a screenshot, at one width."""
    exe = shutil.which("chromium")
    common = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--hide-scrollbars", f"--user-data-dir={out_dir}/profile-{width}", f"--window-size={width},900"]
    dom = subprocess.run(common + ["--dump-dom", "file://" + html], capture_output=True, text=True, timeout=120)
    # A screenshot as tall as the page: the height from the page's own
    # length is unknown here, so a tall window (the report is a few screens).
    shot = os.path.join(SHOTS, f"report-{width}.png")
    tall = [a if not a.startswith("--window-size") else f"--window-size={width},9000" for a in common]
    subprocess.run(tall + [f"--screenshot={shot}", "file://" + html], capture_output=True, text=True, timeout=120)
    return dom.stdout, shot


def not_blank(png):
    try:
        from PIL import Image
    except ImportError:
        return os.path.getsize(png) > 10000
    img = Image.open(png).convert("RGB").resize((200, 800))
    return len(set(img.getdata())) > 50


def main():
    if not shutil.which("chromium"):
        print("FAIL: chromium is not installed (scripts/install-deps.sh installs it)", file=sys.stderr)
        sys.exit(1)
    tmp = tempfile.mkdtemp(prefix="aq_report_browser_")
    os.makedirs(SHOTS, exist_ok=True)
    node = None
    try:
        raw, tf, res = os.path.join(tmp, "raw"), os.path.join(tmp, "tf"), os.path.join(tmp, "res")
        aq("dataset", "synth", "--out", raw, "--classes", 4, "--images", 96, "--seed", 3, "--no-progress")
        aq("dataset", "pack", raw, "--out", tf, "--shards", 4, "--no-progress")
        base = ["--no-progress", "--out", res, "--interval", 0.2]
        # Storage: warm (the files were just written: page cache), from the disk
        # (O_DIRECT: a dataset this small is in the page cache after one
        # read, and the report would rightly say so), over a node.
        aq("bench", "storage", tf, "-r", 2, "-d", 1, "--ramp", 0.2, *base)
        aq("bench", "storage", tf, "-r", 2, "-d", 1, "--ramp", 0.2, "--direct", "--request-size", "64KiB", *base)
        creds = os.path.join(tmp, "creds")
        s3lib.write_credentials(creds)
        node = s3lib.Node(AQ, os.path.join(tmp, "node"), credentials=creds)
        s3lib.boto(node.port).create_bucket(Bucket="data")
        url = f"aquifer://127.0.0.1:{node.port}/data/tf"
        aq("--credentials", creds, "cp", "-r", tf, url, "--no-progress")
        aq("--credentials", creds, "bench", "storage", url, "-r", 2, "-d", 1, "--ramp", 0.2, *base)
        # Training: GPU-bound, input-bound, too few steps.
        aq("bench", "train", tf, "--batch", 8, "--size", 64, "--step-time", 0.03, *base)
        aq("bench", "train", tf, "--batch", 8, "--size", 64, "--gpus", 2, "--gpu", "h100", "--model", "alexnet", *base)
        aq("bench", "train", tf, "--batch", 8, "--size", 64, "--steps", 4, *base)
        aq("bench", "infer", tf, "--size", 64, "--batches", "4,16,64", *base)
        aq("bench", "sweep", "--param", "readers", "--values", "1,2,4", "--out", res, "--", "storage", tf, "-d", 0.5,
           "--ramp", 0.1)
        aq("size", "--gpus", 72, "--mbps-per-gpu", 80, "--out", res)
        aq("size", "--gpus", 250000, "--workload", "inception4-train-large", "--out", res)
        aq("model", "cache", "--dataset", "22.2TB", "--client-cache", "512GB", "--storage-cache", "2TB", "--out", res)
        aq("bench", "pipeline", tf, "--size", 64, "--batch", 8, "--no-progress", "--out", res)
        html = os.path.join(tmp, "report.html")
        r = aq("report", res, "-o", html, "--json")
        summary = json.loads(r.stdout) if r.returncode == 0 else {}
        check(summary.get("results", 0) >= 11, f"every result in the report: {summary}")
        text = open(html, encoding="utf-8").read()

        # Without a browser: each card titled with its data path.
        heads = re.findall(r"<h2>([^<]*)</h2>", text)
        check(any("bench storage · page cache" in h for h in heads), f"a warm storage run says page cache: {heads}")
        check(any("bench storage · storage node" in h for h in heads), f"the node run says storage node: {heads}")
        check(any(h.startswith("bench storage · local disk") for h in heads),
              f"the cold run says local disk: {heads}")
        check(sum(h.startswith("bench train · ") for h in heads) == 3, f"train cards carry a data path: {heads}")
        check("22.2 TB" in text and "2.22e" not in text, "a 22 TB dataset written in human units")
        check("not enough samples" in text, "the short run's verdict is 'not enough samples'")
        check("/proc/self/io" in text, "this process's own reads are charted and labelled as such")
        check("whole machine" in text, "machine-wide counters are labelled as such")

        for width in (1400, 760):
            dom, shot = chromium(html, width, tmp)
            charts = re.search(r'data-charts="(\d+)"', dom)
            rendered = re.search(r'data-charts-rendered="(\d+)"', dom)
            problems = re.search(r"data-layout-problems=\"([^\"]*)\"", dom)
            if not check(charts and rendered and problems, f"the report's script ran in Chromium at {width} px"):
                print(dom[:2000], file=sys.stderr)
                continue
            n, ok = int(charts.group(1)), int(rendered.group(1))
            blank = re.findall(r'aria-label="([^"]*)" data-rendered="0"', dom)
            check(n >= 20 and ok == n, f"{ok} of {n} charts drew something at {width} px; blank: {blank}")
            found = json.loads(problems.group(1).replace("&quot;", '"').replace("&amp;", "&"))
            check(found == [], f"layout problems at {width} px: {found}")
            check(os.path.exists(shot) and not_blank(shot), f"a screenshot at {width} px: {shot}")
        print(f"screenshots in {SHOTS}")
    finally:
        if node:
            node.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    check.finish()


if __name__ == "__main__":
    main()
