"""Sandbox, Limits, Policy, Result: the Python face of include/moonbox.h."""

import ctypes
import os
import re
import threading

from . import _native
from ._native import lib, MbxError
from ._values import LuaCycle, LuaFunction, LuaThread, LuaUserdata

to_json = _native.ext.to_json  # Python value -> JSON bytes (see _values' docstring)
from_json = _native.ext.from_json  # JSON text -> Python value


# The C API's names in the library's messages, as a Python user writes them (issue 27: a
# message speaks the vocabulary of the front door that shows it).
_PY_NAMES = {
    "mbx_run_named": "sb.run()", "mbx_run": "sb.run()", "mbx_resume_error": "sb.resume_error()",
    "mbx_resume": "sb.resume()", "mbx_sandbox_reset": "sb.reset()",
    "mbx_sandbox_rewind": "sb.rewind()", "mbx_sandbox_checkpoint": "sb.checkpoint()",
    "mbx_sandbox_snapshot": "sb.snapshot()", "mbx_sandbox_restore": "Sandbox.restore()",
    "mbx_sandbox_set_stdin_fd": "sb.set_stdin()", "mbx_sandbox_set_stdin": "sb.set_stdin()",
    "mbx_sandbox_changes": "sb.changes()", "mbx_sandbox_interrupt": "sb.interrupt()",
    "mbx_sandbox_free": "sb.close()", "mbx_sandbox_new": "Sandbox()",
    "mbx_policy_set_deterministic": "Sandbox(deterministic=True)",
    "mbx_sandbox_hibernate": "sb.hibernate()",
    "mbx_runtime_set_hibernate": "moonbox.set_hibernate_after()",
}
_C_NAME = re.compile(r"\bmbx_[a-z_]+\b")


def _python_words(msg):
    return _C_NAME.sub(lambda m: _PY_NAMES.get(m.group(0), m.group(0)), msg)


class MoonboxError(Exception):
    """The library refused a call (an API status: nothing ran). .status is the status key
    ("invalid_input", "source_too_large", "sandbox_busy", ...), .code its number."""

    def __init__(self, message, status="invalid_argument", code=100):
        message = _python_words(message) if isinstance(message, str) else message
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code


_native.ext.init(lib._handle, MoonboxError, (LuaFunction, LuaThread, LuaUserdata, LuaCycle))


def _raise_for(code, err, what):
    msg = _native.error_message(err) or "%s failed" % what
    raise MoonboxError(msg, _native.status_key(code), code)


# ----------------------------------------------------------------------------------------
# The runtimes: one per process and isolation mode, thread-safe, shared by every sandbox of
# that mode (its bytecode cache and heap-slot pool, or its pool of warm workers, are what make
# a new sandbox cheap). Never freed: sandboxes may outlive any object that would own them, and
# the process's exit releases them (a worker dies with its zygote, the zygote with us).

_ISOLATE = {"none": _native.MBX_ISOLATE_NONE, "process": _native.MBX_ISOLATE_PROCESS}
_runtimes = {}
_runtime_lock = threading.Lock()


def _isolate_mode(isolate):
    if isolate is None:
        return "none"
    if isinstance(isolate, str) and isolate in _ISOLATE:
        return isolate
    raise ValueError("isolate: expected 'none' (this process, the default) or 'process' (a "
                     "jailed worker process per sandbox), got %r" % (isolate,))


def _get_runtime(isolate="none"):
    with _runtime_lock:
        rt = _runtimes.get(isolate)
        if rt is None:
            err = MbxError()
            rt = lib.mbx_runtime_new(ctypes.byref(err))
            if not rt:
                _raise_for(err.code or 107, err, "mbx_runtime_new")
            if _ISOLATE[isolate] != _native.MBX_ISOLATE_NONE:
                # MBX_CAP_ISOLATE: moonbox-worker beside the library or in libexec/moonbox (never PATH).
                rc = lib.mbx_runtime_set_cap(rt, _native.MBX_CAP_ISOLATE, _ISOLATE[isolate],
                                             ctypes.byref(err))
                if rc != _native.MBX_OK:
                    lib.mbx_runtime_free(rt)
                    _raise_for(rc, err, "isolate=%r" % isolate)
            _runtimes[isolate] = rt
        return rt


def set_hibernate_after(after):
    """Sandboxes made from now on (in this process: isolate="none") that stay idle for `after`
    -- seconds, or a duration such as '30s' or '5m'; 0 or None = never, the default -- are
    hibernated: their Lua heap is stored compressed and its memory given back, and their next
    call (run, resume, reset, ...) wakes them first, every global as it was, in microseconds
    (mbx_runtime_set_hibernate). The runtime checks for idle sandboxes when a call on any of
    its sandboxes ends, or one is made: with no calls at all, nothing is hibernated (call
    sb.hibernate() to put one to sleep now). Sandboxes with isolate="process" live in their
    own worker processes and never hibernate."""
    ms = 0 if after is None else _timeout_ms(after, "set_hibernate_after", "never")
    err = MbxError()
    _check(lib.mbx_runtime_set_hibernate(_get_runtime("none"), ms, ctypes.byref(err)), err,
           "set_hibernate_after")


def get_hibernate_after():
    """The idle time after which new sandboxes hibernate, in seconds (0.0: never)."""
    return lib.mbx_runtime_get_hibernate(_get_runtime("none")) / 1000.0


# ----------------------------------------------------------------------------------------
# Limits and policies

_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20,
               "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
               "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}


def _size(name, value):
    if isinstance(value, bool):
        raise TypeError("Limits.%s: expected bytes as an int or a string like '64M', got a bool"
                        % name)
    if isinstance(value, int):
        if value < 0:
            raise ValueError("Limits.%s: %d is negative" % (name, value))
        return value
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", value)
        if m and m.group(2).lower() in _SIZE_UNITS:
            n = float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]
            if n == int(n):
                return int(n)
        raise ValueError("Limits.%s: %r is not a size (use bytes, or a number with k, M, G or T, "
                         "e.g. '64M')" % (name, value))
    raise TypeError("Limits.%s: expected an int or a string like '64M', got %s"
                    % (name, type(value).__name__))


def _count(name, value):
    if isinstance(value, str):
        m = re.fullmatch(r"(\d+(?:\.\d+)?)(?:[eE]\+?(\d{1,3}))?", value)
        if m:
            n = float(m.group(1)) * 10 ** int(m.group(2) or 0)
            if n == int(n):
                return int(n)
        raise ValueError("Limits.%s: %r is not a count (use a whole number such as 1000000 or "
                         "'1e9')" % (name, value))
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("Limits.%s: expected a whole number >= 0 (0 = no limit), got %r"
                         % (name, value))
    return value


_DURATION_UNITS = {"ms": 1, "s": 1000, "m": 60000, "min": 60000, "h": 3600000}


def _timeout_ms(value, name="Limits.timeout", zero="no time limit"):
    """Limits.timeout (and the other durations, named name): seconds as a number (Python's
    convention for time), or a duration string as every front door writes it ('2s', '500ms',
    '1m'); 0 = zero (no time limit)."""
    if isinstance(value, str):
        m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|min|h)", value.strip().lower())
        if m:
            ms = float(m.group(1)) * _DURATION_UNITS[m.group(2)]
            if ms == int(ms):
                return int(ms)
        raise ValueError("%s: %r is not a duration (use seconds as a number, or "
                         "a string with a unit: '500ms', '2s', '1m')" % (name, value))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError("%s: expected seconds >= 0 (0 = %s) or a duration such as '2s', "
                         "got %r" % (name, zero, value))
    ms = int(round(value * 1000))
    return 1 if value > 0 and ms == 0 else ms


class Limits:
    """Per-run limits. memory/output/source/result: bytes (int, or '64M', '512k'); instructions
    and host_calls: counts (int, or '1e9'; 0 = none for instructions, no host calls for
    host_calls); timeout: seconds (a number; 0 = no time limit) or a duration ('2s', '500ms'). None keeps the library's default
    (include/moonbox.h, mbx_limit): no instruction limit (no count hook: plain Lua at stock
    speed, stopped by the timeout), which deterministic=True must set."""

    def __init__(self, memory=None, instructions=None, timeout=None, output=None, source=None,
                 host_calls=None, result=None):
        self.memory = memory
        self.instructions = instructions
        self.timeout = timeout
        self.output = output
        self.source = source
        self.host_calls = host_calls
        self.result = result
        self._settings()  # check the values now, not at the first sandbox

    def _settings(self):
        out = []
        if self.memory is not None:
            out.append((_native.LIMIT_MEMORY, _size("memory", self.memory), "memory"))
        if self.instructions is not None:
            out.append((_native.LIMIT_INSTRUCTIONS, _count("instructions", self.instructions),
                        "instructions"))
        if self.timeout is not None:
            out.append((_native.LIMIT_TIME_MS, _timeout_ms(self.timeout), "timeout"))
        if self.output is not None:
            out.append((_native.LIMIT_OUTPUT, _size("output", self.output), "output"))
        if self.source is not None:
            out.append((_native.LIMIT_SOURCE, _size("source", self.source), "source"))
        if self.host_calls is not None:
            out.append((_native.LIMIT_HOST_CALLS, _count("host_calls", self.host_calls),
                        "host_calls"))
        if self.result is not None:
            out.append((_native.LIMIT_RESULT, _size("result", self.result), "result"))
        return out

    def __repr__(self):
        fields = ("memory", "instructions", "timeout", "output", "source", "host_calls",
                  "result")
        return "Limits(%s)" % ", ".join("%s=%r" % (f, getattr(self, f)) for f in fields
                                        if getattr(self, f) is not None)


class Policy:
    """A JSON policy (docs/policy.md): limits, env, seed, time, deterministic, fs. Checked when
    made; a Sandbox loads it again into its own C policy, then applies its own arguments on
    top (they override the file's values). Host functions cannot come from JSON."""

    def __init__(self, text, base_dir=None):
        if isinstance(text, str):
            text = text.encode("utf-8")
        self.text = bytes(text)
        self.base_dir = os.path.abspath(base_dir) if base_dir else os.getcwd()
        p = lib.mbx_policy_new()
        if not p:
            raise MemoryError("mbx_policy_new")
        try:
            self._load_into(p)
        finally:
            lib.mbx_policy_free(p)

    @classmethod
    def from_file(cls, path):
        with open(path, "rb") as f:
            text = f.read()
        return cls(text, base_dir=os.path.dirname(os.path.abspath(path)))

    @classmethod
    def from_dict(cls, obj, base_dir=None):
        return cls(to_json(obj, "policy"), base_dir)

    def _load_into(self, p):
        err = MbxError()
        buf = ctypes.create_string_buffer(self.text, len(self.text))
        rc = lib.mbx_policy_load_json(p, buf, len(self.text), self.base_dir.encode(),
                                      ctypes.byref(err))
        if rc != _native.MBX_OK:
            _raise_for(rc, err, "mbx_policy_load_json")


# Frozen C policies of sandboxes made with nothing but limits, by their settings: a policy is
# only read by mbx_sandbox_new (which copies it) and is thread-safe. A few are kept for the
# life of the process (like the runtimes); past that (None), each such sandbox makes its own.
_shared_policies = {}
_SHARED_POLICIES_MAX = 32


def _shared_policy(limits):
    if limits is None:
        key = ()
    else:
        if isinstance(limits, dict):
            limits = Limits(**limits)
        if not isinstance(limits, Limits):
            raise TypeError("limits: expected a Limits or a dict of its arguments, got %s"
                            % type(limits).__name__)
        key = tuple(limits._settings())
    ptr = _shared_policies.get(key)
    if ptr is None:
        if len(_shared_policies) >= _SHARED_POLICIES_MAX:
            return None
        pol = _CPolicy(limits=limits)
        with _runtime_lock:
            ptr = _shared_policies.setdefault(key, pol.ptr)
            if ptr != pol.ptr:
                pol.free()
    return ptr


def _check(rc, err, what):
    if rc != _native.MBX_OK:
        _raise_for(rc, err, what)


def _source(code):
    """Lua source as bytes: a str (UTF-8) or bytes; anything else is a TypeError, not a
    syntax error from the guest."""
    if isinstance(code, str):
        return code.encode("utf-8")
    if isinstance(code, (bytes, bytearray, memoryview)):
        return bytes(code)
    raise TypeError("code: expected Lua source as str or bytes, got %s" % type(code).__name__)


def _mapping(value, what):
    """A keyword argument that must be a dict (None: empty)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError("%s: expected a dict, got %s" % (what, type(value).__name__))
    return value


class _CPolicy:
    """A C policy built from a Sandbox's arguments, and the callbacks it points to (kept alive
    by whoever holds this: the C side borrows them)."""

    def __init__(self, policy=None, limits=None, mounts=None, files=None, functions=None,
                 externals=None, env=None, seed=None, time=None, deterministic=False,
                 modules=None):
        self.ptr = lib.mbx_policy_new()
        if not self.ptr:
            raise MemoryError("mbx_policy_new")
        self.callbacks = []
        try:
            self._build(policy, limits, mounts, files, functions, externals, env, seed, time,
                        deterministic, modules)
        except BaseException:
            self.free()
            raise

    def _build(self, policy, limits, mounts, files, functions, externals, env, seed, time,
               deterministic, modules=None):
        err = MbxError()
        e = ctypes.byref(err)
        p = self.ptr
        if policy is not None:
            if isinstance(policy, (str, os.PathLike)):
                policy = Policy.from_file(policy)
            if isinstance(policy, dict):
                policy = Policy.from_dict(policy)
            if not isinstance(policy, Policy):
                raise TypeError("policy: expected a Policy, a dict or a path, got %s"
                                % type(policy).__name__)
            policy._load_into(p)
        if limits is not None:
            if isinstance(limits, dict):
                limits = Limits(**limits)
            if not isinstance(limits, Limits):
                raise TypeError("limits: expected a Limits or a dict of its arguments, got %s"
                                % type(limits).__name__)
            for which, value, name in limits._settings():
                rc = lib.mbx_policy_set_limit_checked(p, which, value, e)
                if rc != _native.MBX_OK:
                    raise MoonboxError("Limits.%s: %s" % (name, _native.error_message(err)),
                                       _native.status_key(rc), rc)
        for name, value in _mapping(env, "env").items():
            if not isinstance(name, str) or not isinstance(value, str):
                raise TypeError("env: names and values are str, got %s = %s"
                                % (type(name).__name__, type(value).__name__))
            _check(lib.mbx_policy_set_env(p, name.encode(), value.encode(), e), err, "env")
        if seed is not None:
            if not isinstance(seed, int) or isinstance(seed, bool):
                raise TypeError("seed: expected an int, got %s" % type(seed).__name__)
            _check(lib.mbx_policy_set_seed(p, seed & ((1 << 64) - 1), e), err, "seed")
        if time is not None:
            if not isinstance(time, (int, float)) or isinstance(time, bool):
                raise TypeError("time: expected seconds since 1970 (an int), got %s"
                                % type(time).__name__)
            _check(lib.mbx_policy_set_time(p, int(time), e), err, "time")
        if deterministic:
            _check(lib.mbx_policy_set_deterministic(p, 1, e), err, "deterministic")
            if lib.mbx_policy_get_limit(p, _native.LIMIT_INSTRUCTIONS) == 0:
                # A deterministic run ends by its instruction count, never by the clock.
                raise ValueError("deterministic=True needs an instruction limit: "
                                 "Limits(instructions=...), e.g. '1e9' (a deterministic run "
                                 "ends by its instruction count, never by the clock)")
        for virtual, spec in _mapping(mounts, "mounts").items():
            if not isinstance(virtual, str):
                raise TypeError("mounts: a virtual path is a str, got %s" % type(virtual).__name__)
            if isinstance(spec, (str, os.PathLike)):
                host, mode = spec, "ro"
            elif (isinstance(spec, (tuple, list)) and len(spec) == 2
                  and isinstance(spec[0], (str, os.PathLike))):
                host, mode = spec
            else:
                raise TypeError("mounts[%r]: expected a host directory or a (directory, mode) "
                                "tuple such as ('./data', 'rw'), got %r" % (virtual, spec))
            if mode not in _native.MOUNT_MODES:
                raise ValueError("mounts[%r]: mode %r is not 'ro', 'rw' or 'overlay'"
                                 % (virtual, mode))
            _check(lib.mbx_policy_mount(p, virtual.encode(), os.fsencode(host),
                                        _native.MOUNT_MODES[mode], e), err, "mounts")
        for virtual, data in _mapping(files, "files").items():
            if not isinstance(virtual, str):
                raise TypeError("files: a virtual path is a str, got %s" % type(virtual).__name__)
            if isinstance(data, str):
                data = data.encode("utf-8")
            elif isinstance(data, (bytes, bytearray, memoryview)):
                data = bytes(data)
            else:
                raise TypeError("files[%r]: the contents are str or bytes, got %s"
                                % (virtual, type(data).__name__))
            buf = ctypes.create_string_buffer(data, len(data))
            _check(lib.mbx_policy_add_file(p, virtual.encode(), buf, len(data), e), err,
                   "files")
        for name, source in _mapping(modules, "modules").items():
            if not isinstance(name, str):
                raise TypeError("modules: a module name is a str, got %s" % type(name).__name__)
            if isinstance(source, str):
                source = source.encode("utf-8")
            elif isinstance(source, (bytes, bytearray, memoryview)):
                source = bytes(source)
            else:
                raise TypeError("modules[%r]: the source is str or bytes, got %s"
                                % (name, type(source).__name__))
            buf = ctypes.create_string_buffer(source, len(source))
            _check(lib.mbx_policy_add_module(p, name.encode(), buf, len(source), e), err,
                   "modules")
        for name, fn in _mapping(functions, "functions").items():
            if not isinstance(name, str):
                raise TypeError("functions: a name is a str, got %s" % type(name).__name__)
            if not callable(fn):
                raise TypeError("functions[%r]: %r is not callable" % (name, fn))
            pair = (name, fn)
            rc, message = _native.ext.add_function(p, name.encode(), pair)
            if rc != _native.MBX_OK:
                raise MoonboxError(message or "functions: %r was refused" % name,
                                   _native.status_key(rc), rc)
            self.callbacks.append(pair)
        if isinstance(externals, (str, bytes)):
            raise TypeError("externals: expected a list of names, got a single %s (write "
                            "[%r])" % (type(externals).__name__, externals))
        for name in externals or ():
            if not isinstance(name, str):
                raise TypeError("externals: a name is a str, got %s" % type(name).__name__)
            _check(lib.mbx_policy_add_external(p, name.encode(), e), err, "externals")

    def free(self):
        if self.ptr:
            lib.mbx_policy_free(self.ptr)
            self.ptr = None


# ----------------------------------------------------------------------------------------
# Results

class Result(_native.ext.ResultBase):
    """One run's outcome: the result contract of include/moonbox.h as attributes.
    status: "ok", "syntax_error", "runtime_error", "memory_limit", ..., "paused";
    value: the returned value (None when nothing or on failure); stdout/stderr: str (invalid
    UTF-8 replaced; stdout_bytes/stderr_bytes are exact); error: None or a dict with chunk,
    line, message, traceback; usage: dict (usage["instructions"] is None for a run with no
    instruction limit: it ran without a count hook and nothing was counted); pending: None or
    {"function", "args"} when paused; json: the whole contract as a dict; changes: what the
    sandbox's memory /tmp and overlay mounts hold that differs from its start (a list of
    dicts: path, kind, type, size, from for renames, content as str or bytes).
    Made by the extension: status, value and the output when the run returns; json, error,
    usage and pending at their first read."""

    __slots__ = ()

    @property
    def ok(self):
        return self.status == "ok"

    @property
    def stdout(self):
        return self.stdout_bytes.decode("utf-8", "replace")

    @property
    def stderr(self):
        return self.stderr_bytes.decode("utf-8", "replace")

    def __repr__(self):
        return "Result(status=%r, value=%r)" % (self.status, self.value)


# ----------------------------------------------------------------------------------------
# Sandbox

class Sandbox(_native.ext.Core):
    """One isolated Lua state (include/moonbox.h, mbx_sandbox). Arguments:
      limits        Limits (or a dict of its arguments)
      policy        a Policy, a path to a JSON policy or a dict; the other arguments apply
                    on top of it
      mounts        {"/data": ("./data", "ro")} (or just the directory: read-only)
      files         {"/input/x.csv": "text" or b"bytes"}: read-only files
      modules       {"mylib.util": "return {...}"}: Lua modules by name, for require (found
                    before package.path's files; mbx_policy_add_module)
      functions     {"search": callable, "tools.get": callable}: synchronous host functions;
                    the guest's arguments arrive as Python values, the return value goes back
                    (None = nothing); an exception becomes a Lua error with its message
      externals     ["fetch"]: pausing functions; a run that calls one returns status
                    "paused" with r.pending, continue it with resume()/resume_error()
      env, seed, time, deterministic   as in docs/policy.md
      isolate       "none" (the default): the sandbox runs in this process; "process": in its
                    own jailed worker process (MBX_CAP_ISOLATE, docs/SECURITY-MODEL.md section
                    13), the same API and results, its files, functions and programs served
                    from here; a crash in the VM ends only the worker (status "internal_error")
      ctrl_c        True (the default): while a run made from the main thread is in C, Ctrl-C
                    (SIGINT) interrupts it (status "interrupted") instead of waiting for it
                    to end; a host function running then gets KeyboardInterrupt. False:
                    SIGINT is left to Python, which acts on it after the run returns
    Runs release the GIL: other threads run meanwhile. A sandbox is used by one thread at a
    time: a second thread's call while one runs raises MoonboxError with status
    "sandbox_busy". interrupt() may be called from any thread. run_async/resume_async run on
    the event loop's default executor, so awaiting them does not block the loop."""

    def __init__(self, limits=None, policy=None, mounts=None, files=None, functions=None,
                 externals=None, env=None, seed=None, time=None, deterministic=False,
                 ctrl_c=True, isolate=None, modules=None, _snapshot=None):
        mode = "none" if isolate is None else _isolate_mode(isolate)
        if (policy is None and mounts is None and files is None and functions is None
                and externals is None and env is None and seed is None and time is None
                and not deterministic and modules is None and _snapshot is None):
            # The common agent sandbox: a C policy made once per set of limits, shared.
            shared = _shared_policy(limits)
            if shared is not None:
                self._callbacks = ()
                self._open(_runtimes.get(mode) or _get_runtime(mode), shared, bool(ctrl_c),
                           Result)
                return
        pol = _CPolicy(policy, limits, mounts, files, functions, externals, env, seed, time,
                       deterministic, modules)
        self._callbacks = pol.callbacks  # alive as long as the sandbox: the C side borrows them
        try:
            rt = _get_runtime(mode)
            err = MbxError()
            if _snapshot is None:
                ptr = lib.mbx_sandbox_new(rt, pol.ptr, ctypes.byref(err))
            else:
                blob = bytes(_snapshot)
                buf = ctypes.create_string_buffer(blob, len(blob))
                ptr = lib.mbx_sandbox_restore(rt, pol.ptr, buf, len(blob), ctypes.byref(err))
        finally:
            pol.free()  # the sandbox copied the policy's settings
        if not ptr:
            _raise_for(err.code or 100, err,
                       "mbx_sandbox_restore" if _snapshot is not None else "mbx_sandbox_new")
        self._adopt(ptr, bool(ctrl_c), Result)

    @classmethod
    def restore(cls, snapshot, **kwargs):
        """A sandbox from sb.snapshot()'s bytes, made with the same arguments (limits, policy,
        externals, ...) as the sandbox that took it; it stands where that one stood (paused at
        the same call, or idle)."""
        return cls(_snapshot=snapshot, **kwargs)

    # -- plumbing: the extension's claim on the sandbox (one thread at a time) --

    def _simple(self, what, c_fn):
        def call(ptr):
            err = MbxError()
            _check(c_fn(ptr, ctypes.byref(err)), err, what)
        self._with(what, call)

    # -- the API (run, resume and resume_error are the extension's: Core) --

    async def run_async(self, code, inputs=None, chunk_name=None):
        """sb.run on the event loop's default executor: awaiting it leaves the loop free. A
        cancelled await interrupts the run."""
        return await self._in_executor(self.run, code, inputs, chunk_name)

    async def resume_async(self, value=None):
        """sb.resume on the event loop's default executor."""
        return await self._in_executor(self.resume, value)

    async def _in_executor(self, fn, *args):
        import asyncio
        future = asyncio.get_running_loop().run_in_executor(None, fn, *args)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            self.interrupt()
            raise

    def changes(self, content=True):
        """What the guest created, modified, renamed or removed in the memory /tmp and the
        overlay mounts since the sandbox was made or reset (mbx_sandbox_changes), sorted by
        path; content=False leaves the file contents out."""
        def call(ptr):
            out, n, err = ctypes.c_void_p(), ctypes.c_size_t(), MbxError()
            rc = lib.mbx_sandbox_changes(ptr, 1 if content else 0, ctypes.byref(out),
                                         ctypes.byref(n), ctypes.byref(err))
            _check(rc, err, "changes")
            try:
                return from_json(ctypes.string_at(out.value, n.value))
            finally:
                lib.mbx_free(out.value)
        return self._with("changes", call)

    def interrupt(self):
        """From any thread: end the current run with status "interrupted"."""
        ptr = self._ptr
        if ptr:
            lib.mbx_sandbox_interrupt(ptr)

    @property
    def paused(self):
        ptr = self._ptr
        return bool(ptr and lib.mbx_sandbox_paused(ptr))

    @property
    def poisoned(self):
        ptr = self._ptr
        return bool(ptr and lib.mbx_sandbox_poisoned(ptr))

    @property
    def hibernated(self):
        """True while the sandbox is hibernated (its heap out of memory until its next call)."""
        ptr = self._ptr
        return bool(ptr and lib.mbx_sandbox_hibernated(ptr))

    def hibernate(self):
        """Move the idle sandbox's Lua heap out of memory now (stored compressed, its pages
        given back); the next run, resume, reset, checkpoint or rewind wakes it first, byte for
        byte as it was: globals, a pending pause, the random sequence. Files, functions and the
        rest of the host side stay as they are. MoonboxError "sandbox_busy" while a call is
        active on it (e.g. from a host function of its own run), "unsupported" for
        isolate="process" and in builds without the arena (the asan preset)."""
        self._simple("hibernate", lib.mbx_sandbox_hibernate)

    def reset(self):
        self._simple("reset", lib.mbx_sandbox_reset)

    def checkpoint(self):
        """Capture the whole state (globals, /tmp, the random sequence) for rewind()."""
        self._simple("checkpoint", lib.mbx_sandbox_checkpoint)

    def rewind(self):
        self._simple("rewind", lib.mbx_sandbox_rewind)

    def set_stdin(self, source):
        """What the guest's io.stdin (io.read, io.lines()) reads from now on, from its start:
        bytes or str (copied), or an open file or socket (anything with fileno(), or an int
        descriptor), read only as the guest reads it; a wait for it counts against the run's
        time limit and interrupt() ends it. The sandbox keeps a reference to a file object
        (its descriptor must stay open) until the next set_stdin or close. What was read is
        kept (at most 64 MiB), so rewind() and reset() read it again."""
        if isinstance(source, str):
            source = source.encode("utf-8")
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = bytes(source)
            def call(ptr):
                err = MbxError()
                _check(lib.mbx_sandbox_set_stdin(ptr, data, len(data), ctypes.byref(err)), err,
                       "set_stdin")
            self._with("set_stdin", call)
            self._stdin_source = None
            return
        if isinstance(source, bool) or not (isinstance(source, int) or
                                            hasattr(source, "fileno")):
            raise TypeError("set_stdin: expected bytes, str, a file with fileno() or an int "
                            "descriptor, not %s" % type(source).__name__)
        fd = source if isinstance(source, int) else source.fileno()
        if not isinstance(fd, int) or fd < 0:
            raise ValueError("set_stdin: the descriptor must be an int >= 0, not %r" % (fd,))
        def call(ptr):
            err = MbxError()
            _check(lib.mbx_sandbox_set_stdin_fd(ptr, fd, ctypes.byref(err)), err, "set_stdin")
        self._with("set_stdin", call)
        self._stdin_source = source  # keeps a file object (and so its descriptor) alive

    def snapshot(self):
        """The portable snapshot of a paused or idle sandbox (deterministic policies only):
        bytes for Sandbox.restore."""
        def call(ptr):
            out, n, err = ctypes.c_void_p(), ctypes.c_size_t(), MbxError()
            rc = lib.mbx_sandbox_snapshot(ptr, ctypes.byref(out), ctypes.byref(n),
                                          ctypes.byref(err))
            _check(rc, err, "snapshot")
            try:
                return ctypes.string_at(out.value, n.value)
            finally:
                lib.mbx_free(out.value)
        return self._with("snapshot", call)

    def close(self):
        """Free the sandbox (MoonboxError "sandbox_busy" while a run is active); idempotent."""
        self._close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


# ----------------------------------------------------------------------------------------
# One-liners

def run(code, inputs=None, **kwargs):
    """Run code in a fresh sandbox made with kwargs (Sandbox's arguments) and return its
    Result."""
    with Sandbox(**kwargs) as sb:
        return sb.run(code, inputs=inputs)


async def run_async(code, inputs=None, **kwargs):
    """moonbox.run on the event loop's default executor: awaiting it leaves the loop free."""
    import asyncio
    return await asyncio.get_running_loop().run_in_executor(
        None, lambda: run(code, inputs=inputs, **kwargs))


def check(code, inputs=None, **kwargs):
    """The static check (mbx_check) under the policy kwargs describe: a dict
    {"ok", "syntax_error", "globals": [{"name", "line", "access"}]}. Names that are keys of
    inputs are provided (inputs are globals of the run); nothing runs."""
    kwargs.pop("ctrl_c", None)
    _isolate_mode(kwargs.pop("isolate", None))  # nothing runs: no runtime either way
    pol = _CPolicy(**kwargs)
    try:
        data = _source(code)
        buf = ctypes.create_string_buffer(data, len(data))
        out, n, err = ctypes.c_void_p(), ctypes.c_size_t(), MbxError()

        def call():
            return lib.mbx_check(pol.ptr, buf, len(data), ctypes.byref(out), ctypes.byref(n),
                                 ctypes.byref(err))

        rc = call()
        _check(rc, err, "check")
        try:
            report = from_json(ctypes.string_at(out.value, n.value))
        finally:
            lib.mbx_free(out.value)
    finally:
        pol.free()
    if inputs:
        report["globals"] = [g for g in report["globals"]
                             if not (isinstance(g["name"], str) and g["name"] in inputs)]
        report["ok"] = report["syntax_error"] is None and not report["globals"]
    return report
