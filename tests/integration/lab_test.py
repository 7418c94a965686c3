#!/usr/bin/python3
"""scripts/lab, checked from outside: hosts with their own addresses, links
shaped to their rate, partitions that cut what they name (both ways, one
way) and nothing else, process faults, a mount naming several nodes, no
same-host reads between hosts, and `down` leaving no namespace, link,
mount, process or state behind (a process started on a host by hand and a
frozen one included).

Needs root and network namespaces (exit 77 otherwise).

usage: lab_test.py path/to/aquifer
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lablib  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
NAME, SUBNET = "labt", "10.78.0"
LAB = [sys.executable, lablib.LAB_SCRIPT, "--name", NAME]
PY = sys.executable

lablib.require_lab()

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


_lab = lablib.runner(NAME)


def lab(*a, check_rc=True, timeout=120):
    return _lab(*a, check=check_rc, timeout=timeout)


def status():
    return json.loads(lab("status", "--json").stdout)


def on(host, *cmd, timeout=30):
    return subprocess.run(LAB + ["exec", host, "--"] + list(cmd), capture_output=True, text=True, timeout=timeout)


def reaches(src, dst_addr, port=9000, seconds=2):
    """Whether a TCP connection from host src to dst_addr:port opens within `seconds`."""
    code = (f"import socket; socket.create_connection(('{dst_addr}', {port}), timeout={seconds}).close()")
    return on(src, PY, "-c", code).returncode == 0


def udp_arrives(src, dst, dst_addr):
    """Whether a UDP datagram from host src reaches host dst (a one-way check: no reply involved)."""
    recv = subprocess.Popen(LAB + ["exec", dst, "--", PY, "-c",
                                   "import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                                   f"s.bind(('{dst_addr}', 9999)); s.settimeout(3); print(s.recv(100).decode())"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    for _ in range(5):
        on(src, PY, "-c", "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
                          f".sendto(b'hello', ('{dst_addr}', 9999))")
        time.sleep(0.1)
    out, _ = recv.communicate(timeout=10)
    return "hello" in out


def leftovers():
    left = []
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    left += [f"namespace {line.split()[0]}" for line in ns.splitlines() if line.startswith(f"aqlab-{NAME}-")]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    left += [f"link {line.split(': ')[1]}" for line in links.splitlines() if f"{SUBNET}." in line
             or line.split(": ")[1].split("@")[0] in lab_links]
    left += [f"mount {line.split()[1]}" for line in open("/proc/mounts") if tmp in line]
    if os.path.exists(f"/run/aquifer-lab/{NAME}"):
        left.append(f"state /run/aquifer-lab/{NAME}")
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    left.append(f"process {pid}")
        except OSError:
            pass
    return left


tmp = tempfile.mkdtemp(prefix="aq_lab_")
lab_links, pids = set(), []
try:
    lab("down", check_rc=False)
    r = lab("up", "--nodes", "3", "--clients", "2", "--rate", "80mbit", "--subnet", SUBNET, "--aquifer", AQ)
    print(r.stdout, end="")
    s = status()
    hosts = s["hosts"]
    addr = {h: v["addr"] for h, v in hosts.items()}
    check(sorted(hosts) == ["c1", "c2", "e1", "e2", "e3", "n1", "n2", "n3"], f"hosts: {sorted(hosts)}")
    check(len(set(addr.values())) == len(addr), "every host has its own address")
    check(all(v["process"] == "running" for h, v in hosts.items() if h[0] in "en"), "etcd and nodes run")
    pids += [v["pid"] for v in hosts.values() if v["pid"]]
    state = json.load(open(f"/run/aquifer-lab/{NAME}/state.json"))
    lab_links = {state["bridge"]} | {v["veth"] for v in state["hosts"].values()}

    # Each node advertises the address other hosts reach it at.
    cs = json.loads(subprocess.run([AQ, "cluster", "status", "--meta", s["meta"], "--json"], capture_output=True,
                                   text=True).stdout)
    adv = sorted(n.get("address", "") for n in cs["nodes"])
    check(adv == sorted(f"{addr[h]}:9000" for h in ("n1", "n2", "n3")), f"nodes advertise their own addresses: {adv}")

    # Data through the cluster from one client host, back on another.
    body = os.urandom(12 << 20)
    with open(os.path.join(tmp, "obj"), "wb") as f:
        f.write(body)
    url = s["url"] + "/labbkt/obj"
    r = on("c1", AQ, "cp", os.path.join(tmp, "obj"), url)
    check(r.returncode == 0, f"c1 writes through {s['url']} ({r.stderr.strip()[-200:]})")
    t = time.monotonic()
    r = on("c2", "curl", "-sf", "-o", os.path.join(tmp, "back"), f"http://{addr['n1']}:9000/labbkt/obj")
    secs = time.monotonic() - t
    same = r.returncode == 0 and open(os.path.join(tmp, "back"), "rb").read() == body
    check(same, "c2 reads the same bytes from n1")
    # n1's link is 80 Mbit/s = 10 MB/s: 12 MiB cannot come through it in under ~1.2 s.
    mbps = len(body) / secs / 1e6
    check(mbps < 10 * 1.25, f"n1's link is shaped: {mbps:.1f} MB/s through an 80 Mbit/s link")

    # No same-host reads between hosts: c1's aquifer:// reads get no grant.
    r = on("c1", AQ, "cp", url, os.path.join(tmp, "back2"))
    check(r.returncode == 0 and open(os.path.join(tmp, "back2"), "rb").read() == body, "c1 reads it via aquifer://")
    grants = 0
    for h in ("n1", "n2", "n3"):
        st = json.load(urllib.request.urlopen(f"http://{addr[h]}:9100/stats", timeout=10))
        grants += (st.get("same_host") or {}).get("grants", 0)
    check(grants == 0, f"no same-host grants to clients on other hosts ({grants})")

    # A mount naming all three nodes (commas in the source).
    mnt = os.path.join(tmp, "mnt")
    r = lab("mount", "c1", mnt, "labbkt", check_rc=False)
    check(r.returncode == 0 and os.path.ismount(mnt), f"a mount of {s['url']}/labbkt from c1 ({r.stderr.strip()})")
    if os.path.ismount(mnt):
        check(open(os.path.join(mnt, "obj"), "rb").read() == body, "the mount reads the object whole")
    pids += [m["pid"] for m in json.load(open(f"/run/aquifer-lab/{NAME}/state.json"))["mounts"]]

    # Partitions: both ways, then one way, then heal.
    check(reaches("c1", addr["n1"]), "before any cut: c1 reaches n1")
    lab("partition", "c1", "n1")
    check(not reaches("c1", addr["n1"]), "cut c1 <-> n1: c1 cannot reach n1")
    check(reaches("c1", addr["n2"]), "cut c1 <-> n1: c1 still reaches n2")
    check(reaches("c2", addr["n1"]), "cut c1 <-> n1: c2 still reaches n1")
    check(not udp_arrives("n1", "c1", addr["c1"]), "cut c1 <-> n1: nothing from n1 arrives at c1")
    lab("heal")
    check(reaches("c1", addr["n1"]), "healed: c1 reaches n1")
    lab("partition", "c1", "n1", "--one-way")
    check(not udp_arrives("c1", "n1", addr["n1"]), "cut c1 -> n1: nothing from c1 arrives at n1")
    check(udp_arrives("n1", "c1", addr["c1"]), "cut c1 -> n1: n1's datagrams still arrive at c1")
    lab("heal")
    lab("isolate", "n3")
    check(not reaches("n1", addr["n3"]) and not reaches("c2", addr["n3"]), "isolate n3: no host reaches it")
    lab("heal", "n3")
    check(reaches("c2", addr["n3"]), "heal n3: reachable again")

    # A node cut from etcd is declared down; healed, it is up again.
    lab("partition", "n2", "etcd")

    def n2_up():
        cs = json.loads(subprocess.run([AQ, "cluster", "status", "--meta", s["meta"], "--json"],
                                       capture_output=True, text=True).stdout or "{}")
        return {n["id"]: n["up"] for n in cs.get("nodes", [])}.get("n2")

    end = time.monotonic() + 20
    while n2_up() and time.monotonic() < end:
        time.sleep(0.5)
    check(n2_up() is False, "n2 cut from etcd is down once its lease runs out")
    lab("heal")
    end = time.monotonic() + 20
    while not n2_up() and time.monotonic() < end:
        time.sleep(0.5)
    check(n2_up() is True, "n2 healed is up again")

    # Shaping changed at run time.
    lab("slow", "n1", "8mbit")
    check(status()["hosts"]["n1"]["rate"] == "8mbit", "slow n1 8mbit")
    lab("slow", "n1", "default")
    check(status()["hosts"]["n1"]["rate"] == "80mbit", "slow n1 default: back to 80mbit")

    # Process faults.
    lab("freeze", "n2")
    check(status()["hosts"]["n2"]["process"] == "frozen", "freeze n2")
    lab("thaw", "n2")
    check(status()["hosts"]["n2"]["process"] == "running", "thaw n2")
    lab("kill", "n3")
    check(status()["hosts"]["n3"]["process"] == "dead", "kill n3")
    lab("restart", "n3")
    h = status()["hosts"]["n3"]
    check(h["process"] == "running" and h["starts"] == 2, f"restart n3: {h}")
    pids.append(h["pid"])
    lab("freeze", "e2")  # down must take a frozen process too

    # A process started on a host by hand, and a frozen one: down takes them too.
    stray = subprocess.Popen(LAB + ["exec", "c2", "--", "sleep", "600"])
    time.sleep(0.5)
    for line in subprocess.run(["pgrep", "-x", "sleep"], capture_output=True, text=True).stdout.split():
        if os.path.exists(f"/proc/{line}/ns/net") and \
                os.stat(f"/proc/{line}/ns/net").st_ino == os.stat(f"/run/netns/aqlab-{NAME}-c2").st_ino:
            pids.append(int(line))
    r = lab("down")
    stray.wait(timeout=10)
    left = leftovers()
    check(not left, f"down leaves nothing behind: {left}")
    r = lab("status", check_rc=False)
    check(r.returncode != 0 and "no lab" in r.stderr, f"status after down: {r.stderr.strip()}")

    # Erasure code 8+2 on 10 hosts, 2 of them cut off from everyone: every
    # byte reads back, at 0.8 efficiency.
    r = lab("up", "--nodes", "10", "--clients", "1", "--rate", "1gbit", "--subnet", SUBNET, "--aquifer", AQ,
            "--ec", "8+2", "--block-size", "1MiB", timeout=300)
    s = status()
    objs = {f"ec/obj{i}": os.urandom((3 << 20) + i * (300 << 10)) for i in range(4)}  # no block under 256 KiB
    for key, data in objs.items():
        with open(os.path.join(tmp, "ecobj"), "wb") as f:
            f.write(data)
        r = on("c1", AQ, "cp", os.path.join(tmp, "ecobj"), f"{s['url']}/labec/{key}")
        check(r.returncode == 0, f"c1 writes {key} under 8+2 ({r.stderr.strip()[-200:]})")
    cs = json.loads(subprocess.run([AQ, "cluster", "status", "--meta", s["meta"], "--json"], capture_output=True,
                                   text=True).stdout)
    check(abs(cs.get("efficiency", 0) - 0.8) < 1e-6 and cs.get("fully_protected"),
          f"8+2: efficiency {cs.get('efficiency')}, fully protected {cs.get('fully_protected')}")
    lab("isolate", "n9")
    lab("isolate", "n10")
    url8 = "aquifer://" + ",".join(f"{s['hosts'][f'n{i}']['addr']}:9000" for i in range(1, 9))
    for key, data in objs.items():
        back = os.path.join(tmp, "ecback")
        if os.path.exists(back):
            os.unlink(back)
        r = on("c1", AQ, "cp", f"{url8}/labec/{key}", back, timeout=120)
        check(r.returncode == 0 and open(back, "rb").read() == data,
              f"{key} reads back whole with n9 and n10 cut off ({r.stderr.strip()[-200:]})")
    lab("down")
    check(not leftovers(), "down after the 8+2 lab leaves nothing behind")
finally:
    lab("down", check_rc=False)
    shutil.rmtree(tmp, ignore_errors=True)
if failures:
    print(f"lab: {len(failures)} checks failed")
    sys.exit(1)
print("lab: all checks passed")
