#!/usr/bin/python3
"""The systemd units of deploy/systemd and what they rely on.

- `systemd-analyze verify` passes both units with nothing to say (an unknown
  key is only a warning there, so any output fails the test), and
  `systemd-analyze security --offline` rates the node's hardening 4.0 or
  better. The units name /usr/local/bin/aquifer; the copies checked here
  name the binary under test.
- The notify protocol as systemd speaks it (sd_notify(3)): this test binds
  the AF_UNIX datagram socket a service manager would and starts the node
  with NOTIFY_SOCKET naming it, as systemd does for a Type=notify unit:
  READY=1 arrives once the S3 port answers; SIGHUP (ExecReload) sends
  RELOADING=1 with MONOTONIC_USEC, reloads the credentials file (a key
  added works at once, a key removed is refused, a file that no longer loads
  changes nothing) and sends READY=1 again; SIGTERM sends STOPPING=1.
- The same for `aquifer mount -f`: READY=1 once the kernel has the mount,
  STOPPING=1 when it ends (skipped without /dev/fuse).
usage: service_test.py path/to/aquifer SOURCE_DIR"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
SRC = os.path.abspath(sys.argv[2])
check = s3lib.Checks()
tmp = tempfile.mkdtemp(prefix="aq_service_")


class Manager:
    """The service manager's end of the notify protocol: a datagram socket."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.messages = []

    def next(self, timeout):
        """The next message as a dict, or None after `timeout` seconds."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(4096).decode()
        except socket.timeout:
            return None
        msg = dict(line.split("=", 1) for line in data.split("\n") if line)
        self.messages.append(msg)
        return msg


def answers(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return s.recv(12).startswith(b"HTTP/1.1")
    except OSError:
        return False


def lists(port, key, secret):
    """None when `key` may list the buckets, else the S3 error code."""
    import boto3
    from botocore.config import Config
    c = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", aws_access_key_id=key,
                     aws_secret_access_key=secret, region_name="us-east-1",
                     config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
    return s3lib.error_code(c.list_buckets)


try:
    # ---- the units ----
    units = os.path.join(tmp, "units")
    os.mkdir(units)
    for name in ("aquifer-node.service", "aquifer-mount.service"):
        text = open(os.path.join(SRC, "deploy", "systemd", name)).read()
        check("/usr/local/bin/aquifer " in text, f"{name} runs /usr/local/bin/aquifer (make install's place)")
        with open(os.path.join(units, name), "w") as f:
            f.write(text.replace("/usr/local/bin/aquifer", AQ))
    if shutil.which("systemd-analyze"):
        r = subprocess.run(["systemd-analyze", "verify", "aquifer-node.service", "aquifer-mount.service"], cwd=units,
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(),
              f"systemd-analyze verify: nothing to say: {r.stdout} {r.stderr}")
        r = subprocess.run(["systemd-analyze", "security", "--offline=true", "--threshold=40", "aquifer-node.service"],
                           cwd=units, capture_output=True, text=True, timeout=120)
        level = [line for line in r.stdout.splitlines() if "Overall exposure level" in line]
        check(r.returncode == 0, f"the node's exposure is 4.0 or less: {level or r.stderr[-300:]}")
        print("systemd-analyze security:", level[0].split("for ")[-1] if level else r.stderr[-200:])
    else:
        print("SKIP (part): systemd-analyze is missing (Debian package systemd): the units are not verified")

    # ---- the node under a service manager ----
    keys = s3lib.write_credentials(os.path.join(tmp, "keys"))
    mgr = Manager(os.path.join(tmp, "notify.sock"))
    port = s3lib.free_port()
    env = dict(os.environ, NOTIFY_SOCKET=mgr.path)
    node = subprocess.Popen([AQ, "serve", "--data", os.path.join(tmp, "data"), "--listen", f"127.0.0.1:{port}",
                             "--credentials", keys], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    msg = mgr.next(60)
    check(msg is not None and msg.get("READY") == "1", f"READY=1 from the node: {msg}")
    check(answers(port), "the S3 port answers when READY=1 arrives")
    check(msg is not None and "serving on" in msg.get("STATUS", ""), f"STATUS says where it serves: {msg}")
    check(lists(port, s3lib.KEY, s3lib.SECRET) is None, "the file's key works")

    # SIGHUP: a second key added, the first removed.
    with open(keys, "w") as f:
        f.write("AQSECONDKEY second-secret-0123456789\n")
    t0 = time.monotonic()
    node.send_signal(signal.SIGHUP)
    reloading, ready = mgr.next(30), mgr.next(30)
    check(reloading is not None and reloading.get("RELOADING") == "1", f"RELOADING=1 on SIGHUP: {reloading}")
    usec = int(reloading.get("MONOTONIC_USEC", "0")) if reloading else 0
    check(abs(usec / 1e6 - t0) < 10, f"MONOTONIC_USEC is CLOCK_MONOTONIC now ({usec} vs {t0:.0f} s)")
    check(ready is not None and ready.get("READY") == "1", f"READY=1 after the reload: {ready}")
    check(lists(port, "AQSECONDKEY", "second-secret-0123456789") is None, "a key added to the file works after SIGHUP")
    check(lists(port, s3lib.KEY, s3lib.SECRET) == "InvalidAccessKeyId",
          f"a key removed from the file is refused after SIGHUP: {lists(port, s3lib.KEY, s3lib.SECRET)}")

    # A file that does not load: the keys in force stay.
    os.chmod(keys, 0o644)
    node.send_signal(signal.SIGHUP)
    mgr.next(30), mgr.next(30)
    check(lists(port, "AQSECONDKEY", "second-secret-0123456789") is None,
          "a credentials file open to other users is not loaded: the keys in force stay")
    os.chmod(keys, 0o600)
    with open(keys, "w") as f:
        f.write("# no key at all\n")
    node.send_signal(signal.SIGHUP)
    mgr.next(30), mgr.next(30)
    check(lists(port, "AQSECONDKEY", "second-secret-0123456789") is None,
          "an empty credentials file is not loaded: the keys in force stay")

    node.send_signal(signal.SIGTERM)
    stopping = mgr.next(30)
    check(stopping is not None and stopping.get("STOPPING") == "1", f"STOPPING=1 on SIGTERM: {stopping}")
    node.wait(timeout=60)
    err = node.stderr.read()
    check(node.returncode == 0, f"the node stops cleanly: {node.returncode} {err[-300:]}")
    check(err.count("the credentials file was not reloaded") == 2 and "open to other users" in err and
          "holds no key" in err,
          f"the node logs why a reload did not take: {err[-600:]}")

    # Abstract socket names ('@...') are systemd's other form.
    name = f"@aq-notify-{os.getpid()}"
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    abstract.bind("\0" + name[1:])
    abstract.settimeout(60)
    write_keys = s3lib.write_credentials(os.path.join(tmp, "keys2"))
    node = subprocess.Popen([AQ, "serve", "--data", os.path.join(tmp, "data2"), "--listen", "127.0.0.1:0",
                             "--credentials", write_keys], env=dict(os.environ, NOTIFY_SOCKET=name),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        got = abstract.recv(4096).decode()
    except socket.timeout:
        got = ""
    check("READY=1" in got.split("\n"), f"READY=1 through an abstract socket name: {got!r}")
    node.send_signal(signal.SIGTERM)
    node.wait(timeout=60)

    # ---- the mount ----
    if os.access("/dev/fuse", os.R_OK | os.W_OK):
        keys = s3lib.write_credentials(os.path.join(tmp, "keys3"))
        n = s3lib.Node(AQ, os.path.join(tmp, "data3"), credentials=keys)
        try:
            s3lib.boto(n.port).create_bucket(Bucket="data")
            mnt = os.path.join(tmp, "mnt")
            os.mkdir(mnt)
            mgr2 = Manager(os.path.join(tmp, "notify2.sock"))
            m = subprocess.Popen([AQ, "--credentials", keys, "mount", "-f", f"aquifer://127.0.0.1:{n.port}/data", mnt],
                                 env=dict(os.environ, NOTIFY_SOCKET=mgr2.path), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
            msg = mgr2.next(60)
            check(msg is not None and msg.get("READY") == "1", f"READY=1 from the mount: {msg}")
            check(os.path.ismount(mnt), "the directory is mounted when READY=1 arrives")
            m.send_signal(signal.SIGTERM)
            stopping = mgr2.next(30)
            check(stopping is not None and stopping.get("STOPPING") == "1", f"STOPPING=1 from the mount: {stopping}")
            m.wait(timeout=60)
            check(m.returncode == 0 and not os.path.ismount(mnt), f"SIGTERM unmounts: {m.stderr.read()[-300:]}")
        finally:
            n.stop()
    else:
        print("SKIP (part): /dev/fuse is missing here: the mount's notifications are not checked")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
