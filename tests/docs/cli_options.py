#!/usr/bin/python3
"""Every command and every long option `aquifer --help` shows is in
docs/cli.md, and every `--option` a help text mentions is one the program
takes: so an option cannot go missing from the docs, nor a help text point
at an option that does not exist.

Walks `aquifer [SUBCOMMAND...] --help` from the top. A command's options
are the flags listed under "Options:"; its subcommands those under
"Subcommands:".
usage: cli_options.py AQUIFER REPO_DIR"""
import os
import re
import subprocess
import sys

AQ, REPO = sys.argv[1], sys.argv[2]
doc = open(os.path.join(REPO, "docs", "cli.md")).read()


def help_of(path):
    r = subprocess.run([AQ, *path, "--help"], capture_output=True, text=True, timeout=30)
    return r.stdout


def sections(text):
    """(options listed, subcommands listed, the option descriptions' text)."""
    options, subcommands, prose = set(), [], []
    part = None
    for line in text.splitlines():
        if line.startswith("Options:"):
            part = "options"
            continue
        if line.startswith("Subcommands:"):
            part = "subcommands"
            continue
        if not line.startswith(" "):
            part = None if line.strip() == "" and part == "subcommands" else part
            continue
        if part == "options":
            flags = re.match(r"\s+((?:-\w,)?--[\w-]+(?:,--[\w-]+)*)", line)
            if flags:
                options.update(re.findall(r"--[\w-]+", flags.group(1)))
                prose.append(line[flags.end():])
            else:
                prose.append(line)
        elif part == "subcommands":
            name = re.match(r"  ([a-z][\w-]*)(\s{2,}|$)", line)  # continuation lines are indented deeper
            if name:
                subcommands.append(name.group(1))
    return options, subcommands, " ".join(prose)


missing, phantom, commands = [], [], 0
all_options = set()
mentions = []
todo = [[]]
while todo:
    path = todo.pop()
    commands += 1
    options, subs, prose = sections(help_of(path))
    all_options |= options
    for o in sorted(options - {"--help", "--version"}):
        if o not in doc:
            missing.append(f"aquifer {' '.join(path)} {o}")
    for m in re.findall(r"(?<![\w-])--[a-z][\w-]+", prose):
        mentions.append((" ".join(path), m))
    for s in subs:
        if path and s == path[-1]:
            continue
        if len(path) < 4:
            todo.append(path + [s])
        if path and f"aquifer {' '.join(path)} {s}" not in doc and f"{' '.join(path)} {s}" not in doc:
            missing.append(f"aquifer {' '.join(path)} {s} (the command)")
for where, m in mentions:
    if m not in all_options:
        phantom.append(f"aquifer {where}: its help names {m}, which no command takes")

print(f"{commands} commands, {len(all_options)} distinct long options checked against docs/cli.md")
for line in missing:
    print("MISSING from docs/cli.md:", line)
for line in phantom:
    print("NO SUCH OPTION:", line)
sys.exit(1 if missing or phantom else 0)
