-- expect: ok
-- mounts: /data=tree:ro
-- Attack: make the sandbox open what is not a regular file: a FIFO with no writer (a plain
-- open would block the host thread forever, which the driver reports as a hang), a listening
-- unix socket, a link to /dev/zero (endless bytes). Each is refused without being opened.
for _, name in ipairs({"fifo", "sock"}) do
  local f, msg, errno = io.open("/data/" .. name)
  assert(f == nil and msg:find("not a regular file", 1, true) and errno == 13, tostring(msg))
  assert(fs.stat("/data/" .. name).type == "other")
  local ok = pcall(io.lines, "/data/" .. name)
  assert(not ok)
end
assert(io.open("/data/dev_link") == nil)
assert(io.open("/data/fifo", "w") == nil)
print("special files refused")
