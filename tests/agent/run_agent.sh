#!/usr/bin/env bash
# tests/agent/run_agent.sh -- runs every model-style snippet in a directory through
# `moonbox run --json` and checks the outcome each one declares in its header comment.
# Usage: run_agent.sh MOONBOX_BINARY DIR [OPTION...]
#   (the OPTIONs go to every run, e.g. --isolate process: the corpus in worker processes)
#
# Header lines (the leading `--` comment lines of a snippet; see README.md):
#   -- args: --seed 7 --time 1700000000 --input {"k": [1, 2]}
#        CLI options, split on blanks, except that the value of --input is the rest of the
#        line (so --input comes last); --input-file PATH is relative to DIR.
#   -- expect-status: ok | runtime_error | ...         (default: ok)
#   -- expect-value: JSON     the result's value; numbers compare exactly, integer != float
#   -- expect-stdout: TEXT    the exact captured stdout, with \n, \t and \\ escapes
#   -- expect-error: TEXT     a fragment of the error message
#   -- stock: skip (reason)   moonbox-only behaviour: not run by the stock-Lua cross-check
# Prints one line per failure (expected vs actual) and exits 1 if any snippet failed.
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 MOONBOX_BINARY DIR [OPTION...]" >&2
  exit 2
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "FAIL: python3 not found" >&2
  exit 1
fi
exec python3 - "$@" <<'PYTHON'
import glob, json, os, subprocess, sys

moonbox, snippet_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
extra_args = sys.argv[3:]


def parse_header(path):
    """The declared args and expectations from the snippet's leading comment lines."""
    header = {"args": [], "status": "ok"}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("--"):
                break
            body = line[2:].lstrip().rstrip("\r\n")
            key, sep, value = body.partition(":")
            if key == "stock" and sep:
                header["stock_skip"] = value.strip()
            if not sep or not key.startswith(("args", "expect-")):
                continue
            # One blank after the colon separates; expect-stdout keeps any further blanks.
            value = value[1:] if value.startswith(" ") else value
            value = value.rstrip("\r\n") if key == "expect-stdout" else value.strip()
            if key == "args":
                header["args"] = split_args(value)
            elif key == "expect-status":
                header["status"] = value
            elif key == "expect-value":
                header["value"] = value
            elif key == "expect-stdout":
                header["stdout"] = unescape(value)
            elif key == "expect-error":
                header["error"] = value
    return header


def split_args(text):
    args, rest = [], text
    while rest:
        word, _, rest = rest.strip().partition(" ")
        if word == "--input":
            args += [word, rest.strip()]
            break
        if word == "--input-file":
            name, _, rest = rest.strip().partition(" ")
            args += [word, os.path.join(snippet_dir, name)]
            continue
        if word:
            args.append(word)
    return args


def unescape(text):
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out.append({"n": "\n", "t": "\t", "\\": "\\"}.get(text[i + 1], "\\" + text[i + 1]))
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def strict_equal(a, b):
    """JSON equality where 1 and 1.0 and true differ, as they do for a Lua caller."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return a == b and str(a) == str(b)  # keeps -0.0 apart from 0.0
    return a == b


def compact(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def check(path):
    """The list of failures of one snippet (empty when it behaves as declared)."""
    name = os.path.basename(path)
    header = parse_header(path)
    if "value" not in header and "stdout" not in header and "error" not in header:
        return ["%s: header declares no expect-value, expect-stdout or expect-error" % name]
    cmd = [moonbox, "run", "--json"] + extra_args + header["args"] + [name]
    try:
        proc = subprocess.run(cmd, cwd=snippet_dir, capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        return ["%s: moonbox did not finish within 60 s" % name]
    if proc.returncode < 0 or proc.returncode >= 128:
        return ["%s: moonbox died (exit %d): %s" % (name, proc.returncode, proc.stderr[-500:])]
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        return ["%s: no JSON result (exit %d): stdout %r stderr %r"
                % (name, proc.returncode, proc.stdout[:300], proc.stderr[:300])]
    failures = []
    error_message = (result.get("error") or {}).get("message")
    if result.get("status") != header["status"]:
        failures.append("%s: status: expected %s, got %s (error: %s)"
                        % (name, header["status"], result.get("status"), error_message))
    if "value" in header:
        expected = json.loads(header["value"])
        if not strict_equal(expected, result.get("value")):
            failures.append("%s: value:\n    expected %s\n    actual   %s"
                            % (name, compact(expected), compact(result.get("value"))))
    if "stdout" in header and result.get("stdout") != header["stdout"]:
        failures.append("%s: stdout:\n    expected %r\n    actual   %r"
                        % (name, header["stdout"], result.get("stdout")))
    if "error" in header and (error_message is None or header["error"] not in error_message):
        failures.append("%s: error: expected a message containing %r, got %r"
                        % (name, header["error"], error_message))
    return failures


snippets = sorted(glob.glob(os.path.join(snippet_dir, "[0-9][0-9]_*.lua")))
if not snippets:
    print("FAIL: no snippets in %s" % snippet_dir)
    sys.exit(1)
# MBX_AGENT_STOCK=1: the "moonbox" is stock_moonbox.sh (stock lua5.4); moonbox-only snippets
# (header `-- stock: skip (reason)`) are left out.
stock_mode = os.environ.get("MBX_AGENT_STOCK") == "1"
if stock_mode:
    snippets = [p for p in snippets if "stock_skip" not in parse_header(p)]
failed = 0
for path in snippets:
    failures = check(path)
    for line in failures:
        print("FAIL " + line)
    failed += bool(failures)
print("%d of %d agent snippets passed" % (len(snippets) - failed, len(snippets)))
sys.exit(1 if failed else 0)
PYTHON
