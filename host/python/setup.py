"""Builds and installs the moonbox package (pip install ./host/python).

The extension module moonbox._moonbox (moonbox/_moonbox.c, moonbox/_values.c) is compiled
against the limited API, so one build serves CPython 3.9 and later (Debian: python3-dev). It
does not link libmoonbox: at import, _native.py finds the library as before and the module
resolves its functions from that one loaded copy. The build records where the library is, so
the installed package finds it without PYTHONPATH or environment variables: $MOONBOX_LIBRARY
when set, else the repository's own build (build/release, then build/dev). The library is not
copied: the helpers it starts (moonbox-exec, moonbox-worker) are found next to it, and a
rebuilt library is picked up without reinstalling. $MOONBOX_LIBRARY at run time still
overrides the record. The compiler needs include/moonbox.h: found next to the library (a build
tree's repository, or an installed prefix's include/), or through $MOONBOX_INCLUDE.
"""

import os

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def find_library():
    env = os.environ.get("MOONBOX_LIBRARY")
    if env:
        if not os.path.exists(env):
            raise SystemExit("moonbox: MOONBOX_LIBRARY=%s does not exist" % env)
        return os.path.realpath(env)
    for preset in ("release", "dev"):
        path = os.path.join(HERE, "..", "..", "build", preset, "libmoonbox.so")
        if os.path.exists(path):
            return os.path.realpath(path)
    raise SystemExit("moonbox: libmoonbox.so is not built; run `cmake --preset release && "
                     "cmake --build --preset release` in the repository first, or set "
                     "MOONBOX_LIBRARY to its path")


def find_include():
    """The folder of moonbox.h: $MOONBOX_INCLUDE, this repository's include/, else the one
    beside the library (<repo>/build/<preset>/libmoonbox.so or <prefix>/lib[/<triplet>]/)."""
    env = os.environ.get("MOONBOX_INCLUDE")
    candidates = [env] if env else []
    candidates.append(os.path.join(HERE, "..", "..", "include"))
    lib_dir = os.path.dirname(find_library())
    for up in ("../../include", "../include", "../../../include"):
        candidates.append(os.path.join(lib_dir, up))
    for d in candidates:
        if d and os.path.exists(os.path.join(d, "moonbox.h")):
            return os.path.realpath(d)
    raise SystemExit("moonbox: include/moonbox.h was not found next to the library; set "
                     "MOONBOX_INCLUDE to the folder that holds it")


class BuildPy(build_py):
    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "moonbox", "_library_path.py")
        with open(target, "w") as f:
            f.write("# Written by setup.py when the package was built.\n")
            f.write("LIBRARY = %r\n" % find_library())


setup(
    cmdclass={"build_py": BuildPy},
    ext_modules=[Extension(
        "moonbox._moonbox",
        sources=["moonbox/_moonbox.c", "moonbox/_values.c"],
        depends=["moonbox/_values.h"],
        include_dirs=[find_include()],
        define_macros=[("_GNU_SOURCE", None)],
        extra_compile_args=["-std=c11", "-fvisibility=hidden"],
        libraries=["dl", "pthread"],
        py_limited_api=True,
    )],
    options={"bdist_wheel": {"py_limited_api": "cp39"}},
)
