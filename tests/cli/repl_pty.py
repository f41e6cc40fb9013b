#!/usr/bin/env python3
"""tests/cli/repl_pty.py -- `moonbox repl` on a terminal (a pseudo-terminal): the banner and
prompts, Ctrl-C stopping a running entry (which is undone) without ending the session, Ctrl-C
dropping a half-typed line, UTF-8 typed in, and Ctrl-D (typed ahead while an entry runs)
leaving with exit 0.

Usage: repl_pty.py PATH-TO-MOONBOX. Each wait allows 20 s: it checks "happened", never speed.
"""
import os
import pty
import select
import sys
import time

WAIT = 20.0


def main(moonbox):
    pid, fd = pty.fork()
    if pid == 0:
        env = dict(os.environ, LANG="C.UTF-8", LC_ALL="C.UTF-8")
        os.execve(moonbox, [moonbox, "repl", "--timeout", "0", "--instructions", "0"], env)
    seen = b""

    def wait_for(text, what):
        nonlocal seen
        deadline = time.monotonic() + WAIT
        while text not in seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SystemExit(f"FAIL {what}: {text!r} did not come; the terminal showed {seen[-400:]!r}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    chunk = b""
                if not chunk:
                    raise SystemExit(f"FAIL {what}: the session ended; it showed {seen[-400:]!r}")
                seen += chunk
        # What comes later is matched after this point only.
        found = seen.index(text) + len(text)
        seen = seen[found:]

    wait_for(b"Ctrl-D leaves", "the banner")
    wait_for(b"> ", "the first prompt")
    os.write(fd, b"x = 41\n")
    wait_for(b"> ", "the prompt after an entry")
    os.write(fd, b"while true do x = 0 end\n")
    wait_for(b"while true do x = 0 end\r\n", "the entry taken")
    time.sleep(0.2)
    os.write(fd, b"\x03")
    wait_for(b"interrupted", "Ctrl-C stopping the entry")
    if os.environ.get("MBX_NO_CHECKPOINTS"):
        # The asan build resets the session instead of rewinding it: x is set again.
        wait_for(b"starts afresh", "the session reset")
        wait_for(b"> ", "the prompt after Ctrl-C")
        os.write(fd, b"x = 41\n")
    else:
        wait_for(b"the entry was undone", "the entry undone")
    wait_for(b"> ", "the prompt after Ctrl-C")
    os.write(fd, b"abc def")
    wait_for(b"abc def", "the half-typed line echoed")
    os.write(fd, b"\x03")
    wait_for(b"> ", "a new prompt after Ctrl-C on a half-typed line")
    os.write(fd, b"x + 1\n")
    wait_for(b"42", "x kept its value from before the interrupted entry")
    wait_for(b"> ", "the prompt")
    # Typed UTF-8 reaches the guest as the same bytes (2 + 3 of them).
    os.write(fd, "#'\u00e9\u20ac'\n".encode())
    wait_for(b"\r\n5\r\n", "UTF-8 typed at the prompt")
    wait_for(b"> ", "the prompt")
    # Ctrl-D typed ahead, while an entry runs: the terminal is in its line mode then, which
    # keeps the end of file as a NUL byte that libedit later reads. It still leaves, once.
    os.write(fd, b"for i = 1, 3e6 do end\n")
    wait_for(b"for i = 1, 3e6 do end\r\n", "the last entry taken")
    os.write(fd, b"\x04")
    deadline = time.monotonic() + WAIT
    shown = b""
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        try:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:  # never a blocking read: the session may be waiting for input
                shown += os.read(fd, 4096)
        except OSError:
            pass
    else:
        os.kill(pid, 9)
        raise SystemExit(f"FAIL Ctrl-D: the session did not end; it showed {shown[-400:]!r}")
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        raise SystemExit(f"FAIL Ctrl-D: exit status {status}, expected 0")
    print("repl on a terminal: ok")


if __name__ == "__main__":
    main(os.path.abspath(sys.argv[1]))
