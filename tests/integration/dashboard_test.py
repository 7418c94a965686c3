#!/usr/bin/python3
"""The live dashboard (/dashboard on a node's metrics address) in a real
browser, against a 3-node cluster under load.

Headless Chromium is driven over the DevTools protocol. The test watches the
nodes' own /stats at the same time, so it knows when each event really
happened, and checks the page shows it within 5 seconds:
- all three members up; reads and writes moving the charts;
- a tiering policy added: blocks move between pools, the page logs the move;
- a node killed with SIGKILL: shown down (it stops answering before its
  lease expires), then the survivors' repair copying blocks is logged.
At a wide and a narrow window the page checks its own layout (texts inside
their charts, none overlapping, no nan/inf/exponents shown, nothing wider
than the window); screenshots are kept under the build directory's
dashboard-screenshots/ (or --screenshots DIR). The address serves the page
with a content security policy that lets it fetch only from itself.
usage: dashboard_test.py path/to/aquifer [--screenshots DIR]"""
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
SHOTS = (sys.argv[sys.argv.index("--screenshots") + 1] if "--screenshots" in sys.argv
         else os.path.join(os.path.dirname(AQ), "dashboard-screenshots"))
SHOWN_WITHIN = 5.0  # seconds from an event to the page showing it
if not shutil.which("chromium"):
    print("SKIP: chromium is not installed (scripts/install-deps.sh installs it)")
    sys.exit(77)
try:
    import websocket  # Debian's python3-websocket
except ImportError:
    print("SKIP: python3-websocket is not installed (scripts/install-deps.sh installs it)")
    sys.exit(77)
check = s3lib.Checks()
tmp = tempfile.mkdtemp(prefix="aq_dashboard_")
creds = s3lib.write_credentials(os.path.join(tmp, "keys"))


class Browser:
    """One headless Chromium page, driven over the DevTools protocol."""

    def __init__(self):
        self.port = s3lib.free_port()
        self.p = subprocess.Popen(
            [shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--hide-scrollbars", "--remote-allow-origins=*", f"--remote-debugging-port={self.port}",
             f"--user-data-dir={tmp}/chromium", "--window-size=1280,1000", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "chromium.log"), "w"))
        pages = []

        def listed():
            try:
                pages[:] = [t for t in json.loads(urllib.request.urlopen(
                    f"http://127.0.0.1:{self.port}/json/list", timeout=2).read()) if t["type"] == "page"]
            except OSError:
                return False
            return bool(pages)
        if not s3lib.until(listed, 30, 0.2):
            raise SystemExit("FAIL: chromium's DevTools endpoint did not come up")
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=30)
        self.n = 0

    def call(self, method, **params):
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            m = json.loads(self.ws.recv())
            if m.get("id") == self.n:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m["result"]

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def size(self, width, height):
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def screenshot(self, path):
        height = self.eval("document.documentElement.scrollHeight")
        width = self.eval("document.documentElement.clientWidth")
        self.size(width, max(600, min(int(height), 6000)))
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return os.path.getsize(path)

    def close(self):
        try:
            self.ws.close()
        finally:
            self.p.terminate()
            self.p.wait(timeout=30)


def stats(node):
    try:
        return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{node.metrics}/stats", timeout=5).read())
    except OSError:
        return {}


def repair_sum(live, field):
    return sum(stats(n).get("cluster", {}).get("repair", {}).get(field, 0) for n in live)


def happened(pred, timeout):
    """The moment `pred` first held, polled every 0.1 s (None: never)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return time.monotonic()
        time.sleep(0.1)
    return None


def shown(browser, expr, since, what):
    """Seconds from `since` to the page showing `expr` true (checked)."""
    at = happened(lambda: browser.eval(expr), 30)
    check(at is not None, f"the dashboard shows {what}")
    if at is not None and since is not None:
        check(at - since <= SHOWN_WITHIN, f"{what}: shown {at - since:.1f} s after it happened (at most {SHOWN_WITHIN})")
        print(f"{what}: shown {at - since:.1f} s after it happened")


etcd, nodes, browser, stop = None, [], None, threading.Event()
try:
    os.makedirs(SHOTS, exist_ok=True)
    etcd = s3lib.Etcd(tmp)
    for name in ("n1", "n2", "n3"):
        nodes.append(s3lib.ClusterNode(
            AQ, tmp, name, etcd.url, creds, "--pool", f"flash={tmp}/{name}-flash,media=ssd", "--pool",
            f"archive={tmp}/{name}-archive,media=hdd", "--replicas", "2", "--lease-ttl", "3", "--block-size",
            "256KiB", "--repair-interval", "0.5", "--reclaim-delay", "1", "--tier-rate", "20"))
    n1 = nodes[0]
    base = f"http://127.0.0.1:{n1.metrics}"
    page = urllib.request.urlopen(base + "/dashboard", timeout=10)
    csp = page.headers.get("Content-Security-Policy", "")
    check("default-src 'none'" in csp and "connect-src 'self'" in csp,
          f"the page may fetch only from its own address: {csp}")
    check(page.read().startswith(b"<!DOCTYPE html>"), "/dashboard is an HTML page")
    def snapshot():
        return json.loads(urllib.request.urlopen(base + "/dashboard.json", timeout=10).read())
    check(s3lib.until(lambda: len(snapshot()["cluster"]["members"]) == 3, 10, 0.2),
          "/dashboard.json lists the three members")
    snap = snapshot()
    check("history" in snap and "t" in snap["history"] and "pools" in snap["stats"],
          "/dashboard.json has the history and the node's stats")

    c = s3lib.boto(n1.port)
    c.create_bucket(Bucket="data")
    for i in range(24):
        c.put_object(Bucket="data", Key=f"k{i:02}", Body=os.urandom(700_000))

    def load():
        clients = [s3lib.boto(n.port) for n in nodes[:2]]
        i = 0
        while not stop.is_set():
            cl = clients[i % 2]
            try:
                cl.get_object(Bucket="data", Key=f"k{i % 24:02}")["Body"].read()
                cl.put_object(Bucket="scratch" if i % 7 else "data", Key=f"w{i % 5}", Body=os.urandom(50_000))
            except Exception:  # noqa: BLE001 (a node killed under the load: the page shows it)
                pass
            i += 1
            time.sleep(0.02)
    c.create_bucket(Bucket="scratch")
    loader = threading.Thread(target=load, daemon=True)
    loader.start()

    browser = Browser()
    browser.call("Page.enable")
    browser.call("Page.navigate", url=base + "/dashboard")
    shown(browser, "document.querySelectorAll('tr[data-health=up]').length === 3", None, "three members up")
    shown(browser, "Number(document.body.dataset.polls || 0) >= 3", None, "a live page (three polls)")

    # ---- a tiering move ----
    r = subprocess.run([AQ, "tier", "policy", "add", "cold", "--pool", "archive", "--bucket", "data", "--meta",
                        etcd.url], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "tier policy add cold: " + r.stderr)
    moved = happened(lambda: repair_sum(nodes, "tiered") > 0, 60)
    check(moved is not None, "the nodes move blocks to the archive pool")
    shown(browser, "!!document.querySelector('li[data-kind=tiering]')", moved, "a tiering move")

    # ---- a node killed ----
    victim = nodes[2]
    victim.p.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    victim.p.wait()
    shown(browser, "!!document.querySelector('tr[data-node=n3][data-health=down]')", killed, "the killed node down")
    shown(browser, "!!document.querySelector('li[data-kind=down]')", killed, "the kill in the log")
    copying = happened(lambda: repair_sum(nodes[:2], "copied") > 0, 60)
    check(copying is not None, "the survivors copy blocks to restore protection")
    shown(browser, "!!document.querySelector('li[data-kind=repair]')", copying, "repair in progress")
    time.sleep(2)  # a few more points on the charts

    # ---- layout, at two widths ----
    for width in (1280, 420):
        browser.size(width, 1000)
        time.sleep(1.5)  # a poll at this width
        problems = browser.eval("window.aquiferLayout()")
        check(problems == [], f"layout at {width} px: {problems}")
        text = browser.eval("document.body.innerText")
        for want in ("Nodes", "Protection", "Pools on this node", "Scrub", "Tiering", "Staging", "Throughput",
                     "Latency", "flash (ssd)", "archive (hdd)"):
            check(want in text, f"the page at {width} px shows '{want}'")
        shot = os.path.join(SHOTS, f"dashboard-{width}.png")
        check(browser.screenshot(shot) > 20000, f"a screenshot at {width} px: {shot}")
    charts = browser.eval("document.querySelectorAll('svg.chart polyline').length")
    check(charts >= 8, f"the charts draw their series: {charts} lines")
finally:
    stop.set()
    if browser:
        browser.close()
    for n in nodes:
        n.stop()
    if etcd:
        etcd.stop()
    if check.failed:
        s3lib.print_logs(tmp, ("n1.log", "n2.log", "n3.log", "chromium.log"), 12)
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
