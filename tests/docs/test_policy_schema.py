#!/usr/bin/env python3
"""tests/docs/test_policy_schema.py -- docs/policy.schema.json against the policy parser
(host/policy_json.c, through `moonbox run --policy FILE`): every policy example in the docs
(the blocks marked `policy` or `policy-invalid`, tests/docs/README.md) and a corpus of good
and bad policies here must get the same verdict from both, except the listed differences
(ranges and paths, which only the library checks), each asserted so that a change on either
side shows.

Usage: test_policy_schema.py PATH-TO-MOONBOX
Needs Python's jsonschema (Debian's python3-jsonschema); exits 77 (skipped) without it.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import run_docs  # noqa: E402  (the docs' blocks and their markers)

try:
    import jsonschema
except ImportError:
    print("skipped: Python's jsonschema module is missing (apt-get install python3-jsonschema)")
    sys.exit(77)

# (what, policy, verdict): "valid" both accept, "invalid" both refuse, "library" the schema
# accepts and the library refuses (what only the library can check: ranges, paths, fractions
# that are not whole, integers written as 1.0).
CASES = [
    ("empty", {}, "valid"),
    ("upstreams (moonbox mcp reads them; the library refuses the key)",
     {"upstreams": {"memory": {"command": "npx", "args": ["-y", "server-memory"],
                               "tools": ["*"], "timeout": "30s", "max_result": "1M"}}}, "library"),
    ("an upstream without its command", {"upstreams": {"memory": {"args": []}}}, "invalid"),
    ("a url upstream with headers",
     {"upstreams": {"docs": {"url": "https://mcp.example.com/mcp",
                             "headers": {"Authorization": "Bearer x"}, "tools": ["*"]}}}, "library"),
    ("an upstream with both command and url",
     {"upstreams": {"m": {"command": "x", "url": "https://mcp.example.com/mcp"}}}, "invalid"),
    ("a url upstream with args", {"upstreams": {"m": {"url": "https://a.example/mcp", "args": []}}},
     "invalid"),
    ("a command upstream with headers", {"upstreams": {"m": {"command": "x", "headers": {}}}},
     "invalid"),
    ("an upstream with an unknown key", {"upstreams": {"m": {"command": "x", "shell": True}}},
     "invalid"),
    ("sizes as numbers and strings", {"limits": {"memory": 1048576, "output": "1M", "source": "64k"}}, "valid"),
    ("size suffixes in any case", {"limits": {"memory": "64MiB", "output": "512kb"}, "fs": {"tmp": "1G"}}, "valid"),
    ("size with a fraction", {"limits": {"memory": "1.5M"}}, "valid"),
    ("counts", {"limits": {"instructions": "1e9", "host_calls": 10}}, "valid"),
    ("count with a fraction and exponent", {"limits": {"instructions": "2.5e6"}}, "valid"),
    ("durations", {"limits": {"timeout": "1.5s"}, "exec": {"timeout": "2m"}}, "valid"),
    ("duration in milliseconds", {"limits": {"timeout": 250}}, "valid"),
    ("duration 0", {"limits": {"timeout": "0"}}, "valid"),
    ("older names", {"limits": {"time_ms": 2000}, "exec": {"timeout_ms": 5000}}, "valid"),
    ("everything", {
        "limits": {"memory": "64M", "instructions": "1e9", "timeout": "5s", "output": "1M",
                   "source": "64k", "host_calls": 1000},
        "env": {"LANG": "C.UTF-8", "EMPTY": ""}, "seed": -5, "time": 1700000000,
        "deterministic": True,
        "fs": {"mounts": [{"path": "/data", "host": "data"},
                          {"path": "/work", "host": "work", "mode": "rw"},
                          {"path": "/src", "host": "src", "mode": "overlay"}],
               "files": [{"path": "/in/a.txt", "text": "a"},
                         {"path": "/in/b.csv", "host_file": "orders.csv"}],
               "tmp": "8M", "quota": {"bytes": "16M", "files": 1000, "open_files": 64}},
        "exec": {"allow": ["/bin/sh"], "memory": "256M", "pids": 64, "output": "1M",
                 "max_runs": 10},
        "modules": {"m": "return 1"}}, "valid"),
    ("null seed and time", {"seed": None, "time": None}, "valid"),
    ("unknown top-level key", {"limit": {}}, "invalid"),
    ("unknown limit", {"limits": {"heap": "1M"}}, "invalid"),
    ("unknown mount key", {"fs": {"mounts": [{"path": "/d", "host": "data", "ro": True}]}}, "invalid"),
    ("mount mode typo", {"fs": {"mounts": [{"path": "/d", "host": "data", "mode": "wr"}]}}, "invalid"),
    ("mount mode in upper case", {"fs": {"mounts": [{"path": "/d", "host": "data", "mode": "RW"}]}}, "invalid"),
    ("mount without host", {"fs": {"mounts": [{"path": "/d"}]}}, "invalid"),
    ("mounts not an array", {"fs": {"mounts": {"path": "/d", "host": "data"}}}, "invalid"),
    ("file with text and host_file", {"fs": {"files": [{"path": "/a", "text": "x", "host_file": "orders.csv"}]}}, "invalid"),
    ("file with neither", {"fs": {"files": [{"path": "/a"}]}}, "invalid"),
    ("size with an unknown suffix", {"limits": {"memory": "12Q"}}, "invalid"),
    ("size negative", {"limits": {"memory": -1}}, "invalid"),
    ("size as a boolean", {"limits": {"memory": True}}, "invalid"),
    ("size with a blank", {"limits": {"memory": "64 M"}}, "invalid"),
    ("size '1.'", {"limits": {"memory": "1.M"}}, "invalid"),
    ("duration without a unit", {"limits": {"timeout": "5"}}, "invalid"),
    ("duration with an unknown unit", {"limits": {"timeout": "5sec"}}, "invalid"),
    ("count with a unit", {"limits": {"instructions": "1M"}}, "invalid"),
    ("timeout given twice", {"limits": {"timeout": "1s", "time_ms": 1000}}, "invalid"),
    ("exec timeout given twice", {"exec": {"timeout": "1s", "timeout_ms": 1000}}, "invalid"),
    ("env value not a string", {"env": {"A": 1}}, "invalid"),
    ("seed a string", {"seed": "42"}, "invalid"),
    ("time a float", {"time": 1.5}, "invalid"),
    ("deterministic a string", {"deterministic": "yes"}, "invalid"),
    ("module source not a string", {"modules": {"m": 1}}, "invalid"),
    ("exec.allow not an array", {"exec": {"allow": "/bin/sh"}}, "invalid"),
    ("top level an array", [], "invalid"),
    ("memory under the library's floor", {"limits": {"memory": 1000}}, "library"),
    ("source over the library's ceiling", {"limits": {"source": "1G"}}, "library"),
    ("a fraction that is no whole byte", {"limits": {"memory": "0.1k"}}, "library"),
    ("an integer written 1.0", {"limits": {"host_calls": 1.0}}, "library"),
    ("a relative virtual path", {"fs": {"mounts": [{"path": "data", "host": "data"}]}}, "library"),
    ("exec of a relative program", {"exec": {"allow": ["sh"]}}, "library"),
]


def parser_accepts(moonbox, text, setups):
    """Whether `moonbox run --policy` takes the text: True (exit 0), False (exit 2)."""
    work = tempfile.mkdtemp(prefix="mbx-schema-")
    try:
        if not setups:  # the corpus here names these; a doc example makes its own
            for name in ("data", "work", "src"):
                os.mkdir(os.path.join(work, name))
            with open(os.path.join(work, "orders.csv"), "w") as f:
                f.write("id\n")
        for setup in setups:
            subprocess.run(["bash", "-c", setup], cwd=work, check=True,
                           env={**os.environ, "MOONBOX_REPO": ROOT})
        with open(os.path.join(work, "policy.json"), "w", encoding="utf-8") as f:
            f.write(text)
        p = subprocess.run([moonbox, "run", "--policy", "policy.json", "-e", "return 1"],
                           cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        if p.returncode not in (0, 2):
            raise RuntimeError(f"moonbox exited {p.returncode}: {p.stderr.decode()[:300]}")
        return p.returncode == 0, p.stderr.decode("utf-8", "replace").strip()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv):
    moonbox = os.path.abspath(argv[1])
    schema = json.load(open(os.path.join(ROOT, "docs", "policy.schema.json"), encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    failures, checked = [], 0

    def verdicts(what, text, setups, want):
        nonlocal checked
        checked += 1
        try:
            doc = json.loads(text)
        except ValueError as e:
            failures.append(f"{what}: not JSON: {e}")
            return
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
        schema_ok = not errors
        lib_ok, lib_msg = parser_accepts(moonbox, text, setups)
        want_schema = want in ("valid", "library")
        want_lib = want == "valid"
        if schema_ok != want_schema:
            why = errors[0].message if errors else "(accepted)"
            failures.append(f"{what}: the schema {'accepts' if schema_ok else 'refuses'} it "
                            f"({why}); expected {'accept' if want_schema else 'refuse'}")
        if lib_ok != want_lib:
            failures.append(f"{what}: moonbox --policy {'accepts' if lib_ok else 'refuses'} it "
                            f"({lib_msg}); expected {'accept' if want_lib else 'refuse'}")

    # Every policy example of the docs.
    doc_examples = 0
    for path in run_docs.pages():
        for block in run_docs.scan(path):
            if block.mark is None:
                continue
            kind, attrs = run_docs.parse_mark(block.mark[1])
            kind = kind or (run_docs.default_kind(block) if kind != "skip" else kind)
            if kind not in ("policy", "policy-invalid"):
                continue
            doc_examples += 1
            verdicts(block.where(), block.body, attrs.get("setup", []),
                     "valid" if kind == "policy" else "invalid")
    if doc_examples == 0:
        failures.append("no policy example found in the docs (docs/policy.md has one, marked "
                        "<!-- test: policy -->)")
    fixture = os.path.join(HERE, "fixtures", "bad.json")
    verdicts("tests/docs/fixtures/bad.json", open(fixture).read(), ["mkdir d"], "invalid")
    for what, doc, want in CASES:
        verdicts(what, json.dumps(doc), [], want)
    for f in failures:
        print("FAIL " + f)
    print(f"policy schema: {checked} policies checked ({doc_examples} from the docs), "
          f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
