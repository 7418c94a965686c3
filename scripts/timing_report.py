#!/usr/bin/python3
"""Where a `make check` or `.ci/run` spent its time.

usage: timing_report.py TIMING.tsv [CTEST_JUNIT.xml ...] [--slowest N] [--budget MIN]

TIMING.tsv has one line per stage, written by scripts/stage.sh:
NAME<TAB>seconds<TAB>exit status. Each JUnit file is what
`ctest --output-junit` wrote in a build directory; the build directory's
name tells the suites apart (build, build-asan). Prints the stages with
their share of the total, then the slowest tests over all suites.
"""
import argparse
import os
import sys
import xml.etree.ElementTree as ET


def minutes(s):
    if s < 59.5:
        return f"{s:.0f} s"
    r = int(round(s))
    return f"{r // 60}:{r % 60:02d}"


def stages(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as fh:
        for line in fh:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 3:
                out.append((parts[0], float(parts[1]), int(parts[2])))
    return out


def tests(junit):
    """[(seconds, suite, test, status)] of one ctest JUnit file."""
    suite = os.path.basename(os.path.dirname(os.path.abspath(junit)))
    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"timing: cannot read {junit}: {e}", file=sys.stderr)
        return []
    out = []
    for case in root.iter("testcase"):
        status = case.get("status", "run")
        if case.find("failure") is not None:
            status = "failed"
        elif case.find("skipped") is not None or status == "notrun":
            status = "skipped"
        else:
            status = "passed" if status == "run" else status
        out.append((float(case.get("time", 0) or 0), suite, case.get("name", "?"), status))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("timing")
    ap.add_argument("junit", nargs="*")
    ap.add_argument("--slowest", type=int, default=10)
    ap.add_argument("--budget", type=float, default=0, help="minutes; say whether the total is inside it")
    ap.add_argument("--title", default="timing")
    a = ap.parse_args()

    rows = stages(a.timing)
    total = sum(s for _, s, _ in rows)
    print(f"\n== {a.title}: where the time went ==")
    width = max([len(n) for n, _, _ in rows] + [5])
    for name, secs, rc in rows:
        share = 100 * secs / total if total else 0
        flag = "" if rc == 0 else f"  (exit {rc})"
        print(f"  {name:<{width}}  {minutes(secs):>7}  {share:5.1f}%{flag}")
    print(f"  {'total':<{width}}  {minutes(total):>7}")
    if a.budget:
        verdict = "inside" if total <= a.budget * 60 else "OVER"
        print(f"  budget {a.budget:.0f} min: {verdict} ({100 * total / (a.budget * 60):.0f}% used)")

    cases = [t for j in a.junit if os.path.exists(j) for t in tests(j)]
    if cases:
        cases.sort(reverse=True)
        by_suite = {}
        for secs, suite, _, _ in cases:
            n, s = by_suite.get(suite, (0, 0.0))
            by_suite[suite] = (n + 1, s + secs)
        print(f"  tests: " + "; ".join(f"{suite} {n} tests, {minutes(s)} summed"
                                       for suite, (n, s) in sorted(by_suite.items())))
        print(f"  the {min(a.slowest, len(cases))} slowest tests:")
        for secs, suite, name, status in cases[:a.slowest]:
            print(f"    {minutes(secs):>7}  {suite:<11} {name}" + ("" if status == "passed" else f"  ({status})"))


if __name__ == "__main__":
    main()
