#!/usr/bin/python3
"""A real Prometheus (Debian's) scraping a 3-node cluster, with the shipped
alerting rules and Grafana dashboard.

- `promtool check metrics` has nothing to say about any node's /metrics
  (a cluster node's too: it adds membership, protection and repair series).
- Prometheus scrapes all three every second and loads
  deploy/prometheus/aquifer-alerts.yml.
- Every query of deploy/grafana/aquifer-dashboard.json (its variables set as
  Grafana would: job, every node, a rate interval) parses and returns data
  from the cluster under load, and the variables' label queries list the
  job and the three nodes. The dashboard's layout: ids unique, every panel
  titled and described, inside 24 columns, no two overlapping.
- One node killed with SIGKILL: Prometheus sees it down, the survivors
  report a member down and under-protected blocks, and AquiferNodeDown goes
  pending within seconds.
usage: prometheus_test.py path/to/aquifer SOURCE_DIR"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
SRC = os.path.abspath(sys.argv[2])
if not shutil.which("prometheus") or not shutil.which("promtool"):
    print("SKIP: prometheus and promtool (Debian package prometheus) are not installed")
    sys.exit(77)
check = s3lib.Checks()
tmp = tempfile.mkdtemp(prefix="aq_prometheus_")
creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
RULES = os.path.join(SRC, "deploy", "prometheus", "aquifer-alerts.yml")
DASHBOARD = os.path.join(SRC, "deploy", "grafana", "aquifer-dashboard.json")
RATE = "15s"


def get(url):
    return urllib.request.urlopen(url, timeout=20).read().decode()


def query(port, expr):
    """Prometheus' answer to an instant query: (status, result list)."""
    try:
        body = get(f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    except urllib.error.HTTPError as e:
        body = e.read().decode()
    j = json.loads(body)
    return j.get("status"), j.get("data", {}).get("result", []), j.get("error", "")


def as_grafana(expr):
    """The query as Grafana sends it for the dashboard's defaults."""
    return (expr.replace("$__rate_interval", RATE).replace('job=~"$job"', 'job=~"aquifer"')
            .replace('instance=~"$instance"', 'instance=~".*"').replace("$job", "aquifer"))


def targets(panel):
    return [t["expr"] for t in panel.get("targets", [])]


etcd, nodes, prom = None, [], None
try:
    # ---- the dashboard's shape (no cluster needed) ----
    dash = json.load(open(DASHBOARD))
    panels = dash["panels"]
    ids = [p["id"] for p in panels]
    check(len(ids) == len(set(ids)), f"panel ids are unique: {ids}")
    boxes = []
    for p in panels:
        g = p["gridPos"]
        check(g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24 and g["h"] > 0,
              f"panel '{p.get('title')}' fits in 24 columns: {g}")
        if p["type"] != "row":
            check(p.get("title") and p.get("description"), f"panel {p['id']} has a title and a description")
            check(p["type"] in ("stat", "timeseries") and targets(p), f"panel '{p['title']}' shows queries")
        for q in boxes:
            overlap = (g["x"] < q["x"] + q["w"] and q["x"] < g["x"] + g["w"] and g["y"] < q["y"] + q["h"] and
                       q["y"] < g["y"] + g["h"])
            check(not overlap, f"panel '{p.get('title')}' {g} overlaps no other ({q})")
        boxes.append(g)
    check(dash.get("uid") and dash.get("schemaVersion", 0) >= 36 and dash.get("title") == "aquifer",
          "the dashboard has a uid, a title and a current schemaVersion")
    names = {v["name"] for v in dash["templating"]["list"]}
    check(names == {"datasource", "job", "instance"}, f"variables: data source, job, node: {names}")
    check(all(t["datasource"]["uid"] == "${datasource}" for p in panels for t in p.get("targets", [])),
          "every query uses the data source variable (import picks the Prometheus)")

    # ---- a 3-node cluster ----
    etcd = s3lib.Etcd(tmp)
    for name in ("n1", "n2", "n3"):
        nodes.append(s3lib.ClusterNode(AQ, tmp, name, etcd.url, creds, "--lease-ttl", "2", "--repair-interval", "1"))
    for n in nodes:
        text = get(f"http://127.0.0.1:{n.metrics}/metrics")
        r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(),
              f"promtool check metrics on {n.name}: {(r.stdout + r.stderr)[-600:]}")
        for family in ("aquifer_cluster_nodes_up", "aquifer_repair_under_protected_blocks",
                       "aquifer_repair_copied_bytes_total", "aquifer_pool_size_bytes",
                       "aquifer_http_connections_open", "aquifer_http_connections_timed_out_total"):
            check(f"\n{family}" in text or f"\n{family}{{" in text, f"{n.name} exports {family}")

    # ---- Prometheus ----
    port = s3lib.free_port()
    config = os.path.join(tmp, "prometheus.yml")
    with open(config, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n")
        f.write(f"rule_files:\n  - {RULES}\n")
        f.write("scrape_configs:\n  - job_name: aquifer\n    static_configs:\n      - targets: [" +
                ", ".join(f"'127.0.0.1:{n.metrics}'" for n in nodes) + "]\n")
    prom = subprocess.Popen(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp}/tsdb",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(tmp, "prometheus.log"), "w"))
    check(s3lib.until(lambda: len([r for r in query(port, 'up{job="aquifer"} == 1')[1]]) == 3, 60, 0.5),
          "Prometheus scrapes all three nodes: " + str(query(port, "up")))
    rules = json.loads(get(f"http://127.0.0.1:{port}/api/v1/rules"))["data"]["groups"]
    loaded = sorted(r["name"] for g in rules for r in g["rules"])
    check("AquiferNodeDown" in loaded and "AquiferUnderProtected" in loaded and len(loaded) >= 8,
          f"Prometheus loaded the alerting rules: {loaded}")

    # Load through every node: writes, reads, errors, a bucket replicated on all.
    c = s3lib.boto(nodes[0].port)
    c.create_bucket(Bucket="data")
    for i in range(30):
        c.put_object(Bucket="data", Key=f"k{i}", Body=os.urandom(300_000))
    for rep in range(3):
        for n in nodes:
            cl = s3lib.boto(n.port)
            for i in range(0, 30, 3):
                cl.get_object(Bucket="data", Key=f"k{i}")["Body"].read()
            s3lib.error_code(lambda: cl.get_object(Bucket="data", Key="absent"))
        s3lib.until(lambda: False, 1.5)  # let a few scrapes see the rates move

    # ---- every dashboard query returns data ----
    empty = []
    for p in panels:
        for expr in targets(p):
            status, result, err = query(port, as_grafana(expr))
            if status != "success":
                check(False, f"'{p['title']}': Prometheus refuses {expr!r}: {err}")
            elif not result:
                empty.append((p["title"], expr))
    # Give the rates a little longer before calling a query empty.
    if empty:
        s3lib.until(lambda: all(query(port, as_grafana(e))[1] for _, e in empty), 20, 1)
        empty = [(t, e) for t, e in empty if not query(port, as_grafana(e))[1]]
    check(not empty, f"every dashboard query returns data from the cluster: empty: {empty}")
    n_queries = sum(len(targets(p)) for p in panels)
    print(f"{n_queries} dashboard queries over {len([p for p in panels if p['type'] != 'row'])} panels return data")
    for var in dash["templating"]["list"]:
        if var["type"] != "query":
            continue
        label = var["definition"].split(",")[-1].strip(" )")
        match = var["definition"][len("label_values("):].rsplit(",", 1)[0].replace('job=~"$job"', 'job=~"aquifer"')
        values = json.loads(get(f"http://127.0.0.1:{port}/api/v1/label/{label}/values?" +
                                urllib.parse.urlencode({"match[]": match})))["data"]
        want = ["aquifer"] if label == "job" else sorted(f"127.0.0.1:{n.metrics}" for n in nodes)
        check(sorted(values) == want, f"variable {var['name']} lists {want}: {values}")

    # ---- a node killed ----
    victim = nodes[2]
    victim.p.send_signal(signal.SIGKILL)
    victim.p.wait()
    down = s3lib.until(lambda: query(port, 'up{job="aquifer"} == 0')[1], 30, 0.5)
    check(down, "Prometheus sees the killed node down")
    members = 'max(aquifer_cluster_nodes_down{job=~"aquifer"})'
    check(s3lib.until(lambda: float(query(port, members)[1][0]["value"][1]) == 1, 30, 0.5),
          f"the survivors report one member down: {query(port, members)[1]}")
    under = 'max(aquifer_repair_under_protected_blocks{job=~"aquifer"})'
    check(s3lib.until(lambda: float(query(port, under)[1][0]["value"][1]) > 0, 30, 0.5),
          f"the survivors report under-protected blocks: {query(port, under)[1]}")

    def alert_state():
        alerts = json.loads(get(f"http://127.0.0.1:{port}/api/v1/alerts"))["data"]["alerts"]
        return [a["state"] for a in alerts if a["labels"].get("alertname") == "AquiferNodeDown"]
    check(s3lib.until(lambda: alert_state(), 20, 0.5), f"AquiferNodeDown is pending: {alert_state()}")
finally:
    if prom:
        prom.terminate()
        prom.wait(timeout=30)
    for n in nodes:
        n.stop()
    if etcd:
        etcd.stop()
    if check.failed:
        s3lib.print_logs(tmp, ("n1.log", "n2.log", "n3.log", "prometheus.log"), 12)
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
