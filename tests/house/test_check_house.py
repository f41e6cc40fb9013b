#!/usr/bin/env python3
"""tests/house/test_check_house.py -- tools/check-house can fail: a small tree that holds passes,
and the same tree with one violation of each rule injected fails with that rule's name.

Usage: test_check_house.py [path/to/tools/check-house]
"""

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.realpath(__file__))
SCRIPT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "tools",
                                                              "check-house")

# A house in miniature: every layer, two programs (one built from the other, one with an
# exception), and a .clang-format its files already follow.
TREE = {
    ".clang-format": "BasedOnStyle: LLVM\nIndentWidth: 2\nColumnLimit: 100\nSortIncludes: Never\n",
    "include/moonbox.h": "#include <stddef.h>\nint mbx_version_number(void);\n",
    "common/status.c": '#include "include/moonbox.h"\nint mbx_status_ok(void) { return 0; }\n',
    "common/bytes.h": '#include "include/moonbox.h"\n',
    "vm/vm.h": '#include "common/bytes.h"\n#include "vm/heap.h"\n',
    "vm/vm.c": '#include "vm/vm.h"\n',
    "vm/heap.h": "#include <stddef.h>\n",
    "vm/heap.c": '#include "vm/heap.h"\n',
    "capabilities/port.h": "#include <stdint.h>\n",
    "capabilities/hostfn.c": '#include "capabilities/port.h"\nint mbx_host_reply(void) { return 1; }\n',
    "stdlib/stdlib.h": '#include "capabilities/port.h"\n#include "vm/vm.h"\n',
    "stdlib/base.c": '#include "stdlib/stdlib.h"\nint mbxL_open_base(void);\n'
                     "static int mbx_helper(void) { return 2; }\n"
                     "int mbxL_open_base(void) { return mbx_helper(); }\n",
    "host/runtime.h": '#include "include/moonbox.h"\n#include "stdlib/stdlib.h"\n',
    "host/runtime.c": '#include "host/runtime.h"\nint mbx_version_number(void) { return 1; }\n',
    "host/backend/inproc.c": '#include "host/runtime.h"\n#include "vm/vm.h"\n',
    "host/options/CMakeLists.txt": "add_library(moonbox_options STATIC args.c)\n",
    "host/options/args.h": '#include "moonbox.h"\n',
    "host/options/args.c": '#include "host/options/args.h"\n#include "common/bytes.h"\n',
    "host/cli/CMakeLists.txt": "# house: built-from host/options\n"
                               "# house: may-include vm/heap.h -- a test of the exceptions\n",
    "host/cli/main.c": '#include <stdio.h>\n#include "host/options/args.h"\n'
                       '#include "vm/heap.h"\n#include "moonbox.h"\n',
    "host/python/moonbox.py": "import ctypes\n",
    # tests/ mirrors the sources: a test of its own, or a line saying where it is tested.
    "tests/vm/test_vm.c": "",
    "tests/common/test_status.c": "",
    "tests/vm/test_heap.c": "",
    "tests/capabilities/test_hostfn.c": "",
    "tests/stdlib/tested-in.txt": "base.c: vm/test_vm.c -- through the VM's opening\n",
    "tests/host/test_runtime.c": "",
    "tests/host/backend/tested-in.txt": "inproc.c: host/test_runtime.c -- the default backend\n",
    "tests/host/options/test_args.c": "",
    "tests/host/cli/tested-in.txt": "main.c: host/options/test_args.c -- end to end\n",
}

# One violation of each rule: (name, {file: text appended}, the rule the output must name).
INJECTIONS = [
    ("a program includes a library internal",
     {"host/cli/main.c": '#include "capabilities/port.h"\n'}, "[program-api]"),
    ("a program includes a program it is not built from",
     {"host/options/args.c": '#include "host/cli/main.h"\n', "host/cli/main.h": ""},
     "[program-api]"),
    ("a program includes host/*.h",
     {"host/options/args.c": '#include "host/runtime.h"\n'}, "[program-api]"),
    ("an exception without its why",
     {"host/cli/CMakeLists.txt": "# house: may-include vm/vm.h\n"}, "[house-decl]"),
    ("C files in a folder under host/ that is no program (no CMakeLists.txt)",
     {"host/tool/x.c": '#include "moonbox.h"\n'}, "[house-decl]"),
    ("built from a folder that is not a program",
     {"host/cli/CMakeLists.txt": "# house: built-from host/nowhere\n"}, "[house-decl]"),
    ("vm/ includes stdlib/",
     {"vm/heap.c": '#include "stdlib/stdlib.h"\n'}, "[arrow-up]"),
    ("stdlib/ includes capabilities/ beyond port.h",
     {"stdlib/base.c": '#include "capabilities/hostfn.h"\n', "capabilities/hostfn.h": ""},
     "[arrow-up]"),
    ("capabilities/ includes a Lua header",
     {"capabilities/hostfn.c": "#include <lua.h>\n"}, "[arrow-up]"),
    ("common/ includes vm/",
     {"common/bytes.h": '#include "vm/heap.h"\n'}, "[arrow-up]"),
    ("the library includes a program folder",
     {"host/runtime.c": '#include "host/options/args.h"\n'}, "[arrow-up]"),
    ("a .c and its .h close a circle in host/",
     {"host/backend/inproc.c": "", "host/runtime.c": '#include "host/backend/inproc.h"\n',
      "host/backend/inproc.h": ""}, "[include-circle]"),
    ("a circle across folders",
     {"common/bytes.c": '#include "vm/heap.h"\n', "vm/heap.c": '#include "common/bytes.h"\n',
      "common/bytes.h": "", "vm/heap.h": ""}, "[include-circle]"),
    ("an mbx_ function defined in vm/",
     {"vm/vm.c": "int mbx_run_fast(int x) {\n  return x;\n}\n"}, "[mbx-symbol]"),
    ("a source file with no test and no line saying where it is tested",
     {"vm/budget.c": '#include "vm/vm.h"\n'}, "[test-mirror]"),
    ("a tested-in line naming a test that does not exist",
     {"tests/vm/tested-in.txt": "budget.c: vm/test_nowhere.c -- gone\n",
      "vm/budget.c": '#include "vm/vm.h"\n'}, "[test-mirror]"),
    ("a file over 1,100 lines in host/",
     {"host/python/moonbox.py": "x = 1\n" * 1100}, "[file-size]"),
]
if shutil.which("clang-format-14") or shutil.which("clang-format"):
    INJECTIONS.append(("a file clang-format would change",
                       {"vm/heap.c": "int   badly_spaced ( void ) ;\n"}, "[clang-format]"))
else:
    print("note: clang-format is not installed: its rule is not tested")


def make_tree(extra):
    root = tempfile.mkdtemp(prefix="house-selftest-")
    for rel, text in TREE.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text + extra.get(rel, ""))
    for rel, text in extra.items():
        if rel not in TREE:
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
    return root


def run(root):
    p = subprocess.run([sys.executable, SCRIPT, "--root", root], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main():
    failures = 0
    root = make_tree({})
    rc, out = run(root)
    shutil.rmtree(root)
    if rc != 0:
        print("FAIL: the clean tree does not hold (exit %d):\n%s" % (rc, out))
        failures += 1
    else:
        print("ok: the clean tree holds")
    for name, extra, rule in INJECTIONS:
        root = make_tree(extra)
        rc, out = run(root)
        shutil.rmtree(root)
        first = next(iter(extra))  # the file whose line must be reported
        lines = [l for l in out.splitlines() if rule in l and l.startswith(first + ":")]
        if rc != 1 or not lines:
            print("FAIL: %s: expected exit 1 and a %s line on %s, got exit %d:\n%s" % (
                name, rule, first, rc, out))
            failures += 1
        else:
            print("ok: %s -> %s" % (name, lines[0]))
    # Inside one layer of the VM's side a .c using another's header while that one's .c uses
    # its own is Lua's coupling (lstate.c, lgc.c): that tree must still hold.
    root = make_tree({"vm/vm.c": '#include "vm/heap.h"\n', "vm/heap.c": '#include "vm/vm.h"\n',
                      "vm/vm.h": "", "vm/heap.h": ""})
    rc, out = run(root)
    shutil.rmtree(root)
    if rc != 0:
        print("FAIL: a circle inside vm/ was reported:\n%s" % out)
        failures += 1
    else:
        print("ok: a circle inside vm/ alone is not reported")
    print("%d of %d cases failed" % (failures, len(INJECTIONS) + 2))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
