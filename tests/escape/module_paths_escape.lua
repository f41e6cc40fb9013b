-- expect: ok
-- mounts: /data=tree:ro
-- Attack: reach host files through the module readers (require, loadfile, dofile,
-- package.searchpath): '..' out of the view and of a mount, absolute host paths, NUL bytes,
-- templates that expand to host paths, a module file larger than the module limit, writes
-- through a module open. They read the sandbox's view only, at most 1 MiB per file.
local function refused(what, f, ...)
  local ok, r = pcall(f, ...)
  if ok and r then print("ESCAPED: " .. what .. " read something: " .. tostring(r)) end
end
for _, p in ipairs({"/etc/passwd", "../../../../etc/passwd", "/data/../../etc/passwd",
                    "/proc/self/environ", "/proc/self/cmdline", "/etc/passwd\0.lua",
                    "/usr/share/lua/5.4/argparse.lua"}) do
  refused("loadfile " .. p, loadfile, p)
  refused("dofile " .. p, dofile, p)
  refused("searchpath " .. p, package.searchpath, "x", p)
end
package.path = "/etc/?;/proc/self/?;../../../../etc/?;/data/../../etc/?"
for _, name in ipairs({"passwd", "environ", "hostname", "shadow"}) do
  refused("require " .. name, require, name)
end
-- A module one byte over the limit is refused before it is read; /tmp holds it.
local f = assert(io.open("/tmp/big.lua", "w"))
f:write(string.rep("-", (1 << 20) + 1))
f:close()
local fn, e = loadfile("/tmp/big.lua")
if fn or not tostring(e):find("at most 1048576 bytes", 1, true) then
  print("ESCAPED: a module over the size limit loaded: " .. tostring(e))
end
-- Symlinks out of a mount are not followed by module reads either (a marker file lies
-- outside: reading it would print it).
for _, l in ipairs({"abs_link", "rel_link", "chain1", "dotdot_link", "proc_root/etc/passwd",
                    "dir_link/secret", "dev_link", "fifo", "sock"}) do
  local fn = loadfile("/data/" .. l)
  if fn then pcall(fn) end
  package.path = "/data/?"
  pcall(require, l)
end
-- The mount's own files are what module reads see there.
local x = loadfile("/data/x.txt")
if x ~= nil then error("x.txt is not Lua: loadfile should fail to compile it") end
package.path = "/data/sub/?.txt"
local ok, err = pcall(require, "y")
if ok or not tostring(err):find("error loading module 'y' from file '/data/sub/y.txt'", 1, true) then
  error("require did not find the mounted file: " .. tostring(err))
end
