-- expect: ok
-- mounts: /data=tree:ro
-- Attack: leave a read-only mount through symlinks planted in it by the host side: absolute,
-- relative "../", a chain of three, a directory link, "sub/../../", /proc/self/root and
-- /proc/self/cwd magic links, a link to a device. Everything outside the mount holds
-- "ESCAPED", so any byte read from there fails the test; stat and list must not see it
-- either. A link that stays inside the mount is followed (openat2 RESOLVE_BENEATH).
local links = {"abs_link", "rel_link", "chain1", "dir_link/secret", "dotdot_link",
               "proc_root/etc/passwd", "proc_root", "proc_cwd", "dev_link",
               "../outside/secret", "sub/../../outside/secret"}
for _, name in ipairs(links) do
  local path = "/data/" .. name
  local f, msg, errno = io.open(path)
  if f then
    print("ESCAPED: opened " .. path .. ": " .. tostring(f:read("a")))
  else
    assert(type(msg) == "string" and type(errno) == "number", path)
    assert(not msg:find("/tmp/mbx_escape", 1, true), "a host path in the message: " .. msg)
  end
  local st = fs.stat(path)
  if st and st.type == "file" then print("ESCAPED: stat saw a file at " .. path) end
  local ok, err = pcall(function() for l in io.lines(path) do print("ESCAPED: " .. l) end end)
  assert(not ok and type(err) == "string")
end
assert(fs.list("/data/dir_link") == nil, "listed a directory outside the mount")
assert(fs.list("/data/proc_root") == nil, "listed the host's root")
assert(io.open("/data/inside_link"):read("a") == "below\n", "a link inside the mount")
-- The mount itself lists its own entries only.
local names = {}
for _, e in ipairs(fs.list("/data")) do names[#names + 1] = e.name end
assert(#names == 15, "entries: " .. table.concat(names, " "))
print("links refused")
