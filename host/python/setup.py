"""Installs the pure-ctypes moonbox package (pip install ./host/python).

Nothing is compiled. The build records where libmoonbox.so is, so the installed package finds
it without PYTHONPATH or environment variables: $MOONBOX_LIBRARY when set, else the
repository's own build (build/release, then build/dev). The library is not copied: the
helpers it starts (moonbox-exec, moonbox-worker) are found next to it, and a rebuilt library
is picked up without reinstalling. $MOONBOX_LIBRARY at run time still overrides the record.
"""

import os

from setuptools import setup
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


class BuildPy(build_py):
    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "moonbox", "_library_path.py")
        with open(target, "w") as f:
            f.write("# Written by setup.py when the package was built.\n")
            f.write("LIBRARY = %r\n" % find_library())


setup(cmdclass={"build_py": BuildPy})
