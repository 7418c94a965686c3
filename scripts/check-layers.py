#!/usr/bin/python3
"""Checks every #include edge between src/ layers against the layer graph
declared in docs/architecture.md (the ```layers block): a file in src/A may
include src/B only when the graph lists B among A's dependencies ("A: B C"),
or, for A's *_test.cc files, on A's "A tests:" line. An upward or undeclared
edge fails with the file and line. A layer folder the graph does not know
fails too, so a new layer must be placed in the drawing.

Also checks the clock seam: production code reads the time through
common/clock.h (Clock::Real(), or the Clock it was given), so that tests can
move it; a direct steady_clock/system_clock now() is allowed only in the
files of TIMERS, which time their own work for a report.
usage: check-layers.py [REPO_ROOT]"""
import os
import re
import sys

root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
doc = open(os.path.join(root, "docs", "architecture.md"), encoding="utf-8").read()
m = re.search(r"```layers\n(.*?)```", doc, re.S)
if not m:
    sys.exit("check-layers: docs/architecture.md has no ```layers block")
allowed, tests = {}, {}
for line in m.group(1).splitlines():
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, _, deps = line.partition(":")
    name = name.strip()
    target = tests if name.endswith(" tests") else allowed
    target[name.replace(" tests", "")] = set(deps.split())
for layer, deps in allowed.items():
    unknown = deps - set(allowed)
    if unknown:
        sys.exit(f"check-layers: layer {layer} depends on undeclared layers {sorted(unknown)}")

# The graph must be acyclic (each layer only uses layers below it).
state = {}


def visit(layer, path):
    if state.get(layer) == "done":
        return
    if state.get(layer) == "visiting":
        sys.exit("check-layers: the layer graph has a cycle: " + " -> ".join(path + [layer]))
    state[layer] = "visiting"
    for d in allowed[layer]:
        visit(d, path + [layer])
    state[layer] = "done"


for layer in allowed:
    visit(layer, [])

src = os.path.join(root, "src")
errors, edges = [], 0
include = re.compile(r'^\s*#\s*include\s+"([a-z0-9_]+)/[^"]+"')
for layer in sorted(os.listdir(src)):
    folder = os.path.join(src, layer)
    if not os.path.isdir(folder):
        continue
    if layer not in allowed:
        errors.append(f"src/{layer}/: a layer docs/architecture.md does not place")
        continue
    for name in sorted(os.listdir(folder)):
        if not name.endswith((".h", ".cc")):
            continue
        ok = allowed[layer] | {layer}
        if name.endswith("_test.cc") or name.startswith("test_"):
            ok = ok | tests.get(layer, set())
        for n, text in enumerate(open(os.path.join(folder, name), encoding="utf-8"), 1):
            hit = include.match(text)
            if not hit:
                continue
            edges += 1
            dep = hit.group(1)
            if dep not in ok and os.path.isdir(os.path.join(src, dep)):
                kind = "upward" if layer in allowed.get(dep, set()) or dep not in allowed else "undeclared"
                errors.append(f"src/{layer}/{name}:{n}: includes {dep}/ ({kind} edge; {layer} may use: "
                              f"{', '.join(sorted(allowed[layer])) or 'nothing'})")

# The clock seam: where a direct now() is a timer of the file's own work.
TIMERS = {
    "common/clock.cc": "the seam itself",
    "common/progress.cc": "a progress line's elapsed time and rate",
    "monitor/sampler.cc": "the sampler's timeline",
    "bench/pipeline_bench.cc": "bench timers",
    "bench/result.cc": "bench timers",
    "bench/storage_bench.cc": "bench timers",
    "bench/storage_readers.cc": "bench timers (request latencies)",
    "bench/train_bench.cc": "bench timers",
    "cli/bench_commands.cc": "bench timers",
    "dataset/expand.cc": "the command's elapsed time in its report",
    "dataset/pack.cc": "the command's elapsed time in its report",
    "dataset/resize.cc": "the command's elapsed time in its report",
    "dataset/synth.cc": "the command's elapsed time in its report",
    "dataset/verify.cc": "the command's elapsed time in its report",
    "pipeline/pipeline.cc": "per-stage busy time (utilisation) and batch latencies",
}
now_call = re.compile(r"\b(steady_clock|system_clock|high_resolution_clock|Clock)::now\(\)")
clock_errors, clock_calls = [], 0
for layer in sorted(os.listdir(src)):
    folder = os.path.join(src, layer)
    if not os.path.isdir(folder):
        continue
    for name in sorted(os.listdir(folder)):
        if not name.endswith((".h", ".cc")) or name.endswith("_test.cc") or name.startswith("test_"):
            continue
        rel = f"{layer}/{name}"
        for n, text in enumerate(open(os.path.join(folder, name), encoding="utf-8"), 1):
            if now_call.search(text.split("//")[0]):
                clock_calls += 1
                if rel not in TIMERS:
                    clock_errors.append(f"src/{rel}:{n}: reads the time directly; use Clock::Real() or the Clock "
                                        "it is given (common/clock.h), or list the file in TIMERS if it times "
                                        "its own work")
for rel in TIMERS:
    if not os.path.exists(os.path.join(src, rel)):
        clock_errors.append(f"TIMERS names src/{rel}, which does not exist")
errors += clock_errors
if errors:
    print("\n".join(errors))
    sys.exit(f"check-layers: {len(errors)} finding(s): include edges that break the layer graph in "
             "docs/architecture.md, or time read around the clock seam")
print(f"layers: {edges} includes across {len(allowed)} layers follow docs/architecture.md; "
      f"{clock_calls} direct clock reads, all in timers")
