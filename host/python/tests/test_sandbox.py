"""The Python binding end to end: runs, values, limits, host functions, pauses, snapshots,
checkpoints, threads and the static check. Run: PYTHONPATH=host/python python3 -m unittest
discover -s host/python/tests (MOONBOX_LIBRARY may name the library)."""

import gc
import json
import os
import tempfile
import threading
import time
import unittest

import moonbox
from moonbox import Limits, MoonboxError, Policy, Sandbox

# Generous bounds: the machine running the tests may be heavily loaded.
SLOW = 30.0


class RunAndValues(unittest.TestCase):
    def test_the_issue_example(self):
        with Sandbox(limits=Limits(memory="64M", instructions=10_000_000, timeout=1.0)) as sb:
            r = sb.run("print('items') return #input.items",
                       inputs={"input": {"items": [1, 2, 3]}})
        self.assertEqual(r.status, "ok")
        self.assertEqual(r.value, 3)
        self.assertEqual(r.stdout, "items\n")
        self.assertIsNone(r.error)
        self.assertGreater(r.usage["instructions"], 0)
        self.assertTrue(r.ok)

    def test_int64_is_exact_both_ways(self):
        big, small = (1 << 63) - 1, -(1 << 63)
        r = moonbox.run("return a, b, a - 1, math.type(a), 2^53 + 1, (1 << 53) + 1",
                        inputs={"a": big, "b": small})
        self.assertEqual(r.value, [big, small, big - 1, "integer", 2.0 ** 53, (1 << 53) + 1])
        self.assertIsInstance(r.value[0], int)
        self.assertIsInstance(r.value[4], float)

    def test_integers_past_int64_are_refused_not_rounded(self):
        with self.assertRaises(ValueError) as cm:
            moonbox.run("return x", inputs={"x": 1 << 63})
        self.assertIn("64 bits", str(cm.exception))
        with self.assertRaises(ValueError):
            moonbox.run("return x", inputs={"x": float("nan")})

    def test_nested_tables_none_and_json_null(self):
        data = {"a": [1, 2.5, "s", None, {"deep": [True, False, None]}], "n": None}
        r = moonbox.run("return input, input.n == json.null, input.a[4] == json.null, "
                        "{x = json.null, y = {1, json.null, 3}}", inputs={"input": data})
        self.assertEqual(r.value[0], data)
        self.assertEqual(r.value[1:3], [True, True])
        self.assertEqual(r.value[3], {"x": None, "y": [1, None, 3]})

    def test_floats_and_bytes(self):
        r = moonbox.run("return f, math.type(f), s, #s, 0.1", inputs={"f": 1.0,
                                                                      "s": b"\xff\x00a"})
        self.assertEqual(r.value, [1.0, "float", b"\xff\x00a", 3, 0.1])
        self.assertIsInstance(r.value[0], float)

    def test_values_json_cannot_hold_are_described(self):
        # A module file run as a program returns a table of functions that refers to itself.
        r = moonbox.run("local M = {} M.__index = M function M.f() end "
                        "return M, print, 0/0, 1/0, -1/0, coroutine.create(print), io.stdout")
        self.assertEqual(r.status, "ok")
        module, builtin, nan, inf, minus_inf, co, f = r.value
        self.assertEqual(module["__index"], moonbox.LuaCycle("value[1]"))
        self.assertEqual(module["f"].where, "input:1")
        self.assertIsInstance(module["f"], moonbox.LuaFunction)
        self.assertEqual(builtin, moonbox.LuaFunction("builtin"))
        self.assertNotEqual(nan, nan)
        self.assertEqual((inf, minus_inf), (float("inf"), float("-inf")))
        self.assertEqual(co, moonbox.LuaThread("suspended"))
        self.assertEqual(f.name, "FILE*")
        # The forms are reserved: a result handed back as an input is refused, not read.
        with self.assertRaises(TypeError):
            moonbox.run("return x", inputs={"x": builtin})
        with self.assertRaises(MoonboxError) as cm:
            moonbox.run("return x", inputs={"x": {"$function": "input:1"}})
        self.assertIn('{"$function": ...} is a result\'s form', str(cm.exception))

    def test_wrong_types_raise_type_errors(self):
        # Each wrong type is the caller's mistake, said in Python's terms, before anything runs.
        cases = [
            (lambda: moonbox.run(42), "code: expected Lua source as str or bytes, got int"),
            (lambda: moonbox.check(None), "code: expected Lua source as str or bytes"),
            (lambda: moonbox.run("return 1", files={"/a.txt": 123}),
             "files['/a.txt']: the contents are str or bytes, got int"),
            (lambda: moonbox.run("return 1", files=["/a.txt"]), "files: expected a dict"),
            (lambda: moonbox.run("return 1", mounts={"/d": ("./data", "rw", "x")}),
             "mounts['/d']: expected a host directory or a (directory, mode) tuple"),
            (lambda: moonbox.run("return 1", mounts={"/d": 5}), "mounts['/d']: expected"),
            (lambda: moonbox.run("return 1", env={"A": 1}), "env: names and values are str"),
            (lambda: moonbox.run("return 1", seed="42"), "seed: expected an int, got str"),
            (lambda: moonbox.run("return 1", externals="tools.fetch"),
             "externals: expected a list of names, got a single str"),
            (lambda: moonbox.run("return 1", functions={1: print}), "functions: a name is a str"),
        ]
        for call, message in cases:
            with self.assertRaises(TypeError, msg=message) as cm:
                call()
            self.assertIn(message, str(cm.exception))
        # Bytes are source too, and bytes files stay bytes.
        r = moonbox.run(b"return io.open('/a'):read('a')", files={"/a": bytearray(b"\xff")})
        self.assertEqual(r.value, b"\xff")
        with self.assertRaises(ValueError):
            moonbox.run("return 1", mounts={"/d": ("./data", "wr")})

    def test_nothing_or_several_values(self):
        self.assertIsNone(moonbox.run("local x = 1").value)
        self.assertEqual(moonbox.run("return 1, nil, 3").value, [1, None, 3])

    def test_unconvertible_inputs_name_the_path(self):
        with self.assertRaises(TypeError) as cm:
            moonbox.run("return 1", inputs={"x": {"k": object()}})
        self.assertIn("inputs.x.k", str(cm.exception))
        cyclic = []
        cyclic.append(cyclic)
        with self.assertRaises(ValueError):
            moonbox.run("return 1", inputs={"x": cyclic})
        with self.assertRaises(MoonboxError) as cm:
            moonbox.run("return 1", inputs={"print": 1})
        self.assertEqual(cm.exception.status, "invalid_input")
        self.assertIn("shadow", cm.exception.message)

    def test_errors(self):
        r = moonbox.run("local x = 1\nerror('boom')")
        self.assertEqual(r.status, "runtime_error")
        self.assertEqual(r.error["line"], 2)
        self.assertEqual(r.error["message"], "boom")
        r = moonbox.run("return = 1")
        self.assertEqual(r.status, "syntax_error")
        self.assertIsNone(r.value)


class LimitsAndPolicies(unittest.TestCase):
    def test_each_limit_ends_the_run_because_of_it(self):
        r = moonbox.run("while true do end", limits=Limits(instructions=100_000, timeout=0))
        self.assertEqual(r.status, "instruction_limit")
        r = moonbox.run("while true do end", limits=Limits(instructions=0, timeout=0.1))
        self.assertEqual(r.status, "time_limit")
        r = moonbox.run("local t = {} for i = 1, 1e8 do t[i] = i end",
                        limits={"memory": "1M", "instructions": 0, "timeout": SLOW})
        self.assertEqual(r.status, "memory_limit")
        r = moonbox.run("for i = 1, 1e6 do io.write('xxxxxxxx') end",
                        limits=Limits(output="4k", timeout=SLOW))
        self.assertEqual(r.status, "output_limit")

    def test_bad_limits_say_what_is_wrong(self):
        with self.assertRaises(ValueError) as cm:
            Limits(memory="64Q")
        self.assertIn("Limits.memory", str(cm.exception))
        with self.assertRaises(MoonboxError) as cm:
            Sandbox(limits=Limits(memory=1024))
        # In Python's words: the argument, never a C identifier.
        self.assertEqual("Limits.memory: the memory limit must be between 256k and 1T, not "
                         "1k", cm.exception.message)
        with self.assertRaises(ValueError):
            Limits(timeout=-1)
        with self.assertRaises(ValueError) as cm:
            Limits(timeout="2x")
        self.assertIn("Limits.timeout: '2x' is not a duration", str(cm.exception))

    def test_limits_take_the_vocabulary_values(self):
        # The same values every front door takes (docs/vocabulary.md); a bare number of
        # seconds stays Python's way of writing time.
        self.assertEqual(Limits(timeout="250ms")._settings()[0][1], 250)
        self.assertEqual(Limits(timeout="1.5s")._settings()[0][1], 1500)
        self.assertEqual(Limits(timeout=2)._settings()[0][1], 2000)
        self.assertEqual(Limits(instructions="1e9")._settings()[0][1], 10 ** 9)
        self.assertEqual(Limits(memory="1T")._settings()[0][1], 1 << 40)
        r = moonbox.run("while true do end", limits=Limits(timeout="100ms", instructions=0))
        self.assertEqual(r.status, "time_limit")

    def test_a_limit_poisons_until_reset(self):
        with Sandbox(limits=Limits(instructions=10_000)) as sb:
            self.assertEqual(sb.run("while true do end").status, "instruction_limit")
            self.assertTrue(sb.poisoned)
            with self.assertRaises(MoonboxError) as cm:
                sb.run("return 1")
            self.assertEqual(cm.exception.status, "sandbox_poisoned")
            sb.reset()
            self.assertEqual(sb.run("return 1").value, 1)

    def test_policy_from_file_and_overrides(self):
        with tempfile.TemporaryDirectory() as d:
            os.mkdir(os.path.join(d, "data"))
            with open(os.path.join(d, "data", "x.txt"), "w") as f:
                f.write("hello")
            path = os.path.join(d, "policy.json")
            with open(path, "w") as f:
                json.dump({"limits": {"instructions": 50000}, "env": {"MODE": "test"},
                           "fs": {"mounts": [{"path": "/data", "host": "data"}]}}, f)
            pol = Policy.from_file(path)
            r = moonbox.run("return os.getenv('MODE'), io.open('/data/x.txt'):read('a')",
                            policy=pol)
            self.assertEqual(r.value, ["test", "hello"])
            self.assertEqual(moonbox.run("while true do end", policy=pol).status,
                             "instruction_limit")
            # Arguments override the file.
            r = moonbox.run("local n = 0 for i = 1, 1e5 do n = n + i end return n", policy=pol,
                            limits=Limits(instructions=0))
            self.assertEqual(r.value, 5000050000)
            with open(path, "w") as f:
                f.write('{"limits": {"memroy": "1M"}}')
            with self.assertRaises(MoonboxError) as cm:
                Policy.from_file(path)
            self.assertIn("memroy", cm.exception.message)

    def test_mounts_and_files(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "in.csv"), "w") as f:
                f.write("a,b\n")
            r = moonbox.run("io.open('/out/w.txt', 'w'):write('written'):close() "
                            "return io.open('/in/in.csv'):read('a'), "
                            "io.open('/input/inline.txt'):read('a'), "
                            "select(2, io.open('/in/new', 'w'))",
                            mounts={"/in": (d, "ro"), "/out": (d, "rw")},
                            files={"/input/inline.txt": "inline"})
            self.assertEqual(r.status, "ok", r.error)
            self.assertEqual(r.value[:2], ["a,b\n", "inline"])
            self.assertIn("Read-only", r.value[2])
            with open(os.path.join(d, "w.txt")) as f:
                self.assertEqual(f.read(), "written")
        with self.assertRaises(ValueError):
            Sandbox(mounts={"/x": (".", "wr")})

    def test_modules(self):
        r = moonbox.run("local m, how = require('mylib.util') return m.twice(21), how, "
                        "io.open('mylib.util') == nil",
                        modules={"mylib.util": "return {twice = function(x) return 2 * x end}"})
        self.assertEqual(r.status, "ok", r.error)
        self.assertEqual(r.value, [42, ":registered:", True])
        for isolate in ("process",):
            r = moonbox.run("return (require('m'))", modules={"m": b"return 'bytes'"},
                            isolate=isolate)
            self.assertEqual(r.value, "bytes", r.error)
        with self.assertRaises(moonbox.MoonboxError):
            Sandbox(modules={"": "return 1"})

    def test_changes(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "notes.md"), "w") as f:
                f.write("one\n")
            with Sandbox(mounts={"/src": (d, "overlay")}) as sb:
                r = sb.run("local f = io.open('/src/notes.md', 'a') f:write('two\\n') f:close() "
                           "io.open('/tmp/bin', 'wb'):write('\\0\\255'):close() "
                           "os.remove('/src/notes.md.bak')")
                self.assertEqual(r.status, "ok", r.error)
                by_path = {c["path"]: c for c in r.changes}
                self.assertEqual(by_path["/src/notes.md"]["kind"], "modified")
                self.assertEqual(by_path["/src/notes.md"]["content"], "one\ntwo\n")
                self.assertEqual(by_path["/tmp/bin"]["content"], b"\x00\xff")
                self.assertNotIn("content", sb.changes(content=False)[0])
                sb.reset()
                self.assertEqual(sb.changes(), [])
            with open(os.path.join(d, "notes.md")) as f:
                self.assertEqual(f.read(), "one\n")  # the overlay never wrote the host


class HostFunctions(unittest.TestCase):
    def test_arguments_and_results_convert(self):
        seen = []

        def search(query, opts):
            seen.append((query, opts))
            return {"hits": [1, 2], "q": query, "none": None}

        r = moonbox.run("local r = tools.search('lua', {limit = 2, exact = true}) "
                        "return r.hits[2], r.q, r.none == json.null",
                        functions={"tools.search": search})
        self.assertEqual(r.value, [2, "lua", True])
        self.assertEqual(seen, [("lua", {"limit": 2, "exact": True})])

    def test_exceptions_become_catchable_lua_errors(self):
        def bad(x):
            raise ValueError("no such item: %s" % x)

        def interrupted():
            raise KeyboardInterrupt

        def unencodable():
            return object()

        r = moonbox.run("local ok, e = pcall(bad, 'x') "
                        "local ok2, e2 = pcall(interrupted) "
                        "local ok3, e3 = pcall(unencodable) return ok, e, ok2, e2, ok3, e3",
                        functions={"bad": bad, "interrupted": interrupted,
                                   "unencodable": unencodable})
        self.assertEqual(r.status, "ok")
        self.assertEqual(r.value[:4], [False, "no such item: x", False, "KeyboardInterrupt"])
        self.assertFalse(r.value[4])
        self.assertIn("cannot be passed to the guest", r.value[5])
        r = moonbox.run("bad(1)", functions={"bad": bad})
        self.assertEqual(r.status, "runtime_error")
        self.assertIn("no such item: 1", r.error["message"])

    def test_callbacks_live_as_long_as_the_sandbox(self):
        sb = Sandbox(functions={"f": lambda x: x * 2})
        gc.collect()
        self.assertEqual(sb.run("return f(21)").value, 42)
        sb.close()

    def test_reentry_from_a_callback_is_a_clear_error(self):
        holder = {}

        def again():
            return holder["sb"].run("return 1").value

        with Sandbox(functions={"again": again}) as sb:
            holder["sb"] = sb
            r = sb.run("local ok, e = pcall(again) return ok, e")
        self.assertFalse(r.value[0])
        self.assertIn("busy", r.value[1])


class PausesSnapshotsCheckpoints(unittest.TestCase):
    def test_externals_pause_and_resume(self):
        with Sandbox(externals=["fetch"]) as sb:
            r = sb.run("local a = fetch('u1') local ok, e = pcall(fetch, 'u2') "
                       "return a.body, ok, e")
            self.assertEqual(r.status, "paused")
            self.assertEqual(r.pending, {"function": "fetch", "args": ["u1"]})
            self.assertTrue(sb.paused)
            r = sb.resume({"body": "<html>"})
            self.assertEqual(r.pending, {"function": "fetch", "args": ["u2"]})
            r = sb.resume_error("404 not found")
            self.assertEqual(r.status, "ok")
            self.assertEqual(r.value, ["<html>", False, "404 not found"])
            with self.assertRaises(MoonboxError) as cm:
                sb.resume(1)
            self.assertIn("not paused", cm.exception.message)

    def test_snapshot_and_restore(self):
        with self.assertRaises(ValueError) as cm:
            Sandbox(deterministic=True)
        self.assertIn("deterministic=True needs an instruction limit: Limits(instructions=...)",
                      str(cm.exception))
        kw = dict(externals=["ask"], deterministic=True, seed=7, time=1700000000,
                  limits=Limits(instructions="1e9"))
        with Sandbox(**kw) as sb:
            r = sb.run("counter = 40 local v = ask('q') return counter + v")
            self.assertEqual(r.status, "paused")
            blob = sb.snapshot()
        self.assertIsInstance(blob, bytes)
        with Sandbox.restore(blob, **kw) as sb2:
            self.assertTrue(sb2.paused)
            self.assertEqual(sb2.resume(2).value, 42)
        with self.assertRaises(MoonboxError) as cm:
            Sandbox.restore(blob[:-3], **kw)
        self.assertEqual(cm.exception.status, "invalid_input")

    def test_checkpoint_and_rewind(self):
        with Sandbox() as sb:
            sb.run("x = 1")
            try:
                sb.checkpoint()
            except MoonboxError as e:
                if e.status == "unsupported":
                    self.skipTest("checkpoints are not in this build (%s)" % e.message)
                raise
            sb.run("x = 2")
            self.assertEqual(sb.run("return x").value, 2)
            sb.rewind()
            self.assertEqual(sb.run("return x").value, 1)


class Threads(unittest.TestCase):
    def test_interrupt_from_another_thread(self):
        with Sandbox(limits=Limits(instructions=0, timeout=0)) as sb:
            timer = threading.Timer(0.2, sb.interrupt)
            timer.start()
            started = time.monotonic()
            r = sb.run("while true do end")
            timer.join()
        self.assertEqual(r.status, "interrupted")
        self.assertLess(time.monotonic() - started, SLOW)

    def test_two_threads_on_one_sandbox(self):
        with Sandbox(limits=Limits(instructions=0, timeout=SLOW),
                     functions={"ready": lambda: ready.set()}) as sb:
            ready = threading.Event()
            results = []
            t = threading.Thread(target=lambda: results.append(
                sb.run("ready() while true do end")))
            t.start()
            self.assertTrue(ready.wait(SLOW))
            with self.assertRaises(MoonboxError) as cm:
                sb.run("return 1")
            self.assertEqual(cm.exception.status, "sandbox_busy")
            self.assertIn("one thread at a time", cm.exception.message)
            sb.interrupt()
            t.join(SLOW)
            self.assertEqual(results[0].status, "interrupted")

    def test_sandboxes_on_many_threads(self):
        out = []

        def work(i):
            with Sandbox() as sb:
                out.append(sb.run("return n * 2", inputs={"n": i}).value)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(SLOW)
        self.assertEqual(sorted(out), [i * 2 for i in range(8)])


class Check(unittest.TestCase):
    def test_check(self):
        rep = moonbox.check("local a = 1\ncount = a\nreturn fetch(url)")
        self.assertFalse(rep["ok"])
        self.assertEqual(rep["globals"], [
            {"access": "write", "line": 2, "name": "count"},
            {"access": "read", "line": 3, "name": "fetch"},
            {"access": "read", "line": 3, "name": "url"}])
        rep = moonbox.check("return fetch(url)", externals=["fetch"], inputs={"url": "x"})
        self.assertEqual(rep, {"globals": [], "ok": True, "syntax_error": None})
        rep = moonbox.check("x = = 1")
        self.assertEqual(rep["syntax_error"]["line"], 1)
        with self.assertRaises(MoonboxError) as cm:
            moonbox.check("return 1 + 1", limits=Limits(source=4))
        self.assertEqual(cm.exception.status, "source_too_large")


def _workers_below(pid):
    """[(pid, resident bytes)] of the moonbox-worker processes below pid (from /proc)."""
    procs = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                stat = f.read()
            with open("/proc/%s/status" % name) as f:
                rss = [int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:")]
        except OSError:
            continue  # it ended meanwhile
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        procs[int(name)] = (ppid, comm, rss[0] if rss else 0)
    below, grew = {pid}, True
    while grew:
        grew = False
        for p, (ppid, _, _) in procs.items():
            if ppid in below and p not in below:
                below.add(p)
                grew = True
    return [(p, rss) for p, (_, comm, rss) in procs.items()
            if p != pid and p in below and comm == "moonbox-worker"]


class Isolation(unittest.TestCase):
    def test_isolate_process_gives_the_in_process_results(self):
        funcs = {"add": lambda a, b: a + b}
        code = ('print("out") local t = {} for i = 1, 100 do t[i] = i * i end '
                'return add(t[10], 1), os.getenv("K"), io.open("/in/x.txt"):read("a")')
        kw = dict(functions=funcs, env={"K": "v"}, files={"/in/x.txt": "file"})
        with Sandbox(isolate="process", **kw) as a, Sandbox(isolate="none", **kw) as b:
            ra, rb = a.run(code), b.run(code)
            self.assertEqual(ra.status, "ok")
            self.assertEqual((ra.value, ra.stdout), ([101, "v", "file"], "out\n"))
            self.assertEqual((ra.status, ra.value, ra.stdout, ra.usage["instructions"]),
                             (rb.status, rb.value, rb.stdout, rb.usage["instructions"]))
            self.assertEqual(a.run("error('boom')").error["message"],
                             b.run("error('boom')").error["message"])

    def test_the_sandbox_lives_in_a_worker_process(self):
        # The guest heap is resident in a moonbox-worker below this process, not in it: one
        # worker holds 8 MiB more than the leanest of them (the zygote and the warm workers;
        # under ASan every worker starts with megabytes of its own).
        def holders():
            workers = _workers_below(os.getpid())
            base = min(rss for _, rss in workers) if workers else 0
            return [w for w in workers if w[1] >= base + (7 << 20)], workers
        with Sandbox(isolate="process", limits=Limits(memory="64M")) as sb:
            r = sb.run('big = string.rep("x", 8 << 20) return #big')
            self.assertEqual(r.value, 8 << 20)
            held, workers = holders()
            self.assertEqual(len(held), 1, workers)
            self.assertGreaterEqual(len(workers), 2, workers)  # the zygote and this one
        with Sandbox() as local:
            local.run('big = string.rep("x", 8 << 20)')
            self.assertEqual(holders()[0], [])

    def test_bad_isolate_values_say_what_is_wrong(self):
        for bad in ("proc", "", 1, True):
            with self.assertRaises(ValueError) as cm:
                Sandbox(isolate=bad)
            self.assertIn("expected 'none'", str(cm.exception))
        self.assertEqual(moonbox.run("return 2", isolate="process").value, 2)
        self.assertTrue(moonbox.check("return x", isolate="process")["ok"] in (True, False))


class Stdin(unittest.TestCase):
    def test_bytes_and_str_are_read_and_read_again_after_a_reset(self):
        with Sandbox() as sb:
            self.assertIsNone(sb.run("return io.read()").value)  # nothing given: empty
            sb.set_stdin("one\ntwo\n")
            self.assertEqual(sb.run("return io.read()").value, "one")
            sb.reset()  # (rewind too, where the build has checkpoints)
            self.assertEqual(sb.run("return io.read('a')").value, "one\ntwo\n")
            sb.set_stdin(b"\x00\xff")
            self.assertEqual(sb.run("return #io.read('a')").value, 2)

    def test_a_pipe_is_read_only_as_the_guest_reads_it(self):
        r, w = os.pipe()
        with os.fdopen(r, "rb") as reader, Sandbox(limits=Limits(timeout=0.5)) as sb:
            sb.set_stdin(reader)
            # The writer never wrote: a script that does not read returns at once.
            self.assertEqual(sb.run("return 1").value, 1)
            # One that waits ends at its time limit, not by itself (a limit poisons the
            # sandbox: reset, the descriptor is still the stdin).
            self.assertEqual(sb.run("return io.read()").status, "time_limit")
            sb.reset()
            os.write(w, b"late\n")
            os.close(w)
            self.assertEqual(sb.run("return io.read()").value, "late")

    def test_messages_name_the_python_api_not_the_c_one(self):
        with Sandbox(limits=Limits(instructions=1000)) as sb:
            self.assertEqual(sb.run("while true do end").status, "instruction_limit")
            with self.assertRaises(MoonboxError) as cm:
                sb.run("return 1")
            self.assertIn("sb.reset()", str(cm.exception))
            self.assertNotIn("mbx_", str(cm.exception))

    def test_wrong_types_are_type_errors(self):
        with Sandbox() as sb:
            for bad in (1.5, None, [b"x"], True):
                with self.assertRaises(TypeError):
                    sb.set_stdin(bad)
            with self.assertRaises(ValueError):
                sb.set_stdin(-1)


@unittest.skipUnless(hasattr(moonbox, "version"), "no version")
class Library(unittest.TestCase):
    def test_version_and_path(self):
        self.assertRegex(moonbox.version(), r"^\d+\.\d+\.\d+")
        self.assertTrue(os.path.exists(moonbox.library_path) or "/" not in moonbox.library_path)


if __name__ == "__main__":
    unittest.main()
