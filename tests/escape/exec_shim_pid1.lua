-- expect: ok
-- exec: /bin/sh
-- limits: time=10s
-- Attack: the exec shim is the sandbox's pid 1 (47417c9) and the program's parent: kill, stop
-- and terminate it from inside, read its /proc entries, leave 40 orphans sleeping, a stopped
-- one, zombies and a writer still appending to /tmp, then exit (issue 25, THREATS 8). The
-- shim must survive (the kernel drops these signals to a pid namespace's init that has no
-- handler), report the program's own exit code, kill and reap what was left, then carry /tmp
-- back with no writer running; the run must not wait for the orphans.
local r = assert(proc.run{'sh', '-c', [[
echo before > /tmp/before
i=0; while [ $i -lt 40 ]; do (sleep 30 &); i=$((i+1)); done
(sleep 30 & kill -STOP $!)
sh -c 'sleep 0.01 & sleep 0.01 & exec sleep 30' &
( (while :; do echo line-of-text >> /tmp/bg; done) & )
ls /proc/1/fd >/dev/null 2>&1 && echo "ESCAPED: the shim's fds are readable"
head -c1 /proc/1/environ >/dev/null 2>&1 && echo "ESCAPED: the shim's environ is readable"
echo "parent=$PPID"
kill -STOP $PPID; kill -TERM $PPID; kill -HUP $PPID; kill -INT $PPID; kill -KILL $PPID
sleep 0.2
echo after > /tmp/after
exit 3
]]})
assert(r.stdout:find("parent=1\n", 1, true), "the shim is pid 1: " .. r.stdout)
if r.code ~= 3 then print("ESCAPED: the program's exit code was lost: " .. tostring(r.code) .. " " .. r.stderr) end
local function slurp(p) local f = io.open(p) if not f then return nil end local s = f:read("a") f:close() return s end
assert(slurp("/tmp/before") == "before\n", "the file written first came back")
if slurp("/tmp/after") ~= "after\n" then print("ESCAPED: the copy back was lost after the signals to the shim") end
local bg = slurp("/tmp/bg")
assert(bg and #bg > 0, "the writer's file came back")
local lines = 0
for line in bg:gmatch("[^\n]*\n") do
  lines = lines + 1
  if line ~= "line-of-text\n" then print("ESCAPED: a half-written line came back") break end
end
assert(lines * 13 == #bg, "whole lines only")
-- The next run starts at once, sees no process of the last one, and gets its /tmp whole.
local r2 = assert(proc.run{'sh', '-c', 'cat /proc/[0-9]*/comm 2>/dev/null | grep -c sleep; wc -c < /tmp/bg'})
local sleeps, size = r2.stdout:match("^(%d+)\n%s*(%d+)\n$")
assert(sleeps == "0", "no sleep of the last run: " .. r2.stdout)
assert(tonumber(size) == #bg, "the next run gets the same /tmp/bg: " .. r2.stdout)
return {r.code, lines > 0}
