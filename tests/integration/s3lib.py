"""Shared pieces of the S3 integration tests: start and stop a real node,
boto3 clients, an independent SigV4 signer for requests boto3 cannot make
(Date-only, aws-chunked streaming), and check counting."""
import ctypes
import datetime
import hashlib
import hmac
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

KEY, SECRET = "AQTESTKEY", "aq-test-secret-0123456789"
# Real S3 clients must not inherit an environment's CA bundle or keys.
for var in ("AWS_CA_BUNDLE", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
            "AWS_DEFAULT_REGION", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
    os.environ.pop(var, None)


class Checks:
    """Counts checks; prints the failed ones. With AQ_CHECK_TIMES=1 every check
    is printed with the seconds since the test started and since the check
    before it (where a slow test spends its time)."""

    def __init__(self):
        self.passed = self.failed = 0
        self.times = bool(os.environ.get("AQ_CHECK_TIMES"))
        self.t0 = self.last = time.monotonic()

    def __call__(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL:", what, file=sys.stderr, flush=True)
        if self.times:
            now = time.monotonic()
            print(f"[{now - self.t0:7.1f} s +{now - self.last:6.1f}] {'ok  ' if cond else 'FAIL'} {what[:120]}",
                  file=sys.stderr, flush=True)
            self.last = now
        return cond

    def finish(self):
        print(f"{self.passed} passed, {self.failed} failed")
        sys.exit(1 if self.failed else 0)


class Node:
    """aquifer serve on 127.0.0.1 (a free port), stopped with SIGTERM."""

    def __init__(self, aq, data, *extra, credentials=None, listen="127.0.0.1:0"):
        args = [aq, "serve", "--data", data, "--listen", listen, "--metrics", "127.0.0.1:0", *extra]
        if credentials:
            args += ["--credentials", credentials]
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if "http://" not in line and "https://" not in line:
            self.p.kill()
            raise SystemExit("serve did not start: " + line + self.p.stderr.read())
        self.port = int(line.split("://127.0.0.1:")[1].split()[0])
        self.metrics = None
        for _ in range(20):
            more = self.p.stdout.readline()
            if "metrics: http" in more and "://127.0.0.1:" in more:
                self.metrics = int(more.split("://127.0.0.1:")[1].split("/")[0])
            if "auth:" in more or not more:
                break

    ca = None  # set to the CA bundle when the node serves TLS: stats() then uses https

    def stats(self):
        import json
        import ssl
        import urllib.request
        if self.ca:
            url, ctx = f"https://127.0.0.1:{self.metrics}/stats", ssl.create_default_context(cafile=self.ca)
        else:
            url, ctx = f"http://127.0.0.1:{self.metrics}/stats", None
        return json.loads(urllib.request.urlopen(url, timeout=10, context=ctx).read())

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        return self.p.returncode


def print_logs(directory, names, lines=12):
    """The last `lines` lines of each log under `directory` that exists, on
    stderr: what a failed test shows of its servers."""
    for name in names:
        path = os.path.join(directory, name)
        if os.path.exists(path):
            print(f"--- {name} (last lines)", file=sys.stderr)
            print("".join(open(path, errors="replace").readlines()[-lines:]), file=sys.stderr)


def require_fuse():
    """Exits 77 (skipped) where a FUSE mount cannot be made."""
    import shutil
    if not os.path.exists("/dev/fuse") or not os.access("/dev/fuse", os.R_OK | os.W_OK):
        print("SKIP: /dev/fuse is missing or not accessible here (FUSE mounts need it)")
        sys.exit(77)
    if shutil.which("fusermount3") is None and os.geteuid() != 0:
        print("SKIP: fusermount3 is missing (Debian fuse3) and this is not root")
        sys.exit(77)


def small_disk(prefix, size, why):
    """A temporary directory with a tmpfs of `size` (e.g. "24m") mounted at
    TMP/data, for full-disk tests; exits 77 (skip) where none can be mounted
    (root is needed). Returns (tmp, data); unmount data before removing tmp."""
    import shutil
    import tempfile
    tmp = tempfile.mkdtemp(prefix=prefix)
    data = os.path.join(tmp, "data")
    os.mkdir(data)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", data],
                      capture_output=True).returncode != 0:
        shutil.rmtree(tmp)
        print(f"SKIP: a tmpfs cannot be mounted here ({why}; run as root)")
        sys.exit(77)
    return tmp, data


def js_sdk(cache, script):
    """The AWS SDK for JavaScript v3 (versions pinned in js_presign/package.json),
    installed from npm into `cache` once, with js_presign/`script` beside it.
    Returns None when ready, else why it cannot be (no node/npm, no registry)."""
    if not shutil.which("npm") or not shutil.which("node"):
        return "node and npm are not installed"
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js_presign")
    os.makedirs(cache, exist_ok=True)
    for f in ("package.json", script):
        shutil.copy(os.path.join(here, f), os.path.join(cache, f))
    if all(os.path.exists(os.path.join(cache, "node_modules", "@aws-sdk", p))
           for p in ("client-s3", "s3-request-presigner")):
        return None
    r = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel", "error"], cwd=cache,
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return f"npm install of the AWS SDK for JavaScript failed (no registry?): {r.stderr.strip()[-500:]}"
    return None


def write_credentials(path):
    with open(path, "w") as f:
        f.write(f"# test key\n{KEY} {SECRET}\n")
    os.chmod(path, 0o600)  # the node refuses keys other users can read
    return path


def boto(port, secret=SECRET, ca=None, **config):
    """A boto3 S3 client for the node on `port`; with `ca` (a CA bundle),
    over HTTPS verified against it."""
    import boto3
    from botocore.config import Config
    scheme = "https" if ca else "http"
    return boto3.client("s3", endpoint_url=f"{scheme}://127.0.0.1:{port}", aws_access_key_id=KEY,
                        aws_secret_access_key=secret, region_name="us-east-1", verify=ca if ca else None,
                        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}, **config))


def make_certificates(directory, name="node", ips=("127.0.0.1",), subject=None):
    """A test CA and a certificate it signs for `ips` and localhost (openssl's
    command line, as an operator would), with subject /CN=name unless given.
    Returns (ca.pem, cert.pem, key.pem)."""
    os.makedirs(directory, exist_ok=True)
    ca, ca_key = os.path.join(directory, "ca.pem"), os.path.join(directory, "ca.key")
    cert, key = os.path.join(directory, name + ".pem"), os.path.join(directory, name + ".key")
    csr, ext = os.path.join(directory, name + ".csr"), os.path.join(directory, name + ".ext")
    if not os.path.exists(ca):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca,
                        "-days", "2", "-subj", "/CN=aquifer test CA " + os.path.basename(directory)],
                       check=True, capture_output=True)
    subprocess.run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj",
                    subject or "/CN=" + name], check=True, capture_output=True)
    with open(ext, "w") as f:
        f.write("subjectAltName=" + ",".join([f"IP:{ip}" for ip in ips] + ["DNS:localhost"]) + "\n")
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out",
                    cert, "-days", "2", "-extfile", ext], check=True, capture_output=True)
    os.chmod(key, 0o600)
    return ca, cert, key


def error_code(fn):
    import botocore
    try:
        fn()
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"]
    return None


# ---- an independent SigV4 signer (the spec, written again in Python) ----

def _hmac(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def signing_key(secret, day, region="us-east-1", service="s3"):
    k = _hmac(("AWS4" + secret).encode(), day)
    k = _hmac(k, region)
    k = _hmac(k, service)
    return _hmac(k, "aws4_request")


def canonical_query(query):
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    enc = lambda s: urllib.parse.quote(s, safe="-_.~")
    return "&".join(f"{enc(k)}={enc(v)}" for k, v in sorted(pairs))


def sign(method, path, query, headers, payload_hash, now=None, date_header=False, secret=SECRET, key=KEY,
         signed=None):
    """Adds Authorization (and x-amz-date or Date) to `headers`; returns the signature and scope."""
    now = now or datetime.datetime.utcnow()
    amz = now.strftime("%Y%m%dT%H%M%SZ")
    day = now.strftime("%Y%m%d")
    if date_header:
        headers["Date"] = now.strftime("%a, %d %b %Y %H:%M:%S GMT")
    else:
        headers["x-amz-date"] = amz
    headers["x-amz-content-sha256"] = payload_hash
    names = signed or sorted(k.lower() for k in headers)
    lower = {k.lower(): str(v).strip() for k, v in headers.items()}
    canon = "\n".join([method, urllib.parse.quote(urllib.parse.unquote_to_bytes(path), safe="/-_.~"),
                       canonical_query(query),
                       "".join(f"{n}:{lower[n]}\n" for n in names), ";".join(names), payload_hash])
    scope = f"{day}/us-east-1/s3/aws4_request"
    sts = "\n".join(["AWS4-HMAC-SHA256", amz, scope, hashlib.sha256(canon.encode()).hexdigest()])
    sk = signing_key(secret, day)
    sig = hmac.new(sk, sts.encode(), hashlib.sha256).hexdigest()
    headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={key}/{scope}, SignedHeaders={';'.join(names)}, "
                                f"Signature={sig}")
    return sig, sk, amz, scope


def raw(port, data, timeout=10):
    """Sends raw bytes, returns everything the node answers until it closes or goes quiet."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    out = b""
    try:
        s.sendall(data)
    except OSError:
        pass  # the node may answer and close before taking all of it
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except (socket.timeout, OSError):
        pass
    s.close()
    return out


def request(port, method, path, query="", body=b"", headers=None, sign_it=True, timeout=10, host="127.0.0.1", **kw):
    """One HTTP request signed by the independent signer; returns (status, headers, body)."""
    import http.client
    headers = dict(headers or {})
    headers.setdefault("host", f"{host}:{port}")
    if sign_it:
        sign(method, path, query, headers, kw.pop("payload_hash", hashlib.sha256(body).hexdigest()), **kw)
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    c.putrequest(method, path + ("?" + query if query else ""), skip_host=True, skip_accept_encoding=True)
    for k, v in headers.items():
        c.putheader(k, v)
    if body or method in ("PUT", "POST"):
        c.putheader("Content-Length", str(len(body)))
    c.endheaders()
    if body:
        c.send(body)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, data


# ---- clusters: a real etcd and node processes on 127.0.0.1 ----

def free_port():
    """A port free now for a server started a moment later. Chosen below the
    kernel's ephemeral range (net.ipv4.ip_local_port_range), where a port the
    kernel hands out (port 0, every outgoing connection's own end) would
    collide with it; tests that open thousands of connections at once would
    otherwise take the port between this choice and the server's bind."""
    import random
    try:
        low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(max(1024, low - 12000), low)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    s = socket.socket()  # a crowded machine: whatever the kernel gives
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Cli:
    """A command as the tests run it: arguments of any type (passed as
    str), output captured as text, and a timeout that turns a hang into a
    failure. `prefix`/`suffix`: arguments around every call's own; `env`:
    variables added to every call's environment. A call's `env=` is its
    whole environment (as subprocess takes it), `extra_env=` is added to
    the test's; `timeout=` replaces the default."""

    def __init__(self, binary, prefix=(), suffix=(), timeout=300, env=None):
        self.binary, self.prefix, self.suffix = binary, list(prefix), list(suffix)
        self.timeout, self.env = timeout, dict(env or {})

    def __call__(self, *args, timeout=None, env=None, extra_env=None, **kw):
        import subprocess
        full = dict(os.environ if env is None else env, **self.env, **(extra_env or {}))
        return subprocess.run([self.binary, *map(str, [*self.prefix, *args, *self.suffix])], capture_output=True,
                              text=True, timeout=timeout or self.timeout, env=full, **kw)

    def ok(self, *args, expect=0, **kw):
        """The call's result, failing (an AssertionError naming the command,
        its exit status and the end of its output) unless the exit status
        is `expect`: a status, a tuple of them, or None for any."""
        r = self(*args, **kw)
        allowed = (expect,) if isinstance(expect, int) else expect
        if allowed is not None and r.returncode not in allowed:
            raise AssertionError(f"{os.path.basename(self.binary)} {' '.join(map(str, args))}: exit {r.returncode}, "
                                 f"expected {expect}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
        return r

    def json(self, *args, expect=0, **kw):
        """ok() of the call with --json, its output parsed."""
        import json
        return json.loads(self.ok(*args, "--json", expect=expect, **kw).stdout)


def until(pred, timeout, step=0.3):
    """Calls pred until it returns true (exceptions count as false)."""
    import time
    end = time.time() + timeout
    while time.time() < end:
        try:
            if pred():
                return True
        except Exception:  # noqa: BLE001
            pass
        time.sleep(step)
    return False


_LIBC = ctypes.CDLL(None, use_errno=True)  # resolved here: a forked child must not import


def _die_with_parent():
    """In a child before exec: SIGKILL when the process that started it dies,
    so a test killed by CTest's timeout (or any signal) leaves no server
    behind holding its ports."""
    _LIBC.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


def die_with_parent():
    """preexec_fn for a server a test starts: _die_with_parent, but only from
    the main thread (the death signal follows the starting thread, and a
    server restarted from a worker thread must outlive it)."""
    return _die_with_parent if threading.current_thread() is threading.main_thread() else None


class Etcd:
    """A single-member etcd under `tmp`, on free ports (kept across
    restarts); url is etcd://... Started unless start=False. Started from the
    main thread, it dies with the test."""

    def __init__(self, tmp, start=True):
        self.tmp, self.port, self.peer = tmp, free_port(), free_port()
        self.url = f"etcd://127.0.0.1:{self.port}"
        self.p = None
        if start:
            self.start()

    def start(self):
        c, p = f"http://127.0.0.1:{self.port}", f"http://127.0.0.1:{self.peer}"
        log = os.path.join(self.tmp, "etcd.log")
        self.p = subprocess.Popen(
            ["etcd", "--data-dir", os.path.join(self.tmp, "etcd"), "--listen-client-urls", c,
             "--advertise-client-urls", c, "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
             "--initial-cluster", "default=" + p],
            stdout=subprocess.DEVNULL, stderr=open(log, "a"), preexec_fn=die_with_parent())
        if not until(lambda: socket.create_connection(("127.0.0.1", self.port), timeout=1), 15):
            self.p.kill()
            raise SystemExit("etcd did not start: " + open(log).read()[-2000:])
        return self

    def send_signal(self, sig):
        self.p.send_signal(sig)

    def terminate(self):
        self.p.terminate()

    def wait(self):
        return self.p.wait()

    def stop(self):
        self.p.kill()
        self.p.wait()


class ClusterNode:
    """aquifer serve --meta ETCD as node `name` (data and log under tmp),
    started when it has joined the cluster."""

    def __init__(self, aq, tmp, name, meta, credentials, *extra):
        self.name, self.port, self.metrics = name, free_port(), free_port()
        self.log = os.path.join(tmp, name + ".log")
        self.args = [aq, "serve", "--data", os.path.join(tmp, name), "--listen", f"127.0.0.1:{self.port}",
                     "--metrics", f"127.0.0.1:{self.metrics}", "--credentials", credentials, "--meta", meta,
                     "--node-id", name, *extra]
        self.start()

    def start(self):
        for attempt in range(5):
            self.p = subprocess.Popen(self.args, stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
            if until(lambda: "cluster: node" in open(self.log).read() or self.p.poll() is not None, 20) and \
                    self.p.poll() is None:
                return
            self.p.kill()
            self.p.wait()
            text = open(self.log).read()
            # A port picked free was taken by another test meanwhile: new ports, again.
            if "the port is in use" not in text or attempt == 4:
                raise SystemExit(f"node {self.name} did not start:\n" + text)
            old = (f"127.0.0.1:{self.port}", f"127.0.0.1:{self.metrics}")
            self.port, self.metrics = free_port(), free_port()
            new = (f"127.0.0.1:{self.port}", f"127.0.0.1:{self.metrics}")
            self.args = [new[old.index(a)] if a in old else a for a in self.args]

    def stop(self, sig=signal.SIGTERM):
        if self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
