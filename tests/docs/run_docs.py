#!/usr/bin/env python3
"""tests/docs/run_docs.py -- the examples in README.md and docs/*.md, run against the built
moonbox, so that a page that drifts from the program fails the tests (tests/docs/README.md has
the rules: how a block is marked, what each kind checks, which blocks are skipped and why).

Usage: run_docs.py PATH-TO-MOONBOX [--list] [FILE.md ...]
Exits 0 when every marked block passed and the counts match tests/docs/expected.txt, 1
otherwise (each failure is printed with its file:line and what differed).
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# Pages the lead rewrites by hand are not scanned (tests/docs/README.md).
EXCLUDED = {"docs/performance.md", "docs/SECURITY-MODEL.md"}
# A fence in one of these languages must be marked: run it, or skip it with a reason.
RUNNABLE_LANGS = {"sh", "bash", "shell", "console", "lua"}
MARK_RE = re.compile(r"^<!--\s*test:(.*?)-->\s*$")
FENCE_RE = re.compile(r"^(```+)\s*([A-Za-z0-9_+-]*)\s*$")
# key="value with \" escapes", key='raw value', key=bare, or the kind (a bare word).
TOKEN_RE = re.compile(r"""(?P<key>[A-Za-z][A-Za-z-]*)=(?:"(?P<dq>(?:[^"\\]|\\.)*)"|'(?P<sq>[^']*)'|"""
                      r"""(?P<bare>\S+))|(?P<word>\S+)""")
# Bare words a marker may hold after its kind.
FLAGS = {"continues"}
COMMAND_TIMEOUT = 60  # seconds: "did not hang", never a speed check


class Block:
    def __init__(self, path, line, lang, body, mark):
        self.path, self.line, self.lang, self.body, self.mark = path, line, lang, body, mark

    def where(self):
        return f"{self.path}:{self.line}"


def unescape(text):
    """\\n, \\t, \\\\ and \\" in a marker's value."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            n = text[i + 1]
            out.append({"n": "\n", "t": "\t", "\\": "\\", '"': '"'}.get(n, "\\" + n))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_mark(text):
    """'KIND key=value ...' (shell quoting) into (kind, {key: [values]}), or (skip, reason)."""
    text = text.strip()
    if text == "skip" or text.startswith("skip "):
        return "skip", {"reason": [text[4:].strip()]}
    attrs, kind = {}, None
    for m in TOKEN_RE.finditer(text):
        if m.group("key"):
            value = m.group("dq") if m.group("dq") is not None else m.group("sq")
            if value is None:
                value = m.group("bare")
            attrs.setdefault(m.group("key"), []).append(
                unescape(value) if m.group("dq") is not None else value)
        elif m.group("word") in FLAGS:
            attrs.setdefault("flags", []).append(m.group("word"))
        elif kind is None:
            kind = m.group("word")
        else:
            raise ValueError(f"a second kind '{m.group('word')}' in the marker")
    return kind, attrs


def scan(path):
    """Every fenced block of a page, with the marker right above it (blank lines allowed)."""
    lines = open(os.path.join(ROOT, path), encoding="utf-8").read().split("\n")
    blocks, i, mark = [], 0, None
    while i < len(lines):
        m = MARK_RE.match(lines[i])
        if m:
            mark = (i + 1, m.group(1))
            i += 1
            continue
        f = FENCE_RE.match(lines[i])
        if f:
            fence, j = f.group(1), i + 1
            while j < len(lines) and not lines[j].startswith(fence):
                j += 1
            block = Block(path, i + 1, f.group(2).lower(), "\n".join(lines[i + 1 : j]), mark)
            block.earlier = [b for b in blocks if b.lang == "python" and b.mark is not None]
            blocks.append(block)
            mark, i = None, j + 1
            continue
        if lines[i].strip():
            mark = None  # a marker belongs to the block right below it
        i += 1
    return blocks


def looks_runnable(block):
    if block.lang in RUNNABLE_LANGS:
        return True
    return block.lang == "" and any(l.startswith("$ ") for l in block.body.split("\n"))


def run_shell(script, cwd, env, stdin=None):
    try:
        p = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, input=stdin,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=COMMAND_TIMEOUT)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return 124, "", f"(did not finish within {COMMAND_TIMEOUT} s)"


def line_matches(pattern, line):
    """An expected line, where '...' stands for any text."""
    parts = [re.escape(p) for p in pattern.split("...")]
    return re.fullmatch(".*".join(parts), line) is not None


def lines_match(expected, actual):
    """Expected lines against actual ones; a line that is only '...' matches any lines."""
    if not expected:
        return not actual
    if expected[0].strip() == "...":
        return any(lines_match(expected[1:], actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and line_matches(expected[0], actual[0]) and lines_match(expected[1:], actual[1:])


def transcript_steps(body):
    """'$ command' lines (continued while quotes are open or a line ends in '\\') and the
    output expected after each."""
    steps, cur = [], None
    lines = body.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            cmd = line[2:]
            while True:
                try:
                    shlex.split(cmd)
                    complete = not cmd.endswith("\\")
                except ValueError:
                    complete = False
                if complete or i + 1 >= len(lines):
                    break
                i += 1
                cmd += "\n" + lines[i]
            cur = [cmd, []]
            steps.append(cur)
        elif cur is not None:
            cur[1].append(line)
        i += 1
    for step in steps:
        while step[1] and not step[1][-1].strip():
            step[1].pop()
    return steps


def check_outcome(block, attrs, rc, out, err):
    problems = []
    want_rc = int(attrs.get("exit", ["0"])[0])
    if rc != want_rc:
        problems.append(f"exit code {rc}, expected {want_rc}")
    for want in attrs.get("stdout", []):
        if out != want:
            problems.append(f"stdout {out!r}, expected {want!r}")
    for want in attrs.get("stdout-contains", []):
        if want not in out:
            problems.append(f"stdout lacks {want!r}: {out[:300]!r}")
    for want in attrs.get("stderr", []):
        if err != want:
            problems.append(f"stderr {err!r}, expected {want!r}")
    for want in attrs.get("stderr-contains", []):
        if want not in err:
            problems.append(f"stderr lacks {want!r}: {err[:300]!r}")
    if problems:
        problems.append(f"stderr was: {err[:400]!r}")
    return problems


_doctor = None


def missing_backend(attrs, env):
    """What a block's needs=exec|worker|checkpoints lacks here (moonbox doctor), or None."""
    global _doctor
    needs = attrs.get("needs", [])
    if not needs:
        return None
    if _doctor is None:
        rc, out, _ = run_shell("moonbox doctor --json", ROOT, env)
        try:
            _doctor = json.loads(out)
        except ValueError:
            _doctor = {}
    for need in needs:
        if need == "checkpoints":
            # The asan build has none (MBX_ARENA_MALLOC; ctest sets MBX_NO_CHECKPOINTS there).
            if env.get("MBX_NO_CHECKPOINTS"):
                return "this build has no checkpoints (MBX_ARENA_MALLOC)"
            continue
        probe = _doctor if need == "exec" else _doctor.get("worker", {})
        if not probe.get("available"):
            return f"the {need} backend is unavailable here (moonbox doctor: {probe.get('reason')})"
    return None


def run_block(block, kind, attrs, env):
    """Runs one marked block in a fresh directory; returns a list of problems."""
    work = tempfile.mkdtemp(prefix="mbx-docs-")
    # mkdtemp makes it 0700: the exec sandbox's own uid could not reach a mount below it.
    os.chmod(work, 0o755)
    try:
        for setup in attrs.get("setup", []):
            rc, out, err = run_shell(setup, work, env)
            if rc != 0:
                return [f"setup {setup!r} failed ({rc}): {err[:300]!r}"]
        if kind == "sh":
            rc, out, err = run_shell(block.body, work, env)
            return check_outcome(block, attrs, rc, out, err)
        if kind == "lua":
            with open(os.path.join(work, "example.lua"), "w", encoding="utf-8") as f:
                f.write(block.body + "\n")
            args = attrs.get("args", [""])[0]
            rc, out, err = run_shell(f"moonbox run {args} example.lua", work, env)
            return check_outcome(block, attrs, rc, out, err)
        if kind == "transcript":
            steps = transcript_steps(block.body)
            if not steps:
                return ["a transcript without a '$ ' command"]
            for cmd, expected in steps:
                # One stream, as a terminal shows the two interleaved.
                rc, out, err = run_shell("exec 2>&1\n" + cmd, work, env)
                actual = (out + err).rstrip("\n").split("\n") if (out + err).strip() else []
                if not lines_match(expected, [a.rstrip() for a in actual]):
                    return [f"$ {cmd.splitlines()[0]}\n    expected: {expected!r}\n    got:      {actual!r}"]
            return []
        if kind == "python":
            # The page's earlier python blocks first when the block builds on them
            # (continues), then the block, then the test's own driver lines (after=).
            code = [b.body for b in block.earlier] if "continues" in attrs.get("flags", []) else []
            code += [block.body] + attrs.get("after", [])
            with open(os.path.join(work, "example.py"), "w", encoding="utf-8") as f:
                f.write("\n\n".join(code) + "\n")
            py_env = dict(env)
            if env.get("MBX_PYTHON_PRELOAD"):
                # A sanitizer build: the library needs the ASan runtime loaded first in the
                # (uninstrumented) interpreter, as the python/ tests have it.
                py_env["LD_PRELOAD"] = env["MBX_PYTHON_PRELOAD"]
                py_env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=1"
            rc, out, err = run_shell("python3 example.py", work, py_env)
            return check_outcome(block, attrs, rc, out, err)
        if kind in ("policy", "policy-invalid"):
            with open(os.path.join(work, "policy.json"), "w", encoding="utf-8") as f:
                f.write(block.body + "\n")
            rc, out, err = run_shell("moonbox run --policy policy.json -e 'return 1'", work, env)
            if kind == "policy" and rc != 0:
                return [f"the policy is refused ({rc}): {err.strip()[:400]}"]
            if kind == "policy-invalid" and rc != 2:
                return [f"the policy is accepted or fails otherwise ({rc}): {err.strip()[:400]}"]
            return check_outcome(block, {"exit": [str(rc)], **attrs}, rc, out, err)
        return [f"unknown kind '{kind}' (sh, lua, python, transcript, policy, policy-invalid, skip)"]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def default_kind(block):
    if block.lang in ("sh", "bash", "shell"):
        return "sh"
    if block.lang == "lua":
        return "lua"
    if block.lang == "json":
        return "policy"
    if block.lang == "python":
        return "python"
    return "transcript"


def pages():
    found = ["README.md"] + sorted(
        "docs/" + n for n in os.listdir(os.path.join(ROOT, "docs")) if n.endswith(".md"))
    return [p for p in found if p not in EXCLUDED]


def read_expected():
    counts = {}
    with open(os.path.join(HERE, "expected.txt"), encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                path, ran, skipped = line.split()
                counts[path] = (int(ran), int(skipped))
    return counts


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    moonbox = os.path.abspath(argv[1])
    listing = "--list" in argv[2:]
    only = [a for a in argv[2:] if a != "--list"]
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(moonbox) + os.pathsep + env.get("PATH", "")
    env["MOONBOX_REPO"] = ROOT
    # The Python binding from the tree, over the library built beside the tested program.
    env["PYTHONPATH"] = os.path.join(ROOT, "host", "python") + os.pathsep + env.get("PYTHONPATH", "")
    env["MOONBOX_LIBRARY"] = os.path.join(os.path.dirname(moonbox), "libmoonbox.so")
    failures, counts = [], {}
    for path in only or pages():
        ran = skipped = 0
        for block in scan(path):
            if block.mark is None:
                if looks_runnable(block):
                    failures.append(f"{block.where()}: a {block.lang or '$ transcript'} block with no "
                                    "'<!-- test: ... -->' marker above it (mark it to run, or "
                                    "'<!-- test: skip REASON -->': tests/docs/README.md)")
                continue
            try:
                kind, attrs = parse_mark(block.mark[1])
            except ValueError as e:
                failures.append(f"{block.path}:{block.mark[0]}: bad marker: {e}")
                continue
            if kind == "skip":
                if not attrs["reason"][0]:
                    failures.append(f"{block.where()}: a skip marker needs a reason")
                skipped += 1
                continue
            kind = kind or default_kind(block)
            ran += 1
            if listing:
                print(f"{block.where()}: {kind}")
                continue
            lacking = missing_backend(attrs, env)
            if lacking:
                # As tests/exec and the isolated escape suite do: skipped where the host
                # cannot run it, never passed.
                print(f"SKIP {block.where()}: {lacking}")
                continue
            problems = run_block(block, kind, attrs, env)
            if problems:
                failures.append(f"{block.where()} ({kind}): " + "\n    ".join(problems))
        counts[path] = (ran, skipped)
    if not only:
        expected = read_expected()
        for path in sorted(set(expected) | set(counts)):
            if expected.get(path, (0, 0)) != counts.get(path, (0, 0)):
                failures.append(
                    f"{path}: {counts.get(path, (0, 0))[0]} blocks run and "
                    f"{counts.get(path, (0, 0))[1]} skipped, tests/docs/expected.txt says "
                    f"{expected.get(path, (0, 0))[0]} and {expected.get(path, (0, 0))[1]} (a marked "
                    "block vanished or was added: update expected.txt with the change)")
    for f in failures:
        print("FAIL " + f)
    total_run = sum(c[0] for c in counts.values())
    total_skip = sum(c[1] for c in counts.values())
    print(f"docs: {total_run} blocks run, {total_skip} skipped with a reason, "
          f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
