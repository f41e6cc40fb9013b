-- Attack: a program holds memfds (pages no process maps: no RSS, no RLIMIT_AS) to pin host
-- memory past the exec memory limit (issue 25, 7 and 8): one process held 512 MiB under 64M.
-- Under a memory cgroup the hog is the memory limit (a result, not "could not set up the
-- sandbox"); without one memfd_create is refused.
-- expect: ok
-- exec: /usr/bin/python3
local r, err = proc.run{'python3', '-c', [[
import os
held = 0
fds = []
try:
    while held < (2048 << 20):
        fd = os.memfd_create("hog")
        os.write(fd, b"x" * (4 << 20))
        fds.append(fd)
        held += 4 << 20
    print("held", held >> 20, "MiB: ESCAPED no limit")
except OSError as e:
    print("refused after", held >> 20, "MiB:", e.strerror)
]]}
assert(r, 'the memfd hog was not a result: ' .. tostring(err))
local refused = r.limits:find('no-shared-memory', 1, true) and r.stdout:find('refused after 0 MiB')
assert(r.memory_limit or refused, 'neither the memory limit nor a refusal: ' .. r.stdout .. r.stderr)
return {memory_limit = r.memory_limit, limits = r.limits, stdout = r.stdout}
