#!/usr/bin/python3
"""Everyday S3 tools, unmodified (Debian's awscli, rclone and s3fs), against
a real node: the command sets people run — awscli cp / sync / mv / s3-to-s3
copy / rm; rclone copy twice (the second copies nothing), check, moveto;
s3fs cp -r, diff -r, mv, mkdir — with every byte compared. s3fs needs
/dev/fuse and is skipped, saying so, where it is missing. With --tls the
same command sets run over HTTPS, each tool verifying the node's
certificate against a test CA it is given the way its users give one
(awscli --ca-bundle, rclone --ca-cert, s3fs CURL_CA_BUNDLE, boto3 verify=).
usage: s3_tools_test.py path/to/aquifer [--tls]"""
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402
from s3lib import KEY, SECRET, Checks, Node, boto  # noqa: E402

AQ = os.path.abspath(sys.argv[1])
TLS = "--tls" in sys.argv[2:]
check = Checks()
tmp = tempfile.mkdtemp(prefix="aq_s3_tools_")


def make_tree(root, files):
    for rel, size in files.items():
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(os.urandom(size))


def same_tree(a, b):
    cmp = filecmp.dircmp(a, b)

    def walk(c):
        if c.left_only or c.right_only or c.diff_files or c.funny_files:
            return False
        _, mismatch, errors = filecmp.cmpfiles(c.left, c.right, c.common_files, shallow=False)
        return not mismatch and not errors and all(walk(s) for s in c.subdirs.values())
    return walk(cmp)


def run(args, env=None, timeout=300):
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)


mount = None
node = None
try:
    creds = s3lib.write_credentials(os.path.join(tmp, "keys"))
    ca = None
    extra = []
    if TLS:
        ca, cert, key = s3lib.make_certificates(os.path.join(tmp, "pki"))
        extra = ["--tls-cert", cert, "--tls-key", key]
    node = Node(AQ, os.path.join(tmp, "node"), *extra, credentials=creds)
    node.ca = ca
    endpoint = f"{'https' if TLS else 'http'}://127.0.0.1:{node.port}"
    s3 = boto(node.port, ca=ca)
    print("endpoint:", endpoint, flush=True)
    src = os.path.join(tmp, "src")
    make_tree(src, {"a.bin": 300_000, "dir/b.bin": 1_000, "dir/sub/c.bin": 0, "big.bin": 20 << 20,
                    "name with spaces.txt": 50, "plus+and&amp.txt": 60, "caf\u00e9.txt": 70})

    # ---- awscli ----
    home = os.path.join(tmp, "awshome")
    os.makedirs(os.path.join(home, ".aws"))
    with open(os.path.join(home, ".aws", "config"), "w") as f:
        f.write("[default]\nregion = us-east-1\ns3 =\n    addressing_style = path\n")
    env = dict(os.environ, HOME=home, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET,
               AWS_EC2_METADATA_DISABLED="true", AWS_PAGER="")
    # Debian's awscli 2.9 (another `aws` earlier on PATH may be a different major version).
    aws = ["/usr/bin/aws" if os.path.exists("/usr/bin/aws") else "aws", "--endpoint-url", endpoint]
    if TLS:
        aws += ["--ca-bundle", ca]
    r = run([aws[0], "--version"], env)
    print("awscli:", r.stdout.strip(), flush=True)
    r = run(aws + ["s3", "mb", "s3://awscli"], env)
    check(r.returncode == 0, "aws s3 mb: " + r.stderr)
    r = run(aws + ["s3", "cp", os.path.join(src, "big.bin"), "s3://awscli/big.bin"], env)
    check(r.returncode == 0, "aws s3 cp (multipart, 20 MB): " + r.stderr)
    r = run(aws + ["s3", "sync", src, "s3://awscli/tree"], env)
    check(r.returncode == 0, "aws s3 sync up: " + r.stderr)
    r = run(aws + ["s3", "sync", src, "s3://awscli/tree"], env)
    check(r.returncode == 0 and "upload:" not in r.stdout, "aws s3 sync again uploads nothing: " + r.stdout)
    down = os.path.join(tmp, "aws-down")
    r = run(aws + ["s3", "sync", "s3://awscli/tree", down], env)
    check(r.returncode == 0 and same_tree(src, down), "aws s3 sync down, byte for byte: " + r.stderr)
    r = run(aws + ["s3", "cp", "s3://awscli/big.bin", "s3://awscli/copy/big.bin"], env)
    check(r.returncode == 0, "aws s3 cp s3:// -> s3:// (server-side copy): " + r.stderr)
    r = run(aws + ["s3", "mv", "s3://awscli/tree/a.bin", "s3://awscli/moved/a.bin"], env)
    check(r.returncode == 0, "aws s3 mv: " + r.stderr)
    got = s3.get_object(Bucket="awscli", Key="moved/a.bin")["Body"].read()
    check(got == open(os.path.join(src, "a.bin"), "rb").read(), "moved bytes intact")
    check(s3.get_object(Bucket="awscli", Key="copy/big.bin")["Body"].read() ==
          open(os.path.join(src, "big.bin"), "rb").read(), "copied 20 MB intact")
    r = run(aws + ["s3", "ls", "s3://awscli/tree/", "--recursive"], env)
    check(r.returncode == 0 and "a.bin" not in r.stdout.split("tree/")[-1] and "dir/b.bin" in r.stdout,
          "aws s3 ls --recursive after mv: " + r.stdout)
    r = run(aws + ["s3api", "put-object-tagging", "--bucket", "awscli", "--key", "big.bin", "--tagging",
                   "TagSet=[{Key=a,Value=b}]"], env)
    check(r.returncode != 0 and "NotImplemented" in r.stderr, "tagging refused with NotImplemented: " + r.stderr)
    check(s3.get_object(Bucket="awscli", Key="big.bin")["ContentLength"] == 20 << 20, "and the object is untouched")
    r = run(aws + ["s3", "rm", "s3://awscli", "--recursive"], env)
    check(r.returncode == 0, "aws s3 rm --recursive: " + r.stderr)
    r = run(aws + ["s3", "rb", "s3://awscli"], env)
    check(r.returncode == 0, "aws s3 rb: " + r.stderr)

    # ---- rclone ----
    renv = dict(os.environ, RCLONE_CONFIG_AQ_TYPE="s3", RCLONE_CONFIG_AQ_PROVIDER="Other",
                RCLONE_CONFIG_AQ_ACCESS_KEY_ID=KEY, RCLONE_CONFIG_AQ_SECRET_ACCESS_KEY=SECRET,
                RCLONE_CONFIG_AQ_ENDPOINT=endpoint, RCLONE_CONFIG_AQ_FORCE_PATH_STYLE="true",
                RCLONE_CONFIG_AQ_REGION="us-east-1", RCLONE_CONFIG=os.path.join(tmp, "rclone.conf"))
    if TLS:
        renv["RCLONE_CA_CERT"] = ca
    r = run(["rclone", "mkdir", "aq:rclone"], renv)
    check(r.returncode == 0, "rclone mkdir: " + r.stderr)
    r = run(["rclone", "copy", src, "aq:rclone/tree", "--stats-one-line", "-v"], renv)
    check(r.returncode == 0, "rclone copy: " + r.stderr[-500:])
    r = run(["rclone", "copy", src, "aq:rclone/tree", "-v"], renv)
    check(r.returncode == 0 and "Copied" not in r.stderr, "rclone copy again copies nothing: " + r.stderr[-500:])
    r = run(["rclone", "check", src, "aq:rclone/tree"], renv)
    check(r.returncode == 0, "rclone check: " + r.stderr[-500:])
    r = run(["rclone", "check", "--download", src, "aq:rclone/tree"], renv)
    check(r.returncode == 0, "rclone check --download (byte for byte): " + r.stderr[-500:])
    r = run(["rclone", "moveto", "aq:rclone/tree/a.bin", "aq:rclone/moved.bin"], renv)
    check(r.returncode == 0, "rclone moveto (server-side copy): " + r.stderr[-500:])
    check(s3.get_object(Bucket="rclone", Key="moved.bin")["Body"].read() == open(os.path.join(src, "a.bin"),
                                                                               "rb").read(), "rclone moved bytes")
    r = run(["rclone", "lsf", "aq:rclone/tree"], renv)
    check(r.returncode == 0 and "a.bin" not in r.stdout.split(), "source gone after moveto: " + r.stdout)
    r = run(["rclone", "purge", "aq:rclone"], renv)
    check(r.returncode == 0, "rclone purge: " + r.stderr[-500:])

    # ---- s3fs ----
    if not os.path.exists("/dev/fuse") or shutil.which("s3fs") is None:
        print("SKIP: s3fs checks need /dev/fuse and s3fs (not available here)")
    else:
        s3.create_bucket(Bucket="s3fs")
        pw = os.path.join(tmp, "s3fs.passwd")
        with open(pw, "w") as f:
            f.write(f"{KEY}:{SECRET}\n")
        os.chmod(pw, 0o600)
        mount = os.path.join(tmp, "mnt")
        os.makedirs(mount)
        r = run(["s3fs", "s3fs", mount, "-o", f"url={endpoint}", "-o", "use_path_request_style", "-o",
                 f"passwd_file={pw}", "-o", "sigv4", "-o", "endpoint=us-east-1", "-o", "dbglevel=warn"],
                env=dict(os.environ, CURL_CA_BUNDLE=ca) if TLS else None)
        ok = r.returncode == 0
        for _ in range(50):
            if os.path.ismount(mount):
                break
            time.sleep(0.1)
        check(ok and os.path.ismount(mount), "s3fs mounted: " + r.stderr)
        if os.path.ismount(mount):
            r = run(["cp", "-r", src, os.path.join(mount, "tree")])
            check(r.returncode == 0, "s3fs cp -r: " + r.stderr)
            r = run(["diff", "-r", src, os.path.join(mount, "tree")])
            check(r.returncode == 0, "s3fs diff -r: " + r.stdout[-300:] + r.stderr)
            r = run(["mkdir", os.path.join(mount, "newdir")])
            check(r.returncode == 0 and os.path.isdir(os.path.join(mount, "newdir")), "s3fs mkdir: " + r.stderr)
            r = run(["mv", os.path.join(mount, "tree", "a.bin"), os.path.join(mount, "newdir", "a.bin")])
            check(r.returncode == 0, "s3fs mv (copy + delete on the node): " + r.stderr)
            check(open(os.path.join(mount, "newdir", "a.bin"), "rb").read() ==
                  open(os.path.join(src, "a.bin"), "rb").read(), "s3fs mv bytes intact")
            check(s3.get_object(Bucket="s3fs", Key="newdir/a.bin")["Body"].read() ==
                  open(os.path.join(src, "a.bin"), "rb").read(), "the moved object on the node")
            run(["fusermount3", "-u", mount]) if shutil.which("fusermount3") else run(["umount", mount])
            check(not os.path.ismount(mount), "s3fs unmounted")
    st = node.stats()
    errors = dict(st["errors_by_status"])
    check(errors.pop("501", 0) == 1 and not any(k.startswith("5") for k in errors),
          f"no server errors from the tools but the one refusal asked for: {st['errors_by_status']}")
    check(node.stop() == 0, "node stops cleanly")
    node = None
finally:
    if mount and os.path.ismount(mount):
        subprocess.run(["umount", "-l", mount])
    if node:
        node.stop()
    shutil.rmtree(tmp, ignore_errors=True)
check.finish()
