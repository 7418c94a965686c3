"""What the tests on a lab (scripts/lab) share: whether one can be made
here, and running the lab's commands."""
import os
import shutil
import subprocess
import sys

LAB_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "lab")


def require_lab():
    """Exit 77 (CTest's skip) with the reason when this machine cannot host
    a lab: not root, a tool missing, or no network namespaces."""
    if os.geteuid() != 0:
        print("SKIP: the lab makes network namespaces and needs root")
        sys.exit(77)
    for tool in ("ip", "tc", "nft", "nsenter", "etcd"):
        if not shutil.which(tool):
            print(f"SKIP: {tool} is missing (scripts/install-deps.sh installs it)")
            sys.exit(77)
    probe = subprocess.run(["ip", "netns", "add", f"aqprobe{os.getpid()}"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"SKIP: network namespaces are not available here: {probe.stderr.strip()}")
        sys.exit(77)
    subprocess.run(["ip", "netns", "del", f"aqprobe{os.getpid()}"])


def runner(name):
    """lab(*args, check=True, timeout=120): runs `scripts/lab --name NAME
    ARGS`, returning the CompletedProcess; a failure raises RuntimeError
    naming the command and its message when `check`."""
    def lab(*a, check=True, timeout=120, **kw):
        r = subprocess.run([sys.executable, LAB_SCRIPT, "--name", name] + list(a), capture_output=True, text=True,
                           timeout=timeout, **kw)
        if check and r.returncode != 0:
            raise RuntimeError(f"lab {' '.join(a)}: {r.stderr.strip()}")
        return r
    return lab
