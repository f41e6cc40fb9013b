"""The C library: finding libmoonbox, the prototypes of the functions ctypes calls (the cold
paths: policies, checkpoints, snapshots), and the extension module _moonbox (the hot path:
runs, results, values, host calls), which resolves its functions from the same loaded library.

The library is the one the CMake build made or the one installed (found as described in
find_library); every function ctypes calls is declared with its exact argument and return
types, so ctypes never guesses an int where the C API takes a size_t or a pointer.
"""

import ctypes
import os
import sys

# The public error record of include/moonbox.h (a fixed-size struct, filled without
# allocating).
class MbxError(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_int),
        ("line", ctypes.c_int),
        ("chunk", ctypes.c_char * 64),
        ("message", ctypes.c_char * 256),
    ]


MBX_API_ERROR_BASE = 100
# The statuses the binding acts on (include/moonbox.h, MBX_STATUS_MAP).
MBX_OK = 0
MBX_SANDBOX_BUSY = 105
MBX_UNSUPPORTED = 108
MBX_CAP_ISOLATE = 5  # include/moonbox.h mbx_runtime_cap
MBX_ISOLATE_NONE = 0
MBX_ISOLATE_PROCESS = 1

LIMIT_MEMORY = 1
LIMIT_INSTRUCTIONS = 2
LIMIT_TIME_MS = 3
LIMIT_OUTPUT = 4
LIMIT_SOURCE = 5
LIMIT_HOST_CALLS = 6
LIMIT_RESULT = 7

MOUNT_MODES = {"ro": 1, "rw": 2, "overlay": 4}


def _candidates():
    """Where the library may be, in order: $MOONBOX_LIBRARY; the path recorded when the
    package was installed (pip install ./host/python); the build directories of the
    repository this file lives in (running from PYTHONPATH=host/python); the system's."""
    env = os.environ.get("MOONBOX_LIBRARY")
    if env:
        yield env
        return  # an explicit choice is never second-guessed
    try:
        from . import _library_path  # written by setup.py at install time
        yield _library_path.LIBRARY
    except ImportError:
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.normpath(os.path.join(here, "..", "..", ".."))
    for preset in ("release", "dev", "asan"):
        yield os.path.join(repo, "build", preset, "libmoonbox.so")
    yield "libmoonbox.so.0"


def find_library():
    tried = []
    for path in _candidates():
        if os.path.isabs(path) and not os.path.exists(path):
            tried.append(path + " (missing)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError(
        "moonbox: libmoonbox was not found; build it (cmake --preset release && cmake --build "
        "--preset release) or set MOONBOX_LIBRARY to the path of libmoonbox.so. Tried: "
        + "; ".join(tried))


lib, library_path = find_library()

_P = ctypes.c_void_p
_E = ctypes.POINTER(MbxError)
_S = ctypes.c_size_t
_PP = ctypes.POINTER(ctypes.c_void_p)
_PS = ctypes.POINTER(ctypes.c_size_t)
_C = ctypes.c_char_p
_I = ctypes.c_int
_U64 = ctypes.c_uint64

_PROTOTYPES = {
    "mbx_version": (_C, []),
    "mbx_status_key": (_C, [_I]),
    "mbx_free": (None, [_P]),
    "mbx_runtime_new": (_P, [_E]),
    "mbx_runtime_free": (None, [_P]),
    "mbx_runtime_set_cap": (_I, [_P, _I, _U64, _E]),
    "mbx_policy_new": (_P, []),
    "mbx_policy_free": (None, [_P]),
    "mbx_policy_set_limit_checked": (_I, [_P, _I, _U64, _E]),
    "mbx_policy_get_limit": (_U64, [_P, _I]),
    "mbx_policy_set_env": (_I, [_P, _C, _C, _E]),
    "mbx_policy_set_seed": (_I, [_P, _U64, _E]),
    "mbx_policy_set_time": (_I, [_P, ctypes.c_int64, _E]),
    "mbx_policy_set_deterministic": (_I, [_P, _I, _E]),
    "mbx_policy_mount": (_I, [_P, _C, _C, _I, _E]),
    "mbx_policy_add_file": (_I, [_P, _C, _P, _S, _E]),
    "mbx_policy_add_module": (_I, [_P, _C, _P, _S, _E]),
    "mbx_policy_load_json": (_I, [_P, _P, _S, _C, _E]),
    "mbx_policy_add_external": (_I, [_P, _C, _E]),
    "mbx_sandbox_new": (_P, [_P, _P, _E]),
    "mbx_sandbox_free": (None, [_P]),
    "mbx_sandbox_paused": (_I, [_P]),
    "mbx_sandbox_interrupt": (_I, [_P]),
    "mbx_sandbox_poisoned": (_I, [_P]),
    "mbx_sandbox_reset": (_I, [_P, _E]),
    "mbx_sandbox_checkpoint": (_I, [_P, _E]),
    "mbx_sandbox_rewind": (_I, [_P, _E]),
    "mbx_sandbox_hibernate": (_I, [_P, _E]),
    "mbx_sandbox_hibernated": (_I, [_P]),
    "mbx_runtime_set_hibernate": (_I, [_P, _U64, _E]),
    "mbx_runtime_get_hibernate": (_U64, [_P]),
    "mbx_sandbox_set_stdin": (_I, [_P, _P, _S, _E]),
    "mbx_sandbox_set_stdin_fd": (_I, [_P, _I, _E]),
    "mbx_sandbox_snapshot": (_I, [_P, _PP, _PS, _E]),
    "mbx_sandbox_restore": (_P, [_P, _P, _P, _S, _E]),
    "mbx_check": (_I, [_P, _P, _S, _PP, _PS, _E]),
}

for _name, (_restype, _argtypes) in _PROTOTYPES.items():
    _fn = getattr(lib, _name)
    _fn.restype = _restype
    _fn.argtypes = _argtypes

lib.mbx_sandbox_changes.restype = _I
lib.mbx_sandbox_changes.argtypes = [_P, ctypes.c_uint, _PP, _PS, _E]


def _load_extension():
    """moonbox._moonbox: the package's own (pip install builds it), else the build tree's copy
    next to the library (cmake builds it as python/_moonbox.abi3.so, for running from
    PYTHONPATH=host/python)."""
    try:
        from . import _moonbox
        return _moonbox
    except ImportError as e:
        first = e
    import importlib.machinery
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.normpath(os.path.join(here, "..", "..", ".."))
    dirs = [os.path.join(os.path.dirname(os.path.realpath(library_path)), "python")]
    dirs += [os.path.join(repo, "build", preset, "python") for preset in ("release", "dev", "asan")]
    for d in dirs:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(d, "_moonbox" + suffix)
            if not os.path.exists(path):
                continue
            spec = importlib.util.spec_from_file_location(__package__ + "._moonbox", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sys.modules[__package__ + "._moonbox"] = module
            return module
    raise ImportError("moonbox: the extension module _moonbox is not built (%s); install the "
                      "package (pip install ./host/python) or build the CMake target "
                      "moonbox_python, which puts it in build/<preset>/python/" % first)


ext = _load_extension()


def status_key(code):
    key = lib.mbx_status_key(code)
    return key.decode() if key else "status_%d" % code


def error_message(err):
    return err.message.decode("utf-8", "replace")


del _name, _restype, _argtypes, _fn
if sys.version_info < (3, 9):
    raise ImportError("moonbox needs CPython 3.9 or later")
