#!/usr/bin/env python3
"""bench_python.py -- what a call costs through the Python binding, next to the C API measured
in the same run (bench_tiny, a C program on the same shared library) and to the floor of any
binding: one empty ctypes call.

Usage: python3 bench/bench_python.py BUILD_DIR [ITERS] [--monty DIR]
  BUILD_DIR is a release build (cmake --preset release && cmake --build build/release --target
  moonbox bench_tiny): its libmoonbox.so is loaded through MOONBOX_LIBRARY, its extension
  module from BUILD_DIR/python, and its bench_tiny is the C peer.
  --monty DIR: the scratch folder where bench/peers.sh installed Monty (MBX_PEERS_DIR, default
  /tmp/moonbox-peers); Monty's binding is then measured in the same run by bench/peers/monty.mjs
  on node: 1+1 fresh (new Monty + run), live (run() again of one parsed Monty) and a host call.
Each row: median and p99 in microseconds, the C API's median for the same case, the ratio, and
the excess over the C API in floors (one empty ctypes call). The C peers and the Python cases
are measured in alternating rounds ($MOONBOX_BENCH_ROUNDS, 3), each side's best median kept. The goals of issue 28 are stated in
the last column. Never a test: figures depend on the machine (docs/performance.md records them).
"""

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import time

HOST_CALLS = 1000  # host calls per run in the host-call case
HOST_CODE = "local f = f for i = 1, %d do f(i) end" % HOST_CALLS


def stats(samples):
    samples = sorted(samples)
    return samples[len(samples) // 2], samples[len(samples) * 99 // 100]


def timed(fn, iters):
    for _ in range(iters // 10 + 1):  # warm-up, untimed
        fn()
    out = []
    clock = time.perf_counter
    for _ in range(iters):
        t0 = clock()
        fn()
        out.append((clock() - t0) * 1e6)
    return stats(out)


def c_peer(build, iters, code="return 1+1", mode="live", inputs=None):
    argv = [os.path.join(build, "bench", "bench_tiny"), str(iters), code, mode]
    if inputs:
        argv.append(inputs)
    line = subprocess.run(argv, check=True, capture_output=True, text=True).stdout.split()
    return float(line[1]), float(line[2])


def records(n=40):
    """The snippet's inputs: deterministic records, as bench_run makes them."""
    names = ["ada", "BORIS", "chen", "dana", "Emeka", "fiona", "goran", "HIRO", "ines",
             "jamal", "kiri", "Lena", "mateo", "nora", "oskar"]
    depts = ["eng", "sales", "ops", "legal", "design"]
    tags = ["remote", "lead", "new", "oncall", "parttime", "contractor"]
    seed, out = 12345, []
    for i in range(n):
        seed = (seed * 1103515245 + 12345) & 0xFFFFFFFF
        r = seed >> 8
        out.append({"id": i + 1, "name": "%s%d" % (names[r % 15], i + 1),
                    "dept": depts[(r // 15) % 5], "salary": 42000 + (r // 75) % 90 * 1000,
                    "rating": round(1.0 + (r // 7) % 400 / 100.0, 2), "active": r % 7 != 0,
                    "tags": [tags[(r // 3) % 6], tags[(r // 11) % 6]]})
    return {"records": out}


def ctypes_floor(lib, iters=200000):
    """One empty ctypes call (mbx_sandbox_paused(NULL)), averaged over a batch."""
    fn = lib.mbx_sandbox_paused
    best = None
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn(None)
        per = (time.perf_counter() - t0) / iters * 1e6
        best = per if best is None else min(best, per)
    return best


def monty(folder, iters):
    """Monty's rows from bench/peers/monty.mjs (the one Monty driver), run from the scratch
    folder where bench/peers.sh installed Monty: {name: median}."""
    peers = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers")
    for name in ("monty.mjs", "snippet.py", "records.json"):
        shutil.copy(os.path.join(peers, name), folder)
    out = subprocess.run(["node", "--expose-gc", os.path.join(folder, "monty.mjs"), str(iters)],
                         check=True, capture_output=True, text=True).stdout
    return {w[1]: float(w[2]) for w in (line.split() for line in out.splitlines())
            if len(w) == 4 and w[0] == "row"}


def main():
    args = sys.argv[1:]
    monty_dir = None
    if "--monty" in args:
        i = args.index("--monty")
        monty_dir = args[i + 1]
        del args[i:i + 2]
    if not args:
        sys.exit(__doc__)
    build = os.path.abspath(args[0])
    iters = int(args[1]) if len(args) > 1 else 20000
    rounds = int(os.environ.get("MOONBOX_BENCH_ROUNDS", "3"))
    os.environ["MOONBOX_LIBRARY"] = os.path.join(build, "libmoonbox.so")
    # MOONBOX_BENCH_PACKAGE: another copy of the package to measure instead (e.g. the binding
    # of an older commit, for a before/after in one run).
    sys.path.insert(0, os.environ.get("MOONBOX_BENCH_PACKAGE") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "host", "python"))
    import moonbox
    from moonbox import _native

    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "snippet.lua")) as f:
        snippet = f.read()
    inputs = records()
    inputs_file = os.path.join(build, "bench_python_inputs.json")
    with open(inputs_file, "w") as f:
        json.dump(inputs, f)

    def measure_round():
        floor = ctypes_floor(_native.lib)
        c = {
            "live": c_peer(build, iters * 5),
            "fresh": c_peer(build, iters, mode="fresh"),
            "host": c_peer(build, max(iters // 20, 200), HOST_CODE),
            "snippet": c_peer(build, max(iters // 20, 200), snippet, "live", inputs_file),
        }
        rows = []  # (name, (p50, p99), peer key, per-call divisor, goal)

        with moonbox.Sandbox() as sb:
            assert sb.run("return 1+1").value == 2
            rows.append(("1+1, live sandbox, defaults (ctrl_c=True)",
                         timed(lambda: sb.run("return 1+1"), iters), "live", 1, 6))
        with moonbox.Sandbox(ctrl_c=False) as sb:
            rows.append(("1+1, live sandbox, ctrl_c=False",
                         timed(lambda: sb.run("return 1+1"), iters), "live", 1, None))
            box = []
            t = threading.Thread(target=lambda: box.append(timed(lambda: sb.run("return 1+1"),
                                                                 iters)))
            t.start()
            t.join()
            rows.append(("1+1, live sandbox, from another thread", box[0], "live", 1, None))
        rows.append(("fresh sandbox + 1+1: moonbox.run(...)",
                     timed(lambda: moonbox.run("return 1+1"), iters), "fresh", 1, 8))
        with moonbox.Sandbox(functions={"f": lambda *a: 1}) as sb:
            r = sb.run(HOST_CODE)
            assert r.ok, r.error
            rows.append(("host call (a Python function), per call",
                         timed(lambda: sb.run(HOST_CODE), max(iters // 20, 200)), "host",
                         HOST_CALLS, 4))
        with moonbox.Sandbox() as sb:
            r = sb.run(snippet, inputs=inputs)
            assert r.ok, r.error
            rows.append(("the 40-line snippet (bench/snippet.lua), live sandbox",
                         timed(lambda: sb.run(snippet, inputs=inputs), max(iters // 20, 200)),
                         "snippet", 1, "1.3x"))
        with moonbox.Sandbox() as sb:
            if not hasattr(sb, "run_async"):  # an older binding
                sb.run_async = lambda code: asyncio.get_running_loop().run_in_executor(
                    None, sb.run, code)

            async def many(n):
                for _ in range(n):
                    await sb.run_async("return 1+1")

            t0 = time.perf_counter()
            asyncio.run(many(max(iters // 10, 100)))
            per = (time.perf_counter() - t0) / max(iters // 10, 100) * 1e6
            rows.append(("1+1, await sb.run_async (default executor), mean", (per, per), "live", 1,
                         None))
        c_again = c_peer(build, iters * 5)
        c["live"] = min(c["live"], c_again)
        return floor, c, rows

    # Rounds: the C peers and the Python cases alternate, and each side keeps its best median,
    # so a load that comes and goes (other builds on the machine) favours neither.
    floor, c, rows = measure_round()
    for _ in range(rounds - 1):
        f2, c2, rows2 = measure_round()
        floor = min(floor, f2)
        c = {k: min(c[k], c2[k]) for k in c}
        rows = [r if r[1][0] <= r2[1][0] else r2 for r, r2 in zip(rows, rows2)]

    print("moonbox %s, Python %s, %d iterations per case, best of %d rounds; ctypes floor (one "
          "empty call) %.3f us" % (moonbox.version(), sys.version.split()[0], iters, rounds,
                                   floor))
    print("%-56s %8s %8s %8s %6s %7s  %s" % ("case", "p50 us", "p99 us", "C us", "x C",
                                             "+floors", "goal"))
    for name, (p50, p99), key, div, goal in rows:
        cp = c[key][0] / div
        p50, p99 = p50 / div, p99 / div
        excess = (p50 - cp) / floor
        if goal is None:
            goal_text = ""
        elif isinstance(goal, str):
            goal_text = "<= %s C: %s" % (goal, "met" if p50 <= float(goal[:-1]) * cp else
                                         "NOT met")
        else:
            goal_text = "<= C + %d floors: %s" % (goal, "met" if excess <= goal else "NOT met")
        print("%-56s %8.3f %8.3f %8.3f %6.2f %7.1f  %s" % (name, p50, p99, cp, p50 / cp,
                                                          excess, goal_text))
    if monty_dir:
        m = monty(monty_dir, iters)
        print("Pydantic Monty (napi binding, same run): 1+1 parsed once %.3f us, fresh %.3f us, "
              "a host call %.0f ns" % (m["live_1p1"], m["fresh_1p1"], m["host_call"]))


if __name__ == "__main__":
    main()
