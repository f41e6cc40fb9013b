#!/usr/bin/env python3
"""tests/docs/test_cli_doc.py -- docs/cli.md says what the moonbox binary does (issue 27):
every option each command's `moonbox help COMMAND` lists is documented in docs/cli.md, every
option docs/cli.md documents under its own heading is one the binary takes, every command the
binary lists has a section, and the exit codes of docs/cli.md's table are the ones `moonbox
help run` states. Usage: test_cli_doc.py MOONBOX"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMANDS = ["run", "resume", "check", "mcp", "repl", "fuzz", "doctor"]


def helptext(moonbox, command):
    p = subprocess.run([moonbox, "help", command], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=30)
    if p.returncode != 0:
        raise SystemExit(f"moonbox help {command} exited {p.returncode}: {p.stdout[:300]!r}")
    return p.stdout.decode()


def main(argv):
    moonbox = os.path.abspath(argv[1])
    doc = open(os.path.join(ROOT, "docs", "cli.md"), encoding="utf-8").read()
    failures = []
    taken = set()
    for command in COMMANDS:
        text = helptext(moonbox, command)
        listed = set(re.findall(r"^\s+(--[a-z][a-z0-9-]*|-[a-z])\b", text, re.M))
        taken |= listed
        for opt in sorted(listed):
            if not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", doc):
                failures.append(f"moonbox help {command} lists {opt}; docs/cli.md never "
                                "mentions it")
        if not re.search(rf"^##+ .*`(moonbox )?{command}\b", doc, re.M) and \
                f"moonbox {command}" not in doc:
            failures.append(f"docs/cli.md has no section on moonbox {command}")
    headed = [o for line in re.findall(r"^###+ .*$", doc, re.M)
              for o in re.findall(r"`(--[a-z][a-z0-9-]*)", line)]
    for opt in headed:
        if opt not in taken:
            failures.append(f"docs/cli.md documents {opt}, which no command's help lists")
    # Exit codes: the table's codes against the help's "Exit status:" sentence.
    table = set(int(c) for c in re.findall(r"^\| (\d+)\s+\|", doc, re.M))
    stated = helptext(moonbox, "run").split("Exit status:", 1)[-1]
    said = set(int(c) for c in re.findall(r"(?<![\w.])(\d+) (?:ok|script|usage|limit|paused|"
                                          r"internal)", stated))
    if not table or table != said:
        failures.append(f"exit codes: docs/cli.md's table has {sorted(table)}, moonbox help run "
                        f"states {sorted(said)}")
    for f in failures:
        print("FAIL " + f)
    print(f"cli doc: {len(taken)} options of {len(COMMANDS)} commands checked, "
          f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
