#!/usr/bin/env python3
"""HTTPS on a real node: what TLS promises and how it fails.

- the aquifer client (aquifers://), boto3 and awscli verify the node's
  certificate against the CA they are given, and refuse a node whose
  certificate another CA signed (the aquifer client at once, naming the CA
  bundle it used, never after a minute of retries);
- plain HTTP sent to the TLS port is answered, in plain HTTP, with what to
  use instead;
- SIGHUP reloads a renewed certificate: new connections get it, a
  keep-alive connection opened before goes on working; a broken renewal
  (a key that does not match) leaves the old certificate in force;
- the metrics port speaks TLS too (aquifer stats https://...);
- a key file other users can read, or a key that does not match its
  certificate, is refused at start with the fix;
- the mount reads over aquifers:// where /dev/fuse is usable.
(awscli, rclone, s3fs and boto3 command sets over HTTPS: s3_tools_test.py --tls.)
usage: tls_test.py AQUIFER"""
import http.client
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402

AQ = sys.argv[1]
tmp = tempfile.mkdtemp(prefix="aq-tls-")
check = s3lib.Checks()
creds = s3lib.write_credentials(os.path.join(tmp, "creds"))


aq = s3lib.Cli(AQ, timeout=60)


def peer_subject(port, ca):
    """The CN of the certificate a new connection to `port` is shown."""
    ctx = ssl.create_default_context(cafile=ca)
    with ctx.wrap_socket(__import__("socket").create_connection(("127.0.0.1", port), timeout=10),
                         server_hostname="127.0.0.1") as s:
        subject = dict(x[0] for x in s.getpeercert()["subject"])
        return subject.get("commonName")


def drain_log(node):
    """Reads the node's log (stderr) into a list, in a thread: the pipe never
    fills and lines can be waited for."""
    import threading
    lines = []

    def pump():
        for line in node.p.stderr:
            lines.append(line)
    threading.Thread(target=pump, daemon=True).start()
    return lines


ca, cert, key = s3lib.make_certificates(os.path.join(tmp, "pki"), "node")
wrong_ca, _, _ = s3lib.make_certificates(os.path.join(tmp, "other-pki"), "impostor")

# ---- refused at start: a readable key, a key that is not the certificate's ----
os.chmod(key, 0o644)
r = aq("serve", "--data", os.path.join(tmp, "bad"), "--listen", "127.0.0.1:0", "--credentials", creds,
       "--tls-cert", cert, "--tls-key", key, timeout=30)
check(r.returncode != 0 and "chmod 600" in r.stderr, f"a key other users can read is refused with the fix: {r.stderr}")
os.chmod(key, 0o600)
other_key = os.path.join(tmp, "other-pki", "impostor.key")
r = aq("serve", "--data", os.path.join(tmp, "bad"), "--listen", "127.0.0.1:0", "--credentials", creds,
       "--tls-cert", cert, "--tls-key", other_key, timeout=30)
check(r.returncode != 0 and "does not match" in r.stderr, f"a key that is not the certificate's: {r.stderr}")
r = aq("serve", "--data", os.path.join(tmp, "bad"), "--listen", "127.0.0.1:0", "--credentials", creds,
       "--tls-cert", cert, timeout=30)
check(r.returncode != 0 and "--tls-key" in r.stderr, f"a certificate without its key: {r.stderr}")


node = m = etcd = None
try:
    node = s3lib.Node(AQ, os.path.join(tmp, "node"), "--tls-cert", cert, "--tls-key", key, credentials=creds)
    node.ca = ca
    node_log = drain_log(node)
    port = node.port
    s3 = s3lib.boto(port, ca=ca)
    s3.create_bucket(Bucket="data")
    body = os.urandom(3_000_000)
    s3.put_object(Bucket="data", Key="train/a.bin", Body=body)
    check(s3.get_object(Bucket="data", Key="train/a.bin")["Body"].read() == body, "boto3 over HTTPS")

    # The aquifer client: aquifers:// with --ca (or AWS_CA_BUNDLE).
    url = f"aquifers://127.0.0.1:{port}/data"
    out = os.path.join(tmp, "a.bin")
    r = aq("--credentials", creds, "--ca", ca, "cp", f"{url}/train/a.bin", out)
    check(r.returncode == 0 and open(out, "rb").read() == body, f"aquifer cp aquifers:// --ca: {r.stderr}")
    env = dict(os.environ, AWS_CA_BUNDLE=ca)
    r = aq("--credentials", creds, "ls", f"{url}/train/", env=env)
    check(r.returncode == 0 and "a.bin" in r.stdout, f"aquifer ls with AWS_CA_BUNDLE: {r.stderr}")
    r = aq("--credentials", creds, "--ca", ca, "cp", out, f"{url}/train/up.bin")
    check(r.returncode == 0, f"aquifer cp up over TLS: {r.stderr}")
    check(s3.get_object(Bucket="data", Key="train/up.bin")["Body"].read() == body, "the upload arrived whole")
    # A multipart upload over TLS: parts go as UNSIGNED-PAYLOAD with a CRC32C the node checks.
    big = os.path.join(tmp, "big.bin")
    with open(big, "wb") as f:
        f.write(os.urandom(12 << 20))
    r = aq("--credentials", creds, "--ca", ca, "cp", big, f"{url}/train/big.bin",
           env=dict(os.environ, AQUIFER_MULTIPART_THRESHOLD="5MiB", AQUIFER_PART_SIZE="5MiB"))
    check(r.returncode == 0 and s3.get_object(Bucket="data", Key="train/big.bin")["Body"].read() ==
          open(big, "rb").read(), f"a multipart upload over TLS arrived whole: {r.stderr}")

    r = aq("--credentials", creds, "--ca", ca, "bench", "storage", f"{url}/train", "-d", "0.5", "--ramp", "0")
    check(r.returncode == 0 and "page cache n/a" in r.stdout and "MB/s" in r.stdout,
          f"bench storage over aquifers://, without a meaningless page-cache line: {r.stdout[-300:]} {r.stderr}")

    # The wrong CA: refused by every client, at once.
    t0 = time.time()
    r = aq("--credentials", creds, "--ca", wrong_ca, "ls", f"{url}/train/")
    took = time.time() - t0
    check(r.returncode != 0 and "not trusted" in r.stderr and wrong_ca in r.stderr,
          f"the aquifer client refuses a certificate its CA did not sign, naming the CA used: {r.stderr}")
    check(took < 10, f"... at once, not after the failover deadline ({took:.1f} s)")
    import botocore
    try:
        s3lib.boto(port, ca=wrong_ca).list_buckets()
        got = "no error"
    except botocore.exceptions.SSLError as e:
        got = "SSLError"
    except Exception as e:  # noqa: BLE001
        got = type(e).__name__
    check(got == "SSLError", f"boto3 with the wrong CA refuses: {got}")
    aws = "/usr/bin/aws" if os.path.exists("/usr/bin/aws") else "aws"
    aenv = dict(os.environ, AWS_ACCESS_KEY_ID=s3lib.KEY, AWS_SECRET_ACCESS_KEY=s3lib.SECRET,
                AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true", HOME=tmp)
    r = subprocess.run([aws, "--endpoint-url", f"https://127.0.0.1:{port}", "--ca-bundle", wrong_ca, "s3", "ls"],
                       capture_output=True, text=True, timeout=60, env=aenv)
    check(r.returncode != 0 and "SSL" in r.stderr, f"awscli with the wrong CA refuses: {r.stderr[-300:]}")
    r = subprocess.run([aws, "--endpoint-url", f"https://127.0.0.1:{port}", "--ca-bundle", ca, "s3", "ls"],
                       capture_output=True, text=True, timeout=60, env=aenv)
    check(r.returncode == 0 and "data" in r.stdout, f"awscli with the right CA: {r.stderr[-300:]}")

    # Plain HTTP to the TLS port: told what to do, in plain HTTP.
    r = aq("--credentials", creds, "ls", f"aquifer://127.0.0.1:{port}/data/")
    check(r.returncode != 0 and "speaks TLS" in r.stderr, f"plain aquifer:// to the TLS port: {r.stderr}")
    status = s3lib.request(port, "GET", "/data")[0]
    check(status == 400, f"a plain signed request to the TLS port is answered 400: {status}")
    # An expired certificate is served (the operator may be renewing it) but
    # never silently: the node warns at start.
    import datetime
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID
    old_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "expired")])
    now = datetime.datetime.now(datetime.timezone.utc)
    old_cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(old_key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=3))
                .not_valid_after(now - datetime.timedelta(days=1)).sign(old_key, hashes.SHA256()))
    expired_cert, expired_key = os.path.join(tmp, "expired.pem"), os.path.join(tmp, "expired.key")
    with open(expired_cert, "wb") as f:
        f.write(old_cert.public_bytes(serialization.Encoding.PEM))
    with open(expired_key, "wb") as f:
        f.write(old_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                      serialization.NoEncryption()))
    os.chmod(expired_key, 0o600)
    p = subprocess.Popen([AQ, "serve", "--data", os.path.join(tmp, "expired-node"), "--listen", "127.0.0.1:0",
                          "--credentials", creds, "--tls-cert", expired_cert, "--tls-key", expired_key],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = p.stdout.readline()
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    check("https://" in first and "has expired" in err, f"a node serving an expired certificate warns: {err[-300:]}")

    # And the other way: aquifers:// to a plain node fails at once, saying so
    # (not after the retry deadline, as an outage would).
    plain_node = s3lib.Node(AQ, os.path.join(tmp, "plain-node"), credentials=creds)
    try:
        t = time.monotonic()
        r = aq("--credentials", creds, "--ca", ca, "ls", f"aquifers://127.0.0.1:{plain_node.port}/data/")
        took = time.monotonic() - t
        check(r.returncode != 0 and "does not speak TLS" in r.stderr and took < 10,
              f"aquifers:// to a plain node: {took:.1f} s, {r.stderr.strip()[-300:]}")
    finally:
        plain_node.stop()

    # Two requests in one TLS record (pipelined): the second is already
    # decrypted when the first is answered, and must still be served.
    import socket as socketlib
    ctx = ssl.create_default_context(cafile=ca)
    with ctx.wrap_socket(socketlib.create_connection(("127.0.0.1", port), timeout=10),
                         server_hostname="127.0.0.1") as tsock:
        req = f"GET /data HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        tsock.sendall(req + req)
        got = b""
        while got.count(b"HTTP/1.1 ") < 2:
            chunk = tsock.recv(65536)
            if not chunk:
                break
            got += chunk
    check(got.count(b"HTTP/1.1 403") == 2, f"both pipelined requests over TLS answered: {got[:200]!r}")

    # Two requests in two TLS records that arrive in one TCP segment: the
    # node reads ahead, so when the first is answered the second waits
    # inside OpenSSL still encrypted, where no epoll wakes for it.
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls_obj = ctx.wrap_bio(inc, out, server_hostname="127.0.0.1")
    with socketlib.create_connection(("127.0.0.1", port), timeout=10) as raw:
        while True:
            try:
                tls_obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                raw.sendall(out.read())
                inc.write(raw.recv(65536))
        raw.sendall(out.read())
        tls_obj.write(req)
        tls_obj.write(req)
        raw.sendall(out.read())  # both records in one send
        got = b""
        while got.count(b"HTTP/1.1 ") < 2:
            data = raw.recv(65536)
            if not data:
                break
            inc.write(data)
            try:
                while True:
                    got += tls_obj.read(65536)
            except ssl.SSLWantReadError:
                pass
    check(got.count(b"HTTP/1.1 403") == 2, f"two TLS records in one segment both answered: {got[:200]!r}")

    # Metrics over TLS.
    r = aq("--ca", ca, "stats", f"https://127.0.0.1:{node.metrics}")
    check(r.returncode == 0 and "client errors" in r.stdout, f"aquifer stats https://: {r.stderr}")
    check("requests" in node.stats() or "ops" in node.stats(), "/stats over https")

    # SIGHUP: a renewed certificate for new connections; old ones go on.
    check(peer_subject(port, ca) == "node", "the first certificate is served")
    keep = http.client.HTTPSConnection("127.0.0.1", port, context=ssl.create_default_context(cafile=ca), timeout=10)
    keep.request("GET", "/")
    keep.getresponse().read()
    s3lib.make_certificates(os.path.join(tmp, "pki"), "renewed")
    shutil.copy(os.path.join(tmp, "pki", "renewed.pem"), cert)
    shutil.copy(os.path.join(tmp, "pki", "renewed.key"), key)
    node.p.send_signal(signal.SIGHUP)
    check(s3lib.until(lambda: peer_subject(port, ca) == "renewed", 10), "after SIGHUP new connections get the renewal")
    keep.request("GET", "/")
    check(keep.getresponse().status in (200, 403), "a connection opened before the reload goes on")
    keep.close()
    # A broken renewal: the key of another certificate. The last good one stays.
    shutil.copy(other_key, key)
    node.p.send_signal(signal.SIGHUP)
    check(s3lib.until(lambda: any("was not reloaded" in line for line in node_log), 10),
          "the node says the renewal was refused")
    check(peer_subject(port, ca) == "renewed", "a broken renewal leaves the last good certificate in force")
    check(node.p.poll() is None, "and the node keeps running")
    check(s3.get_object(Bucket="data", Key="train/a.bin")["Body"].read() == body, "and serving")

    # The mount over aquifers://.
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    if os.path.exists("/dev/fuse") and os.access("/dev/fuse", os.R_OK | os.W_OK):
        log = open(os.path.join(tmp, "mount.log"), "w")
        m = subprocess.Popen([AQ, "--credentials", creds, "--ca", ca, "mount", "-f", url, mnt], stdout=log,
                             stderr=log)
        if check(s3lib.until(lambda: os.path.ismount(mnt), 15), "mounted over TLS"):
            with open(os.path.join(mnt, "train", "a.bin"), "rb") as f:
                check(f.read() == body, "the mount reads over TLS")
    else:
        print("SKIP (part): /dev/fuse is missing or not accessible; the mount was not tried")
    node.stop()
    node = None

    # A TLS cluster: nodes copy blocks to each other over HTTPS, verified
    # with the cluster's CA; a plain node cannot join it.
    etcd = s3lib.Etcd(tmp)
    try:
        members = []
        for name in ("t1", "t2"):
            _, c, k = s3lib.make_certificates(os.path.join(tmp, "pki"), name)
            members.append(s3lib.ClusterNode(AQ, tmp, name, etcd.url, creds, "--replicas", "2", "--lease-ttl", "3",
                                             "--tls-cert", c, "--tls-key", k, "--tls-ca", ca))
        c1 = s3lib.boto(members[0].port, ca=ca)
        c1.create_bucket(Bucket="lake")
        big = os.urandom(9_000_000)  # 3 blocks, each on both nodes
        c1.put_object(Bucket="lake", Key="obj", Body=big)
        c2 = s3lib.boto(members[1].port, ca=ca)
        check(c2.get_object(Bucket="lake", Key="obj")["Body"].read() == big, "the other TLS node serves it")
        r = aq("--ca", ca, "cluster", "status", "--meta", etcd.url)
        print(r.stdout)
        check(r.returncode == 0, f"cluster status over TLS: every block on both nodes: {r.stdout[-600:]} {r.stderr}")
        members[0].stop(signal.SIGKILL)
        check(c2.get_object(Bucket="lake", Key="obj")["Body"].read() == big,
              "with t1 killed, t2's replicas (copied over TLS) serve it")
        plain = subprocess.run([AQ, "serve", "--data", os.path.join(tmp, "p1"), "--listen", "127.0.0.1:0",
                                "--credentials", creds, "--meta", etcd.url, "--node-id", "p1", "--replicas", "2"],
                               capture_output=True, text=True, timeout=60)
        check(plain.returncode != 0 and "TLS" in plain.stderr,
              f"a plain node cannot join a TLS cluster: {plain.stderr[-300:]}")
        # A node whose --tls-ca did not sign the others' certificates: it
        # would fail every copy and forwarded read, so it does not join.
        _, wc, wk = s3lib.make_certificates(os.path.join(tmp, "pki"), "w1")
        wrong = subprocess.run([AQ, "serve", "--data", os.path.join(tmp, "w1"), "--listen", "127.0.0.1:0",
                                "--credentials", creds, "--meta", etcd.url, "--node-id", "w1", "--replicas", "2",
                                "--tls-cert", wc, "--tls-key", wk, "--tls-ca", wrong_ca],
                               capture_output=True, text=True, timeout=60)
        check(wrong.returncode != 0 and "cannot verify node t2" in wrong.stderr,
              f"a node with the wrong --tls-ca is refused at join: {wrong.returncode} {wrong.stderr[-400:]}")
        r = aq("--ca", ca, "cluster", "status", "--meta", etcd.url, "--json")
        check("w1" not in r.stdout, "and is not listed as a member")
        for n in members:
            n.stop()
    finally:
        etcd.stop()
    # etcd over TLS with client certificates and an etcd user, as etcdctl's
    # environment gives them (ETCDCTL_CACERT/CERT/KEY/USER).
    etcd_dir = os.path.join(tmp, "etcd-pki")
    _, ecert, ekey = s3lib.make_certificates(etcd_dir, "etcd")
    eca = os.path.join(etcd_dir, "ca.pem")
    # etcd's HTTP gateway refuses client certificates with a CommonName.
    _, client_cert, client_key = s3lib.make_certificates(etcd_dir, "aquifer-client", subject="/O=aquifer nodes")
    eport, epeer = s3lib.free_port(), s3lib.free_port()
    eurl = f"https://127.0.0.1:{eport}"
    elog = open(os.path.join(tmp, "etcd-tls.log"), "w")
    etcd_tls = subprocess.Popen(
        ["etcd", "--data-dir", os.path.join(tmp, "etcd-tls"), "--listen-client-urls", eurl,
         "--advertise-client-urls", eurl, "--listen-peer-urls", f"http://127.0.0.1:{epeer}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{epeer}",
         "--initial-cluster", f"default=http://127.0.0.1:{epeer}", "--cert-file", ecert, "--key-file", ekey,
         "--client-cert-auth", "--trusted-ca-file", eca], stdout=elog, stderr=elog)
    try:
        import base64
        import json
        import urllib.request
        ectx = ssl.create_default_context(cafile=eca)
        ectx.load_cert_chain(client_cert, client_key)

        def etcd_api(path, body, token=None):
            req = urllib.request.Request(eurl + path, data=json.dumps(body).encode(), method="POST",
                                         headers={"Authorization": token} if token else {})
            return json.loads(urllib.request.urlopen(req, timeout=10, context=ectx).read() or b"{}")

        check(s3lib.until(lambda: etcd_api("/v3/kv/range", {"key": base64.b64encode(b"x").decode()}) is not None,
                          20), "etcd over TLS with client certificates started")
        b64 = lambda t: base64.b64encode(t.encode()).decode()  # noqa: E731
        etcd_api("/v3/auth/user/add", {"name": "root", "password": "root-pw"})
        etcd_api("/v3/auth/role/add", {"name": "root"})
        etcd_api("/v3/auth/user/grant", {"user": "root", "role": "root"})
        etcd_api("/v3/auth/user/add", {"name": "aquifer", "password": "aq-pw"})
        etcd_api("/v3/auth/role/add", {"name": "aquifer"})
        etcd_api("/v3/auth/role/grant", {"name": "aquifer", "perm": {"permType": "READWRITE", "key": b64("/aquifer/"),
                                                                     "range_end": b64("/aquifer0")}})
        etcd_api("/v3/auth/user/grant", {"user": "aquifer", "role": "aquifer"})
        etcd_api("/v3/auth/enable", {})
        base_env = dict(os.environ, ETCDCTL_CACERT=eca, ETCDCTL_CERT=client_cert, ETCDCTL_KEY=client_key)
        good = dict(base_env, ETCDCTL_USER="aquifer:aq-pw")
        meta = f"etcds://127.0.0.1:{eport}"
        r = aq("key", "add", "over-etcd-tls", "--grant", "ro:lake", "--meta", meta, env=good)
        check(r.returncode == 0, f"aquifer key add over etcd TLS as user aquifer: {r.stderr}")
        r = aq("key", "list", "--meta", meta, env=good)
        check(r.returncode == 0 and "over-etcd-tls" in r.stdout, f"and key list reads it back: {r.stderr}")
        r = aq("key", "list", "--meta", meta, env=dict(base_env, ETCDCTL_USER="aquifer:wrong"))
        check(r.returncode != 0 and "aquifer" in r.stderr and "wrong" not in r.stderr,
              f"a wrong password fails, naming the user and never the password: {r.stderr}")
        r = aq("key", "list", "--meta", meta, env=base_env)
        check(r.returncode != 0 and ("ETCDCTL_USER" in r.stderr or "denied" in r.stderr.lower()),
              f"no user: refused, saying how to give one: {r.stderr}")
        r = aq("key", "list", "--meta", meta, env=dict(good, ETCDCTL_CERT="", ETCDCTL_KEY=""))
        check(r.returncode != 0, f"no client certificate: refused by etcd: {r.stderr}")
        r = aq("key", "list", "--meta", meta.replace("etcds://", "etcd://"), env=good)
        check(r.returncode != 0, f"plain HTTP to etcd's TLS port fails: {r.stderr[-200:]}")
        # A node on that etcd: serves, and its object is in etcd (as user aquifer).
        saved = dict(os.environ)
        os.environ.update(good)
        try:
            en = s3lib.ClusterNode(AQ, tmp, "e1", meta, creds, "--replicas", "1")
        finally:
            os.environ.clear()
            os.environ.update(saved)
        try:
            ec = s3lib.boto(en.port)
            ec.create_bucket(Bucket="lake")
            ec.put_object(Bucket="lake", Key="k", Body=b"kept in etcd over TLS")
            check(ec.get_object(Bucket="lake", Key="k")["Body"].read() == b"kept in etcd over TLS",
                  "a node whose metadata is in etcd over TLS, as an etcd user, stores and serves")
            log_text = open(en.log).read()
            check("aq-pw" not in log_text, "the etcd password is not in the node's log")
        finally:
            en.stop()
    finally:
        etcd_tls.kill()
        etcd_tls.wait()
finally:
    if m:
        m.send_signal(signal.SIGTERM)
        try:
            m.wait(timeout=20)
        except subprocess.TimeoutExpired:
            m.kill()
            m.wait()
        subprocess.run(["umount", "-l", os.path.join(tmp, "mnt")], capture_output=True)
    if node:
        node.stop()
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
