#!/usr/bin/env python3
"""bench_python.py -- the per-call latency of "return 1+1" through the Python binding, next to
the C API's measured in the same run (bench_tiny, a C program on the same shared library).

Usage: python3 bench/bench_python.py BUILD_DIR [ITERS]
  BUILD_DIR is a release build (cmake --preset release && cmake --build --preset release):
  its libmoonbox.so is loaded through MOONBOX_LIBRARY and its bench_tiny is the C peer.
Prints medians and p99s in microseconds, and the ratios to the C API. Never a test: figures
depend on the machine (docs/performance.md records them with the peer).
"""

import os
import subprocess
import sys
import threading
import time


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


def c_peer(build, iters):
    line = subprocess.run([os.path.join(build, "bench", "bench_tiny"), str(iters)],
                          check=True, capture_output=True, text=True).stdout.split()
    return float(line[1]), float(line[2])


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    os.environ["MOONBOX_LIBRARY"] = os.path.join(build, "libmoonbox.so")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host",
                                    "python"))
    import moonbox

    rows = []
    c_before = c_peer(build, iters * 5)
    rows.append(("C API: mbx_run + mbx_result_json, one sandbox (bench_tiny)", c_before))

    with moonbox.Sandbox() as sb:
        assert sb.run("return 1+1").value == 2
        rows.append(("Python, main thread: sb.run (runs on the sandbox's thread, Ctrl-C safe)",
                     timed(lambda: sb.run("return 1+1"), iters)))
    with moonbox.Sandbox(ctrl_c=False) as sb:
        rows.append(("Python, main thread, Sandbox(ctrl_c=False): sb.run on the main thread",
                     timed(lambda: sb.run("return 1+1"), iters)))
        box = []
        t = threading.Thread(target=lambda: box.append(timed(lambda: sb.run("return 1+1"),
                                                             iters)))
        t.start()
        t.join()
        rows.append(("Python, other thread: sb.run (the C call on the calling thread)", box[0]))
    rows.append(("Python: moonbox.run one-liner (a new sandbox per call)",
                 timed(lambda: moonbox.run("return 1+1"), iters // 4)))
    c_after = c_peer(build, iters * 5)
    rows.append(("C API again, after the Python cases", c_after))

    peer = min(c_before[0], c_after[0])
    print("moonbox %s, Python %s, %d iterations per Python case"
          % (moonbox.version(), sys.version.split()[0], iters))
    print("%-78s %9s %9s %7s" % ("case", "p50 us", "p99 us", "x C"))
    for name, (p50, p99) in rows:
        print("%-78s %9.2f %9.2f %7.1f" % (name, p50, p99, p50 / peer))


if __name__ == "__main__":
    main()
