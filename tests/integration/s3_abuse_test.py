#!/usr/bin/python3
"""Hostile and broken clients against a real node: slow heads (slowloris),
floods of header fields, Content-Lengths that lie either way, more
connections than the node takes, malformed chunked bodies, pipelining. Each
must get a clear error or be cut off, store nothing, and leave the node
serving everybody else at normal speed.
usage: s3_abuse_test.py path/to/aquifer"""
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402
from s3lib import Checks, Node, boto, error_code, raw, sign  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
check = Checks()
tmp = tempfile.mkdtemp(prefix="aq_s3_abuse_")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def signed_head(port, method, path, extra="", payload="UNSIGNED-PAYLOAD"):
    h = {"host": f"127.0.0.1:{port}"}
    sign(method, path, "", h, payload)
    return (f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + extra).encode()


try:
    creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
    node = Node(AQ, os.path.join(tmp, "node"), "--header-timeout", "3", "--io-timeout", "2", "--threads", "16",
                "--max-connections", "400", credentials=creds)
    port = node.port
    s3 = boto(port)
    s3.create_bucket(Bucket="abuse")
    s3.put_object(Bucket="abuse", Key="k", Body=b"v" * 1000)

    # ---- 200 slowloris connections: a byte every second, never a whole head ----
    # Each socket's fate is recorded as it is learnt: the node answers 408
    # and closes; a byte dripped after that close is answered with a reset,
    # so a failed send, a reset on the last read, an end of stream and a 408
    # all mean the node cut the client. Only a socket still open and silent
    # when read at the end was not cut. (Counting only the sockets still in
    # the drip list missed the ones cut early when the 20 requests below ran
    # slowly, e.g. under a sanitizer on a loaded machine.)
    header_timeouts_before = node.stats()["connections"]["header_timeouts"]
    stop = threading.Event()
    slow = []
    cut_while_dripping = set()
    for _ in range(200):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /abuse/k HTTP/1.1\r\n")
        slow.append(s)

    def drip():
        while not stop.is_set():
            for s in slow:
                if s in cut_while_dripping:
                    continue
                try:
                    s.send(b"X")
                except OSError:
                    cut_while_dripping.add(s)
            time.sleep(1)

    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    time.sleep(0.5)
    worst = 0
    for i in range(20):
        t0 = time.time()
        ok = s3.get_object(Bucket="abuse", Key="k")["Body"].read() == b"v" * 1000
        s3.put_object(Bucket="abuse", Key=f"during-{i}", Body=b"x")
        worst = max(worst, time.time() - t0)
        check(ok, "served while 200 slow clients hold connections")
    check(worst < 2.0, f"requests stay fast under slowloris: worst {worst:.3f} s")
    time.sleep(4)  # past the head timeout
    stop.set()
    dripper.join()
    cut = 0
    for s in slow:
        if s in cut_while_dripping:
            cut += 1
        else:
            s.settimeout(2)
            try:
                data = s.recv(4096)
                cut += 1 if (data == b"" or b" 408 " in data) else 0
            except ConnectionResetError:
                cut += 1
            except (socket.timeout, OSError):
                pass
        s.close()
    check(cut == 200, f"every slow client cut off at the head timeout: {cut} of 200 "
          f"({len(cut_while_dripping)} seen cut while dripping)")
    timed_out = node.stats()["connections"]["header_timeouts"] - header_timeouts_before
    check(timed_out == 200, f"the node counts 200 heads that did not arrive in time (408): {timed_out}")
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{node.metrics}/metrics", timeout=10).read().decode()
    exported = [float(line.split()[-1]) for line in metrics.splitlines()
                if line.startswith("aquifer_http_connections_timed_out_total ")]
    check(exported and exported[0] >= 200, f"/metrics exports them too: {exported}")

    # ---- a flood of header fields: 431, memory bounded ----
    before = rss_kib(node.p.pid)
    flood = b"GET /abuse/k HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-F%d: %s\r\n" % (i, b"v" * 60)
                                                               for i in range(20000)) + b"\r\n"
    threads = []
    replies = []
    for _ in range(20):
        t = threading.Thread(target=lambda: replies.append(raw(port, flood, timeout=5)))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    check(all(r.startswith(b"HTTP/1.1 431") or r == b"" for r in replies) and
          any(r.startswith(b"HTTP/1.1 431") for r in replies), "oversized heads answered 431")
    grew = rss_kib(node.p.pid) - before
    check(grew < 64 * 1024, f"20 clients sending 1.3 MB of headers each grew RSS by {grew} KiB")
    many = b"GET /abuse/k HTTP/1.1\r\nHost: x\r\n" + b"".join(b"A%d: 1\r\n" % i for i in range(150)) + b"\r\n"
    check(raw(port, many).startswith(b"HTTP/1.1 431"), "over 100 header fields -> 431")

    # ---- Content-Length that lies ----
    t0 = time.time()
    reply = raw(port, signed_head(port, "PUT", "/abuse/longer", "Content-Length: 100000\r\n\r\n") + b"x" * 10,
                timeout=15)
    took = time.time() - t0
    check(b" 400 " in reply.split(b"\r\n")[0] and b"RequestTimeout" in reply,
          f"a body shorter than its Content-Length times out as 400: {reply[:120]}")
    check(took < 6, f"... after the io timeout, not 30 s: {took:.1f} s")
    check(error_code(lambda: s3.head_object(Bucket="abuse", Key="longer")) in ("404", "NoSuchKey"),
          "nothing stored from the short body")
    reply = raw(port, signed_head(port, "PUT", "/abuse/shorter", "Content-Length: 5\r\n\r\n") + b"hello, and more",
                timeout=5)
    check(b" 400 " in reply.split(b"\r\n")[0], f"a body longer than its Content-Length refused: {reply[:160]}")
    check(error_code(lambda: s3.head_object(Bucket="abuse", Key="shorter")) in ("404", "NoSuchKey"),
          "no prefix of the longer body stored")
    # A legitimate pipelined request after a body is not mistaken for an overrun.
    two = (signed_head(port, "PUT", "/abuse/p1", "Content-Length: 3\r\n\r\n") + b"abc" +
           signed_head(port, "GET", "/abuse/p1", "\r\n"))
    reply = raw(port, two, timeout=3)
    check(reply.count(b"HTTP/1.1 200") == 2 and reply.endswith(b"abc"), f"pipelined PUT then GET: {reply[-60:]}")

    # ---- malformed requests ----
    for bad in [b"NOT HTTP AT ALL\r\n\r\n", b"GET /abuse/k HTTP/9.9\r\nHost: x\r\n\r\n",
                b"GET /abuse/k HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello",
                b"GET /abuse/k HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
                b"GET /abuse/k HTTP/1.1\r\nBad Header\r\n\r\n", b"GET abuse/k HTTP/1.1\r\nHost: x\r\n\r\n"]:
        reply = raw(port, bad, timeout=3)
        check(reply.startswith(b"HTTP/1.1 4"), f"malformed {bad[:40]!r} -> 4xx: {reply[:60]}")
    body = b"zz\r\nthis is not hex\r\n0\r\n\r\n"
    reply = raw(port, signed_head(port, "PUT", "/abuse/chunky", "Transfer-Encoding: chunked\r\n\r\n") + body,
                timeout=3)
    check(reply.startswith(b"HTTP/1.1 400"), f"a malformed chunked body -> 400: {reply[:80]}")
    check(error_code(lambda: s3.head_object(Bucket="abuse", Key="chunky")) in ("404", "NoSuchKey"),
          "nothing stored from the malformed chunked body")
    # Expect: 100-continue with a bad signature: refused before the body is sent.
    h = {"host": f"127.0.0.1:{port}", "Expect": "100-continue", "Content-Length": "1000000"}
    sign("PUT", "/abuse/expect", "", h, "UNSIGNED-PAYLOAD", secret="wrong")
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(("PUT /abuse/expect HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n").encode())
    reply = s.recv(4096)
    s.close()
    check(reply.startswith(b"HTTP/1.1 403"), f"Expect: 100-continue refused before the body: {reply[:60]}")

    # ---- more connections than the node takes ----
    idle = []
    refused = 0
    for _ in range(420):
        s = socket.create_connection(("127.0.0.1", port))
        idle.append(s)
    time.sleep(0.5)
    for s in idle[-30:]:
        s.settimeout(1)
        try:
            if s.recv(64).startswith(b"HTTP/1.1 503"):
                refused += 1
        except (socket.timeout, OSError):
            pass
    for s in idle:
        s.close()
    check(refused >= 15, f"connections past the limit answered 503: {refused}")
    time.sleep(0.5)
    check(s3.get_object(Bucket="abuse", Key="k")["Body"].read() == b"v" * 1000, "serving again after the flood")
    st = node.stats()
    check(st["server_errors"] == 0, f"no server errors through it all: {st['errors_by_status']}")
    check(node.stop() == 0, "node stops cleanly")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
