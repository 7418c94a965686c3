#!/usr/bin/python3
"""S3 conditional writes (If-None-Match: *, If-Match: ETAG) on PutObject and
CompleteMultipartUpload, on one node and on a two-node etcd cluster.

- Semantics: create-only succeeds once, then 412; If-Match with the right
  ETag replaces, with a wrong one 412, on a missing key 404; refused forms
  (If-None-Match other than *, both at once, on a part upload or a copy)
  are 501/400 and change nothing; a refused write leaves the object as it
  was; a multipart completion under a failing condition leaves the upload
  to complete again.
- Races, --trials times each (1,000 by default): two writers send
  If-None-Match: * for the same new key at the same moment (in the
  cluster, to different nodes): exactly one gets 200, the other 412 or
  409, and the object holds the winner's bytes. Then both send If-Match
  with the ETag they read: again exactly one wins.
usage: conditional_writes_test.py path/to/aquifer [--trials N]"""
import argparse
import os
import shutil
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("aquifer")
ap.add_argument("--trials", type=int, default=1000)
args = ap.parse_args()
AQ = os.path.abspath(args.aquifer)
check = s3lib.Checks()
tmp = tempfile.mkdtemp(prefix="aq_cond_")
creds = s3lib.write_credentials(os.path.join(tmp, "keys"))


def put(port, key, body, **headers):
    return s3lib.request(port, "PUT", f"/cond/{key}", body=body, headers=headers)


def get(port, key):
    return s3lib.request(port, "GET", f"/cond/{key}")


def semantics(port, where):
    st, h, _ = put(port, "a", b"first", **{"If-None-Match": "*"})
    check(st == 200, f"{where}: If-None-Match: * creates ({st})")
    etag = h.get("etag")
    st, _, body = put(port, "a", b"second", **{"If-None-Match": "*"})
    check(st == 412 and b"PreconditionFailed" in body, f"{where}: If-None-Match: * on an existing key: 412 ({st})")
    check(get(port, "a")[2] == b"first", f"{where}: the refused write changed nothing")
    st, _, _ = put(port, "a", b"third", **{"If-Match": '"0123456789abcdef0123456789abcdef"'})
    check(st == 412, f"{where}: If-Match with another ETag: 412 ({st})")
    st, h2, _ = put(port, "a", b"fourth", **{"If-Match": etag})
    check(st == 200 and get(port, "a")[2] == b"fourth", f"{where}: If-Match with its ETag replaces ({st})")
    st, _, _ = put(port, "a", b"fifth", **{"If-Match": etag.strip('"')})  # unquoted, and now stale
    check(st == 412 and get(port, "a")[2] == b"fourth", f"{where}: a stale If-Match: 412 ({st})")
    st, _, body = put(port, "missing", b"x", **{"If-Match": etag})
    check(st == 404 and b"NoSuchKey" in body, f"{where}: If-Match on a missing key: 404 ({st})")
    st, _, _ = put(port, "b", b"x", **{"If-None-Match": '"abc"'})
    check(st == 501 and get(port, "b")[0] == 404, f"{where}: If-None-Match other than *: 501, nothing written ({st})")
    st, _, _ = put(port, "b", b"x", **{"If-None-Match": "*", "If-Match": etag})
    check(st == 400 and get(port, "b")[0] == 404, f"{where}: both conditions: 400 ({st})")
    st, _, _ = put(port, "b", b"", **{"If-None-Match": "*", "x-amz-copy-source": "/cond/a"})
    check(st == 501 and get(port, "b")[0] == 404, f"{where}: a conditional copy: 501 ({st})")

    # The check that counts is the commit's: a create-only PUT whose body is
    # still arriving when another writer creates the key fails at its end.
    import hashlib
    import http.client
    body = b"slow" * 1000
    headers = {"host": f"127.0.0.1:{port}", "If-None-Match": "*"}
    s3lib.sign("PUT", "/cond/slow", "", headers, hashlib.sha256(body).hexdigest())
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.putrequest("PUT", "/cond/slow", skip_host=True, skip_accept_encoding=True)
    for k, v in headers.items():
        c.putheader(k, v)
    c.putheader("Content-Length", str(len(body)))
    c.endheaders()
    c.send(body[:100])
    check(put(port, "slow", b"the other writer")[0] == 200, f"{where}: the other writer")
    c.send(body[100:])
    st = c.getresponse().status
    c.close()
    check(st == 412 and get(port, "slow")[2] == b"the other writer",
          f"{where}: a create-only PUT that lost the race while sending its body: 412 at commit ({st})")

    # Multipart: the condition on the completion.
    st, _, body = s3lib.request(port, "POST", "/cond/a", query="uploads=")
    upload = body.split(b"<UploadId>")[1].split(b"</UploadId>")[0].decode()
    st, _, _ = s3lib.request(port, "PUT", "/cond/a", query=f"partNumber=1&uploadId={upload}", body=b"p",
                             headers={"If-None-Match": "*"})
    check(st == 501, f"{where}: a conditional part upload: 501 ({st})")
    st, ph, _ = s3lib.request(port, "PUT", "/cond/a", query=f"partNumber=1&uploadId={upload}", body=b"part one")
    xml = f"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{ph['etag']}</ETag></Part>" \
          "</CompleteMultipartUpload>".encode()
    st, _, _ = s3lib.request(port, "POST", "/cond/a", query=f"uploadId={upload}", body=xml,
                             headers={"If-None-Match": "*"})
    check(st == 412 and get(port, "a")[2] == b"fourth", f"{where}: completion with If-None-Match: * on a key: 412")
    st, _, body = s3lib.request(port, "POST", "/cond/a", query=f"uploadId={upload}", body=xml,
                                headers={"If-Match": h2["etag"]})
    check(st == 200 and b"<Error>" not in body and get(port, "a")[2] == b"part one",
          f"{where}: the upload stays and completes under a condition that holds ({st} {body[:200]})")


def race(ports, trials, where):
    """Two writers per trial, released together; returns problems found."""
    problems = []
    outcomes = {}
    for t in range(trials):
        key = f"race-{t}"
        bodies = [f"writer {w} trial {t}".encode() * 10 for w in range(2)]
        results = [None, None]
        gate = threading.Barrier(2)

        def writer(w, headers):
            gate.wait()
            try:
                results[w] = put(ports[w % len(ports)], key, bodies[w], **headers)[0]
            except Exception as e:  # noqa: BLE001
                results[w] = repr(e)
        threads = [threading.Thread(target=writer, args=(w, {"If-None-Match": "*"})) for w in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        wins = [w for w in range(2) if results[w] == 200]
        outcomes[tuple(sorted(map(str, results)))] = outcomes.get(tuple(sorted(map(str, results))), 0) + 1
        stored = get(ports[0], key)[2]
        if len(wins) != 1 or any(results[w] not in (200, 409, 412) for w in range(2)) or \
                stored != bodies[wins[0]]:
            problems.append(f"create {key}: {results}, stored {stored[:20]!r}")
            continue
        # Both read the ETag, both replace with If-Match: one wins.
        etag = s3lib.request(ports[0], "HEAD", f"/cond/{key}")[1]["etag"]
        results = [None, None]
        gate = threading.Barrier(2)
        bodies = [f"replace {w} trial {t}".encode() for w in range(2)]
        threads = [threading.Thread(target=writer, args=(w, {"If-Match": etag})) for w in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        wins = [w for w in range(2) if results[w] == 200]
        stored = get(ports[0], key)[2]
        if len(wins) != 1 or any(results[w] not in (200, 409, 412) for w in range(2)) or \
                stored != bodies[wins[0]]:
            problems.append(f"replace {key}: {results}, stored {stored[:20]!r}")
    print(f"{where}: {trials} trials x 2 races; outcomes of the creates: {outcomes}")
    return problems


node = etcd = None
nodes = []
try:
    node = s3lib.Node(AQ, os.path.join(tmp, "single"), credentials=creds)
    check(s3lib.request(node.port, "PUT", "/cond")[0] == 200, "bucket")
    semantics(node.port, "one node")
    problems = race([node.port], args.trials, "one node")
    check(not problems, f"one node: exactly one writer wins every race: {len(problems)} problems {problems[:3]}")
    node.stop()
    node = None

    etcd = s3lib.Etcd(tmp)
    nodes = [s3lib.ClusterNode(AQ, tmp, f"n{i}", etcd.url, creds, "--replicas", "2") for i in (1, 2)]
    ports = [n.port for n in nodes]
    check(s3lib.request(ports[0], "PUT", "/cond")[0] == 200, "cluster bucket")
    semantics(ports[1], "cluster")
    problems = race(ports, args.trials, "cluster")
    check(not problems, f"cluster: exactly one writer wins every race: {len(problems)} problems {problems[:3]}")
finally:
    for n in nodes:
        n.stop()
    if node is not None:
        node.stop()
    if etcd is not None:
        etcd.stop()
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()

