#!/usr/bin/python3
"""Runs the shell examples of README.md and docs/*.md as a reader would, so
the documentation cannot drift from the code.

usage: run_docs.py REPO_DIR BUILD_DIR [FILE.md ...]   (default: README.md, docs/*.md)

Every fenced block opened with ```sh is run; other fences (```, ```json,
```layers) are not shell. The blocks of one file run in order in one bash
session (so `cd` and `export` carry over, as in a reader's terminal) with
`set -euo pipefail`, in a fresh scratch directory that is also $HOME, with
the build directory, bench/ and examples/ first on PATH, the build's
Python package on PYTHONPATH, and no AWS_* or AQUIFER_* variables. Jobs a
block starts in the background (`aquifer serve ... &`, `etcd ... &`) are
stopped when the block ends.

A block that cannot run here starts with `# not run: REASON`; a line that
cannot ends with `# not run: REASON` (or matches SKIPPED_LINES: `make check`,
which runs this harness). All are reported, never skipped in silence. Sizes that would take hours are scaled down by SUBSTITUTIONS below
(the same commands, smaller numbers); each substitution made is printed.
"""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# (pattern, replacement, why): applied to every runnable line, in order.
SUBSTITUTIONS = [
    (r"--images (\d{5,})", "--images 1200", "dataset size"),
    (r"(\bdataset synth\b.*--images 1200\b.*)--profile small\b", r"\1--profile tiny", "image size"),
    (r"--shards (\d{3,})", "--shards 4", "dataset size"),
    (r"--copies (\d{2,})", "--copies 2", "dataset size"),
    (r"--duration (\d{2,})", "--duration 3", "run time"),
    (r"(\s)-d (\d{2,})\b", r"\1-d 3", "run time"),
    (r"^make demo\b", 'make -C "$AQ_REPO" --no-print-directory demo DEMO_DIR="$PWD/demo-data" DEMO_IMAGES=200',
     "the demo runs in the checkout, its data here"),
    (r"\bcompare_torchvision( .*)?$", r"compare_torchvision\1 --images 48 --batch 16 --repeats 1", "run time"),
    (r"\bcompare_peers( .*)?$", r"compare_peers\1 --images 48 --batch 16 --repeats 1", "run time"),
    (r"\bcompare_fio( .*)?$", r"compare_fio\1 --repeats 1 --runtime 2 --ramp 1 --size 32MiB --nrfiles 2",
     "run time"),
    (r"\bnode_vs_local( .*)?$", r"node_vs_local\1 --repeats 1 --images 24 --seconds 1", "run time"),
    (r"\bmount_vs_peers( .*)?$", r"mount_vs_peers\1 --repeats 1 --images 200 --shard-images 48", "run time"),
    (r"\bcluster_scaling( .*)?$", r"cluster_scaling\1 --repeats 1 --images 64 --seconds 1 --nodes 2", "run time"),
    (r"\bsmall_files( .*)?$", r"small_files\1 --repeats 1 --images 100 --seconds 1 --readers 2", "run time"),
    (r"\bcompare_dataloader( .*)?$", r"compare_dataloader\1 --images 256 --batch 32 --repeats 1 --train-epochs 1",
     "run time"),
]

# (pattern, reason): lines run elsewhere, reported as not run here.
SKIPPED_LINES = [
    (r"^make check\b", "make check runs this harness"),
]

NOT_RUN = re.compile(r"#\s*not run:\s*(\S.*)$")
HEREDOC = re.compile(r"<<-?\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?")
# Under CTest's TIMEOUT for these tests (900 s): CTest kills this harness
# outright, which leaves what a doc started (etcd on its fixed port, nodes)
# running; timing out first, the harness stops them and shows the output.
BLOCK_TIMEOUT_S = 840


def blocks(path):
    """[(first line number, [lines])] of the ```sh blocks of a markdown file."""
    out, cur, start = [], None, 0
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            stripped = line.rstrip("\n")
            if cur is None:
                if stripped.strip() == "```sh":
                    cur, start = [], n + 1
            elif stripped.strip() == "```":
                out.append((start, cur))
                cur = None
            else:
                cur.append(stripped)
    if cur is not None:
        raise SystemExit(f"{path}:{start - 1}: a ```sh block is never closed")
    return out


def split_comment(line):
    """(code, comment): the comment starts at a '#' after whitespace, outside
    quotes and not in $#."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip(), line[i:]
    return line, ""


def substitute(line):
    code, comment = split_comment(line)
    notes = []
    for pattern, repl, why in SUBSTITUTIONS:
        new = re.sub(pattern, repl, code)
        if new != code:
            notes.append(why)
            code = new
    return (code + ("  " + comment if comment else "")) if notes else line, notes


# A block that uses the Python package needs it in the build tree; builds
# without it (the sanitizer builds leave it out) report such blocks as not run.
NEEDS_PYTHON = re.compile(r"import aquifer|aquifer\.Loader|\btrain_imagenet\.py\b|\bcompare_dataloader\b")
HAVE_PYTHON = True


def script_for(doc, doc_blocks, report):
    """The bash script for one document, and script line -> doc line."""
    lines = [
        "set -euo pipefail",
        "__aq_where='' __aq_last=0",
        # Each runnable line marks where it starts; the time to the next mark is that line's.
        "__aq_at() { local now=${EPOCHREALTIME/./}; if [ -n \"$__aq_where\" ]; then "
        "echo \"__AQ_LINE $__aq_where $(( (now - __aq_last) / 1000 ))\"; fi; __aq_where=$1; __aq_last=$now; }",
        "trap 'echo \"__AQ_FAILED $__aq_where (exit $?)\" >&2' ERR",
        "__aq_stop_jobs() { local j; j=$(jobs -p); if [ -n \"$j\" ]; then kill $j 2>/dev/null || true; "
        "wait $j 2>/dev/null || true; fi; }",
    ]
    for start, body in doc_blocks:
        first = next((b for b in body if b.strip()), "")
        m = NOT_RUN.search(first) if first.strip().startswith("#") else None
        if m:
            report.append(f"{doc}:{start}: block not run: {m.group(1)}")
            continue
        if first.strip().startswith("#") and "not run" in first:
            raise SystemExit(f"{doc}:{start}: '# not run' needs a reason: '# not run: REASON'")
        if not HAVE_PYTHON and any(NEEDS_PYTHON.search(b) for b in body):
            report.append(f"{doc}:{start}: block not run: this build has no Python package (build/python)")
            continue
        lines.append(f"echo '== {doc}:{start}' >&2")
        lines.append("__aq_t0=$(date +%s%N)")
        continued = False
        heredoc = None  # the terminator while inside a here-document (passed through as is)
        for k, raw in enumerate(body):
            n = start + k
            if heredoc is not None:
                lines.append(raw)
                if raw.strip() == heredoc:
                    heredoc = None
                continue
            m = HEREDOC.search(split_comment(raw)[0])
            if m:
                heredoc = m.group(1)
            m = NOT_RUN.search(raw)
            why = m.group(1) if m and not raw.strip().startswith("#") else None
            why = why or next((r for p, r in SKIPPED_LINES if re.search(p, raw)), None)
            if why:
                report.append(f"{doc}:{n}: line not run: {why}")
                lines.append(":")
                continued = raw.rstrip().endswith("\\")
                continue
            text, notes = substitute(raw)
            for why in notes:
                report.append(f"{doc}:{n}: scaled down ({why}): {text.strip()}")
            if not continued and text.strip() and not text.strip().startswith("#"):
                lines.append(f"__aq_at '{doc}:{n}'")
            lines.append(text)
            continued = text.rstrip().endswith("\\")
        lines.append("__aq_stop_jobs")
        lines.append("__aq_at ''")
        lines.append(f"echo \"__AQ_TOOK {doc}:{start} $(( ($(date +%s%N) - __aq_t0) / 1000000 ))\"")
    return "\n".join(lines) + "\n"


def run_doc(repo, build, doc):
    doc_blocks = blocks(os.path.join(repo, doc))
    report = []
    script = script_for(doc, doc_blocks, report)
    runnable = sum(1 for line in script.splitlines() if line.startswith("echo '== "))
    for r in report:
        print("  " + r)
    if runnable == 0:
        print(f"{doc}: no runnable block")
        return True
    scratch = tempfile.mkdtemp(prefix="aq_docs_")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and not k.startswith("AQUIFER_")}
    env.update({
        "HOME": scratch,
        "PATH": f"{os.path.abspath(build)}:{os.path.join(repo, 'bench')}:{os.path.join(repo, 'examples')}:"
                f"{env.get('PATH', '/usr/bin:/bin')}",
        "PYTHONPATH": os.path.join(os.path.abspath(build), "python"),
        "AQ_REPO": repo,
        "TERM": "dumb",
    })
    t0 = time.time()
    proc = subprocess.Popen(["bash", "-c", script], cwd=scratch, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)

    def stopped(signum, _frame):  # interrupted or terminated: take the doc's processes along
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        print(f"{doc}: stopped by signal {signum} after {time.time() - t0:.0f} s (scratch kept: {scratch})")
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stopped)
    signal.signal(signal.SIGINT, stopped)
    try:
        out, _ = proc.communicate(timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        out += f"\n__AQ_FAILED timed out after {BLOCK_TIMEOUT_S} s\n"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything a block left running
        except ProcessLookupError:
            pass
    ok = proc.returncode == 0 and "__AQ_FAILED" not in out
    took = time.time() - t0
    if ok:
        blocks_ms = sorted(((int(ms), where) for where, ms in re.findall(r"__AQ_TOOK (\S+) (\d+)", out)), reverse=True)
        slowest = ", ".join(f"{where} {ms / 1000:.0f} s" for ms, where in blocks_ms[:3])
        print(f"{doc}: {runnable} block(s) ran in {took:.0f} s" + (f" (slowest: {slowest})" if slowest else ""))
        per_line = {}
        for where, ms in re.findall(r"__AQ_LINE (\S+) (\d+)", out):
            per_line[where] = per_line.get(where, 0) + int(ms)
        lines_ms = sorted(((ms, where) for where, ms in per_line.items()), reverse=True)
        if lines_ms:
            print(f"{doc}: slowest lines: " + ", ".join(f"{where} {ms / 1000:.1f} s" for ms, where in lines_ms[:int(os.environ.get("AQ_DOCS_SLOWEST", "5"))]))
        shutil.rmtree(scratch, ignore_errors=True)
        return True
    failed = re.findall(r"__AQ_FAILED (.*)", out)
    print(f"{doc}: FAILED at {failed[-1] if failed else '?'} after {took:.0f} s (scratch kept: {scratch})")
    tail = out.splitlines()[-60:]
    print("\n".join("  | " + line for line in tail))
    return False


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    repo, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    global HAVE_PYTHON
    HAVE_PYTHON = os.path.exists(os.path.join(build, "python", "aquifer", "__init__.py"))
    docs = sys.argv[3:] or ["README.md"] + sorted(os.path.relpath(p, repo)
                                                  for p in glob.glob(os.path.join(repo, "docs", "*.md")))
    results = [run_doc(repo, build, d) for d in docs]
    if not all(results):
        sys.exit(1)
    print(f"docs: every runnable block of {len(docs)} file(s) ran")


if __name__ == "__main__":
    main()
